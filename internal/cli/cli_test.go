package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/hub"
	"github.com/cairn-dev/cairn/internal/cli"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/sqlite"
)

const quickstart = "../../examples/quickstart"

// env is one data directory the CLI runs against, in-process.
type env struct {
	t   *testing.T
	dir string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	return &env{t: t, dir: t.TempDir()}
}

type result struct {
	code           int
	stdout, stderr string
}

// run runs the CLI with args and stdin as the user "tester".
func (e *env) run(stdin string, args ...string) result {
	e.t.Helper()
	var out, errOut bytes.Buffer
	vars := map[string]string{"USER": "tester", cli.EnvDataDir: e.dir}
	code := cli.Main(context.Background(), args, cli.Env{
		Stdin:  strings.NewReader(stdin),
		Stdout: &out,
		Stderr: &errOut,
		Getenv: func(k string) string { return vars[k] },
	})
	return result{code: code, stdout: out.String(), stderr: errOut.String()}
}

// ok runs a command that must succeed and returns its standard output.
func (e *env) ok(args ...string) string {
	e.t.Helper()
	r := e.run("", args...)
	if r.code != 0 {
		e.t.Fatalf("cairn %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

// hub opens the data directory's store, to check what a command stored.
func (e *env) hub() *hub.Hub {
	e.t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(e.dir, "cairn.db"))
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { st.Close() })
	h, err := hub.New(ctx, hub.Config{Store: st})
	if err != nil {
		e.t.Fatal(err)
	}
	return h
}

// byName returns the instance of typePath named name in the default namespace.
func (e *env) byName(typePath, name string) cairn.Instance {
	e.t.Helper()
	return byName(e.t, e.hub(), typePath, name)
}

// hub is the hub on the fixture's store.
func (s *server) hub() *hub.Hub { return s.h }

// byName returns the instance of typePath named name in the default namespace.
func (s *server) byName(typePath, name string) cairn.Instance {
	s.t.Helper()
	return byName(s.t, s.h, typePath, name)
}

func byName(t *testing.T, h *hub.Hub, typePath, name string) cairn.Instance {
	t.Helper()
	inst, err := h.GetInstanceByName(context.Background(), typePath, cairn.DefaultNamespace, name, true)
	if err != nil {
		t.Fatalf("get %s %s: %v", typePath, name, err)
	}
	return inst
}

const (
	configType = "cap.type.database.postgresql.config"
	serverType = "cap.type.database.postgresql.server"
)

// writeFile writes a file under dir and returns its path.
func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func matchLines(t *testing.T, got string, want ...string) {
	t.Helper()
	lines := strings.Split(strings.TrimRight(got, "\n"), "\n")
	if len(lines) != len(want) {
		t.Fatalf("got %d lines, want %d:\n%s", len(lines), len(want), got)
	}
	for i, w := range want {
		if !regexp.MustCompile("^" + w + "$").MatchString(lines[i]) {
			t.Errorf("line %d = %q, want match for %q", i+1, lines[i], w)
		}
	}
}

const idRE = `[0-9a-f-]{36}`

func TestApplyQuickstart(t *testing.T) {
	modes(t, func(t *testing.T, e *server) {
		out := e.ok("apply", "-f", quickstart)
		matchLines(t, out,
			`type\.hub\.cairn\.dev/cap\.type\.database\.postgresql\.server:0\.1\.0 created`,
			`type\.hub\.cairn\.dev/cap\.type\.database\.postgresql\.config:0\.1\.0 created`,
			`typeinstance\.hub\.cairn\.dev/`+idRE+` \(default/db-server\) created`,
			`typeinstance\.hub\.cairn\.dev/`+idRE+` \(default/db-config\) created`,
		)

		server, config := e.byName(serverType, "db-server"), e.byName(configType, "db-config")
		if !slices.Contains(config.Uses, server.ID) || !slices.Contains(config.Uses, cairn.BuiltinBackendID) {
			t.Errorf("db-config uses %v, want the server %s and the built-in backend", config.Uses, server.ID)
		}
		if !slices.Contains(server.UsedBy, config.ID) {
			t.Errorf("db-server usedBy %v, want %s", server.UsedBy, config.ID)
		}
		if config.Latest.CreatedBy != "tester" || config.Latest.ResourceVersion != 1 {
			t.Errorf("db-config latest = %+v, want version 1 by tester", config.Latest)
		}
		if config.Alias != "db-config" || config.Labels["app"] != "billing" {
			t.Errorf("db-config alias %q labels %v", config.Alias, config.Labels)
		}
		if !cairn.JSONEqual(server.Latest.Value, json.RawMessage(`{"host":"postgres.dev.svc.cluster.local","port":5432,"version":"16"}`)) {
			t.Errorf("db-server value = %s", server.Latest.Value)
		}
		if !strings.Contains(out, config.ID) {
			t.Errorf("apply output does not name the id %s", config.ID)
		}

		// Applying the same documents again changes nothing.
		matchLines(t, e.ok("apply", "-f", quickstart),
			`type\.hub\.cairn\.dev/cap\.type\.database\.postgresql\.server:0\.1\.0 unchanged`,
			`type\.hub\.cairn\.dev/cap\.type\.database\.postgresql\.config:0\.1\.0 unchanged`,
			`typeinstance\.hub\.cairn\.dev/`+server.ID+` \(default/db-server\) unchanged`,
			`typeinstance\.hub\.cairn\.dev/`+config.ID+` \(default/db-config\) unchanged`,
		)
		if got := e.byName(configType, "db-config").Latest.ResourceVersion; got != 1 {
			t.Errorf("resource version after a no-op apply = %d, want 1", got)
		}
	})
}

func TestApplyChanges(t *testing.T) {
	modes(t, func(t *testing.T, e *server) {
		e.ok("apply", "-f", quickstart)
		before := e.byName(serverType, "db-server")

		dir := t.TempDir()
		changed := strings.Replace(readFile(t, filepath.Join(quickstart, "10-server.yaml")), "port: 5432", "port: 5433", 1)
		writeFile(t, dir, "server.yaml", changed)
		// Key order and number spelling do not count as a change.
		writeFile(t, dir, "config.json", `{"apiVersion":"hub.cairn.dev/v1","kind":"TypeInstance",
	  "metadata":{"name":"db-config","labels":{"env":"dev","app":"billing"}},
	  "spec":{"typeRef":{"path":"cap.type.database.postgresql.config","revision":"0.1.0"},
	    "value":{"port":5432.0,"host":"postgres.dev.svc.cluster.local","defaultDBName":"billing",
	      "superuser":{"password":"change-me-please","username":"billing"}},
	    "uses":["db-server"]}}`)
		matchLines(t, e.ok("apply", "-f", dir),
			`typeinstance\.hub\.cairn\.dev/`+idRE+` \(default/db-config\) unchanged`,
			`typeinstance\.hub\.cairn\.dev/`+before.ID+` \(default/db-server\) configured`,
		)
		after := e.byName(serverType, "db-server")
		if after.Latest.ResourceVersion != 2 || !strings.Contains(string(after.Latest.Value), `"port":5433`) {
			t.Errorf("db-server after apply: version %d value %s, want version 2 with port 5433", after.Latest.ResourceVersion, after.Latest.Value)
		}
		rvs, err := e.hub().ResourceVersions(context.Background(), after.ID, true)
		if err != nil || len(rvs) != 2 || !strings.Contains(string(rvs[0].Value), `"port":5432`) {
			t.Errorf("resource versions = %+v, %v; want 2 with the old value kept", rvs, err)
		}

		// Dropping a label is a change too: the document is the desired state.
		writeFile(t, dir, "server.yaml", strings.Replace(changed, "  labels:\n    env: dev\n", "", 1))
		out := e.ok("apply", "-f", filepath.Join(dir, "server.yaml"))
		matchLines(t, out, `typeinstance\.hub\.cairn\.dev/`+before.ID+` \(default/db-server\) configured`)
		if got := e.byName(serverType, "db-server"); len(got.Labels) != 0 || got.Latest.ResourceVersion != 3 {
			t.Errorf("labels %v version %d, want none and 3", got.Labels, got.Latest.ResourceVersion)
		}

		// An instance referred to by id is updated in place.
		byID := writeFile(t, dir, "by-id.yaml", `apiVersion: hub.cairn.dev/v1
kind: TypeInstance
metadata:
  id: `+before.ID+`
spec:
  value: {host: db.example.com, port: 5433}
`)
		matchLines(t, e.ok("apply", "-f", byID), `typeinstance\.hub\.cairn\.dev/`+before.ID+` \(default/db-server\) configured`)
	})
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestApplyStdinAndJSONOutput(t *testing.T) {
	modes(t, func(t *testing.T, e *server) {
		in := `[
 {"apiVersion":"hub.cairn.dev/v1","kind":"TypeInstance","metadata":{"alias":"a","name":"one"},"spec":{"typeRef":{"path":"cap.type.x","revision":"0.1.0"},"value":1}},
 {"apiVersion":"hub.cairn.dev/v1","kind":"TypeInstance","metadata":{"name":"two"},"spec":{"typeRef":{"path":"cap.type.x","revision":"0.1.0"},"value":2,"uses":["a"]}}
]`
		r := e.run(in, "apply", "-f", "-")
		if r.code != 0 {
			t.Fatalf("exit %d: %s", r.code, r.stderr)
		}
		one, two := e.byName("cap.type.x", "one"), e.byName("cap.type.x", "two")
		matchLines(t, r.stdout, `typeinstance\.hub\.cairn\.dev/`+one.ID+` \(default/one\) created`,
			`typeinstance\.hub\.cairn\.dev/`+two.ID+` \(default/two\) created`)
		if !slices.Contains(two.Uses, one.ID) {
			t.Errorf("two uses %v, want %s", two.Uses, one.ID)
		}
		// apply has kubectl's output, not the hub commands' -o.
		if r := e.run(in, "apply", "-f", "-", "-o", "json"); r.code != cli.ExitInvalid {
			t.Errorf("apply -o json: exit %d, want a usage error", r.code)
		}
	})
}

// quickstartIDs applies the quickstart and returns the server and config ids.
func quickstartIDs(t *testing.T, e *server) (server, config string) {
	t.Helper()
	e.ok("apply", "-f", quickstart)
	return e.byName(serverType, "db-server").ID, e.byName(configType, "db-config").ID
}

func TestReadCommands(t *testing.T) {
	modes(t, func(t *testing.T, e *server) {
		serverID, configID := quickstartIDs(t, e)

		tests := []struct {
			name string
			args []string
			// Table output must match every pattern; JSON and YAML output
			// must decode and contain every id in ids.
			patterns []string
			ids      []string
		}{
			{"get by id", []string{"get", configID}, []string{
				`ID\s+NAMESPACE\s+NAME\s+TYPE\s+VERSION\s+BACKEND\s+LOCKED BY\s+AGE`,
				configID + `\s+default\s+db-config\s+cap\.type\.database\.postgresql\.config:0\.1\.0\s+1\s+cairn-builtin\s+<none>\s+\d+s`,
			}, []string{configID}},
			{"get by name", []string{"get", serverType, "db-server", "-n", "default"}, []string{serverID + `\s+default\s+db-server`}, []string{serverID}},
			{"list", []string{"list"}, []string{
				`ID\s+NAMESPACE\s+NAME\s+TYPE\s+VERSION\s+BACKEND\s+LOCKED BY\s+AGE\n`,
				cairn.BuiltinBackendID + `\s+cairn-system\s+builtin`, configID, serverID,
			}, []string{cairn.BuiltinBackendID, configID, serverID}},
			{"list by type pattern", []string{"list", "--type", "cap.type.database.*"}, []string{configID, serverID}, []string{configID, serverID}},
			{"list by type and revision", []string{"list", "--type", configType + ":0.1.0", "--values"}, []string{configID + `.*"superuser"`}, []string{configID}},
			{"list by selector and namespace", []string{"list", "-l", "app=billing", "-n", "default"}, []string{configID}, []string{configID}},
			{"list by attribute", []string{"list", "--attribute", cairn.StorageAttributePath}, []string{cairn.BuiltinBackendID}, []string{cairn.BuiltinBackendID}},
			{"list excluding attribute", []string{"list", "--exclude-attribute", cairn.StorageAttributePath + ":" + cairn.CoreRevision, "--created-by", "tester"}, []string{configID, serverID}, []string{configID, serverID}},
			{"describe", []string{"describe", configID}, []string{
				`UID:\s+` + configID, `Alias:\s+db-config`, `Labels:\s+app=billing,env=dev`,
				`Backend:\n\s+ID:\s+` + cairn.BuiltinBackendID + `\n\s+Alias:\s+cairn-builtin`,
				`Uses:\n.*\n\s+` + serverID + `\s+cap\.type\.database\.postgresql\.server:0\.1\.0\s+default/db-server`,
				`Used By:\s+<none>`, `defaultDBName: billing`,
				`Resource Versions:\n\s+VERSION\s+CREATED BY.*\n\s+1\s+tester\s`,
			}, nil},
			{"types list", []string{"types", "list", "--prefix", "cap.type.database"}, []string{
				`PATH\s+REVISION\s+ADDITIONAL REFS\s+REST KIND\s+AGE`,
				configType + `\s+0\.1\.0\s+cap\.core\.type\.database\s+PostgresConfig\.database\.cairn\.dev/v1`,
			}, []string{configType, serverType}},
			{"types list by parent", []string{"types", "list", "--parent", cairn.StorageTypePrefix}, []string{`cap\.core\.type\.hub\.storage\.sqlite`}, []string{"cap.core.type.hub.storage.sqlite"}},
			{"types get", []string{"types", "get", configType + ":0.1.0"}, []string{configType}, []string{configType, "superuser"}},
			{"version", []string{"version"}, []string{`^cairn \S+.* go1\.\d+`}, []string{"goVersion"}},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				out := e.ok(tt.args...)
				for _, p := range tt.patterns {
					if !regexp.MustCompile("(?m)" + p).MatchString(out) {
						t.Errorf("output does not match %q:\n%s", p, out)
					}
				}
				for _, format := range []string{"json", "yaml"} {
					if tt.ids == nil {
						break // describe is for people: no -o
					}
					out := e.ok(append(tt.args, "-o", format)...)
					var v any
					var err error
					if format == "json" {
						err = json.Unmarshal([]byte(out), &v)
					} else {
						err = yamlUnmarshal(out, &v)
					}
					if err != nil {
						t.Errorf("-o %s: %v\n%s", format, err, out)
					}
					for _, id := range tt.ids {
						if !strings.Contains(out, id) {
							t.Errorf("-o %s output does not contain %s:\n%s", format, id, out)
						}
					}
				}
			})
		}

		// get -o json prints the object as served; list -o json the domain objects.
		if inst := instanceOf(t, e.ok("get", configID, "-o", "json")); inst.ID != configID || inst.TypeRef.Path != configType || !strings.Contains(string(inst.Latest.Value), "superuser") {
			t.Errorf("get -o json = %+v", inst)
		}
		var list []cairn.Instance
		if err := json.Unmarshal([]byte(e.ok("list", "-n", "nowhere", "-o", "json")), &list); err != nil || list == nil || len(list) != 0 {
			t.Errorf("empty list -o json = %v, %v; want []", list, err)
		}
		if r := e.run("", "list", "-n", "nowhere"); r.code != 0 || r.stdout != "" || !strings.Contains(r.stderr, "No TypeInstances found.") {
			t.Errorf("empty list = %+v", r)
		}
	})
}

