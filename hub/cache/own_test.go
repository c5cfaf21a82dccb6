package cache_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"reflect"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/hub"
	"github.com/cairn-dev/cairn/hub/cache"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/sqlite"
)

// countingStore counts the instance rows the cache reads back.
type countingStore struct {
	store.Store
	rows atomic.Int64
}

func (s *countingStore) GetInstances(ctx context.Context, ids []string) ([]cairn.Instance, error) {
	s.rows.Add(int64(len(ids)))
	return s.Store.GetInstances(ctx, ids)
}

// ownFixture is a cache synced to a SQLite file, the hub whose commits it
// is handed ("this process"), and a second store and hub on the same file
// ("another process"), whose commits it only learns from the log.
type ownFixture struct {
	src     *countingStore
	c       *cache.Cache
	mine    *hub.Hub
	other   *hub.Hub
	byName  map[string]cairn.Instance
	storeRd store.Store
}

func newOwnFixture(t *testing.T) *ownFixture {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "own.db")
	st, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	mine, err := hub.New(ctx, hub.Config{Store: st, NoReadCache: true})
	if err != nil {
		t.Fatal(err)
	}
	var ins []hub.NewInstance
	for _, n := range []string{"x", "y", "z"} {
		ins = append(ins, hub.NewInstance{Alias: n, TypeRef: cairn.TypeRef{Path: "cap.type.a", Revision: "0.1.0"},
			Namespace: "default", Name: n, Labels: map[string]string{"v": "0"}, Value: json.RawMessage(`{"v":0}`)})
	}
	if _, err := mine.CreateInstances(ctx, hub.CreateRequest{Instances: ins, UsesRelations: []hub.UsesRelation{{From: "x", To: "z"}}}); err != nil {
		t.Fatal(err)
	}
	st2, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st2.Close() })
	other, err := hub.New(ctx, hub.Config{Store: st2, NoReadCache: true})
	if err != nil {
		t.Fatal(err)
	}
	f := &ownFixture{src: &countingStore{Store: st}, mine: mine, other: other, byName: map[string]cairn.Instance{}, storeRd: st}
	f.c = cache.New(f.src)
	if err := f.c.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	all, err := st.ListInstances(ctx, store.InstanceFilter{TypePath: "cap.type.a"})
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range all {
		f.byName[in.Name] = in
	}
	f.src.rows.Store(0)
	return f
}

// update writes a new value and label to the instance named name through
// h; through f.mine the cache is handed the commit, as the hub hands it
// its own.
func (f *ownFixture) update(t *testing.T, h *hub.Hub, name, v string) cairn.Instance {
	t.Helper()
	out, err := h.UpdateInstances(context.Background(), []hub.UpdateInstance{{ID: f.byName[name].ID,
		Value: json.RawMessage(`{"v":"` + v + `"}`), Labels: map[string]string{"v": v}, ManagedFields: json.RawMessage(`[{"manager":"` + v + `"}]`)}})
	if err != nil {
		t.Fatal(err)
	}
	if h == f.mine {
		f.c.Committed(out)
	}
	return out[0]
}

