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
	if !s.HasSecrets() || len(v) == 0 {
		return v, nil
	}
	var inst any
	d := json.NewDecoder(bytes.NewReader(v))
	d.UseNumber() // numbers pass through exactly
	if err := d.Decode(&inst); err != nil {
		return json.RawMessage(strconv.Quote(marker)), []string{root}
	}
	r := redactor{doc: s.doc, marker: marker}
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
}

// maxRefDepth bounds $ref chains, which may be cyclic.
const maxRefDepth = 32

// walk returns inst with the values sch marks secret replaced.
func (r *redactor) walk(sch any, inst any, at string, depth int) any {
	m, ok := sch.(map[string]any)
	if !ok || depth > maxRefDepth {
		return inst
	}
	if b, _ := m[SecretKeyword].(bool); b {
		r.fields = append(r.fields, at)
		return r.marker
	}
	if ref, ok := m["$ref"].(string); ok {
		if target, ok := r.resolve(ref); ok {
			if t, _ := target.(map[string]any); t != nil {
				if b, _ := t[SecretKeyword].(bool); b {
					r.fields = append(r.fields, at)
					return r.marker
				}
			}
			inst = r.walk(target, inst, at, depth+1)
		}
	}
	if all, ok := m["allOf"].([]any); ok {
		for _, sub := range all {
			inst = r.walk(sub, inst, at, depth+1)
		}
	}
	switch x := inst.(type) {
	case map[string]any:
		props, _ := m["properties"].(map[string]any)
		pats, _ := m["patternProperties"].(map[string]any)
		for k, val := range x {
			child := at + "/" + escapeToken(k)
			var sub any
			if p, ok := props[k]; ok {
				sub = p
			} else if p := matchPattern(pats, k); p != nil {
				sub = p
			} else if ap, ok := m["additionalProperties"].(map[string]any); ok {
				sub = ap
			}
			if sub != nil {
				x[k] = r.walk(sub, val, child, depth)
			}
		}
		return x
	case []any:
		prefix, _ := m["prefixItems"].([]any)
		items := m["items"]
		if list, ok := items.([]any); ok { // draft-07 tuple form
			prefix, items = list, m["additionalItems"]
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

// matchPattern returns the subschema of the first patternProperties entry
// whose regular expression matches name.
func matchPattern(pats map[string]any, name string) any {
	for p, sub := range pats {
		if re, err := regexp.Compile(p); err == nil && re.MatchString(name) {
			return sub
		}
	}
	return nil
}
