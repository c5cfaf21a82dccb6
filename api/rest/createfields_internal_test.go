package rest

import (
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"regexp"
	"testing"
	"time"

	"github.com/cairn-dev/cairn"
)

// TestCreateFieldsAsTheFieldManager: the managed fields trackCreate gives
// a create, computed or kept from an earlier create of the same shape, are
// the field manager's (trackUpdate's) for that object, but for the time,
// which is the create's. Objects differing in a map key, a scalar's kind or
// a list element are told apart.
func TestCreateFieldsAsTheFieldManager(t *testing.T) {
	res := &resource{group: "example.com", version: "v1", kind: "Thing", plural: "things", namespaced: true,
		typ: &cairn.Type{Path: "cap.type.thing", Revision: "0.1.0", JSONSchema: json.RawMessage(`{
			"type": "object",
			"properties": {
				"enabled": {"type": "boolean"},
				"size": {"type": "integer"},
				"ratio": {"type": "number"},
				"tags": {"type": "array", "items": {"type": "string"}},
				"rules": {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"}}}},
				"nested": {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "object"}}}
			}
		}`)}}
	s := &Server{log: slog.New(slog.DiscardHandler)}
	stamp := regexp.MustCompile(`"time":"[^"]*"`)

	// Each body is created twice under two names: a shape seen before is
	// answered from what was kept.
	bodies := []struct{ name, body string }{
		{"spec only", `{"spec":{"enabled":true,"size":3}}`},
		{"same shape, other values", `{"spec":{"enabled":false,"size":40}}`},
		{"another key", `{"spec":{"enabled":true,"ratio":3}}`},
		{"a key more", `{"spec":{"enabled":true,"size":3,"ratio":0.5}}`},
		{"a number of another kind", `{"spec":{"enabled":true,"size":3,"ratio":2}}`},
		{"labels and annotations", `{"metadata":{"labels":{"team":"a"},"annotations":{"note":"x"}},"spec":{"enabled":true}}`},
		{"other label values", `{"metadata":{"labels":{"team":"b"},"annotations":{"note":"y"}},"spec":{"enabled":true}}`},
		{"another label", `{"metadata":{"labels":{"owner":"a"}},"spec":{"enabled":true}}`},
		{"lists", `{"spec":{"tags":["x","y"],"rules":[{"name":"r1"}]}}`},
		{"other list elements", `{"spec":{"tags":["x"],"rules":[{"name":"r2"},{"name":"r3"}]}}`},
		{"nested and null", `{"spec":{"nested":{"a":"x","b":{"c":null,"d":{}}}}}`},
		{"nested, other kind", `{"spec":{"nested":{"a":"x","b":{"c":"now a string","d":{}}}}}`},
		{"empty spec", `{"spec":{}}`},
		{"no spec", `{}`},
		{"managed fields given", `{"metadata":{"managedFields":[{"manager":"m","operation":"Update","apiVersion":"example.com/v1","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{}}}]},"spec":{"enabled":true}}`},
		// The key is read off the JSON as it came: numbers written
		// otherwise (the shape of "a key more"), whitespace and escaped
		// keys, a key given twice (not kept: its shape is the last
		// value's).
		{"numbers written otherwise", `{"spec":{"enabled":true,"size":3.0e0,"ratio":25e-2}}`},
		{"whitespace and escapes", "{\"spec\": { \"en\\u0061bled\" : true ,\n \"size\":\t4, \"tags\" : [ \"x\" , \"y\" ] } }"},
		{"a key given twice", `{"spec":{"ratio":0.5,"ratio":3,"enabled":true}}`},
		{"a key given twice, the other way", `{"spec":{"ratio":3,"ratio":0.5,"enabled":true}}`},
	}
	for _, manager := range []string{"kubectl", "other"} {
		for i, b := range bodies {
			for _, name := range []string{"first", "second"} {
				t.Run(manager+"/"+b.name+"/"+name, func(t *testing.T) {
					o, err := decodeObject([]byte(b.body))
					if err != nil {
						t.Fatal(err)
					}
					objName := name + "-" + string(rune('a'+i))
					d, err := desiredObject(res, objName, "default", o)
					if err != nil {
						t.Fatal(err)
					}
					r := httptest.NewRequest("POST", "/apis/example.com/v1/namespaces/default/things?fieldManager="+manager, nil)
					before := time.Now().UTC().Truncate(time.Second)
					got, err := s.trackCreate(r, res, objName, "default", o)
					if err != nil {
						t.Fatal(err)
					}
					want := s.trackUpdate(r, res, nil, d)
					if len(want) == 0 {
						t.Fatal("the field manager gave no managed fields")
					}
					if g, w := stamp.ReplaceAll(got, []byte(`"time":"T"`)), stamp.ReplaceAll(want, []byte(`"time":"T"`)); string(g) != string(w) {
						t.Fatalf("managed fields\n%s\nwant, as the field manager gives them,\n%s", got, want)
					}
					var entries []struct {
						Time time.Time `json:"time"`
					}
					if err := json.Unmarshal(got, &entries); err != nil {
						t.Fatalf("managed fields %s: %v", got, err)
					}
					if len(entries) == 0 {
						return // an object with no field to own: []
					}
					if at := entries[len(entries)-1].Time; at.Before(before) || at.After(time.Now().Add(time.Second)) {
						t.Fatalf("time %s, want the create's (%s)", at, before)
					}
				})
			}
		}
	}
	// One kept entry per manager and shape (the bodies with managed fields
	// or none to own are computed every time and keep nothing).
	if got, want := len(res.createFields.m), 2*12; got != want {
		t.Fatalf("%d kept shapes, want %d", got, want)
	}
	// A number float64 cannot hold is refused as desiredObject refuses it,
	// also after a create of the same shape was kept.
	r := httptest.NewRequest("POST", "/apis/example.com/v1/namespaces/default/things", nil)
	for _, body := range []string{`{"spec":{"size":1}}`, `{"spec":{"size":1e400}}`} {
		o, err := decodeObject([]byte(body))
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.trackCreate(r, res, "big", "default", o)
		_, want := desiredObject(res, "big", "default", o)
		if (err == nil) != (want == nil) || (err != nil && err.Error() != want.Error()) {
			t.Fatalf("%s: error %v, want desiredObject's %v", body, err, want)
		}
	}
}

