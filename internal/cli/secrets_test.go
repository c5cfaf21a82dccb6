package cli_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/hub"
	"github.com/cairn-dev/cairn/internal/cli"
)

// TestSecretsNeverLeak runs the secrets example as a user would, on a server
// with authentication, a list-only user, the Request audit level and
// encryption at rest, and then greps everything the scenario produced (the
// server's log, the audit log, /metrics, every CLI output and error, REST
// and GraphQL answers, watch events, the data directory) for the secret: it
// is found only where it was asked for by someone allowed to read it.
func TestSecretsNeverLeak(t *testing.T) {
	const marker = "leak-marker-5e1f9c2a"
	const marker2 = "leak-marker-rotated-77aa"
	dir, data := t.TempDir(), t.TempDir()
	tokens, rbacFile := filepath.Join(dir, "tokens.csv"), filepath.Join(dir, "rbac.yaml")
	write := func(p, s string) string {
		t.Helper()
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write(tokens, "lister-token,lister,3\nviewer-token,viewer,4\neditor-token,editor,5\n")
	write(rbacFile, `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: typeinstance-lister}
rules: [{apiGroups: [hub.cairn.dev], resources: [typeinstances], verbs: [list, watch]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: lister}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: typeinstance-lister}
subjects: [{kind: User, name: lister}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: viewer}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cairn-viewer}
subjects: [{kind: User, name: viewer}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: editor}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cairn-editor}
subjects: [{kind: User, name: editor}]
`)
	cfg, err := filepath.Abs("../../examples/secrets/encryption-config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{cli.EnvDataDir: data, "CAIRN_CONFIG": filepath.Join(dir, "config.yaml")}
	url, serverLog, stop := startServeLogged(t, vars, "--token-auth-file", tokens, "--rbac-file", rbacFile,
		"--audit-level", "Request", "--encryption-config", cfg)
	adminToken, err := os.ReadFile(filepath.Join(data, "admin.token"))
	if err != nil {
		t.Fatal(err)
	}

	// Everything a user or operator could see, by where it came from.
	seen := map[string]string{}
	cairn := func(name string, wantOK bool, args ...string) result {
		t.Helper()
		r := runVars(t, vars, append([]string{"--server", url}, args...)...)
		if (r.code == 0) != wantOK {
			t.Fatalf("%s: exit %d: %s%s", name, r.code, r.stdout, r.stderr)
		}
		seen["cairn "+name] = r.stdout + r.stderr
		return r
	}
	call := func(name, token, method, path, body string) (int, string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, method, url+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(token))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		seen[name] = string(b)
		return resp.StatusCode, string(b)
	}

	cairn("apply the Type", true, "apply", "-f", "../../examples/secrets/00-types.yaml")
	inst := write(filepath.Join(dir, "db.yaml"), `apiVersion: hub.cairn.dev/v1
kind: TypeInstance
metadata: {name: orders-db}
spec:
  typeRef: {path: cap.type.database.postgresql.credentials, revision: 0.1.0}
  value: {username: orders, password: `+marker+`}
`)
	cairn("apply the secret", true, "apply", "-f", inst)

	// Lists, tables and watches show the field but not the value.
	r := cairn("list --values", true, "list", "--values", "--type", "cap.type.database.postgresql.credentials")
	if !strings.Contains(r.stdout, hub.SecretMarker) {
		t.Errorf("the table does not show the secret as %q:\n%s", hub.SecretMarker, r.stdout)
	}
	cairn("list --values -o json", true, "list", "--values", "-o", "json")
	cairn("get typeinstances", true, "get", "typeinstances", "-A")
	cairn("get typeinstances -o yaml", true, "get", "typeinstances", "-A", "-o", "yaml")

	// Errors name the field, never the value.
	bad := write(filepath.Join(dir, "bad.yaml"), `apiVersion: hub.cairn.dev/v1
kind: TypeInstance
metadata: {name: orders-db}
spec:
  typeRef: {path: cap.type.database.postgresql.credentials, revision: 0.1.0}
  value: {username: 5, password: `+marker+`, extra: `+marker+`}
`)
	r = cairn("apply an invalid update", false, "apply", "-f", bad)
	if !strings.Contains(r.stderr, "spec.value.username") {
		t.Errorf("the error does not name the field: %s", r.stderr)
	}
	code, _ := call("GraphQL mutation with an invalid value", string(adminToken), "POST", "/graphql",
		`{"query":"mutation { createTypeInstance(in: {typeRef: {path: \"cap.type.database.postgresql.credentials\", revision: \"0.1.0\"}, value: {username: 5, password: \"`+marker+`\"}}) }"}`)
	if code != 200 || !strings.Contains(seen["GraphQL mutation with an invalid value"], "username") {
		t.Errorf("GraphQL mutation: %d %s", code, seen["GraphQL mutation with an invalid value"])
	}

	// The list-only user: lists and watches redacted, values refused.
	const list = "/apis/hub.cairn.dev/v1/typeinstances"
	if code, body := call("lister: list", "lister-token", "GET", list, ""); code != 200 || !strings.Contains(body, hub.SecretMarker) {
		t.Errorf("lister list: %d %.300s", code, body)
	}
	if code, body := call("lister: list ?values=true", "lister-token", "GET", list+"?values=true", ""); code != 403 || !strings.Contains(body, `cannot reveal resource \"typeinstances\"`) {
		t.Errorf("lister list ?values=true: %d %s, want 403 naming reveal", code, body)
	}
	if code, body := call("lister: GraphQL query", "lister-token", "POST", "/graphql", `{"query":"{ typeInstances { id latestResourceVersion { spec { value } } } }"}`); code != 200 || !strings.Contains(body, hub.SecretMarker) {
		t.Errorf("lister GraphQL query: %d %.300s, want the list with the secret redacted", code, body)
	}
	// cairn-viewer, like Kubernetes' view role, which reads no Secrets:
	// it may get the instance, its history and its GraphQL value, but
	// sees the secret redacted, and may not ask lists for values.
	var listed struct {
		Items []struct {
			Metadata struct{ UID string }
			Spec     struct{ Alias string }
		}
	}
	_, body := call("viewer: list", "viewer-token", "GET", list, "")
	if err := json.Unmarshal([]byte(body), &listed); err != nil {
		t.Fatalf("viewer list: %v: %.300s", err, body)
	}
	var id string
	for _, it := range listed.Items {
		if it.Spec.Alias == "orders-db" {
			id = it.Metadata.UID
		}
	}
	if id == "" {
		t.Fatalf("viewer list lacks orders-db: %.600s", body)
	}
	for _, tc := range []struct{ name, method, path, body string }{
		{"viewer: get by id", "GET", list + "/" + id, ""},
		{"viewer: history", "GET", list + "/" + id + "/resourceversions", ""},
		{"viewer: GraphQL typeInstance", "POST", "/graphql", `{"query":"{ typeInstance(id: \"` + id + `\") { latestResourceVersion { spec { value } } } }"}`},
	} {
		if code, body := call(tc.name, "viewer-token", tc.method, tc.path, tc.body); code != 200 || !strings.Contains(body, hub.SecretMarker) || !strings.Contains(body, "orders") {
			t.Errorf("%s: %d %.300s, want the instance with its password redacted", tc.name, code, body)
		}
	}
	if code, body := call("viewer: list ?values=true", "viewer-token", "GET", list+"?values=true", ""); code != 403 || !strings.Contains(body, `cannot reveal resource \"typeinstances\"`) {
		t.Errorf("viewer list ?values=true: %d %s, want 403 naming reveal", code, body)
	}
	// cairn-editor, like edit, reveals them.
	if code, body := call("editor: get by id", "editor-token", "GET", list+"/"+id, ""); code != 200 || !strings.Contains(body, marker) {
		t.Errorf("editor get by id: %d %.300s, want the password", code, body)
	}
	delete(seen, "editor: get by id")

	watched := make(chan string, 1)
	go func() {
		req, _ := http.NewRequest("GET", url+list+"?watch=true&timeoutSeconds=3", nil)
		req.Header.Set("Authorization", "Bearer lister-token")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			watched <- err.Error()
			return
		}
		defer resp.Body.Close()
		var sb strings.Builder
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			sb.WriteString(sc.Text() + "\n")
		}
		watched <- sb.String()
	}()
	time.Sleep(500 * time.Millisecond) // the watch has listed
	rotated := write(filepath.Join(dir, "rotated.yaml"), strings.Replace(string(must(os.ReadFile(inst))), marker, marker2, 1))
	cairn("apply the rotated password", true, "apply", "-f", rotated)
	events := <-watched
	seen["lister: watch"] = events
	if !strings.Contains(events, `"MODIFIED"`) || !strings.Contains(events, hub.SecretMarker) {
		t.Errorf("lister's watch did not see the update redacted:\n%s", events)
	}

	// Asked for by someone allowed to: in the clear (so the greps below
	// look for what really went through).
	if _, body := call("admin: list ?values=true", string(adminToken), "GET", list+"?values=true", ""); !strings.Contains(body, marker2) {
		t.Errorf("admin's list ?values=true lacks the password: %.300s", body)
	}
	delete(seen, "admin: list ?values=true")
	r = cairn("get the instance", true, "get", "cap.type.database.postgresql.credentials", "orders-db", "-o", "json")
	if !strings.Contains(r.stdout, marker2) {
		t.Errorf("cairn get by name lacks the password: %s", r.stdout)
	}
	delete(seen, "cairn get the instance")
	if code, body := call("metrics", string(adminToken), "GET", "/metrics", ""); code != 200 || !strings.Contains(body, "cairn_") {
		t.Errorf("metrics: %d %.200s", code, body)
	}

	stop()
	seen["server log"] = serverLog()
	seen["audit log"] = string(must(os.ReadFile(filepath.Join(data, "audit.log"))))
	if !strings.Contains(seen["audit log"], "orders-db") {
		t.Errorf("the audit log at level Request lacks the object's name: %.500s", seen["audit log"])
	}
	files, _ := filepath.Glob(filepath.Join(data, "*"))
	for _, f := range files {
		if b, err := os.ReadFile(f); err == nil {
			seen["data dir "+filepath.Base(f)] = string(b)
		}
	}
	for where, s := range seen {
		for _, m := range []string{marker, marker2} {
			if strings.Contains(s, m) {
				i := strings.Index(s, m)
				t.Errorf("%s holds the secret: ...%s...", where, s[max(0, i-200):min(len(s), i+60)])
			}
		}
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// startServeLogged is startServeSecure keeping the server's log (stderr),
// which the returned function reads; stop ends the server.
func startServeLogged(t *testing.T, vars map[string]string, args ...string) (url string, log func() string, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	var errOut syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- cli.Main(ctx, append([]string{"serve", "--addr", "127.0.0.1:0"}, args...), cli.Env{
			Stdout: pw, Stderr: &errOut, Getenv: func(k string) string { return vars[k] },
		})
		pw.Close()
	}()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("serve exited %d: %s", code, errOut.String())
		}
	}
	t.Cleanup(stop)
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatalf("serve: %v (stderr %s)", err, errOut.String())
	}
	go io.Copy(io.Discard, pr)
	f := strings.Fields(line)
	if len(f) < 4 || !strings.HasPrefix(f[3], "http://") {
		t.Fatalf("serve printed %q", line)
	}
	return f[3], errOut.String, stop
}