func TestWriteCommands(t *testing.T) {
	modes(t, func(t *testing.T, e *server) {
		serverID, configID := quickstartIDs(t, e)
		dir := t.TempDir()
		valueFile := writeFile(t, dir, "value.yaml", "host: db2.example.com\nport: 6543\n")

		// update: a value file, then attributes from stdin-free flags.
		matchLines(t, e.ok("update", serverID, "--value-file", valueFile),
			`typeinstance/default/db-server \(id `+serverID+`\) configured, resource version 2`)
		r := e.run(`{"host": "db3.example.com", "port": 1}`, "update", serverID, "--value-file", "-", "--attribute", "cap.attribute.db.primary:0.1.0", "-o", "json")
		if r.code != 0 {
			t.Fatalf("update from stdin: exit %d: %s", r.code, r.stderr)
		}
		var updated cairn.Instance
		if err := json.Unmarshal([]byte(r.stdout), &updated); err != nil {
			t.Fatal(err)
		}
		if updated.Latest.ResourceVersion != 3 || len(updated.Latest.Attributes) != 1 || updated.Latest.Attributes[0].Path != "cap.attribute.db.primary" {
			t.Errorf("update -o json = %+v", updated)
		}
		if v := e.byName(serverType, "db-server").Latest.Value; !cairn.JSONEqual(v, json.RawMessage(`{"host":"db3.example.com","port":1}`)) {
			t.Errorf("value after update = %s", v)
		}
		// The same update again changes nothing and adds no version: it
		// says so, as kubectl apply says unchanged.
		matchLines(t, e.run(`{"host": "db3.example.com", "port": 1}`, "update", serverID, "--value-file", "-", "--attribute", "cap.attribute.db.primary:0.1.0").stdout,
			`typeinstance/default/db-server \(id `+serverID+`\) unchanged, resource version 3`)

		// lock: updates and deletes need the owner; unlock by another owner fails.
		matchLines(t, e.ok("lock", serverID, configID, "--owner", "deploy-1"),
			`typeinstance\.hub\.cairn\.dev/`+serverID+` locked by deploy-1`, `typeinstance\.hub\.cairn\.dev/`+configID+` locked by deploy-1`)
		if got := e.byName(serverType, "db-server").LockedBy; got != "deploy-1" {
			t.Errorf("lockedBy = %q, want deploy-1", got)
		}
		if out := e.ok("list", "--type", serverType); !regexp.MustCompile(`db-server\s+\S+\s+3\s+cairn-builtin\s+deploy-1`).MatchString(out) {
			t.Errorf("list does not show the lock:\n%s", out)
		}
		e.ok("update", serverID, "--value-file", valueFile, "--owner", "deploy-1")
		matchLines(t, e.ok("unlock", serverID, configID, "--owner", "deploy-1"),
			`typeinstance\.hub\.cairn\.dev/`+serverID+` unlocked by deploy-1`, `typeinstance\.hub\.cairn\.dev/`+configID+` unlocked by deploy-1`)

		// delete: the user first, then what it used.
		matchLines(t, e.ok("delete", configID), `typeinstance\.hub\.cairn\.dev "`+configID+`" deleted`)
		matchLines(t, e.ok("delete", "typeinstance/"+serverID), `typeinstance\.hub\.cairn\.dev "`+serverID+`" deleted`)
		if list, _ := e.hub().ListInstances(context.Background(), store.InstanceFilter{Namespace: "default"}, false); len(list) != 0 {
			t.Errorf("instances left after delete: %+v", list)
		}

		// types delete, once nothing uses the Type.
		matchLines(t, e.ok("types", "delete", configType+":0.1.0"), `type/`+regexp.QuoteMeta(configType)+`:0\.1\.0 deleted`)
		if _, err := e.hub().GetType(context.Background(), cairn.TypeRef{Path: configType, Revision: "0.1.0"}); !cairn.HasCode(err, cairn.CodeNotFound) {
			t.Errorf("GetType after delete: %v, want NotFound", err)
		}
	})
}

