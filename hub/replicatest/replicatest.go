// Package replicatest checks that several cairn replicas on one database
// keep the hub's guarantees, with the database as the only thing they share.
// A replica is simulated in process: its own hub.New on its own store handle
// (its own connection pool, its own SQLite connections) to the same database
// or file, so nothing but the store can coordinate them.
//
// Every store runs it, SQLite always and PostgreSQL when available:
//
//	func TestReplicas(t *testing.T) {
//		replicatest.Run(t, func(t *testing.T) replicatest.Database { ... })
//	}
package replicatest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/hub"
	"github.com/cairn-dev/cairn/store"
)

// Database is one fresh, empty database.
type Database struct {
	// Kind is the hub's StoreKind for it ("sqlite", "postgresql").
	Kind string
	// Open returns a new handle on the database, closed when t ends.
	Open func(t *testing.T) store.Store
}

// Run runs every replica test as a subtest, each on a new database.
func Run(t *testing.T, newDatabase func(t *testing.T) Database) {
	tests := []struct {
		name string
		fn   func(t *testing.T, db Database)
	}{
		{"Updates/ConsecutiveVersionsNoLostUpdate", testConcurrentUpdates},
		{"Updates/IfSeqOneWinner", testIfSeq},
		{"Updates/AnswerAsStored", testUpdateAnswerAsStored},
		{"Locks/OneOwnerWins", testConcurrentLocks},
		{"Locks/AllOrNothingAcrossReplicas", testConcurrentBatchLocks},
		{"Create/UniqueNameOneWinner", testUniqueName},
		{"Create/AnswerAsStored", testCreateAnswerAsStored},
		{"ChangeLog/PollerSeesEverySeqOnceInOrder", testChangeLogPolling},
		{"Watch/SeesOtherReplica", testWatchOtherReplica},
		{"Cache/ConsistentReadSeesOtherReplica", testConsistentReadOtherReplica},
		{"Backends/ChangeSeenByOtherReplica", testBackendChangeOtherReplica},
		{"RBAC/ConcurrentWritesKeptAndSeen", testRBACReplicas},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.fn(t, newDatabase(t)) })
	}
}

// replicas is the number of hubs each test runs on one database.
const replicas = 3

var typeRef = cairn.TypeRef{Path: "cap.type.replicatest.config", Revision: "0.1.0"}

// startReplicas starts n hubs at once, as replicas starting together do;
// each registers the built-in backend if nobody has yet.
func startReplicas(t *testing.T, db Database, n int, opts ...func(*hub.Config)) []*hub.Hub {
	t.Helper()
	hubs := make([]*hub.Hub, n)
	errs := make([]error, n)
	stores := make([]store.Store, n)
	for i := range stores {
		stores[i] = db.Open(t)
	}
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			cfg := hub.Config{Store: stores[i], StoreKind: db.Kind}
			for _, o := range opts {
				o(&cfg)
			}
			hubs[i], errs[i] = hub.New(context.Background(), cfg)
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("replica %d: hub.New: %v", i, err)
		}
	}
	// One built-in backend, of the store's kind, whoever registered it.
	for i, h := range hubs {
		sb, err := h.GetInstance(ctx(), cairn.BuiltinBackendID, false)
		if err != nil {
			t.Fatalf("replica %d: built-in backend: %v", i, err)
		}
		if want := h.BuiltinTypeRef(); sb.TypeRef != want || want.Path != cairn.StorageTypePrefix+"."+db.Kind {
			t.Fatalf("replica %d: built-in backend type %s, want %s", i, sb.TypeRef, want)
		}
	}
	return hubs
}

func ctx() context.Context { return cairn.WithActor(context.Background(), "replicatest") }

// createOne creates one instance through h and returns its id.
func createOne(t *testing.T, h *hub.Hub, name string, value json.RawMessage) string {
	t.Helper()
	out, err := h.CreateInstances(ctx(), hub.CreateRequest{Instances: []hub.NewInstance{{TypeRef: typeRef, Name: name, Value: value}}})
	if err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
	return out[0].ID
}

