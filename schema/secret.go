package schema

import (
	"bytes"
	"encoding/json"
	"net/url"
	"regexp"
	"strconv"
	"strings"
)

// SecretKeyword marks a schema's values as secret: "x-cairn-secret": true on
// the root schema makes the whole value secret, on a property (at any depth,
// through properties, patternProperties, additionalProperties, items,
// prefixItems, allOf and local $refs) that property's values.
const SecretKeyword = "x-cairn-secret"

// MentionsSecrets reports, cheaply, whether a schema document could mark
// anything secret; a document that does not name SecretKeyword marks
// nothing, so callers skip compiling it.
func MentionsSecrets(doc []byte) bool {
	return bytes.Contains(doc, []byte(SecretKeyword))
}

// HasSecrets reports whether the schema marks any value secret.
func (s *Schema) HasSecrets() bool {
	return s != nil && hasSecret(s.doc)
}

func hasSecret(v any) bool {
	switch x := v.(type) {
	case map[string]any:
		if b, _ := x[SecretKeyword].(bool); b {
			return true
		}
		for _, c := range x {
			if hasSecret(c) {
				return true
			}
		}
	case []any:
		for _, c := range x {
			if hasSecret(c) {
				return true
			}
		}
	}
	return false
}

// Redact returns v with every value the schema marks secret replaced by
// marker (a JSON string), and the fields it replaced as "/"-joined paths
// under root, sorted as found. v is returned unchanged, without decoding,
// when the schema marks nothing; a v that is not JSON is replaced whole when
// the schema marks anything, since its shape cannot be known.
func (s *Schema) Redact(root string, v json.RawMessage, marker string) (json.RawMessage, []string) {
	return s.redact(root, v, marker, false)
}

// RedactKeepingKeys is Redact keeping the member names of a secret object,
// at any depth, with marker for each of their values: a copy of a value in
// which a client finds what fields it set (kubectl's last-applied object,
// from which kubectl apply learns which fields to delete).
func (s *Schema) RedactKeepingKeys(root string, v json.RawMessage, marker string) (json.RawMessage, []string) {
	return s.redact(root, v, marker, true)
}

func (s *Schema) redact(root string, v json.RawMessage, marker string, keepKeys bool) (json.RawMessage, []string) {
	if !s.HasSecrets() || len(v) == 0 {
		return v, nil
	}
	var inst any
	d := json.NewDecoder(bytes.NewReader(v))
	d.UseNumber() // numbers pass through exactly
	if err := d.Decode(&inst); err != nil {
		return json.RawMessage(strconv.Quote(marker)), []string{root}
	}
	r := redactor{doc: s.doc, marker: marker, keepKeys: keepKeys}
	out := r.walk(s.doc, inst, root, 0)
	if len(r.fields) == 0 {
		return v, nil
	}
	b, err := json.Marshal(out)
	if err != nil {
		return json.RawMessage(strconv.Quote(marker)), []string{root}
	}
	return b, r.fields
}

type redactor struct {
	doc    any
	marker string
	fields []string
	// keepKeys replaces a secret object by its skeleton, not by marker.
	keepKeys bool
	// done holds the locations already replaced, which another schema
	// applying there (allOf, oneOf, ...) must not name again.
	done map[string]bool
}

// maxRefDepth bounds $ref chains, which may be cyclic.
const maxRefDepth = 32

// inPlace are the keywords whose subschemas apply to the value itself. The
// branches of anyOf and oneOf, and both of if's then and else, are all
// followed whichever the value matches: a mark in any of them hides the
// field, as the web console reads them.
var inPlace = []string{"allOf", "anyOf", "oneOf"}

