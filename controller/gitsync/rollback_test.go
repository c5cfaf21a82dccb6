package gitsync_test

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	_ "modernc.org/sqlite"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/backend/git/gittest"
)

// refuse makes the hub's store fail its transaction with stmt (a SQLite
// trigger raising an error, as a full disk or a broken row would), through
// a connection of its own; the returned func drops the trigger again.
func (e *syncEnv) refuse(name, stmt string) func() {
	e.t.Helper()
	db, err := sql.Open("sqlite", "file:"+e.dbPath+"?_pragma=busy_timeout(5000)")
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { db.Close() })
	if _, err := db.Exec("CREATE TRIGGER " + name + " " + stmt); err != nil {
		e.t.Fatalf("create trigger %s: %v", name, err)
	}
	return func() {
		e.t.Helper()
		if _, err := db.Exec("DROP TRIGGER " + name); err != nil {
			e.t.Fatalf("drop trigger %s: %v", name, err)
		}
	}
}

// TestImportRolledBackLeavesTheRepositoryAlone: Jane adds, changes and
// removes a Flag by hand; the sync's hub call stores the import in the
// backend, then the hub's store transaction fails and the hub rolls the
// backend back. The rollback must not touch her files (they are hers, not
// a write of cairn's to take back), the hub must hold what it held before,
// and the next sync must import the change cleanly.
func TestImportRolledBackLeavesTheRepositoryAlone(t *testing.T) {
	const refused = "BEFORE INSERT ON resource_versions WHEN NEW.created_by LIKE 'Jane Doe%' BEGIN SELECT RAISE(ABORT, 'the store refuses (test)'); END"
	for _, tc := range []struct {
		name    string
		trigger string
		change  func(e *syncEnv)
		check   func(t *testing.T, e *syncEnv)
		// undo begins the undo commit's subject; imported is how many
		// changes the retried sync imports (default 1).
		undo     string
		imported int
	}{
		{"create", refused, func(e *syncEnv) {
			e.write("added", flagFile("added", true))
		}, func(t *testing.T, e *syncEnv) {
			inst, err := e.get("added")
			if err != nil || inst.Latest.CreatedBy != jane || string(inst.Latest.Value) != `{"enabled":true}` {
				t.Errorf("added after the retried sync: %+v, %v; want Jane's enabled Flag", inst.Latest, err)
			}
		}, "", 0},
		{"update", refused, func(e *syncEnv) {
			e.write("existing", "{\n  \"apiVersion\": \"flipt.io/v1\",\n  \"kind\": \"Flag\",\n  \"metadata\": {\"name\": \"existing\"},\n  \"spec\": {\"enabled\": true}\n}\n")
		}, func(t *testing.T, e *syncEnv) {
			inst, err := e.get("existing")
			if err != nil || inst.Latest.ResourceVersion != 2 || inst.Latest.CreatedBy != jane || string(inst.Latest.Value) != `{"enabled":true}` {
				t.Errorf("existing after the retried sync: %+v, %v; want version 2 by Jane, enabled", inst.Latest, err)
			}
			if v1, err := e.h.ResourceVersion(context.Background(), inst.ID, 1, true); err != nil || string(v1.Value) != `{"enabled":false}` {
				t.Errorf("existing version 1 = %s, %v; want cairn's value", v1.Value, err)
			}
		}, "", 0},
		// Several files of one commit are one import (one commit) and one
		// undo (one commit) taking back all of them.
		{name: "batch", trigger: refused, change: func(e *syncEnv) {
			e.write("added", flagFile("added", true))
			e.write("existing", flagFile("existing", true))
		}, check: func(t *testing.T, e *syncEnv) {
			inst, err := e.get("added")
			if err != nil || inst.Latest.CreatedBy != jane || string(inst.Latest.Value) != `{"enabled":true}` {
				t.Errorf("added after the retried sync: %+v, %v; want Jane's enabled Flag", inst.Latest, err)
			}
			inst, err = e.get("existing")
			if err != nil || inst.Latest.ResourceVersion != 2 || inst.Latest.CreatedBy != jane || string(inst.Latest.Value) != `{"enabled":true}` {
				t.Errorf("existing after the retried sync: %+v, %v; want version 2 by Jane, enabled", inst.Latest, err)
			}
		}, undo: "cairn: undo sync create 1, update 1 resources by ", imported: 2},
		{"delete", "BEFORE DELETE ON instances WHEN OLD.name = 'existing' BEGIN SELECT RAISE(ABORT, 'the store refuses (test)'); END", func(e *syncEnv) {
			e.person("rm", "--quiet", "default/flipt.io-v1-Flag-existing.json")
		}, func(t *testing.T, e *syncEnv) {
			if _, err := e.get("existing"); !cairn.HasCode(err, cairn.CodeNotFound) {
				t.Errorf("existing after the retried sync: %v, want NotFound", err)
			}
		}, "", 0},
	} {
		if tc.undo == "" {
			tc.undo = "cairn: undo sync " + tc.name + " Flag default/"
		}
		tc.imported = max(tc.imported, 1)
		t.Run(tc.name, func(t *testing.T) {
			e := newSyncEnv(t)
			ctx := context.Background()
			e.create("existing", false)
			s := e.syncer()
			if _, err := s.Sync(ctx); err != nil {
				t.Fatal(err)
			}
			e.person("status") // clones
			tc.change(e)
			e.pushAll("Jane's " + tc.name)
			tree := gittest.Git(t, e.remote.Path, "rev-parse", "main^{tree}")
			before, _ := e.get("existing")
			commits := e.remote.Commits(t)

			allow := e.refuse("refuse_"+tc.name, tc.trigger)
			res, err := s.Sync(ctx)
			if err == nil || !strings.Contains(err.Error(), "the store refuses (test)") {
				t.Fatalf("Sync with the store refusing = %+v, %v; want the store's error", res, err)
			}
			if res.Created+res.Updated+res.Deleted+res.Skipped != 0 {
				t.Errorf("Sync with the store refusing reported %+v, want nothing done", res)
			}
			// Jane's files are as she pushed them.
			if got := gittest.Git(t, e.remote.Path, "rev-parse", "main^{tree}"); got != tree {
				t.Errorf("the rollback changed the repository's files:\n%s", gittest.Git(t, e.remote.Path, "log", "-3", "--stat", "--format=%s%n%b", "main"))
			}
			// The hub holds what it held.
			after, err := e.get("existing")
			if err != nil || after.Latest.ResourceVersion != before.Latest.ResourceVersion || string(after.Latest.Value) != string(before.Latest.Value) {
				t.Errorf("existing after the failed import: %+v, %v; want it as before (%+v)", after.Latest, err, before.Latest)
			}
			if _, err := e.get("added"); !cairn.HasCode(err, cairn.CodeNotFound) {
				t.Errorf("added after the failed import: %v, want NotFound", err)
			}
			// The undo of an import is a commit of its own saying so (the
			// delete of an instance reaches the backend only after the
			// store's commit: nothing to undo there).
			if last := gittest.Git(t, e.remote.Path, "log", "-1", "--format=%B", "main"); tc.name != "delete" &&
				(!strings.HasPrefix(last, tc.undo) || !strings.Contains(last, "Cairn-Revert: ")) {
				t.Errorf("the last commit is not the import's undo:\n%s", last)
			}
			if n := e.remote.Commits(t) - commits; tc.name != "delete" && n != 2 {
				t.Errorf("the import and its undo made %d commits, want 2", n)
			}
			pending, err := e.h.PendingIntents(ctx)
			if err != nil || len(pending) != 0 {
				t.Errorf("intents left by the rolled-back import: %+v, %v; want none", pending, err)
			}

			allow()
			res, err = s.Sync(ctx)
			if err != nil || res.Created+res.Updated+res.Deleted != tc.imported || res.Skipped != 0 {
				t.Fatalf("Sync once the store accepts = %+v, %v; want the change imported", res, err)
			}
			tc.check(t, e)
			if got := gittest.Git(t, e.remote.Path, "rev-parse", "main^{tree}"); got != tree {
				t.Errorf("the retried import changed the repository's files")
			}
			// A fresh cache (another replica) agrees.
			e.open(t.TempDir())
			if res, err := e.syncer().Sync(ctx); err != nil || res.Created+res.Updated+res.Deleted != 0 {
				t.Errorf("Sync on a fresh cache = %+v, %v; want nothing", res, err)
			}
			tc.check(t, e)
		})
	}
}

