package cli_test

import (
	"context"
	"encoding/pem"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/api/rest"
	"github.com/cairn-dev/cairn/internal/cli"
)

// A server whose certificate the CLI does not trust fails saying how to
// trust it, and config set-context records the CA (and a client
// certificate), which the documentation says a context holds.
func TestConfigCertificateAuthority(t *testing.T) {
	s := newServer(t)
	s.withFlags()
	srv := httptest.NewUnstartedServer(rest.New(rest.Config{Hub: s.h}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes
	srv.StartTLS()
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	ca := writeFile(t, dir, "ca.crt", string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})))
	cfg := filepath.Join(dir, "config.yaml")
	run := func(args ...string) result {
		t.Helper()
		return s.runCtx(context.Background(), nil, map[string]string{cli.EnvConfig: cfg}, "", args...)
	}

	r := run("--server", srv.URL, "get", "flags")
	if r.code != cli.ExitUnavailable || !strings.Contains(r.stderr, "certificate signed by unknown authority") ||
		!strings.Contains(r.stderr, "cairn config set-context NAME --server "+srv.URL+" --certificate-authority FILE") {
		t.Fatalf("untrusted server: exit %d\n%s", r.code, r.stderr)
	}

	steps := []struct {
		name string
		args []string
		code int
		out  string // in stdout
		err  string // in stderr
	}{
		{"a CA file that is missing", []string{"config", "set-context", "tls", "--server", srv.URL, "--certificate-authority", filepath.Join(dir, "nope.crt")}, cli.ExitInvalid, "", "nope.crt"},
		{"a CA file that is no certificate", []string{"config", "set-context", "tls", "--server", srv.URL, "--certificate-authority", cfg + ".x"}, cli.ExitInvalid, "", "certificate-authority"},
		{"a client certificate without its key", []string{"config", "set-context", "tls", "--server", srv.URL, "--client-certificate", ca}, cli.ExitInvalid, "", "--client-key"},
		{"a new context without a server", []string{"config", "set-context", "other", "--certificate-authority", ca}, cli.ExitInvalid, "", "--server"},
		{"nothing was written", []string{"config", "view"}, 0, "contexts: []", ""},
		{"set-context with the CA", []string{"config", "set-context", "tls", "--server", srv.URL, "--certificate-authority", ca}, 0, `Context "tls" created.`, ""},
		{"the context trusts the server", []string{"--context", "tls", "get", "flags", "-o", "name"}, 0, "flag.flipt.io/a", ""},
		{"set-context keeps what it is not given", []string{"config", "set-context", "tls", "--server", srv.URL}, 0, `Context "tls" modified.`, ""},
		{"still trusted", []string{"--context", "tls", "get", "flags", "-o", "name"}, 0, "flag.flipt.io/a", ""},
		{"view shows the CA", []string{"config", "view"}, 0, "certificate-authority: " + ca, ""},
	}
	if err := os.WriteFile(cfg+".x", []byte("not PEM"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, st := range steps {
		r := run(st.args...)
		if r.code != st.code || !strings.Contains(r.stdout, st.out) || !strings.Contains(r.stderr, st.err) {
			t.Errorf("%s: exit %d\nstdout %q\nstderr %q\nwant %d, %q, %q", st.name, r.code, r.stdout, r.stderr, st.code, st.out, st.err)
		}
	}

	// A CA file gone since: invalid input, naming the file and the context.
	if err := os.Remove(ca); err != nil {
		t.Fatal(err)
	}
	if r := run("--context", "tls", "get", "flags"); r.code != cli.ExitInvalid || !strings.Contains(r.stderr, ca) || !strings.Contains(r.stderr, `context "tls"`) {
		t.Errorf("a CA file that is gone: exit %d\n%s", r.code, r.stderr)
	}
}
