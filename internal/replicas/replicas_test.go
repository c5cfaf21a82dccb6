package replicas

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/api/rest"
	"github.com/cairn-dev/cairn/api/rest/client"
	"github.com/cairn-dev/cairn/controller/recovery"
	"github.com/cairn-dev/cairn/hub"
	"github.com/cairn-dev/cairn/store/postgres"
	"github.com/cairn-dev/cairn/store/postgres/pgtest"
)

// The workload of the tests: 8 clients, alternating between the replicas,
// 1,000 operations on 18 names (10 flags, 4 leaf/root pairs).
func newWorkload(rs ...*replica) *workload {
	return &workload{replicas: rs, clients: 8, ops: 1000, flagPool: 10, pairPool: 4, seed: uint64(time.Now().UnixNano())}
}

// TestReplicas runs two `cairn serve` processes on one PostgreSQL schema
// and checks that what they acknowledge is what the database holds.
func TestReplicas(t *testing.T) {
	pgtest.DSN(t)
	bin := cairnBinary(t)
	db := newDatabase(t)
	a := startReplica(t, bin, db, "a")
	b := startReplica(t, bin, db, "b")
	typ := registerFlag(t, a, b)

	t.Run("OptimisticConcurrencyAcrossReplicas", func(t *testing.T) { testOptimisticConcurrency(t, a, b) })
	t.Run("WatchSeesOtherReplica", func(t *testing.T) { testWatchOtherReplica(t, a, b) })
	t.Run("Workload", func(t *testing.T) {
		w := newWorkload(a, b)
		t.Logf("workload: %d clients alternating between replicas %s and %s, %d operations, seed %d", w.clients, a.name, b.name, w.ops, w.seed)
		watch := startWatch(t, a)
		w.run(t, typ)
		if t.Failed() {
			t.FailNow()
		}
		c := newChecker(t, db, typ, w)
		c.run()
		checkWorkloadCoverage(t, w, a, b)
		watch.check(t, c, w, b.name)
		t.Logf("throughput: %.0f operations/s, %.0f acknowledged writes/s (2 replicas, %d clients, contended)",
			float64(w.ops)/w.elapsed.Seconds(), float64(w.count(acked))/w.elapsed.Seconds(), w.clients)
	})
	// Last: it stops a replica.
	t.Run("RecoveryLeaseHandedOverOnStop", func(t *testing.T) { testLeaseHandover(t, bin, db, a, b) })
}

// testLeaseHandover: when the replica holding the recovery lease stops
// cleanly, the other takes the lease over at once (not at its next
// recovery pass, 30s later by default), so a restore run right after the
// stop still sees a server serving the store and is refused.
func testLeaseHandover(t *testing.T, bin string, db database, rs ...*replica) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := postgres.Open(ctx, db.schema.DSN, postgres.WithSchema(db.schema.Name), postgres.WithMaxConns(1))
	if err != nil {
		t.Fatalf("open the database: %v", err)
	}
	defer st.Close()
	lease := func() hub.LeaseStatus {
		t.Helper()
		l, err := hub.ReadLease(ctx, st, recovery.LeaseName)
		if err != nil {
			t.Fatalf("read the recovery lease: %v", err)
		}
		return l
	}
	var holder, other *replica
	var was string
	poll(t, 10*time.Second, "a replica holds the recovery lease", func() error {
		l := lease()
		if !l.HeldAt(time.Now()) {
			return fmt.Errorf("lease %+v", l)
		}
		for i, r := range rs {
			if strings.Contains(r.logs.String(), l.Holder) {
				holder, other, was = r, rs[1-i], l.Holder
				return nil
			}
		}
		return fmt.Errorf("no replica logged taking the lease as %s", l.Holder)
	})
	dir := t.TempDir()
	cli := func(args ...string) (string, int) {
		cmd := exec.Command(bin, append(args, "--database", db.dsn(t, "cairn-replicas-cli"))...)
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "XDG_CONFIG_HOME=" + dir, "XDG_DATA_HOME=" + dir}
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatalf("cairn %v: %v", args, err)
		}
		return string(out), cmd.ProcessState.ExitCode()
	}
	file := filepath.Join(dir, "store.bak")
	if out, code := cli("backup", "--to", file); code != 0 {
		t.Fatalf("cairn backup: exit %d\n%s", code, out)
	}
	holder.stop(t)
	stopped := time.Now()
	if out, code := cli("restore", "--force", "--from", file); code != 4 || !strings.Contains(out, "a cairn server is serving this store") {
		t.Errorf("restore right after replica %s (the lease holder) stopped, with %s still serving: exit %d\n%s\nwant 4, a server is serving the store",
			holder.name, other.name, code, out)
	}
	poll(t, hub.LeaseHandover+time.Second, "replica "+other.name+" takes the lease over", func() error {
		if l := lease(); !l.HeldAt(time.Now()) || l.Holder == was || !strings.Contains(other.logs.String(), l.Holder) {
			return fmt.Errorf("lease %+v, %v after %s stopped", l, time.Since(stopped).Round(time.Millisecond), holder.name)
		}
		return nil
	})
}

