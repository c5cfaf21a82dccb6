package schema

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cairn-dev/cairn"
)

var drafts = []struct {
	name, url string
}{
	{"draft-07", "http://json-schema.org/draft-07/schema#"},
	{"2020-12", "https://json-schema.org/draft/2020-12/schema"},
}

// withDraft returns the schema object doc with "$schema" set to draft.
func withDraft(t testing.TB, doc, draft string) json.RawMessage {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(doc), &m); err != nil {
		t.Fatalf("test schema %s: %v", doc, err)
	}
	m["$schema"] = draft
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustCompile(t testing.TB, doc json.RawMessage) *Schema {
	t.Helper()
	s, err := Compile(doc)
	if err != nil {
		t.Fatalf("Compile(%s): %v", doc, err)
	}
	return s
}

func causeStrings(causes []cairn.Cause) []string {
	out := make([]string, len(causes))
	for i, c := range causes {
		out[i] = c.String()
	}
	return out
}

// TestValidateMessages checks every message Capact's clients match, in both
// drafts. Root is "spec/value" throughout.
func TestValidateMessages(t *testing.T) {
	tests := []struct {
		name   string
		schema string
		value  string
		want   []string // Cause.String() of each cause; nil when valid
	}{
		{"valid", `{"type":"object","properties":{"url":{"type":"string"}}}`, `{"url":"x"}`, nil},
		{"type", `{"type":"string"}`, `1`, []string{"spec/value must be string"}},
		{"type integer", `{"type":"integer"}`, `1.5`, []string{"spec/value must be integer"}},
		{"types in schema order", `{"type":["string","null"]}`, `1`, []string{"spec/value must be string,null"}},
		{"types in other order", `{"type":["null","object","string"]}`, `1`, []string{"spec/value must be null,object,string"}},
		{"nested type", `{"properties":{"a":{"properties":{"b":{"type":"boolean"}}}}}`, `{"a":{"b":"x"}}`,
			[]string{"spec/value/a/b must be boolean"}},
		{"array item type", `{"items":{"type":"number"}}`, `[1,"x",2]`, []string{"spec/value/1 must be number"}},
		{"required", `{"type":"object","required":["url"]}`, `{}`, []string{"spec/value must have required property 'url'"}},
		{"required several", `{"required":["b","a"]}`, `{}`,
			[]string{"spec/value must have required property 'a'", "spec/value must have required property 'b'"}},
		{"nested required", `{"properties":{"db":{"required":["host"]}}}`, `{"db":{}}`,
			[]string{"spec/value/db must have required property 'host'"}},
		{"additionalProperties", `{"properties":{"a":{}},"additionalProperties":false}`, `{"a":1,"b":2,"c":3}`,
			[]string{"spec/value must NOT have additional properties"}},
		{"const", `{"const":"x"}`, `"y"`, []string{"spec/value must be equal to constant"}},
		{"const object", `{"const":{"a":1}}`, `{"a":2}`, []string{"spec/value must be equal to constant"}},
		{"enum", `{"enum":["a","b"]}`, `"c"`, []string{"spec/value must be equal to one of the allowed values"}},
		{"minimum", `{"minimum":1}`, `0`, []string{"spec/value must be >= 1"}},
		{"maximum", `{"maximum":5}`, `6`, []string{"spec/value must be <= 5"}},
		{"minimum fraction", `{"minimum":0.5}`, `0.25`, []string{"spec/value must be >= 0.5"}},
		{"exclusiveMinimum", `{"exclusiveMinimum":0}`, `0`, []string{"spec/value must be > 0"}},
		{"exclusiveMaximum", `{"exclusiveMaximum":0}`, `0`, []string{"spec/value must be < 0"}},
		{"minLength", `{"minLength":3}`, `"ab"`, []string{"spec/value must NOT have fewer than 3 characters"}},
		{"minLength counts runes", `{"minLength":3}`, `"日本語"`, nil},
		{"maxLength", `{"maxLength":3}`, `"abcd"`, []string{"spec/value must NOT have more than 3 characters"}},
		{"minItems", `{"minItems":1}`, `[]`, []string{"spec/value must NOT have fewer than 1 items"}},
		{"maxItems", `{"maxItems":2}`, `[1,2,3]`, []string{"spec/value must NOT have more than 2 items"}},
		{"minProperties", `{"minProperties":1}`, `{}`, []string{"spec/value must NOT have fewer than 1 properties"}},
		{"maxProperties", `{"maxProperties":1}`, `{"a":1,"b":2}`, []string{"spec/value must NOT have more than 1 properties"}},
		{"pattern", `{"pattern":"^a"}`, `"b"`, []string{`spec/value must match pattern "^a"`}},
		{"format uri", `{"format":"uri"}`, `"not a uri"`, []string{`spec/value must match format "uri"`}},
		{"format email", `{"properties":{"m":{"format":"email"}}}`, `{"m":"x"}`, []string{`spec/value/m must match format "email"`}},
		{"format ignores other types", `{"format":"uri"}`, `1`, nil},
		{"unknown format is ignored", `{"format":"no-such-format"}`, `"x"`, nil},
		{"multipleOf", `{"multipleOf":2}`, `3`, []string{"spec/value must be multiple of 2"}},
		{"multipleOf fraction", `{"multipleOf":0.01}`, `0.015`, []string{"spec/value must be multiple of 0.01"}},
		{"uniqueItems", `{"uniqueItems":true}`, `[1,2,1]`, []string{"spec/value must NOT have duplicate items"}},
		{"uniqueItems objects", `{"uniqueItems":true}`, `[{"a":1},{"a":1.0}]`, []string{"spec/value must NOT have duplicate items"}},
		{"anyOf", `{"anyOf":[{"type":"string"},{"type":"number"}]}`, `true`,
			[]string{"spec/value must be number", "spec/value must be string", "spec/value must match a schema in anyOf"}},
		{"oneOf none", `{"oneOf":[{"type":"string"},{"type":"number"}]}`, `true`,
			[]string{"spec/value must be number", "spec/value must be string", "spec/value must match exactly one schema in oneOf"}},
		{"oneOf both", `{"oneOf":[{"type":"number"},{"minimum":0}]}`, `1`,
			[]string{"spec/value must match exactly one schema in oneOf"}},
		{"allOf is transparent", `{"allOf":[{"minimum":3},{"maximum":1}]}`, `2`,
			[]string{"spec/value must be <= 1", "spec/value must be >= 3"}},
		{"not", `{"not":{"type":"string"}}`, `"x"`, []string{"spec/value must NOT be valid"}},
		{"false property", `{"properties":{"a":false}}`, `{"a":1}`, []string{"spec/value/a boolean schema is false"}},
		{"if then", `{"if":{"properties":{"k":{"const":"a"}}},"then":{"required":["x"]}}`, `{"k":"a"}`,
			[]string{"spec/value must have required property 'x'"}},
		{"contains", `{"contains":{"type":"string"}}`, `[1,2]`, []string{"spec/value must contain at least 1 valid item(s)"}},
		{"dependencies", `{"dependencies":{"a":["b"]}}`, `{"a":1}`, []string{"spec/value must have property b when property a is present"}},
		{"propertyNames", `{"propertyNames":{"pattern":"^[a-z]+$"}}`, `{"ok":1,"Bad":2}`, []string{"spec/value property name 'Bad' must be valid"}},
		{"ref", `{"definitions":{"port":{"type":"integer","minimum":1}},"properties":{"p":{"$ref":"#/definitions/port"}}}`, `{"p":0}`,
			[]string{"spec/value/p must be >= 1"}},
		{"ref type order", `{"definitions":{"v":{"type":["string","null"]}},"properties":{"p":{"$ref":"#/definitions/v"}}}`, `{"p":1}`,
			[]string{"spec/value/p must be string,null"}},
		{"escaped field", `{"properties":{"a/b~c":{"type":"string"}}}`, `{"a/b~c":1}`, []string{"spec/value/a~1b~0c must be string"}},
		{"odd property name", `{"properties":{"a b%":{"type":["string","null"]}}}`, `{"a b%":1}`, []string{"spec/value/a b% must be string,null"}},
		{"several sorted", `{"properties":{"b":{"type":"string"},"a":{"type":"string","minLength":2}},"required":["c"]}`,
			`{"a":"x","b":1}`, []string{
				"spec/value must have required property 'c'",
				"spec/value/a must NOT have fewer than 2 characters",
				"spec/value/b must be string",
			}},
		{"unicode", `{"properties":{"名前":{"enum":["日本"]}}}`, `{"名前":"中国"}`,
			[]string{"spec/value/名前 must be equal to one of the allowed values"}},
		{"huge number in value", `{"type":"number","minimum":1}`, `{"x":1e10000000}`,
			[]string{"spec/value/x must be a number with an exponent between -400 and 400"}},
	}
	for _, d := range drafts {
		for _, tt := range tests {
			t.Run(d.name+"/"+tt.name, func(t *testing.T) {
				s := mustCompile(t, withDraft(t, tt.schema, d.url))
				got := causeStrings(s.Validate("spec/value", json.RawMessage(tt.value)))
				if len(got) == 0 {
					got = nil
				}
				if !slices.Equal(got, tt.want) {
					t.Errorf("Validate(%s) against %s\n got %q\nwant %q", tt.value, tt.schema, got, tt.want)
				}
			})
		}
	}
}

