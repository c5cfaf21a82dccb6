package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/api/rest"
	gitbackend "github.com/cairn-dev/cairn/backend/git"
	"github.com/cairn-dev/cairn/backend/gotemplate"
	grpcbackend "github.com/cairn-dev/cairn/backend/grpc"
	s3backend "github.com/cairn-dev/cairn/backend/s3"
	"github.com/cairn-dev/cairn/hub"
	"github.com/cairn-dev/cairn/internal/cli"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/sqlite"
)

// flagsRD is a cup ResourceDefinition with a short name and a strict
// schema, so invalid specs can be tested.
const flagsRD = `{"apiVersion": "cup.flipt.io/v1alpha1", "kind": "ResourceDefinition",
 "metadata": {"name": "flags.flipt.io"},
 "names": {"kind": "Flag", "singular": "flag", "plural": "flags", "shortNames": ["fl"]},
 "spec": {"group": "flipt.io", "versions": {"v1alpha1": {"type": "object", "additionalProperties": false,
   "properties": {"enabled": {"type": "boolean"}, "description": {"type": "string"}}}}}}`

// flagDoc is a Flag document.
func flagDoc(name, ns, labels, spec string) string {
	doc := "apiVersion: flipt.io/v1alpha1\nkind: Flag\nmetadata:\n  name: " + name + "\n"
	if ns != "" {
		doc += "  namespace: " + ns + "\n"
	}
	if labels != "" {
		doc += "  labels: " + labels + "\n"
	}
	return doc + "spec: " + spec + "\n"
}

// server is what the CLI of one test talks to, in one of the two modes:
// in server mode the real REST server over a real SQLite hub, on loopback
// (--server URL); in local mode no server: the CLI opens the SQLite store
// of its data directory itself. h is a hub on the same store either way,
// to check what a command stored.
type server struct {
	t     *testing.T
	local bool
	url   string
	h     *hub.Hub
	dir   string
	vars  map[string]string
}

// modes runs fn once in each mode, as subtests "server" and "local".
func modes(t *testing.T, fn func(t *testing.T, s *server)) {
	for _, local := range []bool{false, true} {
		name := "server"
		if local {
			name = "local"
		}
		t.Run(name, func(t *testing.T) { fn(t, newFixture(t, local)) })
	}
}

// newServer is the server-mode fixture.
func newServer(t *testing.T) *server { return newFixture(t, false) }

