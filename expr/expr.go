// Package expr parses and evaluates the `${ path }` templates that stacks and
// bundles use to wire values together (seed 002 writes
// `${ bundle.dependencies.infra.outputs.ip }`, seed 004's stacks write
// outputs such as `${ resources.Network.network.metadata.name }`).
//
// A template is literal text with references. A reference is `${`, optional
// blanks, a path, optional blanks, `}`. A path is dot-separated names
// (letters, digits, '_' and '-') with optional bracketed steps: `[0]` indexes
// a list, `[key.with.dots]` or `["key"]` names a map key that is not a plain
// name (a label key such as `app.kubernetes.io/name`). `$${` writes a literal
// `${`. Nothing else is special: there are no functions or operators, on
// purpose, so a template says where a value comes from and nothing more.
package expr

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Template is a parsed template. The zero value is the empty literal.
type Template struct {
	src   string
	parts []part
}

// part is either literal text (ref == "") or one reference.
type part struct {
	text  string
	ref   string
	steps []Step
}

// Step is one step of a path: a map key, or a list index when IsIndex.
type Step struct {
	Key     string
	Index   int
	IsIndex bool
}

// Error is a parse error at a byte offset of the template.
type Error struct {
	Template string
	Pos      int // byte offset, 0-based
	Msg      string
}

func (e *Error) Error() string {
	return fmt.Sprintf("template %q: at offset %d: %s", e.Template, e.Pos, e.Msg)
}

// Parse parses s. The error (an *Error) names the offset of the problem.
func Parse(s string) (*Template, error) {
	t := &Template{src: s}
	var lit strings.Builder
	flush := func() {
		if lit.Len() > 0 {
			t.parts = append(t.parts, part{text: lit.String()})
			lit.Reset()
		}
	}
	for i := 0; i < len(s); {
		if strings.HasPrefix(s[i:], "$${") {
			lit.WriteString("${")
			i += 3
			continue
		}
		if !strings.HasPrefix(s[i:], "${") {
			lit.WriteByte(s[i])
			i++
			continue
		}
		end := strings.IndexByte(s[i+2:], '}')
		if end < 0 {
			return nil, &Error{Template: s, Pos: i, Msg: "unterminated ${: no closing }"}
		}
		inner := s[i+2 : i+2+end]
		start := i + 2 + (len(inner) - len(strings.TrimLeft(inner, " \t")))
		ref := strings.TrimSpace(inner)
		if ref == "" {
			return nil, &Error{Template: s, Pos: i, Msg: "empty reference ${}"}
		}
		steps, off, msg := parsePath(ref)
		if msg != "" {
			return nil, &Error{Template: s, Pos: start + off, Msg: fmt.Sprintf("reference %q: %s", ref, msg)}
		}
		flush()
		t.parts = append(t.parts, part{ref: ref, steps: steps})
		i += 2 + end + 1
	}
	flush()
	return t, nil
}

// MustParse is Parse for templates known to be valid; it panics otherwise.
func MustParse(s string) *Template {
	t, err := Parse(s)
	if err != nil {
		panic(err)
	}
	return t
}

// ParsePath parses a path as written inside `${ }` (also the field paths of
// readiness checks), returning its steps. The error names the offset.
func ParsePath(p string) ([]Step, error) {
	steps, off, msg := parsePath(p)
	if msg != "" {
		return nil, fmt.Errorf("path %q: at offset %d: %s", p, off, msg)
	}
	return steps, nil
}

func isNameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

// parsePath returns the steps of p, or the offset and text of the problem.
func parsePath(p string) ([]Step, int, string) {
	var steps []Step
	i := 0
	for {
		j := i
		for j < len(p) && isNameByte(p[j]) {
			j++
		}
		if j == i {
			if i >= len(p) {
				return nil, i, "path ends after '.': want a name"
			}
			return nil, i, fmt.Sprintf("unexpected %q: want a name of letters, digits, '_' or '-'", p[i])
		}
		steps = append(steps, Step{Key: p[i:j]})
		i = j
		for i < len(p) && p[i] == '[' {
			j := strings.IndexByte(p[i:], ']')
			if j < 0 {
				return nil, i, "unterminated '[': no closing ']'"
			}
			in := p[i+1 : i+j]
			switch {
			case in == "":
				return nil, i, "empty brackets []"
			case len(in) >= 2 && (in[0] == '"' && in[len(in)-1] == '"' || in[0] == '\'' && in[len(in)-1] == '\''):
				steps = append(steps, Step{Key: in[1 : len(in)-1]})
			default:
				if n, err := strconv.Atoi(in); err == nil {
					if n < 0 {
						return nil, i + 1, fmt.Sprintf("negative index %d", n)
					}
					steps = append(steps, Step{Index: n, IsIndex: true})
				} else {
					steps = append(steps, Step{Key: in})
				}
			}
			i += j + 1
		}
		if i == len(p) {
			return steps, 0, ""
		}
		if p[i] != '.' {
			return nil, i, fmt.Sprintf("unexpected %q: want '.', '[' or the end of the path", p[i])
		}
		i++
	}
}

