package cli_test

import (
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/backend/file"
)

// TestGetWhileABackendIsDown: with the backend of one instance down, the
// tables and -o name of get list every instance (none reads a value), and
// -o json/yaml, which show values, fail with exit 6 naming the backend and
// the instance rather than leaving it out or showing it empty.
func TestGetWhileABackendIsDown(t *testing.T) {
	modes(t, func(t *testing.T, e *server) {
		addr, stop := serveFileBackend(t, file.Config{Dir: t.TempDir()})
		b := decode[backendJSON](t, e.ok("backends", "register", "--url", "grpc://"+addr, "--accept-value", "--alias", "files", "-o", "json"))
		e.withFlags()
		e.ok("apply", "-f", e.file("d.yaml", `apiVersion: hub.cairn.dev/v1
kind: TypeInstance
metadata: {name: d}
spec:
  typeRef: {path: io.flipt.flag, revision: 1.0.0-alpha.1}
  backend: {id: files}
  value: {enabled: true}
`))
		d := instanceOf(t, e.ok("get", "flags", "d", "-o", "json"))
		stop()

		for _, c := range []struct {
			args []string
			want []string
		}{
			{[]string{"get", "ti"}, []string{d.ID, "io.flipt.flag", " d "}},
			{[]string{"get", "ti", "-o", "name"}, []string{"typeinstance.hub.cairn.dev/" + d.ID}},
			{[]string{"get", "ti", "-o", "wide"}, []string{d.ID}},
			{[]string{"get", "flags"}, []string{"\na ", "\nd "}},
			{[]string{"get", "flags", "-A"}, []string{"other ", " d ", "files"}},
			{[]string{"get", "flags", "-o", "name"}, []string{"flag.flipt.io/a", "flag.flipt.io/d"}},
		} {
			r := e.run("", c.args...)
			if r.code != 0 {
				t.Errorf("cairn %s: exit %d: %s", strings.Join(c.args, " "), r.code, r.stderr)
				continue
			}
			for _, w := range c.want {
				if !strings.Contains(r.stdout, w) {
					t.Errorf("cairn %s lacks %q:\n%s", strings.Join(c.args, " "), w, r.stdout)
				}
			}
		}
		for _, args := range [][]string{{"get", "flags", "-o", "json"}, {"get", "ti", "-o", "yaml"}, {"get", "flags", "-A", "-o", "yaml"}} {
			r := e.run("", args...)
			if r.code != 6 || !strings.Contains(r.stderr, `External backend "`+b.ID+`"`) || !strings.Contains(r.stderr, "io.flipt.flag default/d") ||
				!strings.Contains(r.stderr, "-o name") || r.stdout != "" {
				t.Errorf("cairn %s: exit %d\nstdout: %s\nstderr: %s\nwant exit 6 naming the backend, the instance and what lists without values", strings.Join(args, " "), r.code, r.stdout, r.stderr)
			}
		}
	})
}