// updateInvalid is how an update refused as invalid begins, as a regular
// expression: the REST API's (kubectl's) words in both modes, naming the
// instance once.
func updateInvalid(id string) string {
	return `TypeInstance "` + id + `" is invalid: `
}

func TestErrors(t *testing.T) {
	modes(t, func(t *testing.T, e *server) {
		serverID, configID := quickstartIDs(t, e)
		e.ok("lock", configID, "--owner", "deploy-1")
		dir := t.TempDir()
		file := func(name, content string) string { return writeFile(t, dir, name, content) }
		const instHead = "apiVersion: hub.cairn.dev/v1\nkind: TypeInstance\n"

		tests := []struct {
			name   string
			stdin  string
			args   []string
			code   int
			stderr []string // lines of stderr, as regular expressions
		}{
			{"missing file", "", []string{"apply", "-f", filepath.Join(dir, "nope.yaml")}, 2,
				[]string{`error: read .*nope\.yaml: no such file or directory`}},
			{"empty directory", "", []string{"apply", "-f", t.TempDir()}, 2,
				[]string{`error: directory .* holds no \*\.yaml, \*\.yml or \*\.json file`}},
			{"no documents", "", []string{"apply", "-f", file("empty.yaml", "# nothing\n")}, 2,
				[]string{`error: no documents in .*empty\.yaml`}},
			{"bad YAML", "", []string{"apply", "-f", file("bad.yaml", "a: 1\nb: [\n")}, 2,
				[]string{`error: .*bad\.yaml: document 1 \(line \d\): invalid YAML: .*`}},
			{"bad JSON on stdin", "{\"kind\": }", []string{"apply", "-f", "-"}, 2,
				[]string{`error: -: document 1 \(line 1\): invalid JSON: invalid character '}' looking for beginning of value`}},
			{"unknown kind", "", []string{"apply", "-f", file("kind.yaml", "apiVersion: hub.cairn.dev/v1\nkind: Widget\n")}, 3,
				[]string{`error: .*kind\.yaml: document 1 \(line 1\): no matches for kind "Widget" in version "hub\.cairn\.dev/v1": the server serves no such resource; apply its Type first`}},
			{"unknown field", "", []string{"apply", "-f", file("field.yaml", instHead+"spec:\n  typeRef: {path: a.b, revision: 0.1.0}\n  valeu: 1\n")}, 2,
				[]string{`error: .*field\.yaml: document 1 \(line 1\): invalid document:`,
					`  spec\.valeu is not a known field \(known: typeRef, value, attributes, backend, uses\)`}},
			{"invalid value", "", []string{"apply", "-f", file("value.yaml", instHead+"metadata: {name: bad}\nspec:\n  typeRef: {path: "+serverType+", revision: 0.1.0}\n  value: {host: h, port: high, extra: 1}\n")}, 2,
				[]string{`error: create TypeInstances: TypeInstance "bad": value does not match Type ` + serverType + `:0\.1\.0:`,
					`  spec\.value must NOT have additional properties: extra \(known: host, port, version\)`,
					`  spec\.value\.port must be integer`}},
			{"Type conflict", "", []string{"apply", "-f", file("type.yaml", "apiVersion: hub.cairn.dev/v1\nkind: Type\nmetadata: {name: "+serverType+"}\nspec: {revision: 0.1.0}\n")}, 4,
				[]string{`error: .*type\.yaml: document 1 \(line 1\): Type ` + serverType + `:0\.1\.0 already exists with a different definition; .*`}},
			{"immutable typeRef", "", []string{"apply", "-f", file("rev.yaml", instHead+"metadata: {name: db-server}\nspec: {typeRef: {path: "+serverType+", revision: 0.2.0}}\n")}, 4,
				[]string{`error: .*rev\.yaml: document 1 \(line 1\): TypeInstance "` + serverID + `" cannot be changed this way:`,
					`  spec\.typeRef ` + serverType + `:0\.2\.0 differs from the existing TypeInstance's ` + serverType + `:0\.1\.0; the Type of a TypeInstance cannot change`}},
			{"new uses on an existing instance", "", []string{"apply", "-f", file("uses.yaml", instHead+"metadata: {name: db-server}\nspec:\n  typeRef: {path: "+serverType+", revision: 0.1.0}\n  uses: ["+configID+"]\n")}, 2,
				[]string{`error: .*uses\.yaml: document 1 \(line 1\): TypeInstance "` + serverID + `": cannot add uses relations:`,
					`  spec\.uses\[0\] "` + configID + `" is not used by the existing TypeInstance; uses relations are set when a TypeInstance is created`}},
			{"unknown uses", "", []string{"apply", "-f", file("dangling.yaml", instHead+"metadata: {name: fresh}\nspec:\n  typeRef: {path: "+serverType+", revision: 0.1.0}\n  value: {host: h, port: 1}\n  uses: [nobody]\n")}, 3,
				[]string{`error: create TypeInstances: usesRelations: "nobody" are neither aliases of the batch nor ids of existing TypeInstances`}},
			{"unknown backend alias", "", []string{"apply", "-f", file("backend.yaml", instHead+"spec:\n  typeRef: {path: "+serverType+", revision: 0.1.0}\n  backend: {id: vault}\n")}, 3,
				[]string{`error: .*backend\.yaml: document 1 \(line 1\): spec\.backend\.id "vault" is neither an id nor the alias of a storage backend`}},
			{"unknown id in apply", "", []string{"apply", "-f", file("id.yaml", instHead+"metadata: {id: 00000000-0000-0000-0000-000000000000}\nspec: {value: 1}\n")}, 3,
				[]string{`error: .*id\.yaml: document 1 \(line 1\): metadata\.id: typeinstances\.hub\.cairn\.dev "00000000-0000-0000-0000-000000000000" not found`}},
			{"strict mode", "", []string{"--strict", "apply", "-f", file("strict.yaml", instHead+"spec: {typeRef: {path: cap.type.unregistered, revision: 0.1.0}}\n")}, 2,
				[]string{`error: create TypeInstances: TypeInstance ".*": Type cap\.type\.unregistered:0\.1\.0 is not registered and the hub runs in strict mode`}},
			{"get not found", "", []string{"get", "00000000-0000-0000-0000-000000000000"}, 3,
				[]string{`error: typeinstances\.hub\.cairn\.dev "00000000-0000-0000-0000-000000000000" not found`}},
			{"get by name not found", "", []string{"get", serverType, "nope"}, 3, []string{`error: TypeInstance default/nope of Type ` + serverType + ` not found|error: get ` + serverType + ` default/nope: .*`}},
			{"describe not found", "", []string{"describe", "00000000-0000-0000-0000-000000000000"}, 3, []string{`error: typeinstances\.hub\.cairn\.dev "00000000-0000-0000-0000-000000000000" not found`}},
			{"types get not found", "", []string{"types", "get", "cap.type.nope:0.1.0"}, 3, []string{`error: types\.hub\.cairn\.dev "cap\.type\.nope:0\.1\.0" not found|error: get Type cap\.type\.nope:0\.1\.0: .*`}},
			{"update locked", "", []string{"update", configID, "--attribute", "a.b:0.1.0"}, 5,
				[]string{`error: failed to update TypeInstances: TypeInstances with IDs "` + configID + `" are locked by different owner`}},
			{"update with a context the backend refuses", "", []string{"update", serverID, "--context-file", file("ctx.json", `{"a": 1}`)}, 2,
				[]string{`error: ` + updateInvalid(serverID) + `External backend "` + cairn.BuiltinBackendID + `": input context not allowed`}},
			// The instance is named once, in either mode.
			{"update with a value its Type refuses", "", []string{"update", serverID, "--value-file", file("bad-host.yaml", "{host: 1, port: 5432}\n")}, 2,
				[]string{`error: ` + updateInvalid(serverID) + `value does not match Type ` + serverType + `:0\.1\.0:`, `  spec[./]value[./]host must be string`}},
			{"update nothing", "", []string{"update", serverID}, 2, []string{`error: nothing to update: give --value-file, --context-file or --attribute`}},
			{"update bad value file", "", []string{"update", serverID, "--value-file", file("bad-value.yaml", "a: [\n")}, 2, []string{`error: .*bad-value\.yaml: invalid YAML or JSON: .*`}},
			{"delete locked", "", []string{"delete", configID}, 5, []string{`error: TypeInstance "` + configID + `" is locked by different owner`}},
			{"delete used", "", []string{"delete", serverID}, 5,
				[]string{`error: TypeInstance "` + serverID + `" is used by other TypeInstances, you must first remove "` + configID + `" \(default/db-config\)`}},
			{"delete the built-in backend", "", []string{"delete", cairn.BuiltinBackendID}, 2, []string{`error: .* cannot be deleted`}},
			{"lock by another owner", "", []string{"lock", serverID, configID, "--owner", "deploy-2"}, 5,
				[]string{`error: failed to lock TypeInstances: TypeInstances with IDs "` + configID + `" are locked by different owner`}},
			{"lock missing", "", []string{"lock", "nope", "--owner", "x"}, 3,
				[]string{`error: failed to lock TypeInstances: TypeInstances with IDs "nope" were not found`}},
			{"lock without owner", "", []string{"lock", serverID}, 2, []string{`error: lock needs --owner`}},
			{"types delete in use", "", []string{"types", "delete", serverType + ":0.1.0"}, 5, []string{`error: delete Type .* has 1 instance\(s\); delete them first`}},
			{"types delete without revision", "", []string{"types", "delete", serverType}, 2, []string{`error: ".*": want PATH:REVISION, .*`}},
			{"unknown command", "", []string{"frobnicate"}, 2, []string{`error: unknown command "frobnicate" for "cairn"`, `Run 'cairn --help' for usage\.`}},
			{"unknown command near one", "", []string{"delet", "flags", "a"}, 2,
				[]string{`error: unknown command "delet" for "cairn"`, ``, `Did you mean this\?`, `\tdelete`, `Run 'cairn --help' for usage\.`}},
			{"unknown subcommand near one", "", []string{"types", "lis"}, 2,
				[]string{`error: unknown command "lis" for "cairn types"`, ``, `Did you mean this\?`, `\tlist`, `Run 'cairn types --help' for usage\.`}},
			{"unknown flag", "", []string{"list", "--frob"}, 2, []string{`error: unknown flag: --frob`}},
			{"bad output format", "", []string{"list", "-o", "xml"}, 2, []string{`error: --output "xml": want table, json or yaml`}},
			{"bad selector", "", []string{"list", "-l", "a in b"}, 2, []string{`error: --selector: label selector "a in b": expected '\(' after "in" at offset 5`}},
			{"too many arguments", "", []string{"update", "a", "b"}, 2, []string{`error: accepts 1 arg\(s\), received 2`, `Usage: cairn update ID \[--value-file FILE\|-\] .*`, `Run 'cairn update --help' for usage\.`}},
			{"missing argument", "", []string{"types", "get"}, 2, []string{`error: accepts 1 arg\(s\), received 0`, `Usage: cairn types get PATH:REVISION`, `Run 'cairn types get --help' for usage\.`}},
			{"argument to a command that takes none", "", []string{"version", "extra"}, 2, []string{`error: cairn version takes no arguments, got "extra"`, `Usage: cairn version`, `Run 'cairn version --help' for usage\.`}},
			{"unknown shell", "", []string{"completion", "tcsh"}, 2, []string{`error: unknown command "tcsh" for "cairn completion"`, ``, `Did you mean this\?`, `\tbash`, `\tfish`, `\tzsh`, `Run 'cairn completion --help' for usage\.`}},
			{"argument to a completion script", "", []string{"completion", "bash", "extra"}, 2, []string{`error: cairn completion bash takes no arguments, got "extra"`, `Usage: cairn completion bash`, `Run 'cairn completion bash --help' for usage\.`}},
			{"bad --namespaced", "", []string{"api-resources", "--namespaced=maybe"}, 2, []string{`error: --namespaced "maybe": want true or false`}},
			{"same instance twice", "", []string{"apply", "-f", file("twice.yaml", instHead+"metadata: {name: twin}\nspec: {typeRef: {path: a.b, revision: 0.1.0}}\n---\n"+instHead+"metadata: {name: twin, namespace: default}\nspec: {typeRef: {path: a.b, revision: 0.1.0}}\n")}, 2,
				[]string{`error: .*twice\.yaml: document 2 \(line 6\): describes the same TypeInstance \(a\.b default/twin\) as .*twice\.yaml: document 1 \(line 1\)`}},
			{"duplicate alias", "", []string{"apply", "-f", file("alias.yaml", instHead+"metadata: {alias: x}\nspec: {typeRef: {path: a.b, revision: 0.1.0}}\n---\n"+instHead+"metadata: {alias: x}\nspec: {typeRef: {path: a.b, revision: 0.1.0}}\n")}, 2,
				[]string{`error: .*alias\.yaml: document 2 \(line 6\): metadata\.alias "x" is also the alias of .*alias\.yaml: document 1 \(line 1\); aliases must be unique within an apply`}},
			{"unusable data directory", "", []string{"--data-dir", file("not-a-dir", "x"), "list"}, 6, []string{`error: open the store .*not-a-dir/cairn\.db: .*`}},
			{"apply without -f", "", []string{"apply"}, 2, []string{`error: give at least one -f FILE\|DIR\|-`}},
		}
		// What opens the local store means nothing to a server.
		localOnly := map[string]bool{"strict mode": true, "unusable data directory": true}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				if localOnly[tt.name] && !e.local {
					if tt.name == "strict mode" {
						// A setting of local mode's hub is refused in server mode.
						if r := e.run(tt.stdin, tt.args...); r.code != cli.ExitInvalid || !strings.Contains(r.stderr, "--strict configures the hub of local mode") {
							t.Errorf("--strict in server mode: exit %d, %s", r.code, r.stderr)
						}
						return
					}
					t.Skip("a local-mode setting")
				}
				r := e.run(tt.stdin, tt.args...)
				if r.code != tt.code {
					t.Errorf("exit code = %d, want %d\nstderr: %s", r.code, tt.code, r.stderr)
				}
				matchLines(t, r.stderr, tt.stderr...)
			})
		}

		// Nothing of the failed applies was stored.
		list, err := e.hub().ListInstances(context.Background(), store.InstanceFilter{Namespace: "default"}, false)
		if err != nil || len(list) != 2 {
			t.Errorf("instances after the failures: %d, %v; want the 2 of the quickstart", len(list), err)
		}
	})
}