// TestValidateDraftSpecific covers keywords that differ between drafts.
func TestValidateDraftSpecific(t *testing.T) {
	tests := []struct {
		name, schema, value string
		want                []string
	}{
		{"07 additionalItems",
			`{"$schema":"http://json-schema.org/draft-07/schema#","items":[{"type":"string"}],"additionalItems":false}`,
			`["a",1,2]`, []string{"context must NOT have more than 1 items"}},
		{"07 items array",
			`{"$schema":"http://json-schema.org/draft-07/schema#","items":[{"type":"string"},{"type":"number"}]}`,
			`[1,"a"]`, []string{"context/0 must be string", "context/1 must be number"}},
		{"07 ref ignores siblings",
			`{"$schema":"http://json-schema.org/draft-07/schema#","definitions":{"s":{"type":"string"}},"$ref":"#/definitions/s","minLength":5}`,
			`"ab"`, nil},
		{"07 id fragments as Capact Types write them",
			`{"$schema":"http://json-schema.org/draft-07/schema#","$id":"#/root","type":"object","properties":{"url":{"$id":"#/properties/url","type":"string","format":"uri"}},"required":["url"]}`,
			`{"url":"::"}`, []string{`context/url must match format "uri"`}},
		{"2020 default draft",
			`{"prefixItems":[{"type":"string"}],"items":false}`,
			`["a",1,2]`, []string{"context must NOT have more than 1 items"}},
		{"2020 prefixItems",
			`{"$schema":"https://json-schema.org/draft/2020-12/schema","prefixItems":[{"type":"string"}]}`,
			`[1]`, []string{"context/0 must be string"}},
		{"2020 unevaluatedProperties",
			`{"$schema":"https://json-schema.org/draft/2020-12/schema","allOf":[{"properties":{"a":{}}}],"unevaluatedProperties":false}`,
			`{"a":1,"b":2}`, []string{"context must NOT have unevaluated properties"}},
		{"2020 property named like a keyword",
			`{"properties":{"unevaluatedProperties":false}}`,
			`{"unevaluatedProperties":1}`, []string{"context/unevaluatedProperties boolean schema is false"}},
		{"2020 ref with siblings",
			`{"$defs":{"s":{"type":"string"}},"$ref":"#/$defs/s","minLength":5}`,
			`"ab"`, []string{"context must NOT have fewer than 5 characters"}},
		{"2020 dependentRequired",
			`{"dependentRequired":{"a":["b","c"]}}`,
			`{"a":1}`, []string{"context must have properties b, c when property a is present"}},
		{"2020 nested $id resource",
			`{"$id":"https://example.com/root","$defs":{"x":{"$id":"https://example.com/x","type":["integer","null"]}},"properties":{"p":{"$ref":"x"}}}`,
			`{"p":"s"}`, []string{"context/p must be integer,null"}},
		{"2020 maxContains",
			`{"contains":{"type":"string"},"maxContains":1}`,
			`["a","b"]`, []string{"context must contain at most 1 valid item(s)"}},
		{"2020 minContains",
			`{"contains":{"type":"string"},"minContains":2}`,
			`["a",1]`, []string{"context must contain at least 2 valid item(s)"}},
		{"ref cycle falls back to the library's message",
			`{"$defs":{"a":{"$ref":"#/$defs/b"},"b":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"}`,
			`1`, nil /* checked below: any non-empty message */},
		{"false root", `false`, `1`, []string{"context boolean schema is false"}},
		{"true root", `true`, `1`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := mustCompile(t, json.RawMessage(tt.schema))
			causes := s.Validate("context", json.RawMessage(tt.value))
			got := causeStrings(causes)
			if len(got) == 0 {
				got = nil
			}
			if strings.HasPrefix(tt.name, "ref cycle") {
				if len(causes) != 1 || causes[0].Field != "context" || causes[0].Message == "" {
					t.Errorf("Validate = %q, want one cause on context", got)
				}
				return
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("Validate(%s) against %s\n got %q\nwant %q", tt.value, tt.schema, got, tt.want)
			}
		})
	}
}

