package cli_test

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/internal/cli"
)

// TestServeRefusesBadFlags: a flag value serve cannot use is refused with
// a message naming the flag and the value, before anything is opened or
// served.
func TestServeRefusesBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--graphql-max-response-bytes", "0"}, "--graphql-max-response-bytes 0: must be a positive number of bytes"},
		{[]string{"--graphql-max-response-bytes", "-1"}, "--graphql-max-response-bytes -1: must be a positive number of bytes"},
		{[]string{"--log-level", "loud"}, `--log-level "loud": want debug, info, warn or error`},
		// Zero or negative durations used to be taken silently as the
		// defaults (or, for a negative one, as 0).
		{[]string{"--recovery-interval", "0"}, "--recovery-interval 0s: must be positive"},
		{[]string{"--recovery-interval", "-1s"}, "--recovery-interval -1s: must be positive"},
		{[]string{"--recovery-grace", "0"}, "--recovery-grace 0s: must be positive"},
		{[]string{"--stack-resync", "0"}, "--stack-resync 0s: must be positive"},
		{[]string{"--stack-lease-duration", "-5s"}, "--stack-lease-duration -5s: must be positive"},
		{[]string{"--shutdown-timeout", "-1s"}, "--shutdown-timeout -1s: must not be negative"},
		{[]string{"--git-sync-interval", "-1m"}, "--git-sync-interval -1m0s: must not be negative (0: only on POST /hooks/git/{backend})"},
		{[]string{"--max-requests-per-user", "-1"}, "--max-requests-per-user -1: must not be negative (0: no limit)"},
		{[]string{"--max-requests-burst", "-1"}, "--max-requests-burst -1: must not be negative"},
		{[]string{"--max-requests-per-user", "5", "--max-requests-burst", "0"}, "--max-requests-burst 0: must be at least 1 with --max-requests-per-user"},
		{[]string{"--audit-log-maxsize", "0"}, "--audit-log-maxsize 0: must be a positive number of megabytes"},
		{[]string{"--audit-log-maxbackup", "-1"}, "--audit-log-maxbackup -1: must not be negative"},
		// Checked only once the store was open (and migrated) before.
		{[]string{"--audit-level", "all"}, `--audit-level: audit level "all": want None, Metadata or Request`},
		{[]string{"--addr", "127.0.0.1:99999"}, `--addr "127.0.0.1:99999": port 99999 is out of range (0-65535)`},
		{[]string{"--addr", "127.0.0.1:http2"}, `--addr "127.0.0.1:http2": port "http2"`},
	} {
		var stderr bytes.Buffer
		dir := t.TempDir()
		code := cli.Main(context.Background(), append([]string{"serve", "--addr", "127.0.0.1:0"}, tc.args...),
			cli.Env{Stdout: &bytes.Buffer{}, Stderr: &stderr, Getenv: func(k string) string {
				if k == cli.EnvDataDir {
					return dir
				}
				return ""
			}})
		if code != cli.ExitInvalid || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%s: exit %d, %s", tc.args, code, stderr.String())
		}
		if _, err := os.Stat(filepath.Join(dir, "cairn.db")); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s: the store was opened before the flags were checked (%v)", tc.args, err)
		}
	}
}

// TestServeRefusesBadFiles: a file named by a flag that is missing or
// malformed is invalid input (exit 2), the message names the flag, and
// nothing is written: no store, admin token or certificate in the data
// directory.
func TestServeRefusesBadFiles(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("kind: Nope\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	badCSV := filepath.Join(dir, "bad.csv")
	if err := os.WriteFile(badCSV, []byte("a,b\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--rbac-file", missing}, "--rbac-file: open " + missing},
		{[]string{"--rbac-file", bad}, "--rbac-file " + bad + ", document 1: "},
		{[]string{"--token-auth-file", missing}, "--token-auth-file: token file: open " + missing},
		{[]string{"--token-auth-file", badCSV}, "--token-auth-file: token file " + badCSV + ": line 1: "},
		{[]string{"--client-ca", missing}, "--client-ca: client CA: open " + missing},
		{[]string{"--client-ca", bad}, "--client-ca: client CA " + bad + ": no PEM certificate in it"},
		{[]string{"--tls-cert", bad, "--tls-key", bad}, "--tls-cert/--tls-key: TLS certificate " + bad},
		{[]string{"--oidc-issuer-url", "https://issuer.example"}, "--oidc-issuer-url https://issuer.example needs --oidc-client-id"},
		{[]string{"--oidc-issuer-url", "https://issuer.example", "--oidc-client-id", "cairn", "--oidc-ca-file", missing}, "--oidc-ca-file: open " + missing},
		{[]string{"--git-webhook-secret-file", missing}, "--git-webhook-secret-file: open " + missing},
		{[]string{"--backend-tls", missing}, "--backend-tls: backend TLS config: open " + missing},
		{[]string{"--audit-log-path", filepath.Join(missing, "audit.log")}, "--audit-log-path " + filepath.Join(missing, "audit.log") + ": directory " + missing + " does not exist"},
	} {
		var stderr bytes.Buffer
		data := t.TempDir()
		code := cli.Main(context.Background(), append([]string{"serve", "--addr", "127.0.0.1:0"}, tc.args...),
			cli.Env{Stdout: &bytes.Buffer{}, Stderr: &stderr, Getenv: func(k string) string {
				if k == cli.EnvDataDir {
					return data
				}
				return ""
			}})
		if code != cli.ExitInvalid || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%s: exit %d, %s; want exit %d and %q", tc.args, code, stderr.String(), cli.ExitInvalid, tc.want)
		}
		if left, err := os.ReadDir(data); err != nil || len(left) != 0 {
			t.Errorf("%s: the data directory holds %v (%v) after the refusal, want nothing", tc.args, left, err)
		}
	}
}

// TestServeLogLevel: a write is logged, with its actor, at --log-level
// debug only; at the default (info) the audit log alone records it.
func TestServeLogLevel(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		logged bool
	}{
		{nil, false},
		{[]string{"--log-level", "debug"}, true},
	} {
		vars := map[string]string{cli.EnvDataDir: t.TempDir()}
		url, log, stop := startServeLogged(t, vars, tc.args...)
		vars[cli.EnvServer] = url
		if r := runVars(t, vars, "apply", "-f", quickstart); r.code != 0 {
			t.Fatalf("apply: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		stop()
		if got := strings.Contains(log(), `"msg":"created instances"`); got != tc.logged {
			t.Errorf("%s: the create logged: %v, want %v; log:\n%s", tc.args, got, tc.logged, log())
		}
	}
}
