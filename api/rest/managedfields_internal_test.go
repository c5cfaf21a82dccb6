package rest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/managedfields"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/hub"
)

// managedObjectViaJSON is how managedObject was built before: the served
// object encoded without status and decoded as an unstructured object.
func managedObjectViaJSON(res *resource, inst cairn.Instance) (*unstructured.Unstructured, error) {
	o := toObject(res, inst)
	o.Status = nil
	raw, err := json.Marshal(o)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(raw); err != nil {
		return nil, err
	}
	return u, nil
}

var managedFieldsSample = json.RawMessage(`[{"manager":"kubectl","operation":"Update","apiVersion":"flipt.io/v1alpha1","time":"2026-11-23T23:00:00Z","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{"f:description":{},"f:enabled":{}}}},` +
	`{"manager":"cairn","operation":"Apply","apiVersion":"flipt.io/v1alpha1","time":"2026-11-23T22:00:00Z","fieldsType":"FieldsV1","fieldsV1":{"f:metadata":{"f:labels":{"f:team":{}}}}}]`)

func managedSamples() []cairn.Instance {
	at := time.Date(2026, 11, 23, 23, 0, 0, 0, time.UTC)
	full := cairn.Instance{ID: "id-1", Name: "f1", Namespace: "default", Seq: 42, CreatedAt: at,
		Backend:       cairn.BackendRef{ID: cairn.BuiltinBackendID, Abstract: true},
		Labels:        map[string]string{"team": "a", "x": "<b>"},
		Annotations:   map[string]string{"note": "n & m"},
		ManagedFields: managedFieldsSample,
		Status:        json.RawMessage(`{"phase":"Ready"}`),
		Uses:          []string{"u"}, UsedBy: []string{"v"},
		Latest: cairn.ResourceVersion{ResourceVersion: 3, Context: json.RawMessage(`{"c":1}`), Value: json.RawMessage(
			`{"enabled":true,"description":"flag <one>","n":1,"f":1.5,"e":1e3,"big":12345678901234567890,"neg":-7,"list":[1,"a",null,{"k":2.0}],"nested":{"a":{"b":[]}},"null":null}`)},
	}
	bare := cairn.Instance{ID: "id-2", Name: "f2", Seq: 1, Latest: cairn.ResourceVersion{ResourceVersion: 0}}
	empty := full
	empty.Labels, empty.Annotations, empty.ManagedFields = map[string]string{}, map[string]string{}, json.RawMessage(`[]`)
	empty.Latest.Value = json.RawMessage(`{}`)
	nulls := full
	nulls.ManagedFields, nulls.Latest.Value = json.RawMessage(`null`), json.RawMessage(`null`)
	deleting := full
	deleting.Annotations = map[string]string{hub.AnnotationDeletionRequested: "2026-11-23T23:30:00Z"}
	scalar := full
	scalar.Latest.Value = json.RawMessage(`"text"`)
	return []cairn.Instance{full, bare, empty, nulls, deleting, scalar}
}

// TestManagedObjectAsDecoded: the object the field manager sees is the
// one decoding the served JSON gave, value for value and type for type.
func TestManagedObjectAsDecoded(t *testing.T) {
	res := &resource{group: "flipt.io", version: "v1alpha1", kind: "Flag"}
	for i, inst := range managedSamples() {
		want, err := managedObjectViaJSON(res, inst)
		if err != nil {
			t.Fatal(err)
		}
		got, err := managedObject(res, inst)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got.Object, want.Object) {
			t.Fatalf("sample %d:\n%#v\nwant\n%#v", i, got.Object, want.Object)
		}
	}
}

