// Package policy is the hub's Policy document (seed 000 "Configuring storage
// backends") and the rule matching that picks a storage backend for a Type
// when a create names none.
//
// It is pure: parsing, syntax checks and an index over the rules. Whether the
// backends and injected instances a policy names exist is the hub's business
// (hub.ApplyPolicy), since only the hub can read them.
package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/cairn-dev/cairn"
)

// Policy is the whole document. Interface rules are kept as the seed writes
// them; cairn stores, validates and exposes their injection lists now, and
// stacks use them later.
type Policy struct {
	Interface    InterfacePolicy    `json:"interface"`
	TypeInstance TypeInstancePolicy `json:"typeInstance"`
}

// InterfacePolicy holds the rules for Interfaces and their defaults.
type InterfacePolicy struct {
	Rules   []InterfaceRule `json:"rules,omitempty"`
	Default *Defaults       `json:"default,omitempty"`
}

// Defaults apply to every interface rule.
type Defaults struct {
	Inject *Inject `json:"inject,omitempty"`
}

// Inject lists instances injected where an action requires them.
type Inject struct {
	RequiredTypeInstances []RequiredTypeInstance `json:"requiredTypeInstances,omitempty"`
}

// RequiredTypeInstance is one instance to inject.
type RequiredTypeInstance struct {
	ID          string `json:"id"`
	Description string `json:"description,omitempty"`
}

// InterfaceRule selects implementations of an Interface; each oneOf entry
// may override the default injection list.
type InterfaceRule struct {
	Interface TypeRef              `json:"interface"`
	OneOf     []ImplementationRule `json:"oneOf,omitempty"`
}

// ImplementationRule is one alternative of an interface rule. Its
// constraints are kept verbatim: cairn does not select implementations yet.
type ImplementationRule struct {
	ImplementationConstraints json.RawMessage `json:"implementationConstraints,omitempty"`
	Inject                    *Inject         `json:"inject,omitempty"`
}

// TypeInstancePolicy holds the backend rules.
type TypeInstancePolicy struct {
	Rules []Rule `json:"rules,omitempty"`
}

// TypeRef is a Type path, which in a rule may end in ".*" or be "*", and an
// optional revision.
type TypeRef struct {
	Path     string `json:"path"`
	Revision string `json:"revision,omitempty"`
}

func (r TypeRef) String() string {
	if r.Revision == "" {
		return r.Path
	}
	return r.Path + ":" + r.Revision
}

// Rule sends instances of the Types its typeRef matches to a backend.
type Rule struct {
	TypeRef TypeRef    `json:"typeRef"`
	Backend BackendRef `json:"backend"`
}

// BackendRef names a storage backend instance.
type BackendRef struct {
	ID          string `json:"id"`
	Description string `json:"description,omitempty"`
}

// Parse decodes a policy document (JSON; YAML is converted by the callers
// that read files). Unknown fields and values of the wrong kind are refused,
// every one named by its field (typeInstance/rules/1/backnd), so a typo does
// not silently drop a rule. An empty document is refused too: read as a
// policy it would remove every rule.
func Parse(doc []byte) (Policy, error) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil && !errors.Is(err, io.EOF) {
		return Policy{}, cairn.Errorf(cairn.CodeInvalid, "policy: %w", err)
	}
	var causes []cairn.Cause
	switch {
	case v == nil:
		causes = append(causes, cairn.Cause{Message: `the document is empty; a policy without rules is written {"typeInstance": {"rules": []}}`})
	case dec.More() || !atEOF(dec):
		causes = append(causes, cairn.Cause{Message: "there is more than one document; a policy is one object"})
	default:
		if _, ok := v.(map[string]any); !ok {
			causes = append(causes, cairn.Cause{Message: "the document must be an object, not " + jsonKind(v)})
		} else {
			checkShape(reflect.TypeFor[Policy](), v, "", &causes)
		}
	}
	if len(causes) > 0 {
		msgs := make([]string, len(causes))
		for i, c := range causes {
			msgs[i] = strings.TrimSpace(c.Field + " " + c.Message)
		}
		return Policy{}, &cairn.Error{Code: cairn.CodeInvalid, Subject: "Policy", Causes: causes,
			Msg: "invalid policy: " + strings.Join(msgs, ", ")}
	}
	var p Policy
	if err := json.Unmarshal(doc, &p); err != nil {
		// checkShape found nothing, so this is a bug of checkShape's.
		return Policy{}, cairn.Errorf(cairn.CodeInvalid, "policy: %w", err)
	}
	return p, nil
}

func atEOF(dec *json.Decoder) bool {
	_, err := dec.Token()
	return errors.Is(err, io.EOF)
}

var rawMessageType = reflect.TypeFor[json.RawMessage]()

// checkShape compares a decoded JSON value with the Go type it is to fill
// and adds a cause, named by its field, for every unknown field and every
// value of the wrong kind. A null is an absent value.
func checkShape(t reflect.Type, v any, field string, causes *[]cairn.Cause) {
	if v == nil || t == rawMessageType {
		return
	}
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	wrong := func(want string) {
		*causes = append(*causes, cairn.Cause{Field: field, Message: "must be " + want + ", not " + jsonKind(v)})
	}
	switch t.Kind() {
	case reflect.Struct:
		obj, ok := v.(map[string]any)
		if !ok {
			wrong("an object")
			return
		}
		var known []string
		fields := map[string]reflect.Type{}
		for i := range t.NumField() {
			name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
			known = append(known, name)
			fields[name] = t.Field(i).Type
		}
		keys := make([]string, 0, len(obj))
		for k := range obj {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			ft, ok := fields[k]
			if !ok {
				*causes = append(*causes, cairn.Cause{Field: join(field, k),
					Message: "is not a known field (known: " + strings.Join(known, ", ") + ")"})
				continue
			}
			checkShape(ft, obj[k], join(field, k), causes)
		}
	case reflect.Slice:
		list, ok := v.([]any)
		if !ok {
			wrong("a list")
			return
		}
		for i, item := range list {
			checkShape(t.Elem(), item, join(field, strconv.Itoa(i)), causes)
		}
	case reflect.String:
		if _, ok := v.(string); !ok {
			wrong("a string")
		}
	}
}