func TestValidateInvalidJSON(t *testing.T) {
	s := mustCompile(t, json.RawMessage(`{"type":"object"}`))
	for _, v := range []string{``, `{`, `{"a":}`, `{} {}`, `nul`} {
		causes := s.Validate("spec/value", json.RawMessage(v))
		if len(causes) != 1 || causes[0].Field != "spec/value" || !strings.HasPrefix(causes[0].Message, "is not valid JSON") {
			t.Errorf("Validate(%q) = %q, want one cause saying spec/value is not valid JSON", v, causeStrings(causes))
		}
	}
}

func TestValidateEmptyRoot(t *testing.T) {
	s := mustCompile(t, json.RawMessage(`{"properties":{"a":{"type":"string"}},"required":["b"]}`))
	got := causeStrings(s.Validate("", json.RawMessage(`{"a":1}`)))
	want := []string{"must have required property 'b'", "a must be string"}
	if !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestCompileErrors(t *testing.T) {
	tests := []struct {
		name   string
		schema string
		want   []string // substrings of the error message
	}{
		{"not JSON", `{"type":`, []string{"invalid JSON Schema", "not valid JSON"}},
		{"trailing data", `{} []`, []string{"not valid JSON"}},
		{"bad type", `{"type":"strin"}`, []string{"invalid JSON Schema", "type must be equal to one of the allowed values"}},
		{"bad type draft-07", `{"$schema":"http://json-schema.org/draft-07/schema#","properties":{"a":{"type":1}}}`,
			[]string{"properties/a/type"}},
		{"bad minLength", `{"minLength":-1}`, []string{"minLength must be >= 0"}},
		{"huge minLength", `{"properties":{"a":{"maxLength":1e300}}}`, []string{"properties/a/maxLength must be <= 2147483647"}},
		{"huge number", `{"minimum":1e10000000}`, []string{"minimum must be a number with an exponent between -400 and 400"}},
		{"bad regex", `{"pattern":"("}`, []string{`invalid JSON Schema: pattern must match format "regex"`}},
		{"http ref", `{"$ref":"http://example.com/schema.json"}`,
			[]string{`remote reference "http://example.com/schema.json" refused`, "network"}},
		{"https ref", `{"properties":{"a":{"$ref":"https://example.com/x#/y"}}}`,
			[]string{`remote reference "https://example.com/x" refused`}},
		{"relative ref", `{"$ref":"other.json"}`, []string{`reference "other.json" cannot be resolved`}},
		{"file ref", `{"$ref":"file:///etc/hosts"}`, []string{`reference "file:///etc/hosts" cannot be resolved`}},
		{"relative ref under remote id", `{"$id":"https://example.com/a/root.json","$ref":"b.json"}`,
			[]string{`remote reference "https://example.com/a/b.json" refused`}},
		{"unknown metaschema", `{"$schema":"https://example.com/meta"}`, []string{`remote reference "https://example.com/meta" refused`}},
		{"missing pointer", `{"$ref":"#/definitions/nope"}`, []string{"invalid JSON Schema", "definitions/nope"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Compile(json.RawMessage(tt.schema))
			if err == nil {
				t.Fatalf("Compile(%s) succeeded, want an error", tt.schema)
			}
			if code := cairn.ErrorCode(err); code != cairn.CodeInvalid {
				t.Errorf("code = %s, want %s", code, cairn.CodeInvalid)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestCompileCauses(t *testing.T) {
	_, err := Compile(json.RawMessage(`{"properties":{"a":{"minItems":"x"}}}`))
	causes := cairn.Causes(err)
	if !slices.Contains(causeStrings(causes), "properties/a/minItems must be integer") {
		t.Errorf("causes = %q, want properties/a/minItems must be integer", causeStrings(causes))
	}
}

// TestCompileIntKeywordsIgnoreData checks that the size-keyword guard looks
// at schemas only, not at data shaped like them.
func TestCompileIntKeywordsIgnoreData(t *testing.T) {
	for _, doc := range []string{
		`{"const":{"maxLength":1e300}}`,
		`{"enum":[{"minItems":1e100}]}`,
		`{"default":{"maxProperties":1e20}}`,
		`{"properties":{"maxLength":{"type":"integer"}}}`,
	} {
		if _, err := Compile(json.RawMessage(doc)); err != nil {
			t.Errorf("Compile(%s): %v", doc, err)
		}
	}
}

func TestCache(t *testing.T) {
	c := NewCache(2)
	doc := json.RawMessage(`{"type":"string"}`)
	a1, err := c.Get("a:0.1.0", doc)
	if err != nil {
		t.Fatal(err)
	}
	a2, err := c.Get("a:0.1.0", json.RawMessage(`{"type":"number"}`))
	if err != nil {
		t.Fatal(err)
	}
	if a1 != a2 {
		t.Error("second Get compiled again, want the cached schema")
	}

	if _, err := c.Get("b:0.1.0", doc); err != nil {
		t.Fatal(err)
	}
	// a is the most recently used, so c evicts b.
	if _, err := c.Get("a:0.1.0", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get("c:0.1.0", doc); err != nil {
		t.Fatal(err)
	}
	if n := c.Len(); n != 2 {
		t.Errorf("Len = %d, want 2", n)
	}
	if a3, _ := c.Get("a:0.1.0", nil); a3 != a1 {
		t.Error("a was evicted, want b evicted")
	}
	if _, err := c.Get("b:0.1.0", nil); err == nil {
		t.Error("b still cached, want it evicted (and nil compiled afresh, failing)")
	}

	c.Forget("a:0.1.0")
	a4, err := c.Get("a:0.1.0", json.RawMessage(`{"type":"number"}`))
	if err != nil {
		t.Fatal(err)
	}
	if a4 == a1 {
		t.Error("Get after Forget returned the old schema")
	}
	if causes := a4.Validate("v", json.RawMessage(`"x"`)); len(causes) != 1 {
		t.Errorf("recompiled schema: causes = %q, want must be number", causeStrings(causes))
	}
}

func TestCacheErrorsNotCached(t *testing.T) {
	var c Cache // the zero Cache is usable
	if _, err := c.Get("k", json.RawMessage(`{"type":1}`)); err == nil {
		t.Fatal("Get of a bad schema succeeded")
	}
	if n := c.Len(); n != 0 {
		t.Errorf("Len after a failed compile = %d, want 0", n)
	}
	if _, err := c.Get("k", json.RawMessage(`{"type":"string"}`)); err != nil {
		t.Errorf("Get after a failed compile: %v", err)
	}
}

func TestCacheConcurrent(t *testing.T) {
	c := NewCache(8)
	var wg sync.WaitGroup
	var bad atomic.Int32
	first := make([]*Schema, 4)
	var mu sync.Mutex
	for g := range 32 {
		wg.Go(func() {
			for i := range 100 {
				k := (g + i) % 16
				s, err := c.Get(fmt.Sprintf("t%d:0.1.0", k), json.RawMessage(fmt.Sprintf(`{"maxLength":%d}`, k)))
				if err != nil {
					bad.Add(1)
					continue
				}
				if len(s.Validate("v", json.RawMessage(fmt.Sprintf("%q", strings.Repeat("x", k))))) != 0 {
					bad.Add(1)
				}
				if k < 4 && i == 0 {
					mu.Lock()
					if first[k] == nil {
						first[k] = s
					}
					mu.Unlock()
				}
				if i%10 == 0 {
					c.Forget(fmt.Sprintf("t%d:0.1.0", (k+1)%16))
				}
			}
		})
	}
	wg.Wait()
	if n := bad.Load(); n != 0 {
		t.Errorf("%d Gets failed or returned the wrong schema", n)
	}
	if n := c.Len(); n > 8 {
		t.Errorf("Len = %d, want at most 8", n)
	}
}

// TestCacheCompilesOnce checks that concurrent first Gets of a key share one
// compilation.
func TestCacheCompilesOnce(t *testing.T) {
	c := NewCache(0)
	var wg sync.WaitGroup
	got := make([]*Schema, 16)
	for i := range got {
		wg.Go(func() {
			s, err := c.Get("k", json.RawMessage(`{"type":"string"}`))
			if err != nil {
				t.Error(err)
			}
			got[i] = s
		})
	}
	wg.Wait()
	for _, s := range got[1:] {
		if s != got[0] {
			t.Fatal("concurrent Gets of one key returned different schemas")
		}
	}
}

func BenchmarkValidate(b *testing.B) {
	var props, value []string
	for i := range 20 {
		var p, v string
		switch i % 4 {
		case 0:
			p, v = `{"type":"string","minLength":1,"maxLength":64}`, `"value"`
		case 1:
			p, v = `{"type":"integer","minimum":0,"maximum":65535}`, `8080`
		case 2:
			p, v = `{"type":"boolean"}`, `true`
		case 3:
			p, v = `{"type":"string","format":"uri"}`, `"https://example.com/x"`
		}
		props = append(props, fmt.Sprintf(`"p%d":%s`, i, p))
		value = append(value, fmt.Sprintf(`"p%d":%s`, i, v))
	}
	doc := `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","additionalProperties":false,` +
		`"required":["p0","p1","p2"],"properties":{` + strings.Join(props, ",") + `}}`
	s := mustCompile(b, json.RawMessage(doc))
	v := json.RawMessage(`{` + strings.Join(value, ",") + `}`)
	if causes := s.Validate("spec/value", v); causes != nil {
		b.Fatalf("benchmark value invalid: %q", causeStrings(causes))
	}
	b.ReportAllocs()
	for b.Loop() {
		s.Validate("spec/value", v)
	}
}

func BenchmarkCompile(b *testing.B) {
	doc := json.RawMessage(`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object",` +
		`"required":["url"],"properties":{"url":{"type":"string","format":"uri"},"port":{"type":"integer"}}}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Compile(doc); err != nil {
			b.Fatal(err)
		}
	}
}

// TestDefaultDraft: a schema without "$schema" follows the caller's default
// draft. Capact's context schemas (JSON-pointer "$id" fragments) compile as
// draft-07 and are refused by 2020-12; "$schema" wins over the default.
func TestDefaultDraft(t *testing.T) {
	const capact = `{"$id":"#/properties/contextSchema","type":"object","properties":{"provider":{"$id":"#/properties/contextSchema/properties/name","type":"string"}}}`
	s, err := CompileDraft(json.RawMessage(capact), Draft07)
	if err != nil {
		t.Fatalf("draft-07: %v", err)
	}
	if got := s.Validate("context", json.RawMessage(`{"provider":true}`)); len(got) != 1 || got[0].String() != "context/provider must be string" {
		t.Errorf("draft-07 validation = %v, want context/provider must be string", got)
	}
	if _, err := Compile(json.RawMessage(capact)); err == nil || !strings.Contains(err.Error(), `must match pattern "^[^#]*#?$"`) {
		t.Errorf("2020-12: error %v, want the $id pattern refusal", err)
	}
	declared := `{"$schema":"https://json-schema.org/draft/2020-12/schema","$id":"#/x","type":"object"}`
	if _, err := CompileDraft(json.RawMessage(declared), Draft07); err == nil {
		t.Error(`a schema declaring 2020-12 compiled as draft-07; "$schema" must win`)
	}

	// The cache keeps one compilation per draft for the same key.
	var c Cache
	if _, err := c.GetDraft("k", json.RawMessage(capact), Draft07); err != nil {
		t.Fatalf("cache, draft-07: %v", err)
	}
	if _, err := c.GetDraft("k", json.RawMessage(capact), Draft2020); err == nil {
		t.Error("cache answered the draft-07 compilation for a 2020-12 request")
	}
	c.Forget("k")
	if c.Len() != 0 {
		t.Errorf("cache holds %d schemas after Forget, want 0", c.Len())
	}
}

// TestValidateShowingValues: the variant for values of Types names what an
// enum or a const allows, and the properties additionalProperties refuses,
// after AJV's words, which Validate keeps for the
// contexts of backends (the texts Capact's clients compare).
func TestValidateShowingValues(t *testing.T) {
	for _, tt := range []struct {
		name, schema, value string
		want                []string
	}{
		{"enum", `{"properties":{"tier":{"enum":["dev","prod"]}}}`, `{"tier":"staging"}`,
			[]string{`spec/value/tier must be equal to one of the allowed values: "dev", "prod"`}},
		{"enum of several types", `{"items":{"enum":["a",1,true,null]}}`, `["a","b"]`,
			[]string{`spec/value/1 must be equal to one of the allowed values: "a", 1, true, null`}},
		{"const", `{"const":{"a":1}}`, `{"a":2}`, []string{`spec/value must be equal to constant: {"a":1}`}},
		{"additional properties", `{"properties":{"a":{"properties":{"x":{}},"additionalProperties":false}}}`, `{"a":{"z":1,"y":2}}`,
			[]string{"spec/value/a must NOT have additional properties: y, z (known: x)"}},
		{"other keywords as Validate", `{"type":"string"}`, `1`, []string{"spec/value must be string"}},
		// The value's own member names are the writer's text, of any number
		// and length: bounded and printable, as the enum's values are.
		{"many additional properties", `{"additionalProperties":false}`, manyKeys(25),
			[]string{"spec/value must NOT have additional properties: k00, k01, k02, k03, k04, k05, k06, k07, k08, k09, k10, k11, k12, k13, k14, k15, k16, k17, k18, k19, ... (5 more)"}},
		{"a property name with controls", `{"properties":{"a":{}},"additionalProperties":false}`, `{"x\u001b[2J\ny":1}`,
			[]string{`spec/value must NOT have additional properties: "x\u001b[2J\ny" (known: a)`}},
		{"a long property name", `{"additionalProperties":false}`, `{"` + strings.Repeat("n", 300) + `":1}`,
			[]string{"spec/value must NOT have additional properties: " + strings.Repeat("n", 64) + "... (236 more bytes)"}},
		{"a long constant", `{"const":"` + strings.Repeat("c", 300) + `"}`, `"d"`,
			[]string{`spec/value must be equal to constant: "` + strings.Repeat("c", 63) + "... (238 more bytes)"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := mustCompile(t, json.RawMessage(tt.schema))
			if got := causeStrings(s.ValidateShowingValues("spec/value", json.RawMessage(tt.value))); !slices.Equal(got, tt.want) {
				t.Errorf("ValidateShowingValues(%s) against %s\n got %q\nwant %q", tt.value, tt.schema, got, tt.want)
			}
			if got := causeStrings(s.Validate("spec/value", json.RawMessage(tt.value))); strings.Contains(strings.Join(got, ""), ": ") {
				t.Errorf("Validate(%s) names values: %q; it keeps AJV's words", tt.value, got)
			}
		})
	}
}

// manyKeys is a JSON object of n members k00, k01, ...
func manyKeys(n int) string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf(`"k%02d":1`, i)
	}
	return "{" + strings.Join(keys, ",") + "}"
}
