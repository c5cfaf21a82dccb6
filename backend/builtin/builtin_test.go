package builtin_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/google/uuid"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/backend/backendtest"
	"github.com/cairn-dev/cairn/backend/builtin"
	"github.com/cairn-dev/cairn/store/sqlite"
)

// newBackend returns the built-in backend over a fresh SQLite store.
func newBackend(t testing.TB) *builtin.Backend {
	t.Helper()
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "cairn.db"))
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Errorf("close store: %v", err)
		}
	})
	return builtin.New(st)
}

func TestConformance(t *testing.T) {
	backendtest.Run(t, backendtest.Harness{
		New:         func(t *testing.T) cairn.Backend { return newBackend(t) },
		AcceptValue: true,
	})
}

func TestNilValueIsStoredAsNull(t *testing.T) {
	b := newBackend(t)
	ctx := t.Context()
	id := uuid.NewString()
	newCtx, err := b.OnCreate(ctx, cairn.OnCreateRequest{InstanceID: id})
	if err != nil {
		t.Fatalf("OnCreate: %v", err)
	}
	if newCtx != nil {
		t.Errorf("OnCreate returned context %s, want nil (unchanged)", newCtx)
	}
	if _, err := b.OnUpdate(ctx, cairn.OnUpdateRequest{InstanceID: id, NewResourceVersion: 2}); err != nil {
		t.Fatalf("OnUpdate: %v", err)
	}
	for rv := 1; rv <= 2; rv++ {
		v, err := b.GetValue(ctx, cairn.GetValueRequest{InstanceID: id, ResourceVersion: rv})
		if err != nil {
			t.Fatalf("GetValue(rv %d): %v", rv, err)
		}
		if string(v) != "null" {
			t.Errorf("GetValue(rv %d) = %q, want null", rv, v)
		}
	}
}

func TestGetPreCreateValueIsNil(t *testing.T) {
	v, err := newBackend(t).GetPreCreateValue(t.Context(), cairn.GetPreCreateValueRequest{Context: json.RawMessage(`{}`)})
	if v != nil || err != nil {
		t.Errorf("GetPreCreateValue = %q, %v; want nil, nil", v, err)
	}
}

func TestErrorsNameInstanceAndRevision(t *testing.T) {
	b := newBackend(t)
	ctx := t.Context()
	id := uuid.NewString()
	if _, err := b.OnCreate(ctx, cairn.OnCreateRequest{InstanceID: id, Value: json.RawMessage(`1`)}); err != nil {
		t.Fatal(err)
	}
	if err := b.OnLock(ctx, cairn.OnLockRequest{InstanceID: id, LockedBy: "alice"}); err != nil {
		t.Fatal(err)
	}
	_, errRevision := b.GetValue(ctx, cairn.GetValueRequest{InstanceID: id, ResourceVersion: 7})
	_, errExists := b.OnUpdate(ctx, cairn.OnUpdateRequest{InstanceID: id, NewResourceVersion: 1, OwnerID: "alice"})
	errLocked := b.OnDelete(ctx, cairn.OnDeleteRequest{InstanceID: id, OwnerID: "bob"})
	tests := []struct {
		err  error
		want string
	}{
		{errRevision, fmt.Sprintf(`builtin backend: resource version 7 of instance %q not found`, id)},
		{errExists, fmt.Sprintf(`builtin backend: instance %q already has resource version 1`, id)},
		{errLocked, fmt.Sprintf(`builtin backend: cannot delete instance %q: locked by "alice"`, id)},
	}
	for _, tt := range tests {
		if tt.err == nil || tt.err.Error() != tt.want {
			t.Errorf("error = %v, want %s", tt.err, tt.want)
		}
	}
}

func TestLockWithoutOwner(t *testing.T) {
	b := newBackend(t)
	ctx := t.Context()
	id := uuid.NewString()
	if _, err := b.OnCreate(ctx, cairn.OnCreateRequest{InstanceID: id, Value: json.RawMessage(`1`)}); err != nil {
		t.Fatal(err)
	}
	if err := b.OnLock(ctx, cairn.OnLockRequest{InstanceID: id}); !cairn.HasCode(err, cairn.CodeInvalid) {
		t.Errorf("OnLock without owner: error %v, want code %s", err, cairn.CodeInvalid)
	}
}

func BenchmarkGetValue(b *testing.B) {
	be := newBackend(b)
	ctx := b.Context()
	id := uuid.NewString()
	value := json.RawMessage(`{"host":"db.example.com","port":5432,"user":"app","tls":true,"tags":["a","b","c"]}`)
	if _, err := be.OnCreate(ctx, cairn.OnCreateRequest{InstanceID: id, Value: value}); err != nil {
		b.Fatal(err)
	}
	req := cairn.GetValueRequest{InstanceID: id, ResourceVersion: 1}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := be.GetValue(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
}