// String returns the template as written.
func (t *Template) String() string { return t.src }

// IsLiteral reports whether the template has no reference.
func (t *Template) IsLiteral() bool {
	for _, p := range t.parts {
		if p.ref != "" {
			return false
		}
	}
	return true
}

// Refs returns the paths the template references, in order of appearance,
// each once, as written inside `${ }` without the blanks.
func (t *Template) Refs() []string {
	var out []string
	seen := map[string]bool{}
	for _, p := range t.parts {
		if p.ref != "" && !seen[p.ref] {
			seen[p.ref] = true
			out = append(out, p.ref)
		}
	}
	return out
}

// Eval evaluates the template. lookup resolves a referenced path (as Refs
// returns it). A template that is exactly one reference, with no text
// around it, yields the referenced value as it is (a number stays a number,
// an object an object); otherwise the parts are concatenated into a string,
// scalars formatted plainly and objects and lists as JSON, null as "".
// A path lookup does not know is an error naming it.
func (t *Template) Eval(lookup func(path string) (any, bool)) (any, error) {
	if len(t.parts) == 1 && t.parts[0].ref != "" {
		v, ok := lookup(t.parts[0].ref)
		if !ok {
			return nil, fmt.Errorf("template %q: unknown reference %q", t.src, t.parts[0].ref)
		}
		return v, nil
	}
	var b strings.Builder
	for _, p := range t.parts {
		if p.ref == "" {
			b.WriteString(p.text)
			continue
		}
		v, ok := lookup(p.ref)
		if !ok {
			return nil, fmt.Errorf("template %q: unknown reference %q", t.src, p.ref)
		}
		s, err := format(v)
		if err != nil {
			return nil, fmt.Errorf("template %q: reference %q: %w", t.src, p.ref, err)
		}
		b.WriteString(s)
	}
	return b.String(), nil
}

// format writes v as it appears inside a string.
func format(v any) (string, error) {
	switch x := v.(type) {
	case nil:
		return "", nil
	case string:
		return x, nil
	case bool:
		return strconv.FormatBool(x), nil
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1e15 {
			return strconv.FormatInt(int64(x), 10), nil
		}
		return strconv.FormatFloat(x, 'f', -1, 64), nil
	case float32:
		return format(float64(x))
	case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64, json.Number:
		return fmt.Sprint(x), nil
	default:
		b, err := json.Marshal(x)
		if err != nil {
			return "", err
		}
		return string(b), nil
	}
}

// Get walks root (maps with string keys and lists, as JSON decodes them)
// along path and returns the value found there.
func Get(root any, path string) (any, bool) {
	steps, _, msg := parsePath(path)
	if msg != "" {
		return nil, false
	}
	return Walk(root, steps)
}

// Walk is Get with a parsed path.
func Walk(root any, steps []Step) (any, bool) {
	cur := root
	for _, s := range steps {
		switch c := cur.(type) {
		case map[string]any:
			if s.IsIndex {
				v, ok := c[strconv.Itoa(s.Index)]
				if !ok {
					return nil, false
				}
				cur = v
				continue
			}
			v, ok := c[s.Key]
			if !ok {
				return nil, false
			}
			cur = v
		case map[string]string:
			if s.IsIndex {
				return nil, false
			}
			v, ok := c[s.Key]
			if !ok {
				return nil, false
			}
			cur = v
		case []any:
			if !s.IsIndex || s.Index >= len(c) {
				return nil, false
			}
			cur = c[s.Index]
		default:
			return nil, false
		}
	}
	return cur, true
}

// Lookup returns a lookup function for Eval that resolves paths in root.
func Lookup(root map[string]any) func(string) (any, bool) {
	return func(p string) (any, bool) { return Get(root, p) }
}
