package cli_test

import (
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/backend/file"
)

// TestGetWhileABackendIsDown: with the backend of one instance down, the
// tables and -o name of get list every instance (none reads a value), and
// -o json/yaml, which show values, fail with exit 6 naming the backend and
// the instance rather than leaving it out or showing it empty; describe
// shows all but the value, and says why it is missing.
func TestGetWhileABackendIsDown(t *testing.T) {
	modes(t, func(t *testing.T, e *server) {
		addr, stop := serveFileBackend(t, file.Config{Dir: t.TempDir()})
		b := decode[backendJSON](t, e.ok("backends", "register", "--url", "grpc://"+addr, "--accept-value", "--alias", "files", "-o", "json"))
		e.withFlags()
		e.ok("apply", "-f", e.file("d.yaml", `apiVersion: hub.cairn.dev/v1
kind: TypeInstance
metadata: {name: d, labels: {team: moon}}
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
			{[]string{"get", "flags", "-A", "-o", "wide"}, []string{"other ", " d ", "files"}},
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
		// describe shows what the hub keeps of the instance (metadata,
		// labels, backend, relations, versions without values), says the
		// value is unavailable and why, and exits 6.
		for _, args := range [][]string{{"describe", "flag", "d"}, {"describe", "ti", d.ID}, {"describe", "ti", "d"}} {
			r := e.run("", args...)
			if r.code != 6 || !strings.Contains(r.stderr, `External backend "`+b.ID+`"`) {
				t.Errorf("cairn %s: exit %d\nstderr: %s\nwant exit 6 naming the backend", strings.Join(args, " "), r.code, r.stderr)
			}
			for _, w := range []string{"Name:", " d\n", "UID:", d.ID, "team=moon", "Type:", "io.flipt.flag:1.0.0-alpha.1", "Backend:", b.ID,
				"Spec:  <unavailable: backend files could not be read: ", `External backend "` + b.ID + `"`, "Resource Versions:", "VERSION", "\n  1 "} {
				if !strings.Contains(r.stdout, w) {
					t.Errorf("cairn %s lacks %q:\n%s", strings.Join(args, " "), w, r.stdout)
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

// TestApplyWhileAnotherBackendIsDown: apply and delete -f of TypeInstance
// documents find the instance a document names without reading the values
// of every instance of that name: one of another Type stored in a backend
// that is down fails neither, and a delete -f of the instance in the down
// backend goes through (the backend's part waits for recovery).
func TestApplyWhileAnotherBackendIsDown(t *testing.T) {
	modes(t, func(t *testing.T, e *server) {
		addr, stop := serveFileBackend(t, file.Config{Dir: t.TempDir()})
		e.ok("backends", "register", "--url", "grpc://"+addr, "--accept-value", "--alias", "files")
		doc := func(path, backend, labels string) string {
			return e.file(path+".yaml", `apiVersion: hub.cairn.dev/v1
kind: TypeInstance
metadata: {name: a, labels: `+labels+`}
spec:
  typeRef: {path: `+path+`, revision: 0.1.0}
  backend: {id: `+backend+`}
  value: {x: 1}
`)
		}
		down := doc("cap.type.other", "files", "{}")
		e.ok("apply", "-f", down, "-f", doc("cap.type.mine", "cairn-builtin", "{}"))
		stop()

		mine := doc("cap.type.mine", "cairn-builtin", "{team: z}")
		if out := e.ok("apply", "-f", mine); !strings.Contains(out, "(default/a) configured") {
			t.Errorf("apply of cap.type.mine a while cap.type.other a is in a down backend: %s", out)
		}
		if got := e.byName("cap.type.mine", "a").Labels["team"]; got != "z" {
			t.Errorf("label team = %q, want z", got)
		}
		e.ok("delete", "-f", mine)
		if r := e.run("", "delete", "-f", down); r.code != 0 {
			t.Errorf("delete -f of an instance in the down backend: exit %d: %s", r.code, r.stderr)
		}
	})
}
