package wasm

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzControllerOutput feeds arbitrary stdout of a WASM controller: a list
// is objects only, a message has text, and nothing panics.
func FuzzControllerOutput(f *testing.F) {
	for _, s := range []string{
		`[{"metadata":{"name":"a"}}]`, `{"a":1}{"b":2}`, `{"a":1} 2`, `[1]`, `[`, ``, ` `, `{"message":"not found","code":"NotFound"}`,
		`{"message":""}`, "\xff", `{"a":1}]`, `[{"a":1},null]`, `"x"`, `{"a":1e999}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, out []byte) {
		items, err := parseList(out)
		if err == nil {
			for i, it := range items {
				if !isObject(it) {
					t.Fatalf("item %d %q is not an object", i, it)
				}
				// Numbers decode as json.Number: JSON has no range, so a
				// number past float64's is still a valid value to keep.
				dec := json.NewDecoder(bytes.NewReader(it))
				dec.UseNumber()
				var m map[string]any
				if err := dec.Decode(&m); err != nil {
					t.Fatalf("item %d %q does not decode: %v", i, it, err)
				}
			}
		} else if err.Error() == "" {
			t.Fatal("empty error")
		}
		if m, ok := parseMessage(out); ok && m.Message == "" {
			t.Fatal("a message without text was accepted")
		}
		_, _ = metadataOf(out)
		_, _ = stderrNotFound(2, nil, out)
		_ = excerpt(out)
	})
}
