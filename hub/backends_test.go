package hub_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/hub"
	"github.com/cairn-dev/cairn/policy"
	"github.com/cairn-dev/cairn/store"
)

// Backends are resolved from what was kept, without a store read: a change
// of a backend instance must still be seen by the next operation, through
// the hub that made it and through another hub on the same store.
func TestBackendChangeSeenByNextOperation(t *testing.T) {
	e := newEnv(t)
	other, err := hub.New(e.ctx, hub.Config{Store: e.st, Backends: e.opener})
	if err != nil {
		t.Fatalf("second hub: %v", err)
	}
	for _, tc := range []struct {
		name   string
		key    string   // names this case's backends and instances
		writer *hub.Hub // changes the backend
		reader *hub.Hub // writes through it before and after
	}{
		{"same hub", "same", e.h, e.h},
		{"other hub", "other", e.h, other},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bid, before := e.addBackend("before-"+tc.key, true, "")
			_, after := e.addBackend("after-"+tc.key, true, "")
			create := func(name string) (string, error) {
				out, err := tc.reader.CreateInstances(e.ctx, hub.CreateRequest{Instances: []hub.NewInstance{{
					TypeRef: cfgType, Name: name, Value: json.RawMessage(`{"host":"x"}`), Backend: &hub.BackendInput{ID: bid}}}})
				if err != nil {
					return "", err
				}
				return out[0].ID, nil
			}
			first, err := create("first-" + tc.key)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := before.GetValue(e.ctx, cairn.GetValueRequest{InstanceID: first, ResourceVersion: 1}); err != nil {
				t.Fatalf("the first write is not in the backend's first url: %v", err)
			}

			// The backend now points elsewhere: the next write goes there.
			sb, err := tc.writer.StorageBackend(e.ctx, bid)
			if err != nil {
				t.Fatal(err)
			}
			afterURL := "test://after-" + tc.key
			if _, err := tc.writer.UpdateInstances(e.ctx, []hub.UpdateInstance{{ID: bid,
				Value: json.RawMessage(fmt.Sprintf(`{"url":%q,"acceptValue":true,"contextSchema":null}`, afterURL))}}); err != nil {
				t.Fatalf("update the backend: %v", err)
			}
			if sb.URL == afterURL {
				t.Fatalf("the backend had the new url before the update")
			}
			got, err := tc.reader.StorageBackend(e.ctx, bid)
			if err != nil || got.URL != afterURL {
				t.Fatalf("StorageBackend after the update: url %q, %v; want %q", got.URL, err, afterURL)
			}
			second, err := create("second-" + tc.key)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := after.GetValue(e.ctx, cairn.GetValueRequest{InstanceID: second, ResourceVersion: 1}); err != nil {
				t.Fatalf("the write after the update is not in the backend's new url: %v", err)
			}
			if _, err := before.GetValue(e.ctx, cairn.GetValueRequest{InstanceID: second, ResourceVersion: 1}); err == nil {
				t.Fatalf("the write after the update went to the backend's old url")
			}

			// Refusing values now: the next write with a value is refused.
			if _, err := tc.writer.UpdateInstances(e.ctx, []hub.UpdateInstance{{ID: bid,
				Value: json.RawMessage(fmt.Sprintf(`{"url":%q,"acceptValue":false,"contextSchema":null}`, afterURL))}}); err != nil {
				t.Fatalf("update the backend: %v", err)
			}
			if _, err := create("third-" + tc.key); !cairn.HasCode(err, cairn.CodeInvalid) {
				t.Fatalf("a value for a backend that no longer accepts values: got %v, want Invalid", err)
			}
		})
	}

	t.Run("deleted", func(t *testing.T) {
		bid, _ := e.addBackend("doomed", true, "")
		for _, h := range []*hub.Hub{e.h, other} {
			if _, err := h.StorageBackend(e.ctx, bid); err != nil {
				t.Fatal(err) // resolved, so kept
			}
		}
		if err := e.h.DeleteInstance(e.ctx, bid, ""); err != nil {
			t.Fatalf("delete the backend: %v", err)
		}
		for i, h := range []*hub.Hub{e.h, other} {
			_, err := h.CreateInstances(e.ctx, hub.CreateRequest{Instances: []hub.NewInstance{{
				TypeRef: cfgType, Name: fmt.Sprintf("orphan-%d", i), Value: json.RawMessage(`{"host":"x"}`), Backend: &hub.BackendInput{ID: bid}}}})
			if !cairn.HasCode(err, cairn.CodeNotFound) {
				t.Fatalf("hub %d: a write into a deleted backend: got %v, want NotFound", i, err)
			}
			if _, err := h.StorageBackend(e.ctx, bid); !cairn.HasCode(err, cairn.CodeNotFound) {
				t.Fatalf("hub %d: StorageBackend of a deleted backend: got %v, want NotFound", i, err)
			}
		}
	})
}

