package manifest_test

import (
	"bytes"
	"testing"

	"github.com/cairn-dev/cairn/manifest"
)

// FuzzDecode feeds arbitrary manifest files (cairn apply -f, REST apply):
// Decode returns documents or an error naming the source, never panics.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		"kind: Type\npath: cap.type.a\nrevision: 0.1.0\n",
		"kind: TypeInstance\ntypeRef: {path: cap.type.a, revision: 0.1.0}\nvalue: {a: 1}\n---\nkind: Type\n",
		`{"kind":"TypeInstance","typeRef":{"path":"a","revision":"1"},"value":[1,2]}`,
		"apiVersion: cup.flipt.io/v1alpha1\nkind: ResourceDefinition\nmetadata: {name: flags.flipt.io}\n",
		"a: &x [*x]\n", "---\n---\n", "\t- :", "kind: [", "kind: TypeInstance\nvalue: !!binary AAAA\n",
		"a: &a [1]\nb: &b [*a,*a,*a,*a]\nc: [*b,*b,*b,*b]\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		docs, err := manifest.Decode(bytes.NewReader(data), "fuzz.yaml")
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error")
			}
			return
		}
		for _, d := range docs {
			if d.Type == nil && d.Instance == nil {
				t.Fatalf("document %+v is neither a Type nor an instance", d)
			}
		}
	})
}
