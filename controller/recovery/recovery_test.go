package recovery_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/controller/recovery"
	"github.com/cairn-dev/cairn/hub"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/sqlite"
)

// TestOneReplicaRecovers: of two controllers on one store, the one that
// holds the lease finishes the journal; the other leaves it alone.
func TestOneReplicaRecovers(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "cairn.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	h, err := hub.New(ctx, hub.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	// An intent whose write committed (the built-in backend instance
	// exists at version 1): recovery forgets it without a backend call.
	if err := st.Update(ctx, func(ctx context.Context, tx store.Tx) error {
		return tx.PutIntent(ctx, store.Intent{InstanceID: cairn.BuiltinBackendID, ResourceVersion: 1,
			BackendID: cairn.BuiltinBackendID, Op: store.IntentCreate, CreatedAt: time.Now().Add(-time.Hour)})
	}); err != nil {
		t.Fatal(err)
	}
	a := recovery.New(recovery.Config{Hub: h, Identity: "a", Grace: time.Second, LeaseDuration: time.Minute})
	b := recovery.New(recovery.Config{Hub: h, Identity: "b", Grace: time.Second, LeaseDuration: time.Minute})
	a.Pass(ctx)
	b.Pass(ctx)
	if s := a.Status(); s.Err != nil || s.Committed != 1 || s.At.IsZero() {
		t.Fatalf("lease holder: %+v", s)
	}
	if s := b.Status(); !s.At.IsZero() {
		t.Fatalf("the other replica ran a pass: %+v", s)
	}
	if ins, err := h.PendingIntents(ctx); err != nil || len(ins) != 0 {
		t.Fatalf("journal after recovery: %v %+v", err, ins)
	}
	// Run stops with its context and gives the lease up.
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- a.Run(rctx) }()
	time.Sleep(50 * time.Millisecond)
	cancel()
	<-done
	b.Pass(ctx)
	if s := b.Status(); s.At.IsZero() {
		t.Fatal("the lease was not released when the holder stopped")
	}
}
