package cli_test

import (
	"bytes"
	"context"
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
