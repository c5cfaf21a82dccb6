package git_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/api/rest"
	"github.com/cairn-dev/cairn/backend/git"
	"github.com/cairn-dev/cairn/backend/git/gittest"
	"github.com/cairn-dev/cairn/hub"
	"github.com/cairn-dev/cairn/policy"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/sqlite"
)

// TestRESTCreateLandsInTheRepository: a cup Flag Type bound to a Git
// backend by a policy rule; a REST create, update and delete through
// api/rest become commits on the bare repository, by the request's user.
func TestRESTCreateLandsInTheRepository(t *testing.T) {
	r := gittest.NewRemote(t)
	ctx := cairn.WithActor(context.Background(), "admin")
	h, _ := flagsInGit(t, ctx, r.Serve(t))
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
		_ = json.Unmarshal(data, &out)
		return out
	}
	do("POST", base, `{"apiVersion":"flipt.io/v1","kind":"Flag","metadata":{"name":"new-project","labels":{"team":"moonshots"}},"spec":{"enabled":true}}`, http.StatusCreated)

	const file = "default/flipt.io-v1-Flag-new-project.json"
	if got := gittest.SpecOf(t, r.Show(t, "", file)); !bytes.Contains(got, []byte(`"enabled": true`)) {
		t.Errorf("spec in the repository = %s", got)
	}
	if got := gittest.Git(t, r.Path, "log", "-1", "--format=%s", "main"); got != "cairn: create Flag default/new-project (resource version 1) by jane" {
		t.Errorf("commit = %q", got)
	}
	if got := r.Show(t, "", file); !strings.Contains(got, `"team": "moonshots"`) {
		t.Errorf("labels are not in the file:\n%s", got)
	}
	created := r.Commits(t)

	obj := do("GET", base+"/new-project", "", http.StatusOK)
	obj["spec"] = map[string]any{"enabled": false}
	body, _ := json.Marshal(obj)
	do("PUT", base+"/new-project", string(body), http.StatusOK)
	if got := gittest.SpecOf(t, r.Show(t, "", file)); !bytes.Contains(got, []byte(`"enabled": false`)) {
		t.Errorf("spec after PUT = %s", got)
	}
	got := do("GET", base+"/new-project", "", http.StatusOK)
	ctxDoc := got["status"].(map[string]any)["backend"].(map[string]any)["context"].(map[string]any)
	if ctxDoc["commit"] != gittest.Git(t, r.Path, "rev-parse", "main") {
		t.Errorf("status.backend.context = %v, want the commit of main", ctxDoc)
	}
	if got["spec"].(map[string]any)["enabled"] != false {
		t.Errorf("GET spec = %v", got["spec"])
	}
	// Version 1 is still the file at its commit.
	inst, err := h.GetInstance(ctx, got["metadata"].(map[string]any)["uid"].(string), false)
	if err != nil {
		t.Fatal(err)
	}
	if v1, err := h.ResourceVersion(ctx, inst.ID, 1, true); err != nil || string(v1.Value) != `{"enabled":true}` {
		t.Errorf("value of version 1 = %s, %v; want the first file's spec", v1.Value, err)
	}
	do("DELETE", base+"/new-project", "", http.StatusOK)
	if n := r.Commits(t); n != created+2 {
		t.Errorf("%d commits after create, update and delete, want %d", n, created+2)
	}
	if files := gittest.Git(t, r.Path, "ls-tree", "-r", "--name-only", "main"); files != "" {
		t.Errorf("files left on main: %s", files)
	}
}

// flagsInGit starts a hub on a SQLite file with a cup Flag Type
// (io.flipt.flag 1.0.0, flipt.io/v1 Flag) whose instances a policy rule
// stores in a Git backend on url, branch main; it returns the hub and the
// backend's id.
func flagsInGit(t *testing.T, ctx context.Context, url string) (*hub.Hub, string) {
	t.Helper()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "cairn.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	h, err := hub.New(ctx, hub.Config{Store: st, Backends: git.NewOpener(git.OpenerConfig{CacheDir: t.TempDir()})})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.CreateType(ctx, cairn.Type{Path: "io.flipt.flag", Revision: "1.0.0", Group: "flipt.io", Version: "v1",
		Names:      &cairn.Names{Kind: "Flag", Singular: "flag", Plural: "flags"},
		JSONSchema: json.RawMessage(`{"type":"object","properties":{"enabled":{"type":"boolean"}}}`)}); err != nil {
		t.Fatalf("CreateType: %v", err)
	}
	value, _ := json.Marshal(map[string]any{"url": url, "acceptValue": true, "contextSchema": json.RawMessage(git.ContextSchema),
		"branch": "main", "author": map[string]string{"name": "cairn", "email": "cairn@example.com"}})
	reg, err := h.CreateInstances(ctx, hub.CreateRequest{Instances: []hub.NewInstance{{Alias: "flags-repo", Namespace: hub.SystemNamespace,
		TypeRef: cairn.TypeRef{Path: git.TypePath, Revision: cairn.CoreRevision}, Value: value,
		Attributes: []cairn.AttributeRef{{Path: cairn.StorageAttributePath, Revision: cairn.CoreRevision}}}}})
	if err != nil {
		t.Fatalf("register the Git backend: %v", err)
	}
	if _, err := h.ApplyPolicy(ctx, policy.Policy{TypeInstance: policy.TypeInstancePolicy{Rules: []policy.Rule{
		{TypeRef: policy.TypeRef{Path: "io.flipt.flag"}, Backend: policy.BackendRef{ID: reg[0].ID}}}}}); err != nil {
		t.Fatalf("ApplyPolicy: %v", err)
	}
	return h, reg[0].ID
}

