package rest

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"reflect"
	"testing"

	"github.com/cairn-dev/cairn"
)

// TestSpecMergePatchAsWhole: a merge patch of the spec alone gives, byte
// for byte in the spec, the object that patching the whole served object
// and decoding it gives (up to the order of two members the patch adds,
// which the library does not keep), with no unknown field reported for it; patches
// that hold more than the spec, or a spec that is not an object, are
// left to the whole-document path.
func TestSpecMergePatchAsWhole(t *testing.T) {
	res := &resource{group: "flipt.io", version: "v1alpha1", kind: "Flag"}
	base := cairn.Instance{ID: "id-1", Name: "f1", Namespace: "default", Seq: 7,
		Backend:       cairn.BackendRef{ID: cairn.BuiltinBackendID, Abstract: true},
		Labels:        map[string]string{"team": "a", "x": "<b>"},
		Annotations:   map[string]string{"note": "n & m"},
		ManagedFields: json.RawMessage(`[{"manager":"kubectl","operation":"Update","apiVersion":"flipt.io/v1alpha1","time":"2026-11-23T23:00:00Z","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{"f:description":{}}}}]`),
		Status:        json.RawMessage(`{"phase":"Ready","extra":{"a":1}}`),
		Latest: cairn.ResourceVersion{ResourceVersion: 3, Value: json.RawMessage(
			`{"enabled":true,"description":"flag <one> & two","variants":[{"key":"a","n":1},{"key":"b"}],"nested":{"k":"v","n":null,"deep":{"z":1,"a":2}},"num":1.50,"big":12345678901234567890}`)},
	}
	noMeta := base
	noMeta.Labels, noMeta.Annotations, noMeta.ManagedFields, noMeta.Namespace = nil, map[string]string{}, nil, ""
	tests := []struct {
		name  string
		inst  cairn.Instance
		patch string
		spec  bool // the spec-only path applies
	}{
		{"replace a string", base, `{"spec":{"description":"update 1"}}`, true},
		{"same value", base, `{"spec":{"description":"flag <one> & two"}}`, true},
		{"add a member", base, `{"spec":{"added":{"a":[1,2,{"b":null}],"c":null}}}`, true},
		{"remove members", base, `{"spec":{"enabled":null,"nested":{"k":null,"deep":{"a":null}}}}`, true},
		{"replace a list", base, `{"spec":{"variants":[{"key":"c","x":null}]}}`, true},
		{"scalar over an object", base, `{"spec":{"nested":"flat"}}`, true},
		{"object over a scalar", base, `{"spec":{"enabled":{"now":true,"gone":null}}}`, true},
		{"escapes", base, `{"spec":{"html":"<script>&amp;</script>\u00e9\u2028"}}`, true},
		{"two new members", base, `{"spec":{"new1":1,"new2":{"x":null}}}`, true},
		{"empty", base, `{"spec":{}}`, true},
		{"whitespace", base, " {\n \"spec\" : { \"description\" : \"spaced\" } }\n", true},
		{"duplicate spec", base, `{"spec":{"description":"first"},"spec":{"enabled":false}}`, true},
		{"no metadata", noMeta, `{"spec":{"description":"d"}}`, true},
		{"metadata too", base, `{"metadata":{"labels":{"team":"b"}},"spec":{"description":"d"}}`, false},
		{"spec null", base, `{"spec":null}`, false},
		{"spec scalar", base, `{"spec":"x"}`, false},
		{"not spec", base, `{"status":{"phase":"x"}}`, false},
		{"Spec", base, `{"Spec":{"description":"d"}}`, false},
		{"array", base, `[{"spec":{}}]`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := []byte(tt.patch)
			apply, err := jsonPatcher("application/merge-patch+json", body)
			if err != nil {
				t.Fatal(err)
			}
			patched, err := patchWhole(res, tt.inst, apply)
			if err != nil {
				t.Fatal(err)
			}
			want, err := decodeObject(patched)
			if err != nil && tt.spec {
				t.Fatal(err)
			}
			p, ok := specMergePatch("application/merge-patch+json", body)
			if ok != tt.spec {
				t.Fatalf("spec-only path taken: %v, want %v", ok, tt.spec)
			}
			if _, other := specMergePatch("application/json-patch+json", body); other {
				t.Fatal("a JSON patch taken as a merge patch")
			}
			if !ok {
				return
			}
			w := httptest.NewRecorder()
			r := httptest.NewRequest("PATCH", "/?fieldValidation=Strict", nil)
			if err := checkFields(w, r, patched, inObjectFields); err != nil {
				t.Fatalf("the whole document has unknown fields: %v", err)
			}
			got, ok, err := patchSpec(res, tt.inst, p)
			if err != nil || !ok {
				t.Fatal(ok, err)
			}
			// The library adds the members a patch brings in the order it
			// ranges over a map: with two or more, the order of the
			// whole-document path varies from run to run.
			if !bytes.Equal(got.Spec, want.Spec) && (tt.name != "two new members" || !jsonEqual(t, got.Spec, want.Spec)) {
				t.Fatalf("spec\n%s\nwhole document\n%s", got.Spec, want.Spec)
			}
			if !jsonEqual(t, got.Metadata.ManagedFields, want.Metadata.ManagedFields) {
				t.Fatalf("managedFields %s, whole document %s", got.Metadata.ManagedFields, want.Metadata.ManagedFields)
			}
			got.Spec, want.Spec = nil, nil
			got.Metadata.ManagedFields, want.Metadata.ManagedFields = nil, nil
			// What the whole document carries besides and write ignores.
			want.Metadata.Generation, want.Metadata.CreationTimestamp, want.Status = nil, nil, nil
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("object\n%+v\nwhole document\n%+v", got, want)
			}
		})
	}
	// A value that is not an object is patched as a whole document.
	scalar := base
	scalar.Latest.Value = json.RawMessage(`"text"`)
	if _, ok, err := patchSpec(res, scalar, json.RawMessage(`{"a":1}`)); ok || err != nil {
		t.Fatalf("spec-only path on a scalar value: %v %v", ok, err)
	}
}

