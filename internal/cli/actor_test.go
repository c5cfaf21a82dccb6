package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/internal/cli"
)

// TestDefaultActor: a local write is recorded as --as, else $USER, else
// $LOGNAME, else the OS user (a container or a systemd unit sets neither
// variable), and only with none of them as nobody.
func TestDefaultActor(t *testing.T) {
	for _, tt := range []struct {
		name     string
		vars     map[string]string
		username string
		args     []string
		want     string
	}{
		{"--as", map[string]string{"USER": "env-user"}, "os-user", []string{"--as", "flag-user"}, "flag-user"},
		{"$USER", map[string]string{"USER": "env-user", "LOGNAME": "log-user"}, "os-user", nil, "env-user"},
		{"$LOGNAME", map[string]string{"LOGNAME": "log-user"}, "os-user", nil, "log-user"},
		{"the OS user", nil, "os-user", nil, "os-user"},
		{"nobody", nil, "", nil, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			vars := map[string]string{cli.EnvDataDir: t.TempDir()}
			for k, v := range tt.vars {
				vars[k] = v
			}
			run := func(args ...string) string {
				t.Helper()
				var out, errOut bytes.Buffer
				if code := cli.Main(context.Background(), args, cli.Env{
					Stdout: &out, Stderr: &errOut,
					Getenv:   func(k string) string { return vars[k] },
					Username: func() string { return tt.username },
				}); code != 0 {
					t.Fatalf("cairn %v: exit %d\n%s", args, code, errOut.String())
				}
				return out.String()
			}
			run(append(tt.args, "apply", "-f", quickstart)...)
			var list []cairn.Instance
			if err := json.Unmarshal([]byte(run("list", "-n", "default", "-o", "json")), &list); err != nil || len(list) == 0 {
				t.Fatalf("list: %v, %d instances", err, len(list))
			}
			for _, in := range list {
				if in.Latest.CreatedBy != tt.want {
					t.Errorf("%s createdBy %q, want %q", in.Name, in.Latest.CreatedBy, tt.want)
				}
			}
		})
	}
}
