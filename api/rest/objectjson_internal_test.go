package rest

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/hub"
)

// writeAnswerCases are instances as writes answer with them, plain and
// with every field json.Marshal writes by a rule of its own.
func writeAnswerCases() map[string]cairn.Instance {
	created := time.Date(2026, 11, 24, 2, 0, 0, 123456000, time.UTC)
	base := cairn.Instance{ID: "019ab1c2-0000-7000-8000-000000000001", Name: "c-a1-1-1", Namespace: "default", Alias: "c-a1-1-1", Seq: 1234,
		TypeRef: cairn.TypeRef{Path: "io.flipt.flag", Revision: "1.0.0-alpha.1"}, CreatedAt: created,
		Backend: cairn.BackendRef{ID: cairn.BuiltinBackendID, Abstract: true}, Uses: []string{cairn.BuiltinBackendID},
		ManagedFields: json.RawMessage(`[{"manager":"wrk","operation":"Update","apiVersion":"flipt.io/v1alpha1","time":"2026-11-24T02:00:00Z","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{".":{},"f:enabled":{}}}}]`),
		Latest:        cairn.ResourceVersion{ResourceVersion: 1, CreatedBy: "system:anonymous", CreatedAt: created, Value: json.RawMessage(`{"enabled":true}`)}}
	with := func(f func(*cairn.Instance)) cairn.Instance {
		i := base
		f(&i)
		return i
	}
	return map[string]cairn.Instance{
		"created flag": base,
		"labels and annotations": with(func(i *cairn.Instance) {
			i.Labels = map[string]string{"team": "t1", "a": "b", "z.io/k": "v"}
			i.Annotations = map[string]string{"note": "x y", "hub.cairn.dev/backend": "b"}
		}),
		"html in a label":      with(func(i *cairn.Instance) { i.Labels = map[string]string{"a": "<b>&"} }),
		"quote in a name":      with(func(i *cairn.Instance) { i.Annotations = map[string]string{"q": `say "hi"\`} }),
		"non-ASCII annotation": with(func(i *cairn.Instance) { i.Annotations = map[string]string{"n": "grüß\u2028"} }),
		"control character":    with(func(i *cairn.Instance) { i.Annotations = map[string]string{"n": "a\tb\x01"} }),
		"spec with spaces in strings": with(func(i *cairn.Instance) {
			i.Latest.Value = json.RawMessage(`{"description":"flag number 1","escaped":"a \"b\" \\ c","n":-1.5e3,"x":null,"l":[true,false,{}]}`)
		}),
		"spec with spaces between tokens": with(func(i *cairn.Instance) { i.Latest.Value = json.RawMessage("{ \"a\" : 1,\n\"b\":[ 2 ] }") }),
		"spec with html":                  with(func(i *cairn.Instance) { i.Latest.Value = json.RawMessage(`{"a":"<script>&"}`) }),
		"spec with unicode":               with(func(i *cairn.Instance) { i.Latest.Value = json.RawMessage(`{"a":"ü\u2028"}`) }),
		"spec invalid":                    with(func(i *cairn.Instance) { i.Latest.Value = json.RawMessage(`{"a":`) }),
		"spec null":                       with(func(i *cairn.Instance) { i.Latest.Value = json.RawMessage(`null`) }),
		"no spec":                         with(func(i *cairn.Instance) { i.Latest.Value = nil }),
		"no managed fields, no uses":      with(func(i *cairn.Instance) { i.ManagedFields, i.Uses = nil, nil }),
		"external backend with context": with(func(i *cairn.Instance) {
			i.Backend = cairn.BackendRef{ID: "git-1"}
			i.Latest.Context = json.RawMessage(`{"path":"flags/a.json","branch":"main"}`)
		}),
		"locked, used, version 7": with(func(i *cairn.Instance) {
			i.LockedBy, i.UsedBy, i.Latest.ResourceVersion = "owner-1", []string{"u1", "u2"}, 7
			i.Uses = []string{"b", "a"}
		}),
		"deletion requested": with(func(i *cairn.Instance) {
			i.Annotations = map[string]string{hub.AnnotationDeletionRequested: "2026-11-24T02:00:00Z"}
		}),
		"status reported":   with(func(i *cairn.Instance) { i.Status = json.RawMessage(`{"conditions":[{"type":"Ready"}],"alias":"x"}`) }),
		"empty everything":  {},
		"zero time, no seq": with(func(i *cairn.Instance) { i.CreatedAt, i.Seq = time.Time{}, 0 }),
		"empty maps and lists": with(func(i *cairn.Instance) {
			i.Labels, i.Annotations, i.Uses, i.UsedBy = map[string]string{}, map[string]string{}, []string{}, []string{}
		}),
	}
}

// TestObjectJSONAsMarshal: a write's answer is byte for byte, with the
// same headers, what writeJSON (json.Encoder) writes, whether
// appendObjectJSON encodes it or hands it back; the plain cases are
// encoded without json.Marshal.
func TestObjectJSONAsMarshal(t *testing.T) {
	res := &resource{group: "flipt.io", version: "v1alpha1", kind: "Flag", plural: "flags"}
	fast := map[string]bool{"created flag": true, "labels and annotations": true, "spec with spaces in strings": true, "spec null": true,
		"no spec": true, "no managed fields, no uses": true, "external backend with context": true, "locked, used, version 7": true,
		"deletion requested": true, "empty everything": true, "zero time, no seq": true, "empty maps and lists": true}
	check := func(t *testing.T, name string, inst cairn.Instance, wantFast bool) {
		t.Helper()
		o := toObject(res, inst)
		want := httptest.NewRecorder()
		writeJSON(want, http.StatusCreated, o)
		got := httptest.NewRecorder()
		writeObjectJSON(got, http.StatusCreated, o)
		if !bytes.Equal(got.Body.Bytes(), want.Body.Bytes()) || got.Code != want.Code || got.Header().Get("Content-Type") != want.Header().Get("Content-Type") || len(got.Header()) != len(want.Header()) {
			t.Fatalf("%s: wrote %d %v\n%s\nwriteJSON writes %d %v\n%s", name, got.Code, got.Header(), got.Body, want.Code, want.Header(), want.Body)
		}
		if _, ok := appendObjectJSON(nil, &o); ok != wantFast {
			t.Fatalf("%s: encoded without json.Marshal: %v, want %v", name, ok, wantFast)
		}
	}
	for name, inst := range writeAnswerCases() {
		check(t, name, inst, fast[name])
	}
	// Random labels, annotations and specs over the bytes that matter.
	rng := rand.New(rand.NewPCG(3, 4))
	alphabet := []string{"a", "Z", "0", " ", `"`, `\`, "<", ">", "&", "ü", "\u2028", "\x01", "\x7f", ".", "/", "-"}
	word := func() string {
		var b []byte
		for range rng.IntN(5) {
			b = append(b, alphabet[rng.IntN(len(alphabet))]...)
		}
		return string(b)
	}
	for i := range 2000 {
		inst := writeAnswerCases()["created flag"]
		inst.Labels = map[string]string{word(): word(), word(): word()}
		inst.Annotations = map[string]string{word(): word()}
		inst.Name, inst.Latest.CreatedBy = word(), word()
		spec, _ := json.Marshal(map[string]any{word(): word(), "n": i, "l": []any{word(), nil, true}})
		if i%3 == 0 {
			var out bytes.Buffer
			_ = json.Indent(&out, spec, "", " ")
			spec = out.Bytes()
		}
		inst.Latest.Value = spec
		o := toObject(res, inst)
		_, ok := appendObjectJSON(nil, &o)
		check(t, "random", inst, ok)
	}
}

// BenchmarkWriteAnswer encodes a created flag's answer with json.Encoder
// ("encoder", as before) and with appendObjectJSON ("append").
func BenchmarkWriteAnswer(b *testing.B) {
	res := &resource{group: "flipt.io", version: "v1alpha1", kind: "Flag", plural: "flags"}
	o := toObject(res, writeAnswerCases()["created flag"])
	w := &discardWriter{h: http.Header{}}
	b.Run("encoder", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			writeJSON(w, http.StatusCreated, o)
		}
	})
	b.Run("append", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			writeObjectJSON(w, http.StatusCreated, o)
		}
	})
}

// discardWriter is a ResponseWriter that keeps nothing.
type discardWriter struct{ h http.Header }

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) WriteHeader(int)             {}
func (w *discardWriter) Write(b []byte) (int, error) { return len(b), nil }