func jsonEqual(t *testing.T, a, b json.RawMessage) bool {
	t.Helper()
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatal(err)
	}
	return reflect.DeepEqual(x, y)
}

// BenchmarkMergePatchSpec: a merge patch of the spec applied to the whole
// served object, checked and decoded ("whole", as before), against the
// spec alone ("spec").
func BenchmarkMergePatchSpec(b *testing.B) {
	res := &resource{group: "flipt.io", version: "v1alpha1", kind: "Flag"}
	cur := cairn.Instance{ID: "id-1", Name: "f00001", Namespace: "default", Seq: 7,
		Backend: cairn.BackendRef{ID: cairn.BuiltinBackendID, Abstract: true}, Labels: map[string]string{"team": "t1"},
		ManagedFields: json.RawMessage(`[{"manager":"cairn","operation":"Apply","apiVersion":"flipt.io/v1alpha1","time":"2026-11-23T22:00:00Z","fieldsType":"FieldsV1","fieldsV1":{"f:metadata":{"f:labels":{"f:team":{}}},"f:spec":{"f:description":{},"f:enabled":{}}}},` +
			`{"manager":"wrk","operation":"Update","apiVersion":"flipt.io/v1alpha1","time":"2026-11-23T23:00:00Z","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{"f:description":{}}}}]`),
		Latest: cairn.ResourceVersion{ResourceVersion: 3, Value: json.RawMessage(`{"enabled":true,"description":"flag number 1"}`)}}
	body := []byte(`{"spec":{"description":"update 12345"}}`)
	const ct = "application/merge-patch+json"
	w := httptest.NewRecorder()
	r := httptest.NewRequest("PATCH", "/", nil)
	b.Run("whole", func(b *testing.B) {
		for b.Loop() {
			apply, _ := jsonPatcher(ct, body)
			patched, err := patchWhole(res, cur, apply)
			if err != nil {
				b.Fatal(err)
			}
			if err := checkFields(w, r, patched, inObjectFields); err != nil {
				b.Fatal(err)
			}
			if _, err := decodeObject(patched); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("spec", func(b *testing.B) {
		for b.Loop() {
			p, ok := specMergePatch(ct, body)
			if !ok {
				b.Fatal("not a spec patch")
			}
			if _, ok, err := patchSpec(res, cur, p); !ok || err != nil {
				b.Fatal(ok, err)
			}
		}
	})
}
