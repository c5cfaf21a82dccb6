package rest_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"sync"
	"testing"

	"github.com/cairn-dev/cairn/api/rest"
	"github.com/cairn-dev/cairn/hub"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/sqlite"
)

// hookStore runs a hook once after the next transaction that commits, as
// another writer (another replica) getting in between a write's commit and
// whatever the server does afterwards.
type hookStore struct {
	store.Store
	mu   sync.Mutex
	hook func()
}

func (s *hookStore) after(fn func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hook = fn
}

func (s *hookStore) Update(ctx context.Context, fn func(ctx context.Context, tx store.Tx) error) error {
	err := s.Store.Update(ctx, fn)
	s.mu.Lock()
	hook := s.hook
	if err == nil {
		s.hook = nil
	}
	s.mu.Unlock()
	if err == nil && hook != nil {
		hook()
	}
	return err
}

// The answer to a write is the object as that write left it, not as it is
// when the answer is written: another writer's later change must not be
// served as this write's resourceVersion, or a client that sends its next
// conditional update with that resourceVersion (as Kubernetes clients may)
// overwrites a change it never saw. Found by the multi-replica workload
// (internal/replicas), where writers on two replicas got in between.
func TestWriteAnswerIsTheWritesOwn(t *testing.T) {
	ctx := context.Background()
	sq, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "cairn.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sq.Close() })
	st := &hookStore{Store: sq}
	h, err := hub.New(ctx, hub.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(rest.New(rest.Config{Hub: h}))
	t.Cleanup(srv.Close)
	e := &restEnv{t: t, ctx: ctx, h: h, url: srv.URL, client: srv.Client()}
	e.mustDo("POST", hubGV+"/types", "application/json", flagsRD, http.StatusCreated)

	// other writes a value straight through the hub after the next commit.
	other := func(t *testing.T, id string) {
		st.after(func() {
			if _, err := h.UpdateInstances(ctx, []hub.UpdateInstance{{ID: id, Value: json.RawMessage(`{"key":"other"}`)}}); err != nil {
				t.Errorf("the other writer: %v", err)
			}
		})
	}
	decode := func(t *testing.T, r response) rest.Object {
		t.Helper()
		var o rest.Object
		if err := json.Unmarshal(r.body, &o); err != nil {
			t.Fatalf("decode %s: %v", r, err)
		}
		return o
	}
	key := func(o rest.Object) string {
		var v struct {
			Key string `json:"key"`
		}
		_ = json.Unmarshal(o.Spec, &v)
		return v.Key
	}
	// check: the answer shows the write's value and version; a conditional
	// PUT based on it is refused, since "other" came after.
	check := func(t *testing.T, e *restEnv, path string, got rest.Object, want string, wantGen int64) {
		t.Helper()
		if key(got) != want || got.Metadata.Generation != wantGen {
			t.Errorf("the write answered %s at generation %d, want %s at %d (its own write, not the later one)", got.Spec, got.Metadata.Generation, want, wantGen)
		}
		if now := decode(t, e.mustDo("GET", path, "", nil, http.StatusOK)); key(now) != "other" {
			t.Fatalf("the other writer did not get in: now %s", now.Spec)
		}
		next := got
		next.Spec, next.Status = json.RawMessage(`{"key":"based-on-the-answer"}`), nil
		body, _ := json.Marshal(next)
		wantStatus(t, e.do("PUT", path, "application/json", string(body)), http.StatusConflict, "Conflict")
	}

	t.Run("PUT", func(t *testing.T) {
		e := e.with(t)
		path := flagPath("default", "put")
		cur := decode(t, e.mustDo("POST", flagsIn("default"), "application/json", `{"metadata":{"name":"put"},"spec":{"key":"v1"}}`, http.StatusCreated))
		other(t, cur.Metadata.UID)
		cur.Spec, cur.Status = json.RawMessage(`{"key":"mine"}`), nil
		body, _ := json.Marshal(cur)
		check(t, e, path, decode(t, e.mustDo("PUT", path, "application/json", string(body), http.StatusOK)), "mine", 2)
	})
	t.Run("PATCH", func(t *testing.T) {
		e := e.with(t)
		path := flagPath("default", "patch")
		cur := decode(t, e.mustDo("POST", flagsIn("default"), "application/json", `{"metadata":{"name":"patch"},"spec":{"key":"v1"}}`, http.StatusCreated))
		other(t, cur.Metadata.UID)
		got := decode(t, e.mustDo("PATCH", path, "application/merge-patch+json", `{"spec":{"key":"mine"}}`, http.StatusOK))
		check(t, e, path, got, "mine", 2)
	})
	t.Run("PUT typeinstances", func(t *testing.T) {
		e := e.with(t)
		cur := decode(t, e.mustDo("POST", flagsIn("default"), "application/json", `{"metadata":{"name":"ti"},"spec":{"key":"v1"}}`, http.StatusCreated))
		path := hubGV + "/typeinstances/" + cur.Metadata.UID
		var ti map[string]any
		if err := json.Unmarshal(e.mustDo("GET", path, "", nil, http.StatusOK).body, &ti); err != nil {
			t.Fatal(err)
		}
		ti["spec"].(map[string]any)["value"] = map[string]any{"key": "mine"}
		delete(ti, "status")
		body, _ := json.Marshal(ti)
		other(t, cur.Metadata.UID)
		var got rest.TypeInstanceObject
		if err := json.Unmarshal(e.mustDo("PUT", path, "application/json", string(body), http.StatusOK).body, &got); err != nil {
			t.Fatal(err)
		}
		var v struct {
			Key string `json:"key"`
		}
		_ = json.Unmarshal(got.Spec.Value, &v)
		if v.Key != "mine" || got.Status.ResourceVersion != 2 {
			t.Errorf("PUT typeinstances answered %s at version %d, want mine at 2", got.Spec.Value, got.Status.ResourceVersion)
		}
		// A PUT based on the answer's resourceVersion is refused.
		ti["metadata"].(map[string]any)["resourceVersion"] = got.Metadata.ResourceVersion
		ti["spec"].(map[string]any)["value"] = map[string]any{"key": "based-on-the-answer"}
		body, _ = json.Marshal(ti)
		wantStatus(t, e.do("PUT", path, "application/json", string(body)), http.StatusConflict, "Conflict")
		if seq, _ := strconv.ParseInt(got.Metadata.ResourceVersion, 10, 64); seq == 0 {
			t.Errorf("answer without a resourceVersion: %+v", got.Metadata)
		}
	})
}