// TestImportRecoveredWhenItsUndoFailed: the store refuses an import and
// the remote goes away before the hub's rollback can push its undo, so the
// rollback fails and the intent stays; once the remote is back, recovery
// (which knows nothing of the sync) takes the import back. Jane's file
// must stay as she pushed it, and the next sync imports it.
func TestImportRecoveredWhenItsUndoFailed(t *testing.T) {
	for _, synced := range []bool{false, true} {
		t.Run(fmt.Sprintf("synced=%v", synced), func(t *testing.T) {
			r := gittest.NewRemote(t)
			var pushes, allowed atomic.Int64
			allowed.Store(math.MaxInt64)
			url := r.ServeThrough(t, func(h http.Handler) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
					if req.Method == http.MethodPost && strings.HasSuffix(req.URL.Path, "/git-receive-pack") && pushes.Add(1) > allowed.Load() {
						http.Error(w, "unreachable (test)", http.StatusServiceUnavailable)
						return
					}
					h.ServeHTTP(w, req)
				})
			})
			e := newSyncEnvWith(t, r, map[string]any{"url": url}, nil)
			ctx := context.Background()
			e.create("existing", false)
			s := e.syncer()
			if synced {
				// A sync before Jane's push: the next one walks her commit
				// (Pending), rather than reconciling the tip's files.
				if _, err := s.Sync(ctx); err != nil {
					t.Fatal(err)
				}
			}
			e.person("status") // clones
			// 200 new files and a change: one import batch, which recovery
			// takes back as one commit and one push, as the import made it.
			e.writeFlags("added", 200)
			e.write("existing", flagFile("existing", true))
			e.pushAll("add added")
			tree := gittest.Git(t, r.Path, "rev-parse", "main^{tree}")

			allow := e.refuse("refuse_added", "BEFORE INSERT ON resource_versions BEGIN SELECT RAISE(ABORT, 'the store refuses (test)'); END")
			allowed.Store(pushes.Load() + 1) // the import's push, not the undo's
			if res, err := s.Sync(ctx); err == nil || !strings.Contains(err.Error(), "rollback") {
				t.Fatalf("Sync with the store refusing and the remote gone = %+v, %v; want the failed rollback reported", res, err)
			}
			pending, err := e.h.PendingIntents(ctx)
			if err != nil || len(pending) != 201 {
				t.Fatalf("intents after the failed rollback: %d, %v; want the import's 201", len(pending), err)
			}
			imported := gittest.Git(t, r.Path, "rev-parse", "main")

			allowed.Store(math.MaxInt64)
			allow()
			e.open(e.cache) // a restarted process
			// Its sync runs before recovery (whose grace has not passed): the
			// branch records the import, the hub does not hold it. The sync must
			// not take the branch's record for the hub's and move past Jane's
			// commit, or nothing would import her files once recovery took the
			// import back.
			before := e.remote.Commits(t)
			if res, err := e.syncer().Sync(ctx); err == nil || !strings.Contains(err.Error(), "not in the hub") {
				t.Fatalf("Sync before recovery = %+v, %v; want it stopped at the import the hub does not hold", res, err)
			}
			if _, err := e.get("added-0000"); !cairn.HasCode(err, cairn.CodeNotFound) {
				t.Errorf("added-0000 before recovery: %v, want NotFound", err)
			}
			if n := e.remote.Commits(t) - before; n != 0 {
				t.Errorf("the sync before recovery made %d commits, want none", n)
			}
			pushed := pushes.Load()
			rec, err := e.h.Recover(ctx, 0)
			if err != nil || rec.Undone != 201 || len(rec.Failed) != 0 {
				t.Fatalf("Recover = %+v, %v; want the import undone", rec, err)
			}
			if n, p := e.remote.Commits(t)-before, pushes.Load()-pushed; n != 1 || p != 1 {
				t.Errorf("recovery undid the import with %d commits and %d pushes, want 1 and 1", n, p)
			}
			undo := gittest.Git(t, r.Path, "log", "-1", "--format=%B", "main")
			if !strings.HasPrefix(undo, "cairn: undo sync create 200, update 1 resources by ") || !strings.Contains(undo, "Cairn-Revert: "+imported) {
				t.Errorf("recovery's undo commit:\n%s\nwant the undo of import %s", undo, imported)
			}
			if got := gittest.Git(t, r.Path, "rev-parse", "main^{tree}"); got != tree {
				t.Errorf("recovery changed the repository's files:\n%s", gittest.Git(t, r.Path, "log", "-3", "--stat", "--format=%s%n%b", "main"))
			}
			res, err := e.syncer().Sync(ctx)
			if err != nil || res.Created != 200 || res.Updated != 1 {
				t.Fatalf("Sync after recovery = %+v, %v; want the 200 files and the change imported", res, err)
			}
			if inst, err := e.get("added-0199"); err != nil || inst.Latest.CreatedBy != jane {
				t.Errorf("added-0199 after recovery and sync: %+v, %v", inst.Latest, err)
			}
			if inst, err := e.get("existing"); err != nil || inst.Latest.ResourceVersion != 2 || inst.Latest.CreatedBy != jane {
				t.Errorf("existing after recovery and sync: %+v, %v; want version 2 by Jane", inst.Latest, err)
			}
			if got := gittest.Git(t, r.Path, "rev-parse", "main^{tree}"); got != tree {
				t.Errorf("the import after recovery changed the repository's files")
			}
		})
	}
}

