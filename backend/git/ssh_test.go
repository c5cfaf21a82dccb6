package git_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"encoding/pem"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/backend/git"
	"github.com/cairn-dev/cairn/backend/git/gittest"
)

// sshRemote serves the bare repositories under root over SSH, running the
// real git-upload-pack and git-receive-pack for the exec requests go-git
// sends, and accepts only the one client key.
type sshRemote struct {
	addr       string
	knownHosts string // a known_hosts file naming the server's key
	clientKey  string // the client's private key, PEM
}

func serveSSH(t *testing.T, root string) sshRemote {
	t.Helper()
	_, hostPriv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	hostSigner, err := ssh.NewSignerFromKey(hostPriv)
	if err != nil {
		t.Fatal(err)
	}
	clientPub, clientPriv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	allowed, err := ssh.NewPublicKey(clientPub)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(clientPriv, "")
	if err != nil {
		t.Fatal(err)
	}
	cfg := &ssh.ServerConfig{PublicKeyCallback: func(_ ssh.ConnMetadata, key ssh.PublicKey) (*ssh.Permissions, error) {
		if string(key.Marshal()) != string(allowed.Marshal()) {
			return nil, errors.New("unknown key")
		}
		return nil, nil
	}}
	cfg.AddHostKey(hostSigner)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() { serveSSHConn(c, cfg, root) })
		}
	})
	kh := filepath.Join(t.TempDir(), "known_hosts")
	line := knownhosts.Line([]string{knownhosts.Normalize(ln.Addr().String())}, hostSigner.PublicKey())
	if err := os.WriteFile(kh, []byte(line+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return sshRemote{addr: ln.Addr().String(), knownHosts: kh, clientKey: string(pem.EncodeToMemory(block))}
}

func serveSSHConn(c net.Conn, cfg *ssh.ServerConfig, root string) {
	defer c.Close()
	_, chans, reqs, err := ssh.NewServerConn(c, cfg)
	if err != nil {
		return
	}
	go ssh.DiscardRequests(reqs)
	for nc := range chans {
		if nc.ChannelType() != "session" {
			_ = nc.Reject(ssh.UnknownChannelType, "sessions only")
			continue
		}
		ch, creqs, err := nc.Accept()
		if err != nil {
			return
		}
		go func() {
			defer ch.Close()
			for req := range creqs {
				if req.Type != "exec" {
					_ = req.Reply(false, nil)
					continue
				}
				// Payload: a uint32 length, then "git-upload-pack '/repo.git'".
				cmdline := string(req.Payload[4:])
				prog, arg, _ := strings.Cut(cmdline, " ")
				if prog != "git-upload-pack" && prog != "git-receive-pack" {
					_ = req.Reply(false, nil)
					return
				}
				_ = req.Reply(true, nil)
				cmd := exec.Command("git", strings.TrimPrefix(prog, "git-"), filepath.Join(root, strings.Trim(arg, "'/")))
				cmd.Stdin, cmd.Stdout, cmd.Stderr = ch, ch, ch.Stderr()
				status := uint32(0)
				if err := cmd.Run(); err != nil {
					status = 1
				}
				_, _ = ch.SendRequest("exit-status", false, binary.BigEndian.AppendUint32(nil, status))
				return
			}
		}()
	}
}

// TestSSHRemote: the Git backend pushes to and reads from a repository
// over SSH with a key from the environment, checking the host key against
// a known_hosts file; a wrong key and an unknown host are refused.
func TestSSHRemote(t *testing.T) {
	r := gittest.NewRemote(t)
	srv := serveSSH(t, filepath.Dir(r.Path))
	url := "ssh://git@" + srv.addr + "/" + filepath.Base(r.Path)
	open := func(keyEnv, knownHosts string, env map[string]string) *git.Backend {
		t.Helper()
		return gittest.Open(t, url, map[string]any{"credentials": map[string]string{"sshKeyEnv": keyEnv, "sshKnownHostsFile": knownHosts}},
			func(k string) string { return env[k] })
	}
	ctx := context.Background()

	b := open("CAIRN_TEST_SSH_KEY", srv.knownHosts, map[string]string{"CAIRN_TEST_SSH_KEY": srv.clientKey})
	create(t, ctx, b, "00000000-0000-4000-8000-000000000001", "over-ssh", `{"enabled":true}`)
	if got := gittest.SpecOf(t, r.Show(t, "", flagPath("over-ssh"))); !strings.Contains(string(got), `"enabled": true`) {
		t.Errorf("file pushed over SSH = %s", got)
	}
	v, err := b.GetValue(ctx, cairn.GetValueRequest{InstanceID: "00000000-0000-4000-8000-000000000001", ResourceVersion: 1})
	if err != nil || !strings.Contains(string(v), `"enabled":true`) {
		t.Errorf("GetValue over SSH = %s, %v", v, err)
	}

	// Another key: refused by the server.
	_, other, _ := ed25519.GenerateKey(rand.Reader)
	block, _ := ssh.MarshalPrivateKey(other, "")
	bad := open("K", srv.knownHosts, map[string]string{"K": string(pem.EncodeToMemory(block))})
	_, err = bad.OnCreate(cairn.WithResourceMeta(ctx, flagMeta("refused", nil)), cairn.OnCreateRequest{InstanceID: "00000000-0000-4000-8000-000000000002", Value: json.RawMessage(`{}`)})
	if err == nil || !strings.Contains(err.Error(), "unable to authenticate") {
		t.Errorf("a write with a key the server does not know: %v, want an authentication failure", err)
	}

	// A known_hosts file without this server: the host is not trusted.
	empty := filepath.Join(t.TempDir(), "known_hosts")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	untrusted := open("CAIRN_TEST_SSH_KEY", empty, map[string]string{"CAIRN_TEST_SSH_KEY": srv.clientKey})
	_, err = untrusted.OnCreate(cairn.WithResourceMeta(ctx, flagMeta("untrusted", nil)), cairn.OnCreateRequest{InstanceID: "00000000-0000-4000-8000-000000000003", Value: json.RawMessage(`{}`)})
	if err == nil || !strings.Contains(err.Error(), "key is unknown") {
		t.Errorf("a write to a host missing from known_hosts: %v, want the host key refused", err)
	} else if strings.Contains(err.Error(), "PRIVATE KEY") {
		t.Errorf("the error shows the key: %v", err)
	}
}
