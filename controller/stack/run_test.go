package stack_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	stackctl "github.com/cairn-dev/cairn/controller/stack"
	"github.com/cairn-dev/cairn/hub"
)

// TestRunLeaseAndWatch runs two controllers on one hub, as two replicas
// would: exactly one leads; it reconciles on changes of the installation
// and of a child (the watch); when it stops, it releases the lease and the
// other takes over at once.
func TestRunLeaseAndWatch(t *testing.T) {
	e := newEnv(t)
	entry := e.addStack("testdata/db")
	inst := e.install(entry, "orders", nil, `{"engine":"mysql"}`)

	start := func(id string) (*stackctl.Controller, context.CancelFunc, chan struct{}) {
		c := stackctl.New(stackctl.Config{Hub: e.h, Identity: id, LeaseDuration: 600 * time.Millisecond, Resync: time.Hour})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			if err := c.Run(ctx); err != nil {
				t.Errorf("%s: Run: %v", id, err)
			}
		}()
		return c, cancel, done
	}
	a, stopA, doneA := start("ctl-a")
	b, stopB, doneB := start("ctl-b")
	defer func() { stopA(); stopB(); <-doneA; <-doneB }()

	waitFor := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(15 * time.Second)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: timed out", what)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	synced := func(engine string) func() bool {
		return func() bool {
			st := e.status(inst.ID)
			if cond(st, "Synced").Status != "True" {
				return false
			}
			for _, k := range e.children(inst) {
				if k.Name == "orders-main" {
					return strings.Contains(string(k.Latest.Value), engine)
				}
			}
			return false
		}
	}
	waitFor("first reconcile", synced("mysql"))
	if a.Leader() == b.Leader() {
		t.Fatalf("leaders: a %v, b %v; want exactly one", a.Leader(), b.Leader())
	}
	leader, other, stopLeader, doneLeader := a, b, stopA, doneA
	if b.Leader() {
		leader, other, stopLeader, doneLeader = b, a, stopB, doneB
	}

	// A child's status change triggers the installation (the watch).
	var db string
	for _, k := range e.children(inst) {
		if k.Name == "orders-main" {
			db = k.ID
		}
	}
	if _, err := e.h.UpdateStatus(e.ctx, db, json.RawMessage(`{"conditions":[{"type":"Ready","status":"True"}]}`), 0); err != nil {
		t.Fatal(err)
	}
	waitFor("Ready after the child's status", func() bool { return cond(e.status(inst.ID), "Ready").Status == "True" })

	// The leader stops and releases the lease: the other takes over and
	// applies the next change.
	stopLeader()
	<-doneLeader
	if _, err := e.h.UpdateInstances(e.ctx, []hub.UpdateInstance{{ID: inst.ID, Value: json.RawMessage(`{"engine":"postgres"}`)}}); err != nil {
		t.Fatal(err)
	}
	waitFor("the other replica applies the change", synced("postgres"))
	if !other.Leader() || leader.Leader() {
		t.Fatalf("after the stop: old leader %v, other %v", leader.Leader(), other.Leader())
	}
	kid, err := e.h.GetInstance(e.ctx, db, false)
	if err != nil {
		t.Fatal(err)
	}
	if kid.Latest.CreatedBy != other.Identity() {
		t.Errorf("the change was written by %q, want %q", kid.Latest.CreatedBy, other.Identity())
	}
}

// TestRunNewStackVersion: adding a stack version to the catalog moves the
// unpinned installations of its kind onto it at once (the watch), rather
// than at the next resync, and a child the new version no longer renders
// is deleted.
func TestRunNewStackVersion(t *testing.T) {
	e := newEnv(t)
	inst := e.install(e.addStack("testdata/db"), "orders", nil, `{"engine":"mysql"}`)
	c := stackctl.New(stackctl.Config{Hub: e.h, Identity: "ctl", LeaseDuration: 600 * time.Millisecond, Resync: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = c.Run(ctx) }()
	defer func() { cancel(); <-done }()
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(15 * time.Second)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: timed out; status %+v", what, e.status(inst.ID))
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitFor("first reconcile", func() bool { return len(e.children(inst)) == 2 })

	files := map[string]string{}
	for _, name := range []string{"stack.yaml", "resources/kustomization.yaml", "resources/kustomizeconfig.yaml"} {
		b, err := os.ReadFile(filepath.Join("testdata/db", name))
		if err != nil {
			t.Fatal(err)
		}
		files[name] = string(b)
	}
	files["stack.yaml"] = strings.Replace(files["stack.yaml"], "version: 0.1.0", "version: 0.2.0", 1)
	// 0.2.0 has no Bucket.
	files["resources/db.yaml"] = "apiVersion: example.org/v1\nkind: Database\nmetadata:\n  name: main\nspec:\n  engine: $(ENGINE)\n"
	e.addStack(writeStack(t, files))
	waitFor("the installation on 0.2.0 without its Bucket", func() bool {
		st := e.status(inst.ID)
		return st.Stack != nil && st.Stack.Version == "0.2.0" && len(e.children(inst)) == 1
	})
}
