package hub

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/policy"
	"github.com/cairn-dev/cairn/store"
)

// BenchmarkCreateTransaction times the statements of a one-instance
// create's store transaction (what runs on the store's one writer; the
// commit not timed), two ways alternately in
// one loop (A B B A): "readback" reads the created instance back in the
// transaction, as creates did before, and "assembled" as they do now (the
// instance as written, its change number read in the transaction). The
// readback variant also reads the change number (one small query), so the
// ratio slightly understates the cut.
func BenchmarkCreateTransaction(b *testing.B) {
	ctx, h := benchHub(b)
	ref := cairn.TypeRef{Path: "cap.type.test.config", Revision: "0.1.0"}
	n := 0
	createTx := func(readBack bool) time.Duration {
		n++
		items, err := h.prepareCreate(ctx, CreateRequest{Instances: []NewInstance{{TypeRef: ref, Name: fmt.Sprintf("c-%d", n),
			Labels: map[string]string{"team": "a"}, Value: json.RawMessage(`{"enabled":true}`),
			ManagedFields: json.RawMessage(`[{"manager":"m","operation":"Update","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{"f:enabled":{}}}}]`)}}}, h.now())
		if err != nil {
			b.Fatal(err)
		}
		var d time.Duration
		err = h.write(ctx, func(ctx context.Context, tx store.Tx) error {
			t0 := time.Now()
			stored, err := h.storeCreates(ctx, tx, items, nil)
			if err == nil && readBack {
				_, err = tx.GetInstancesBrief(ctx, []string{stored[0].ID})
			}
			d = time.Since(t0)
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
		return d
	}
	alternate(b, nil, "readback", func() time.Duration { return createTx(true) }, "assembled", func() time.Duration { return createTx(false) })
}

// BenchmarkPolicyAfterOwnCreate reads the policy as the next create does,
// after a create of this hub (not timed), two ways alternately in one loop:
// "log" when the create's change is not known to the kept policy (it reads
// the change log since, as every create did before), "own" when the create
// told it (CreateInstances now does).
func BenchmarkPolicyAfterOwnCreate(b *testing.B) {
	ctx, h := benchHub(b)
	if _, err := h.ApplyPolicy(ctx, policy.Policy{TypeInstance: policy.TypeInstancePolicy{Rules: []policy.Rule{
		{TypeRef: policy.TypeRef{Path: "cap.*"}, Backend: policy.BackendRef{ID: cairn.BuiltinBackendID}},
	}}}); err != nil {
		b.Fatal(err)
	}
	ref := cairn.TypeRef{Path: "cap.type.test.config", Revision: "0.1.0"}
	read := func(own bool) time.Duration {
		out, err := h.CreateInstances(ctx, CreateRequest{Instances: []NewInstance{{TypeRef: ref, Value: json.RawMessage(`{"n":0}`)}}})
		if err != nil {
			b.Fatal(err)
		}
		if !own { // as before: the change unknown, read from the log
			h.kept.mu.Lock()
			delete(h.kept.own, out[0].Instance.Seq)
			h.kept.mu.Unlock()
		}
		t0 := time.Now()
		if cp, err := h.policyAt(ctx, 0); err != nil || cp == nil {
			b.Fatal(cp, err)
		}
		return time.Since(t0)
	}
	alternate(b, nil, "log", func() time.Duration { return read(false) }, "own", func() time.Duration { return read(true) })
}
