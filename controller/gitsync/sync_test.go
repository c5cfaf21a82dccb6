package gitsync_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/backend/git"
	"github.com/cairn-dev/cairn/backend/git/gittest"
	"github.com/cairn-dev/cairn/controller/gitsync"
	"github.com/cairn-dev/cairn/hub"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/postgres/pgtest"
	"github.com/cairn-dev/cairn/store/sqlite"
)

const flagType = "io.flipt.flag"

// syncEnv is a hub whose Flag Type (a schema requiring a boolean "enabled")
// is stored in a Git backend on a bare repository, and a person's clone.
type syncEnv struct {
	t      testing.TB
	remote *gittest.Remote
	pg     *pgtest.Schema // the store, when not SQLite at dbPath
	dbPath string
	cache  string
	h      *hub.Hub
	opener *git.Opener
	id     string // the Git backend instance
	clone  string
	getenv func(string) string
}

func newSyncEnv(t *testing.T) *syncEnv {
	t.Helper()
	return newSyncEnvWith(t, gittest.NewRemote(t), nil, nil)
}

// newSyncEnvWith is newSyncEnv on r, with more settings in the backend's
// value and the opener's environment.
func newSyncEnvWith(t testing.TB, r *gittest.Remote, more map[string]any, getenv func(string) string) *syncEnv {
	t.Helper()
	return newSyncEnvOn(t, r, nil, more, getenv)
}

// newSyncEnvOn is newSyncEnvWith on the PostgreSQL schema pg (nil: SQLite).
func newSyncEnvOn(t testing.TB, r *gittest.Remote, pg *pgtest.Schema, more map[string]any, getenv func(string) string) *syncEnv {
	t.Helper()
	e := &syncEnv{t: t, remote: r, pg: pg, dbPath: filepath.Join(t.TempDir(), "cairn.db"), cache: t.TempDir(), getenv: getenv}
	ctx := cairn.WithActor(context.Background(), "admin")
	e.open(e.cache)
	if _, err := e.h.CreateType(ctx, cairn.Type{Path: flagType, Revision: "1.0.0", Group: "flipt.io", Version: "v1",
		Names: &cairn.Names{Kind: "Flag", Singular: "flag", Plural: "flags"},
		JSONSchema: json.RawMessage(`{"type":"object","required":["enabled"],"properties":{"enabled":{"type":"boolean"}},
		  "additionalProperties":false}`)}); err != nil {
		t.Fatalf("CreateType: %v", err)
	}
	settings := map[string]any{"url": e.remote.FileURL(), "acceptValue": true, "contextSchema": json.RawMessage(git.ContextSchema),
		"author": map[string]string{"name": "cairn", "email": "cairn@example.com"}}
	maps.Copy(settings, more)
	value, _ := json.Marshal(settings)
	reg, err := e.h.CreateInstances(ctx, hub.CreateRequest{Instances: []hub.NewInstance{{Alias: "flags-repo", Name: "flags-repo", Namespace: hub.SystemNamespace,
		TypeRef: cairn.TypeRef{Path: git.TypePath, Revision: cairn.CoreRevision}, Value: value,
		Attributes: []cairn.AttributeRef{{Path: cairn.StorageAttributePath, Revision: cairn.CoreRevision}}}}})
	if err != nil {
		t.Fatalf("register the Git backend: %v", err)
	}
	e.id = reg[0].ID
	return e
}

// open (re)starts the hub on the same store with a Git opener on cache, as
// a restarted process would.
func (e *syncEnv) open(cache string) {
	e.t.Helper()
	var st store.Store
	if e.pg != nil {
		st = e.pg.Open(e.t)
	} else {
		s, err := sqlite.Open(context.Background(), e.dbPath)
		if err != nil {
			e.t.Fatal(err)
		}
		e.t.Cleanup(func() { s.Close() })
		st = s
	}
	var err error
	e.opener = git.NewOpener(git.OpenerConfig{CacheDir: cache, Getenv: e.getenv})
	if e.h, err = hub.New(context.Background(), hub.Config{Store: st, Backends: e.opener}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *syncEnv) syncer() *gitsync.Syncer {
	e.t.Helper()
	s, err := gitsync.NewSyncer(gitsync.SyncConfig{Hub: e.h, Opener: e.opener, BackendID: e.id})
	if err != nil {
		e.t.Fatal(err)
	}
	return s
}

// create makes a Flag through the hub (a cairn commit).
func (e *syncEnv) create(name string, enabled bool) string {
	e.t.Helper()
	ctx := cairn.WithActor(context.Background(), "admin")
	v, _ := json.Marshal(map[string]bool{"enabled": enabled})
	out, err := e.h.CreateInstances(ctx, hub.CreateRequest{Instances: []hub.NewInstance{{Name: name,
		TypeRef: cairn.TypeRef{Path: flagType, Revision: "1.0.0"}, Value: v, Backend: &hub.BackendInput{ID: e.id}}}})
	if err != nil {
		e.t.Fatalf("create %s: %v", name, err)
	}
	return out[0].ID
}

// person runs git as Jane Doe in her clone.
func (e *syncEnv) person(args ...string) string {
	e.t.Helper()
	if e.clone == "" {
		e.clone = filepath.Join(e.t.TempDir(), "clone")
		gittest.Git(e.t, "", "clone", "--quiet", "--branch", "main", e.remote.FileURL(), e.clone)
	}
	return gittest.Git(e.t, e.clone, append([]string{"-c", "user.name=Jane Doe", "-c", "user.email=jane@example.com"}, args...)...)
}

// pushAll commits everything in Jane's clone with msg and pushes it.
func (e *syncEnv) pushAll(msg string) {
	e.t.Helper()
	e.person("add", "-A")
	e.person("commit", "--quiet", "-m", msg)
	e.person("push", "--quiet", "origin", "main")
}

func (e *syncEnv) write(name, content string) {
	e.t.Helper()
	p := filepath.Join(e.clone, "default", "flipt.io-v1-Flag-"+name+".json")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		e.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		e.t.Fatal(err)
	}
}

