package graphql_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/store"
)

// TestListValueOfInstanceGoneMeanwhile: a list whose instance loses its
// value between the list and the value read (a delete racing the list, as
// the soak found) fails that one value with a clear error, not every value
// of the batch.
func TestListValueOfInstanceGoneMeanwhile(t *testing.T) {
	e := newEnv(t)
	ids := e.create([]map[string]any{
		ti("a", "cap.type.race", "0.1.0", map[string]any{"n": 1}),
		ti("b", "cap.type.race", "0.1.0", map[string]any{"n": 2}),
		ti("c", "cap.type.race", "0.1.0", map[string]any{"n": 3}),
	})
	// What a concurrent delete leaves for a reader that listed before it:
	// the instance it holds, its value gone.
	if err := e.st.Update(context.Background(), func(ctx context.Context, tx store.Tx) error {
		return tx.DeleteValues(ctx, ids["b"])
	}); err != nil {
		t.Fatal(err)
	}
	res := e.do(`{ typeInstances(filter: {typeRef: {path: "cap.type.race"}}) { id latestResourceVersion { spec { value } } } }`, nil)
	if len(res.Errors) != 1 || !strings.Contains(res.Errors[0].Message, ids["b"]) || !strings.Contains(res.Errors[0].Message, "deleted while it was read") {
		t.Fatalf("errors = %+v; want one naming %s", res.Errors, ids["b"])
	}
	var data struct {
		TypeInstances []struct {
			ID                    string
			LatestResourceVersion *struct {
				Spec struct{ Value json.RawMessage }
			}
		}
	}
	if err := json.Unmarshal(res.Data, &data); err != nil {
		t.Fatalf("data %s: %v", res.Data, err)
	}
	values := 0
	for _, x := range data.TypeInstances {
		if x.ID != ids["b"] && x.LatestResourceVersion != nil && len(x.LatestResourceVersion.Spec.Value) > 0 && string(x.LatestResourceVersion.Spec.Value) != "null" {
			values++
		}
	}
	if values != 2 {
		t.Fatalf("the other instances' values: %d of 2 read; data %s", values, res.Data)
	}
}
