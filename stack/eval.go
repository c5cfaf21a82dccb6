package stack

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/expr"
)

// Defaults returns a copy of spec completed with the defaults the
// parameters schema declares (properties' "default", in nested objects
// too); spec itself is not changed.
func (s *Stack) Defaults(spec map[string]any) (map[string]any, error) {
	out, err := ApplyDefaults(s.Manifest.Kind.Parameters, spec)
	if err != nil {
		return nil, fmt.Errorf("stack %s: %w", s.Manifest.Name, err)
	}
	return out, nil
}

// ApplyDefaults is Defaults for a parameters schema (kind.parameters) on
// its own: package deps completes a dependency's parameters with it, as
// the hub does on create, before its own dependencies' mappings read them.
func ApplyDefaults(schema json.RawMessage, spec map[string]any) (map[string]any, error) {
	var doc map[string]any
	if len(schema) > 0 {
		if err := json.Unmarshal(schema, &doc); err != nil {
			return nil, fmt.Errorf("parameters schema: %w", err)
		}
	}
	out := deepCopy(spec)
	m, _ := out.(map[string]any)
	if m == nil {
		m = map[string]any{}
	}
	applyDefaults(doc, m)
	return m, nil
}

func applyDefaults(sch map[string]any, v map[string]any) {
	props, _ := sch["properties"].(map[string]any)
	for _, name := range sortedKeys(props) {
		ps, ok := props[name].(map[string]any)
		if !ok {
			continue
		}
		cur, present := v[name]
		if !present {
			if d, has := ps["default"]; has {
				v[name] = deepCopy(d)
				cur, present = v[name], true
			}
		}
		if sub, ok := cur.(map[string]any); ok && present {
			applyDefaults(ps, sub)
		}
	}
}

func deepCopy(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = deepCopy(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = deepCopy(e)
		}
		return out
	}
	return v
}

// ValidateParameters validates an installation's spec against the
// parameters schema. The error is cairn.CodeInvalid; its Causes name each
// field at fault as spec/FIELD.
func (s *Stack) ValidateParameters(spec map[string]any) error {
	if s.params == nil {
		return nil
	}
	if spec == nil {
		spec = map[string]any{}
	}
	b, err := json.Marshal(spec)
	if err != nil {
		return cairn.Errorf(cairn.CodeInvalid, "parameters of %s: %w", s.Manifest.Kind.Names.Kind, err)
	}
	causes := s.params.ValidateShowingValues("spec", b)
	if len(causes) == 0 {
		return nil
	}
	parts := make([]string, len(causes))
	for i, c := range causes {
		parts[i] = c.String()
	}
	e := cairn.Errorf(cairn.CodeInvalid, "invalid parameters of %s: %s", s.Manifest.Kind.Names.Kind, strings.Join(parts, "; "))
	e.Causes = causes
	return e
}

// Outputs evaluates the stack's outputs for an installation and its
// rendered resources. observed holds, by Resource.Key, the children as
// they are now (with status); where a child is in it, references read the
// observed object, else the rendered one. An output that cannot be
// computed (its resource has no such field yet) makes the error, which
// names each such output and reference; the map still holds the outputs
// that could be computed.
func (s *Stack) Outputs(inst Installation, rendered []Resource, observed map[string]map[string]any) (map[string]any, error) {
	spec, err := s.Defaults(inst.Spec)
	if err != nil {
		return nil, err
	}
	if inst.APIVersion == "" {
		inst.APIVersion = s.Manifest.Kind.APIVersion()
	}
	if inst.Kind == "" {
		inst.Kind = s.Manifest.Kind.Names.Kind
	}
	resources := map[string]any{}
	for _, r := range rendered {
		obj := r.Object
		if o, ok := observed[r.Key()]; ok && o != nil {
			obj = o
		}
		byName, _ := resources[r.Kind()].(map[string]any)
		if byName == nil {
			byName = map[string]any{}
			resources[r.Kind()] = byName
		}
		byName[r.OriginalName] = obj
	}
	root := map[string]any{
		"parameters": spec,
		"installation": map[string]any{
			"apiVersion": inst.APIVersion, "kind": inst.Kind,
			"name": inst.Name, "namespace": inst.Namespace, "uid": inst.UID,
			"labels": toAnyMap(inst.Labels), "annotations": toAnyMap(inst.Annotations),
		},
		"resources": resources,
	}
	out := make(map[string]any, len(s.Manifest.Outputs))
	var errs []string
	for _, o := range s.Manifest.Outputs {
		tpl := o.tpl
		if tpl == nil {
			if tpl, err = expr.Parse(o.Value); err != nil {
				errs = append(errs, fmt.Sprintf("output %s: %v", o.Name, err))
				continue
			}
		}
		v, err := tpl.Eval(expr.Lookup(root))
		if err != nil {
			errs = append(errs, fmt.Sprintf("output %s: %v", o.Name, err))
			continue
		}
		out[o.Name] = v
	}
	if len(errs) > 0 {
		return out, cairn.Errorf(cairn.CodeInvalid, "%s", strings.Join(errs, "; "))
	}
	return out, nil
}

// ReadinessFor returns the readiness checks that apply to r, in manifest
// order. A resource with none is ready once it exists.
func (s *Stack) ReadinessFor(r Resource) []ReadinessCheck {
	var out []ReadinessCheck
	for _, c := range s.Manifest.Readiness {
		if c.Match.matches(r) {
			out = append(out, c)
		}
	}
	return out
}

