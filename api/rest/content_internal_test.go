package rest

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// unknownFieldsOfDecoded is how checkFields found unknown fields before it
// decoded lazily: the whole body decoded into any, then walked. It is the
// reference walkUnknown must agree with.
func unknownFieldsOfDecoded(into any, body []byte) []string {
	var doc any
	if json.Unmarshal(body, &doc) != nil {
		return nil
	}
	var out []string
	var walk func(t reflect.Type, doc any, prefix string)
	walk = func(t reflect.Type, doc any, prefix string) {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if t == rawMessageType {
			return
		}
		switch t.Kind() {
		case reflect.Struct:
			m, ok := doc.(map[string]any)
			if !ok {
				return
			}
			fields := map[string]reflect.Type{}
			for i := range t.NumField() {
				f := t.Field(i)
				name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
				if name == "" {
					name = f.Name
				}
				if name != "-" {
					fields[name] = f.Type
				}
			}
			for k, v := range m {
				ft, ok := fields[k]
				if !ok {
					out = append(out, prefix+k)
					continue
				}
				walk(ft, v, prefix+k+".")
			}
		case reflect.Slice:
			xs, ok := doc.([]any)
			if !ok {
				return
			}
			for i, x := range xs {
				walk(t.Elem(), x, strings.TrimSuffix(prefix, ".")+"["+strconv.Itoa(i)+"].")
			}
		}
	}
	walk(reflect.TypeOf(into), doc, "")
	slices.Sort(out)
	return out
}

func unknownFields(into any, body []byte) []string {
	var out []string
	walkUnknown(fieldTreeOf(reflect.TypeOf(into), nil), body, "", &out)
	slices.Sort(out)
	return out
}

// TestUnknownFieldsAsDecoded: the unknown fields found by decoding only
// what a struct or slice of the target type holds are those found by
// decoding the whole body, for bodies of every shape (values of the wrong
// kind, nulls, nested unknowns, arrays, invalid JSON).
func TestUnknownFieldsAsDecoded(t *testing.T) {
	bodies := []string{
		`{"apiVersion":"v1","kind":"Flag","metadata":{"name":"a","labels":{"x":"y"}},"spec":{"enabled":true,"unknown":1}}`,
		`{"apiVersion":"v1","extra":1,"metadata":{"name":"a","nope":{"deep":true},"labels":{"x":"y"}},"spec":{}}`,
		`{"metadata":null,"spec":null,"status":{"x":1}}`,
		`{"metadata":"a string","other":[1,2]}`,
		`{"metadata":{"finalizers":["a"],"ownerReferences":[{"x":1}],"managedFields":[{"manager":"m","bogus":1}]}}`,
		`{"spec":{"typeRef":{"path":"p","revision":"r","bad":1},"attributes":[{"path":"a","x":1},{"revision":"b"},3,null],"backend":{"id":"b","extra":{}},"value":{"any":1}}}`,
		`{"spec":{"attributes":{"not":"a list"},"backend":[1]}}`,
		`{"spec":{"typeRef":null,"attributes":null,"backend":null,"wrong":null}}`,
		`[1,2,3]`,
		`"a string"`,
		`null`,
		`{"unterminated":`,
		`{"a":1,"a":2,"metadata":{"b":1,"b":2}}`,
		`{}`,
		// Read in place: whitespace everywhere, escaped and non-ASCII keys,
		// scalars last in an object, keys given twice with the last value
		// walked, objects of many members.
		" \n{ \"metadata\" :\t{ \"name\" : \"a\" , \"x\" : [ 1 , { \"y\" : 2 } ] } ,\r\n \"spec\" : { } , \"z\" : -1.5e3 } ",
		`{"meta\u0064ata":{"na\u006de":"a","\u00fc":1},"sp\"ec":1,"ü":true,"\ud800":null}`,
		`{"metadata":{"x":1},"metadata":{"y":{"z":1}},"metadata":{"name":"n","w":false}}`,
		`{"metadata":{"labels":{"a":"}"},"q":"\\"},"k":"{[","n":null,"t":true,"f":false,"num":0}`,
		`{"a1":1,"a2":2,"a3":3,"a4":4,"a5":5,"a6":6,"a7":7,"a8":8,"a9":9,"a10":10,"a11":11,"a12":12,"a13":13,"a14":14,"a15":15,"a16":16,"a17":17,"a1":0,"metadata":{"bad":1},"metadata":{"worse":1}}`,
		`{"spec":{"attributes":[{"path":"a","x":1,"x":2}]},"kind":"Flag","kind":"Other"}`,
		`{"metadata":{}} trailing`,
	}
	for _, into := range []any{inObject{}, inTypeInstance{}} {
		for _, b := range bodies {
			got, want := unknownFields(into, []byte(b)), unknownFieldsOfDecoded(into, []byte(b))
			if !slices.Equal(got, want) {
				t.Errorf("%T, %s: unknown fields %q, want %q", into, b, got, want)
			}
		}
	}
}

// TestUnknownFieldsAsDecodedRandom: as TestUnknownFieldsAsDecoded, for
// random documents over the fields of both target types, some indented.
func TestUnknownFieldsAsDecodedRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	keys := []string{"metadata", "spec", "status", "name", "labels", "typeRef", "attributes", "backend", "path", "x", "ü", "a\"b", "<k>"}
	var value func(depth int) any
	value = func(depth int) any {
		switch n := rng.IntN(6); {
		case depth > 3 || n == 0:
			return []any{1.5, "s", true, nil}[rng.IntN(4)]
		case n <= 3:
			m := map[string]any{}
			for range rng.IntN(5) {
				m[keys[rng.IntN(len(keys))]] = value(depth + 1)
			}
			return m
		default:
			l := make([]any, rng.IntN(3))
			for i := range l {
				l[i] = value(depth + 1)
			}
			return l
		}
	}
	for i := range 2000 {
		b, _ := json.Marshal(value(0))
		if i%2 == 1 {
			var ind bytes.Buffer
			_ = json.Indent(&ind, b, " ", "\t")
			b = ind.Bytes()
		}
		for _, into := range []any{inObject{}, inTypeInstance{}} {
			if got, want := unknownFields(into, b), unknownFieldsOfDecoded(into, b); !slices.Equal(got, want) {
				t.Fatalf("%T, %s: unknown fields %q, want %q", into, b, got, want)
			}
		}
	}
}

// BenchmarkUnknownFields: a create's body walked for unknown fields with
// the whole body decoded (baseline) and decoded only where the type looks.
func BenchmarkUnknownFields(b *testing.B) {
	body := []byte(`{"apiVersion":"flipt.io/v1alpha1","kind":"Flag","metadata":{"name":"c-a1-1-1","labels":{"team":"t1"}},"spec":{"enabled":true,"description":"flag number 1","variants":[{"key":"a"},{"key":"b"}]}}`)
	b.Run("decoded", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			unknownFieldsOfDecoded(inObject{}, body)
		}
	})
	b.Run("lazy", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var out []string
			walkUnknown(inObjectFields, body, "", &out)
		}
	})
}
