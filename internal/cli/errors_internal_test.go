package cli

import (
	"bytes"
	"testing"

	"github.com/cairn-dev/cairn"
)

// An error says each cause once: on its own line under a summary, not also
// in the summary.
func TestPrintErrorSaysEachCauseOnce(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"causes in the REST API's spelling",
			&cairn.Error{Code: cairn.CodeInvalid, Subject: `TypeInstance "bad"`,
				Msg:    "value does not match Type a.b:0.1.0: spec/value must NOT have additional properties, spec/value/port must be integer",
				Causes: []cairn.Cause{{Field: "spec", Message: "must NOT have additional properties"}, {Field: "spec.port", Message: "must be integer"}}},
			"error: TypeInstance \"bad\": value does not match Type a.b:0.1.0:\n  spec must NOT have additional properties\n  spec.port must be integer\n"},
		{"a cause whose message has commas",
			&cairn.Error{Code: cairn.CodeInvalid, Msg: "f.yaml: document 1 (line 1): invalid document: spec/valeu is not a known field (known: typeRef, value)",
				Causes: []cairn.Cause{{Field: "spec/valeu", Message: "is not a known field (known: typeRef, value)"}}},
			"error: f.yaml: document 1 (line 1): invalid document:\n  spec.valeu is not a known field (known: typeRef, value)\n"},
		{"causes joined by semicolons, without fields",
			&cairn.Error{Code: cairn.CodeInvalid, Msg: "invalid parameters of X: spec must have required property 'a'; spec must have required property 'b'",
				Causes: []cairn.Cause{{Message: "spec must have required property 'a'"}, {Message: "spec must have required property 'b'"}}},
			"error: invalid parameters of X:\n  spec must have required property 'a'\n  spec must have required property 'b'\n"},
		{"a message that does not list its causes",
			&cairn.Error{Code: cairn.CodeInvalid, Msg: `TypeInstance "x" cannot be changed this way: see below`,
				Causes: []cairn.Cause{{Field: "spec/typeRef", Message: "differs"}}},
			"error: TypeInstance \"x\" cannot be changed this way: see below\n  spec.typeRef differs\n"},
		{"a message that lists other causes",
			&cairn.Error{Code: cairn.CodeInvalid, Msg: "invalid: spec/a must be integer, spec/b must be string",
				Causes: []cairn.Cause{{Field: "spec/a", Message: "must be integer"}}},
			"error: invalid: spec/a must be integer, spec/b must be string\n  spec.a must be integer\n"},
		{"causes in the hub's spelling, as local mode gets them",
			&cairn.Error{Code: cairn.CodeInvalid, Subject: `TypeInstance "i"`,
				Msg:    "value does not match Type a.b:0.1.0: spec/value/host must be string, spec/value/ports/0/name must be string",
				Causes: []cairn.Cause{{Field: "spec/value/host", Message: "must be string"}, {Field: "spec/value/ports/0/name", Message: "must be string"}}},
			"error: TypeInstance \"i\": value does not match Type a.b:0.1.0:\n  spec.value.host must be string\n  spec.value.ports[0].name must be string\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			printError(&b, tt.err)
			if b.String() != tt.want {
				t.Errorf("got\n%s\nwant\n%s", b.String(), tt.want)
			}
		})
	}
}
