package hub_test

import (
	"encoding/json"
	"slices"
	"sync"
	"testing"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/hub"
	"github.com/cairn-dev/cairn/store"
)

// TestListWithValuesRacingADelete: an instance of an external backend
// deleted between the list and the read of its value (the soak's Git
// writer found this) is left out of the list; the list does not fail. A
// value missing for an instance that still exists still fails the list.
func TestListWithValuesRacingADelete(t *testing.T) {
	e := newEnv(t)
	be, f := e.addBackend("ext", true, "")
	ids := map[string]string{}
	for _, name := range []string{"a", "b", "c"} {
		ids[name] = e.create(hub.NewInstance{Name: name, TypeRef: cairn.TypeRef{Path: "cap.type.race", Revision: "0.1.0"},
			Value: json.RawMessage(`{"name":"` + name + `"}`), Backend: &hub.BackendInput{ID: be}})
	}
	filter := store.InstanceFilter{TypePath: "cap.type.race"}
	names := func(list []cairn.Instance) []string {
		var out []string
		for _, inst := range list {
			var v struct{ Name string }
			if err := json.Unmarshal(inst.Latest.Value, &v); err != nil || v.Name != inst.Name {
				t.Errorf("instance %s holds %s (%v)", inst.Name, inst.Latest.Value, err)
			}
			out = append(out, inst.Name)
		}
		slices.Sort(out)
		return out
	}

	// b is deleted as the list reads its value.
	var once sync.Once
	f.failOn("GetValue", func(id string) error {
		if id == ids["b"] {
			once.Do(func() {
				if err := e.h.DeleteInstance(e.ctx, id, ""); err != nil {
					t.Errorf("delete b: %v", err)
				}
			})
		}
		return nil
	})
	list, err := e.h.ListInstances(e.ctx, filter, true)
	if err != nil {
		t.Fatalf("list racing a delete: %v", err)
	}
	if got := names(list); !slices.Equal(got, []string{"a", "c"}) {
		t.Fatalf("list racing the delete of b = %v, want [a c]", got)
	}

	// c's value is gone but c is not: that is an error, not a race.
	f.failOn("GetValue", func(id string) error {
		if id == ids["c"] {
			return cairn.Errorf(cairn.CodeNotFound, "value of %s lost", id)
		}
		return nil
	})
	if list, err := e.h.ListInstances(e.ctx, filter, true); !cairn.HasCode(err, cairn.CodeNotFound) {
		t.Fatalf("list with c's value missing = %v, %v; want NotFound", names(list), err)
	}
	f.failOn("GetValue", nil)
	if list, err := e.h.ListInstances(e.ctx, filter, true); err != nil || !slices.Equal(names(list), []string{"a", "c"}) {
		t.Fatalf("list after = %v, %v", names(list), err)
	}
}
