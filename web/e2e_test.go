package web_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/backend/file"
	gitbackend "github.com/cairn-dev/cairn/backend/git"
	"github.com/cairn-dev/cairn/backend/scm"
	"github.com/cairn-dev/cairn/backend/scm/scmtest"
	"github.com/cairn-dev/cairn/internal/cli"
	"github.com/cairn-dev/cairn/sdk/storagebackend"
)

// TestConsoleInChromium runs web/e2e/console.mjs: playwright-core driving
// Debian's headless Chromium through every page of the console, served by a
// real `cairn serve` on loopback, seeded with the quick-start data, 10,000
// flags and two stack installations. Writes go through the console's forms
// and through the real kubectl. Screenshots go to $CAIRN_SCREENSHOTS when
// it is set (none are taken otherwise).
func TestConsoleInChromium(t *testing.T) {
	chromium := lookTool(t, "chromium", os.Getenv("CHROMIUM"), "/usr/bin/chromium")
	node := lookTool(t, "node", "", "node")
	kubectl := lookTool(t, "kubectl", os.Getenv("KUBECTL"), "/usr/bin/kubectl")
	_, err1 := os.Stat("e2e/node_modules/playwright-core/package.json")
	_, err2 := os.Stat("e2e/node_modules/axe-core/package.json")
	if err1 != nil || err2 != nil {
		// The test command installs what it needs: playwright-core and
		// axe-core, pinned by e2e/package-lock.json.
		npm := lookTool(t, "npm", "", "npm")
		cmd := exec.Command(npm, "ci", "--no-audit", "--no-fund")
		cmd.Dir = "e2e"
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("npm ci in web/e2e (installs playwright-core): %v\n%s", err, out)
		}
	}
	// Screenshots only when asked for: nothing checks them, and they
	// were a large part of the browser's CPU.
	shots := os.Getenv("CAIRN_SCREENSHOTS")
	if shots != "" {
		if err := os.MkdirAll(shots, 0o755); err != nil {
			t.Fatal(err)
		}
	}

	// As a user runs it: nothing configured, so the browser and kubectl,
	// local processes of our OS user, are admin (peer authentication) and
	// the console's writes pass the cross-site checks.
	base, _ := startServe(t)
	seed := seedConsole(t, base)
	seed.Guarded = startGuarded(t)
	seedJSON, _ := json.Marshal(seed)

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "console.mjs")
	cmd.Dir = "e2e"
	cmd.Env = append(os.Environ(), "CAIRN_URL="+base, "CAIRN_SCREENSHOTS="+shots, "CHROMIUM="+chromium,
		"KUBECTL="+kubectl, "CAIRN_SEED="+string(seedJSON))
	out, err := cmd.CombinedOutput()
	t.Logf("screenshots in %q (CAIRN_SCREENSHOTS)\n%s", shots, out)
	if err != nil {
		t.Fatalf("the browser test failed: %v", err)
	}
	if !bytes.Contains(out, []byte("\nPASS\n")) {
		t.Fatal("the browser test did not report PASS")
	}
}

// lookTool finds a program; missing, the test skips, or fails under CI=true.
func lookTool(t *testing.T, name, explicit, def string) string {
	t.Helper()
	for _, p := range []string{explicit, def} {
		if p == "" {
			continue
		}
		if abs, err := exec.LookPath(p); err == nil {
			return abs
		}
	}
	msg := fmt.Sprintf("%s is not installed (scripts/with-services installs it: apt-get install -y chromium kubectl, nodejs)", name)
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// startServe runs `cairn serve` in-process on a loopback port until the
// test ends and returns its base URL and data directory.
func startServe(t *testing.T, args ...string) (string, string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	var errOut bytes.Buffer
	done := make(chan int, 1)
	dataDir := t.TempDir()
	vars := map[string]string{cli.EnvDataDir: dataDir, "E2E_GH_TOKEN": ghToken}
	go func() {
		done <- cli.Main(ctx, append([]string{"serve", "--addr", "127.0.0.1:0"}, args...), cli.Env{
			Stdout: pw, Stderr: &errOut, Getenv: func(k string) string { return vars[k] },
		})
		pw.Close()
	}()
	t.Cleanup(func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("serve exited %d: %s", code, errOut.String())
		}
	})
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatalf("serve: %v (stderr %s)", err, errOut.String())
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	f := strings.Fields(line) // "cairn serving on http://127.0.0.1:PORT (store ...)"
	if len(f) < 4 || !strings.HasPrefix(f[3], "http://") {
		t.Fatalf("serve printed %q", line)
	}
	return f[3], dataDir
}