// checkWorkloadCoverage fails a workload that exercised too little to
// prove anything: every kind of write acknowledged through both replicas.
func checkWorkloadCoverage(t *testing.T, w *workload, rs ...*replica) {
	t.Helper()
	n := map[string]int{}
	for _, o := range w.log {
		if o.Outcome == acked {
			n[string(o.Kind)]++
			n[o.Replica]++
		}
	}
	for _, k := range []kind{opCreate, opCreateRoot, opPut, opPatch, opLock, opUnlock, opDelete} {
		if n[string(k)] == 0 {
			t.Errorf("no %s was acknowledged: the workload proves nothing about it", k)
		}
	}
	for _, r := range rs {
		if n[r.name] == 0 {
			t.Errorf("no write was acknowledged through replica %s", r.name)
		}
	}
	if acks := w.count(acked); acks < w.ops/4 {
		t.Errorf("only %d of %d operations were acknowledged writes", acks, w.ops)
	}
}

// testOptimisticConcurrency: a PUT with the resourceVersion read on A
// before B changed the object is refused by A (409), and a PUT with the
// current one succeeds (issue 4, item 3).
func testOptimisticConcurrency(t *testing.T, a, b *replica) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const ns = "occ"
	obj := rest.Object{APIVersion: "flipt.io/v1alpha1", Kind: "Flag", Metadata: rest.ObjectMeta{Name: "occ"}, Spec: value("v1")}
	if _, err := a.client.Create(ctx, flags, ns, obj); err != nil {
		t.Fatalf("create on a: %v", err)
	}
	read := func(r *replica) rest.Object {
		t.Helper()
		raw, err := r.client.Get(ctx, flags, ns, "occ")
		if err != nil {
			t.Fatalf("GET on %s: %v", r.name, err)
		}
		var o rest.Object
		if err := json.Unmarshal(raw, &o); err != nil {
			t.Fatal(err)
		}
		return o
	}
	onA := read(a)
	if _, err := b.client.Patch(ctx, flags, ns, "occ", client.MergePatch, []byte(`{"spec":{"key":"from-b"}}`), client.WriteOptions{}); err != nil {
		t.Fatalf("PATCH on b: %v", err)
	}
	stale := onA
	stale.Spec, stale.Status = value("stale-from-a"), nil
	_, err := a.client.Replace(ctx, flags, ns, "occ", stale, client.WriteOptions{})
	if !cairn.HasCode(err, cairn.CodeConflict) {
		t.Fatalf("PUT on a with resourceVersion %s read before b's PATCH: %v, want 409 Conflict", onA.Metadata.ResourceVersion, err)
	}
	now := read(a)
	if tokenOf(now.Spec) != "from-b" || now.Metadata.Generation != 2 {
		t.Fatalf("after the refused PUT, a serves %s generation %d, want b's write (from-b, generation 2)", now.Spec, now.Metadata.Generation)
	}
	fresh := now
	fresh.Spec, fresh.Status = value("fresh-from-a"), nil
	out, err := a.client.Replace(ctx, flags, ns, "occ", fresh, client.WriteOptions{})
	if err != nil {
		t.Fatalf("PUT on a with the current resourceVersion %s: %v", now.Metadata.ResourceVersion, err)
	}
	var got rest.Object
	if err := json.Unmarshal(out, &got); err != nil || tokenOf(got.Spec) != "fresh-from-a" || got.Metadata.Generation != 3 {
		t.Fatalf("PUT on a answered %s (%v), want fresh-from-a at generation 3", out, err)
	}
	if onB := read(b); tokenOf(onB.Spec) != "fresh-from-a" || onB.Metadata.ResourceVersion != got.Metadata.ResourceVersion {
		t.Fatalf("b serves %s at resourceVersion %s, want a's write at %s", onB.Spec, onB.Metadata.ResourceVersion, got.Metadata.ResourceVersion)
	}
}

