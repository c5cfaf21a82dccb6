package rest

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

// TestDecodeObjectAsUnmarshal: decodeObject gives what json.Unmarshal
// gives (the object, or the same error), whether the body is plain
// (decoded without reflection) or not; the plain ones are decoded so, and
// have no unknown field (readObject does not look for them).
func TestDecodeObjectAsUnmarshal(t *testing.T) {
	plain := []string{
		`{"apiVersion":"flipt.io/v1alpha1","kind":"Flag","metadata":{"name":"c-a1-1-1"},"spec":{"enabled":true}}`,
		` { "kind" : "Flag" , "metadata" : { "name" : "a" , "namespace" : "default" , "labels" : { "team" : "t1" , "x.io/y" : "" } , "annotations" : { } } , "spec" : [ 1 , { } ] , "status" : null } `,
		`{"metadata":{"generateName":"g-","uid":"u","resourceVersion":"12","generation":3,"creationTimestamp":null,"deletionTimestamp":"2026-01-01T00:00:00Z","deletionGracePeriodSeconds":30,"ownerReferences":[{"x":1}],"finalizers":["f"],"managedFields":[{"manager":"m"}],"selfLink":"/x"}}`,
		`{"spec":"a string","status":{"phase":"x"}}`,
		`{"sp\u0065c":{"a":1}}`,
		`{"metadata":{"labels":{"k\u0031":"v"}}}`,
		`{}`,
	}
	notPlain := []string{
		`{"Kind":"Flag"}`,
		`{"kind":"Flag","kind":"Other"}`,
		`{"metadata":{"name":"a","name":"b"}}`,
		`{"metadata":{"labels":{"a":"1","a":"2"}}}`,
		`{"kind":"Fl\u0061g"}`,
		`{"kind":"Flüg"}`,
		`{"kind":null}`,
		`{"metadata":null}`,
		`{"metadata":{"labels":null}}`,
		`{"metadata":{"labels":{"a":null}}}`,
		`{"metadata":{"labels":{"a":1}}}`,
		`{"metadata":{"name":5}}`,
		`{"kind":5}`,
		`{"extra":1,"kind":"Flag"}`,
		`{"metadata":{"unknown":true}}`,
		`[]`,
		`"a"`,
		`null`,
		`{"kind":`,
		`{"kind":"Flag"} x`,
		``,
	}
	check := func(t *testing.T, body string, wantPlain bool) {
		t.Helper()
		var want inObject
		wantErr := json.Unmarshal([]byte(body), &want)
		got, err := decodeObject([]byte(body))
		if wantErr != nil {
			if err == nil || !strings.Contains(err.Error(), wantErr.Error()) {
				t.Fatalf("%s: error %v, want one saying %v", body, err, wantErr)
			}
			return
		}
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: decoded\n%#v, %v\njson.Unmarshal decodes\n%#v", body, got, err, want)
		}
		if _, ok := decodeObjectPlain([]byte(body)); ok != wantPlain {
			t.Fatalf("%s: decoded without reflection: %v, want %v", body, ok, wantPlain)
		}
		// readObject takes a plain body without looking for unknown
		// fields: there must be none.
		var unknown []string
		if walkUnknown(inObjectFields, []byte(body), "", &unknown); wantPlain && len(unknown) > 0 {
			t.Fatalf("%s: plain, with unknown fields %q", body, unknown)
		}
	}
	for _, b := range plain {
		check(t, b, true)
	}
	for _, b := range notPlain {
		check(t, b, false)
	}
	// Random bodies over the fields and shapes that matter.
	rng := rand.New(rand.NewPCG(7, 8))
	keys := []string{"apiVersion", "kind", "metadata", "spec", "status", "name", "labels", "annotations", "generation", "namespace", "Name", "x"}
	strs := []any{"a", "flag-1", "", "ü", `q"`, "<&>", nil, 1, true}
	var value func(depth int) any
	value = func(depth int) any {
		if depth > 2 || rng.IntN(3) == 0 {
			return strs[rng.IntN(len(strs))]
		}
		m := map[string]any{}
		for range rng.IntN(5) {
			m[keys[rng.IntN(len(keys))]] = value(depth + 1)
		}
		return m
	}
	for range 3000 {
		b, _ := json.Marshal(value(0))
		_, ok := decodeObjectPlain(b)
		check(t, string(b), ok)
	}
}

// BenchmarkDecodeObject: a create's body decoded by json.Unmarshal
// ("unmarshal", as before) and by decodeObject ("plain").
func BenchmarkDecodeObject(b *testing.B) {
	body := []byte(`{"apiVersion":"flipt.io/v1alpha1","kind":"Flag","metadata":{"name":"c-a1-12-3456"},"spec":{"enabled":true}}`)
	b.Run("unmarshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var o inObject
			if err := json.Unmarshal(body, &o); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("plain", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := decodeObject(body); err != nil {
				b.Fatal(err)
			}
		}
	})
}