func TestHelp(t *testing.T) {
	e := newEnv(t)
	for _, cmd := range [][]string{
		{"apply"}, {"get"}, {"list"}, {"describe"}, {"update"}, {"delete"}, {"lock"}, {"unlock"},
		{"types"}, {"types", "list"}, {"types", "get"}, {"types", "delete"}, {"version"},
	} {
		out := e.ok(append(cmd, "--help")...)
		if !strings.Contains(out, "Examples:") || !strings.Contains(out, "cairn "+strings.Join(cmd, " ")) {
			t.Errorf("cairn %s --help has no example:\n%s", strings.Join(cmd, " "), out)
		}
	}
}

func TestDataDirDefaults(t *testing.T) {
	home := t.TempDir()
	for _, tt := range []struct {
		name string
		vars map[string]string
		want string
	}{
		{"XDG", map[string]string{"XDG_DATA_HOME": filepath.Join(home, "xdg"), "HOME": home}, filepath.Join(home, "xdg", "cairn", "cairn.db")},
		{"HOME", map[string]string{"HOME": home}, filepath.Join(home, ".local", "share", "cairn", "cairn.db")},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := cli.Main(context.Background(), []string{"list"}, cli.Env{
				Stdout: &out, Stderr: &errOut, Getenv: func(k string) string { return tt.vars[k] },
			})
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut.String())
			}
			if _, err := os.Stat(tt.want); err != nil {
				t.Errorf("store not created at %s: %v", tt.want, err)
			}
		})
	}
	var errOut bytes.Buffer
	code := cli.Main(context.Background(), []string{"list"}, cli.Env{
		Stdout: &bytes.Buffer{}, Stderr: &errOut,
		Getenv: func(k string) string { return map[string]string{cli.EnvDataDir: home, cli.EnvStrict: "maybe"}[k] },
	})
	if code != 2 || !strings.Contains(errOut.String(), `CAIRN_STRICT="maybe"`) {
		t.Errorf("bad CAIRN_STRICT: exit %d, %s", code, errOut.String())
	}
}