func join(field, name string) string {
	if field == "" {
		return name
	}
	return field + "/" + name
}

// jsonKind names the kind of a decoded JSON value as a user writes it.
func jsonKind(v any) string {
	switch v.(type) {
	case map[string]any:
		return "an object"
	case []any:
		return "a list"
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "true or false"
	}
	return "null"
}

// IsCatchAll reports whether a rule path matches every Type: "*" or "cap.*"
// (seed 000 calls cap.* "any other Type reference").
func IsCatchAll(path string) bool { return path == "*" || path == "cap.*" }

var (
	// pathRE: dot-separated lowercase segments, optionally ending in ".*".
	pathRE     = regexp.MustCompile(`^[a-z0-9]([a-z0-9_-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9_-]*[a-z0-9])?)*(\.\*)?$`)
	revisionRE = regexp.MustCompile(`^\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$`)
)

// Check returns one cause per syntax error: malformed paths and revisions, a
// revision on a wildcard rule, duplicate rules, missing ids. Every bad rule
// is reported, not only the first.
func (p Policy) Check() []cairn.Cause {
	var causes []cairn.Cause
	seen := map[TypeRef]int{}
	for i, r := range p.TypeInstance.Rules {
		f := fmt.Sprintf("typeInstance/rules/%d", i)
		switch {
		case r.TypeRef.Path == "":
			causes = append(causes, cairn.Cause{Field: f + "/typeRef/path", Message: "is required"})
		case r.TypeRef.Path != "*" && !pathRE.MatchString(r.TypeRef.Path):
			causes = append(causes, cairn.Cause{Field: f + "/typeRef/path",
				Message: fmt.Sprintf("%q must be a Type path, a path prefix ending in .*, or *", r.TypeRef.Path)})
		}
		if r.TypeRef.Revision != "" {
			if isWildcard(r.TypeRef.Path) {
				causes = append(causes, cairn.Cause{Field: f + "/typeRef/revision",
					Message: fmt.Sprintf("a revision needs an exact path, not the pattern %q", r.TypeRef.Path)})
			} else if !revisionRE.MatchString(r.TypeRef.Revision) {
				causes = append(causes, cairn.Cause{Field: f + "/typeRef/revision",
					Message: fmt.Sprintf("%q must be a semantic version, e.g. 0.1.0", r.TypeRef.Revision)})
			}
		}
		if j, dup := seen[r.TypeRef]; dup {
			causes = append(causes, cairn.Cause{Field: f + "/typeRef",
				Message: fmt.Sprintf("%s is already matched by rule %d", r.TypeRef, j)})
		} else {
			seen[r.TypeRef] = i
		}
		if r.Backend.ID == "" {
			causes = append(causes, cairn.Cause{Field: f + "/backend/id", Message: "is required"})
		}
	}
	for _, ri := range p.injections() {
		if ri.ID == "" {
			causes = append(causes, cairn.Cause{Field: ri.Field + "/id", Message: "is required"})
		}
	}
	for i, r := range p.Interface.Rules {
		if r.Interface.Path == "" {
			causes = append(causes, cairn.Cause{Field: fmt.Sprintf("interface/rules/%d/interface/path", i), Message: "is required"})
		}
	}
	return causes
}

// Injection is one injected instance with the field that names it.
type Injection struct {
	RequiredTypeInstance
	Field string
}

// Injections lists every injected instance of the policy, the defaults and
// the per-rule overrides, with where each is written.
func (p Policy) Injections() []Injection { return p.injections() }

func (p Policy) injections() []Injection {
	var out []Injection
	if d := p.Interface.Default; d != nil && d.Inject != nil {
		for i, r := range d.Inject.RequiredTypeInstances {
			out = append(out, Injection{r, fmt.Sprintf("interface/default/inject/requiredTypeInstances/%d", i)})
		}
	}
	for i, rule := range p.Interface.Rules {
		for j, o := range rule.OneOf {
			if o.Inject == nil {
				continue
			}
			for k, r := range o.Inject.RequiredTypeInstances {
				out = append(out, Injection{r, fmt.Sprintf("interface/rules/%d/oneOf/%d/inject/requiredTypeInstances/%d", i, j, k)})
			}
		}
	}
	return out
}

// RequiredTypeInstances returns what to inject for an Interface and one of
// its implementation alternatives (index into oneOf; -1 for none): the
// alternative's list when it has one (seed 000: an override is "used
// instead of" the default), else the default list.
func (p Policy) RequiredTypeInstances(interfacePath string, oneOf int) []RequiredTypeInstance {
	for _, rule := range p.Interface.Rules {
		if rule.Interface.Path != interfacePath || oneOf < 0 || oneOf >= len(rule.OneOf) {
			continue
		}
		if inj := rule.OneOf[oneOf].Inject; inj != nil && len(inj.RequiredTypeInstances) > 0 {
			return inj.RequiredTypeInstances
		}
	}
	if d := p.Interface.Default; d != nil && d.Inject != nil {
		return d.Inject.RequiredTypeInstances
	}
	return nil
}

func isWildcard(path string) bool { return path == "*" || strings.HasSuffix(path, ".*") }
