package deps

import (
	"testing"
)

// FuzzTemplate: any text either fails to parse with an error, or parses
// into references that each name something the stack declares, in a place
// that may name it, and renders once every reference has a value.
func FuzzTemplate(f *testing.F) {
	st := stackYAML(f, `name: fz
version: 1.0.0
parameters: {properties: {logLevel: {type: string}}}
credentials: [{name: token}]
outputs: [{name: endpoint}]
dependencies:
  requires:
  - {name: infra, bundle: infra@1.0.0}
  - {name: app, bundle: app@1.0.0}
`)
	for _, s := range []string{
		"plain", "${bundle.parameters.logLevel}", "${ bundle.credentials.token }",
		"https://${bundle.dependencies.infra.outputs.ip}:${outputs.port}/myapp",
		"${installation.root.id}", "${ installation.Namespace }", "$${not}", "${", "${}", "${a.b[0].c}",
		"${bundle.parameters.logLevel.deep[2]}", "${bundle.dependencies.nope.outputs.x}", "${bundle.credentials.token}x}",
	} {
		f.Add(s, uint8(0))
	}
	f.Fuzz(func(t *testing.T, s string, u uint8) {
		use := use(u%4 + 1)
		tm, err := parseTemplate(s, use, st, "app")
		if err != nil {
			return
		}
		vals := map[string]any{}
		for _, r := range tm.refs {
			if !use.allows(r.kind) {
				t.Fatalf("%q: %v allowed in %s", s, r.kind, use)
			}
			switch r.kind {
			case refParam:
				if st.parameter(r.name) == nil {
					t.Fatalf("%q: unknown parameter %q accepted", s, r.name)
				}
			case refCred:
				if st.credential(r.name) == nil || !isWholeRef(s) {
					t.Fatalf("%q: credential %q accepted", s, r.name)
				}
			case refDepOutput:
				if !hasRequirement(st, r.dep) {
					t.Fatalf("%q: unknown dependency %q accepted", s, r.dep)
				}
			}
			vals[r.path] = "v"
		}
		if _, err := tm.t.Eval(func(p string) (any, bool) { v, ok := vals[p]; return v, ok }); err != nil {
			t.Fatalf("%q: %v", s, err)
		}
	})
}

// FuzzParseDependencies: any document is refused with an error or
// accepted as a section that validates.
func FuzzParseDependencies(f *testing.F) {
	for _, s := range []string{
		`{"requires":[{"name":"a","bundle":"a@1.0.0"}]}`,
		`{"requires":[{"name":"a","bundle":{"reference":"a","version":"1.x","interface":{"id":"x","document":{"outputs":[{"name":"o","$id":"i"}]}}},"sharing":{"mode":"group","group":{"name":"g"}}}],"provides":{"interface":{"id":"p"}}}`,
		`{"requires":[{"name":"a","bundle":{}}]}`, `[]`, `null`, `{"requires":{}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := ParseDependencies(b)
		if err != nil {
			return
		}
		if err := d.Validate(); err != nil {
			t.Fatalf("accepted, then invalid: %v", err)
		}
	})
}