// TestImportWhosePushWentUnanswered: the import's push reaches the remote
// but its answer is lost, and the remote stays unreachable for the fetch
// that would tell. Nobody knows whether the import is on the branch, so
// the hub must keep its intents (an unanswered write, for recovery), not
// forget them: the branch does hold it, the hub does not, and only
// recovery takes it back. Then the next sync imports Jane's files.
func TestImportWhosePushWentUnanswered(t *testing.T) {
	r := gittest.NewRemote(t)
	var down, armed atomic.Bool
	url := r.ServeThrough(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			if down.Load() {
				http.Error(w, "unreachable (test)", http.StatusServiceUnavailable)
				return
			}
			if req.Method == http.MethodPost && strings.HasSuffix(req.URL.Path, "/git-receive-pack") && armed.Swap(false) {
				// The push lands; its answer is lost with the remote.
				h.ServeHTTP(httptest.NewRecorder(), req)
				down.Store(true)
				http.Error(w, "connection lost (test)", http.StatusBadGateway)
				return
			}
			h.ServeHTTP(w, req)
		})
	})
	e := newSyncEnvWith(t, r, map[string]any{"url": url}, nil)
	ctx := context.Background()
	e.create("existing", false)
	e.person("status") // clones
	e.write("added", flagFile("added", true))
	e.write("added2", flagFile("added2", false))
	e.pushAll("add two")
	commits := r.Commits(t)
	armed.Store(true) // the import's push

	if res, err := e.syncer().Sync(ctx); err == nil {
		t.Fatalf("Sync with the push unanswered = %+v, nil; want an error", res)
	}
	if n := r.Commits(t) - commits; n != 1 {
		t.Fatalf("the remote got %d commits, want the import's", n)
	}
	pending, err := e.h.PendingIntents(ctx)
	if err != nil || len(pending) != 2 {
		t.Fatalf("intents after the unanswered push: %+v, %v; want the import's two, for recovery", pending, err)
	}

	down.Store(false)
	e.open(e.cache) // a restarted process
	if res, err := e.syncer().Sync(ctx); err == nil || !strings.Contains(err.Error(), "not in the hub") {
		t.Fatalf("Sync before recovery = %+v, %v; want it stopped at the import the hub does not hold", res, err)
	}
	rec, err := e.h.Recover(ctx, 0)
	if err != nil || rec.Undone != 2 || len(rec.Failed) != 0 {
		t.Fatalf("Recover = %+v, %v; want the import undone", rec, err)
	}
	res, err := e.syncer().Sync(ctx)
	if err != nil || res.Created != 2 {
		t.Fatalf("Sync after recovery = %+v, %v; want added and added2 imported", res, err)
	}
	if inst, err := e.get("added2"); err != nil || inst.Latest.CreatedBy != jane {
		t.Errorf("added2 after recovery and sync: %+v, %v", inst.Latest, err)
	}
}

