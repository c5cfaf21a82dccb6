package hub_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"testing"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/hub"
)

func TestManagedFields(t *testing.T) {
	e := newEnv(t)
	const a = `[{"manager":"a","operation":"Apply","apiVersion":"x/v1","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{}}}]`
	const b = `[{"manager":"b","operation":"Update","apiVersion":"x/v1","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{}}}]`
	id := e.create(hub.NewInstance{TypeRef: cfgType, Name: "mf", Value: json.RawMessage(`1`), ManagedFields: json.RawMessage(a)})
	jsonEq(t, e.get(id).ManagedFields, a)

	// An update without managed fields keeps them; one with them replaces them.
	if _, err := e.h.UpdateInstances(e.ctx, []hub.UpdateInstance{{ID: id, Value: json.RawMessage(`2`)}}); err != nil {
		t.Fatal(err)
	}
	jsonEq(t, e.get(id).ManagedFields, a)
	if _, err := e.h.UpdateInstances(e.ctx, []hub.UpdateInstance{{ID: id, Value: json.RawMessage(`3`), ManagedFields: json.RawMessage(b)}}); err != nil {
		t.Fatal(err)
	}
	jsonEq(t, e.get(id).ManagedFields, b)

	// UpdateManagedFields: no new resource version, the lock and ifSeq hold.
	cur := e.get(id)
	out, err := e.h.UpdateManagedFields(e.ctx, id, "", json.RawMessage(a), cur.Seq)
	if err != nil {
		t.Fatal(err)
	}
	if out.Latest.ResourceVersion != cur.Latest.ResourceVersion || out.Seq == cur.Seq {
		t.Errorf("UpdateManagedFields: resource version %d -> %d, seq %d -> %d; want the version kept and the seq moved",
			cur.Latest.ResourceVersion, out.Latest.ResourceVersion, cur.Seq, out.Seq)
	}
	jsonEq(t, e.get(id).ManagedFields, a)
	_, err = e.h.UpdateManagedFields(e.ctx, id, "", json.RawMessage(b), cur.Seq)
	wantCode(t, err, cairn.CodeConflict)
	_, err = e.h.UpdateManagedFields(e.ctx, id, "", json.RawMessage(`{}`), 0)
	wantCode(t, err, cairn.CodeInvalid)
	if err := e.h.LockInstances(e.ctx, []string{id}, "alice"); err != nil {
		t.Fatal(err)
	}
	_, err = e.h.UpdateManagedFields(e.ctx, id, "bob", json.RawMessage(b), 0)
	wantCode(t, err, cairn.CodeLocked)
	jsonEq(t, e.get(id).ManagedFields, a)
}

// TestUpdateWritesWhatChanged: an update giving labels, annotations and
// managed fields as they are adds a version and keeps them; one changing
// any of them alone writes that change.
func TestUpdateWritesWhatChanged(t *testing.T) {
	e := newEnv(t)
	const a = `[{"manager":"a","operation":"Update","apiVersion":"x/v1","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{}}}]`
	const b = `[{"manager":"b","operation":"Update","apiVersion":"x/v1","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{}}}]`
	labels := map[string]string{"team": "a"}
	annotations := map[string]string{"note": "x"}
	id := e.create(hub.NewInstance{TypeRef: cfgType, Name: "same", Value: json.RawMessage(`1`), Labels: labels, Annotations: annotations, ManagedFields: json.RawMessage(a)})
	steps := []struct {
		name   string
		up     hub.UpdateInstance
		labels map[string]string
		notes  map[string]string
		mf     string
	}{
		{"all as they are", hub.UpdateInstance{Labels: labels, Annotations: annotations, ManagedFields: json.RawMessage(a)}, labels, annotations, a},
		{"labels", hub.UpdateInstance{Labels: map[string]string{"team": "b"}, Annotations: annotations, ManagedFields: json.RawMessage(a)}, map[string]string{"team": "b"}, annotations, a},
		{"annotations", hub.UpdateInstance{Labels: map[string]string{"team": "b"}, Annotations: map[string]string{}, ManagedFields: json.RawMessage(a)}, map[string]string{"team": "b"}, map[string]string{}, a},
		{"managed fields", hub.UpdateInstance{Labels: map[string]string{"team": "b"}, Annotations: map[string]string{}, ManagedFields: json.RawMessage(b)}, map[string]string{"team": "b"}, map[string]string{}, b},
		{"empty labels", hub.UpdateInstance{Labels: map[string]string{}, ManagedFields: json.RawMessage(b)}, map[string]string{}, map[string]string{}, b},
	}
	for i, st := range steps {
		before := e.get(id)
		up := st.up
		up.ID, up.Value = id, json.RawMessage(fmt.Sprint(i+2))
		if _, err := e.h.UpdateInstances(e.ctx, []hub.UpdateInstance{up}); err != nil {
			t.Fatal(err)
		}
		got := e.get(id)
		if got.Latest.ResourceVersion != before.Latest.ResourceVersion+1 || got.Seq <= before.Seq {
			t.Fatalf("%s: version %d -> %d, seq %d -> %d", st.name, before.Latest.ResourceVersion, got.Latest.ResourceVersion, before.Seq, got.Seq)
		}
		if !maps.Equal(got.Labels, st.labels) || !maps.Equal(got.Annotations, st.notes) {
			t.Fatalf("%s: labels %v, annotations %v; want %v, %v", st.name, got.Labels, got.Annotations, st.labels, st.notes)
		}
		jsonEq(t, got.ManagedFields, st.mf)
	}
}
