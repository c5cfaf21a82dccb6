package replicatest

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/hub"
)

// services are external backends every replica reaches, by url: each
// keeps the values written to it, as a service outside the replicas
// would.
type services struct {
	mu    sync.Mutex
	byURL map[string]*memBackend
}

func (s *services) OpenBackend(_ context.Context, sb cairn.StorageBackend) (cairn.Backend, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.byURL[sb.URL]
	if !ok {
		return nil, fmt.Errorf("no service at %q", sb.URL)
	}
	return b, nil
}

// memBackend keeps values by instance id and resource version.
type memBackend struct {
	mu     sync.Mutex
	values map[string]json.RawMessage
}

func key(id string, rv int) string { return fmt.Sprintf("%s@%d", id, rv) }

func (m *memBackend) put(id string, rv int, v json.RawMessage) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.values[key(id, rv)] = v
}

func (m *memBackend) has(id string, rv int) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.values[key(id, rv)]
	return ok
}

func (m *memBackend) GetPreCreateValue(context.Context, cairn.GetPreCreateValueRequest) (json.RawMessage, error) {
	return nil, nil
}

func (m *memBackend) OnCreate(_ context.Context, req cairn.OnCreateRequest) (json.RawMessage, error) {
	m.put(req.InstanceID, 1, req.Value)
	return nil, nil
}

func (m *memBackend) OnUpdate(_ context.Context, req cairn.OnUpdateRequest) (json.RawMessage, error) {
	m.put(req.InstanceID, req.NewResourceVersion, req.NewValue)
	return nil, nil
}

func (m *memBackend) OnDelete(_ context.Context, req cairn.OnDeleteRequest) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k := range m.values {
		if len(k) > len(req.InstanceID) && k[:len(req.InstanceID)+1] == req.InstanceID+"@" {
			delete(m.values, k)
		}
	}
	return nil
}

func (m *memBackend) OnDeleteRevision(_ context.Context, req cairn.OnDeleteRevisionRequest) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.values, key(req.InstanceID, req.ResourceVersion))
	return nil
}

func (m *memBackend) GetValue(_ context.Context, req cairn.GetValueRequest) (json.RawMessage, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.values[key(req.InstanceID, req.ResourceVersion)]
	if !ok {
		return nil, cairn.Errorf(cairn.CodeNotFound, "no value of %q version %d", req.InstanceID, req.ResourceVersion)
	}
	return v, nil
}

func (m *memBackend) GetLockedBy(context.Context, cairn.GetLockedByRequest) (string, error) {
	return "", nil
}
func (m *memBackend) OnLock(context.Context, cairn.OnLockRequest) error     { return nil }
func (m *memBackend) OnUnlock(context.Context, cairn.OnUnlockRequest) error { return nil }

// testBackendChangeOtherReplica: replicas resolve backends from what they
// kept, without reading the backend instance per operation. An update or
// delete of a backend through one replica is seen by the very next
// operation through another that was using it: no sleep, no retry.
func testBackendChangeOtherReplica(t *testing.T, db Database) {
	svc := &services{byURL: map[string]*memBackend{
		"mem://one": {values: map[string]json.RawMessage{}},
		"mem://two": {values: map[string]json.RawMessage{}},
	}}
	hubs := startReplicas(t, db, 2, func(c *hub.Config) { c.Backends = svc })
	w, r := hubs[0], hubs[1]
	storage := cairn.TypeRef{Path: "cap.type.replicatest.storage", Revision: "0.1.0"}
	newBackend := func(name, url string) string {
		out, err := w.CreateInstances(ctx(), hub.CreateRequest{Instances: []hub.NewInstance{{
			TypeRef: storage, Name: name,
			Value:      json.RawMessage(fmt.Sprintf(`{"url":%q,"acceptValue":true}`, url)),
			Attributes: []cairn.AttributeRef{{Path: cairn.StorageAttributePath, Revision: "0.1.0"}},
		}}})
		if err != nil {
			t.Fatalf("create backend %s: %v", name, err)
		}
		return out[0].ID
	}
	writeThrough := func(h *hub.Hub, bid, name string) (string, error) {
		out, err := h.CreateInstances(ctx(), hub.CreateRequest{Instances: []hub.NewInstance{{
			TypeRef: typeRef, Name: name, Value: json.RawMessage(`{"n":1}`), Backend: &hub.BackendInput{ID: bid}}}})
		if err != nil {
			return "", err
		}
		return out[0].ID, nil
	}
	bid := newBackend("moving", "mem://one")
	for i := range 5 {
		from, to := "mem://one", "mem://two"
		if i%2 == 1 {
			from, to = to, from
		}
		id, err := writeThrough(r, bid, fmt.Sprintf("before-%d", i))
		if err != nil {
			t.Fatal(err)
		}
		if !svc.byURL[from].has(id, 1) {
			t.Fatalf("step %d: the write is not at %s", i, from)
		}
		if _, err := w.UpdateInstances(ctx(), []hub.UpdateInstance{{ID: bid,
			Value: json.RawMessage(fmt.Sprintf(`{"url":%q,"acceptValue":true}`, to))}}); err != nil {
			t.Fatal(err)
		}
		id, err = writeThrough(r, bid, fmt.Sprintf("after-%d", i))
		if err != nil {
			t.Fatal(err)
		}
		if !svc.byURL[to].has(id, 1) || svc.byURL[from].has(id, 1) {
			t.Fatalf("step %d: the other replica wrote through the backend's old url %s right after it moved to %s", i, from, to)
		}
	}

	doomed := newBackend("doomed", "mem://one")
	if sb, err := r.StorageBackend(ctx(), doomed); err != nil || sb.URL != "mem://one" {
		t.Fatalf("resolve doomed: %v %v", sb, err)
	}
	if err := w.DeleteInstance(ctx(), doomed, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := writeThrough(r, doomed, "orphan"); !cairn.HasCode(err, cairn.CodeNotFound) {
		t.Fatalf("write through a backend another replica deleted: got %v, want not found", err)
	}
	if _, err := r.StorageBackend(ctx(), doomed); !cairn.HasCode(err, cairn.CodeNotFound) {
		t.Fatalf("resolve a backend another replica deleted: got %v, want not found", err)
	}
}
