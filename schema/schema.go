// Package schema compiles the JSON Schemas of Types and storage-backend
// contexts and validates documents against them, reporting each violation as
// a cairn.Cause worded the way AJV words it, because Capact's clients match
// those texts.
//
// Drafts 07 and 2020-12 are supported (as are the other drafts the underlying
// library knows), chosen by "$schema"; a schema without one is 2020-12 for
// Compile and the draft the caller names for CompileDraft.
// "format" is asserted in every draft. Nothing is ever loaded from outside the
// schema document: cairn may run air-gapped, so a $ref or $schema that points
// elsewhere is a compile error. Patterns use Go's RE2 syntax, so ECMA-262-only
// constructs such as lookahead do not compile.
package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/cairn-dev/cairn"
)

// baseURL is the location every compiled document is registered under.
// Relative references resolve against it; it never reaches a loader.
const baseURL = "cairn:///schema.json"

// Schema is a compiled JSON Schema. It is safe for concurrent use.
type Schema struct {
	compiled *jsonschema.Schema
	// doc is the decoded schema document, kept to word messages as the
	// author wrote the schema (the order of "type" lists, "prefixItems").
	doc any
}

// Compile compiles a JSON Schema document. The error, classified
// cairn.CodeInvalid, says what is wrong with the document; when the document
// breaks its draft's metaschema, the error's Causes locate each violation
// (fields are paths inside the schema document).
func Compile(doc json.RawMessage) (*Schema, error) {
	return CompileDraft(doc, Draft2020)
}

// Draft is the JSON Schema draft a document without "$schema" follows.
type Draft int

const (
	// Draft2020 is draft 2020-12, cairn's default.
	Draft2020 Draft = iota
	// Draft07 is the default of AJV v8 and so of schemas written for Capact,
	// which often carry JSON-pointer fragments in "$id" that 2020-12 forbids.
	Draft07
)

func (d Draft) lib() *jsonschema.Draft {
	if d == Draft07 {
		return jsonschema.Draft7
	}
	return jsonschema.Draft2020
}

// CompileDraft is Compile with def as the draft of a document that names
// none in "$schema".
func CompileDraft(doc json.RawMessage, def Draft) (*Schema, error) {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return nil, cairn.Errorf(cairn.CodeInvalid, "invalid JSON Schema: not valid JSON: %w", err)
	}
	if causes := checkNumbers(v, ""); len(causes) > 0 {
		return nil, invalidSchema(causes)
	}
	if causes := checkIntKeywords(v, nil); len(causes) > 0 {
		return nil, invalidSchema(causes)
	}

	c := jsonschema.NewCompiler()
	c.DefaultDraft(def.lib())
	c.AssertFormat()
	c.UseLoader(refuseLoader{})
	if err := c.AddResource(baseURL, v); err != nil {
		return nil, cairn.Errorf(cairn.CodeInvalid, "invalid JSON Schema: %w", err)
	}
	compiled, err := c.Compile(baseURL)
	if err != nil {
		return nil, compileError(err, v)
	}
	return &Schema{compiled: compiled, doc: v}, nil
}

// Validate validates the JSON document v and returns nil when it is valid.
// Otherwise it returns one cause per violation, sorted by field then message,
// each field being the violation's location in v joined with "/" under root
// (e.g. root "spec/value" gives "spec/value/url"). A document that is not
// JSON yields a single cause saying so.
func (s *Schema) Validate(root string, v json.RawMessage) []cairn.Cause {
	return s.validate(root, v, false)
}

// ValidateShowingValues is Validate for the values of Types, whose writers
// need to know what to write: after AJV's words an enum's violation names
// the allowed values (must be equal to one of the allowed values: "dev",
// "prod"), a const's the constant, and additionalProperties the properties
// it refused and those the schema declares (must NOT have additional
// properties: zone (known: projectID, region)). Validate keeps AJV's words alone for
// the contexts of storage backends, the texts Local Hub gives and Capact's
// clients compare (docs/graphql.md).
func (s *Schema) ValidateShowingValues(root string, v json.RawMessage) []cairn.Cause {
	return s.validate(root, v, true)
}