// changeCounter counts the change-log reads of the store under a hub.
type changeCounter struct {
	store.Store
	reads atomic.Int64
}

func (c *changeCounter) Changes(ctx context.Context, after int64, limit int) ([]store.Change, error) {
	c.reads.Add(1)
	return c.Store.Changes(ctx, after, limit)
}

// ownWritesEnv is an env with a second hub, mine, on the same store
// (counting its change-log reads in cc, without a read cache), and a files
// backend the policy, applied through the env's hub, sends cap.type.aws.*
// to.
func ownWritesEnv(t *testing.T) (e *env, mine *hub.Hub, cc *changeCounter, filesID string) {
	t.Helper()
	e = newEnv(t)
	cc = &changeCounter{Store: e.st}
	mine, err := hub.New(e.ctx, hub.Config{Store: cc, Backends: e.opener, NoReadCache: true})
	if err != nil {
		t.Fatal(err)
	}
	filesID, _ = e.addBackend("files", true, "")
	toFiles := policy.Policy{TypeInstance: policy.TypeInstancePolicy{Rules: []policy.Rule{rule("cap.type.aws.*", "", filesID)}}}
	if _, err := e.h.ApplyPolicy(e.ctx, toFiles); err != nil {
		t.Fatal(err)
	}
	return e, mine, cc, filesID
}

// Updates of this hub move the kept backends past their own changes as
// creates do: updates of an instance in another backend one after another
// read no change log; an update through another hub is read from it.
func TestOwnUpdatesPassedWithoutLogReads(t *testing.T) {
	e, mine, cc, filesID := ownWritesEnv(t)
	ref := cairn.TypeRef{Path: "cap.type.aws.auth.credentials", Revision: "0.1.0"}
	created, err := mine.CreateInstances(e.ctx, hub.CreateRequest{Instances: []hub.NewInstance{{TypeRef: ref, Value: json.RawMessage(`{"n":0}`)}}})
	if err != nil {
		t.Fatal(err)
	}
	id := created[0].Instance.ID
	if created[0].Instance.Backend.ID != filesID {
		t.Fatalf("backend %s, want the policy's %s", created[0].Instance.Backend.ID, filesID)
	}
	update := func(h *hub.Hub, n int) {
		t.Helper()
		out, err := h.UpdateInstances(e.ctx, []hub.UpdateInstance{{ID: id, Value: json.RawMessage(fmt.Sprintf(`{"n":%d}`, n))}})
		if err != nil {
			t.Fatal(err)
		}
		if got := e.get(id); got.Seq != out[0].Seq {
			t.Fatalf("update %d answered Seq %d; the store holds %d", n, out[0].Seq, got.Seq)
		}
	}
	update(mine, 1) // keeps the backend
	before := cc.reads.Load()
	for n := 2; n <= 6; n++ {
		update(mine, n)
	}
	if n := cc.reads.Load() - before; n != 0 {
		t.Fatalf("5 updates read the change log %d times, want none: each change since was the hub's own", n)
	}
	update(e.h, 7) // through another hub
	update(mine, 8)
	if cc.reads.Load() == before {
		t.Fatal("the other hub's change was not read from the log")
	}
}