// walk returns inst with the values sch marks secret replaced.
func (r *redactor) walk(sch any, inst any, at string, depth int) any {
	m, ok := sch.(map[string]any)
	if !ok || depth > maxRefDepth || r.done[at] {
		return inst
	}
	if b, _ := m[SecretKeyword].(bool); b {
		if r.done == nil {
			r.done = map[string]bool{}
		}
		r.done[at] = true
		r.fields = append(r.fields, at)
		if r.keepKeys {
			return r.skeleton(inst)
		}
		return r.marker
	}
	if ref, ok := m["$ref"].(string); ok {
		if target, ok := r.resolve(ref); ok {
			inst = r.walk(target, inst, at, depth+1)
		}
	}
	for _, k := range inPlace {
		subs, _ := m[k].([]any)
		for _, sub := range subs {
			inst = r.walk(sub, inst, at, depth+1)
		}
	}
	for _, k := range []string{"if", "then", "else"} {
		inst = r.walk(m[k], inst, at, depth+1)
	}
	switch x := inst.(type) {
	case map[string]any:
		props, _ := m["properties"].(map[string]any)
		pats, _ := m["patternProperties"].(map[string]any)
		for _, k := range []string{"dependentSchemas", "dependencies"} {
			deps, _ := m[k].(map[string]any)
			for name, sub := range deps {
				if _, present := x[name]; present {
					inst = r.walk(sub, inst, at, depth+1) // an array (draft-07 property dependency) marks nothing
				}
			}
		}
		if _, ok := inst.(map[string]any); !ok {
			return inst
		}
		for k, val := range x {
			child := at + "/" + escapeToken(k)
			// properties and every matching patternProperties entry
			// apply; additionalProperties (or unevaluatedProperties)
			// when none does.
			matched := false
			if p, ok := props[k]; ok {
				val, matched = r.walk(p, val, child, depth), true
			}
			for _, p := range matchPatterns(pats, k) {
				val, matched = r.walk(p, val, child, depth), true
			}
			if !matched {
				if ap, ok := m["additionalProperties"].(map[string]any); ok {
					val = r.walk(ap, val, child, depth)
				} else if up, ok := m["unevaluatedProperties"].(map[string]any); ok {
					val = r.walk(up, val, child, depth)
				}
			}
			x[k] = val
		}
		return x
	case []any:
		prefix, _ := m["prefixItems"].([]any)
		items := m["items"]
		if list, ok := items.([]any); ok { // draft-07 tuple form
			prefix, items = list, m["additionalItems"]
		}
		if items == nil {
			items = m["unevaluatedItems"]
		}
		for i, val := range x {
			child := at + "/" + strconv.Itoa(i)
			if i < len(prefix) {
				x[i] = r.walk(prefix[i], val, child, depth)
			} else if items != nil {
				x[i] = r.walk(items, val, child, depth)
			}
		}
		return x
	}
	return inst
}

// skeleton is inst with every member name kept and everything else
// (scalars, arrays) replaced by the marker.
func (r *redactor) skeleton(inst any) any {
	m, ok := inst.(map[string]any)
	if !ok {
		return r.marker
	}
	for k, v := range m {
		m[k] = r.skeleton(v)
	}
	return m
}

// resolve follows a reference inside the document ("#", "#/$defs/x",
// "#/definitions/x"); anything else was refused at compile time.
func (r *redactor) resolve(ref string) (any, bool) {
	frag, ok := strings.CutPrefix(ref, "#")
	if !ok {
		return nil, false
	}
	frag, err := url.PathUnescape(frag)
	if err != nil {
		return nil, false
	}
	cur := r.doc
	for _, tok := range strings.Split(strings.TrimPrefix(frag, "/"), "/") {
		if tok == "" {
			continue
		}
		tok = strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
		switch c := cur.(type) {
		case map[string]any:
			cur, ok = c[tok]
		case []any:
			i, err := strconv.Atoi(tok)
			ok = err == nil && i >= 0 && i < len(c)
			if ok {
				cur = c[i]
			}
		default:
			ok = false
		}
		if !ok {
			return nil, false
		}
	}
	return cur, true
}

// matchPatterns returns the subschemas of every patternProperties entry
// whose regular expression matches name: all of them apply.
func matchPatterns(pats map[string]any, name string) []any {
	var out []any
	for p, sub := range pats {
		if re, err := regexp.Compile(p); err == nil && re.MatchString(name) {
			out = append(out, sub)
		}
	}
	return out
}
