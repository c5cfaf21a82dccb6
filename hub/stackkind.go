package hub

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/stack"
)

// kindChanged is the error of a stack version whose installation kind is
// already registered, under the same kind.version, with another definition
// (old): a Type revision is immutable, as a CRD version's schema is in
// practice. It says what differs, which catalog versions registered the
// kind, and what to change where: kind.version in stack.yaml.
func (h *Hub) kindChanged(ctx context.Context, s *stack.Stack, old, t cairn.Type, err error) error {
	m := s.Manifest
	by := "an earlier stack version"
	if stacks, lerr := h.ListStacks(ctx); lerr == nil {
		var names []string
		for _, e := range stacks {
			if e.InstallationType == t.Ref() {
				names = append(names, e.Name+"@"+e.Version)
			}
		}
		if len(names) > 0 {
			by = strings.Join(names, ", ")
		}
	}
	where := "stack.yaml"
	if line := s.ManifestLine("kind", "version"); line > 0 {
		where += fmt.Sprintf(" (line %d)", line)
	}
	fix := fmt.Sprintf("change kind.version in %s to a new version", where)
	if next := nextAPIVersion(m.Kind.Version); next != "" {
		fix += ", such as " + next
	}
	return &cairn.Error{Code: cairn.CodeConflict, Err: err, Msg: fmt.Sprintf(
		"stack %s@%s: kind %s (%s/%s) is already defined by %s with another definition (%s), and a kind version cannot change (its Type %s is immutable): %s",
		m.Name, m.Version, m.Kind.Names.Kind, m.Kind.Group, m.Kind.Version, by, strings.Join(kindDiff(old, t), "; "), t.Ref(), fix)}
}

// kindDiff says how installation Type t differs from old, field by field
// as a stack author wrote them.
func kindDiff(old, t cairn.Type) []string {
	var o, n map[string]any
	_ = json.Unmarshal(old.JSONSchema, &o)
	_ = json.Unmarshal(t.JSONSchema, &n)
	var out []string
	op, _ := o["properties"].(map[string]any)
	np, _ := n["properties"].(map[string]any)
	for _, name := range slices.Sorted(maps.Keys(merged(op, np))) {
		a, inOld := op[name]
		b, inNew := np[name]
		switch {
		case !inOld:
			out = append(out, "spec."+name+": added")
		case !inNew:
			out = append(out, "spec."+name+": removed")
		case !jsonEqual(a, b):
			out = append(out, "spec."+name+": "+propertyChange(a, b))
		}
	}
	for _, k := range []struct{ key, what string }{
		{"required", "required parameters"},
		{"additionalProperties", "additionalProperties"},
		{PrinterColumnsKey, "printer columns"},
		{cairn.ScopeKey, "scope"},
	} {
		if !jsonEqual(o[k.key], n[k.key]) {
			out = append(out, k.what)
		}
	}
	if !namesEqual(old.Names, t.Names) {
		out = append(out, "names")
	}
	if len(out) == 0 {
		out = append(out, "the parameters schema")
	}
	return out
}

// propertyChange says how a parameter's schema changed: its values (an
// enum, such as a configuration set's field), its default, else that it
// did.
func propertyChange(a, b any) string {
	am, _ := a.(map[string]any)
	bm, _ := b.(map[string]any)
	var parts []string
	if !jsonEqual(am["enum"], bm["enum"]) {
		parts = append(parts, "values "+values(am["enum"])+" → "+values(bm["enum"]))
	}
	if !jsonEqual(am["default"], bm["default"]) {
		parts = append(parts, "default "+values(am["default"])+" → "+values(bm["default"]))
	}
	if len(parts) == 0 {
		return "its schema changed"
	}
	return strings.Join(parts, ", ")
}

// values writes an enum's values (or one value) as JSON, comma-separated.
func values(v any) string {
	if v == nil {
		return "none"
	}
	xs, ok := v.([]any)
	if !ok {
		xs = []any{v}
	}
	parts := make([]string, len(xs))
	for i, x := range xs {
		b, _ := json.Marshal(x)
		parts[i] = string(b)
	}
	return strings.Join(parts, ", ")
}

func merged(a, b map[string]any) map[string]any {
	out := maps.Clone(a)
	if out == nil {
		out = map[string]any{}
	}
	maps.Copy(out, b)
	return out
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

var apiVersionRE = regexp.MustCompile(`^(v\d+(?:alpha|beta)?)(\d*)$`)

// nextAPIVersion is the version after v (v1alpha1 → v1alpha2, v1 → v2),
// "" when v is not a Kubernetes API version.
func nextAPIVersion(v string) string {
	m := apiVersionRE.FindStringSubmatch(v)
	if m == nil {
		return ""
	}
	if m[2] == "" {
		// v1 → v2: the major version itself.
		n, err := strconv.Atoi(strings.TrimPrefix(m[1], "v"))
		if err != nil {
			return ""
		}
		return "v" + strconv.Itoa(n+1)
	}
	n, err := strconv.Atoi(m[2])
	if err != nil {
		return ""
	}
	return m[1] + strconv.Itoa(n+1)
}
