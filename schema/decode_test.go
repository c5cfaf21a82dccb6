package schema

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// sameAsLibrary fails unless decodeInstance gives doc's value or error as
// jsonschema.UnmarshalJSON does.
func sameAsLibrary(t *testing.T, doc []byte) {
	t.Helper()
	want, werr := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	got, gerr := decodeInstance(doc)
	if fmt.Sprint(gerr) != fmt.Sprint(werr) {
		t.Fatalf("%q: error %v, the library's %v", doc, gerr, werr)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%q: decoded %#v, the library %#v", doc, got, want)
	}
}

func TestDecodeInstanceAsLibrary(t *testing.T) {
	for _, doc := range []string{
		`{"enabled":true}`, `{}`, `[]`, `[{}]`, `{"a":[]}`, `null`, `true`, `false`, `0`, `-0`, `1.5e3`, `-12.25E-7`, `1E+2`,
		` { "a" : [ 1 , 2.0 , "x" , null , false ] , "b" : { } } `, "\t\r\n{\"a\":1}\n",
		`{"a":1,"a":2}`, `{"a":{"b":1},"a":[2]}`, `"héllo ✓"`, `{"ключ":"значение"}`, "\"\x7f\"",
		// Taken by the library alone: escapes, bad UTF-8, invalid documents.
		`"a\"b"`, `{"a\u0041":1}`, `"\ud83d\ude00"`, "\"\xff\"", "\"a\x01\"", `01`, `1.`, `.5`, `-`, `1e`, `+1`, `tru`, `nul`,
		`truex`, `{"a":1,}`, `[1,]`, `{"a"}`, `{"a":}`, `{a:1}`, `[1 2]`, `{"a":1}{}`, `{"a":1} x`, ``, ` `, `[`, `{"a":"b`,
		`1 2`, `"x"y`, `{"a":1]`, `[1}`, strings.Repeat("[", maxScanDepth+5) + strings.Repeat("]", maxScanDepth+5),
		strings.Repeat(`{"a":`, maxScanDepth) + "1" + strings.Repeat("}", maxScanDepth),
	} {
		sameAsLibrary(t, []byte(doc))
	}
}

// TestDecodeInstanceAsLibraryRandom: random documents, valid and broken.
func TestDecodeInstanceAsLibraryRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 17))
	for range 3000 {
		doc := randomDoc(r, 0)
		if r.IntN(4) == 0 && len(doc) > 0 { // break it
			b := []byte(doc)
			const bad = "{}[],:\"\\ x0-e.\xff\x01"
			b[r.IntN(len(b))] = bad[r.IntN(len(bad))]
			doc = string(b)
		}
		sameAsLibrary(t, []byte(doc))
	}
}

func randomDoc(r *rand.Rand, depth int) string {
	ws := func() string { return []string{"", "", " ", "\n\t", "\r "}[r.IntN(5)] }
	n := 9
	if depth > 3 {
		n = 6 // scalars only
	}
	switch r.IntN(n) {
	case 0:
		return "null"
	case 1:
		return []string{"true", "false"}[r.IntN(2)]
	case 2:
		return []string{"0", "-0", "12", "-3.25", "1e9", "2E-3", "6.02e+23", "1e500", "123456789012345678901234567890"}[r.IntN(9)]
	case 3, 4, 5:
		return randomString(r)
	case 6:
		var b strings.Builder
		b.WriteString("[" + ws())
		for i := range r.IntN(4) {
			if i > 0 {
				b.WriteString("," + ws())
			}
			b.WriteString(randomDoc(r, depth+1) + ws())
		}
		return b.String() + "]"
	default:
		var b strings.Builder
		b.WriteString("{" + ws())
		for i := range r.IntN(5) {
			if i > 0 {
				b.WriteString("," + ws())
			}
			b.WriteString(randomString(r) + ws() + ":" + ws() + randomDoc(r, depth+1) + ws())
		}
		return b.String() + "}"
	}
}

func randomString(r *rand.Rand) string {
	parts := []string{"a", "b", "key", "é", "✓", `\n`, `\"`, `\u00e9`, "\xc3", " ", "\x7f", "a"}
	var b strings.Builder
	b.WriteByte('"')
	for range r.IntN(4) {
		b.WriteString(parts[r.IntN(len(parts))])
	}
	b.WriteByte('"')
	return b.String()
}

func BenchmarkDecodeInstance(b *testing.B) {
	for _, doc := range [][]byte{[]byte(`{"enabled":true}`), []byte(`{"enabled":true,"description":"flag number 42","variants":[{"key":"on","weight":50.5},{"key":"off","weight":49.5}]}`)} {
		b.Run(fmt.Sprintf("library/%dB", len(doc)), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc)); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("scanner/%dB", len(doc)), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := decodeInstance(doc); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
