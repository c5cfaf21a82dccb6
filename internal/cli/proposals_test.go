package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/api/rest"
	gitbackend "github.com/cairn-dev/cairn/backend/git"
	"github.com/cairn-dev/cairn/backend/scm/scmtest"
	"github.com/cairn-dev/cairn/hub"
	"github.com/cairn-dev/cairn/internal/cli"
	"github.com/cairn-dev/cairn/policy"
	"github.com/cairn-dev/cairn/store/sqlite"
)

const proposeToken = "gh-e2e-token"

func gitOut(t *testing.T, dir string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

func mustGit(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := gitOut(t, dir, args...)
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// runWithToken runs the CLI in e's data directory with the provider's
// token in the environment.
func runWithToken(e *env, args ...string) result {
	e.t.Helper()
	var out, errOut bytes.Buffer
	vars := map[string]string{"USER": "tester", cli.EnvDataDir: e.dir, "GH_TOKEN": proposeToken}
	code := cli.Main(context.Background(), args, cli.Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errOut,
		Getenv: func(k string) string { return vars[k] }})
	return result{code: code, stdout: out.String(), stderr: errOut.String()}
}

func okWithToken(e *env, args ...string) string {
	e.t.Helper()
	r := runWithToken(e, args...)
	if r.code != 0 {
		e.t.Fatalf("cairn %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

// TestProposeEndToEnd: a Git backend in propose mode on a real bare
// repository, with a fake GitHub that merges for real (fast-forwarding
// main to the pull request's branch). A REST create answers 202 with the
// proposal; the branch is on the remote and main is unchanged; `cairn
// proposals merge` merges it through the provider and main has the commit;
// a REST update becomes a second proposal, which `cairn proposals close`
// closes.
func TestProposeEndToEnd(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatalf("git is required: %v", err)
	}
	ctx := cairn.WithActor(context.Background(), "admin")
	bare := filepath.Join(t.TempDir(), "flags.git")
	mustGit(t, "", "init", "--bare", "--quiet", "--initial-branch=main", bare)
	work := t.TempDir()
	mustGit(t, "", "clone", "--quiet", "file://"+bare, work)
	mustGit(t, work, "-c", "user.name=seed", "-c", "user.email=seed@example.com", "commit", "--quiet", "--allow-empty", "-m", "initial")
	mustGit(t, work, "push", "--quiet", "origin", "HEAD:main")
	seed := mustGit(t, bare, "rev-parse", "main")

	gh := scmtest.NewGitHub(t, "acme/flags", proposeToken, func(p scmtest.Pull) error {
		if _, err := gitOut(t, bare, "merge-base", "--is-ancestor", p.Base, p.Head); err != nil {
			return fmt.Errorf("not a fast-forward")
		}
		_, err := gitOut(t, bare, "update-ref", "refs/heads/"+p.Base, "refs/heads/"+p.Head)
		return err
	})

	value, _ := json.Marshal(map[string]any{
		"url": "file://" + bare, "acceptValue": true, "contextSchema": json.RawMessage(gitbackend.ContextSchema),
		"mode": "propose", "author": map[string]string{"name": "cairn", "email": "cairn@example.com"},
		"scm": map[string]string{"provider": "github", "apiURL": gh.URL, "repository": "acme/flags", "tokenEnv": "GH_TOKEN"},
	})
	dir := t.TempDir()
	rd := writeFile(t, dir, "10-flags.json", `{"apiVersion": "cup.flipt.io/v1alpha1", "kind": "ResourceDefinition",
 "metadata": {"name": "flags.flipt.io"}, "names": {"kind": "Flag", "singular": "flag", "plural": "flags"},
 "spec": {"group": "flipt.io", "versions": {"v1": {"type": "object", "properties": {"enabled": {"type": "boolean"}}}}}}`)
	repo := writeFile(t, dir, "20-repo.json", `{"apiVersion": "hub.cairn.dev/v1", "kind": "TypeInstance",
 "metadata": {"name": "flags-repo", "namespace": "cairn-system", "alias": "flags-repo"},
 "spec": {"typeRef": {"path": "`+gitbackend.TypePath+`", "revision": "0.1.0"},
  "attributes": [{"path": "cap.core.attribute.hub.storage.backend", "revision": "0.1.0"}],
  "value": `+string(value)+`}}`)
	e := newEnv(t)
	okWithToken(e, "apply", "-f", rd, "-f", repo)

	// The REST server: another process on the same store, with a Git
	// cache of its own.
	st, err := sqlite.Open(ctx, filepath.Join(e.dir, "cairn.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	getenv := func(k string) string {
		if k == "GH_TOKEN" {
			return proposeToken
		}
		return ""
	}
	h, err := hub.New(ctx, hub.Config{Store: st, Backends: gitbackend.NewOpener(gitbackend.OpenerConfig{CacheDir: t.TempDir(), Getenv: getenv})})
	if err != nil {
		t.Fatal(err)
	}
	backend, err := h.GetInstanceByName(ctx, gitbackend.TypePath, hub.SystemNamespace, "flags-repo", false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.ApplyPolicy(ctx, policy.Policy{TypeInstance: policy.TypeInstancePolicy{Rules: []policy.Rule{
		{TypeRef: policy.TypeRef{Path: "io.flipt.flag"}, Backend: policy.BackendRef{ID: backend.ID}}}}}); err != nil {
		t.Fatalf("ApplyPolicy: %v", err)
	}
	srv := httptest.NewServer(rest.New(rest.Config{Hub: h}))
	t.Cleanup(srv.Close)
	base := srv.URL + "/apis/flipt.io/v1/namespaces/default/flags"
	do := func(method, url, body string, want int) map[string]any {
		t.Helper()
		req, _ := http.NewRequest(method, url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Impersonate-User", "jane")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != want {
			t.Fatalf("%s %s: %d %s, want %d", method, url, resp.StatusCode, data, want)
		}
		var out map[string]any
		if err := json.Unmarshal(data, &out); err != nil {
			t.Fatalf("%s %s: %v: %s", method, url, err, data)
		}
		return out
	}

	created := do("POST", base, `{"apiVersion":"flipt.io/v1","kind":"Flag","metadata":{"name":"new-project"},"spec":{"enabled":true}}`, http.StatusAccepted)
	prop, _ := created["proposal"].(map[string]any)
	id, _ := prop["id"].(string)
	if id == "" || prop["provider"] != "github" || !strings.HasSuffix(fmt.Sprint(prop["url"]), "/acme/flags/pull/1") {
		t.Fatalf("202 answer's proposal = %v", prop)
	}
	if created["kind"] != "Flag" {
		t.Errorf("202 answer = %v, want the object too", created)
	}
	branch := "cairn/proposal/" + id
	head := mustGit(t, bare, "rev-parse", "refs/heads/"+branch)
	if got := mustGit(t, bare, "rev-parse", "main"); got != seed {
		t.Errorf("main moved to %s before any merge", got)
	}
	const file = "default/flipt.io-v1-Flag-new-project.json"
	if _, err := gitOut(t, bare, "cat-file", "-e", "main:"+file); err == nil {
		t.Errorf("%s is on main before the merge", file)
	}
	if got := mustGit(t, bare, "show", branch+":"+file); !strings.Contains(got, `"enabled": true`) {
		t.Errorf("file on %s:\n%s", branch, got)
	}
	// The hub shows the proposed value.
	if got := do("GET", base+"/new-project", "", http.StatusOK); fmt.Sprint(got["spec"]) != "map[enabled:true]" {
		t.Errorf("GET spec = %v", got["spec"])
	}

	// The server lists it (hub.cairn.dev/v1 proposals) with the state its
	// provider reports, as the web console shows it.
	proposals := srv.URL + "/apis/hub.cairn.dev/v1/proposals"
	served := do("GET", proposals, "", http.StatusOK)
	items, _ := served["items"].([]any)
	if len(items) != 1 {
		t.Fatalf("GET proposals = %v, want one", served)
	}
	one, _ := json.Marshal(items[0])
	for _, want := range []string{`"name":"` + id + `"`, `"kind":"Proposal"`, `"state":"open"`, `/acme/flags/pull/1"`, `"number":1`,
		`"name":"new-project"`, `"branch":"cairn/proposal/` + id + `"`, `"resourceVersion":1`, `"createdBy":"jane"`} {
		if !strings.Contains(string(one), want) {
			t.Errorf("served proposal %s lacks %s", one, want)
		}
	}
	if got := do("GET", proposals+"?state=false", "", http.StatusOK); !strings.Contains(fmt.Sprint(got["items"]), "state:Unknown") {
		t.Errorf("GET proposals?state=false = %v, want the state not asked", got)
	}
	do("GET", proposals+"?state=maybe", "", http.StatusUnprocessableEntity)
	// As the Table kubectl get asks for.
	treq, _ := http.NewRequest("GET", proposals, nil)
	treq.Header.Set("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	tresp, err := http.DefaultClient.Do(treq)
	if err != nil {
		t.Fatal(err)
	}
	table, _ := io.ReadAll(tresp.Body)
	tresp.Body.Close()
	for _, want := range []string{`"kind":"Table"`, `"name":"State"`, `"name":"URL"`, `"` + id + `"`, `"open"`, `/acme/flags/pull/1"`} {
		if !strings.Contains(string(table), want) {
			t.Errorf("proposals as a Table lack %s: %s", want, table)
		}
	}
	do("GET", proposals+"/000000000000", "", http.StatusNotFound)

	list := okWithToken(e, "proposals", "list")
	if !strings.Contains(list, id) || !strings.Contains(list, "default/new-project") || !strings.Contains(list, " open ") {
		t.Errorf("proposals list:\n%s", list)
	}
	if out := okWithToken(e, "proposals", "merge", id); !strings.Contains(out, "merged") {
		t.Errorf("proposals merge: %s", out)
	}
	if got := mustGit(t, bare, "rev-parse", "main"); got != head {
		t.Errorf("main = %s after the merge, want the proposal's commit %s", got, head)
	}
	if got := mustGit(t, bare, "log", "-1", "--format=%s", "main"); got != "cairn: create Flag default/new-project (resource version 1) by jane" {
		t.Errorf("main's commit = %q", got)
	}
	var shown struct{ State string }
	if err := json.Unmarshal([]byte(okWithToken(e, "proposals", "show", id, "-o", "json")), &shown); err != nil || shown.State != "merged" {
		t.Errorf("proposals show after the merge: state %q (%v)", shown.State, err)
	}
	// The same through the server (server mode): the CLI reads the
	// instances and the backend's settings over REST and asks the provider.
	if err := json.Unmarshal([]byte(okWithToken(newEnv(t), "--server", srv.URL, "proposals", "show", id, "-o", "json")), &shown); err != nil || shown.State != "merged" {
		t.Errorf("proposals show in server mode: state %q (%v)", shown.State, err)
	}
	if list := okWithToken(newEnv(t), "--server", srv.URL, "proposals", "list"); !strings.Contains(list, id) || !strings.Contains(list, " merged ") {
		t.Errorf("proposals list in server mode:\n%s", list)
	}
	if got := do("GET", proposals+"/"+id, "", http.StatusOK); fmt.Sprint(got["status"]) != "map[state:merged]" {
		t.Errorf("GET proposals/%s after the merge: status %v", id, got["status"])
	}
	// The CLI's own Git cache reads the version too.
	if got := okWithToken(e, "get", "io.flipt.flag", "new-project", "-o", "json"); !strings.Contains(strings.ReplaceAll(got, " ", ""), `"enabled":true`) {
		t.Errorf("cairn get = %s", got)
	}

	// An update: a second proposal, based on main now; closed unmerged.
	obj := do("GET", base+"/new-project", "", http.StatusOK)
	obj["spec"] = map[string]any{"enabled": false}
	body, _ := json.Marshal(obj)
	updated := do("PUT", base+"/new-project", string(body), http.StatusAccepted)
	prop2, _ := updated["proposal"].(map[string]any)
	id2, _ := prop2["id"].(string)
	if id2 == "" || id2 == id {
		t.Fatalf("PUT's proposal = %v", prop2)
	}
	if parent := mustGit(t, bare, "rev-parse", "refs/heads/cairn/proposal/"+id2+"^"); parent != head {
		t.Errorf("the update's proposal starts at %s, want main %s", parent, head)
	}
	// Writing the same value again changes nothing: 200, no new proposal.
	same, _ := json.Marshal(do("GET", base+"/new-project", "", http.StatusOK))
	if again := do("PUT", base+"/new-project", string(same), http.StatusOK); again["proposal"] != nil {
		t.Errorf("an unchanged PUT answered with a proposal: %v", again["proposal"])
	}
	if out := okWithToken(e, "proposals", "close", id2); !strings.Contains(out, "closed") {
		t.Errorf("proposals close: %s", out)
	}
	if pull, _ := gh.Pull(2); pull.State != "closed" || pull.Merged {
		t.Errorf("pull request 2 = %+v, want closed", pull)
	}
	if got := do("GET", proposals+"/"+id2, "", http.StatusOK); fmt.Sprint(got["status"]) != "map[state:closed]" {
		t.Errorf("GET proposals/%s after the close: status %v", id2, got["status"])
	}
	if got := mustGit(t, bare, "rev-parse", "main"); got != head {
		t.Errorf("main moved to %s after a close", got)
	}

	// Local-mode apply prints the proposal.
	flag := writeFile(t, dir, "30-flag.json", `{"apiVersion": "hub.cairn.dev/v1", "kind": "TypeInstance",
 "metadata": {"name": "other"},
 "spec": {"typeRef": {"path": "io.flipt.flag", "revision": "1.0.0"}, "value": {"enabled": true}}}`)
	out := okWithToken(e, "apply", "-f", flag)
	if !strings.Contains(out, "created; proposal ") || !strings.Contains(out, "github pull request") || !strings.Contains(out, "/acme/flags/pull/3") {
		t.Errorf("apply output: %s", out)
	}
	// And so does client mode, through the REST server.
	flag2 := writeFile(t, dir, "40-flag.json", `{"apiVersion": "hub.cairn.dev/v1", "kind": "TypeInstance",
 "metadata": {"name": "third"},
 "spec": {"typeRef": {"path": "io.flipt.flag", "revision": "1.0.0"}, "value": {"enabled": false}}}`)
	out = okWithToken(newEnv(t), "--server", srv.URL, "apply", "-f", flag2)
	if !strings.Contains(out, "created; proposal ") || !strings.Contains(out, "/acme/flags/pull/4") {
		t.Errorf("client-mode apply output: %s", out)
	}
	if n := gh.Count("POST /repos/acme/flags/pulls"); n != 4 {
		t.Errorf("%d pull requests opened, want 4 (create, update, two applies)", n)
	}
}