func (s *Schema) validate(root string, v json.RawMessage, showValues bool) []cairn.Cause {
	inst, err := decodeInstance(v)
	if err != nil {
		return []cairn.Cause{{Field: root, Message: "is not valid JSON: " + err.Error()}}
	}
	// The library panics on numbers math/big cannot hold; refuse them first.
	if causes := checkNumbers(inst, root); len(causes) > 0 {
		return sortCauses(causes)
	}
	err = s.compiled.Validate(inst)
	if err == nil {
		return nil
	}
	var verr *jsonschema.ValidationError
	if !errors.As(err, &verr) {
		return []cairn.Cause{{Field: root, Message: err.Error()}}
	}
	m := messenger{doc: s.doc, inst: inst, showValues: showValues}
	causes := m.collect(root, verr, nil)
	if len(causes) == 0 {
		// Unreachable with the current library: an error always has a leaf.
		causes = []cairn.Cause{{Field: root, Message: "is invalid"}}
	}
	return sortCauses(causes)
}

// refuseLoader is the compiler's only loader: every document outside the one
// being compiled (the draft metaschemas are built into the library) is refused.
type refuseLoader struct{}

var errNotLoaded = errors.New("schemas are never loaded from outside the document")

func (refuseLoader) Load(string) (any, error) { return nil, errNotLoaded }

// compileError words a compilation failure of doc.
func compileError(err error, doc any) error {
	var load *jsonschema.LoadURLError
	if errors.As(err, &load) {
		u := load.URL
		if strings.HasPrefix(u, "http://") || strings.HasPrefix(u, "https://") {
			return cairn.Errorf(cairn.CodeInvalid,
				"invalid JSON Schema: remote reference %q refused: schemas must be self-contained, cairn never fetches them over the network", u)
		}
		return cairn.Errorf(cairn.CodeInvalid,
			"invalid JSON Schema: reference %q cannot be resolved: only references within the schema document are supported",
			strings.TrimPrefix(u, strings.TrimSuffix(baseURL, "schema.json")))
	}
	var meta *jsonschema.SchemaValidationError
	if errors.As(err, &meta) {
		var verr *jsonschema.ValidationError
		if errors.As(meta.Err, &verr) {
			// Here the document is the instance, the metaschema the schema.
			m := messenger{inst: doc}
			if causes := m.collect("", verr, nil); len(causes) > 0 {
				return invalidSchema(causes)
			}
		}
	}
	// Locations in the library's messages are under baseURL, which means
	// nothing to the author: show them relative to the document.
	e := cairn.Errorf(cairn.CodeInvalid, "invalid JSON Schema: %s", strings.ReplaceAll(err.Error(), baseURL, ""))
	e.Err = err
	return e
}

func invalidSchema(causes []cairn.Cause) error {
	causes = sortCauses(causes)
	texts := make([]string, len(causes))
	for i, c := range causes {
		texts[i] = c.String()
	}
	e := cairn.Errorf(cairn.CodeInvalid, "invalid JSON Schema: %s", strings.Join(texts, "; "))
	e.Causes = causes
	return e
}

// maxExponent bounds the decimal exponent of numbers. math/big refuses
// exponents beyond about a million (and the library then panics), and huge
// ones are slow; 400 is beyond float64 range either way.
const maxExponent = 400

// checkNumbers reports every number in v whose exponent is out of range.
func checkNumbers(v any, root string) []cairn.Cause {
	if !hasBadNumber(v) {
		return nil // the common case, without building paths
	}
	return badNumbers(v, root, nil)
}

func badNumbers(v any, root string, path []string) []cairn.Cause {
	switch v := v.(type) {
	case json.Number:
		if !numberInRange(string(v)) {
			msg := fmt.Sprintf("must be a number with an exponent between -%d and %d", maxExponent, maxExponent)
			return []cairn.Cause{{Field: field(root, path), Message: msg}}
		}
	case map[string]any:
		var out []cairn.Cause
		for k, x := range v {
			out = append(out, badNumbers(x, root, append(path, k))...)
		}
		return out
	case []any:
		var out []cairn.Cause
		for i, x := range v {
			out = append(out, badNumbers(x, root, append(path, strconv.Itoa(i)))...)
		}
		return out
	}
	return nil
}

