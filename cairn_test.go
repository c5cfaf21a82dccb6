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