// TestApplyWithoutValueKeepsSecrets: applying a document that leaves out
// the value (to change labels) keeps the stored value, secret fields
// included, and applying the same document again reports it unchanged.
// apply used to match documents through a list, whose values are redacted,
// and sent the list's "(sensitive value)" back as the password.
func TestApplyWithoutValueKeepsSecrets(t *testing.T) {
	modes(t, func(t *testing.T, e *server) {
		e.ok("apply", "-f", e.file("types.yaml", `apiVersion: hub.cairn.dev/v1
kind: Type
metadata: {name: cap.type.acme.creds}
spec:
  revision: 0.1.0
  jsonSchema:
    type: object
    properties:
      user: {type: string}
      password: {type: string, x-cairn-secret: true}
`))
		full := e.file("full.yaml", `apiVersion: hub.cairn.dev/v1
kind: TypeInstance
metadata: {name: c1}
spec:
  typeRef: {path: cap.type.acme.creds, revision: 0.1.0}
  value: {user: bob, password: s3cret-value}
`)
		e.ok("apply", "-f", full)
		if out := e.ok("apply", "-f", full); !strings.Contains(out, "unchanged") {
			t.Errorf("second apply of the same document: %s, want unchanged", out)
		}
		e.ok("apply", "-f", e.file("labels.yaml", `apiVersion: hub.cairn.dev/v1
kind: TypeInstance
metadata: {name: c1, labels: {team: x}}
spec:
  typeRef: {path: cap.type.acme.creds, revision: 0.1.0}
`))
		inst := e.byName("cap.type.acme.creds", "c1")
		got, err := e.h.GetInstance(context.Background(), inst.ID, true)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(got.Latest.Value), "s3cret-value") || got.Labels["team"] != "x" {
			t.Errorf("after an apply without value: value %s, labels %v; want the password kept and team=x", got.Latest.Value, got.Labels)
		}
	})
}