// TestImportedDeletesRecoveredWhenTheirCommitFailed: Jane removes three
// Flags in one commit; the hub deletes them (one store transaction), then
// the remote goes away before the backend's one commit recording the
// removals is pushed. The deletes stand (the files are gone: nothing to
// take back), their intents stay, and recovery finishes them once the
// remote is back, without touching Jane's files; no sync imports them
// again.
func TestImportedDeletesRecoveredWhenTheirCommitFailed(t *testing.T) {
	r := gittest.NewRemote(t)
	var down atomic.Bool
	url := r.ServeThrough(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			if down.Load() && req.Method == http.MethodPost && strings.HasSuffix(req.URL.Path, "/git-receive-pack") {
				http.Error(w, "unreachable (test)", http.StatusServiceUnavailable)
				return
			}
			h.ServeHTTP(w, req)
		})
	})
	e := newSyncEnvWith(t, r, map[string]any{"url": url}, nil)
	ctx := context.Background()
	e.create("existing", false)
	s := e.syncer()
	// Replica B, synced before any of Jane's commits: it walks them all
	// at the end.
	other := *e
	other.open(t.TempDir())
	b := other.syncer()
	if _, err := b.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	e.person("status") // clones
	e.writeFlags("gone", 3)
	e.pushAll("three flags")
	if res, err := s.Sync(ctx); err != nil || res.Created != 3 {
		t.Fatalf("Sync = %+v, %v; want 3 created", res, err)
	}
	e.person("pull", "--quiet", "--ff-only", "origin", "main")
	e.removeFlags("gone", 0, 3)
	e.pushAll("remove them")
	tree, commits := gittest.Git(t, r.Path, "rev-parse", "main^{tree}"), r.Commits(t)

	down.Store(true)
	if res, err := s.Sync(ctx); err != nil || res.Deleted != 3 {
		t.Fatalf("Sync with the remote refusing pushes = %+v, %v; want the 3 deletes done in the hub", res, err)
	}
	for i := range 3 {
		if _, err := e.get(fmt.Sprintf("gone-%04d", i)); !cairn.HasCode(err, cairn.CodeNotFound) {
			t.Errorf("gone-%04d after the sync: %v, want NotFound", i, err)
		}
	}
	pending, err := e.h.PendingIntents(ctx)
	if err != nil || len(pending) != 3 {
		t.Fatalf("intents after the failed push: %+v, %v; want the 3 deletes'", pending, err)
	}

	down.Store(false)
	e.open(e.cache) // a restarted process
	rec, err := e.h.Recover(ctx, 0)
	if err != nil || rec.Deleted != 3 || len(rec.Failed) != 0 {
		t.Fatalf("Recover = %+v, %v; want the 3 deletes finished", rec, err)
	}
	if got := gittest.Git(t, r.Path, "rev-parse", "main^{tree}"); got != tree {
		t.Errorf("recovery changed the repository's files:\n%s", gittest.Git(t, r.Path, "log", "-3", "--stat", "--format=%s%n%b", "main"))
	}
	for _, cache := range []string{e.cache, t.TempDir()} {
		e.open(cache)
		if res, err := e.syncer().Sync(ctx); err != nil || res.Created+res.Updated+res.Deleted != 0 {
			t.Errorf("Sync after recovery = %+v, %v; want nothing", res, err)
		}
	}
	// B's index still holds the three (no commit of cairn's recorded
	// their removal): imported from Jane's first commit, deleted since,
	// no write on its way. Nothing to wait for.
	if res, err := b.Sync(ctx); err != nil || res.Created+res.Updated+res.Deleted != 0 {
		t.Errorf("replica B's Sync after recovery = %+v, %v; want nothing", res, err)
	}
	if n := r.Commits(t) - commits; n > 1 {
		t.Errorf("recovery and the syncs after it made %d commits, want at most 1", n)
	}
}