// testWatchOtherReplica: a watch on A sees a create, an update and a delete
// made through B, in order (issue 4, item 3).
func testWatchOtherReplica(t *testing.T, a, b *replica) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const ns = "watch"
	list, err := a.client.List(ctx, flags, ns, client.ListOptions{})
	if err != nil {
		t.Fatalf("list on a: %v", err)
	}
	events, err := a.client.Watch(ctx, flags, ns, client.ListOptions{ResourceVersion: list.Metadata.ResourceVersion})
	if err != nil {
		t.Fatalf("watch on a: %v", err)
	}
	// next waits for the next event and checks it.
	var last int64
	next := func(wantType, wantToken string) {
		t.Helper()
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatalf("the watch on a ended before %s %s", wantType, wantToken)
			}
			var o rest.Object
			if err := json.Unmarshal(ev.Object, &o); err != nil {
				t.Fatalf("watch event %s: %v", ev.Object, err)
			}
			seq, _ := strconv.ParseInt(o.Metadata.ResourceVersion, 10, 64)
			if ev.Type != wantType || (wantToken != "" && tokenOf(o.Spec) != wantToken) || o.Metadata.Name != "w" || seq <= last {
				t.Fatalf("watch on a: %s %s at resourceVersion %d (after %d), want %s %s", ev.Type, ev.Object, seq, last, wantType, wantToken)
			}
			last = seq
		case <-ctx.Done():
			t.Fatalf("the watch on a did not show %s %s within 30s", wantType, wantToken)
		}
	}
	obj := rest.Object{APIVersion: "flipt.io/v1alpha1", Kind: "Flag", Metadata: rest.ObjectMeta{Name: "w"}, Spec: value("created-on-b")}
	if _, err := b.client.Create(ctx, flags, ns, obj); err != nil {
		t.Fatalf("create on b: %v", err)
	}
	next("ADDED", "created-on-b")
	if _, err := b.client.Patch(ctx, flags, ns, "w", client.MergePatch, []byte(`{"spec":{"key":"patched-on-b"}}`), client.WriteOptions{}); err != nil {
		t.Fatalf("PATCH on b: %v", err)
	}
	next("MODIFIED", "patched-on-b")
	if err := b.client.Delete(ctx, flags, ns, "w", client.WriteOptions{}); err != nil {
		t.Fatalf("DELETE on b: %v", err)
	}
	next("DELETED", "")
}

// watchState follows a watch of the workload's namespace and keeps each
// object's last event.
type watchState struct {
	mu       sync.Mutex
	last     map[string]watchEvent
	events   int
	problems []string
	cancel   context.CancelFunc
}

type watchEvent struct {
	typ   string
	seq   int64
	token string
}