// race runs fn(i) for i in [0, n) in goroutines released together.
func race(n int, fn func(i int)) {
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			fn(i)
		})
	}
	close(start)
	wg.Wait()
}

// testConcurrentUpdates: writers on every replica update one instance at
// once. Every acknowledged update gets its own resource version, the
// versions are 1..N+1 without gaps, and each holds the value of exactly the
// update that was told it got it.
func testConcurrentUpdates(t *testing.T, db Database) {
	hubs := startReplicas(t, db, replicas)
	id := createOne(t, hubs[0], "contended", json.RawMessage(`{"writer":-1,"n":0}`))

	const perReplica, updates = 3, 5
	type ack struct{ writer, n, rv int }
	var (
		mu   sync.Mutex
		acks []ack
	)
	errs := make(chan error, replicas*perReplica)
	race(replicas*perReplica, func(w int) {
		h := hubs[w%replicas]
		for n := range updates {
			v := json.RawMessage(fmt.Sprintf(`{"writer":%d,"n":%d}`, w, n))
			out, err := h.UpdateInstances(ctx(), []hub.UpdateInstance{{ID: id, Value: v}})
			if err != nil {
				errs <- fmt.Errorf("writer %d update %d: %w", w, n, err)
				return
			}
			mu.Lock()
			acks = append(acks, ack{w, n, out[0].Latest.ResourceVersion})
			mu.Unlock()
		}
	})
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	total := replicas * perReplica * updates
	if len(acks) != total {
		t.Fatalf("%d updates acknowledged, want %d", len(acks), total)
	}
	reader := hubs[len(hubs)-1]
	rvs, err := reader.ResourceVersions(ctx(), id, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(rvs) != total+1 {
		t.Fatalf("%d resource versions, want %d (1 + one per acknowledged update)", len(rvs), total+1)
	}
	byValue := map[string]int{}
	for i, rv := range rvs {
		if rv.ResourceVersion != i+1 {
			t.Fatalf("resource version %d at position %d: the versions have a gap", rv.ResourceVersion, i+1)
		}
		var v struct{ Writer, N int }
		if err := json.Unmarshal(rv.Value, &v); err != nil {
			t.Fatalf("version %d value %s: %v", rv.ResourceVersion, rv.Value, err)
		}
		key := fmt.Sprint(v.Writer, "/", v.N)
		if prev, dup := byValue[key]; dup {
			t.Fatalf("versions %d and %d hold the same update %s", prev, rv.ResourceVersion, key)
		}
		byValue[key] = rv.ResourceVersion
	}
	for _, a := range acks {
		got, ok := byValue[fmt.Sprint(a.writer, "/", a.n)]
		if !ok {
			t.Fatalf("update %d/%d was acknowledged as version %d but is lost", a.writer, a.n, a.rv)
		}
		if got != a.rv {
			t.Fatalf("update %d/%d was acknowledged as version %d but is stored as version %d", a.writer, a.n, a.rv, got)
		}
	}
	for i, h := range hubs {
		inst, err := h.GetInstance(ctx(), id, false)
		if err != nil || inst.Latest.ResourceVersion != total+1 {
			t.Fatalf("replica %d sees latest %d (%v), want %d", i, inst.Latest.ResourceVersion, err, total+1)
		}
	}
}

// testIfSeq: updates conditional on the same Seq, sent through different
// replicas at once: exactly one wins (REST's metadata.resourceVersion).
func testIfSeq(t *testing.T, db Database) {
	hubs := startReplicas(t, db, replicas)
	id := createOne(t, hubs[0], "optimistic", json.RawMessage(`{"n":0}`))
	inst, err := hubs[1].GetInstance(ctx(), id, false)
	if err != nil {
		t.Fatal(err)
	}
	const writers = 3 * replicas
	results := make([]error, writers)
	race(writers, func(w int) {
		_, results[w] = hubs[w%replicas].UpdateInstances(ctx(), []hub.UpdateInstance{{
			ID: id, IfSeq: inst.Seq, Value: json.RawMessage(fmt.Sprintf(`{"n":%d}`, w+1)),
		}})
	})
	won := -1
	for w, err := range results {
		switch {
		case err == nil && won >= 0:
			t.Fatalf("writers %d and %d both won the update conditional on Seq %d", won, w, inst.Seq)
		case err == nil:
			won = w
		case !cairn.HasCode(err, cairn.CodeConflict):
			t.Fatalf("writer %d: %v, want Conflict", w, err)
		}
	}
	if won < 0 {
		t.Fatal("no conditional update won")
	}
	after, err := hubs[2].GetInstance(ctx(), id, true)
	if err != nil {
		t.Fatal(err)
	}
	if after.Latest.ResourceVersion != 2 || string(after.Latest.Value) != fmt.Sprintf(`{"n":%d}`, won+1) {
		t.Fatalf("after the race: version %d value %s, want version 2 with the winner's value", after.Latest.ResourceVersion, after.Latest.Value)
	}
}

// testConcurrentLocks: owners on every replica lock one instance at once:
// exactly one succeeds, the others are refused as Locked.
func testConcurrentLocks(t *testing.T, db Database) {
	hubs := startReplicas(t, db, replicas)
	id := createOne(t, hubs[0], "lockme", json.RawMessage(`{}`))
	const owners = 4 * replicas
	results := make([]error, owners)
	race(owners, func(o int) {
		results[o] = hubs[o%replicas].LockInstances(ctx(), []string{id}, fmt.Sprint("owner-", o))
	})
	var winners []string
	for o, err := range results {
		switch {
		case err == nil:
			winners = append(winners, fmt.Sprint("owner-", o))
		case !cairn.HasCode(err, cairn.CodeLocked):
			t.Fatalf("owner-%d: %v, want Locked", o, err)
		}
	}
	if len(winners) != 1 {
		t.Fatalf("winners = %q, want exactly one", winners)
	}
	for i, h := range hubs {
		inst, err := h.GetInstance(ctx(), id, false)
		if err != nil || inst.LockedBy != winners[0] {
			t.Fatalf("replica %d sees the lock held by %q (%v), want %q", i, inst.LockedBy, err, winners[0])
		}
	}
	loser := "owner-0"
	if winners[0] == loser {
		loser = "owner-1"
	}
	if err := hubs[1].UnlockInstances(ctx(), []string{id}, loser); !cairn.HasCode(err, cairn.CodeLocked) {
		t.Fatalf("unlock by %s: %v, want Locked", loser, err)
	}
	if err := hubs[2].UnlockInstances(ctx(), []string{id}, winners[0]); err != nil {
		t.Fatalf("unlock by the winner: %v", err)
	}
}

// testConcurrentBatchLocks: owners lock the same two instances, listed in
// opposite orders, through different replicas: one owner ends up with both,
// nobody with one of them, and nothing deadlocks.
func testConcurrentBatchLocks(t *testing.T, db Database) {
	hubs := startReplicas(t, db, replicas)
	a := createOne(t, hubs[0], "a", json.RawMessage(`{}`))
	b := createOne(t, hubs[1], "b", json.RawMessage(`{}`))
	const owners = 2 * replicas
	results := make([]error, owners)
	race(owners, func(o int) {
		ids := []string{a, b}
		if o%2 == 1 {
			ids = []string{b, a}
		}
		results[o] = hubs[o%replicas].LockInstances(ctx(), ids, fmt.Sprint("owner-", o))
	})
	var winners []string
	for o, err := range results {
		switch {
		case err == nil:
			winners = append(winners, fmt.Sprint("owner-", o))
		case !cairn.HasCode(err, cairn.CodeLocked):
			t.Fatalf("owner-%d: %v, want Locked", o, err)
		}
	}
	if len(winners) != 1 {
		t.Fatalf("winners = %q, want exactly one", winners)
	}
	for _, id := range []string{a, b} {
		inst, err := hubs[0].GetInstance(ctx(), id, false)
		if err != nil || inst.LockedBy != winners[0] {
			t.Fatalf("%s locked by %q (%v), want %q", id, inst.LockedBy, err, winners[0])
		}
	}
}

// testUniqueName: creators on every replica create the same (type,
// namespace, name) at once: exactly one succeeds, the others get
// AlreadyExists, and one instance exists with the winner's value.
func testUniqueName(t *testing.T, db Database) {
	hubs := startReplicas(t, db, replicas)
	const creators = 4 * replicas
	results := make([]error, creators)
	race(creators, func(c int) {
		_, results[c] = hubs[c%replicas].CreateInstances(ctx(), hub.CreateRequest{Instances: []hub.NewInstance{{
			TypeRef: typeRef, Namespace: "team", Name: "the-one", Value: json.RawMessage(fmt.Sprintf(`{"creator":%d}`, c)),
		}}})
	})
	won := -1
	for c, err := range results {
		switch {
		case err == nil && won >= 0:
			t.Fatalf("creators %d and %d both created team/the-one", won, c)
		case err == nil:
			won = c
		case !cairn.HasCode(err, cairn.CodeAlreadyExists):
			t.Fatalf("creator %d: %v, want AlreadyExists", c, err)
		}
	}
	if won < 0 {
		t.Fatal("no creator won")
	}
	list, err := hubs[1].ListInstances(ctx(), store.InstanceFilter{TypePath: typeRef.Path, Namespace: "team", Name: "the-one"}, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || string(list[0].Latest.Value) != fmt.Sprintf(`{"creator":%d}`, won) {
		t.Fatalf("instances named team/the-one = %d (%v), want one with the winner's value", len(list), list)
	}
	// The losers left nothing behind: of the instances outside the hub's
	// own namespace, the built-in backend is used by the winner only.
	sb, err := hubs[2].GetInstance(ctx(), cairn.BuiltinBackendID, false)
	if err != nil {
		t.Fatal(err)
	}
	usersOf, err := hubs[2].GetInstances(ctx(), sb.UsedBy)
	if err != nil {
		t.Fatal(err)
	}
	var users []string
	for _, u := range usersOf {
		if u.Namespace != hub.SystemNamespace {
			users = append(users, u.ID)
		}
	}
	if !slices.Equal(users, []string{list[0].ID}) {
		t.Fatalf("built-in backend used by %q, want only the winner %s", users, list[0].ID)
	}
}

// testChangeLogPolling: while writers on every replica create and update
// instances, a poller on a handle of its own reads the change log by
// position, as a replica's watchers do. It must see every change exactly
// once and in Seq order: a change that became visible after a change with
// a higher Seq would be skipped, since the poller has already moved past
// it. LastSeq, read in between, never goes backwards.
func testChangeLogPolling(t *testing.T, db Database) {
	hubs := startReplicas(t, db, replicas)
	poller := db.Open(t)
	start, err := poller.LastSeq(context.Background())
	if err != nil {
		t.Fatal(err)
	}

	const writers, rounds = 2 * replicas, 12
	done := make(chan struct{})
	type polled struct {
		seen     []int64
		err      error
		lastSeqs int
	}
	result := make(chan polled, 1)
	go func() {
		var p polled
		after, last := start, start
		poll := func() bool {
			cs, err := poller.Changes(context.Background(), after, 7) // small pages: many reads mid-write
			if err != nil {
				p.err = err
				return false
			}
			for _, c := range cs {
				if c.Seq <= after {
					p.err = fmt.Errorf("change %d returned after position %d", c.Seq, after)
					return false
				}
				p.seen = append(p.seen, c.Seq)
				after = c.Seq
			}
			seq, err := poller.LastSeq(context.Background())
			if err != nil {
				p.err = err
				return false
			}
			if seq < last {
				p.err = fmt.Errorf("LastSeq went backwards: %d after %d", seq, last)
				return false
			}
			last = seq
			p.lastSeqs++
			return true
		}
		for {
			select {
			case <-done:
				// Drain what the writers committed last.
				for p.err == nil {
					n := len(p.seen)
					if !poll() || len(p.seen) == n {
						break
					}
				}
				result <- p
				return
			default:
				if !poll() {
					result <- p
					return
				}
			}
		}
	}()

	errs := make(chan error, writers)
	race(writers, func(w int) {
		h := hubs[w%replicas]
		id := ""
		for r := range rounds {
			var err error
			if r%3 == 0 {
				var out []hub.Created
				out, err = h.CreateInstances(ctx(), hub.CreateRequest{Instances: []hub.NewInstance{{
					TypeRef: typeRef, Name: fmt.Sprintf("w%d-r%d", w, r), Value: json.RawMessage(`{}`),
				}}})
				if err == nil {
					id = out[0].ID
				}
			} else {
				_, err = h.UpdateInstances(ctx(), []hub.UpdateInstance{{ID: id, Value: json.RawMessage(fmt.Sprintf(`{"r":%d}`, r))}})
			}
			if err != nil {
				errs <- fmt.Errorf("writer %d round %d: %w", w, r, err)
				return
			}
		}
	})
	close(done)
	p := <-result
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if p.err != nil {
		t.Fatalf("poller: %v", p.err)
	}

	all, err := poller.Changes(context.Background(), start, 100_000)
	if err != nil {
		t.Fatal(err)
	}
	// One change per write transaction: each create is one ADDED (of the
	// instance; the built-in backend's new user is not a change of it) and
	// each update one MODIFIED.
	if want := writers * rounds; len(all) != want {
		t.Fatalf("%d changes in the log, want %d (one per write)", len(all), want)
	}
	want := make([]int64, len(all))
	for i, c := range all {
		want[i] = c.Seq
	}
	if !slices.Equal(p.seen, want) {
		missed := slices.DeleteFunc(slices.Clone(want), func(s int64) bool { return slices.Contains(p.seen, s) })
		t.Fatalf("the poller saw %d changes, the log has %d; missed %v (seen %v)", len(p.seen), len(want), missed, p.seen)
	}
	if p.lastSeqs < 2 {
		t.Fatalf("the poller read the log %d times: it did not poll while writers wrote", p.lastSeqs)
	}
}

// testWatchOtherReplica: a watch on one replica sees a change made through
// another, found by polling the shared change log.
func testWatchOtherReplica(t *testing.T, db Database) {
	hubs := startReplicas(t, db, 2, func(c *hub.Config) { c.PollInterval = 10 * time.Millisecond })
	c := watchChange(t, hubs[1], "the instance created on replica 0", func() string {
		return createOne(t, hubs[0], "watched", json.RawMessage(`{}`))
	})
	if c.Kind != store.Added || c.Name != "watched" {
		t.Fatalf("change = %+v, want ADDED of watched", c)
	}
}

// watchChange watches h from its position now while act runs, and returns
// the first change of the instance whose id act returns; it fails when the
// watch ends first, or sees no such change within 30 s, or ends with an
// error once cancelled. what names the change in that failure.
func watchChange(t *testing.T, h *hub.Hub, what string, act func() string) store.Change {
	t.Helper()
	from, err := h.LastSeq(ctx())
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx())
	defer cancel()
	seen := make(chan store.Change, 16)
	watchErr := make(chan error, 1)
	go func() {
		watchErr <- h.Watch(wctx, from, func(c store.Change) error {
			select {
			case seen <- c:
				return nil
			case <-wctx.Done():
				return wctx.Err()
			}
		})
	}()
	id := act()
	timeout := time.NewTimer(30 * time.Second)
	defer timeout.Stop()
	for {
		select {
		case c := <-seen:
			if c.InstanceID != id {
				continue
			}
			cancel()
			if err := <-watchErr; err != nil && !errors.Is(err, context.Canceled) {
				t.Fatalf("Watch: %v", err)
			}
			return c
		case err := <-watchErr:
			t.Fatalf("Watch ended before %s: %v", what, err)
		case <-timeout.C:
			t.Fatalf("the watch did not see %s within 30s", what)
		}
	}
}

// testConsistentReadOtherReplica: every replica reads from its watch cache
// (the default), warmed before the writes. A create, update, relabel, lock
// and delete through one replica is in the very next read through another:
// no sleep, no retry, so a cache that answered before catching up with the
// change log fails it.
func testConsistentReadOtherReplica(t *testing.T, db Database) {
	hubs := startReplicas(t, db, 2)
	w, r := hubs[0], hubs[1]
	// Warm r's cache, so the reads below are served from memory.
	if _, err := r.ListInstances(ctx(), store.InstanceFilter{TypePath: typeRef.Path}, true); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		name := fmt.Sprintf("c%02d", i)
		value := json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))
		id := createOne(t, w, name, value)
		got, err := r.GetInstanceByName(ctx(), typeRef.Path, "default", name, true)
		if err != nil {
			t.Fatalf("read %s through the other replica right after its create: %v", name, err)
		}
		if got.ID != id || string(got.Latest.Value) != string(value) {
			t.Fatalf("other replica read %s/%s value %s, want %s/%s", got.ID, got.Name, got.Latest.Value, id, value)
		}
		list, err := r.ListInstances(ctx(), store.InstanceFilter{TypePath: typeRef.Path}, true)
		if err != nil {
			t.Fatal(err)
		}
		if len(list) != i+1 {
			t.Fatalf("other replica lists %d instances after %d creates", len(list), i+1)
		}

		updated := json.RawMessage(fmt.Sprintf(`{"n":%d,"updated":true}`, i))
		if _, err := w.UpdateInstances(ctx(), []hub.UpdateInstance{{ID: id, Value: updated, Labels: map[string]string{"step": "updated"}}}); err != nil {
			t.Fatal(err)
		}
		got, err = r.GetInstance(ctx(), id, true)
		if err != nil {
			t.Fatal(err)
		}
		if got.Latest.ResourceVersion != 2 || string(got.Latest.Value) != string(updated) || got.Labels["step"] != "updated" {
			t.Fatalf("other replica read version %d value %s labels %v right after the update, want 2 %s step=updated",
				got.Latest.ResourceVersion, got.Latest.Value, got.Labels, updated)
		}
		if err := w.LockInstances(ctx(), []string{id}, "owner-a"); err != nil {
			t.Fatal(err)
		}
		if got, err = r.GetInstance(ctx(), id, false); err != nil || got.LockedBy != "owner-a" {
			t.Fatalf("other replica read lockedBy %q (err %v) right after the lock, want owner-a", got.LockedBy, err)
		}
		if err := w.UnlockInstances(ctx(), []string{id}, "owner-a"); err != nil {
			t.Fatal(err)
		}
		if i%2 == 1 {
			if err := w.DeleteInstance(ctx(), id, ""); err != nil {
				t.Fatal(err)
			}
			if _, err := r.GetInstance(ctx(), id, false); !cairn.HasCode(err, cairn.CodeNotFound) {
				t.Fatalf("other replica read a deleted instance: err %v, want not found", err)
			}
			if _, err := r.GetInstanceByName(ctx(), typeRef.Path, "default", name, false); !cairn.HasCode(err, cairn.CodeNotFound) {
				t.Fatalf("other replica read a deleted instance by name: err %v, want not found", err)
			}
			createOne(t, w, name, value) // recreated under the same name
		}
	}
}
