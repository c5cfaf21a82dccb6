package manifest_test

import (
	"strings"
	"testing"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/manifest"
)

func TestDecodeCupResourceDefinition(t *testing.T) {
	src := `{"apiVersion": "cup.flipt.io/v1alpha1", "kind": "ResourceDefinition",
 "metadata": {"name": "flags.flipt.io"},
 "names": {"kind": "Flag", "singular": "flag", "plural": "flags"},
 "spec": {"group": "flipt.io", "versions": {
   "v1alpha1": {"type": "object", "properties": {"enabled": {"type": "boolean"}}},
   "v1": {"schema": {"type": "object", "properties": {"description": {"type": "string"}}}}}}}`
	docs, err := manifest.Decode(strings.NewReader(src), "flags.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) != 2 {
		t.Fatalf("documents = %d, want one Type per version", len(docs))
	}
	want := []struct{ version, revision, prop string }{
		{"v1", "1.0.0", "description"},
		{"v1alpha1", "1.0.0-alpha.1", "enabled"},
	}
	for i, w := range want {
		ty := docs[i].Type
		if docs[i].Kind != manifest.KindType || ty == nil {
			t.Fatalf("document %d is %s, want a Type", i, docs[i].Kind)
		}
		if ty.Path != "io.flipt.flag" || ty.Revision != w.revision || ty.Group != "flipt.io" || ty.Version != w.version {
			t.Errorf("Type %d = %s:%s %s/%s", i, ty.Path, ty.Revision, ty.Group, ty.Version)
		}
		if ty.Names == nil || ty.Names.Kind != "Flag" || ty.Names.Singular != "flag" || ty.Names.Plural != "flags" {
			t.Errorf("names = %+v", ty.Names)
		}
		if !strings.Contains(string(ty.JSONSchema), w.prop) {
			t.Errorf("schema %s does not hold %q", ty.JSONSchema, w.prop)
		}
	}
}

func TestDecodeCupErrors(t *testing.T) {
	tests := []struct {
		name, src string
		want      []string
	}{
		{"wrong kind", `{"apiVersion":"cup.flipt.io/v1alpha1","kind":"Flag"}`, []string{`"Flag" is not supported`}},
		// cupd's other configuration documents, as cup's docs show them:
		// what they are in cairn, and where that is written.
		{"template Controller", `{"apiVersion":"cup.flipt.io/v1alpha1","kind":"Controller","metadata":{"name":"some-template-controller"},
			"spec":{"type":"template","spec":{"directory_template":"{{ .Namespace }}/*.json","path_template":"{{ .Namespace }}/{{ .Name }}.json"}}}`,
			[]string{`"Controller" is not supported`, "Git backend", "paths.resource", "path_template", "paths.list", "directory_template", "docs/git.md"}},
		{"wasm Controller", `{"apiVersion":"cup.flipt.io/v1alpha1","kind":"Controller","metadata":{"name":"flipt"},"spec":{"type":"wasm","spec":{"path":"flipt.wasm"}}}`,
			[]string{"Git backend", "controller.wasm.module", "docs/wasm.md"}},
		{"Binding", `{"apiVersion":"cup.flipt.io/v1alpha1","kind":"Binding","metadata":{"name":"flipt"},"spec":{"controller":"flipt","resources":["flipt.io/v1alpha1/flags"]}}`,
			[]string{`"Binding" is not supported`, "policy rule", "typeInstance.rules", "docs/policy.md"}},
		{"missing parts", `{"apiVersion":"cup.flipt.io/v1alpha1","kind":"ResourceDefinition","metadata":{"name":"x"},"names":{},"spec":{"versions":{}}}`,
			[]string{"names/kind is required", "names/plural is required", "spec/group is required", "spec/versions must list at least one version"}},
		// Without versions a definition would register nothing, silently.
		{"no versions", `{"apiVersion":"cup.flipt.io/v1alpha1","kind":"ResourceDefinition","metadata":{"name":"flags.flipt.io"},"names":{"kind":"Flag","plural":"flags"},"spec":{"group":"flipt.io"}}`,
			[]string{"spec/versions must list at least one version"}},
		{"null versions", `{"apiVersion":"cup.flipt.io/v1alpha1","kind":"ResourceDefinition","metadata":{"name":"flags.flipt.io"},"names":{"kind":"Flag","plural":"flags"},"spec":{"group":"flipt.io","versions":null}}`,
			[]string{"spec/versions must list at least one version"}},
		{"no spec", `{"apiVersion":"cup.flipt.io/v1alpha1","kind":"ResourceDefinition","metadata":{"name":"flags.flipt.io"},"names":{"kind":"Flag","plural":"flags"}}`,
			[]string{"spec/group is required", "spec/versions must list at least one version"}},
		{"bad version", `{"apiVersion":"cup.flipt.io/v1alpha1","kind":"ResourceDefinition","metadata":{"name":"flags.flipt.io"},
			"names":{"kind":"Flag","plural":"flags"},"spec":{"group":"flipt.io","versions":{"version1":{}}}}`, []string{"spec/versions/version1", "v1alpha1"}},
		{"name mismatch", `{"apiVersion":"cup.flipt.io/v1alpha1","kind":"ResourceDefinition","metadata":{"name":"flag.flipt.io"},
			"names":{"kind":"Flag","plural":"flags"},"spec":{"group":"flipt.io","versions":{"v1":{}}}}`, []string{"flags.flipt.io"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := manifest.Decode(strings.NewReader(tt.src), "rd.json")
			if cairn.ErrorCode(err) != cairn.CodeInvalid {
				t.Fatalf("error %v, want Invalid", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}
