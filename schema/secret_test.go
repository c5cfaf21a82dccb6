package schema_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/schema"
)

func TestRedact(t *testing.T) {
	const marker = "(sensitive value)"
	tests := []struct {
		name   string
		schema string
		value  string
		want   string
		fields []string
	}{
		{"no secrets", `{"type":"object","properties":{"a":{"type":"string"}}}`,
			`{"a":"x"}`, `{"a":"x"}`, nil},
		{"whole value", `{"type":"object","x-cairn-secret":true}`,
			`{"a":"x","b":1}`, `"(sensitive value)"`, []string{"spec/value"}},
		{"property", `{"type":"object","properties":{"user":{"type":"string"},"password":{"type":"string","x-cairn-secret":true}}}`,
			`{"user":"app","password":"hunter22"}`, `{"password":"(sensitive value)","user":"app"}`, []string{"spec/value/password"}},
		{"absent secret property", `{"type":"object","properties":{"password":{"x-cairn-secret":true}}}`,
			`{"user":"app"}`, `{"user":"app"}`, nil},
		{"nested object and number kept exactly", `{"properties":{"db":{"properties":{"port":{"type":"integer"},"token":{"x-cairn-secret":true}}}}}`,
			`{"db":{"port":12345678901234567890,"token":{"k":"v"}}}`, `{"db":{"port":12345678901234567890,"token":"(sensitive value)"}}`, []string{"spec/value/db/token"}},
		{"array items", `{"properties":{"keys":{"type":"array","items":{"properties":{"secret":{"x-cairn-secret":true}}}}}}`,
			`{"keys":[{"id":"a","secret":"s1"},{"id":"b","secret":"s2"}]}`, `{"keys":[{"id":"a","secret":"(sensitive value)"},{"id":"b","secret":"(sensitive value)"}]}`,
			[]string{"spec/value/keys/0/secret", "spec/value/keys/1/secret"}},
		{"additionalProperties map", `{"type":"object","additionalProperties":{"type":"string","x-cairn-secret":true}}`,
			`{"A":"1"}`, `{"A":"(sensitive value)"}`, []string{"spec/value/A"}},
		{"patternProperties", `{"patternProperties":{"^tok_":{"x-cairn-secret":true}}}`,
			`{"tok_a":"1","name":"n"}`, `{"name":"n","tok_a":"(sensitive value)"}`, []string{"spec/value/tok_a"}},
		{"local $ref", `{"$defs":{"pw":{"type":"string","x-cairn-secret":true}},"properties":{"pw":{"$ref":"#/$defs/pw"}}}`,
			`{"pw":"x"}`, `{"pw":"(sensitive value)"}`, []string{"spec/value/pw"}},
		{"allOf", `{"allOf":[{"properties":{"a":{"x-cairn-secret":true}}}]}`,
			`{"a":"x","b":"y"}`, `{"a":"(sensitive value)","b":"y"}`, []string{"spec/value/a"}},
		{"anyOf branch", `{"anyOf":[{"properties":{"apiKey":{"x-cairn-secret":true}}},{"required":["user"]}]}`,
			`{"apiKey":"k","user":"u"}`, `{"apiKey":"(sensitive value)","user":"u"}`, []string{"spec/value/apiKey"}},
		{"oneOf branches of a property", `{"properties":{"auth":{"oneOf":[
				{"required":["token"],"properties":{"token":{"x-cairn-secret":true}}},
				{"required":["password"],"properties":{"user":{"type":"string"},"password":{"x-cairn-secret":true}}}]}}}`,
			`{"auth":{"user":"u","password":"p"}}`, `{"auth":{"password":"(sensitive value)","user":"u"}}`, []string{"spec/value/auth/password"}},
		{"oneOf branch marking the whole property", `{"properties":{"cred":{"oneOf":[{"type":"string","x-cairn-secret":true},{"type":"null"}]}}}`,
			`{"cred":"p"}`, `{"cred":"(sensitive value)"}`, []string{"spec/value/cred"}},
		{"patternProperties apply beside properties", `{"properties":{"db_password":{"type":"string"}},"patternProperties":{"password$":{"x-cairn-secret":true}}}`,
			`{"db_password":"p","user":"u"}`, `{"db_password":"(sensitive value)","user":"u"}`, []string{"spec/value/db_password"}},
		{"every matching pattern applies", `{"patternProperties":{"^a":{"type":"string"},"^b":{"type":"string"},"^c":{"type":"string"},"key$":{"x-cairn-secret":true}}}`,
			`{"akey":"1","bkey":"2","ckey":"3"}`, `{"akey":"(sensitive value)","bkey":"(sensitive value)","ckey":"(sensitive value)"}`,
			[]string{"spec/value/akey", "spec/value/bkey", "spec/value/ckey"}},
		{"if then else", `{"if":{"properties":{"kind":{"const":"a"}}},"then":{"properties":{"x":{"x-cairn-secret":true}}},"else":{"properties":{"y":{"x-cairn-secret":true}}}}`,
			`{"kind":"b","x":"1","y":"2"}`, `{"kind":"b","x":"(sensitive value)","y":"(sensitive value)"}`, []string{"spec/value/x", "spec/value/y"}},
		{"dependentSchemas", `{"dependentSchemas":{"user":{"properties":{"password":{"x-cairn-secret":true}}}}}`,
			`{"user":"u","password":"p"}`, `{"password":"(sensitive value)","user":"u"}`, []string{"spec/value/password"}},
		{"draft-07 schema dependencies", `{"$schema":"http://json-schema.org/draft-07/schema#","dependencies":{"user":{"properties":{"password":{"x-cairn-secret":true}}},"b":["a"]}}`,
			`{"user":"u","password":"p"}`, `{"password":"(sensitive value)","user":"u"}`, []string{"spec/value/password"}},
		{"unevaluatedProperties", `{"properties":{"name":{"type":"string"}},"unevaluatedProperties":{"x-cairn-secret":true}}`,
			`{"name":"n","tok":"t"}`, `{"name":"n","tok":"(sensitive value)"}`, []string{"spec/value/tok"}},
		{"unevaluatedItems", `{"prefixItems":[{"type":"string"}],"unevaluatedItems":{"x-cairn-secret":true}}`,
			`["a","b"]`, `["a","(sensitive value)"]`, []string{"spec/value/1"}},
		{"marked twice, named once", `{"allOf":[{"properties":{"a":{"x-cairn-secret":true}}},{"properties":{"a":{"x-cairn-secret":true}}}]}`,
			`{"a":"x"}`, `{"a":"(sensitive value)"}`, []string{"spec/value/a"}},
		{"false marks nothing", `{"properties":{"a":{"x-cairn-secret":false}}}`,
			`{"a":"x"}`, `{"a":"x"}`, nil},
		{"escaped field name", `{"properties":{"a/b":{"x-cairn-secret":true}}}`,
			`{"a/b":"x"}`, `{"a/b":"(sensitive value)"}`, []string{"spec/value/a~1b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := schema.Compile(json.RawMessage(tt.schema))
			if err != nil {
				t.Fatal(err)
			}
			got, fields := s.Redact("spec/value", json.RawMessage(tt.value), marker)
			if string(got) != tt.want {
				t.Errorf("value = %s, want %s", got, tt.want)
			}
			slices.Sort(fields)
			if !slices.Equal(fields, tt.fields) {
				t.Errorf("fields = %q, want %q", fields, tt.fields)
			}
			if s.HasSecrets() != schema.MentionsSecrets([]byte(tt.schema)) && !strings.Contains(tt.schema, "false") {
				t.Errorf("HasSecrets = %v", s.HasSecrets())
			}
		})
	}
}