// TestRecoveryKeepsAFileReaddedAfterItsDelete: Jane removes three Flags,
// the hub deletes them but the commit recording the removals cannot be
// pushed (the remote away), and Jane then adds one of them again at the
// same path. Recovery, finishing the deletes, must record them on the
// branch (one commit saying so, in git log) and must not remove the file
// she re-added: it is not the deleted instance's. Whether a sync imported
// the new file before recovery ran or only after, she ends with the new
// Flag, its file untouched.
func TestRecoveryKeepsAFileReaddedAfterItsDelete(t *testing.T) {
	for _, syncedFirst := range []bool{true, false} {
		t.Run(fmt.Sprintf("synced-before-recovery=%v", syncedFirst), func(t *testing.T) {
			r := gittest.NewRemote(t)
			var down atomic.Bool
			url := r.ServeThrough(t, func(h http.Handler) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
					if down.Load() && req.Method == http.MethodPost && strings.HasSuffix(req.URL.Path, "/git-receive-pack") {
						http.Error(w, "unreachable (test)", http.StatusServiceUnavailable)
						return
					}
					h.ServeHTTP(w, req)
				})
			})
			e := newSyncEnvWith(t, r, map[string]any{"url": url}, nil)
			ctx := context.Background()
			e.create("existing", false)
			s := e.syncer()
			e.person("status") // clones
			e.writeFlags("gone", 3)
			e.pushAll("three flags")
			if res, err := s.Sync(ctx); err != nil || res.Created != 3 {
				t.Fatalf("Sync = %+v, %v; want 3 created", res, err)
			}
			old, err := e.get("gone-0001")
			if err != nil {
				t.Fatal(err)
			}
			e.person("pull", "--quiet", "--ff-only", "origin", "main")
			e.removeFlags("gone", 0, 3)
			e.pushAll("remove them")
			down.Store(true)
			if res, err := s.Sync(ctx); err != nil || res.Deleted != 3 {
				t.Fatalf("Sync with the remote refusing pushes = %+v, %v; want the 3 deletes done in the hub", res, err)
			}
			down.Store(false)
			e.write("gone-0001", flagFile("gone-0001", true)) // gone-0001 was enabled=false
			e.pushAll("gone-0001 is back")
			if syncedFirst {
				if res, err := s.Sync(ctx); err != nil || res.Created != 1 {
					t.Fatalf("Sync of the re-added file = %+v, %v; want it created", res, err)
				}
			}
			tree, commits := gittest.Git(t, r.Path, "rev-parse", "main^{tree}"), r.Commits(t)

			e.open(e.cache) // a restarted process
			rec, err := e.h.Recover(ctx, 0)
			if err != nil || rec.Deleted != 3 || len(rec.Failed) != 0 {
				t.Fatalf("Recover = %+v, %v; want the 3 deletes finished", rec, err)
			}
			if got := gittest.Git(t, r.Path, "rev-parse", "main^{tree}"); got != tree {
				t.Errorf("recovery changed the repository's files:\n%s", gittest.Git(t, r.Path, "log", "-2", "--stat", "--format=%s%n%b", "main"))
			}
			if n := r.Commits(t) - commits; n != 1 {
				t.Errorf("recovery made %d commits, want one recording the 3 deletes", n)
			}
			msg := gittest.Git(t, r.Path, "log", "-1", "--format=%B", "main")
			if !strings.HasPrefix(msg, "cairn: recover: delete 3 resources") || !strings.Contains(msg, "Cairn-Change: delete "+old.ID+" 0 flipt.io/v1 Flag default/gone-0001") {
				t.Errorf("recovery's commit:\n%s\nwant the 3 deletes recorded, gone-0001's old instance among them", msg)
			}
			if !syncedFirst {
				if res, err := e.syncer().Sync(ctx); err != nil || res.Created != 1 {
					t.Fatalf("Sync after recovery = %+v, %v; want the re-added file created", res, err)
				}
			}
			inst, err := e.get("gone-0001")
			if err != nil || inst.ID == old.ID || string(inst.Latest.Value) != `{"enabled":true}` {
				t.Fatalf("gone-0001 after recovery: %+v, %v; want the re-added Flag, a new instance", inst, err)
			}
			// Another process reads it from the branch: the old instance's
			// delete is recorded, the new one is there.
			e.open(t.TempDir())
			if v, err := e.h.GetInstance(ctx, inst.ID, true); err != nil || string(v.Latest.Value) != `{"enabled":true}` {
				t.Errorf("gone-0001 on a fresh cache: %+v, %v", v.Latest, err)
			}
			if res, err := e.syncer().Sync(ctx); err != nil || res.Created+res.Updated+res.Deleted != 0 {
				t.Errorf("Sync on a fresh cache = %+v, %v; want nothing", res, err)
			}
		})
	}
}