// Ready runs every readiness check that applies to r against obj (the
// child as it is now, status included). reason joins the reasons of the
// checks that fail.
func (s *Stack) Ready(r Resource, obj map[string]any) (ready bool, reason string) {
	var reasons []string
	for _, c := range s.ReadinessFor(r) {
		if ok, why := CheckReady(c, obj); !ok {
			reasons = append(reasons, why)
		}
	}
	return len(reasons) == 0, strings.Join(reasons, "; ")
}

// CheckReady runs one readiness check on obj. When it fails, reason names
// the field and what was found there.
func CheckReady(c ReadinessCheck, obj map[string]any) (ready bool, reason string) {
	switch c.Type {
	case None, "":
		return true, ""
	case NonEmpty:
		v, ok := expr.Get(obj, c.FieldPath)
		if !ok || v == nil {
			return false, c.FieldPath + " is not set"
		}
		if isEmpty(v) {
			return false, fmt.Sprintf("%s is empty (%s)", c.FieldPath, show(v))
		}
		return true, ""
	case MatchString:
		v, ok := expr.Get(obj, c.FieldPath)
		if !ok || v == nil {
			return false, fmt.Sprintf("%s is not set, want %q", c.FieldPath, c.MatchString)
		}
		if s, isStr := v.(string); !isStr || s != c.MatchString {
			return false, fmt.Sprintf("%s is %s, want %q", c.FieldPath, show(v), c.MatchString)
		}
		return true, ""
	case MatchInteger:
		v, ok := expr.Get(obj, c.FieldPath)
		if !ok || v == nil {
			return false, fmt.Sprintf("%s is not set, want %d", c.FieldPath, c.MatchInteger)
		}
		n, isInt := asInt(v)
		if !isInt || n != c.MatchInteger {
			return false, fmt.Sprintf("%s is %s, want %d", c.FieldPath, show(v), c.MatchInteger)
		}
		return true, ""
	case MatchCondition:
		if c.MatchCondition == nil {
			return false, "MatchCondition check without matchCondition"
		}
		want := cmpOr(c.MatchCondition.Status, "True")
		conds, _ := expr.Get(obj, "status.conditions")
		list, _ := conds.([]any)
		for _, e := range list {
			cond, _ := e.(map[string]any)
			if t, _ := cond["type"].(string); t != c.MatchCondition.Type {
				continue
			}
			st, _ := cond["status"].(string)
			if st == want {
				return true, ""
			}
			why := fmt.Sprintf("condition %s is %q, want %q", c.MatchCondition.Type, st, want)
			var extra []string
			if r, _ := cond["reason"].(string); r != "" {
				extra = append(extra, "reason "+r)
			}
			if m, _ := cond["message"].(string); m != "" {
				extra = append(extra, "message "+strconv.Quote(m))
			}
			if len(extra) > 0 {
				why += " (" + strings.Join(extra, ", ") + ")"
			}
			return false, why
		}
		return false, fmt.Sprintf("condition %s is not in status.conditions, want %q", c.MatchCondition.Type, want)
	}
	return false, fmt.Sprintf("unknown readiness check type %q", c.Type)
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func isEmpty(v any) bool {
	switch x := v.(type) {
	case string:
		return x == ""
	case map[string]any:
		return len(x) == 0
	case []any:
		return len(x) == 0
	}
	return false
}

// show renders a found value for a message.
func show(v any) string {
	switch x := v.(type) {
	case string:
		return strconv.Quote(x)
	case map[string]any:
		if len(x) == 0 {
			return "an empty object"
		}
		return "an object"
	case []any:
		if len(x) == 0 {
			return "an empty list"
		}
		return "a list"
	}
	return fmt.Sprint(v)
}

func asInt(v any) (int64, bool) {
	switch x := v.(type) {
	case json.Number:
		n, err := x.Int64()
		return n, err == nil
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1<<53 {
			return int64(x), true
		}
	case int:
		return int64(x), true
	case int64:
		return x, true
	case int32:
		return int64(x), true
	}
	return 0, false
}

// DeletionPriority is r's deletion band: the priority of the most specific
// entry that matches it (name over kind over apiVersion; the first of
// equals), 0 when none does. Higher bands are deleted first.
func (s *Stack) DeletionPriority(r Resource) int {
	best, prio := -1, 0
	for _, d := range s.Manifest.DeletionPriorities {
		if d.Match.matches(r) && d.Match.specificity() > best {
			best, prio = d.Match.specificity(), d.Priority
		}
	}
	return prio
}

// DeletionBands groups resources by deletion priority, highest band first,
// each band in the order given: delete a band, wait for it to be gone,
// then the next.
func (s *Stack) DeletionBands(rs []Resource) [][]Resource {
	byPrio := map[int][]Resource{}
	for _, r := range rs {
		p := s.DeletionPriority(r)
		byPrio[p] = append(byPrio[p], r)
	}
	prios := slices.Sorted(maps.Keys(byPrio))
	slices.Reverse(prios)
	out := make([][]Resource, 0, len(prios))
	for _, p := range prios {
		out = append(out, byPrio[p])
	}
	return out
}