func yamlUnmarshal(s string, v any) error { return yaml.Unmarshal([]byte(s), v) }

// TestErrorsAlikeInBothModes: the commands that call the hub (update,
// policy apply, types delete) refuse with the same words in local mode as
// against a server, since local mode answers them through the REST API
// served in process: "TypeInstance "ID" is invalid: ...", not the hub's
// Capact wording ("failed to update TypeInstances: TypeInstance "ID": ...")
// in one mode and the API's in the other.
func TestErrorsAlikeInBothModes(t *testing.T) {
	modes(t, func(t *testing.T, e *server) {
		e.ok("apply", "-f", quickstart)
		id := e.byName(serverType, "db-server").ID
		bad := e.file("bad.yaml", "host: 1\nport: x\n")
		pol := e.file("policy.yaml", "typeInstance:\n  rules:\n  - typeRef: {path: cap.*}\n    backend: {id: nope}\n")
		for _, tt := range []struct {
			args   []string
			code   int
			stderr string
		}{
			{[]string{"update", id, "--value-file", bad}, cli.ExitInvalid,
				"error: TypeInstance \"" + id + "\" is invalid: value does not match Type " + serverType + ":0.1.0:\n  spec.value.host must be string\n  spec.value.port must be integer\n"},
			{[]string{"update", "01a210f5-0000-7000-8000-000000000000", "--value-file", bad}, cli.ExitNotFound,
				"error: typeinstances.hub.cairn.dev \"01a210f5-0000-7000-8000-000000000000\" not found\n"},
			{[]string{"policy", "apply", "-f", pol}, cli.ExitInvalid,
				"error: Policy \"default\" is invalid: invalid policy:\n  typeInstance.rules[0].backend.id \"nope\" is neither the id nor the alias of a storage backend\n"},
			{[]string{"types", "delete", "cap.type.nope:0.1.0"}, cli.ExitNotFound,
				"error: types.hub.cairn.dev \"cap.type.nope:0.1.0\" not found\n"},
		} {
			r := e.run("", tt.args...)
			if r.code != tt.code || r.stderr != tt.stderr {
				t.Errorf("cairn %s: exit %d\n%s\nwant exit %d\n%s", strings.Join(tt.args, " "), r.code, r.stderr, tt.code, tt.stderr)
			}
		}
	})
}