// BenchmarkCreateFields: the managed fields of a create of a Flag-like
// object computed by the field manager every time from the desired object
// (baseline) and as trackCreate gives them, the shape seen before (the
// desired object built only by the first).
func BenchmarkCreateFields(b *testing.B) {
	res := &resource{group: "flipt.io", version: "v1alpha1", kind: "Flag", plural: "flags", namespaced: true,
		typ: &cairn.Type{Path: "cap.type.flipt.flag", Revision: "0.1.0", JSONSchema: json.RawMessage(
			`{"type":"object","properties":{"enabled":{"type":"boolean"},"description":{"type":"string"}}}`)}}
	s := &Server{log: slog.New(slog.DiscardHandler)}
	o, err := decodeObject([]byte(`{"apiVersion":"flipt.io/v1alpha1","kind":"Flag","metadata":{"name":"f1","labels":{"team":"t1"}},"spec":{"enabled":true,"description":"a flag"}}`))
	if err != nil {
		b.Fatal(err)
	}
	r := httptest.NewRequest("POST", "/apis/flipt.io/v1alpha1/namespaces/default/flags", nil)
	r.Header.Set("User-Agent", "wrk")
	for _, bc := range []struct {
		name  string
		track func() json.RawMessage
	}{
		{"fieldmanager", func() json.RawMessage {
			d, err := desiredObject(res, "f1", "default", o)
			if err != nil {
				b.Fatal(err)
			}
			return s.trackUpdate(r, res, nil, d)
		}},
		{"kept", func() json.RawMessage {
			m, err := s.trackCreate(r, res, "f1", "default", o)
			if err != nil {
				b.Fatal(err)
			}
			return m
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if len(bc.track()) == 0 {
					b.Fatal("no managed fields")
				}
			}
		})
	}
}
