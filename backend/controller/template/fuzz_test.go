package template

import (
	"encoding/json"
	"testing"
)

// FuzzDecode feeds arbitrary resource files, as Git sync reads them from a
// repository anyone with push access writes: Decode returns JSON or an
// error naming the file.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		"apiVersion: flipt.io/v1alpha1\nkind: Flag\nmetadata: {name: a, namespace: default}\nspec: {enabled: true}\n",
		`{"apiVersion":"flipt.io/v1alpha1","kind":"Flag","metadata":{"name":"a"},"spec":null}`,
		"a: &a [1]\nb: [*a,*a]\n", "{", "- - - -", "? [a]\n: b\n", "a: !!float NaN\n", "1e999999",
	} {
		f.Add(true, []byte(s))
		f.Add(false, []byte(s))
	}
	f.Fuzz(func(t *testing.T, yamlName bool, data []byte) {
		name := "flags/default/a.json"
		if yamlName {
			name = "flags/default/a.yaml"
		}
		doc, err := Decode(name, data)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error")
			}
			return
		}
		if !json.Valid(doc) {
			t.Fatalf("Decode(%s) = %q, not JSON", name, doc)
		}
	})
}