// TestRecoveryKeepsAReaddedFileWhenItsBatchFails: as
// TestRecoveryKeepsAFileReaddedAfterItsDelete (Jane re-adds gone-0001 at
// its path after the hub deleted it, before the deletes reached the
// branch), and at gone-0002's path she pushes a file that is not a
// resource, so recovery's one call for the three deletes fails. Trying
// each delete alone must still leave her re-added file alone: only the
// unreadable file's delete waits for her fix.
func TestRecoveryKeepsAReaddedFileWhenItsBatchFails(t *testing.T) {
	r := gittest.NewRemote(t)
	var down atomic.Bool
	url := r.ServeThrough(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			if down.Load() && req.Method == http.MethodPost && strings.HasSuffix(req.URL.Path, "/git-receive-pack") {
				http.Error(w, "unreachable (test)", http.StatusServiceUnavailable)
				return
			}
			h.ServeHTTP(w, req)
		})
	})
	e := newSyncEnvWith(t, r, map[string]any{"url": url}, nil)
	ctx := context.Background()
	e.create("existing", false)
	s := e.syncer()
	e.person("status") // clones
	e.writeFlags("gone", 3)
	e.pushAll("three flags")
	if res, err := s.Sync(ctx); err != nil || res.Created != 3 {
		t.Fatalf("Sync = %+v, %v; want 3 created", res, err)
	}
	e.person("pull", "--quiet", "--ff-only", "origin", "main")
	e.removeFlags("gone", 0, 3)
	e.pushAll("remove them")
	down.Store(true)
	if res, err := s.Sync(ctx); err != nil || res.Deleted != 3 {
		t.Fatalf("Sync with the remote refusing pushes = %+v, %v; want the 3 deletes done in the hub", res, err)
	}
	down.Store(false)
	e.write("gone-0001", flagFile("gone-0001", true)) // gone-0001 was enabled=false
	e.write("gone-0002", "not a resource\n")
	e.pushAll("gone-0001 is back; a draft at gone-0002")

	e.open(e.cache) // a restarted process
	rec, err := e.h.Recover(ctx, 0)
	if err != nil {
		t.Fatalf("Recover: %v", err)
	}
	if files := gittest.Git(t, r.Path, "ls-tree", "-r", "--name-only", "main"); !strings.Contains(files, "flipt.io-v1-Flag-gone-0001.json") {
		t.Errorf("recovery (%+v) removed the file Jane re-added:\n%s", rec, gittest.Git(t, r.Path, "log", "-3", "--stat", "--format=%s", "main"))
	}
	if rec.Deleted != 2 || len(rec.Failed) != 1 || !strings.Contains(rec.Failed[0].LastError, "gone-0002") {
		t.Errorf("Recover = %+v; want 2 deletes finished and gone-0002's failed, naming it", rec)
	}
	if files := gittest.Git(t, r.Path, "ls-tree", "-r", "--name-only", "main"); !strings.Contains(files, "flipt.io-v1-Flag-gone-0002.json") {
		t.Errorf("recovery removed the file Jane pushed at gone-0002's path:\n%s", files)
	}
}