func newFixture(t *testing.T, local bool) *server {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	// HOME is the test's, so no configuration file of the machine counts.
	vars := map[string]string{"USER": "tester", "HOME": dir, "TMPDIR": dir, cli.EnvDataDir: filepath.Join(dir, "local")}
	db := filepath.Join(dir, "server.db")
	if local {
		if err := os.MkdirAll(filepath.Join(dir, "local"), 0o755); err != nil {
			t.Fatal(err)
		}
		db = filepath.Join(dir, "local", "cairn.db")
	}
	st, err := sqlite.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	// The hub reaches external backends over gRPC, as cairn serve's and
	// local mode's do.
	backends, err := grpcbackend.New(grpcbackend.Config{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { backends.Close() })
	h, err := hub.New(ctx, hub.Config{Store: st, PollInterval: 20 * time.Millisecond, Backends: backends})
	if err != nil {
		t.Fatal(err)
	}
	// As cairn serve and local mode do, the hub knows the Types of its
	// in-process backends and of Terraform state.
	for _, typ := range []cairn.Type{gitbackend.StorageType(), s3backend.StorageType()} {
		if _, _, err := h.ApplyType(ctx, typ); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.RegisterTerraformTypes(ctx); err != nil {
		t.Fatal(err)
	}
	s := &server{t: t, local: local, h: h, dir: dir, vars: vars}
	if local {
		return s
	}
	srv := httptest.NewUnstartedServer(rest.New(rest.Config{Hub: h}))
	// Watch streams end with the base context, so Close does not wait on them.
	base, cancel := context.WithCancel(ctx)
	srv.Config.BaseContext = func(net.Listener) context.Context { return base }
	srv.Start()
	t.Cleanup(srv.Close)
	t.Cleanup(cancel)
	s.url = srv.URL
	return s
}

// runCtx runs the CLI in-process with the server's variables and more.
func (s *server) runCtx(ctx context.Context, stdout *outputBuffer, more map[string]string, stdin string, args ...string) result {
	var out, errOut bytes.Buffer
	var w interface{ Write([]byte) (int, error) } = &out
	if stdout != nil {
		w = stdout
	}
	code := cli.Main(ctx, args, cli.Env{
		Stdin:  strings.NewReader(stdin),
		Stdout: w,
		Stderr: &errOut,
		Getenv: func(k string) string {
			if v, ok := more[k]; ok {
				return v
			}
			return s.vars[k]
		},
	})
	return result{code: code, stdout: out.String(), stderr: errOut.String()}
}

// run runs the CLI in the fixture's mode: as a client of the server
// (--server URL), or on the local store.
func (s *server) run(stdin string, args ...string) result {
	s.t.Helper()
	return s.runCtx(context.Background(), nil, nil, stdin, s.args(args...)...)
}

// args adds what selects the fixture's mode.
func (s *server) args(args ...string) []string {
	if s.local {
		return args
	}
	return append([]string{"--server", s.url}, args...)
}

// ok runs a client command that must succeed and returns its output.
func (s *server) ok(args ...string) string {
	s.t.Helper()
	r := s.run("", args...)
	if r.code != 0 {
		s.t.Fatalf("cairn %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

// file writes a file in the test's directory.
func (s *server) file(name, content string) string {
	s.t.Helper()
	return writeFile(s.t, s.dir, name, content)
}

// object reads an object through the server's hub.
func (s *server) flag(ns, name string) cairn.Instance {
	s.t.Helper()
	inst, err := s.h.GetInstanceByName(context.Background(), "io.flipt.flag", ns, name, true)
	if err != nil {
		s.t.Fatalf("flag %s/%s: %v", ns, name, err)
	}
	return inst
}

// withFlags registers the flags Type and a, b (default) and c (other).
func (s *server) withFlags() {
	s.t.Helper()
	s.ok("apply", "-f", s.file("flags.json", flagsRD), "-f", s.file("flag-objects.yaml",
		flagDoc("a", "", "{team: x}", "{enabled: true}")+"---\n"+
			flagDoc("b", "", "{team: moon}", "{enabled: false}")+"---\n"+
			flagDoc("c", "other", "", "{}")))
}

func TestApply(t *testing.T) {
	modes(t, func(t *testing.T, s *server) {
		rd := s.file("flags.json", flagsRD)
		f := s.file("flag.yaml", flagDoc("a", "", "{team: x}", "{enabled: true}"))
		steps := []struct {
			name  string
			setup func()
			args  []string
			stdin string
			want  []string // output lines, regular expressions
		}{
			{"create", nil, []string{"apply", "-f", rd, "-f", f}, "", []string{
				`type\.hub\.cairn\.dev/io\.flipt\.flag:1\.0\.0-alpha\.1 created`, `flag\.flipt\.io/a created`}},
			{"again: unchanged, no request", nil, []string{"apply", "-f", rd, "-f", f}, "", []string{
				`type\.hub\.cairn\.dev/io\.flipt\.flag:1\.0\.0-alpha\.1 unchanged`, `flag\.flipt\.io/a unchanged`}},
			{"key order and number spelling are no change", nil, []string{"apply", "-f", "-"},
				`{"kind": "Flag", "apiVersion": "flipt.io/v1alpha1", "spec": {"enabled": true}, "metadata": {"labels": {"team": "x"}, "name": "a"}}`,
				[]string{`flag\.flipt\.io/a unchanged`}},
			{"a changed spec", func() { s.file("flag.yaml", flagDoc("a", "", "{team: x}", "{enabled: false}")) },
				[]string{"apply", "-f", f}, "", []string{`flag\.flipt\.io/a configured`}},
			{"a dropped label", func() { s.file("flag.yaml", flagDoc("a", "", "", "{enabled: false}")) },
				[]string{"apply", "-f", f}, "", []string{`flag\.flipt\.io/a configured`}},
			{"another namespace", nil, []string{"apply", "-f", f, "-n", "other"}, "", []string{`flag\.flipt\.io/a created`}},
		}
		for _, st := range steps {
			if st.setup != nil {
				st.setup()
			}
			r := s.run(st.stdin, st.args...)
			if r.code != 0 {
				t.Fatalf("%s: exit %d: %s", st.name, r.code, r.stderr)
			}
			t.Run(st.name, func(t *testing.T) { matchLines(t, r.stdout, st.want...) })
		}
		a := s.flag("default", "a")
		if a.Latest.ResourceVersion != 3 || len(a.Labels) != 0 || string(a.Latest.Value) != `{"enabled":false}` || a.Latest.CreatedBy != "tester" {
			t.Errorf("flag a = version %d labels %v value %s by %q, want version 3, no labels, enabled false by tester",
				a.Latest.ResourceVersion, a.Labels, a.Latest.Value, a.Latest.CreatedBy)
		}
		s.flag("other", "a")
	})
}

func TestApplyTypeInstances(t *testing.T) {
	modes(t, func(t *testing.T, s *server) {
		out := s.ok("apply", "-f", quickstart)
		matchLines(t, out,
			`type\.hub\.cairn\.dev/cap\.type\.database\.postgresql\.server:0\.1\.0 created`,
			`type\.hub\.cairn\.dev/cap\.type\.database\.postgresql\.config:0\.1\.0 created`,
			`typeinstance\.hub\.cairn\.dev/`+idRE+` \(default/db-server\) created`,
			`typeinstance\.hub\.cairn\.dev/`+idRE+` \(default/db-config\) created`,
		)
		ctx := context.Background()
		server, err := s.h.GetInstanceByName(ctx, serverType, "default", "db-server", false)
		if err != nil {
			t.Fatal(err)
		}
		config, err := s.h.GetInstanceByName(ctx, configType, "default", "db-config", false)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(config.Uses, server.ID) || config.Latest.CreatedBy != "tester" || config.Alias != "db-config" {
			t.Errorf("db-config = uses %v createdBy %q alias %q; want the server %s, tester, db-config", config.Uses, config.Latest.CreatedBy, config.Alias, server.ID)
		}
		matchLines(t, s.ok("apply", "-f", quickstart),
			`type\.hub\.cairn\.dev/cap\.type\.database\.postgresql\.server:0\.1\.0 unchanged`,
			`type\.hub\.cairn\.dev/cap\.type\.database\.postgresql\.config:0\.1\.0 unchanged`,
			`typeinstance\.hub\.cairn\.dev/`+server.ID+` \(default/db-server\) unchanged`,
			`typeinstance\.hub\.cairn\.dev/`+config.ID+` \(default/db-config\) unchanged`,
		)

		// A changed value: a new resource version, and only for that document.
		dir := t.TempDir()
		writeFile(t, dir, "server.yaml", strings.Replace(readFile(t, filepath.Join(quickstart, "10-server.yaml")), "port: 5432", "port: 5433", 1))
		writeFile(t, dir, "config.yaml", readFile(t, filepath.Join(quickstart, "20-config.yaml")))
		matchLines(t, s.ok("apply", "-f", dir),
			`typeinstance\.hub\.cairn\.dev/`+config.ID+` \(default/db-config\) unchanged`,
			`typeinstance\.hub\.cairn\.dev/`+server.ID+` \(default/db-server\) configured`,
		)
		got, _ := s.h.GetInstance(ctx, server.ID, true)
		if got.Latest.ResourceVersion != 2 || !strings.Contains(string(got.Latest.Value), `"port":5433`) {
			t.Errorf("db-server = version %d value %s, want 2 with port 5433", got.Latest.ResourceVersion, got.Latest.Value)
		}

		// A TypeInstance as the server serves it applies too, by id.
		served := s.ok("get", "ti", server.ID, "-o", "yaml")
		p := writeFile(t, dir, "served.yaml", strings.Replace(served, "port: 5433", "port: 5434", 1))
		matchLines(t, s.ok("apply", "-f", p), `typeinstance\.hub\.cairn\.dev/`+server.ID+` \(default/db-server\) configured`)
		matchLines(t, s.ok("apply", "-f", p), `typeinstance\.hub\.cairn\.dev/`+server.ID+` \(default/db-server\) unchanged`)

		// Served TypeInstances whose instances were deleted (a backup made
		// with get -o yaml) come back under their ids, still related.
		backup := writeFile(t, dir, "backup.yaml", s.ok("get", "ti", server.ID, config.ID, "-o", "yaml"))
		s.ok("delete", "ti", config.ID)
		s.ok("delete", "ti", server.ID)
		matchLines(t, s.ok("apply", "-f", backup),
			`typeinstance\.hub\.cairn\.dev/`+server.ID+` \(default/db-server\) created`,
			`typeinstance\.hub\.cairn\.dev/`+config.ID+` \(default/db-config\) created`,
		)
		if back, err := s.h.GetInstance(ctx, config.ID, false); err != nil || !slices.Contains(back.Uses, server.ID) {
			t.Errorf("db-config restored = %+v, %v; want it to use db-server %s again", back.Uses, err, server.ID)
		}

		// A new document that uses an existing one by its alias.
		user := writeFile(t, dir, "user.yaml", `apiVersion: hub.cairn.dev/v1
kind: TypeInstance
metadata: {name: db-user}
spec:
  typeRef: {path: cap.type.database.user, revision: 0.1.0}
  value: {name: app}
  uses: [db-server]
`)
		r := s.run("", "apply", "-f", filepath.Join(quickstart, "10-server.yaml"), "-f", user)
		if r.code != 0 {
			t.Fatalf("apply a user of db-server: exit %d: %s", r.code, r.stderr)
		}
		u, err := s.h.GetInstanceByName(ctx, "cap.type.database.user", "default", "db-user", false)
		if err != nil || !slices.Contains(u.Uses, server.ID) {
			t.Errorf("db-user = %+v, %v; want it to use db-server %s", u, err, server.ID)
		}
	})
}

func TestApplyErrors(t *testing.T) {
	modes(t, func(t *testing.T, s *server) {
		s.withFlags()
		tests := []struct {
			name  string
			files map[string]string
			code  int
			want  []string // stderr contains each
		}{
			{"a Type revision is immutable", map[string]string{"rd.json": strings.Replace(flagsRD, `"boolean"`, `"string"`, 1)},
				cli.ExitConflict, []string{"io.flipt.flag:1.0.0-alpha.1 already exists with a different definition", "immutable"}},
			{"an unknown kind", map[string]string{"x.yaml": "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\n"},
				cli.ExitNotFound, []string{`no matches for kind "Widget" in version "example.com/v1"`}},
			{"a spec against the schema", map[string]string{"f.yaml": flagDoc("bad", "", "", "{enabled: maybe}")},
				cli.ExitInvalid, []string{"f.yaml: document 1", "is invalid", "  spec.enabled"}},
			{"a namespace that contradicts -n", map[string]string{"f.yaml": flagDoc("ns", "elsewhere", "", "{}")},
				cli.ExitInvalid, []string{`namespace from the provided object "elsewhere" does not match`}},
			{"no name", map[string]string{"f.yaml": "apiVersion: flipt.io/v1alpha1\nkind: Flag\nspec: {}\n"},
				cli.ExitInvalid, []string{"metadata.name is required"}},
			{"a cup Controller", map[string]string{"c.json": `{"apiVersion": "cup.flipt.io/v1alpha1", "kind": "Controller", "metadata": {"name": "t"}, "spec": {"type": "template"}}`},
				cli.ExitInvalid, []string{"c.json: document 1", `kind "Controller" is not supported`, "paths.resource"}},
			{"a definition without versions", map[string]string{"rd.json": `{"apiVersion": "cup.flipt.io/v1alpha1", "kind": "ResourceDefinition", "metadata": {"name": "as.x.io"}, "names": {"kind": "A", "plural": "as"}, "spec": {"group": "x.io"}}`},
				cli.ExitInvalid, []string{"rd.json: document 1", "spec.versions must list at least one version"}},
			{"bad YAML stops everything", map[string]string{"a.yaml": flagDoc("fine", "", "", "{}"), "b.yaml": "kind: [\n"},
				cli.ExitInvalid, []string{"b.yaml: document 1", "invalid YAML"}},
			{"an unknown backend alias", map[string]string{"ti.yaml": `apiVersion: hub.cairn.dev/v1
kind: TypeInstance
metadata: {name: t}
spec: {typeRef: {path: cap.type.x, revision: 0.1.0}, backend: {id: nowhere}}
`}, cli.ExitNotFound, []string{`spec.backend.id "nowhere" is neither an id nor the alias`}},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				dir := filepath.Join(s.dir, "x")
				os.RemoveAll(dir)
				for n, c := range tt.files {
					writeFile(t, dir, n, c)
				}
				r := s.runCtx(context.Background(), nil, nil, "", s.args("apply", "-f", dir, "-n", "default")...)
				if r.code != tt.code {
					t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", r.code, tt.code, r.stdout, r.stderr)
				}
				for _, w := range tt.want {
					if !strings.Contains(r.stderr, w) {
						t.Errorf("stderr %q does not contain %q", r.stderr, w)
					}
				}
			})
		}
		if _, err := s.h.GetInstanceByName(context.Background(), "io.flipt.flag", "default", "fine", false); !cairn.HasCode(err, cairn.CodeNotFound) {
			t.Errorf("a flag of a failed apply was created: %v", err)
		}
	})
}

func TestGet(t *testing.T) {
	modes(t, func(t *testing.T, s *server) {
		s.withFlags()
		s.ok("apply", "-f", quickstart)
		a := s.flag("default", "a")
		tests := []struct {
			name   string
			args   []string
			code   int
			stdout []string // lines, regular expressions; nil: not checked
			stderr string   // contained
		}{
			// The server's table, as kubectl get prints it: a Type that
			// declares no printer columns shows NAME and AGE, -o wide the
			// hub's columns of priority 1.
			{"table", []string{"get", "flags"}, 0, []string{
				`NAME   AGE`,
				`a      \d+s`,
				`b      \d+s`}, ""},
			{"all namespaces", []string{"get", "flag", "-A"}, 0, []string{
				`NAMESPACE +NAME +AGE`, `default +a +.*`, `default +b +.*`, `other +c +.*`}, ""},
			{"wide", []string{"get", "fl", "-o", "wide", "-l", "team=x"}, 0, []string{
				`NAME +AGE +REVISION +BACKEND +LOCKED-BY`, `a +\d+s +1 +cairn-builtin +<none>`}, ""},
			{"labels", []string{"get", "fl", "--show-labels", "-A"}, 0, []string{
				`NAMESPACE +NAME +AGE +LABELS`, `default +a +\d+s +team=x`, `default +b +\d+s +team=moon`, `other +c +\d+s +<none>`}, ""},
			{"selector", []string{"get", "flags.flipt.io", "-l", "team in (moon,z)"}, 0, []string{`NAME .*`, `b .*`}, ""},
			{"names, one missing", []string{"get", "flags", "a", "nope"}, cli.ExitNotFound, []string{`NAME .*`, `a .*`}, `error: flags.flipt.io "nope" not found`},
			{"resource/name", []string{"get", "flag/a", "Flag/b", "-o", "name"}, 0, []string{`flag\.flipt\.io/a`, `flag\.flipt\.io/b`}, ""},
			{"by kind and namespace", []string{"get", "Flag", "c", "-n", "other", "-o", "name"}, 0, []string{`flag\.flipt\.io/c`}, ""},
			{"typeinstances", []string{"get", "ti"}, 0, []string{
				`ID +NAMESPACE +NAME +TYPE +VERSION +BACKEND +LOCKED BY +AGE`, `.*`, `.*`, `.*`, `.*`, `.*`, `.*`, `.*`}, ""},
			{"a typeinstance by id", []string{"get", "typeinstance", a.ID}, 0, []string{
				`ID .*`, a.ID + ` +default +a +io\.flipt\.flag:1\.0\.0-alpha\.1 +1 +cairn-builtin +<none> +\d+s`}, ""},
			{"types", []string{"get", "types"}, 0, []string{
				`NAME +PATH +REVISION +REST +AGE`,
				`cap\.core\.type\.hub\.storage\.git:0\.1\.0 .*`,
				`cap\.core\.type\.hub\.storage\.gotemplate:0\.1\.0 .*`,
				`cap\.core\.type\.hub\.storage\.s3:0\.1\.0 .*`,
				`cap\.core\.type\.hub\.storage\.sqlite:0\.1\.0 .*`,
				`cap\.type\.database\.postgresql\.config:0\.1\.0 +cap\.type\.database\.postgresql\.config +0\.1\.0 +database\.cairn\.dev/v1 PostgresConfig +\d+s`,
				`cap\.type\.database\.postgresql\.server:0\.1\.0 .* <none> .*`,
				`cap\.type\.terraform\.output\.sensitive:0\.1\.0 .*`,
				`cap\.type\.terraform\.output:0\.1\.0 .*`,
				`cap\.type\.terraform\.state:0\.1\.0 .*`,
				`io\.flipt\.flag:1\.0\.0-alpha\.1 +io\.flipt\.flag +1\.0\.0-alpha\.1 +flipt\.io/v1alpha1 Flag +\d+s`}, ""},
			{"backends", []string{"get", "backends"}, 0, []string{
				`ID +ALIAS +URL +ACCEPT VALUE +ABSTRACT`, cairn.BuiltinBackendID + ` +cairn-builtin +<none> +true +true`,
				gotemplate.BackendID + ` +gotemplate +inprocess://gotemplate +false +false`}, ""},
			{"a backend by alias", []string{"get", "backend", "cairn-builtin", "-o", "name"}, 0, []string{`backend\.hub\.cairn\.dev/` + cairn.BuiltinBackendID}, ""},
			{"a served cairn Type", []string{"get", "pgc", "-o", "name"}, 0, []string{`postgresconfig\.database\.cairn\.dev/db-config`}, ""},
			{"nothing found", []string{"get", "flags", "-n", "empty"}, 0, []string{``}, "No resources found in empty namespace."},
			{"missing", []string{"get", "flag", "nope"}, cli.ExitNotFound, nil, `error: flags.flipt.io "nope" not found`},
			{"unknown resource", []string{"get", "widgets"}, cli.ExitNotFound, nil, `error: the server doesn't have a resource type "widgets"`},
			{"no resource", []string{"get"}, cli.ExitInvalid, nil, "you must specify the type of resource"},
			{"bad output", []string{"get", "flags", "-o", "xml"}, cli.ExitInvalid, nil, `--output "xml"`},
			{"names across namespaces", []string{"get", "flag", "a", "-A"}, cli.ExitInvalid, nil, "across all namespaces"},
			{"names and a selector", []string{"get", "flag", "a", "-l", "team=x"}, cli.ExitInvalid, nil, "selector"},
			{"a bad selector", []string{"get", "flags", "-l", "team in x"}, cli.ExitInvalid, nil, "error: "},
			{"a verb the resource lacks", []string{"get", "lockrequests"}, cli.ExitInvalid, nil, "lockrequests.hub.cairn.dev does not support list"},
			// Several kinds at once, as kubectl get pods,services.
			{"kinds", []string{"get", "flags,pgc"}, 0, []string{`NAME .*`, `a .*`, `b .*`, ``, `NAME .*`, `db-config .*`}, ""},
			{"kinds, by name", []string{"get", "flags,pgc", "-o", "name"}, 0, []string{`flag\.flipt\.io/a`, `flag\.flipt\.io/b`, `postgresconfig\.database\.cairn\.dev/db-config`}, ""},
			{"kinds named twice, listed once", []string{"get", "flags,flag,fl", "-o", "name"}, 0, []string{`flag\.flipt\.io/a`, `flag\.flipt\.io/b`}, ""},
			{"kinds and a name", []string{"get", "pgc,flags", "db-config", "-o", "name"}, cli.ExitNotFound, []string{`postgresconfig\.database\.cairn\.dev/db-config`}, `error: flags.flipt.io "db-config" not found`},
			{"kinds, one unknown", []string{"get", "flags,widgets"}, cli.ExitNotFound, nil, `error: the server doesn't have a resource type "widgets"`},
			{"kinds, one empty", []string{"get", "flags,"}, cli.ExitNotFound, nil, `error: the server doesn't have a resource type ""`},
			{"kinds in resource/name form", []string{"get", "flags,pgc/a"}, cli.ExitInvalid, nil, `"flags,pgc/a": arguments in resource/name form must have a single resource and name`},
			// -o jsonpath=TEMPLATE, as kubectl's (missing keys print nothing).
			{"jsonpath, one object", []string{"get", "flag", "a", "-o", "jsonpath={.spec.enabled}"}, 0, []string{`true`}, ""},
			{"jsonpath, a list of kinds", []string{"get", "flags,pgc", "-o", `jsonpath={range .items[*]}{.kind}/{.metadata.name}{"\n"}{end}`}, 0,
				[]string{`Flag/a`, `Flag/b`, `PostgresConfig/db-config`}, ""},
			{"jsonpath shows values", []string{"get", "pgc", "-o", "jsonpath={.items[0].spec.port}"}, 0, []string{`5432`}, ""},
			{"jsonpath, a missing key", []string{"get", "flag", "a", "-o", "jsonpath={.spec.nope}"}, 0, []string{``}, ""},
			{"jsonpath without a template", []string{"get", "flags", "-o", "jsonpath"}, cli.ExitInvalid, nil, "error: template format specified but no template given"},
			{"jsonpath that does not parse", []string{"get", "flags", "-o", "jsonpath={.items[*}"}, cli.ExitInvalid, nil, "error: error parsing jsonpath {.items[*}, unterminated array"},
			{"jsonpath that fails", []string{"get", "flags", "-o", "jsonpath={.items[5]}"}, cli.ExitInvalid, nil, `error: error executing jsonpath "{.items[5]}": array index out of bounds: index 5, length 2`},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				r := s.run("", tt.args...)
				if r.code != tt.code {
					t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", r.code, tt.code, r.stdout, r.stderr)
				}
				if tt.stdout != nil {
					matchLines(t, r.stdout, tt.stdout...)
				}
				if !strings.Contains(r.stderr, tt.stderr) {
					t.Errorf("stderr %q does not contain %q", r.stderr, tt.stderr)
				}
			})
		}

		t.Run("json: one object", func(t *testing.T) {
			var o rest.Object
			if err := json.Unmarshal([]byte(s.ok("get", "flag", "a", "-o", "json")), &o); err != nil ||
				o.Kind != "Flag" || o.Metadata.UID != a.ID || o.Status == nil || o.Status.TypeRef.Path != "io.flipt.flag" {
				t.Errorf("get -o json = %+v, %v", o, err)
			}
		})
		t.Run("yaml: a List", func(t *testing.T) {
			out := s.ok("get", "flags", "-o", "yaml")
			for _, w := range []string{"apiVersion: v1\n", "kind: List\n", "items:\n", "  kind: Flag\n", "    name: a\n", "    name: b\n"} {
				if !strings.Contains(out, w) {
					t.Errorf("get -o yaml lacks %q:\n%s", w, out)
				}
			}
		})
	})
}

func TestCreate(t *testing.T) {
	modes(t, func(t *testing.T, s *server) {
		rd := s.file("flags.json", flagsRD)
		tis := s.file("tis.yaml", `apiVersion: hub.cairn.dev/v1
kind: TypeInstance
metadata: {name: base}
spec: {typeRef: {path: cap.type.base, revision: 0.1.0}, value: {a: 1}}
---
apiVersion: hub.cairn.dev/v1
kind: TypeInstance
metadata: {name: top}
spec: {typeRef: {path: cap.type.top, revision: 0.1.0}, value: {b: 2}, uses: [base]}
`)
		steps := []struct {
			name string
			args []string
			code int
			out  []string // stdout lines, regular expressions
			err  string   // contained in stderr
		}{
			{"a Type and an object", []string{"create", "-f", rd, "-f", s.file("a.yaml", flagDoc("a", "", "", "{enabled: true}"))}, 0,
				[]string{`type\.hub\.cairn\.dev/io\.flipt\.flag:1\.0\.0-alpha\.1 created`, `flag\.flipt\.io/a created`}, ""},
			{"the Type again", []string{"create", "-f", rd}, cli.ExitConflict, []string{``}, "already exists"},
			{"the object again", []string{"create", "-f", s.file("a.yaml", flagDoc("a", "", "", "{}"))}, cli.ExitConflict, []string{``}, `flags.flipt.io "a" already exists`},
			{"TypeInstances in one batch", []string{"create", "-f", tis}, 0, []string{
				`typeinstance\.hub\.cairn\.dev/` + idRE + ` \(default/base\) created`,
				`typeinstance\.hub\.cairn\.dev/` + idRE + ` \(default/top\) created`}, ""},
			{"TypeInstances again: nothing created", []string{"create", "-f", tis}, cli.ExitConflict, []string{``}, "already exists"},
			{"an invalid object", []string{"create", "-f", s.file("b.yaml", flagDoc("b", "", "", "{colour: red}"))}, cli.ExitInvalid, []string{``}, "  spec"},
			{"no -f", []string{"create"}, cli.ExitInvalid, []string{``}, "give at least one -f"},
			{"a missing file", []string{"create", "-f", filepath.Join(s.dir, "nope.yaml")}, cli.ExitInvalid, []string{``}, "nope.yaml"},
		}
		for _, st := range steps {
			t.Run(st.name, func(t *testing.T) {
				r := s.run("", st.args...)
				if r.code != st.code || !strings.Contains(r.stderr, st.err) {
					t.Fatalf("exit %d stderr %q; want %d and %q", r.code, r.stderr, st.code, st.err)
				}
				matchLines(t, r.stdout, st.out...)
			})
		}
		ctx := context.Background()
		base, err := s.h.GetInstanceByName(ctx, "cap.type.base", "default", "base", false)
		if err != nil {
			t.Fatal(err)
		}
		top, err := s.h.GetInstanceByName(ctx, "cap.type.top", "default", "top", false)
		if err != nil || !slices.Contains(top.Uses, base.ID) {
			t.Errorf("top = %+v, %v; want it to use base %s", top, err, base.ID)
		}
	})
}

func TestDescribe(t *testing.T) {
	modes(t, func(t *testing.T, s *server) {
		s.ok("apply", "-f", quickstart)
		tests := []struct {
			args []string
			want []string
		}{
			{[]string{"describe", "pgc", "db-config"}, []string{
				"Name:              db-config\n", "Namespace:         default\n", "Kind:              PostgresConfig (database.cairn.dev/v1)\n",
				"Labels:            app=billing,env=dev\n", "Created By:        tester\n", "Generation:        1\n",
				"  Alias:         cairn-builtin\n", "Uses:\n", "cap.type.database.postgresql.server:0.1.0   default/db-server\n",
				"Used By:  <none>\n", "Spec:\n  defaultDBName: billing\n"}},
			{[]string{"describe", "type", "cap.type.database.postgresql.config:0.1.0"}, []string{
				"Path:             cap.type.database.postgresql.config\n", "REST:\n", "  Kind:         PostgresConfig\n", "JSON Schema:\n"}},
			{[]string{"describe", "backends/cairn-builtin"}, []string{"Alias:         cairn-builtin\n", "Abstract:      true\n"}},
		}
		for _, tt := range tests {
			t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
				out := s.ok(tt.args...)
				for _, w := range tt.want {
					if !strings.Contains(out, w) {
						t.Errorf("output lacks %q:\n%s", w, out)
					}
				}
			})
		}
		server, _ := s.h.GetInstanceByName(context.Background(), serverType, "default", "db-server", false)
		out := s.ok("describe", "ti", server.ID)
		if !strings.Contains(out, "Used By:\n") || !strings.Contains(out, "default/db-config") || !strings.Contains(out, "UID:               "+server.ID) {
			t.Errorf("describe ti:\n%s", out)
		}
		if r := s.run("", "describe", "pgc", "nope"); r.code != cli.ExitNotFound {
			t.Errorf("describe of a missing object: exit %d, want %d", r.code, cli.ExitNotFound)
		}
	})
}

