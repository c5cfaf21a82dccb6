package rest

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"testing"

	"github.com/cairn-dev/cairn"
)

// TestEncodedCache: the cached JSON is what json.Marshal writes, a list
// written from it is byte for byte what writeJSON writes, and any change
// the object shows (seq, users, resource) encodes it again.
func TestEncodedCache(t *testing.T) {
	res := &resource{group: "flipt.io", version: "v1alpha1", kind: "Flag"}
	inst := cairn.Instance{ID: "id-1", Name: "f1", Namespace: "default", Seq: 7, Backend: cairn.BackendRef{ID: cairn.BuiltinBackendID, Abstract: true},
		Labels: map[string]string{"a": "<b>"}, Latest: cairn.ResourceVersion{ResourceVersion: 1, Value: json.RawMessage(`{"enabled":true}`)}}
	var c encodedCache
	enc := func(inst cairn.Instance, r *resource) []byte {
		t.Helper()
		b, err := c.encode(inst, toObject(r, inst))
		if err != nil {
			t.Fatal(err)
		}
		want, _ := json.Marshal(toObject(r, inst))
		if !bytes.Equal(b, want) {
			t.Fatalf("encoded\n%s\nwant\n%s", b, want)
		}
		return b
	}
	first := enc(inst, res)
	if again := enc(inst, res); &again[0] != &first[0] {
		t.Fatal("an unchanged object was encoded again")
	}
	changed := inst
	changed.UsedBy = []string{"user-1"}
	enc(changed, res)
	changed.Seq = 8
	changed.Latest.Value = json.RawMessage(`{"enabled":false}`)
	enc(changed, res)
	enc(changed, &resource{group: "flipt.io", version: "v1", kind: "Flag"})
	external := changed
	external.Backend.Abstract = false
	enc(external, res)
	external.Latest.Value = json.RawMessage(`{"enabled":"from the backend"}`)
	enc(external, res) // same seq, new value: not served from the cache

	meta := ListMeta{ResourceVersion: "9", Continue: "x"}
	objs := []Object{toObject(res, inst), toObject(res, changed)}
	items := [][]byte{enc(inst, res), enc(changed, res)}
	got := httptest.NewRecorder()
	writeList(got, res.apiVersion(), "FlagList", meta, items)
	want := httptest.NewRecorder()
	writeJSON(want, 200, List{APIVersion: res.apiVersion(), Kind: "FlagList", Metadata: meta, Items: []any{objs[0], objs[1]}})
	if !bytes.Equal(got.Body.Bytes(), want.Body.Bytes()) {
		t.Fatalf("writeList wrote\n%s\nwriteJSON writes\n%s", got.Body.Bytes(), want.Body.Bytes())
	}
	if got.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("content type %q", got.Header().Get("Content-Type"))
	}
}
