package grpc_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/auth/rbac"
	"github.com/cairn-dev/cairn/backend/file"
	grpcbackend "github.com/cairn-dev/cairn/backend/grpc"
	"github.com/cairn-dev/cairn/hub"
	"github.com/cairn-dev/cairn/sdk/storagebackend"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/sqlite"
)

// faults wraps the file backend on the server side of the wire and lets a
// test fail, delay or kill chosen calls, so every fault travels through
// real gRPC to the adapter and the hub.
type faults struct {
	cairn.Backend
	mu    sync.Mutex
	calls map[string][]string // method -> instance ids, in order
	hook  func(ctx context.Context, method string, n int, id string) error
}

func (f *faults) on(ctx context.Context, method, id string) error {
	f.mu.Lock()
	f.calls[method] = append(f.calls[method], id)
	n := len(f.calls[method])
	hook := f.hook
	f.mu.Unlock()
	if hook != nil {
		return hook(ctx, method, n, id)
	}
	return nil
}

func (f *faults) setHook(h func(ctx context.Context, method string, n int, id string) error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.hook = h
	clear(f.calls)
}

func (f *faults) called(method string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls[method])
}

func (f *faults) OnCreate(ctx context.Context, req cairn.OnCreateRequest) (json.RawMessage, error) {
	if err := f.on(ctx, "OnCreate", req.InstanceID); err != nil {
		return nil, err
	}
	return f.Backend.OnCreate(ctx, req)
}

func (f *faults) OnUpdate(ctx context.Context, req cairn.OnUpdateRequest) (json.RawMessage, error) {
	if err := f.on(ctx, "OnUpdate", req.InstanceID); err != nil {
		return nil, err
	}
	return f.Backend.OnUpdate(ctx, req)
}

func (f *faults) OnDelete(ctx context.Context, req cairn.OnDeleteRequest) error {
	if err := f.on(ctx, "OnDelete", req.InstanceID); err != nil {
		return err
	}
	return f.Backend.OnDelete(ctx, req)
}

func (f *faults) OnDeleteRevision(ctx context.Context, req cairn.OnDeleteRevisionRequest) error {
	if err := f.on(ctx, "OnDeleteRevision", req.InstanceID); err != nil {
		return err
	}
	return f.Backend.OnDeleteRevision(ctx, req)
}

func (f *faults) GetValue(ctx context.Context, req cairn.GetValueRequest) (json.RawMessage, error) {
	if err := f.on(ctx, "GetValue", req.InstanceID); err != nil {
		return nil, err
	}
	return f.Backend.GetValue(ctx, req)
}

func (f *faults) OnLock(ctx context.Context, req cairn.OnLockRequest) error {
	if err := f.on(ctx, "OnLock", req.InstanceID); err != nil {
		return err
	}
	return f.Backend.OnLock(ctx, req)
}

func (f *faults) OnUnlock(ctx context.Context, req cairn.OnUnlockRequest) error {
	if err := f.on(ctx, "OnUnlock", req.InstanceID); err != nil {
		return err
	}
	return f.Backend.OnUnlock(ctx, req)
}

// hubEnv is a hub on a real SQLite file whose external backend is the file
// backend, served over loopback gRPC and reached through the adapter.
type hubEnv struct {
	t      *testing.T
	ctx    context.Context
	h      *hub.Hub
	st     store.Store
	dir    string // the file backend's directory
	faults *faults
	srv    *served
	bid    string // the backend instance's id
}

var cfgType = cairn.TypeRef{Path: "cap.type.app.config", Revision: "0.1.0"}