func TestReplaceEditDelete(t *testing.T) {
	modes(t, func(t *testing.T, s *server) {
		s.withFlags()
		s.ok("apply", "-f", quickstart)

		// A replace keeps the file's resourceVersion: stale after a change.
		read := s.file("read.yaml", s.ok("get", "flag", "a", "-o", "yaml"))
		matchLines(t, s.ok("apply", "-f", s.file("a.yaml", flagDoc("a", "", "{team: x}", "{enabled: false}"))), `flag\.flipt\.io/a configured`)
		r := s.run("", "replace", "-f", read)
		if r.code != cli.ExitConflict || !strings.Contains(r.stderr, "the object has been modified") {
			t.Errorf("stale replace: exit %d, stderr %q; want %d and a conflict", r.code, r.stderr, cli.ExitConflict)
		}
		fresh := s.file("fresh.yaml", strings.Replace(s.ok("get", "flag", "a", "-o", "yaml"), "enabled: false", "enabled: true", 1))
		matchLines(t, s.ok("replace", "-f", fresh), `flag\.flipt\.io/a replaced`)
		if v := s.flag("default", "a").Latest.Value; string(v) != `{"enabled":true}` {
			t.Errorf("after replace: %s", v)
		}
		if r := s.run("", "replace", "-f", s.file("rd.json", flagsRD)); r.code != cli.ExitInvalid || !strings.Contains(r.stderr, "immutable") {
			t.Errorf("replace of a Type: exit %d, stderr %q", r.code, r.stderr)
		}

		// edit: the editor is a script that rewrites the file.
		editor := s.file("editor.sh", "#!/bin/sh\nsed -i 's/enabled: true/enabled: false/' \"$1\"\n")
		if err := os.Chmod(editor, 0o755); err != nil {
			t.Fatal(err)
		}
		failing := s.file("failing.sh", "#!/bin/sh\nexit 3\n")
		if err := os.Chmod(failing, 0o755); err != nil {
			t.Fatal(err)
		}
		server, _ := s.h.GetInstanceByName(context.Background(), serverType, "default", "db-server", false)
		portEditor := s.file("port.sh", "#!/bin/sh\nsed -i 's/port: 5432/port: 6543/' \"$1\"\n")
		if err := os.Chmod(portEditor, 0o755); err != nil {
			t.Fatal(err)
		}
		jsonEditor := s.file("json.sh", "#!/bin/sh\nsed -i 's/\"enabled\": false/\"enabled\": true/' \"$1\"\n")
		breaking := s.file("breaking.sh", "#!/bin/sh\necho 'spec: [' >> \"$1\"\n")
		for _, f := range []string{jsonEditor, breaking} {
			if err := os.Chmod(f, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		edits := []struct {
			name   string
			editor string
			args   []string
			code   int
			out    string
			errOut string
		}{
			{"a change", editor, []string{"edit", "flag", "a"}, 0, "flag.flipt.io/a edited\n", ""},
			{"no change", "true", []string{"edit", "flag/a"}, 0, "Edit cancelled, no changes made.\n", ""},
			{"as JSON", jsonEditor, []string{"edit", "flag", "a", "-o", "json"}, 0, "flag.flipt.io/a edited\n", ""},
			{"back", editor, []string{"edit", "flag", "a"}, 0, "flag.flipt.io/a edited\n", ""},
			{"a file that no longer parses", breaking, []string{"edit", "flag", "a"}, cli.ExitInvalid, "", "not valid YAML or JSON (kept in "},
			{"a typeinstance", portEditor, []string{"edit", "ti", server.ID}, 0, "typeinstance.hub.cairn.dev/" + server.ID + " edited\n", ""},
			{"the editor fails", failing, []string{"edit", "flag", "a"}, cli.ExitInternal, "", "failing.sh"},
			{"a resource without update", "true", []string{"edit", "type", "io.flipt.flag:1.0.0-alpha.1"}, cli.ExitInvalid, "", "does not support update"},
			{"missing", "true", []string{"edit", "flag", "nope"}, cli.ExitNotFound, "", "not found"},
		}
		for _, tt := range edits {
			t.Run("edit: "+tt.name, func(t *testing.T) {
				r := s.runCtx(context.Background(), nil, map[string]string{"EDITOR": tt.editor}, "", s.args(tt.args...)...)
				if r.code != tt.code || r.stdout != tt.out || !strings.Contains(r.stderr, tt.errOut) {
					t.Errorf("exit %d stdout %q stderr %q; want %d, %q, %q", r.code, r.stdout, r.stderr, tt.code, tt.out, tt.errOut)
				}
			})
		}
		if a := s.flag("default", "a"); string(a.Latest.Value) != `{"enabled":false}` {
			t.Errorf("after edit: %s", a.Latest.Value)
		}
		if got, _ := s.h.GetInstance(context.Background(), server.ID, true); !strings.Contains(string(got.Latest.Value), `"port":6543`) {
			t.Errorf("db-server after edit: %s", got.Latest.Value)
		}

		// Locks, refusals, deletes.
		a := s.flag("default", "a")
		steps := []struct {
			name string
			args []string
			code int
			out  string // a line of stdout, regular expression
			err  string // contained in stderr
		}{
			{"lock by resource/name", []string{"lock", "flag/a", "--owner", "bob"}, 0, `typeinstance\.hub\.cairn\.dev/` + a.ID + ` locked by bob`, ""},
			{"delete of a locked object", []string{"delete", "flag", "a"}, cli.ExitLocked, ``, "locked"},
			{"write of a locked object", []string{"apply", "-f", s.file("a2.yaml", flagDoc("a", "", "", "{enabled: true}"))}, cli.ExitLocked, ``, "locked"},
			{"write as the lock owner", []string{"apply", "-f", s.file("a3.yaml", flagDoc("a", "", "", "{enabled: true}")), "--lock-owner", "bob"}, 0, `flag\.flipt\.io/a configured`, ""},
			{"unlock by another owner", []string{"unlock", a.ID, "--owner", "carol"}, cli.ExitLocked, ``, "error: "},
			{"lock of a missing id", []string{"lock", "00000000-0000-4000-8000-000000000009", "--owner", "bob"}, cli.ExitNotFound, ``, "00000000-0000-4000-8000-000000000009"},
			{"lock without owner", []string{"lock", a.ID}, cli.ExitInvalid, ``, "needs --owner"},
			{"unlock", []string{"unlock", a.ID, "--owner", "bob"}, 0, `typeinstance\.hub\.cairn\.dev/` + a.ID + ` unlocked by bob`, ""},
			{"delete of a used instance", []string{"delete", "ti", server.ID}, cli.ExitLocked, ``, "used by"},
			{"delete", []string{"delete", "flag", "a"}, 0, `flag\.flipt\.io "a" deleted`, ""},
			{"delete again", []string{"delete", "flag", "a"}, cli.ExitNotFound, ``, `flags.flipt.io "a" not found`},
			{"delete, ignoring the missing", []string{"delete", "flag", "a", "--ignore-not-found"}, 0, ``, ""},
			{"delete by selector", []string{"delete", "flags", "-l", "team=moon"}, 0, `flag\.flipt\.io "b" deleted`, ""},
			{"delete without a name", []string{"delete", "flags"}, cli.ExitInvalid, ``, "no name was specified"},
			{"delete of a resource without delete", []string{"delete", "backend", "cairn-builtin"}, cli.ExitInvalid, ``, "does not support delete"},
			{"delete -f: users first, then Types", []string{"delete", "-f", quickstart}, 0, `typeinstance\.hub\.cairn\.dev "` + idRE + `" deleted`, ""},
		}
		for _, st := range steps {
			t.Run(st.name, func(t *testing.T) {
				r := s.run("", st.args...)
				if r.code != st.code || !strings.Contains(r.stderr, st.err) {
					t.Fatalf("exit %d stderr %q; want %d and %q\nstdout: %s", r.code, r.stderr, st.code, st.err, r.stdout)
				}
				first, _, _ := strings.Cut(r.stdout, "\n")
				if !regexp.MustCompile("^" + st.out + "$").MatchString(first) {
					t.Errorf("stdout %q, want a first line matching %q", r.stdout, st.out)
				}
			})
		}
		if n, err := s.h.ListInstances(context.Background(), store.InstanceFilter{}, false); err != nil || len(n) != 3 {
			t.Errorf("after the deletes: %d instances (%v), want the built-in and gotemplate backends and flag c", len(n), err)
		}
		if _, err := s.h.GetType(context.Background(), cairn.TypeRef{Path: configType, Revision: "0.1.0"}); !cairn.HasCode(err, cairn.CodeNotFound) {
			t.Errorf("delete -f left the Type: %v", err)
		}
	})
}

func TestAPIResources(t *testing.T) {
	modes(t, func(t *testing.T, s *server) {
		s.withFlags()
		matchLines(t, s.ok("api-resources"),
			`NAME +SHORTNAMES +APIVERSION +NAMESPACED +KIND`,
			`flags +fl +flipt\.io/v1alpha1 +true +Flag`,
			`backends +hub\.cairn\.dev/v1 +false +Backend`,
			`installs +hub\.cairn\.dev/v1 +false +Install`,
			`lockrequests +hub\.cairn\.dev/v1 +false +LockRequest`,
			`plans +hub\.cairn\.dev/v1 +false +Plan`,
			`policies +hub\.cairn\.dev/v1 +false +Policy`,
			`proposals +hub\.cairn\.dev/v1 +false +Proposal`,
			`stacks +hub\.cairn\.dev/v1 +false +Stack`,
			`typeinstances +ti +hub\.cairn\.dev/v1 +false +TypeInstance`,
			`types +hub\.cairn\.dev/v1 +false +Type`,
			`clusterrolebindings +rbac\.authorization\.k8s\.io/v1 +false +ClusterRoleBinding`,
			`clusterroles +rbac\.authorization\.k8s\.io/v1 +false +ClusterRole`,
			`rolebindings +rbac\.authorization\.k8s\.io/v1 +true +RoleBinding`,
			`roles +rbac\.authorization\.k8s\.io/v1 +true +Role`,
			`terraformoutputs +tfout +terraform\.cairn\.dev/v1 +true +TerraformOutput`,
			`terraformsensitiveoutputs +terraform\.cairn\.dev/v1 +true +TerraformSensitiveOutput`,
			`terraformstates +tfstate +terraform\.cairn\.dev/v1 +true +TerraformState`,
		)
		matchLines(t, s.ok("api-resources", "--namespaced=true", "-o", "name"), `flags\.flipt\.io`,
			`rolebindings\.rbac\.authorization\.k8s\.io`, `roles\.rbac\.authorization\.k8s\.io`,
			`terraformoutputs\.terraform\.cairn\.dev`, `terraformsensitiveoutputs\.terraform\.cairn\.dev`, `terraformstates\.terraform\.cairn\.dev`)
		if out := s.ok("api-resources", "-o", "wide"); !strings.Contains(out, "[create delete deletecollection get list patch update watch]") {
			t.Errorf("api-resources -o wide lacks the typeinstances verbs:\n%s", out)
		}
	})
}

// outputBuffer is a standard output a test reads while the CLI writes it.
type outputBuffer struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	written chan struct{} // signalled after every write
}

func newOutputBuffer() *outputBuffer { return &outputBuffer{written: make(chan struct{}, 1)} }

func (b *outputBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n, err := b.buf.Write(p)
	select {
	case b.written <- struct{}{}:
	default:
	}
	return n, err
}

func (b *outputBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// waitFor waits until the output matches re; the timeout only bounds a
// failing test.
func (b *outputBuffer) waitFor(t *testing.T, re string) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for !regexp.MustCompile(re).MatchString(b.String()) {
		select {
		case <-b.written:
		case <-timeout:
			t.Fatalf("output never matched %q:\n%s", re, b.String())
		}
	}
}

func TestWatch(t *testing.T) {
	modes(t, func(t *testing.T, s *server) {
		s.withFlags()
		tests := []struct {
			name   string
			args   []string
			before string // output once the list is printed
			change func()
			after  string // output the change adds
		}{
			{"table with events", []string{"get", "flags", "-w", "--output-watch-events"},
				`(?m)^EVENT +NAME +AGE\nADDED +a +.*\nADDED +b +`,
				func() {
					if r := s.run(flagDoc("new", "", "", "{enabled: true}"), "apply", "-f", "-"); r.code != 0 {
						t.Errorf("apply: %s", r.stderr)
					}
				},
				`(?m)^ADDED +new +\d+s$`},
			{"json events", []string{"get", "flags", "b", "-w", "-o", "json", "--output-watch-events"},
				`(?s)"type": "ADDED",.*"name": "b"`,
				func() { s.ok("apply", "-f", s.file("b.yaml", flagDoc("b", "", "{team: moon}", "{enabled: true}"))) },
				`(?s)"type": "MODIFIED",.*"name": "b".*"enabled": true`},
			{"names of a selection", []string{"get", "flags", "-w", "-o", "name", "-l", "team=x"},
				`(?m)^flag\.flipt\.io/a$`,
				func() { s.ok("delete", "flag", "a") },
				`(?m)^flag\.flipt\.io/a\nflag\.flipt\.io/a$`},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				out := newOutputBuffer()
				done := make(chan result, 1)
				go func() { done <- s.runCtx(ctx, out, nil, "", s.args(tt.args...)...) }()
				out.waitFor(t, tt.before)
				// The watch starts from the list's resourceVersion, so a change
				// made once the list is printed is never missed.
				tt.change()
				out.waitFor(t, tt.after)
				cancel() // Ctrl-C
				if r := <-done; r.code != 0 {
					t.Errorf("get -w: exit %d after the interrupt: %s", r.code, r.stderr)
				}
			})
		}
	})
}