// Creates of this hub move the kept backends and policy past their own
// changes without reading the change log; a change through another hub
// is read from it and seen by the next create.
func TestOwnCreatesPassedWithoutLogReads(t *testing.T) {
	e, mine, cc, filesID := ownWritesEnv(t)
	ref := cairn.TypeRef{Path: "cap.type.aws.auth.credentials", Revision: "0.1.0"}
	backendOf := func() string {
		t.Helper()
		out, err := mine.CreateInstances(e.ctx, hub.CreateRequest{Instances: []hub.NewInstance{{TypeRef: ref, Value: json.RawMessage(`{}`)}}})
		if err != nil {
			t.Fatal(err)
		}
		return out[0].Instance.Backend.ID
	}
	if got := backendOf(); got != filesID { // reads and keeps the policy and the backend
		t.Fatalf("backend %s, want the policy's %s", got, filesID)
	}
	before := cc.reads.Load()
	for range 5 {
		if got := backendOf(); got != filesID {
			t.Fatalf("backend %s, want the policy's %s", got, filesID)
		}
	}
	if n := cc.reads.Load() - before; n != 0 {
		t.Fatalf("5 creates read the change log %d times, want none: each change since was the hub's own", n)
	}
	if _, err := e.h.ApplyPolicy(e.ctx, policy.Policy{}); err != nil { // through another hub
		t.Fatal(err)
	}
	if got := backendOf(); got != cairn.BuiltinBackendID {
		t.Fatalf("after another hub emptied the policy: backend %s, want built-in", got)
	}
	if cc.reads.Load() == before {
		t.Fatal("the other hub's change was not read from the log")
	}
}

// ResolveBackend finds a storage backend by id, alias or name, as a
// create's backend annotation names it; a reference that names none, or
// several, is refused with what it is.
func TestResolveBackend(t *testing.T) {
	e := newEnv(t)
	byAlias, _ := e.addBackend("vault", true, "")
	e.opener.mu.Lock()
	e.opener.backends["test://named"] = e.opener.backends["test://vault"]
	e.opener.mu.Unlock()
	named := e.create(hub.NewInstance{Alias: "team-store", Name: "files", Namespace: hub.SystemNamespace,
		TypeRef:    cairn.TypeRef{Path: "cap.type.test.storage", Revision: "0.1.0"},
		Value:      json.RawMessage(`{"url":"test://named","acceptValue":true,"contextSchema":null}`),
		Attributes: []cairn.AttributeRef{{Path: cairn.StorageAttributePath, Revision: "0.1.0"}}})
	// Two backends of one alias (names differ).
	for _, n := range []string{"twin-1", "twin-2"} {
		e.create(hub.NewInstance{Alias: "twin", Name: n, Namespace: n,
			TypeRef:    cairn.TypeRef{Path: "cap.type.test.storage", Revision: "0.1.0"},
			Value:      json.RawMessage(`{"url":"test://named","acceptValue":true,"contextSchema":null}`),
			Attributes: []cairn.AttributeRef{{Path: cairn.StorageAttributePath, Revision: "0.1.0"}}})
	}
	for _, tc := range []struct {
		ref, want string
		code      cairn.Code
	}{
		{ref: byAlias, want: byAlias},
		{ref: "vault", want: byAlias},
		{ref: "team-store", want: named},
		{ref: "files", want: named},
		{ref: cairn.BuiltinBackendAlias, want: cairn.BuiltinBackendID},
		{ref: "nowhere", code: cairn.CodeNotFound},
		{ref: "twin", code: cairn.CodeInvalid},
	} {
		got, err := e.h.ResolveBackend(e.ctx, tc.ref)
		switch {
		case tc.code != "" && !cairn.HasCode(err, tc.code):
			t.Errorf("ResolveBackend(%q) = %q, %v; want %s", tc.ref, got, err, tc.code)
		case tc.code == "" && (err != nil || got != tc.want):
			t.Errorf("ResolveBackend(%q) = %q, %v; want %q", tc.ref, got, err, tc.want)
		case tc.code != "" && !strings.Contains(err.Error(), strconv.Quote(tc.ref)):
			t.Errorf("ResolveBackend(%q): %v does not name the reference", tc.ref, err)
		}
	}
}
