package hub_test

import (
	"encoding/json"
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