// TestRecoveryRestoresADeleteThatNeverCommitted stands for a process
// stopped between the push of a reconcile's batch, which deleted a child's
// file, and the hub's commit: the remote's post-receive hook holds the
// push's answer until the request's context is cancelled, so the branch has
// lost the file while the hub still has the instance and the delete's
// intent. Recovery puts the file back.
func TestRecoveryRestoresADeleteThatNeverCommitted(t *testing.T) {
	r := gittest.NewRemote(t)
	dir := t.TempDir()
	release := filepath.Join(dir, "release")
	hook := filepath.Join(r.Path, "hooks", "post-receive")
	// It waits for release, for the test's end (its directory gone) or,
	// should the test be killed, a minute.
	script := "#!/bin/sh\ni=0\nwhile [ ! -e " + release + " ] && [ -d " + dir + " ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done\n"
	if err := os.WriteFile(hook, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.WriteFile(release, nil, 0o644) }) // never leave the CGI waiting
	os.WriteFile(release, nil, 0o644)                       // pushes go through until the delete's
	ctx := cairn.WithActor(context.Background(), "admin")
	h, bid := flagsInGit(t, ctx, r.Serve(t))
	flag := cairn.TypeRef{Path: "io.flipt.flag", Revision: "1.0.0"}
	owner, err := h.CreateInstances(ctx, hub.CreateRequest{Instances: []hub.NewInstance{{TypeRef: flag, Name: "owner",
		Value: json.RawMessage(`{"enabled":true}`), Backend: &hub.BackendInput{ID: cairn.BuiltinBackendID}}}})
	if err != nil {
		t.Fatalf("create the owner: %v", err)
	}
	made, err := h.ApplyChildren(ctx, owner[0].ID, hub.ChildChanges{Create: []hub.NewInstance{{TypeRef: flag, Namespace: "default", Name: "kept",
		Value: json.RawMessage(`{"enabled":true}`)}}})
	if err != nil {
		t.Fatalf("create the child: %v", err)
	}
	id := made.Created[0].ID
	const file = "default/flipt.io-v1-Flag-kept.json"
	before := r.Show(t, "", file)
	if err := os.Remove(release); err != nil {
		t.Fatal(err)
	}

	// The delete: its push lands, its answer never comes.
	dctx, cancel := context.WithCancel(ctx)
	deleted := make(chan error, 1)
	go func() {
		_, err := h.ApplyChildren(dctx, owner[0].ID, hub.ChildChanges{Delete: []string{id}})
		deleted <- err
	}()
	deadline := time.Now().Add(30 * time.Second)
	for strings.Contains(gittest.Git(t, r.Path, "ls-tree", "-r", "--name-only", "main"), file) {
		if time.Now().After(deadline) {
			t.Fatal("the delete's push never reached the remote")
		}
		time.Sleep(20 * time.Millisecond)
	}
	ins, err := h.PendingIntents(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ins) != 1 || ins[0].InstanceID != id || ins[0].Op != store.IntentBatchDelete || ins[0].BackendID != bid {
		t.Fatalf("intents while the push is under way = %+v, want the batch delete of %s", ins, id)
	}
	cancel()
	if err := <-deleted; err == nil {
		t.Fatal("the delete succeeded without its push's answer")
	}
	if _, err := h.GetInstance(ctx, id, false); err != nil {
		t.Fatalf("the instance whose delete never committed: %v", err)
	}
	if ins, _ := h.PendingIntents(ctx); len(ins) != 1 {
		t.Fatalf("intents after the unanswered delete = %+v, want it kept", ins)
	}
	os.WriteFile(release, nil, 0o644)

	res, err := h.Recover(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if res.Restored != 1 || res.Committed+res.Undone+res.Deleted+len(res.Failed) != 0 {
		t.Fatalf("Recover = %+v, want one restored", res)
	}
	if got := r.Show(t, "", file); got != before {
		t.Errorf("file after recovery:\n%s\nwant as before the delete:\n%s", got, before)
	}
	want := "cairn: restore Flag default/kept (resource version 1) by "
	if got := gittest.Git(t, r.Path, "log", "-1", "--format=%s", "main"); !strings.HasPrefix(got, want) {
		t.Errorf("commit = %q, want %q...", got, want)
	}
	got, err := h.GetInstance(ctx, id, true)
	if err != nil || string(got.Latest.Value) != `{"enabled":true}` {
		t.Fatalf("instance after recovery: %s, %v", got.Latest.Value, err)
	}
	if ins, _ := h.PendingIntents(ctx); len(ins) != 0 {
		t.Fatalf("intents after recovery = %+v", ins)
	}
	// The child deletes as usual, and recovery has nothing left to do.
	if _, err := h.ApplyChildren(ctx, owner[0].ID, hub.ChildChanges{Delete: []string{id}}); err != nil {
		t.Fatalf("delete after recovery: %v", err)
	}
	if files := gittest.Git(t, r.Path, "ls-tree", "-r", "--name-only", "main"); files != "" {
		t.Errorf("files left on main: %s", files)
	}
	if res, err := h.Recover(ctx, 0); err != nil || res.Committed+res.Undone+res.Deleted+res.Restored+res.Waiting+len(res.Failed) != 0 {
		t.Fatalf("second Recover = %+v, %v", res, err)
	}
}