func TestClientConfigAndModes(t *testing.T) {
	s := newServer(t)
	s.withFlags()
	cfg := filepath.Join(s.dir, "conf", "config.yaml")
	env := map[string]string{cli.EnvConfig: cfg}
	run := func(more map[string]string, args ...string) result {
		t.Helper()
		vars := map[string]string{}
		for k, v := range env {
			vars[k] = v
		}
		for k, v := range more {
			vars[k] = v
		}
		return s.runCtx(context.Background(), nil, vars, "", args...)
	}
	steps := []struct {
		name string
		more map[string]string
		args []string
		code int
		out  string // contained in stdout
		err  string // contained in stderr
	}{
		{"no server: local mode", nil, []string{"list"}, 0, "cairn-system", ""},
		{"view an empty configuration", nil, []string{"config", "view"}, 0, "contexts: []", ""},
		{"set-context", nil, []string{"config", "set-context", "test", "--server", s.url}, 0, `Context "test" created.`, ""},
		{"set-context again", nil, []string{"config", "set-context", "test", "--server", s.url}, 0, `Context "test" modified.`, ""},
		{"set-context of a bad URL", nil, []string{"config", "set-context", "bad", "--server", "localhost:1"}, cli.ExitInvalid, "", "want a URL like"},
		{"set-context of an unreachable server", nil, []string{"config", "set-context", "down", "--server", "http://127.0.0.1:1"}, 0, `Context "down" created.`, ""},
		{"a context that is not current: still local", nil, []string{"list"}, 0, "cairn-system", ""},
		{"--context", nil, []string{"--context", "test", "get", "flags", "-o", "name"}, 0, "flag.flipt.io/a", ""},
		{"--context of nothing", nil, []string{"--context", "nope", "get", "flags"}, cli.ExitNotFound, "", `no context exists with that name`},
		{"use-context of nothing", nil, []string{"config", "use-context", "nope"}, cli.ExitNotFound, "", `no context exists with the name "nope"`},
		{"use-context", nil, []string{"config", "use-context", "test"}, 0, `Switched to context "test".`, ""},
		{"current-context", nil, []string{"config", "current-context"}, 0, "test\n", ""},
		{"view", nil, []string{"config", "view", "-o", "json"}, 0, `"current-context": "test"`, ""},
		{"the current context: client mode", nil, []string{"get", "flags", "-o", "name"}, 0, "flag.flipt.io/b", ""},
		{"list in client mode: the server's instances", nil, []string{"list"}, 0, "io.flipt.flag", ""},
		{"--server '' forces local mode", nil, []string{"--server=", "list"}, 0, "cairn-system", ""},
		{"version in client mode", nil, []string{"version"}, 0, "cairn ", ""},
		{"$CAIRN_SERVER over the context", map[string]string{cli.EnvServer: "http://127.0.0.1:1"}, []string{"get", "flags"},
			cli.ExitUnavailable, "", "error: cannot reach the cairn server at http://127.0.0.1:1"},
		{"--server over $CAIRN_SERVER", map[string]string{cli.EnvServer: "http://127.0.0.1:1"}, []string{"--server", s.url, "get", "flags", "-o", "name"}, 0, "flag.flipt.io/a", ""},
		// The last of a repeated flag counts, as cobra (and kubectl) read it:
		// an alias with --server, given another --server, goes there.
		{"the last --server", nil, []string{"--server", s.url, "--server", "http://127.0.0.1:1", "get", "flags"},
			cli.ExitUnavailable, "", "error: cannot reach the cairn server at http://127.0.0.1:1"},
		{"the last --server=", nil, []string{"--server=http://127.0.0.1:1", "get", "flags", "--server=" + s.url, "-o", "name"}, 0, "flag.flipt.io/a", ""},
		{"the last --context", nil, []string{"--context", "test", "--context", "down", "get", "flags"},
			cli.ExitUnavailable, "", "error: cannot reach the cairn server at http://127.0.0.1:1"},
		{"a server that is no URL", map[string]string{cli.EnvServer: "127.0.0.1:8080"}, []string{"get", "flags"}, cli.ExitInvalid, "", "from $CAIRN_SERVER"},
		{"an unreachable context", nil, []string{"--context", "down", "api-resources"}, cli.ExitUnavailable, "", "cannot reach the cairn server at http://127.0.0.1:1"},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			r := run(st.more, st.args...)
			if r.code != st.code || !strings.Contains(r.stdout, st.out) || !strings.Contains(r.stderr, st.err) {
				t.Errorf("exit %d\nstdout %q\nstderr %q\nwant %d, %q, %q", r.code, r.stdout, r.stderr, st.code, st.out, st.err)
			}
		})
	}
	if fi, err := os.Stat(cfg); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("configuration file: %v, %v; want mode 0600", fi, err)
	}

	t.Run("a broken configuration file", func(t *testing.T) {
		broken := writeFile(t, t.TempDir(), "config.yaml", "current-context: x\ncontexts: [{name: x, sever: http://h}]\n")
		r := s.runCtx(context.Background(), nil, map[string]string{cli.EnvConfig: broken}, "", "get", "flags")
		if r.code != cli.ExitInvalid || !strings.Contains(r.stderr, "is not valid") {
			t.Errorf("exit %d stderr %q", r.code, r.stderr)
		}
	})
	t.Run("XDG_CONFIG_HOME", func(t *testing.T) {
		xdg := t.TempDir()
		writeFile(t, xdg, "cairn/config.yaml", "current-context: x\ncontexts: [{name: x, server: "+s.url+"}]\n")
		r := s.runCtx(context.Background(), nil, map[string]string{"XDG_CONFIG_HOME": xdg}, "", "get", "flags", "-o", "name")
		if r.code != 0 || !strings.Contains(r.stdout, "flag.flipt.io/a") {
			t.Errorf("exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
		}
	})
}