func flagFile(name string, enabled any) string {
	v, _ := json.Marshal(enabled)
	return `{"apiVersion":"flipt.io/v1","kind":"Flag","metadata":{"namespace":"default","name":"` + name + `"},"spec":{"enabled":` + string(v) + "}}\n"
}

func (e *syncEnv) get(name string) (cairn.Instance, error) {
	return e.h.GetInstanceByName(context.Background(), flagType, "default", name, true)
}

const jane = "Jane Doe <jane@example.com>"

// TestSyncImportsChangesMadeOutsideCairn: Jane adds a Flag, changes one
// cairn made, removes another and pushes a file breaking the schema; a
// sync makes the hub show the new instance (created by her), the new
// resource version and the deletion, and reports the broken file.
func TestSyncImportsChangesMadeOutsideCairn(t *testing.T) {
	e := newSyncEnv(t)
	ctx := context.Background()
	changed := e.create("change-me", false)
	e.create("remove-me", true)
	s := e.syncer()

	// First sync: only cairn's own commits, nothing to import.
	before := e.remote.Commits(t)
	res, err := s.Sync(ctx)
	if err != nil {
		t.Fatalf("first Sync: %v", err)
	}
	if res.Created+res.Updated+res.Deleted+res.Skipped != 0 || e.remote.Commits(t) != before {
		t.Fatalf("first sync imported cairn's own commits: %+v, %d commits (was %d)", res, e.remote.Commits(t), before)
	}

	e.person("status") // clones
	e.write("new-flag", flagFile("new-flag", true))
	e.write("change-me", "{\n  \"apiVersion\": \"flipt.io/v1\",\n  \"kind\": \"Flag\",\n  \"metadata\": {\"name\": \"change-me\"},\n  \"spec\": {\"enabled\": true}\n}\n")
	e.person("add", "-A")
	e.person("commit", "--quiet", "-m", "add new-flag, enable change-me")
	e.person("rm", "--quiet", "default/flipt.io-v1-Flag-remove-me.json")
	e.write("broken", flagFile("broken", "yes"))
	if err := os.WriteFile(filepath.Join(e.clone, "README.md"), []byte("flags\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e.person("add", "-A")
	e.person("commit", "--quiet", "-m", "remove remove-me, add broken")
	badCommit := e.person("rev-parse", "HEAD")
	e.person("push", "--quiet", "origin", "main")
	changedFile := e.remote.Show(t, "", "default/flipt.io-v1-Flag-change-me.json")

	res, err = s.Sync(ctx)
	if err != nil {
		t.Fatalf("Sync: %v", err)
	}
	if res.Created != 1 || res.Updated != 1 || res.Deleted != 1 || res.Skipped != 1 {
		t.Errorf("Sync = %+v, want 1 created, 1 updated, 1 deleted, 1 skipped", res)
	}

	inst, err := e.get("new-flag")
	if err != nil {
		t.Fatalf("new-flag is not in the hub: %v", err)
	}
	if inst.Latest.CreatedBy != jane || string(inst.Latest.Value) != `{"enabled":true}` || inst.Backend.ID != e.id {
		t.Errorf("new-flag: createdBy %q, value %s, backend %s; want %q, enabled, %s", inst.Latest.CreatedBy, inst.Latest.Value, inst.Backend.ID, jane, e.id)
	}
	inst, err = e.get("change-me")
	if err != nil {
		t.Fatal(err)
	}
	if inst.ID != changed || inst.Latest.ResourceVersion != 2 || inst.Latest.CreatedBy != jane || string(inst.Latest.Value) != `{"enabled":true}` {
		t.Errorf("change-me: id %s rv %d by %q value %s; want %s rv 2 by %q enabled", inst.ID, inst.Latest.ResourceVersion, inst.Latest.CreatedBy, inst.Latest.Value, changed, jane)
	}
	if v1, err := e.h.ResourceVersion(ctx, changed, 1, true); err != nil || string(v1.Value) != `{"enabled":false}` {
		t.Errorf("change-me version 1 = %s, %v; want cairn's value", v1.Value, err)
	}
	if _, err := e.get("remove-me"); !cairn.HasCode(err, cairn.CodeNotFound) {
		t.Errorf("remove-me after its file was removed: %v, want NotFound", err)
	}
	if _, err := e.get("broken"); !cairn.HasCode(err, cairn.CodeNotFound) {
		t.Errorf("broken (fails the schema) was imported: %v", err)
	}
	// The broken file is reported with its path and commit.
	var skipped *gitsync.SyncEvent
	for _, ev := range s.Events() {
		if ev.Type == "Skipped" {
			skipped = &ev
		}
	}
	if skipped == nil || skipped.Path != "default/flipt.io-v1-Flag-broken.json" || skipped.Commit != badCommit || !strings.Contains(skipped.Reason, "enabled") {
		t.Errorf("skipped event = %+v, want the broken file at %s with the schema error", skipped, badCommit)
	}
	if st := s.Stats(); st.Skipped != 1 || st.Created != 1 || st.Updated != 1 || st.Deleted != 1 {
		t.Errorf("Stats = %+v", st)
	}
	// Jane's file is as she wrote it: the import did not rewrite it.
	if got := e.remote.Show(t, "", "default/flipt.io-v1-Flag-change-me.json"); got != changedFile {
		t.Errorf("change-me was rewritten by the import:\n%s\nwant\n%s", got, changedFile)
	}
	if log := gittest.Git(t, e.remote.Path, "log", "-1", "--format=%B", "main"); !strings.Contains(log, "Cairn-Source: ") {
		t.Errorf("the last commit records no import:\n%s", log)
	}

	// Twice: nothing is imported again, no commit is made.
	after := e.remote.Commits(t)
	if res, err := s.Sync(ctx); err != nil || res.Created+res.Updated+res.Deleted+res.Skipped != 0 {
		t.Errorf("second Sync = %+v, %v; want nothing", res, err)
	}
	if n := e.remote.Commits(t); n != after {
		t.Errorf("second sync made %d commits", n-after)
	}

	// cairn's own writes are not imported back.
	ctxA := cairn.WithActor(ctx, "admin")
	if _, err := e.h.UpdateInstances(ctxA, []hub.UpdateInstance{{ID: inst.ID, Value: json.RawMessage(`{"enabled":false}`)}}); err != nil {
		t.Fatal(err)
	}
	if res, err := s.Sync(ctx); err != nil || res.Created+res.Updated+res.Deleted+res.Skipped != 0 {
		t.Errorf("Sync after cairn's update = %+v, %v; want nothing", res, err)
	}
	if inst, _ := e.get("change-me"); inst.Latest.ResourceVersion != 3 {
		t.Errorf("change-me has resource version %d, want 3", inst.Latest.ResourceVersion)
	}

	// A restart (same cache) and a lost cache import nothing twice, and the
	// imported instance's values are still read from the repository.
	for _, cache := range []string{e.cache, t.TempDir()} {
		e.open(cache)
		res, err := e.syncer().Sync(ctx)
		if err != nil {
			t.Fatalf("Sync after reopening: %v", err)
		}
		if res.Created+res.Updated+res.Deleted != 0 {
			t.Errorf("Sync after reopening on %s imported again: %+v", cache, res)
		}
		// The same cache resumes after the last synced commit; a fresh one
		// reconciles the tip and reports the broken file, still there, again.
		if wantSkipped := map[bool]int{true: 0, false: 1}[cache == e.cache]; res.Skipped != wantSkipped {
			t.Errorf("Sync after reopening: %d skipped, want %d", res.Skipped, wantSkipped)
		}
		inst, err := e.get("new-flag")
		if err != nil || string(inst.Latest.Value) != `{"enabled":true}` {
			t.Errorf("new-flag after reopening: %s, %v", inst.Latest.Value, err)
		}
		if n := e.remote.Commits(t); n != after+1 {
			t.Errorf("%d commits after reopening, want %d", n, after+1)
		}
	}
}

// TestSyncWebhookAndPoll: a push notification on POST /hooks/git/{alias}
// syncs at once; Run polls on its interval.
func TestSyncWebhookAndPoll(t *testing.T) {
	e := newSyncEnv(t)
	e.create("seed", true)
	svc, err := gitsync.NewSyncService(gitsync.SyncServiceConfig{Hub: e.h, Opener: e.opener})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(svc.Handler())
	t.Cleanup(srv.Close)
	hook := func(ref string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("POST", srv.URL+"/hooks/git/"+ref, strings.NewReader(`{"ref":"refs/heads/main","after":"0000"}`))
		req.Header.Set("X-GitHub-Event", "push")
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if code, body := hook("flags-repo"); code != http.StatusOK {
		t.Fatalf("first hook: %d %s", code, body)
	}

	e.person("status")
	e.write("hooked", flagFile("hooked", false))
	e.pushAll("add hooked")
	code, body := hook("flags-repo")
	if code != http.StatusOK || !strings.Contains(body, `"created":1`) {
		t.Fatalf("hook after the push: %d %s, want 200 with one creation", code, body)
	}
	if inst, err := e.get("hooked"); err != nil || inst.Latest.CreatedBy != jane {
		t.Errorf("hooked after the webhook: %+v, %v", inst.Latest, err)
	}
	// GET shows the counters and the events.
	resp, err := http.Get(srv.URL + "/hooks/git/flags-repo")
	if err != nil {
		t.Fatal(err)
	}
	var status struct {
		Stats  gitsync.SyncStats   `json:"stats"`
		Events []gitsync.SyncEvent `json:"events"`
	}
	err = json.NewDecoder(resp.Body).Decode(&status)
	resp.Body.Close()
	if err != nil || status.Stats.Created != 1 || len(status.Events) != 1 || status.Events[0].Type != "Created" ||
		status.Events[0].Path != "default/flipt.io-v1-Flag-hooked.json" || status.Events[0].Author != jane {
		t.Errorf("GET /hooks/git/flags-repo = %+v, %v; want one creation of hooked by Jane", status, err)
	}
	if code, _ := hook(e.id); code != http.StatusOK {
		t.Errorf("hook by id: %d", code)
	}
	if code, _ := hook("no-such-backend"); code != http.StatusNotFound {
		t.Errorf("hook for an unknown backend: %d, want 404", code)
	}

	// Polling.
	poll, err := gitsync.NewSyncService(gitsync.SyncServiceConfig{Hub: e.h, Opener: e.opener, Interval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); poll.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	e.person("rm", "--quiet", "default/flipt.io-v1-Flag-hooked.json")
	e.person("commit", "--quiet", "-m", "remove hooked")
	e.person("pull", "--quiet", "--rebase", "origin", "main") // the sync's bookkeeping commit
	e.person("push", "--quiet", "origin", "main")
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, err := e.get("hooked")
		if cairn.HasCode(err, cairn.CodeNotFound) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("polling did not delete hooked: %v", err)
		}
		time.Sleep(10 * time.Millisecond) // polling the hub, bounded by the deadline
	}
}

// TestSyncMergeCommit: Jane removes a Flag on a clone that is behind, then
// merges (git pull without rebase), so the last synced commit is on the
// merge's second parent; her removal is still imported, and the merge
// brings back nothing cairn already has.
func TestSyncMergeCommit(t *testing.T) {
	e := newSyncEnv(t)
	ctx := context.Background()
	e.create("old", true)
	e.person("status") // clones now, before cairn's next commit
	e.create("newer", true)
	s := e.syncer()
	if res, err := s.Sync(ctx); err != nil || res != (gitsync.SyncResult{From: "", To: res.To}) {
		t.Fatalf("first Sync = %+v, %v; want nothing imported", res, err)
	}
	e.person("rm", "--quiet", "default/flipt.io-v1-Flag-old.json")
	e.person("commit", "--quiet", "-m", "remove old")
	e.person("pull", "--quiet", "--no-rebase", "--no-edit", "origin", "main")
	if parents := e.person("log", "-1", "--format=%P"); len(strings.Fields(parents)) != 2 {
		t.Fatalf("the pull made no merge commit (parents %q)", parents)
	}
	e.person("push", "--quiet", "origin", "main")

	res, err := s.Sync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.Deleted != 1 || res.Created+res.Updated+res.Skipped != 0 {
		t.Errorf("Sync after the merge = %+v, want only the deletion", res)
	}
	if _, err := e.get("old"); !cairn.HasCode(err, cairn.CodeNotFound) {
		t.Errorf("old after Jane removed it: %v, want NotFound", err)
	}
	if inst, err := e.get("newer"); err != nil || inst.Latest.ResourceVersion != 1 {
		t.Errorf("newer after the merge: %+v, %v; want cairn's version 1 only", inst.Latest, err)
	}
}

// TestSyncReportsAndSkips: files that do not parse, are not where the path
// template puts their resource, name no Type, or change a locked instance
// are each reported with a reason and skipped; the good file of the same
// commit is imported, and the locked one is once unlocked and synced from
// scratch.
func TestSyncReportsAndSkips(t *testing.T) {
	e := newSyncEnv(t)
	ctx := context.Background()
	locked := e.create("locked", false)
	if err := e.h.LockInstances(ctx, []string{locked}, "ops"); err != nil {
		t.Fatal(err)
	}
	s := e.syncer()
	if _, err := s.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	e.person("status")
	e.write("garbled", "{\"apiVersion\": \"flipt.io/v1\",\n not json\n")
	e.write("misplaced", flagFile("elsewhere", true))
	e.write("locked", flagFile("locked", true))
	e.write("good", flagFile("good", true))
	if err := os.WriteFile(filepath.Join(e.clone, "default", "example.com-v1-Gadget-g.json"),
		[]byte(`{"apiVersion":"example.com/v1","kind":"Gadget","metadata":{"name":"g"},"spec":{}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	e.pushAll("a mixed bag")

	res, err := s.Sync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.Created != 1 || res.Skipped != 4 || res.Updated+res.Deleted != 0 {
		t.Errorf("Sync = %+v, want 1 created and 4 skipped", res)
	}
	reasons := map[string]string{}
	for _, ev := range s.Events() {
		if ev.Type == "Skipped" {
			reasons[strings.TrimPrefix(ev.Path, "default/")] = ev.Reason
		}
	}
	for file, want := range map[string]string{
		// The path once (the reason begins with it), and the line.
		"flipt.io-v1-Flag-garbled.json":   "default/flipt.io-v1-Flag-garbled.json: does not parse: line 2, column 2: invalid character 'n'",
		"flipt.io-v1-Flag-misplaced.json": "whose file is default/flipt.io-v1-Flag-elsewhere.json",
		"flipt.io-v1-Flag-locked.json":    "locked",
		"example.com-v1-Gadget-g.json":    "no Type serves example.com/v1 Gadget",
	} {
		if !strings.Contains(reasons[file], want) {
			t.Errorf("%s: reason %q, want it to say %q", file, reasons[file], want)
		}
	}
	if _, err := e.get("good"); err != nil {
		t.Errorf("good was not imported beside the skipped files: %v", err)
	}
	if inst, _ := e.get("locked"); inst.Latest.ResourceVersion != 1 {
		t.Errorf("the locked instance got version %d", inst.Latest.ResourceVersion)
	}
	if _, err := e.get("elsewhere"); !cairn.HasCode(err, cairn.CodeNotFound) {
		t.Errorf("the misplaced resource was imported: %v", err)
	}

	// Unlocked, a sync from scratch (a lost cache) takes Jane's change.
	if err := e.h.UnlockInstances(ctx, []string{locked}, "ops"); err != nil {
		t.Fatal(err)
	}
	e.open(t.TempDir())
	if res, err := e.syncer().Sync(ctx); err != nil || res.Updated != 1 || res.Created != 0 {
		t.Errorf("Sync from scratch after unlocking = %+v, %v; want the locked file's update", res, err)
	}
	if inst, _ := e.get("locked"); inst.Latest.ResourceVersion != 2 || inst.Latest.CreatedBy != jane {
		t.Errorf("locked after unlocking: version %d by %q, want 2 by Jane", inst.Latest.ResourceVersion, inst.Latest.CreatedBy)
	}
}

// TestSyncOnTwoReplicas: two cairn serve replicas share the store and each
// syncs with a cache of its own. Once one has imported Jane's commits, the
// other's sync, which still starts before them, imports none of them
// again: no extra resource versions, no value going back to an older
// commit's for a while, no extra commits.
func TestSyncOnTwoReplicas(t *testing.T) {
	e := newSyncEnv(t)
	ctx := context.Background()
	id := e.create("flag", true)
	a := e.syncer()
	other := *e
	other.open(t.TempDir()) // replica B: its own hub and cache on the same store
	b := other.syncer()
	for _, s := range []*gitsync.Syncer{a, b} {
		if _, err := s.Sync(ctx); err != nil {
			t.Fatal(err)
		}
	}

	e.person("status") // clones
	// Each commit changes two files: one import batch each.
	for _, enabled := range []bool{false, true} {
		e.write("flag", flagFile("flag", enabled))
		e.write("other", flagFile("other", enabled))
		e.person("add", "-A")
		e.person("commit", "--quiet", "-m", fmt.Sprintf("enabled: %v", enabled))
	}
	e.person("push", "--quiet", "origin", "main")
	if res, err := a.Sync(ctx); err != nil || res.Updated != 3 || res.Created != 1 {
		t.Fatalf("replica A's Sync = %+v, %v; want 1 created, 3 updated", res, err)
	}
	commits := e.remote.Commits(t)
	// B sees from A's import commits (Cairn-Source) that both files of
	// each of Jane's commits are imported.
	sb, err := other.h.StorageBackend(ctx, e.id)
	if err != nil {
		t.Fatal(err)
	}
	c, err := other.opener.OpenBackend(ctx, sb)
	if err != nil {
		t.Fatal(err)
	}
	steps, _, _, err := c.(*git.Backend).Pending(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range steps {
		if len(st.Changes) > 0 && len(st.Imported) != 2 {
			t.Errorf("replica B: commit %s of Jane's has %d of its 2 files marked imported: %v", st.Commit, len(st.Imported), st.Imported)
		}
	}

	res, err := b.Sync(ctx)
	if err != nil || res.Created+res.Updated+res.Deleted+res.Skipped != 0 {
		t.Errorf("replica B's Sync after A's = %+v, %v; want nothing imported", res, err)
	}
	versions, err := e.h.ResourceVersions(ctx, id, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(versions) != 3 {
		for _, v := range versions {
			t.Logf("version %d by %s: %s", v.ResourceVersion, v.CreatedBy, v.Value)
		}
		t.Errorf("the flag has %d resource versions, want 3 (cairn's, Jane's two)", len(versions))
	}
	if n := e.remote.Commits(t); n != commits {
		t.Errorf("replica B's sync pushed %d commits", n-commits)
	}
}

// Two replicas syncing at the same moment both read Jane's commit before
// either imported it. The branch decides: the second import, whose push
// meets the first's commit, is refused as imported already (ErrImported),
// and nothing of it is written.
func TestImportRefusedWhenAnotherReplicaImportedIt(t *testing.T) {
	e := newSyncEnv(t)
	ctx := context.Background()
	id := e.create("flag", true)
	a := e.syncer()
	other := *e
	other.open(t.TempDir())
	for _, s := range []*gitsync.Syncer{a, other.syncer()} {
		if _, err := s.Sync(ctx); err != nil {
			t.Fatal(err)
		}
	}
	sb, err := other.h.StorageBackend(ctx, e.id)
	if err != nil {
		t.Fatal(err)
	}
	c, err := other.opener.OpenBackend(ctx, sb)
	if err != nil {
		t.Fatal(err)
	}
	b := c.(*git.Backend)
	if _, _, _, err := b.Pending(ctx); err != nil { // B's cache has the tip before Jane's commit
		t.Fatal(err)
	}

	e.person("status")
	e.write("flag", flagFile("flag", false))
	e.write("other", flagFile("other", true))
	e.pushAll("disable, add other")
	janes := plumbing.NewHash(e.person("rev-parse", "HEAD"))
	if res, err := a.Sync(ctx); err != nil || res.Updated != 1 || res.Created != 1 {
		t.Fatalf("replica A's Sync = %+v, %v", res, err)
	}
	commits := e.remote.Commits(t)

	// Replica B imports the same commit, as its sync would have.
	imp := git.WithImport(cairn.WithActor(ctx, jane), b, janes)
	_, err = other.h.UpdateInstances(imp, []hub.UpdateInstance{{ID: id, Value: json.RawMessage(`{"enabled":false}`), Labels: map[string]string{}}})
	if !errors.Is(err, git.ErrImported) {
		t.Errorf("replica B's import of a commit A imported: %v, want ErrImported", err)
	}
	// And as one batch, as B's sync sends the commit's two files.
	o, err := e.get("other")
	if err != nil {
		t.Fatal(err)
	}
	_, err = other.h.ApplyChanges(imp, hub.ChildChanges{Update: []hub.UpdateInstance{
		{ID: id, Value: json.RawMessage(`{"enabled":false}`), Labels: map[string]string{}},
		{ID: o.ID, Value: json.RawMessage(`{"enabled":true}`), Labels: map[string]string{}}}})
	if !errors.Is(err, git.ErrImported) {
		t.Errorf("replica B's batch import of a commit A imported: %v, want ErrImported", err)
	}
	if inst, err := e.get("flag"); err != nil || inst.Latest.ResourceVersion != 2 {
		t.Errorf("the flag after B's import: %+v, %v; want resource version 2", inst.Latest, err)
	}
	if n := e.remote.Commits(t); n != commits {
		t.Errorf("replica B's import pushed %d commits", n-commits)
	}
}

// TestTwoReplicasSyncOneCommitAtOnce: two replicas sharing the store
// (SQLite, and PostgreSQL with $CAIRN_TEST_POSTGRES) sync Jane's commit,
// which removes a Flag, changes one and adds 20, at the same moment. The
// branch lets one import each part; the other imports nothing, at worst
// stopping until the winner has stored its import. Every Flag is in the
// hub once, with one new resource version, and cairn made two commits.
func TestTwoReplicasSyncOneCommitAtOnce(t *testing.T) {
	for _, db := range []string{"sqlite", "postgres"} {
		t.Run(db, func(t *testing.T) {
			var pg *pgtest.Schema
			if db == "postgres" {
				s := pgtest.NewSchema(t)
				pg = &s
			}
			e := newSyncEnvOn(t, gittest.NewRemote(t), pg, nil, nil)
			ctx := context.Background()
			changed := e.create("changed", false)
			e.create("doomed", true)
			other := *e
			other.open(t.TempDir()) // replica B: its own hub and cache on the same store
			syncers := []*gitsync.Syncer{e.syncer(), other.syncer()}
			for _, s := range syncers {
				if _, err := s.Sync(ctx); err != nil {
					t.Fatal(err)
				}
			}
			e.person("status") // clones
			e.writeFlags("bulk", 20)
			e.write("changed", flagFile("changed", true))
			e.person("rm", "--quiet", "default/flipt.io-v1-Flag-doomed.json")
			e.pushAll("20 flags, one changed, one removed")
			commits := e.remote.Commits(t)

			var wg sync.WaitGroup
			errs := make([]error, 2)
			results := make([]gitsync.SyncResult, 2)
			for i, s := range syncers {
				wg.Go(func() { results[i], errs[i] = s.Sync(ctx) })
			}
			wg.Wait()
			for i, err := range errs {
				// A replica meeting the other's write on its way stops
				// and resumes later; nothing else may fail.
				if err != nil && !strings.Contains(err.Error(), "the sync resumes at this commit") {
					t.Errorf("replica %d's sync: %v", i, err)
				}
				if results[i].Skipped != 0 {
					t.Errorf("replica %d's sync skipped files: %+v %+v", i, results[i], syncers[i].Events())
				}
			}
			// Both again: whichever stopped finishes, nothing is imported twice.
			for i, s := range syncers {
				if res, err := s.Sync(ctx); err != nil || res.Created+res.Updated+res.Deleted+res.Skipped != 0 {
					t.Errorf("replica %d's second sync = %+v, %v; want nothing to do", i, res, err)
				}
			}
			list, err := e.h.ListInstances(ctx, store.InstanceFilter{TypePath: flagType}, false)
			if err != nil {
				t.Fatal(err)
			}
			if len(list) != 21 {
				t.Errorf("%d Flags in the hub, want 21 (changed and 20 new)", len(list))
			}
			if _, err := e.get("doomed"); !cairn.HasCode(err, cairn.CodeNotFound) {
				t.Errorf("doomed: %v, want NotFound", err)
			}
			versions, err := e.h.ResourceVersions(ctx, changed, false)
			if err != nil || len(versions) != 2 {
				t.Errorf("changed has %d resource versions (%v), want 2", len(versions), err)
			}
			if n := e.remote.Commits(t) - commits; n != 2 {
				t.Errorf("the two replicas made %d commits, want 2 (the removal, the adds and change):\n%s", n,
					gittest.Git(t, e.remote.Path, "log", fmt.Sprintf("-%d", n), "--format=%s", "main"))
			}
		})
	}
}

// TestSyncAfterTheTypeGotARevision: the Flag Type gets revision 1.1.0
// (a new optional field). Jane's change to a Flag of 1.0.0 is its new
// resource version, still of 1.0.0 (an instance keeps its revision, as
// over REST); her new Flag is of 1.1.0 and may use the new field.
func TestSyncAfterTheTypeGotARevision(t *testing.T) {
	e := newSyncEnv(t)
	ctx := context.Background()
	old := e.create("old", false)
	s := e.syncer()
	if _, err := s.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := e.h.CreateType(cairn.WithActor(ctx, "admin"), cairn.Type{Path: flagType, Revision: "1.1.0", Group: "flipt.io", Version: "v1",
		Names: &cairn.Names{Kind: "Flag", Singular: "flag", Plural: "flags"},
		JSONSchema: json.RawMessage(`{"type":"object","required":["enabled"],"properties":{"enabled":{"type":"boolean"},"note":{"type":"string"}},
		  "additionalProperties":false}`)}); err != nil {
		t.Fatalf("CreateType 1.1.0: %v", err)
	}
	e.person("status") // clones
	e.write("old", flagFile("old", true))
	e.write("new", `{"apiVersion":"flipt.io/v1","kind":"Flag","metadata":{"name":"new"},"spec":{"enabled":true,"note":"1.1.0 only"}}`+"\n")
	e.pushAll("change old, add new")
	if res, err := s.Sync(ctx); err != nil || res.Created != 1 || res.Updated != 1 || res.Skipped != 0 {
		t.Fatalf("Sync = %+v, %v %+v; want new created, old updated", res, err, s.Events())
	}
	if inst, err := e.get("old"); err != nil || inst.ID != old || inst.TypeRef.Revision != "1.0.0" || inst.Latest.ResourceVersion != 2 {
		t.Errorf("old: %+v %+v, %v; want version 2 of the 1.0.0 instance", inst.TypeRef, inst.Latest, err)
	}
	if inst, err := e.get("new"); err != nil || inst.TypeRef.Revision != "1.1.0" {
		t.Errorf("new: %+v, %v; want an instance of 1.1.0", inst.TypeRef, err)
	}
}

// TestSyncRenameAndMove: Jane renames a Flag's file with its name, and
// moves another to namespace team, in one commit. Each is the old
// resource's removal and the new one's creation: the hub has b and team/c,
// no a nor default/c, from one commit for the removals and one for the
// creations.
func TestSyncRenameAndMove(t *testing.T) {
	e := newSyncEnv(t)
	ctx := context.Background()
	e.create("a", true)
	e.create("c", false)
	s := e.syncer()
	if _, err := s.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	e.person("status") // clones
	e.person("mv", "default/flipt.io-v1-Flag-a.json", "default/flipt.io-v1-Flag-b.json")
	e.write("b", flagFile("b", true))
	if err := os.MkdirAll(filepath.Join(e.clone, "team"), 0o755); err != nil {
		t.Fatal(err)
	}
	e.person("mv", "default/flipt.io-v1-Flag-c.json", "team/flipt.io-v1-Flag-c.json")
	c := strings.Replace(flagFile("c", false), `"namespace":"default"`, `"namespace":"team"`, 1)
	if err := os.WriteFile(filepath.Join(e.clone, "team", "flipt.io-v1-Flag-c.json"), []byte(c), 0o644); err != nil {
		t.Fatal(err)
	}
	e.pushAll("rename a to b, move c to team")
	commits := e.remote.Commits(t)
	if res, err := s.Sync(ctx); err != nil || res.Created != 2 || res.Deleted != 2 || res.Skipped != 0 {
		t.Fatalf("Sync = %+v, %v %+v; want 2 deleted, 2 created", res, err, s.Events())
	}
	for _, n := range []string{"a", "c"} {
		if _, err := e.get(n); !cairn.HasCode(err, cairn.CodeNotFound) {
			t.Errorf("default/%s: %v, want NotFound", n, err)
		}
	}
	if inst, err := e.get("b"); err != nil || inst.Latest.CreatedBy != jane {
		t.Errorf("b: %+v, %v", inst.Latest, err)
	}
	if inst, err := e.h.GetInstanceByName(ctx, flagType, "team", "c", true); err != nil || string(inst.Latest.Value) != `{"enabled":false}` {
		t.Errorf("team/c: %+v, %v", inst.Latest, err)
	}
	if n := e.remote.Commits(t) - commits; n != 2 {
		t.Errorf("the sync made %d commits, want 2", n)
	}
}

// TestSyncSameResourceInTwoFiles: with a path template using a label, two
// files of one commit can hold the same resource (default/x, env a and
// env b). Which one is meant is not for the sync to guess: both are
// reported and skipped, and the hub has no x.
func TestSyncSameResourceInTwoFiles(t *testing.T) {
	e := newSyncEnvWith(t, gittest.NewRemote(t), map[string]any{"paths": map[string]string{
		"resource": "{{ .Namespace }}/{{ .Labels.env }}/{{ .Name }}.json", "list": "{{ .Namespace }}/*/*.json"}}, nil)
	ctx := context.Background()
	s := e.syncer()
	if _, err := e.h.CreateInstances(cairn.WithActor(ctx, "admin"), hub.CreateRequest{Instances: []hub.NewInstance{{Name: "seed",
		Labels: map[string]string{"env": "a"}, TypeRef: cairn.TypeRef{Path: flagType, Revision: "1.0.0"},
		Value: json.RawMessage(`{"enabled":true}`), Backend: &hub.BackendInput{ID: e.id}}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.get("seed"); err != nil {
		t.Fatalf("get seed: %v", err)
	}
	if _, err := s.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	e.person("status") // clones
	for _, env := range []string{"a", "b"} {
		dir := filepath.Join(e.clone, "default", env)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		doc := `{"apiVersion":"flipt.io/v1","kind":"Flag","metadata":{"name":"x","labels":{"env":"` + env + `"}},"spec":{"enabled":true}}` + "\n"
		if err := os.WriteFile(filepath.Join(dir, "x.json"), []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	e.pushAll("x twice")
	res, err := s.Sync(ctx)
	if err != nil || res.Skipped != 2 || res.Created+res.Updated != 0 {
		t.Fatalf("Sync = %+v, %v; want both files skipped", res, err)
	}
	for _, ev := range s.Events() {
		if ev.Type == "Skipped" && !strings.Contains(ev.Reason, "default/a/x.json and default/b/x.json") {
			t.Errorf("skipped %s: %q, want both files named", ev.Path, ev.Reason)
		}
	}
	if _, err := e.get("x"); !cairn.HasCode(err, cairn.CodeNotFound) {
		t.Errorf("x: %v, want NotFound", err)
	}
}