// TestEncodeManagedFieldsAsConverted: managed fields encoded from the
// unstructured object are byte for byte those the converter gives, for
// what the field manager writes after updates and for forms it does not
// write (other time zones, unknown keys, values of another type), which
// go through the converter.
func TestEncodeManagedFieldsAsConverted(t *testing.T) {
	res := &resource{group: "flipt.io", version: "v1alpha1", kind: "Flag"}
	gvk := res.gvk()
	fm, err := managedfields.NewDefaultCRDFieldManager(managedfields.NewDeducedTypeConverter(), objectConvertor{}, objectDefaulter{}, objectCreater{},
		gvk, gvk.GroupVersion(), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	var objs []*unstructured.Unstructured
	for _, inst := range managedSamples() {
		live, err := managedObject(res, inst)
		if err != nil {
			t.Fatal(err)
		}
		for _, spec := range []string{`{"description":"changed","added":{"k:x":"<y>"},"list":[3]}`, `{}`} {
			desired := live.DeepCopy()
			var v any
			_ = json.Unmarshal([]byte(spec), &v)
			desired.Object["spec"] = v
			desired.SetLabels(map[string]string{"team": "b", "new": "1"})
			for _, manager := range []string{"kubectl-edit", "cairn", "Go-http-client", ""} {
				out, err := fm.Update(live.DeepCopy(), desired.DeepCopy(), manager)
				if err != nil {
					t.Fatal(err)
				}
				objs = append(objs, out.(*unstructured.Unstructured))
			}
		}
	}
	odd := func(mf string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON([]byte(`{"apiVersion":"flipt.io/v1alpha1","kind":"Flag","metadata":{"name":"x","managedFields":` + mf + `}}`)); err != nil {
			t.Fatal(err)
		}
		return u
	}
	for _, mf := range []string{
		`[]`,
		`null`,
		`[{"manager":"m","time":"2026-11-23T23:00:00+02:00","fieldsV1":{"f:spec":{"k:{\"name\":\"<a>\"}":{".":{}}}}}]`,
		`[{"manager":"m","subresource":"status","operation":"Update"}]`,
		`[{"manager":"m","time":"not a time"}]`,
		`[{"manager":"m","time":null}]`,
		`[{"manager":"m","fieldsV1":null}]`,
		`[{"manager":"m","fieldsV1":"text"}]`,
		`[{"manager":"m","extra":"x"}]`,
		`[{"manager":7}]`,
		`["entry"]`,
		`{"manager":"m"}`,
	} {
		objs = append(objs, odd(mf))
	}
	objs = append(objs, &unstructured.Unstructured{Object: map[string]any{"metadata": "x"}}, &unstructured.Unstructured{Object: map[string]any{}})
	for i, u := range objs {
		want := convertManagedFields(u)
		got := encodeManagedFields(u)
		if !bytes.Equal(got, want) {
			t.Fatalf("object %d: encoded\n%s\nthe converter gives\n%s", i, got, want)
		}
	}
}

// trackBefore is how an update's managed fields were computed before:
// the live object and the desired one both decoded with the managed
// fields, the result through the converter.
func trackBefore(t testing.TB, r *http.Request, res *resource, cur cairn.Instance, o inObject) json.RawMessage {
	t.Helper()
	fm, err := res.fieldManager()
	if err != nil {
		t.Fatal(err)
	}
	desired, err := desiredObject(res, cur.Name, cur.Namespace, o)
	if err != nil {
		t.Fatal(err)
	}
	live, err := managedObjectViaJSON(res, cur)
	if err != nil {
		t.Fatal(err)
	}
	out, err := fm.Update(live, desired, managerOf(r))
	if err != nil {
		return nil
	}
	return convertManagedFields(out.(*unstructured.Unstructured))
}

// trackNow is how write computes them for an object carrying the live
// managed fields.
func trackNow(t testing.TB, s *Server, r *http.Request, res *resource, cur cairn.Instance, o inObject) json.RawMessage {
	t.Helper()
	liveFields := len(cur.ManagedFields) > 0
	if liveFields {
		o.Metadata.ManagedFields = nil
	}
	desired, err := desiredObject(res, cur.Name, cur.Namespace, o)
	if err != nil {
		t.Fatal(err)
	}
	return s.trackLiveUpdate(r, res, &cur, desired, liveFields)
}

// TestLiveFieldsUpdateAsBefore: an update whose object carries the live
// managed fields, or none, records the managed fields it recorded when
// they were decoded from the objects, with reset forms, ownership of managed
// fields themselves and numbers among them included.
func TestLiveFieldsUpdateAsBefore(t *testing.T) {
	res := &resource{group: "flipt.io", version: "v1alpha1", kind: "Flag"}
	s := &Server{log: slog.New(slog.DiscardHandler)}
	r := httptest.NewRequest("PATCH", "/?fieldManager=kubectl-patch", nil)
	base := managedSamples()[0]
	for _, mf := range []string{
		string(managedFieldsSample),
		`[{"manager":"kubectl-patch","operation":"Update","apiVersion":"flipt.io/v1alpha1","time":"2026-11-23T23:00:00Z","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{"f:description":{}}}}]`,
		`[{"manager":"other","operation":"Update","apiVersion":"flipt.io/v1alpha1","time":"2026-11-23T23:00:00Z","fieldsType":"FieldsV1","fieldsV1":{"f:metadata":{"f:managedFields":{}},"f:spec":{"f:description":{}}}}]`,
		`[{"manager":"other","operation":"Update","apiVersion":"flipt.io/v1alpha1","time":"2026-11-23T23:00:00Z","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{"f:n":{}}},"extra":12345678901234567890}]`,
		`[]`, `[{}]`, `[{"manager":""}]`, `null`,
	} {
		cur := base
		cur.ManagedFields = json.RawMessage(mf)
		// Sent as they are live (a patch), or not at all (a replace).
		for _, sent := range []json.RawMessage{cur.ManagedFields, nil, json.RawMessage(`null`)} {
			o := inObject{APIVersion: res.apiVersion(), Kind: res.kind, Spec: json.RawMessage(`{"enabled":false,"description":"new","n":2}`)}
			o.Metadata = inMeta{Name: cur.Name, Namespace: cur.Namespace, Labels: cur.Labels, ManagedFields: sent}
			// The field manager stamps the time of the update: one of two
			// runs around it falls within the same second.
			first, got, second := trackBefore(t, r, res, cur, o), trackNow(t, s, r, res, cur, o), trackBefore(t, r, res, cur, o)
			if !bytes.Equal(got, first) && !bytes.Equal(got, second) {
				t.Fatalf("live %s, sent %s: recorded\n%s\nbefore\n%s", mf, sent, got, first)
			}
		}
	}
}

// BenchmarkTrackUpdate: the managed fields of a spec update carrying the
// live managed fields, computed as before ("before") and as write does
// now ("now"), alternated in one run.
func BenchmarkTrackUpdate(b *testing.B) {
	res := &resource{group: "flipt.io", version: "v1alpha1", kind: "Flag"}
	s := &Server{log: slog.New(slog.DiscardHandler)}
	r := httptest.NewRequest("PATCH", "/", nil)
	cur := managedSamples()[0]
	cur.Latest.Value = json.RawMessage(`{"enabled":true,"description":"flag number 7"}`)
	cur.ManagedFields = json.RawMessage(`[{"manager":"cairn","operation":"Apply","apiVersion":"flipt.io/v1alpha1","time":"2026-11-23T22:00:00Z","fieldsType":"FieldsV1","fieldsV1":{"f:metadata":{"f:labels":{"f:team":{}}},"f:spec":{"f:enabled":{}}}},` +
		`{"manager":"Go-http-client","operation":"Update","apiVersion":"flipt.io/v1alpha1","time":"2026-11-23T23:00:00Z","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{"f:description":{}}}}]`)
	o := inObject{APIVersion: res.apiVersion(), Kind: res.kind, Spec: json.RawMessage(`{"enabled":true,"description":"update 8"}`)}
	o.Metadata = inMeta{Name: cur.Name, Namespace: cur.Namespace, Labels: cur.Labels, Annotations: cur.Annotations, ManagedFields: cur.ManagedFields}
	b.Run("before", func(b *testing.B) {
		for b.Loop() {
			trackBefore(b, r, res, cur, o)
		}
	})
	b.Run("now", func(b *testing.B) {
		for b.Loop() {
			trackNow(b, s, r, res, cur, o)
		}
	})
}

// TestFieldsMemoAsComputed: updates answered from the memo record what
// the field manager computes for them, through a run of updates by
// several managers (each step twice: the second is a repeat; and on each
// state, a manager without fields changing the step's fields and
// changing nothing), on a resource with a schema and on one without;
// objects with lists or numbers on both sides are never answered from it.
func TestFieldsMemoAsComputed(t *testing.T) {
	typed := &cairn.Type{Path: "cap.type.flag", Revision: "0.1.0", JSONSchema: json.RawMessage(`{"type":"object","properties":{` +
		`"enabled":{"type":"boolean"},"description":{"type":"string"},"owner":{"type":"string"},` +
		`"meta":{"type":"object","additionalProperties":{"type":"string"}},"n":{"type":"integer"},"tags":{"type":"array","items":{"type":"string"}}}}`)}
	s := &Server{log: slog.New(slog.DiscardHandler)}
	steps := []struct {
		manager, spec string
		labels        map[string]string
		memo          bool // answered from the memo on the repeat
	}{
		{"wrk", `{"enabled":true,"description":"one","owner":"z"}`, map[string]string{"team": "a"}, true},
		{"other", `{"enabled":true,"description":"two","owner":"o"}`, map[string]string{"team": "a"}, true},
		// As the first step, but another manager owns a field.
		{"wrk", `{"enabled":true,"description":"three","owner":"o"}`, map[string]string{"team": "a"}, true},
		{"kubectl-edit", `{"enabled":false,"description":"three","owner":"o"}`, map[string]string{"team": "a"}, true},
		{"wrk", `{"enabled":false,"description":"four","owner":"x"}`, map[string]string{"team": "b"}, true},
		{"wrk", `{"enabled":false,"description":"four","meta":{"a":"1","b":"2"}}`, map[string]string{"team": "b", "new": "y"}, true},
		{"other", `{"enabled":false,"description":"four","meta":{"a":"1","b":null}}`, nil, true},
		{"other", `{"enabled":false,"description":"five","meta":"flat"}`, nil, false},
		{"wrk", `{"enabled":false,"description":"five","n":3}`, nil, true},
		{"wrk", `{"enabled":false,"description":"five","n":4}`, nil, false},
		{"wrk", `{"enabled":false,"description":"six","tags":["a"]}`, nil, false},
		{"wrk", `{}`, nil, true},
	}
	for _, res := range []*resource{
		{group: "flipt.io", version: "v1alpha1", kind: "Flag"},
		{group: "flipt.io", version: "v1alpha1", kind: "Flag", typ: typed},
	} {
		cur := managedSamples()[0]
		cur.Annotations = nil
		cur.Latest.Value = json.RawMessage(`{"enabled":true,"description":"zero","owner":"z"}`)
		cur.ManagedFields = json.RawMessage(`[{"manager":"cairn","operation":"Apply","apiVersion":"flipt.io/v1alpha1","time":"2026-11-23T22:00:00Z","fieldsType":"FieldsV1","fieldsV1":{"f:metadata":{"f:labels":{"f:team":{}}},"f:spec":{"f:enabled":{}}}}]`)
		check := func(what, manager, spec string, labels map[string]string, memo bool) json.RawMessage {
			t.Helper()
			r := httptest.NewRequest("PATCH", "/?fieldManager="+manager, nil)
			o := inObject{APIVersion: res.apiVersion(), Kind: res.kind, Spec: json.RawMessage(spec)}
			o.Metadata = inMeta{Name: cur.Name, Namespace: cur.Namespace, Labels: labels, ManagedFields: cur.ManagedFields}
			hits := res.fmMemo.hits
			first := trackBefore(t, r, res, cur, o)
			got := trackNow(t, s, r, res, cur, o)
			second := trackBefore(t, r, res, cur, o)
			if !bytes.Equal(got, first) && !bytes.Equal(got, second) {
				t.Fatalf("typed %v, %s: recorded\n%s\ncomputed\n%s", res.typ != nil, what, got, first)
			}
			if !memo && res.fmMemo.hits != hits {
				t.Fatalf("typed %v, %s: answered from the memo", res.typ != nil, what)
			}
			return got
		}
		for i, st := range steps {
			var got json.RawMessage
			for repeat := range 2 {
				got = check(fmt.Sprintf("step %d, repeat %d", i, repeat), st.manager, st.spec, st.labels, repeat == 0 || st.memo)
			}
			check(fmt.Sprintf("step %d by another manager", i), "probe", st.spec, st.labels, true)
			check(fmt.Sprintf("step %d changing nothing", i), "probe", string(cur.Latest.Value), cur.Labels, true)
			if got != nil { // nil: kept as they were, as write keeps them
				cur.ManagedFields = got
			}
			cur.Latest.Value, cur.Labels = json.RawMessage(st.spec), st.labels
			cur.Seq++
			cur.Latest.ResourceVersion++
		}
		if res.fmMemo.hits < 5 {
			t.Fatalf("typed %v: %d answers from the memo, want one for most repeats", res.typ != nil, res.fmMemo.hits)
		}
	}
}

// TestTypeConverterTakesServedSchema: the field manager's structure comes
// from the schema the OpenAPI document serves, meta/v1 schemas included;
// one structured-merge-diff cannot take (a bad list-map, say) would
// silently bring back the deduced fallback, where lists are atomic.
func TestTypeConverterTakesServedSchema(t *testing.T) {
	res := &resource{group: "flipt.io", version: "v1alpha1", kind: "Flag", plural: "flags", namespaced: true,
		typ: &cairn.Type{Path: "io.flipt.flag", Revision: "1.0.0", JSONSchema: json.RawMessage(`{"type":"object","properties":{"enabled":{"type":"boolean"}}}`)}}
	if _, err := typeConverter(res); err != nil {
		t.Fatalf("typeConverter: %v", err)
	}
}