// guarded is a second server that requires credentials: an admin (ada),
// a viewer (vic) and an editor of namespace team-a only (ed), by bearer
// token.
type guarded struct {
	URL         string `json:"url"`
	Kubeconfig  string `json:"kubeconfig"` // the admin's, written by serve
	AdminToken  string `json:"adminToken"`
	ViewerToken string `json:"viewerToken"`
	EditorToken string `json:"editorToken"` // ed's: cairn-editor bound in team-a only
	Flag        string `json:"flag"`        // id of a flag the viewer may read and not edit
	Token       string `json:"token"`       // id of team-a's Token, whose key the viewer may not reveal
	NoValue     string `json:"noValue"`     // id of a Token of team-a created without a value
}

func startGuarded(t *testing.T) guarded {
	t.Helper()
	dir := t.TempDir()
	tokens, rbac := dir+"/tokens.csv", dir+"/rbac.yaml"
	if err := os.WriteFile(tokens, []byte("ada-e2e-token,ada,1,cairn:admins\nvic-e2e-token,vic,2\ned-e2e-token,ed,3\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(rbac, []byte(`apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: vic-views}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cairn-viewer}
subjects: [{kind: User, name: vic}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: ed-edits-team-a, namespace: team-a}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cairn-editor}
subjects: [{kind: User, name: ed}]
`), 0o600); err != nil {
		t.Fatal(err)
	}
	base, dataDir := startServe(t, "--token-auth-file", tokens, "--rbac-file", rbac)
	g := guarded{URL: base, Kubeconfig: dataDir + "/kubeconfig", AdminToken: "ada-e2e-token", ViewerToken: "vic-e2e-token", EditorToken: "ed-e2e-token"}
	var out, errOut bytes.Buffer
	if code := cli.Main(context.Background(), []string{"--kubeconfig", g.Kubeconfig, "apply", "-f", "../examples/flags/flags.json"}, cli.Env{
		Stdout: &out, Stderr: &errOut, Getenv: func(string) string { return "" },
	}); code != 0 {
		t.Fatalf("cairn apply -f flags.json on the guarded server: exit %d: %s", code, errOut.String())
	}
	g.Flag = postAs(t, g.AdminToken, base+"/apis/hub.cairn.dev/v1/typeinstances",
		instanceDoc("guarded-flag", "io.flipt.flag", "1.0.0-alpha.1", map[string]any{"enabled": true, "description": "seen after signing in"}, nil, nil))
	// What ed may see: a Type served as kind Token whose key is secret, and
	// one Token in team-a.
	postAs(t, g.AdminToken, base+"/apis/hub.cairn.dev/v1/types", map[string]any{"apiVersion": "hub.cairn.dev/v1", "kind": "Type",
		"metadata": map[string]any{"name": "cap.type.e2e.token"},
		"spec": map[string]any{"revision": "0.1.0", "jsonSchema": map[string]any{"type": "object", "properties": map[string]any{
			"user": map[string]any{"type": "string"}, "key": map[string]any{"type": "string", "x-cairn-secret": true}}},
			"rest": map[string]any{"group": "e2e.cairn.dev", "version": "v1", "names": map[string]any{"kind": "Token", "singular": "token", "plural": "tokens"}}}})
	tok := instanceDoc("team-token", "cap.type.e2e.token", "0.1.0", map[string]any{"user": "deploy", "key": "tk-s3cr3t-value"}, nil, nil)
	tok["metadata"].(map[string]any)["namespace"] = "team-a"
	g.Token = postAs(t, g.AdminToken, base+"/apis/hub.cairn.dev/v1/typeinstances", tok)
	// One without a value: GraphQL's non-null value is an error for it.
	nv := instanceDoc("team-novalue", "cap.type.e2e.token", "0.1.0", nil, nil, nil)
	nv["metadata"].(map[string]any)["namespace"] = "team-a"
	delete(nv["spec"].(map[string]any), "value")
	g.NoValue = postAs(t, g.AdminToken, base+"/apis/hub.cairn.dev/v1/typeinstances", nv)
	// An installation in team-a, whose tree of children ed opens.
	out.Reset()
	errOut.Reset()
	if code := cli.Main(context.Background(), []string{"--kubeconfig", g.Kubeconfig, "stack", "add", "../examples/stacks/minimal-gcp"}, cli.Env{
		Stdout: &out, Stderr: &errOut, Getenv: func(string) string { return "" },
	}); code != 0 {
		t.Fatalf("cairn stack add on the guarded server: exit %d: %s", code, errOut.String())
	}
	kubectl := exec.Command(lookTool(t, "kubectl", os.Getenv("KUBECTL"), "/usr/bin/kubectl"), "--kubeconfig", g.Kubeconfig, "apply", "-f", "-")
	kubectl.Stdin = strings.NewReader(`{"apiVersion": "gcp.stacks.cairn.dev/v1alpha1", "kind": "MinimalGCP",
		"metadata": {"name": "team-infra", "namespace": "team-a"}, "spec": {"region": "us-west2", "projectID": "team-a-project"}}`)
	if b, err := kubectl.CombinedOutput(); err != nil {
		t.Fatalf("kubectl apply of a MinimalGCP in team-a: %v\n%s", err, b)
	}
	waitChildren(t, base+"/apis/gcp.stacks.cairn.dev/v1alpha1/namespaces/team-a/minimalgcps/team-infra", g.AdminToken)
	return g
}

// waitChildren waits until the stack controller has reported the children
// of the installation at u and returns its uid.
func waitChildren(t *testing.T, u, token string) string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var obj struct {
			Metadata struct{ UID string } `json:"metadata"`
			Status   struct {
				Resources []json.RawMessage `json:"resources"`
			} `json:"status"`
		}
		req, err := http.NewRequest(http.MethodGet, u, nil)
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		r, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		err = json.NewDecoder(r.Body).Decode(&obj)
		r.Body.Close()
		if err == nil && len(obj.Status.Resources) > 0 {
			return obj.Metadata.UID
		}
		if time.Now().After(deadline) {
			t.Fatalf("the stack controller did not report the children of %s within 20s", u)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// seed holds the ids the browser test looks for.
type seed struct {
	DBServer string `json:"dbServer"`
	DBConfig string `json:"dbConfig"`
	Shop     string `json:"shop"`
	Builtin  string `json:"builtin"` // the built-in backend's id
	// RealStack is the id of an installation of examples/stacks/minimal-gcp
	// made through the stack catalog and controller, when the server has
	// them (GET hub.cairn.dev/v1/stacks answers).
	RealStack string `json:"realStack,omitempty"`
	// Proposals names the instances whose latest version is a proposal,
	// by the state of its pull request (open, merged, closed).
	Proposals map[string]string `json:"proposals"`
	// Portals are two installations of team-portal sharing one flags-env
	// dependency: new with the first, reused by the second.
	Portals []string `json:"portals,omitempty"`
	// Connection is an instance whose Type marks fields x-cairn-secret.
	Connection string `json:"connection"`
	// Long is an instance whose name, label and value are as long as the
	// server takes, for the narrow layout.
	Long string `json:"long"`
	// Projection is a gotemplate projection of db-server: its backend
	// takes no value, so the console offers no form to edit one.
	Projection string `json:"projection"`
	// Platform is the id of examples/stacks/platform-config/prod.yaml, a
	// cluster-scoped installation whose child is in namespace platform;
	// SQLEnv the id of an installation of examples/stacks/sql-env in its
	// default configuration set (dev). Empty without a stack catalog.
	Platform string `json:"platform,omitempty"`
	SQLEnv   string `json:"sqlEnv,omitempty"`
	// Unreachable is an instance whose external backend has stopped.
	Unreachable string `json:"unreachable"`
	// Guarded is a server that requires credentials.
	Guarded guarded `json:"guarded"`
}

func seedConsole(t *testing.T, base string) seed {
	t.Helper()
	for _, f := range []string{"../examples/quickstart", "../examples/flags/flags.json", "../examples/flags/new-project.yaml"} {
		var out, errOut bytes.Buffer
		if code := cli.Main(context.Background(), []string{"--server", base, "apply", "-f", f}, cli.Env{
			Stdout: &out, Stderr: &errOut, Getenv: func(string) string { return "" },
		}); code != 0 {
			t.Fatalf("cairn apply -f %s: exit %d: %s", f, code, errOut.String())
		}
	}
	// A policy of two rules, both to the built-in backend, so that the
	// explain box names a rule other than the first.
	pol := t.TempDir() + "/policy.yaml"
	if err := os.WriteFile(pol, []byte("typeInstance:\n  rules:\n  - typeRef: {path: cap.type.e2e.*}\n    backend: {id: cairn-builtin}\n"+
		"  - typeRef: {path: cap.*}\n    backend: {id: cairn-builtin}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if code := cli.Main(context.Background(), []string{"--server", base, "policy", "apply", "-f", pol}, cli.Env{
		Stdout: &out, Stderr: &errOut, Getenv: func(string) string { return "" },
	}); code != 0 {
		t.Fatalf("cairn policy apply: exit %d: %s", code, errOut.String())
	}
	var s seed
	s.DBServer = findID(t, base, "cap.type.database.postgresql.server", "db-server")
	s.DBConfig = findID(t, base, "cap.type.database.postgresql.config", "db-config")
	s.Builtin = findID(t, base, "cap.core.type.hub.storage.sqlite", "builtin")

	// 10,000 flags in one request: the console pages them on the server.
	items := make([]any, 10_000)
	for i := range items {
		items[i] = instanceDoc(fmt.Sprintf("flag-%05d", i), "io.flipt.flag", "1.0.0-alpha.1", map[string]any{"enabled": i%2 == 0}, nil, nil)
	}
	post(t, base+"/apis/hub.cairn.dev/v1/typeinstances", map[string]any{"apiVersion": "v1", "kind": "List", "items": items})

	// Two stacks: a database installation that the shop installation
	// reuses, and children labelled with the installation that owns them.
	for _, ty := range []struct{ path, kind string }{{"cap.type.stack.database", "Database"}, {"cap.type.stack.shop", "Shop"}} {
		lower := strings.ToLower(ty.kind)
		post(t, base+"/apis/hub.cairn.dev/v1/types", map[string]any{"apiVersion": "hub.cairn.dev/v1", "kind": "Type",
			"metadata": map[string]any{"name": ty.path},
			"spec": map[string]any{"revision": "0.1.0", "additionalRefs": []string{"cap.core.type.stack.installation"},
				"jsonSchema": map[string]any{"type": "object", "properties": map[string]any{"size": map[string]any{"type": "string", "enum": []string{"small", "large"}}}},
				"rest":       map[string]any{"group": "stacks.example.dev", "version": "v1", "names": map[string]any{"kind": ty.kind, "singular": lower, "plural": lower + "s"}}}})
	}
	db := post(t, base+"/apis/hub.cairn.dev/v1/typeinstances", instanceDoc("shared-db", "cap.type.stack.database", "0.1.0", map[string]any{"size": "small"}, nil, nil))
	time.Sleep(1100 * time.Millisecond) // creation times have seconds: the shop is visibly newer
	shop := post(t, base+"/apis/hub.cairn.dev/v1/typeinstances", instanceDoc("shop", "cap.type.stack.shop", "0.1.0", map[string]any{"size": "large"}, nil, []string{db}))
	s.Shop = shop
	owned := func(owner, name string) map[string]string {
		return map[string]string{"stacks.cairn.dev/uid": owner, "stacks.cairn.dev/name": name}
	}
	post(t, base+"/apis/hub.cairn.dev/v1/typeinstances", map[string]any{"apiVersion": "v1", "kind": "List", "items": []any{
		instanceDoc("shop-flag", "io.flipt.flag", "1.0.0-alpha.1", map[string]any{"enabled": true}, owned(shop, "shop"), nil),
		instanceDoc("shop-config", "cap.type.database.postgresql.server", "0.1.0", map[string]any{"host": "shop.db", "port": 5432}, owned(shop, "shop"), nil),
		instanceDoc("shared-db-server", "cap.type.database.postgresql.server", "0.1.0", map[string]any{"host": "shared.db", "port": 5432}, owned(db, "shared-db"), nil),
	}})
	// A Type whose schema marks secrets (x-cairn-secret), directly and
	// through a $ref inside an array's items, and an instance of it.
	post(t, base+"/apis/hub.cairn.dev/v1/types", map[string]any{"apiVersion": "hub.cairn.dev/v1", "kind": "Type",
		"metadata": map[string]any{"name": "cap.type.e2e.connection"},
		"spec": map[string]any{"revision": "0.1.0", "jsonSchema": map[string]any{"type": "object",
			"$defs": map[string]any{"auth": map[string]any{"type": "string", "x-cairn-secret": true}},
			"properties": map[string]any{
				"host": map[string]any{"type": "string"},
				"dsn":  map[string]any{"type": "string", "x-cairn-secret": true},
				"replicas": map[string]any{"type": "array", "items": map[string]any{"type": "object",
					"properties": map[string]any{"url": map[string]any{"type": "string"}, "auth": map[string]any{"$ref": "#/$defs/auth"}}}},
			}}}})
	s.Connection = post(t, base+"/apis/hub.cairn.dev/v1/typeinstances", instanceDoc("conn", "cap.type.e2e.connection", "0.1.0",
		map[string]any{"host": "db.example.org", "dsn": "postgres://app:hunter2-dsn@db.example.org/app",
			"replicas": []any{map[string]any{"url": "replica-1.example.org", "auth": "s3cr3t-replica-auth"}}}, nil, nil))
	proj := instanceDoc("db-endpoint", "cap.type.e2e.endpoint", "0.1.0", nil, nil, nil)
	proj["spec"].(map[string]any)["backend"] = map[string]any{"id": "abd48b8c-99bd-40a7-99c0-047bd69f1db8", "context": map[string]any{
		"template": "url: 'postgres://{{ .db.host }}:{{ .db.port }}'", "variables": map[string]any{"db": map[string]any{"typeInstanceID": s.DBServer}}}}
	delete(proj["spec"].(map[string]any), "value")
	s.Projection = post(t, base+"/apis/hub.cairn.dev/v1/typeinstances", proj)
	long := strings.Repeat("a", 63) + "." + strings.Repeat("b", 63) + "." + strings.Repeat("c", 63)
	s.Long = post(t, base+"/apis/hub.cairn.dev/v1/typeinstances", instanceDoc(long, "cap.type.database.postgresql.server", "0.1.0",
		map[string]any{"host": strings.Repeat("h", 63) + "." + strings.Repeat("o", 63) + ".example.org", "port": 5432},
		map[string]string{"example.com/" + strings.Repeat("k", 63): strings.Repeat("v", 63)}, nil))
	s.Unreachable = seedUnreachable(t, base)
	s.RealStack = installRealStack(t, base)
	if s.RealStack != "" {
		s.Platform, s.SQLEnv = installScopedAndSets(t, base)
	}
	s.Proposals = seedProposals(t, base)
	s.Portals = installPortals(t, base)
	return s
}

// seedUnreachable registers an external backend (the file backend over
// gRPC), stores an instance in it and stops it: a backend that is down, as
// a user meets one.
func seedUnreachable(t *testing.T, base string) string {
	t.Helper()
	fb, err := file.New(file.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { storagebackend.NewValueServer(fb, storagebackend.Options{}).Serve(ctx, lis); close(done) }()
	var out, errOut bytes.Buffer
	if code := cli.Main(context.Background(), []string{"--server", base, "backends", "register", "--url", "grpc://" + lis.Addr().String(), "--accept-value", "--alias", "files-down"}, cli.Env{
		Stdout: &out, Stderr: &errOut, Getenv: func(string) string { return "" },
	}); code != 0 {
		t.Fatalf("cairn backends register: exit %d: %s", code, errOut.String())
	}
	doc := instanceDoc("db-unreachable", "cap.type.database.postgresql.server", "0.1.0", map[string]any{"host": "files.db", "port": 5432}, nil, nil)
	doc["spec"].(map[string]any)["backend"] = map[string]any{"id": "files-down"}
	id := post(t, base+"/apis/hub.cairn.dev/v1/typeinstances", doc)
	cancel()
	<-done
	return id
}

// installPortals installs examples/stacks/team-portal twice for the same
// team with cairn install (the dependency resolver and installer the
// server runs): the first install creates the team's flags-env
// installation, the second reuses it. It returns the portals' names, or
// nil when the server has no stack catalog.
func installPortals(t *testing.T, base string) []string {
	t.Helper()
	if resp, err := http.Get(base + "/apis/hub.cairn.dev/v1/stacks"); err != nil || resp.StatusCode == http.StatusNotFound {
		return nil
	}
	run := func(args ...string) {
		t.Helper()
		var out, errOut bytes.Buffer
		if code := cli.Main(context.Background(), append([]string{"--server", base}, args...), cli.Env{
			Stdout: &out, Stderr: &errOut, Getenv: func(string) string { return "" },
		}); code != 0 {
			t.Fatalf("cairn %s: exit %d: %s%s", strings.Join(args, " "), code, out.String(), errOut.String())
		}
	}
	run("stack", "add", "../examples/stacks/flags-env")
	run("stack", "add", "../examples/stacks/team-portal")
	names := []string{"web-portal", "web-portal-v2"}
	for _, n := range names {
		start := time.Now()
		run("install", "team-portal", "-p", "team=web", "--name", n)
		t.Logf("install %s: %s", n, time.Since(start))
	}
	return names
}

const ghToken = "gh-e2e-token"

// seedProposals registers a Git backend in propose mode on a real bare
// repository, with a fake GitHub (backend/scm/scmtest) that merges with
// real git, and makes three proposals through it: one left open, one
// merged and one closed through the provider. It returns their instances'
// names by state.
func seedProposals(t *testing.T, base string) map[string]string {
	t.Helper()
	git := func(dir string, args ...string) string {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out))
	}
	bare := t.TempDir() + "/flags.git"
	git("", "init", "--bare", "--quiet", "--initial-branch=main", bare)
	work := t.TempDir()
	git("", "clone", "--quiet", "file://"+bare, work)
	git(work, "-c", "user.name=seed", "-c", "user.email=seed@example.com", "commit", "--quiet", "--allow-empty", "-m", "initial")
	git(work, "push", "--quiet", "origin", "HEAD:main")
	gh := scmtest.NewGitHub(t, "acme/flags", ghToken, func(p scmtest.Pull) error {
		cmd := exec.Command("git", "update-ref", "refs/heads/"+p.Base, "refs/heads/"+p.Head)
		cmd.Dir = bare
		return cmd.Run()
	})
	scmCfg := scm.Config{Provider: "github", APIURL: gh.URL, Repository: "acme/flags", TokenEnv: "E2E_GH_TOKEN"}
	backend := post(t, base+"/apis/hub.cairn.dev/v1/typeinstances", map[string]any{"apiVersion": "hub.cairn.dev/v1", "kind": "TypeInstance",
		"metadata": map[string]any{"name": "flags-repo", "namespace": "cairn-system", "alias": "flags-repo"},
		"spec": map[string]any{"typeRef": map[string]any{"path": gitbackend.TypePath, "revision": "0.1.0"},
			"attributes": []any{map[string]any{"path": "cap.core.attribute.hub.storage.backend", "revision": "0.1.0"}},
			"value": map[string]any{"url": "file://" + bare, "acceptValue": true, "contextSchema": json.RawMessage(gitbackend.ContextSchema),
				"mode": "propose", "author": map[string]string{"name": "cairn", "email": "cairn@example.com"}, "scm": scmCfg}}})
	numbers := map[string]int{}
	out := map[string]string{}
	for i, state := range []string{"open", "merged", "closed"} {
		doc := instanceDoc("proposed-"+state, "io.flipt.flag", "1.0.0-alpha.1", map[string]any{"enabled": true}, nil, nil)
		doc["spec"].(map[string]any)["backend"] = map[string]any{"id": backend}
		b, _ := json.Marshal(doc)
		resp, err := http.Post(base+"/apis/hub.cairn.dev/v1/typeinstances", "application/json", bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode/100 != 2 || !bytes.Contains(body, []byte(`"proposal":{`)) {
			t.Fatalf("create through the propose-mode backend: %s\n%s, want a proposal in the context", resp.Status, body)
		}
		numbers[state] = i + 1
		out[state] = "proposed-" + state
	}
	prov, err := scm.New(scmCfg, scm.Options{Getenv: func(string) string { return ghToken }})
	if err != nil {
		t.Fatal(err)
	}
	if err := prov.Merge(context.Background(), numbers["merged"]); err != nil {
		t.Fatalf("merge pull request %d: %v", numbers["merged"], err)
	}
	if err := prov.Close(context.Background(), numbers["closed"]); err != nil {
		t.Fatalf("close pull request %d: %v", numbers["closed"], err)
	}
	return out
}

// installRealStack adds examples/stacks/minimal-gcp to the catalog, creates
// an installation with kubectl and waits until the stack controller has
// reported its children. It returns "" when the server has no catalog.
func installRealStack(t *testing.T, base string) string {
	t.Helper()
	resp, err := http.Get(base + "/apis/hub.cairn.dev/v1/stacks")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		t.Log("this server has no stack catalog: the stack pages are tested on hand-made installations only")
		return ""
	}
	var out, errOut bytes.Buffer
	if code := cli.Main(context.Background(), []string{"--server", base, "stack", "add", "../examples/stacks/minimal-gcp"}, cli.Env{
		Stdout: &out, Stderr: &errOut, Getenv: func(string) string { return "" },
	}); code != 0 {
		t.Fatalf("cairn stack add: exit %d: %s", code, errOut.String())
	}
	kubectl := exec.Command(lookTool(t, "kubectl", os.Getenv("KUBECTL"), "/usr/bin/kubectl"), "--server", base, "apply", "-f", "-")
	kubectl.Stdin = strings.NewReader(`{"apiVersion": "gcp.stacks.cairn.dev/v1alpha1", "kind": "MinimalGCP",
		"metadata": {"name": "small-infra", "namespace": "default"}, "spec": {"region": "us-west2", "projectID": "foo-project"}}`)
	if b, err := kubectl.CombinedOutput(); err != nil {
		t.Fatalf("kubectl apply of a MinimalGCP: %v\n%s", err, b)
	}
	return waitChildren(t, base+"/apis/gcp.stacks.cairn.dev/v1alpha1/namespaces/default/minimalgcps/small-infra", "")
}

// installScopedAndSets adds examples/stacks/platform-config (a
// cluster-scoped kind) and examples/stacks/sql-env (configuration sets),
// applies one installation of each with kubectl and waits for their
// children. It returns their ids.
func installScopedAndSets(t *testing.T, base string) (string, string) {
	t.Helper()
	for _, st := range []string{"platform-config", "sql-env"} {
		var out, errOut bytes.Buffer
		if code := cli.Main(context.Background(), []string{"--server", base, "stack", "add", "../examples/stacks/" + st}, cli.Env{
			Stdout: &out, Stderr: &errOut, Getenv: func(string) string { return "" },
		}); code != 0 {
			t.Fatalf("cairn stack add %s: exit %d: %s", st, code, errOut.String())
		}
	}
	kubectl := exec.Command(lookTool(t, "kubectl", os.Getenv("KUBECTL"), "/usr/bin/kubectl"), "--server", base, "apply",
		"-f", "../examples/stacks/platform-config/prod.yaml", "-f", "-")
	kubectl.Stdin = strings.NewReader(`{"apiVersion": "sql.stacks.cairn.dev/v1alpha1", "kind": "SQLEnv",
		"metadata": {"name": "orders", "namespace": "default"}, "spec": {"region": "us-west2"}}`)
	if b, err := kubectl.CombinedOutput(); err != nil {
		t.Fatalf("kubectl apply of a PlatformConfig and an SQLEnv: %v\n%s", err, b)
	}
	return waitChildren(t, base+"/apis/platform.stacks.cairn.dev/v1alpha1/platformconfigs/prod", ""),
		waitChildren(t, base+"/apis/sql.stacks.cairn.dev/v1alpha1/namespaces/default/sqlenvs/orders", "")
}

func instanceDoc(name, path, rev string, value any, labels map[string]string, uses []string) map[string]any {
	spec := map[string]any{"typeRef": map[string]any{"path": path, "revision": rev}, "value": value}
	if uses != nil {
		spec["uses"] = uses
	}
	return map[string]any{"apiVersion": "hub.cairn.dev/v1", "kind": "TypeInstance",
		"metadata": map[string]any{"name": name, "namespace": "default", "labels": labels}, "spec": spec}
}

// post sends a JSON document and returns the created object's name.
func post(t *testing.T, u string, doc any) string {
	t.Helper()
	return postAs(t, "", u, doc)
}

// postAs is post with a bearer token ("": none).
func postAs(t *testing.T, token, u string, doc any) string {
	t.Helper()
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, u, bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("POST %s: %s\n%s", u, resp.Status, body)
	}
	var out struct {
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
	}
	_ = json.Unmarshal(body, &out)
	return out.Metadata.Name
}

func findID(t *testing.T, base, path, name string) string {
	t.Helper()
	resp, err := http.Get(base + "/apis/hub.cairn.dev/v1/typeinstances?typePath=" + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var l struct {
		Items []struct {
			Metadata struct{ Name string } `json:"metadata"`
			Spec     struct{ Name string } `json:"spec"`
		} `json:"items"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&l); err != nil {
		t.Fatal(err)
	}
	for _, it := range l.Items {
		if it.Spec.Name == name {
			return it.Metadata.Name
		}
	}
	t.Fatalf("no instance %s of %s", name, path)
	return ""
}