// TestValidationMessagesNameFieldsNotValues: a value breaking every kind of
// string, number and enum constraint yields messages that never quote it.
func TestValidationMessagesNameFieldsNotValues(t *testing.T) {
	const marker = "Zq9-secret-marker-value"
	s, err := schema.Compile(json.RawMessage(`{"type":"object","additionalProperties":false,"properties":{
		"p1":{"type":"string","pattern":"^[0-9]+$","x-cairn-secret":true},
		"p2":{"type":"string","maxLength":3},
		"p3":{"enum":["a","b"]},
		"p4":{"const":"c"},
		"p5":{"type":"string","format":"email"},
		"p6":{"type":"integer"},
		"p7":{"type":"array","uniqueItems":true},
		"p8":{"not":{"const":"` + marker + `"}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	v := `{"p1":"` + marker + `","p2":"` + marker + `","p3":"` + marker + `","p4":"` + marker + `","p5":"` + marker +
		`","p6":"` + marker + `","p7":["` + marker + `","` + marker + `"],"p8":"` + marker + `"}`
	causes := s.Validate("spec/value", json.RawMessage(v))
	if len(causes) < 8 {
		t.Fatalf("causes = %v, want one per property", causes)
	}
	for _, c := range causes {
		if strings.Contains(c.Message, marker) || strings.Contains(c.Field, marker) {
			t.Errorf("cause %s: %s quotes the value", c.Field, c.Message)
		}
	}
	// The extra property's name is data too, but names are not secret.
	causes = s.Validate("spec/value", json.RawMessage(`{"`+marker+`x":1}`))
	if len(causes) != 1 {
		t.Fatalf("causes = %v", causes)
	}
}

func BenchmarkRedact(b *testing.B) {
	plain, _ := schema.Compile(json.RawMessage(`{"type":"object","properties":{"username":{"type":"string"},"password":{"type":"string"}}}`))
	secret, _ := schema.Compile(json.RawMessage(`{"type":"object","properties":{"username":{"type":"string"},"password":{"type":"string","x-cairn-secret":true}}}`))
	v := json.RawMessage(`{"username":"app","password":"hunter22","host":"db.internal","port":5432}`)
	for _, bc := range []struct {
		name string
		s    *schema.Schema
	}{{"baseline-no-secrets", plain}, {"secret-field", secret}} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				bc.s.Redact("spec/value", v, "(sensitive value)")
			}
		})
	}
}
