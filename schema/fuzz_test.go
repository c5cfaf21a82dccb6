package schema

import (
	"encoding/json"
	"strings"
	"testing"
)

// FuzzValidate feeds arbitrary schema and value documents: Compile must fail
// or succeed without panicking, and Validate of whatever compiled must return
// well-formed causes. Crashers found are kept in testdata/fuzz/FuzzValidate.
func FuzzValidate(f *testing.F) {
	seeds := []struct{ schema, value string }{
		{`{"type":"string"}`, `1`},
		{`{"type":["string","null"]}`, `null`},
		{`{"$schema":"http://json-schema.org/draft-07/schema#","required":["url"],"properties":{"url":{"type":"string","format":"uri"}}}`, `{"url":"x y"}`},
		{`{"properties":{"a":{"minimum":1,"maximum":5,"multipleOf":2}},"additionalProperties":false}`, `{"a":3,"b":1}`},
		{`{"items":{"enum":[1,"a",null]},"uniqueItems":true,"minItems":1,"maxItems":2}`, `[1,1,"b"]`},
		{`{"prefixItems":[{"const":{"a":[1]}}],"items":false}`, `[{"a":[1]},2]`},
		{`{"anyOf":[{"pattern":"^a"},{"minLength":3}],"oneOf":[{"maxLength":1},{"not":{}}]}`, `"bb"`},
		{`{"$defs":{"n":{"type":"object","properties":{"next":{"$ref":"#/$defs/n"}}}},"$ref":"#/$defs/n"}`, `{"next":{"next":{"next":1}}}`},
		{`{"$schema":"http://json-schema.org/draft-07/schema#","items":[{}],"additionalItems":false,"contains":{"type":"null"}}`, `[1,2]`},
		{`{"allOf":[{"unevaluatedProperties":false}],"dependentRequired":{"a":["b"]},"propertyNames":{"maxLength":2}}`, `{"a":1,"abc":2}`},
		{`{"if":{"type":"string"},"then":{"format":"email"},"else":{"exclusiveMinimum":0}}`, `-1`},
		{`{"minimum":1e308}`, `1e-400`},
		{`{"$ref":"https://example.com/s"}`, `{}`},
		{`false`, `"日本"`},
		{`{}`, `{"a/b~c":[{"":{}}]}`},
		{`{"maxLength":1e300}`, `"abc"`},
		{`{"minimum":1e10000000}`, `1`},
		{`{"const":1e-10000000}`, `[0e999999999]`},
	}
	for _, s := range seeds {
		f.Add([]byte(s.schema), []byte(s.value))
	}
	f.Fuzz(func(t *testing.T, schemaDoc, value []byte) {
		s, err := Compile(json.RawMessage(schemaDoc))
		if err != nil {
			if err.Error() == "" {
				t.Errorf("Compile(%q) returned an empty error", schemaDoc)
			}
			return
		}
		for _, root := range []string{"spec/value", "context"} {
			causes := s.Validate(root, json.RawMessage(value))
			for _, c := range causes {
				if c.Message == "" {
					t.Errorf("cause %+v has no message", c)
				}
				if c.Field != root && !strings.HasPrefix(c.Field, root+"/") {
					t.Errorf("cause field %q is not under root %q", c.Field, root)
				}
			}
		}
	})
}