func newHubEnv(t *testing.T, cfg grpcbackend.Config) *hubEnv {
	t.Helper()
	e := &hubEnv{t: t, ctx: cairn.WithActor(context.Background(), "tester"), dir: t.TempDir()}
	fb, err := file.New(file.Config{Dir: e.dir})
	if err != nil {
		t.Fatal(err)
	}
	e.faults = &faults{Backend: fb, calls: map[string][]string{}}
	e.srv = serve(t, e.faults, true, storagebackend.Options{})
	st, err := sqlite.Open(e.ctx, filepath.Join(t.TempDir(), "cairn.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	e.st = st
	e.h, err = hub.New(e.ctx, hub.Config{Store: st, Backends: opener(t, cfg)})
	if err != nil {
		t.Fatal(err)
	}
	out, err := e.h.CreateInstances(e.ctx, hub.CreateRequest{Instances: []hub.NewInstance{{
		Alias:      "files",
		Namespace:  hub.SystemNamespace,
		TypeRef:    cairn.TypeRef{Path: "cap.type.cairn.storage.grpc", Revision: "0.1.0"},
		Value:      json.RawMessage(fmt.Sprintf(`{"url":"grpc://%s","acceptValue":true,"contextSchema":null}`, e.srv.addr)),
		Attributes: []cairn.AttributeRef{{Path: cairn.StorageAttributePath, Revision: cairn.CoreRevision}},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	e.bid = out[0].ID
	return e
}

func (e *hubEnv) newInstance(alias, value string) hub.NewInstance {
	return hub.NewInstance{Alias: alias, Name: alias, TypeRef: cfgType, Value: json.RawMessage(value), Backend: &hub.BackendInput{ID: e.bid}}
}

func (e *hubEnv) create(ins ...hub.NewInstance) []string {
	e.t.Helper()
	out, err := e.h.CreateInstances(e.ctx, hub.CreateRequest{Instances: ins})
	if err != nil {
		e.t.Fatalf("CreateInstances: %v", err)
	}
	ids := make([]string, len(out))
	for i, c := range out {
		ids[i] = c.ID
	}
	return ids
}

// instances lists the ids of the hub's instances of cfgType.
func (e *hubEnv) instances() []string {
	e.t.Helper()
	list, err := e.h.ListInstances(e.ctx, store.InstanceFilter{TypePath: cfgType.Path}, false)
	if err != nil {
		e.t.Fatal(err)
	}
	var ids []string
	for _, i := range list {
		ids = append(ids, i.ID)
	}
	slices.Sort(ids)
	return ids
}

// files lists what the file backend holds: "<id>/<file>" for every file,
// temporary ones included, so a half-written leftover shows.
func (e *hubEnv) files() []string {
	e.t.Helper()
	var out []string
	err := filepath.WalkDir(e.dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			rel, _ := filepath.Rel(e.dir, p)
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		e.t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

func (e *hubEnv) wantFiles(want ...string) {
	e.t.Helper()
	slices.Sort(want)
	if got := e.files(); !slices.Equal(got, want) {
		e.t.Errorf("backend files = %v, want %v", got, want)
	}
}

func (e *hubEnv) wantInstances(want ...string) {
	e.t.Helper()
	slices.Sort(want)
	if got := e.instances(); !slices.Equal(got, want) {
		e.t.Errorf("hub instances = %v, want %v", got, want)
	}
}

func (e *hubEnv) fileContent(id string, rv int) string {
	e.t.Helper()
	b, err := os.ReadFile(filepath.Join(e.dir, id, fmt.Sprintf("%d.json", rv)))
	if err != nil {
		e.t.Fatal(err)
	}
	return string(b)
}

func wantContains(t *testing.T, err error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want one containing %q", parts)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("error %q does not contain %q", err, p)
		}
	}
}

// failNth fails the nth call of method with err.
func failNth(method string, nth int, err error) func(context.Context, string, int, string) error {
	return func(_ context.Context, m string, n int, _ string) error {
		if m == method && n == nth {
			return err
		}
		return nil
	}
}

// TestHubOverGRPC drives every operation of the hub on an instance kept in
// the file backend and checks the files.
func TestHubOverGRPC(t *testing.T) {
	e := newHubEnv(t, grpcbackend.Config{})
	id := e.create(e.newInstance("db", `{"host":"a"}`))[0]
	e.wantFiles(id + "/1.json")
	inst, err := e.h.GetInstance(e.ctx, id, true)
	if err != nil || string(inst.Latest.Value) != `{"host":"a"}` {
		t.Fatalf("GetInstance = %s, %v", inst.Latest.Value, err)
	}
	if _, err := e.h.UpdateInstances(e.ctx, []hub.UpdateInstance{{ID: id, Value: json.RawMessage(`{"host":"b"}`)}}); err != nil {
		t.Fatal(err)
	}
	e.wantFiles(id+"/1.json", id+"/2.json")
	if got := e.fileContent(id, 2); got != `{"host":"b"}` {
		t.Errorf("2.json = %s", got)
	}
	if err := e.h.LockInstances(e.ctx, []string{id}, "alice"); err != nil {
		t.Fatal(err)
	}
	e.wantFiles(id+"/1.json", id+"/2.json", id+"/lock")
	// The backend enforces the lock it was told about, too.
	_, err = e.h.UpdateInstances(e.ctx, []hub.UpdateInstance{{ID: id, OwnerID: "bob", Value: json.RawMessage(`1`)}})
	wantCode(t, err, cairn.CodeLocked)
	if err := e.h.UnlockInstances(e.ctx, []string{id}, "alice"); err != nil {
		t.Fatal(err)
	}
	e.wantFiles(id+"/1.json", id+"/2.json")
	if err := e.h.DeleteInstance(e.ctx, id, ""); err != nil {
		t.Fatal(err)
	}
	e.wantFiles()
	e.wantInstances()
}

// TestCreateRollbackOverGRPC: a batch create that fails after some
// OnCreate calls succeeded undoes each with OnDelete.
func TestCreateRollbackOverGRPC(t *testing.T) {
	t.Run("the backend refuses the third instance", func(t *testing.T) {
		e := newHubEnv(t, grpcbackend.Config{})
		e.faults.setHook(failNth("OnCreate", 3, fmt.Errorf("%w: disk full", errInjected)))
		_, err := e.h.CreateInstances(e.ctx, hub.CreateRequest{Instances: []hub.NewInstance{
			e.newInstance("a", `1`), e.newInstance("b", `2`), e.newInstance("c", `3`),
		}})
		wantContains(t, err, "disk full", `External backend "`+e.bid+`"`, `TypeInstance "c"`)
		created := e.faults.called("OnCreate")
		if deleted := e.faults.called("OnDelete"); !slices.Equal(deleted, created[:2]) {
			t.Errorf("OnDelete calls %v, want the two stored ones %v", deleted, created[:2])
		}
		e.wantInstances()
		e.wantFiles()
	})
	t.Run("the rollback fails too", func(t *testing.T) {
		e := newHubEnv(t, grpcbackend.Config{})
		e.faults.setHook(func(_ context.Context, m string, n int, _ string) error {
			switch {
			case m == "OnCreate" && n == 2:
				return fmt.Errorf("%w: disk full", errInjected)
			case m == "OnDelete":
				return fmt.Errorf("%w: read-only file system", errInjected)
			}
			return nil
		})
		_, err := e.h.CreateInstances(e.ctx, hub.CreateRequest{Instances: []hub.NewInstance{e.newInstance("a", `1`), e.newInstance("b", `2`)}})
		orphan := e.faults.called("OnCreate")[0]
		wantContains(t, err, "disk full", "rollback externally stored values: ", orphan, "read-only file system")
		e.wantInstances()
		// What the rollback could not remove is complete and is the one the
		// error names.
		e.wantFiles(orphan + "/1.json")
	})
	t.Run("the store refuses after the backend stored", func(t *testing.T) {
		e := newHubEnv(t, grpcbackend.Config{})
		// Another writer takes the name while the backend stores the
		// batch (the hub checks names before it calls the backend, so
		// only a concurrent writer gets the store to refuse afterwards).
		var taken string
		e.faults.setHook(func(_ context.Context, m string, n int, _ string) error {
			if m == "OnCreate" && n == 1 {
				taken = e.create(e.newInstance("taken", `0`))[0]
			}
			return nil
		})
		_, err := e.h.CreateInstances(e.ctx, hub.CreateRequest{Instances: []hub.NewInstance{
			e.newInstance("fresh", `1`), e.newInstance("taken", `2`),
		}})
		wantCode(t, err, cairn.CodeAlreadyExists)
		if got := e.faults.called("OnDelete"); len(got) != 2 {
			t.Errorf("OnDelete calls = %v, want both stored values undone", got)
		}
		e.wantInstances(taken)
		e.wantFiles(taken + "/1.json")
	})
}

// TestUpdateRollbackOverGRPC: an update batch that fails after OnUpdate
// succeeded for some instances removes those revisions again.
func TestUpdateRollbackOverGRPC(t *testing.T) {
	e := newHubEnv(t, grpcbackend.Config{})
	ids := e.create(e.newInstance("x", `1`), e.newInstance("y", `1`))
	x, y := ids[0], ids[1]
	e.faults.setHook(func(_ context.Context, m string, _ int, id string) error {
		if m == "OnUpdate" && id == y {
			return fmt.Errorf("%w: quota exceeded", errInjected)
		}
		return nil
	})
	_, err := e.h.UpdateInstances(e.ctx, []hub.UpdateInstance{{ID: x, Value: json.RawMessage(`2`)}, {ID: y, Value: json.RawMessage(`2`)}})
	wantContains(t, err, "quota exceeded", e.bid, y)
	if got := e.faults.called("OnDeleteRevision"); !slices.Equal(got, []string{x}) {
		t.Errorf("OnDeleteRevision calls = %v, want [%s]", got, x)
	}
	e.wantFiles(x+"/1.json", y+"/1.json")
	for _, id := range ids {
		if inst, _ := e.h.GetInstance(e.ctx, id, false); inst.Latest.ResourceVersion != 1 {
			t.Errorf("%s at resource version %d, want 1", id, inst.Latest.ResourceVersion)
		}
	}

	// When the rollback fails as well, the error says so.
	e.faults.setHook(func(_ context.Context, m string, _ int, id string) error {
		switch {
		case m == "OnUpdate" && id == y:
			return fmt.Errorf("%w: quota exceeded", errInjected)
		case m == "OnDeleteRevision":
			return fmt.Errorf("%w: read-only file system", errInjected)
		}
		return nil
	})
	_, err = e.h.UpdateInstances(e.ctx, []hub.UpdateInstance{{ID: x, Value: json.RawMessage(`2`)}, {ID: y, Value: json.RawMessage(`2`)}})
	wantContains(t, err, "quota exceeded", "rollback externally stored values: ", "delete resource version 2 of TypeInstance \""+x+"\"", "read-only file system")
	e.wantFiles(x+"/1.json", x+"/2.json", y+"/1.json")

	// The orphaned revision stays in the intent journal: the next update
	// of x is refused, saying the version is being recovered, until
	// recovery has removed the orphan from the backend.
	e.faults.setHook(nil)
	_, err = e.h.UpdateInstances(e.ctx, []hub.UpdateInstance{{ID: x, Value: json.RawMessage(`3`)}})
	wantContains(t, err, x, "resource version 2 is already on its way (or being recovered)")
	// backends check counts it.
	if _, health, err := e.h.CheckBackend(e.ctx, e.bid); err != nil || health.Status != "SERVING" || health.PendingWrites != 1 {
		t.Fatalf("CheckBackend = %+v, %v; want SERVING with 1 pending write", health, err)
	}
	if res, err := e.h.Recover(e.ctx, 0); err != nil || res.Undone != 1 {
		t.Fatalf("Recover = %+v, %v; want the orphaned revision undone", res, err)
	}
	if _, health, err := e.h.CheckBackend(e.ctx, e.bid); err != nil || health.PendingWrites != 0 {
		t.Fatalf("CheckBackend after recovery = %+v, %v; want no pending write", health, err)
	}
	e.wantFiles(x+"/1.json", y+"/1.json")
	if _, err := e.h.UpdateInstances(e.ctx, []hub.UpdateInstance{{ID: x, Value: json.RawMessage(`3`)}}); err != nil {
		t.Fatalf("update after recovery: %v", err)
	}
	if got := e.fileContent(x, 2); got != `3` {
		t.Errorf("2.json = %s", got)
	}
}

// TestLockUndoOverGRPC: when a backend refuses a lock or an unlock, the hub
// puts back both its store and the backends it already told.
func TestLockUndoOverGRPC(t *testing.T) {
	e := newHubEnv(t, grpcbackend.Config{})
	ids := e.create(e.newInstance("x", `1`), e.newInstance("y", `1`))
	lockedBy := func(id string) string {
		inst, err := e.h.GetInstance(e.ctx, id, false)
		if err != nil {
			t.Fatal(err)
		}
		return inst.LockedBy
	}
	second := func(method string) func(context.Context, string, int, string) error {
		return func(_ context.Context, m string, _ int, id string) error {
			if m == method && id == ids[1] {
				return fmt.Errorf("%w: the backend refuses", errInjected)
			}
			return nil
		}
	}

	e.faults.setHook(second("OnLock"))
	err := e.h.LockInstances(e.ctx, ids, "alice")
	wantContains(t, err, "the backend refuses", e.bid)
	for _, id := range ids {
		if by := lockedBy(id); by != "" {
			t.Errorf("%s locked by %q in the store after the backend refused", id, by)
		}
	}
	e.wantFiles(ids[0]+"/1.json", ids[1]+"/1.json") // no lock file left

	e.faults.setHook(nil)
	if err := e.h.LockInstances(e.ctx, ids, "alice"); err != nil {
		t.Fatal(err)
	}
	e.faults.setHook(second("OnUnlock"))
	err = e.h.UnlockInstances(e.ctx, ids, "alice")
	wantContains(t, err, "the backend refuses", e.bid)
	for _, id := range ids {
		if by := lockedBy(id); by != "alice" {
			t.Errorf("%s locked by %q after a refused unlock, want alice", id, by)
		}
	}
	// The first backend call was undone: both lock files are there again.
	e.wantFiles(ids[0]+"/1.json", ids[0]+"/lock", ids[1]+"/1.json", ids[1]+"/lock")
}

// TestBackendHangs: a backend that does not answer is cut off at the
// deadline; what it stored earlier in the batch is rolled back and the
// hanging call itself is never committed.
func TestBackendHangs(t *testing.T) {
	e := newHubEnv(t, grpcbackend.Config{Timeout: 300 * time.Millisecond})
	e.faults.setHook(func(ctx context.Context, m string, n int, _ string) error {
		if m == "OnCreate" && n == 2 {
			<-ctx.Done() // hang until the hub gives up, then try to write anyway
		}
		return nil
	})
	start := time.Now()
	_, err := e.h.CreateInstances(e.ctx, hub.CreateRequest{Instances: []hub.NewInstance{e.newInstance("a", `1`), e.newInstance("b", `2`)}})
	wantCode(t, err, cairn.CodeUnavailable)
	wantContains(t, err, e.bid, "no answer within the deadline (300ms)", `TypeInstance "b"`)
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("create took %s with a 300ms deadline", d)
	}
	e.wantInstances()
	// Give the abandoned handler time to (not) write.
	time.Sleep(100 * time.Millisecond)
	e.wantFiles()

	// A read that hangs fails just as clearly.
	e.faults.setHook(nil)
	id := e.create(e.newInstance("c", `3`))[0]
	e.faults.setHook(func(ctx context.Context, m string, _ int, _ string) error {
		if m == "GetValue" {
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	})
	_, err = e.h.GetInstance(e.ctx, id, true)
	wantCode(t, err, cairn.CodeUnavailable)
	wantContains(t, err, e.bid, "no answer within the deadline")
}

// TestBackendDiesMidBatch: the backend process goes away between two calls
// of a batch. The hub answers Unavailable, stores nothing, and says which
// value it could not roll back; the backend holds only complete files.
func TestBackendDiesMidBatch(t *testing.T) {
	e := newHubEnv(t, grpcbackend.Config{Timeout: 2 * time.Second, ReadAttempts: 1})
	e.faults.setHook(func(ctx context.Context, m string, n int, _ string) error {
		if m == "OnCreate" && n == 2 {
			go e.srv.server.Stop()
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	})
	_, err := e.h.CreateInstances(e.ctx, hub.CreateRequest{Instances: []hub.NewInstance{
		e.newInstance("a", `1`), e.newInstance("b", `2`), e.newInstance("c", `3`),
	}})
	wantCode(t, err, cairn.CodeUnavailable)
	created := e.faults.called("OnCreate")
	if len(created) != 2 {
		t.Fatalf("OnCreate calls = %v, want 2 (the batch stops at the failure)", created)
	}
	wantContains(t, err, e.bid, `TypeInstance "b"`, "rollback externally stored values: ", created[0])
	e.wantInstances()
	e.wantFiles(created[0] + "/1.json")
	if got := e.fileContent(created[0], 1); got != `1` {
		t.Errorf("the orphan's value = %s", got)
	}
}

// TestReadErrorIsClear: a backend error on a read reaches the caller with
// the backend and the instance named and its code kept.
func TestReadErrorIsClear(t *testing.T) {
	e := newHubEnv(t, grpcbackend.Config{})
	id := e.create(e.newInstance("a", `1`))[0]
	if err := os.Remove(filepath.Join(e.dir, id, "1.json")); err != nil {
		t.Fatal(err)
	}
	_, err := e.h.GetInstance(e.ctx, id, true)
	wantCode(t, err, cairn.CodeNotFound)
	wantContains(t, err, e.bid, id, "has no resource version 1")
	// The hub does not repeat what the adapter already says.
	if n := strings.Count(err.Error(), "External backend"); n != 1 {
		t.Errorf("error names the backend %d times: %v", n, err)
	}
}

// TestBackendMoves: updating the backend instance (a new url) makes the
// hub's adapter drop the old connection and use the new address.
func TestBackendMoves(t *testing.T) {
	e := newHubEnv(t, grpcbackend.Config{Timeout: 2 * time.Second, ReadAttempts: 1})
	id := e.create(e.newInstance("a", `1`))[0]
	if _, err := e.h.GetInstance(e.ctx, id, true); err != nil {
		t.Fatal(err)
	}
	// The same directory served elsewhere; the old server goes away.
	moved := serve(t, e.faults, true, storagebackend.Options{})
	e.srv.server.Stop()
	if _, err := e.h.GetInstance(e.ctx, id, true); !cairn.HasCode(err, cairn.CodeUnavailable) {
		t.Fatalf("read from the stopped address: %v, want Unavailable", err)
	}
	value := fmt.Sprintf(`{"url":"grpc://%s","acceptValue":true,"contextSchema":null}`, moved.addr)
	if _, err := e.h.UpdateInstances(e.ctx, []hub.UpdateInstance{{ID: e.bid, Value: json.RawMessage(value)}}); err != nil {
		t.Fatal(err)
	}
	inst, err := e.h.GetInstance(e.ctx, id, true)
	if err != nil || string(inst.Latest.Value) != `1` {
		t.Fatalf("read after the move = %s, %v", inst.Latest.Value, err)
	}
}

// TestRegisteringABackendIsClusterScoped: an instance with the storage
// attribute is a backend the hub dials, wherever it lives. An editor of one
// namespace (create typeinstances there) must not register one: its url
// would point the hub at any address its network reaches (here, a real
// backend on loopback that the editor could not reach itself) and every
// instance created in it would be sent there. Registering, re-pointing and
// unmarking a backend needs create or update on backends, cluster-scoped,
// as the REST resource is.
func TestRegisteringABackendIsClusterScoped(t *testing.T) {
	e := newHubEnv(t, grpcbackend.Config{ReadAttempts: 1})
	bind := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "ed", Namespace: "team-a"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: rbac.EditorRole},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: "ed"}}}
	if _, err := e.h.CreateRBAC(e.ctx, bind); err != nil {
		t.Fatal(err)
	}
	ed := cairn.WithUser(e.ctx, cairn.User{Name: "ed", Groups: []string{cairn.Authenticated}})
	storageAttr := []cairn.AttributeRef{{Path: cairn.StorageAttributePath, Revision: cairn.CoreRevision}}
	backendValue := json.RawMessage(fmt.Sprintf(`{"url":"grpc://%s","acceptValue":true,"contextSchema":null}`, e.srv.addr))
	_, err := e.h.CreateInstances(ed, hub.CreateRequest{Instances: []hub.NewInstance{{
		Alias: "mine", Namespace: "team-a", TypeRef: cairn.TypeRef{Path: "cap.type.cairn.storage.grpc", Revision: "0.1.0"},
		Value: backendValue, Attributes: storageAttr,
	}}})
	wantCode(t, err, cairn.CodeForbidden)
	wantContains(t, err, `User "ed" cannot create resource "backends" in API group "hub.cairn.dev" at the cluster scope`)

	// Nor may the editor turn an instance of team-a into one.
	plain := e.create(hub.NewInstance{Alias: "plain", Namespace: "team-a", TypeRef: cfgType, Value: json.RawMessage(`{}`)})[0]
	_, err = e.h.UpdateInstances(ed, []hub.UpdateInstance{{ID: plain, Value: backendValue, Attributes: &storageAttr}})
	wantCode(t, err, cairn.CodeForbidden)
	wantContains(t, err, `User "ed" cannot update resource "backends"`)

	// A backend an admin put in team-a: the editor may not re-point it.
	out, err := e.h.CreateInstances(e.ctx, hub.CreateRequest{Instances: []hub.NewInstance{{
		Alias: "admins", Namespace: "team-a", TypeRef: cairn.TypeRef{Path: "cap.type.cairn.storage.grpc", Revision: "0.1.0"},
		Value: backendValue, Attributes: storageAttr,
	}}})
	if err != nil {
		t.Fatal(err)
	}
	moved := json.RawMessage(`{"url":"grpc://127.0.0.1:1","acceptValue":true,"contextSchema":null}`)
	_, err = e.h.UpdateInstances(ed, []hub.UpdateInstance{{ID: out[0].ID, Value: moved}})
	wantCode(t, err, cairn.CodeForbidden)
	_, err = e.h.UpdateInstances(ed, []hub.UpdateInstance{{ID: out[0].ID, Attributes: &[]cairn.AttributeRef{}}})
	wantCode(t, err, cairn.CodeForbidden)
	if got := e.files(); len(got) != 0 {
		t.Errorf("the backend was called: %v", got)
	}

	// The editor may still store instances in a backend an admin
	// registered, and write instances that are no backends.
	if _, err := e.h.CreateInstances(ed, hub.CreateRequest{Instances: []hub.NewInstance{{
		Alias: "v", Namespace: "team-a", TypeRef: cfgType, Value: json.RawMessage(`{}`), Backend: &hub.BackendInput{ID: e.bid},
	}}}); err != nil {
		t.Errorf("editor storing in the registered backend: %v", err)
	}
	if _, err := e.h.UpdateInstances(ed, []hub.UpdateInstance{{ID: plain, Value: json.RawMessage(`{"n":1}`)}}); err != nil {
		t.Errorf("editor updating an instance that is no backend: %v", err)
	}
}