// TestRecoveryUndoesAnUnansweredBatchAsOneCommit: a create of three Flags
// (one batch, one commit) whose push lands but whose answer never comes;
// the hub keeps the three intents. Recovery takes the batch back as it was
// made: one commit removing the three files, one push, not one each.
func TestRecoveryUndoesAnUnansweredBatchAsOneCommit(t *testing.T) {
	r := gittest.NewRemote(t)
	dir := t.TempDir()
	release := filepath.Join(dir, "release")
	script := "#!/bin/sh\ni=0\nwhile [ ! -e " + release + " ] && [ -d " + dir + " ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done\n"
	if err := os.WriteFile(filepath.Join(r.Path, "hooks", "post-receive"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.WriteFile(release, nil, 0o644) }) // never leave the CGI waiting
	ctx := cairn.WithActor(context.Background(), "admin")
	os.WriteFile(release, nil, 0o644)
	h, _ := flagsInGit(t, ctx, r.Serve(t))
	flag := cairn.TypeRef{Path: "io.flipt.flag", Revision: "1.0.0"}
	if _, err := h.CreateInstances(ctx, hub.CreateRequest{Instances: []hub.NewInstance{{TypeRef: flag, Namespace: "default", Name: "seed",
		Value: json.RawMessage(`{"enabled":true}`)}}}); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(release); err != nil {
		t.Fatal(err)
	}
	var news []hub.NewInstance
	for _, n := range []string{"a", "b", "c"} {
		news = append(news, hub.NewInstance{TypeRef: flag, Namespace: "default", Name: n, Value: json.RawMessage(`{"enabled":true}`)})
	}
	cctx, cancel := context.WithCancel(ctx)
	created := make(chan error, 1)
	go func() {
		_, err := h.CreateInstances(cctx, hub.CreateRequest{Instances: news})
		created <- err
	}()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(gittest.Git(t, r.Path, "ls-tree", "-r", "--name-only", "main"), "Flag-c.json") {
		if time.Now().After(deadline) {
			t.Fatal("the batch's push never reached the remote")
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	if err := <-created; err == nil {
		t.Fatal("the create succeeded without its push's answer")
	}
	if ins, _ := h.PendingIntents(ctx); len(ins) != 3 {
		t.Fatalf("intents after the unanswered batch = %+v, want its three", ins)
	}
	os.WriteFile(release, nil, 0o644)
	batch := gittest.Git(t, r.Path, "rev-parse", "main")
	commits := r.Commits(t)

	res, err := h.Recover(ctx, 0)
	if err != nil || res.Undone != 3 || len(res.Failed) != 0 {
		t.Fatalf("Recover = %+v, %v; want the three undone", res, err)
	}
	if n := r.Commits(t) - commits; n != 1 {
		t.Errorf("recovery made %d commits, want one undoing the batch", n)
	}
	want := "cairn: undo " + batch[:12] + " (3 changes) by "
	if got := gittest.Git(t, r.Path, "log", "-1", "--format=%s", "main"); !strings.HasPrefix(got, want) {
		t.Errorf("commit = %q, want %q...", got, want)
	}
	if files := gittest.Git(t, r.Path, "ls-tree", "-r", "--name-only", "main"); files != "default/flipt.io-v1-Flag-seed.json" {
		t.Errorf("files on main after recovery: %s; want the seed's only", files)
	}
}
