package policy

import (
	"testing"
)

// FuzzParse feeds arbitrary policy documents (cairn policy apply, the REST
// and GraphQL policy endpoints): Parse refuses with an Invalid error or
// returns a policy an index can be built from.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		`{"typeInstance":{"rules":[{"typeRef":{"path":"cap.*"},"backend":{"id":"00000000-0000-4000-8000-000000000001"}}]}}`,
		`{"typeInstance":{"rules":[{"typeRef":{"path":"cap.type.a","revision":"0.1.0"}}]}}`,
		`{}`, `[]`, `null`, `{"rules":null}`, `{"unknown":1}`, `{"rules":[{"typeRef":{"path":""}}]}`, `{"rules":[{}]}{}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		p, err := Parse(doc)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error")
			}
			return
		}
		for _, c := range p.Check() {
			if c.Message == "" {
				t.Fatalf("cause %+v has no message", c)
			}
		}
		_ = p.Injections()
		ix := NewIndex(p.TypeInstance.Rules)
		if ix.Len() != len(p.TypeInstance.Rules) {
			t.Fatalf("index of %d rules has %d", len(p.TypeInstance.Rules), ix.Len())
		}
		_ = ix.Select("cap.type.a", "0.1.0")
	})
}
