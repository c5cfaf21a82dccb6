package cli_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/internal/cli"
)

// writeCerts writes a CA, a server certificate for 127.0.0.1 and a client
// certificate, all PEM, into dir.
func writeCerts(t *testing.T, dir string) {
	t.Helper()
	key := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	write := func(name, typ string, der []byte) {
		if err := os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	caKey := key()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	write("ca.pem", "CERTIFICATE", caDER)
	for i, name := range []string{"server", "client"} {
		k := key()
		usage := x509.ExtKeyUsageServerAuth
		if name == "client" {
			usage = x509.ExtKeyUsageClientAuth
		}
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(int64(i + 2)), Subject: pkix.Name{CommonName: name},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			ExtKeyUsage: []x509.ExtKeyUsage{usage}, KeyUsage: x509.KeyUsageDigitalSignature,
			IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &k.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		keyDER, _ := x509.MarshalECPrivateKey(k)
		write(name+".pem", "CERTIFICATE", der)
		write(name+"-key.pem", "EC PRIVATE KEY", keyDER)
	}
}

// lockedBuffer is an io.Writer the test reads while a command writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestBackendOverMutualTLS serves the file backend with TLS and required
// client certificates from the CLI, and reaches it from the CLI's hub with
// a --backend-tls file keyed by the backend's alias.
func TestBackendOverMutualTLS(t *testing.T) {
	certs := t.TempDir()
	writeCerts(t, certs)
	var out, errOut lockedBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		done <- cli.Main(ctx, []string{"backend", "file", "--dir", t.TempDir(), "--listen", "127.0.0.1:0",
			"--tls-cert", filepath.Join(certs, "server.pem"), "--tls-key", filepath.Join(certs, "server-key.pem"),
			"--client-ca", filepath.Join(certs, "ca.pem")},
			cli.Env{Stdout: &out, Stderr: &errOut, Getenv: func(k string) string {
				if k == "HOME" {
					return certs
				}
				return ""
			}})
	}()
	t.Cleanup(func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("backend file exited %d: %s", code, errOut.String())
		}
	})
	var url string
	for deadline := time.Now().Add(10 * time.Second); url == ""; {
		if _, rest, ok := strings.Cut(out.String(), " at "); ok {
			url, _, _ = strings.Cut(rest, "\n")
		}
		if time.Now().After(deadline) {
			t.Fatalf("backend did not start: %s %s", out.String(), errOut.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !strings.HasPrefix(url, "grpcs://127.0.0.1:") {
		t.Fatalf("url = %q, want grpcs://", url)
	}

	e := newEnv(t)
	e.ok("backends", "register", "--url", url, "--accept-value", "--alias", "secure")
	// Without TLS settings the backend's certificate is not trusted.
	if r := e.run("", "backends", "check", "secure"); r.code != 6 || !strings.Contains(r.stderr, "certificate") {
		t.Errorf("check without --backend-tls: exit %d, %s", r.code, r.stderr)
	}
	tlsFile := writeFile(t, certs, "backends-tls.yaml", "secure:\n  caFile: ca.pem\n")
	if r := e.run("", "--backend-tls", tlsFile, "backends", "check", "secure"); r.code != 6 {
		t.Errorf("check without a client certificate: exit %d, %s", r.code, r.stderr)
	}
	writeFile(t, certs, "backends-tls.yaml", "secure:\n  caFile: ca.pem\n  certFile: client.pem\n  keyFile: client-key.pem\n")
	if out := e.ok("--backend-tls", tlsFile, "backends", "check", "secure"); !strings.Contains(out, "SERVING") || !strings.Contains(out, "TLS") {
		t.Errorf("check over mutual TLS: %s", out)
	}
	doc := writeFile(t, t.TempDir(), "s.yaml", "apiVersion: hub.cairn.dev/v1\nkind: TypeInstance\nmetadata: {name: s}\nspec:\n  typeRef: {path: cap.type.secret, revision: 0.1.0}\n  backend: {id: secure}\n  value: {k: v}\n")
	e.ok("--backend-tls", tlsFile, "apply", "-f", doc)
	if out := e.ok("--backend-tls", tlsFile, "get", "cap.type.secret", "s", "-o", "json"); !strings.Contains(out, `"k": "v"`) {
		t.Errorf("get over mutual TLS: %s", out)
	}
	// A broken TLS file is reported as such.
	writeFile(t, certs, "backends-tls.yaml", "secure:\n  caFile: nope.pem\n")
	if r := e.run("", "--backend-tls", tlsFile, "list"); r.code != 2 || !strings.Contains(r.stderr, "nope.pem") {
		t.Errorf("broken --backend-tls: exit %d, %s", r.code, r.stderr)
	}
}
