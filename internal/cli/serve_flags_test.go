package cli_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/internal/cli"
)

// TestServeRefusesANonPositiveResponseBound: --graphql-max-response-bytes
// must bound something; the refusal names the flag and the value, before
// anything is opened or served.
func TestServeRefusesANonPositiveResponseBound(t *testing.T) {
	for _, v := range []string{"0", "-1"} {
		var stderr bytes.Buffer
		dir := t.TempDir()
		code := cli.Main(context.Background(), []string{"serve", "--addr", "127.0.0.1:0", "--graphql-max-response-bytes", v},
			cli.Env{Stdout: &bytes.Buffer{}, Stderr: &stderr, Getenv: func(k string) string {
				if k == cli.EnvDataDir {
					return dir
				}
				return ""
			}})
		if code != cli.ExitInvalid || !strings.Contains(stderr.String(), "--graphql-max-response-bytes "+v+": must be a positive number of bytes") {
			t.Errorf("--graphql-max-response-bytes %s: exit %d, %s", v, code, stderr.String())
		}
	}
}
