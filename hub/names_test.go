package hub_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/hub"
)

func TestDefaultNames(t *testing.T) {
	e := newEnv(t)
	out, err := e.h.CreateInstances(e.ctx, hub.CreateRequest{Instances: []hub.NewInstance{
		{Alias: "My_DB", TypeRef: cfgType},
		{Alias: "My_DB2", TypeRef: cfgType, Name: "given"},
		{TypeRef: cairn.TypeRef{Path: "cap.type.helm.release", Revision: "0.1.0"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"my-db-" + out[0].ID[28:], "given", "release-" + out[2].ID[28:]} {
		if got := out[i].Instance.Name; got != want {
			t.Errorf("instance %d: name %q, want %q", i, got, want)
		}
	}
	// Ids are UUIDv7, in creation order (the store appends them).
	for i, o := range out {
		if u, err := uuid.Parse(o.ID); err != nil || u.Version() != 7 {
			t.Errorf("instance %d: id %q is not a UUIDv7 (%v)", i, o.ID, err)
		}
	}
	if !(out[0].ID < out[1].ID && out[1].ID < out[2].ID) {
		t.Errorf("ids %s, %s, %s are not in creation order", out[0].ID, out[1].ID, out[2].ID)
	}
	// The same alias in another batch (aliases are batch-local) is no clash.
	if _, err := e.h.CreateInstances(e.ctx, hub.CreateRequest{Instances: []hub.NewInstance{{Alias: "My_DB", TypeRef: cfgType}}}); err != nil {
		t.Errorf("a second instance with the alias of another: %v", err)
	}
}

func TestPrinterColumnsChecked(t *testing.T) {
	e := newEnv(t)
	good := []cairn.PrinterColumn{{Name: "Host", Type: "string", JSONPath: ".spec.host"}, {Name: "Age", Type: "date", JSONPath: ".metadata.creationTimestamp", Priority: 1}}
	typ := cairn.Type{Path: "cap.type.cols", Revision: "0.1.0", JSONSchema: json.RawMessage(`{"type":"object"}`), PrinterColumns: good}
	if _, err := e.h.CreateType(e.ctx, typ); err != nil {
		t.Fatal(err)
	}
	got, err := e.h.GetType(e.ctx, typ.Ref())
	if err != nil || len(got.PrinterColumns) != 2 || got.PrinterColumns[1] != good[1] {
		t.Fatalf("GetType = %+v, %v; want the printer columns kept", got.PrinterColumns, err)
	}
	typ.Revision = "0.2.0"
	typ.PrinterColumns = []cairn.PrinterColumn{{Name: "X", Type: "map", JSONPath: "spec.x"}, {Name: "x", Type: "string", JSONPath: ".a"}}
	_, err = e.h.CreateType(e.ctx, typ)
	wantCode(t, err, cairn.CodeInvalid)
	wantContains(t, err, "additionalPrinterColumns/0/type", "additionalPrinterColumns/0/jsonPath", "additionalPrinterColumns/1/name")
}

// An instance deleted and created again with its former id (what kubectl
// replace --force does through REST) gets that id back; an id cairn would
// not give, or one an instance has, is refused.
func TestCreateWithFormerID(t *testing.T) {
	e := newEnv(t)
	out, err := e.h.CreateInstances(e.ctx, hub.CreateRequest{Instances: []hub.NewInstance{{Alias: "a", TypeRef: cfgType}}})
	if err != nil {
		t.Fatal(err)
	}
	id := out[0].ID
	_, err = e.h.CreateInstances(e.ctx, hub.CreateRequest{Instances: []hub.NewInstance{{ID: id, Alias: "b", TypeRef: cfgType}}})
	wantCode(t, err, cairn.CodeAlreadyExists)
	if err := e.h.DeleteInstance(e.ctx, id, ""); err != nil {
		t.Fatal(err)
	}
	again, err := e.h.CreateInstances(e.ctx, hub.CreateRequest{Instances: []hub.NewInstance{{ID: id, Alias: "a", TypeRef: cfgType}}})
	if err != nil || again[0].ID != id {
		t.Fatalf("created again = %+v, %v; want id %s", again, err, id)
	}
	if got, err := e.h.GetInstance(e.ctx, id, false); err != nil || got.ID != id {
		t.Errorf("GetInstance(%s) = %+v, %v", id, got.ID, err)
	}
	for _, bad := range []string{"not-a-uuid", strings.ToUpper(uuid.NewString()), "tfstate.default.x"} {
		_, err = e.h.CreateInstances(e.ctx, hub.CreateRequest{Instances: []hub.NewInstance{{ID: bad, TypeRef: cfgType}}})
		wantCode(t, err, cairn.CodeInvalid)
		wantContains(t, err, "metadata/uid", "only an instance's former id may be given")
	}
}
