package hub_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/hub"
	"github.com/cairn-dev/cairn/store"
)

// heldLoad is a store whose full list of instances (the read cache's load)
// waits, once armed, until released; it counts instance reads by id.
type heldLoad struct {
	store.Store
	armed    atomic.Bool
	entered  chan struct{}
	release  chan struct{}
	once     sync.Once
	getCalls atomic.Int64
}

func (s *heldLoad) ListInstances(ctx context.Context, f store.InstanceFilter) ([]cairn.Instance, error) {
	if s.armed.Load() && f.TypePath == "" && len(f.Labels) == 0 {
		s.once.Do(func() { close(s.entered) })
		<-s.release
	}
	return s.Store.ListInstances(ctx, f)
}

func (s *heldLoad) GetInstances(ctx context.Context, ids []string) ([]cairn.Instance, error) {
	s.getCalls.Add(1)
	return s.Store.GetInstances(ctx, ids)
}

// While the read cache loads, reads are answered from the store at once
// (and consistently: a write made during the load is read back); once it
// has loaded, reads come from it.
func TestWarmReadCacheAnswersFromTheStoreMeanwhile(t *testing.T) {
	held := &heldLoad{entered: make(chan struct{}), release: make(chan struct{})}
	e := newEnv(t, func(c *hub.Config) { held.Store = c.Store; c.Store = held })
	e.registerType(cfgType.Path, cfgType.Revision, cfgSchema)
	first := e.create(hub.NewInstance{TypeRef: cfgType, Name: "first", Value: []byte(`{"host":"a"}`)})

	held.armed.Store(true)
	warmed := make(chan error, 1)
	var loaded int
	go func() {
		n, err := e.h.WarmReadCache(e.ctx)
		loaded = n
		warmed <- err
	}()
	select {
	case <-held.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("WarmReadCache did not start loading")
	}

	// The load is held: these reads would wait for it if they went
	// through the cache.
	done := make(chan struct{})
	go func() {
		defer close(done)
		if got := e.get(first); string(got.Latest.Value) != `{"host":"a"}` {
			t.Errorf("value during the load = %s", got.Latest.Value)
		}
		second := e.create(hub.NewInstance{TypeRef: cfgType, Name: "second", Value: []byte(`{"host":"b"}`)})
		if got := e.get(second); got.Name != "second" {
			t.Errorf("instance written during the load read back as %q", got.Name)
		}
		list, err := e.h.ListInstances(e.ctx, store.InstanceFilter{TypePath: cfgType.Path}, false)
		if err != nil || len(list) != 2 {
			t.Errorf("list during the load: %d instances, err %v; want 2", len(list), err)
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		close(held.release)
		t.Fatal("reads waited for the read cache's load")
	}

	close(held.release)
	if err := <-warmed; err != nil {
		t.Fatalf("WarmReadCache: %v", err)
	}
	if loaded < 2 {
		t.Errorf("WarmReadCache loaded %d instances, want the 2 created and the built-in ones", loaded)
	}
	list, err := e.h.ListInstances(e.ctx, store.InstanceFilter{TypePath: cfgType.Path}, false)
	if err != nil || len(list) != 2 {
		t.Fatalf("list after the load: %d instances, err %v; want 2", len(list), err)
	}
	before := held.getCalls.Load()
	e.get(first)
	if n := held.getCalls.Load() - before; n != 0 {
		t.Errorf("a read after the load read the store's instances %d times; want 0 (served by the cache)", n)
	}
}

// Warmed says when the load at start-up (Config.WarmReadCache) has ended:
// not while it is held, at once after; without one, at once.
func TestWarmed(t *testing.T) {
	held := &heldLoad{entered: make(chan struct{}), release: make(chan struct{})}
	held.armed.Store(true)
	e := newEnv(t, func(c *hub.Config) { held.Store = c.Store; c.Store = held; c.WarmReadCache = true })
	select {
	case <-held.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the load at start-up did not begin")
	}
	select {
	case <-e.h.Warmed():
		t.Fatal("Warmed is closed while the load is held")
	default:
	}
	close(held.release)
	select {
	case <-e.h.Warmed():
	case <-time.After(10 * time.Second):
		t.Fatal("Warmed is not closed after the load")
	}

	plain := newEnv(t)
	select {
	case <-plain.h.Warmed():
	default:
		t.Error("without a load at start-up, Warmed is not closed")
	}
}