// create creates req's instances through h and returns them; through
// f.mine the cache is handed them, as the hub hands it its own creates.
func (f *ownFixture) create(t *testing.T, h *hub.Hub, req hub.CreateRequest) []cairn.Instance {
	t.Helper()
	out, err := h.CreateInstances(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	insts := make([]cairn.Instance, len(out))
	for i, c := range out {
		insts[i] = c.Instance
		f.byName[c.Instance.Name] = c.Instance
	}
	if h == f.mine {
		f.c.Created(insts)
	}
	return insts
}

// check asserts that a consistent read of each named instance from the
// cache is what the store holds now, value and relations included.
func (f *ownFixture) check(t *testing.T, names ...string) {
	t.Helper()
	ctx := context.Background()
	for _, n := range names {
		id := f.byName[n].ID
		got, ok, err := f.c.Get(ctx, id, true)
		if err != nil || !ok {
			t.Fatalf("%s: ok %v, err %v", n, ok, err)
		}
		want, err := f.storeRd.GetInstances(ctx, []string{id})
		if err != nil {
			t.Fatal(err)
		}
		v, err := f.storeRd.Value(ctx, id, want[0].Latest.ResourceVersion)
		if err != nil {
			t.Fatal(err)
		}
		want[0].Latest.Value = v
		if !reflect.DeepEqual(got, want[0]) {
			t.Fatalf("%s: the cache has\n%+v\nthe store\n%+v", n, got, want[0])
		}
	}
}

// TestOwnCommitsNotReadBack: instances handed by own commits are applied
// without reading their rows, and are what the store holds.
func TestOwnCommitsNotReadBack(t *testing.T) {
	f := newOwnFixture(t)
	f.update(t, f.mine, "x", "1")
	f.update(t, f.mine, "y", "1")
	f.update(t, f.mine, "x", "2")
	if err := f.c.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := f.src.rows.Load(); n != 0 {
		t.Fatalf("the cache read %d instance rows back, want none: every change was handed", n)
	}
	f.check(t, "x", "y", "z")
}

// TestOwnCommitsWithOthers: another process's write between own commits
// is read from the log and applied in its place: a write of another
// instance in between is not skipped, and an instance another process
// wrote after (or before) an own commit is read back, never taken from the
// own commit.
func TestOwnCommitsWithOthers(t *testing.T) {
	ctx := context.Background()
	f := newOwnFixture(t)
	f.update(t, f.mine, "x", "1")
	f.update(t, f.other, "y", "other") // between two own commits
	f.update(t, f.mine, "x", "2")
	f.update(t, f.mine, "z", "1")
	f.update(t, f.other, "z", "other") // after an own commit of the same instance
	f.update(t, f.other, "x", "other") // before an own commit of the same instance
	f.update(t, f.mine, "x", "3")
	f.check(t, "x", "y", "z")
	if n := f.src.rows.Load(); n != 3 {
		t.Fatalf("the cache read %d instance rows back, want 3 (y, z and x, which the other process changed)", n)
	}
	y, _, _ := f.c.Get(ctx, f.byName["y"].ID, true)
	if string(y.Latest.Value) != `{"v":"other"}` {
		t.Fatalf("y has %s, want the other process's write", y.Latest.Value)
	}
}

// TestOwnCommitNotAppliedEarly: a handed instance is not seen before the
// cache applies the log up to its change, even when other changes come
// first in the log.
func TestOwnCommitNotAppliedEarly(t *testing.T) {
	ctx := context.Background()
	f := newOwnFixture(t)
	before := f.c.Applied()
	f.update(t, f.other, "y", "other")
	x := f.update(t, f.mine, "x", "1")
	got, ok, err := f.c.GetNotOlderThan(ctx, x.ID, before, true)
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	if got.Seq != f.byName["x"].Seq || string(got.Latest.Value) != `{"v":0}` {
		t.Fatalf("at position %d the cache has x at %d (%s): an own commit at %d applied ahead of the log", before, got.Seq, got.Latest.Value, x.Seq)
	}
	f.check(t, "x", "y")
}

// BenchmarkApplyUpdate: the cache applying one committed update of an
// instance, reading the row back ("read", as before) or taking the
// instance the commit handed it ("own"); the update itself is not timed.
func BenchmarkApplyUpdate(b *testing.B) {
	for _, mode := range []string{"read", "own"} {
		b.Run(mode, func(b *testing.B) {
			st, h := fixture(b, 100)
			c := cache.New(st)
			ctx := context.Background()
			if err := c.Sync(ctx); err != nil {
				b.Fatal(err)
			}
			all, err := st.ListInstances(ctx, store.InstanceFilter{TypePath: "cap.type.*"})
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				out, err := h.UpdateInstances(ctx, []hub.UpdateInstance{{ID: all[i%len(all)].ID, Value: json.RawMessage(`{"n":` + strconv.Itoa(i) + `}`)}})
				if err != nil {
					b.Fatal(err)
				}
				if mode == "own" {
					c.Committed(out)
				}
				b.StartTimer()
				if err := c.Sync(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestOwnCreatesNotReadBack: instances handed by own creates (complete,
// relations included) are applied without reading their rows, also when
// an own update of one follows in the same stretch of the log, and a
// consistent read gives what the store holds; one another process created
// in between is read from the log.
func TestOwnCreatesNotReadBack(t *testing.T) {
	ctx := context.Background()
	f := newOwnFixture(t)
	create := func(h *hub.Hub, req hub.CreateRequest) { f.create(t, h, req) }
	ref := cairn.TypeRef{Path: "cap.type.a", Revision: "0.1.0"}
	create(f.mine, hub.CreateRequest{Instances: []hub.NewInstance{{TypeRef: ref, Name: "n1", Labels: map[string]string{"k": "v"}, Value: json.RawMessage(`{"v":1}`)}}})
	create(f.mine, hub.CreateRequest{Instances: []hub.NewInstance{
		{Alias: "a", TypeRef: ref, Name: "n2", Value: json.RawMessage(`{"v":2}`)},
		{Alias: "b", TypeRef: ref, Name: "n3", Value: json.RawMessage(`{"v":3}`)},
	}, UsesRelations: []hub.UsesRelation{{From: "a", To: "b"}, {From: "b", To: f.byName["z"].ID}}})
	f.update(t, f.mine, "n1", "2")
	if err := f.c.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if n := f.src.rows.Load(); n != 0 {
		t.Fatalf("the cache read %d instance rows back, want none: every change was handed", n)
	}
	f.check(t, "n1", "n2", "n3", "x", "y", "z")

	create(f.other, hub.CreateRequest{Instances: []hub.NewInstance{{TypeRef: ref, Name: "o1", Value: json.RawMessage(`{"v":4}`)}}})
	create(f.mine, hub.CreateRequest{Instances: []hub.NewInstance{{TypeRef: ref, Name: "n4", Value: json.RawMessage(`{"v":5}`)}}})
	f.check(t, "o1", "n4")
	if n := f.src.rows.Load(); n != 1 {
		t.Fatalf("the cache read %d instance rows back, want 1 (the other process's create)", n)
	}
}

// TestOwnCreatesBurstApplied: a burst of own creates with no read between
// them is applied in the background as it is handed, so the first read
// after it has not the whole burst to apply.
func TestOwnCreatesBurstApplied(t *testing.T) {
	f := newOwnFixture(t)
	ref := cairn.TypeRef{Path: "cap.type.a", Revision: "0.1.0"}
	start := f.c.Applied()
	var half, last cairn.Instance
	for b := 0; b < 24; b++ { // 1,200 creates: more than the cache keeps handed
		var ins []hub.NewInstance
		for i := 0; i < 50; i++ {
			n := "burst-" + strconv.Itoa(b*50+i)
			ins = append(ins, hub.NewInstance{Alias: n, TypeRef: ref, Name: n, Value: json.RawMessage(`{"v":` + strconv.Itoa(i) + `}`)})
		}
		insts := f.create(t, f.mine, hub.CreateRequest{Instances: ins})
		last = insts[len(insts)-1]
		if b == 11 {
			half = last
		}
	}
	// No read has asked for it: the cache applies the first half of the
	// burst on its own (it keeps at most 1,024 handed instances).
	deadline := time.Now().Add(10 * time.Second)
	for f.c.Applied() < half.Seq {
		if time.Now().After(deadline) {
			t.Fatalf("with no read the cache applied the log from %d to %d, want past %d: nothing drains what creates hand it", start, f.c.Applied(), half.Seq)
		}
		time.Sleep(10 * time.Millisecond)
	}
	f.check(t, "burst-0", "burst-700", last.Name, "x")
}

// BenchmarkApplyOwnCreates: the cache applying 400 creates of this process
// that it was handed (Created), as under a burst of REST creates: no row
// is read back, the handed instances are taken for their changes (takeOwn)
// and indexed. The creates themselves are not timed; allocations per op
// are the figure that does not move with the machine's load.
func BenchmarkApplyOwnCreates(b *testing.B) {
	st, h := fixture(b, 0)
	c := cache.New(st)
	ctx := context.Background()
	if err := c.Sync(ctx); err != nil {
		b.Fatal(err)
	}
	ref := cairn.TypeRef{Path: "cap.type.a", Revision: "0.1.0"}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		ins := make([]hub.NewInstance, 400)
		for j := range ins {
			n := "c" + strconv.Itoa(i*len(ins)+j)
			ins[j] = hub.NewInstance{Alias: n, TypeRef: ref, Namespace: "default", Name: n,
				Labels: map[string]string{"team": "t1"}, Value: json.RawMessage(`{"v":1}`)}
		}
		out, err := h.CreateInstances(ctx, hub.CreateRequest{Instances: ins})
		if err != nil {
			b.Fatal(err)
		}
		insts := make([]cairn.Instance, len(out))
		for j, o := range out {
			insts[j] = o.Instance
		}
		c.Created(insts)
		b.StartTimer()
		if err := c.Sync(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
