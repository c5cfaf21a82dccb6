package cairn_test

import (
	"testing"

	"github.com/cairn-dev/cairn"
)

func TestSameAttributes(t *testing.T) {
	a := cairn.AttributeRef{Path: "cap.attribute.a", Revision: "0.1.0"}
	a2 := cairn.AttributeRef{Path: "cap.attribute.a", Revision: "0.2.0"}
	b := cairn.AttributeRef{Path: "cap.attribute.b", Revision: "0.1.0"}
	for _, tt := range []struct {
		name string
		x, y []cairn.AttributeRef
		want bool
	}{
		{"both empty", nil, []cairn.AttributeRef{}, true},
		{"same order", []cairn.AttributeRef{a, b}, []cairn.AttributeRef{a, b}, true},
		{"other order", []cairn.AttributeRef{b, a}, []cairn.AttributeRef{a, b}, true},
		{"another revision", []cairn.AttributeRef{a}, []cairn.AttributeRef{a2}, false},
		{"one more", []cairn.AttributeRef{a}, []cairn.AttributeRef{a, b}, false},
		{"a repeat is not another attribute", []cairn.AttributeRef{a, a}, []cairn.AttributeRef{a, b}, false},
	} {
		if got := cairn.SameAttributes(tt.x, tt.y); got != tt.want {
			t.Errorf("%s: SameAttributes(%v, %v) = %v, want %v", tt.name, tt.x, tt.y, got, tt.want)
		}
	}
}

func TestJSONEqual(t *testing.T) {
	for _, tt := range []struct {
		a, b string
		want bool
	}{
		{``, ``, true},
		{``, `null`, false},
		{`{"a":1,"b":[1,2]}`, `{ "b": [1, 2], "a": 1.0 }`, true},
		{`{"a":1}`, `{"a":1,"b":null}`, false},
		{`[1,2]`, `[2,1]`, false},
		{`"x"`, `"x"`, true},
		{`{not json`, `{not json`, true},
		{`{not json`, `{}`, false},
	} {
		if got := cairn.JSONEqual([]byte(tt.a), []byte(tt.b)); got != tt.want {
			t.Errorf("JSONEqual(%s, %s) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
	}
}

func TestIsStorageBackend(t *testing.T) {
	marked := cairn.Instance{ID: "b", Latest: cairn.ResourceVersion{Attributes: []cairn.AttributeRef{{Path: cairn.StorageAttributePath, Revision: cairn.CoreRevision}}}}
	for _, tt := range []struct {
		name string
		in   cairn.Instance
		want bool
	}{
		{"the built-in backend", cairn.Instance{ID: cairn.BuiltinBackendID}, true},
		{"marked with the storage attribute", marked, true},
		{"another instance", cairn.Instance{ID: "x", Latest: cairn.ResourceVersion{Attributes: []cairn.AttributeRef{{Path: "cap.attribute.other", Revision: "0.1.0"}}}}, false},
	} {
		if got := tt.in.IsStorageBackend(); got != tt.want {
			t.Errorf("%s: IsStorageBackend() = %v, want %v", tt.name, got, tt.want)
		}
	}
}