// config view shows what a context holds but not its token, as kubectl
// config view does: the output is for reading and pasting; --raw prints it.
func TestConfigViewRedactsTokens(t *testing.T) {
	const token = "s3cr3t-t0ken"
	cfg := writeFile(t, t.TempDir(), "config.yaml", "current-context: prod\ncontexts: [{name: prod, server: https://cairn.example.com:8443, token: "+token+"}]\n")
	view := func(args ...string) string {
		t.Helper()
		var out, errOut bytes.Buffer
		code := cli.Main(context.Background(), append([]string{"config", "view"}, args...), cli.Env{
			Stdout: &out, Stderr: &errOut, Getenv: func(k string) string { return map[string]string{cli.EnvConfig: cfg}[k] },
		})
		if code != 0 {
			t.Fatalf("config view %v: exit %d: %s", args, code, errOut.String())
		}
		return out.String()
	}
	for _, args := range [][]string{nil, {"-o", "json"}} {
		if out := view(args...); strings.Contains(out, token) || !strings.Contains(out, "REDACTED") {
			t.Errorf("config view %v shows the token, or does not say it is redacted:\n%s", args, out)
		}
	}
	if out := view("--raw"); !strings.Contains(out, "token: "+token) {
		t.Errorf("config view --raw does not show the token:\n%s", out)
	}
	// Nothing of the file changed.
	if b, _ := os.ReadFile(cfg); !strings.Contains(string(b), token) {
		t.Errorf("the configuration file lost its token:\n%s", b)
	}
}
