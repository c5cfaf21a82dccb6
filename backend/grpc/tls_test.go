package grpc_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/backend/file"
	grpcbackend "github.com/cairn-dev/cairn/backend/grpc"
	"github.com/cairn-dev/cairn/sdk/storagebackend"
)

func fileBackend(t *testing.T) *file.Backend {
	t.Helper()
	fb, err := file.New(file.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	return fb
}

// roundTrip creates and reads back an instance through b.
func roundTrip(t *testing.T, b cairn.Backend) error {
	t.Helper()
	id := uuid.NewString()
	if _, err := b.OnCreate(t.Context(), cairn.OnCreateRequest{InstanceID: id, Value: json.RawMessage(`{"secret":"s3"}`)}); err != nil {
		return err
	}
	v, err := b.GetValue(t.Context(), cairn.GetValueRequest{InstanceID: id, ResourceVersion: 1})
	if err == nil && string(v) != `{"secret":"s3"}` {
		t.Errorf("value = %s", v)
	}
	return err
}

func TestTLS(t *testing.T) {
	p := newPKI(t)
	tlsServer := serve(t, fileBackend(t), true, storagebackend.Options{TLS: p.serverTLS})
	mutual := serve(t, fileBackend(t), true, storagebackend.Options{TLS: p.mutualTLS})
	plain := serve(t, fileBackend(t), true, storagebackend.Options{})
	fast := grpcbackend.Config{ReadAttempts: 1, Timeout: 5 * time.Second}

	t.Run("grpcs with the CA", func(t *testing.T) {
		sb := storage("grpcs://"+tlsServer.addr, true)
		cfg := fast
		cfg.TLS = map[string]grpcbackend.TLSFiles{sb.ID: {CAFile: p.caFile}}
		if err := roundTrip(t, open(t, opener(t, cfg), sb)); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("host:port means TLS; configured by alias", func(t *testing.T) {
		sb := storage(tlsServer.addr, true)
		sb.Alias = "vault"
		cfg := fast
		cfg.TLS = map[string]grpcbackend.TLSFiles{"vault": {CAFile: p.caFile}}
		if err := roundTrip(t, open(t, opener(t, cfg), sb)); err != nil {
			t.Fatal(err)
		}
	})
	// A TLS mistake's hint names the setting to fix, for the backend's
	// key in --backend-tls; none of them is a plaintext backend.
	wantHint := func(t *testing.T, err error, hint string) {
		t.Helper()
		wantCode(t, err, cairn.CodeUnavailable)
		if err == nil || !strings.Contains(err.Error(), hint) {
			t.Errorf("error %v\ngives no hint %q", err, hint)
		}
		if err != nil && strings.Contains(err.Error(), "serves plaintext") {
			t.Errorf("error %v\nsuggests plaintext for a backend that serves TLS", err)
		}
	}
	t.Run("unknown CA is refused", func(t *testing.T) {
		sb := storage("grpcs://"+tlsServer.addr, true)
		sb.Alias = "vault"
		err := roundTrip(t, open(t, opener(t, fast), sb))
		wantHint(t, err, `give the CA that signed it as caFile of "vault" in --backend-tls`)
	})
	t.Run("a certificate for another name is refused", func(t *testing.T) {
		sb := storage("grpcs://"+tlsServer.addr, true)
		cfg := fast
		cfg.TLS = map[string]grpcbackend.TLSFiles{sb.ID: {CAFile: p.caFile, ServerName: "vault.internal"}}
		err := roundTrip(t, open(t, opener(t, cfg), sb))
		wantHint(t, err, fmt.Sprintf("set serverName of %q in --backend-tls to a name the certificate is for", sb.ID))
	})
	t.Run("client certificate required", func(t *testing.T) {
		sb := storage("grpcs://"+mutual.addr, true)
		cfg := fast
		cfg.TLS = map[string]grpcbackend.TLSFiles{sb.ID: {CAFile: p.caFile}}
		err := roundTrip(t, open(t, opener(t, cfg), sb))
		if err == nil {
			t.Fatal("a server requiring a client certificate accepted a client without one")
		}
		wantHint(t, err, fmt.Sprintf("set certFile and keyFile of %q in --backend-tls", sb.ID))
		other := newPKI(t)
		cfg.TLS = map[string]grpcbackend.TLSFiles{sb.ID: {CAFile: p.caFile, CertFile: other.clientCert, KeyFile: other.clientKey}}
		err = roundTrip(t, open(t, opener(t, cfg), sb))
		if err == nil {
			t.Fatal("a server requiring a client certificate of its CA accepted another")
		}
		wantHint(t, err, "check that certFile of")
		cfg.TLS = map[string]grpcbackend.TLSFiles{sb.ID: {CAFile: p.caFile, CertFile: p.clientCert, KeyFile: p.clientKey}}
		if err := roundTrip(t, open(t, opener(t, cfg), sb)); err != nil {
			t.Fatalf("with a client certificate: %v", err)
		}
	})
	t.Run("TLS towards a plaintext backend says what to do", func(t *testing.T) {
		sb := storage(plain.addr, true)
		err := roundTrip(t, open(t, opener(t, fast), sb))
		wantCode(t, err, cairn.CodeUnavailable)
		if err == nil || !strings.Contains(err.Error(), "register its url as grpc://"+plain.addr) {
			t.Errorf("error %v gives no hint", err)
		}
	})
	t.Run("plaintext towards a TLS backend says what to do", func(t *testing.T) {
		err := roundTrip(t, open(t, opener(t, fast), storage("grpc://"+tlsServer.addr, true)))
		wantCode(t, err, cairn.CodeUnavailable)
		if err == nil || !strings.Contains(err.Error(), "if the backend serves TLS, register its url as grpcs://") {
			t.Errorf("error %v gives no hint", err)
		}
	})
}

func TestTLSConfigErrors(t *testing.T) {
	p := newPKI(t)
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "not.pem")
	if err := os.WriteFile(notPEM, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		files grpcbackend.TLSFiles
		want  string
	}{
		{grpcbackend.TLSFiles{CAFile: filepath.Join(dir, "missing.pem")}, "missing.pem"},
		{grpcbackend.TLSFiles{CAFile: notPEM}, "no PEM certificate"},
		{grpcbackend.TLSFiles{CertFile: p.clientCert}, "certFile and keyFile go together"},
		{grpcbackend.TLSFiles{CertFile: p.clientCert, KeyFile: p.caFile}, "keyFile"},
	}
	for _, tt := range tests {
		_, err := grpcbackend.New(grpcbackend.Config{TLS: map[string]grpcbackend.TLSFiles{"vault": tt.files}})
		if err == nil || !strings.Contains(err.Error(), `backend "vault"`) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("New(%+v) error %v, want it to name the backend and %q", tt.files, err, tt.want)
		}
	}
}

func TestLoadTLSConfigFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "backends-tls.yaml")
	if err := os.WriteFile(path, []byte("vault:\n  caFile: ca.pem\n  serverName: vault.internal\nother:\n  caFile: /etc/ca.pem\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	m, err := grpcbackend.LoadTLSConfigFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if m["vault"].CAFile != filepath.Join(dir, "ca.pem") || m["vault"].ServerName != "vault.internal" || m["other"].CAFile != "/etc/ca.pem" {
		t.Errorf("config = %+v", m)
	}
	if err := os.WriteFile(path, []byte("vault:\n  caFiel: ca.pem\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := grpcbackend.LoadTLSConfigFile(path); err == nil || !strings.Contains(err.Error(), "caFiel") {
		t.Errorf("a misspelt key: error %v", err)
	}
}

func TestCheck(t *testing.T) {
	s := serve(t, fileBackend(t), true, storagebackend.Options{})
	o := opener(t, grpcbackend.Config{Timeout: 2 * time.Second})
	sb := storage("grpc://"+s.addr, true)
	h, err := o.Check(t.Context(), sb)
	if err != nil {
		t.Fatal(err)
	}
	if !h.Serving() || h.Service != "storage_backend.ValueAndContextStorageBackend" || h.RoundTrip <= 0 || h.TLS {
		t.Errorf("health = %+v", h)
	}
	// A context-only registration asks about the other service, which this
	// server does not have: it falls back to the server's overall status
	// (and the first real call would say Unimplemented).
	h, err = o.Check(t.Context(), storage("grpc://"+s.addr, false))
	if err != nil || h.Service != "" || !h.Serving() {
		t.Errorf("health for the other service = %+v, %v", h, err)
	}
	s.server.Stop()
	_, err = o.Check(t.Context(), sb)
	wantCode(t, err, cairn.CodeUnavailable)
	if err == nil || !strings.Contains(err.Error(), "health check") || !strings.Contains(err.Error(), sb.ID) {
		t.Errorf("error %v", err)
	}
}

func TestCheckWithoutHealthService(t *testing.T) {
	sb := storage("grpc://"+serveRaw(t, newRaw()), true)
	_, err := opener(t, grpcbackend.Config{}).Check(t.Context(), sb)
	wantCode(t, err, cairn.CodeUnavailable)
	if err == nil || !strings.Contains(err.Error(), "does not serve grpc.health.v1") {
		t.Errorf("error %v", err)
	}
}
