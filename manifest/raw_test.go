package manifest_test

import (
	"strings"
	"testing"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/manifest"
)

func TestSplit(t *testing.T) {
	tests := []struct {
		name  string
		in    string
		kinds []string // apiVersion kind of each document
		items []int    // Pos.Item of each document
		err   string   // part of the error, "" for none
	}{
		{"YAML documents of any kind", "apiVersion: flipt.io/v1alpha1\nkind: Flag\nmetadata: {name: a}\n---\n# comment\n---\napiVersion: hub.cairn.dev/v1\nkind: Type\n",
			[]string{"flipt.io/v1alpha1 Flag", "hub.cairn.dev/v1 Type"}, []int{-1, -1}, ""},
		{"a List is flattened", `{"apiVersion": "v1", "kind": "List", "items": [{"apiVersion": "a/v1", "kind": "A"}, {"apiVersion": "b/v1", "kind": "B"}]}`,
			[]string{"a/v1 A", "b/v1 B"}, []int{0, 1}, ""},
		{"a JSON array is flattened", `[{"apiVersion": "a/v1", "kind": "A"}]`, []string{"a/v1 A"}, []int{0}, ""},
		{"an OCF manifest", "ocfVersion: 0.0.1\nkind: Type\n", []string{" Type"}, []int{-1}, ""},
		{"not an object", "- 1\n", nil, nil, "must be an object"},
		{"a List of another apiVersion", `{"apiVersion": "x/v1", "kind": "List", "items": []}`, nil, nil, "not supported for kind List"},
		{"nested Lists", `{"apiVersion": "v1", "kind": "List", "items": [{"apiVersion": "v1", "kind": "List", "items": []}]}`, nil, nil, "cannot hold another List"},
		{"bad YAML is reported, the rest kept", "kind: A\n---\nkind: [\n", []string{" A"}, []int{-1}, "document 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			docs, err := manifest.Split(strings.NewReader(tt.in), "f.yaml")
			if tt.err == "" && err != nil || tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)) {
				t.Fatalf("err = %v, want %q", err, tt.err)
			}
			if err != nil && cairn.ErrorCode(err) != cairn.CodeInvalid {
				t.Errorf("code = %s, want Invalid", cairn.ErrorCode(err))
			}
			if len(docs) != len(tt.kinds) {
				t.Fatalf("got %d documents, want %d", len(docs), len(tt.kinds))
			}
			for i, d := range docs {
				if got := d.APIVersion + " " + d.Kind; got != tt.kinds[i] || d.Pos.Item != tt.items[i] {
					t.Errorf("document %d = %q item %d, want %q item %d", i, got, d.Pos.Item, tt.kinds[i], tt.items[i])
				}
			}
		})
	}
}

func TestDecodeRawKeepsPosition(t *testing.T) {
	docs, err := manifest.Split(strings.NewReader("kind: A\n---\napiVersion: hub.cairn.dev/v1\nkind: Type\nmetadata: {name: cap.type.x}\nspec: {revision: 0.1.0}\n"), "f.yaml")
	if err != nil || len(docs) != 2 {
		t.Fatalf("Split = %d docs, %v", len(docs), err)
	}
	got, err := manifest.DecodeRaw(docs[1])
	if err != nil || len(got) != 1 || got[0].Type == nil || got[0].Type.Path != "cap.type.x" || got[0].Pos.Index != 1 || got[0].Pos.Line != 3 {
		t.Errorf("DecodeRaw = %+v, %v", got, err)
	}
	if _, err := manifest.DecodeRaw(docs[0]); err == nil || !strings.Contains(err.Error(), "f.yaml: document 1") {
		t.Errorf("DecodeRaw of an unknown kind = %v, want an error naming the document", err)
	}
}