func hasBadNumber(v any) bool {
	switch v := v.(type) {
	case json.Number:
		return !numberInRange(string(v))
	case map[string]any:
		for _, x := range v {
			if hasBadNumber(x) {
				return true
			}
		}
	case []any:
		for _, x := range v {
			if hasBadNumber(x) {
				return true
			}
		}
	}
	return false
}

// numberInRange reports whether a JSON number literal's exponent is within
// ±maxExponent.
func numberInRange(n string) bool {
	i := strings.IndexAny(n, "eE")
	if i < 0 {
		return true
	}
	exp, err := strconv.Atoi(n[i+1:])
	return err == nil && exp >= -maxExponent && exp <= maxExponent
}

// intKeywords are the keywords the library converts to int, wrapping
// silently on overflow.
var intKeywords = map[string]bool{
	"minLength": true, "maxLength": true,
	"minItems": true, "maxItems": true,
	"minProperties": true, "maxProperties": true,
	"minContains": true, "maxContains": true,
}

// maxInt bounds the values of intKeywords: far beyond any sensible document
// and within int on every platform.
const maxInt = 1<<31 - 1

// checkIntKeywords reports intKeywords whose value is too large for the
// library, walking only schema positions so that data (const, enum, default)
// shaped like a schema is left alone.
func checkIntKeywords(v any, path []string) []cairn.Cause {
	obj, ok := v.(map[string]any)
	if !ok {
		return nil
	}
	var out []cairn.Cause
	for k, x := range obj {
		p := append(path[:len(path):len(path)], k)
		switch {
		case intKeywords[k]:
			if n, ok := x.(json.Number); ok {
				if f, err := strconv.ParseFloat(string(n), 64); err != nil || f > maxInt {
					out = append(out, cairn.Cause{Field: field("", p), Message: fmt.Sprintf("must be <= %d", maxInt)})
				}
			}
		case schemaMapKeywords[k]:
			if m, ok := x.(map[string]any); ok {
				for name, sub := range m {
					out = append(out, checkIntKeywords(sub, append(p[:len(p):len(p)], name))...)
				}
			}
		case schemaListKeywords[k] || k == "items":
			if list, ok := x.([]any); ok {
				for i, sub := range list {
					out = append(out, checkIntKeywords(sub, append(p[:len(p):len(p)], strconv.Itoa(i)))...)
				}
			} else if k == "items" {
				out = append(out, checkIntKeywords(x, p)...)
			}
		case schemaKeywords[k]:
			out = append(out, checkIntKeywords(x, p)...)
		}
	}
	return out
}

// Keywords whose values hold subschemas, by shape.
var (
	// schemaMapKeywords map names to subschemas ("dependencies" values may
	// also be string lists, which hold no keywords).
	schemaMapKeywords = map[string]bool{
		"properties": true, "patternProperties": true, "$defs": true,
		"definitions": true, "dependentSchemas": true, "dependencies": true,
	}
	// schemaListKeywords hold arrays of subschemas ("items" may too, in
	// draft 07).
	schemaListKeywords = map[string]bool{
		"allOf": true, "anyOf": true, "oneOf": true, "prefixItems": true,
	}
	// schemaKeywords hold one subschema ("items" too, when not an array).
	schemaKeywords = map[string]bool{
		"not": true, "if": true, "then": true, "else": true,
		"additionalProperties": true, "unevaluatedProperties": true,
		"additionalItems": true, "unevaluatedItems": true,
		"contains": true, "propertyNames": true, "contentSchema": true,
	}
)

// field joins root and the JSON Pointer-escaped tokens of path with "/".
func field(root string, path []string) string {
	var b strings.Builder
	b.WriteString(root)
	for _, tok := range path {
		if b.Len() > 0 {
			b.WriteByte('/')
		}
		b.WriteString(escapeToken(tok))
	}
	return b.String()
}

var tokenEscaper = strings.NewReplacer("~", "~0", "/", "~1")

// escapeToken escapes a path token as JSON Pointer does, so a property name
// containing "/" cannot be mistaken for two levels.
func escapeToken(tok string) string {
	if !strings.ContainsAny(tok, "~/") {
		return tok
	}
	return tokenEscaper.Replace(tok)
}

var tokenUnescaper = strings.NewReplacer("~1", "/", "~0", "~")