func startWatch(t *testing.T, r *replica) *watchState {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	list, err := r.client.List(ctx, flags, namespace, client.ListOptions{})
	if err != nil {
		t.Fatalf("list on %s: %v", r.name, err)
	}
	if len(list.Items) != 0 {
		t.Fatalf("the workload's namespace is not empty: %d objects", len(list.Items))
	}
	events, err := r.client.Watch(ctx, flags, namespace, client.ListOptions{ResourceVersion: list.Metadata.ResourceVersion})
	if err != nil {
		t.Fatalf("watch on %s: %v", r.name, err)
	}
	ws := &watchState{last: map[string]watchEvent{}, cancel: cancel}
	go func() {
		var prev int64
		for ev := range events {
			var o rest.Object
			err := json.Unmarshal(ev.Object, &o)
			seq, serr := strconv.ParseInt(o.Metadata.ResourceVersion, 10, 64)
			ws.mu.Lock()
			ws.events++
			switch {
			case err != nil || serr != nil || ev.Type == "ERROR":
				ws.problems = append(ws.problems, fmt.Sprintf("event %s %s", ev.Type, ev.Object))
			case seq <= prev:
				ws.problems = append(ws.problems, fmt.Sprintf("event %s of %s at resourceVersion %d after %d", ev.Type, o.Metadata.UID, seq, prev))
			default:
				prev = seq
				ws.last[o.Metadata.UID] = watchEvent{typ: ev.Type, seq: seq, token: tokenOf(o.Spec)}
			}
			ws.mu.Unlock()
		}
	}()
	return ws
}

// check waits (with a deadline) until the watch shows every object as the
// database holds it and every deleted one as deleted, and counts the
// objects whose last write went through the other replica.
func (ws *watchState) check(t *testing.T, c *checker, w *workload, other string) {
	t.Helper()
	const check = "a watch on one replica ends at the database's state, writes through the other included"
	writtenVia := map[string]string{}
	for _, o := range w.log {
		if isWrite(o.Kind) {
			writtenVia[o.Token] = o.Replica
		}
	}
	var mismatches []string
	viaOther := 0
	deadline := time.Now().Add(20 * time.Second)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		mismatches, viaOther = mismatches[:0], 0
		ws.mu.Lock()
		for id, in := range c.insts {
			toks := c.tokens[id]
			want := watchEvent{typ: "ADDED|MODIFIED", seq: in.Seq, token: toks[len(toks)-1]}
			got, ok := ws.last[id]
			if !ok || got.typ == "DELETED" || got.seq != want.seq || got.token != want.token {
				mismatches = append(mismatches, fmt.Sprintf("%s: watch shows %+v, database %+v", id, got, want))
			}
			if writtenVia[want.token] == other {
				viaOther++
			}
		}
		for id, cs := range c.changes {
			if _, exists := c.insts[id]; !exists && cs[len(cs)-1].Kind == "DELETED" {
				if got := ws.last[id]; got.typ != "DELETED" {
					mismatches = append(mismatches, fmt.Sprintf("%s: deleted, watch shows %+v", id, got))
				}
			}
		}
		problems := ws.problems
		ws.mu.Unlock()
		for _, p := range problems {
			c.fail(check, "%s", p)
		}
		if len(problems) > 0 {
			return
		}
		if len(mismatches) == 0 {
			break
		}
		if time.Now().After(deadline) {
			sort.Strings(mismatches)
			for _, m := range mismatches {
				c.fail(check, "%s", m)
			}
			return
		}
		<-tick.C
	}
	ws.cancel()
	if viaOther == 0 {
		c.fail(check, "no object's last write went through replica %s: the watch proved nothing about it", other)
	}
	t.Logf("checked: %s (%d events; %d objects and %d deletions; %d objects last written through replica %s)",
		check, ws.events, len(c.insts), len(c.changes)-len(c.insts), viaOther, other)
}
