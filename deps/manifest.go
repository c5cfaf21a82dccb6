package deps

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/Masterminds/semver/v3"
)

// Dependencies is a stack.yaml's `dependencies` section, field for field as
// seed 002 writes porter.yaml's.
type Dependencies struct {
	// Requires is unordered: cairn derives the order from wiring.
	Requires []Requirement `json:"requires,omitempty"`
	Provides *Provides     `json:"provides,omitempty"`
}

// Requirement is one entry of dependencies.requires.
type Requirement struct {
	// Name is the dependency's alias throughout stack.yaml
	// (${bundle.dependencies.NAME.outputs.X}).
	Name   string         `json:"name"`
	Bundle BundleCriteria `json:"bundle"`
	// Credentials maps a credential of the dependency to a literal or a
	// template such as ${bundle.credentials.NAME}.
	Credentials map[string]string `json:"credentials,omitempty"`
	// Parameters maps a parameter of the dependency to a value or a template.
	Parameters map[string]any `json:"parameters,omitempty"`
	// Outputs sets outputs of the declaring stack from this dependency's
	// outputs (${outputs.X}).
	Outputs map[string]string `json:"outputs,omitempty"`
	Sharing *Sharing          `json:"sharing,omitempty"`
}

// BundleCriteria says which stacks and installations may satisfy a
// dependency. The seed also writes it as a bare reference string
// (`bundle: example.com/dns-bundle:v1.2.3`), which UnmarshalJSON accepts.
type BundleCriteria struct {
	// Reference names the default implementation: a stack in the catalog,
	// NAME, NAME@VERSION or NAME:VERSION.
	Reference string `json:"reference,omitempty"`
	// Version is a Masterminds semver v3 range.
	Version   string     `json:"version,omitempty"`
	Interface *Interface `json:"interface,omitempty"`
}

// UnmarshalJSON accepts the seed's shorthand of a bare reference string.
func (b *BundleCriteria) UnmarshalJSON(data []byte) error {
	if t := bytes.TrimSpace(data); len(t) > 0 && t[0] == '"' {
		return json.Unmarshal(t, &b.Reference)
	}
	type plain BundleCriteria
	return json.Unmarshal(data, (*plain)(b))
}

// Interface is what an implementation of the dependency must look like.
// The seed nests the document's lists under `document`, and its examples
// also write them directly under `interface`; both are accepted and merged.
type Interface struct {
	ID        string             `json:"id,omitempty"`
	Reference string             `json:"reference,omitempty"`
	Document  *InterfaceDocument `json:"document,omitempty"`
	// The seed's shorthand: the document's lists inline.
	Parameters  []InterfaceItem `json:"parameters,omitempty"`
	Credentials []InterfaceItem `json:"credentials,omitempty"`
	Outputs     []InterfaceItem `json:"outputs,omitempty"`
}

// InterfaceDocument lists the parameters, credentials and outputs an
// implementation must have.
type InterfaceDocument struct {
	Parameters  []InterfaceItem `json:"parameters,omitempty"`
	Credentials []InterfaceItem `json:"credentials,omitempty"`
	Outputs     []InterfaceItem `json:"outputs,omitempty"`
}

// InterfaceItem is one parameter, credential or output of an interface.
// With an $id the implementation must use that $id and its name may differ.
type InterfaceItem struct {
	Name string `json:"name,omitempty"`
	Type string `json:"type,omitempty"`
	ID   string `json:"$id,omitempty"`
}

// Sharing is how a dependency's installation may be shared.
type Sharing struct {
	Mode  SharingMode   `json:"mode,omitempty"`
	Group *SharingGroup `json:"group,omitempty"`
}

// SharingGroup names the group; the name may be a template such as
// ${installation.root.id}.
type SharingGroup struct {
	Name string `json:"name"`
}

// SharingMode is none or group.
type SharingMode string

const (
	// SharingNone: never reuse an installation for this dependency, and
	// never let another installation reuse the one created for it.
	SharingNone SharingMode = "none"
	// SharingGroup: share with installations of the same group (the
	// default, with the group "").
	SharingGroupMode SharingMode = "group"
)

// Provides declares the interface a stack implements.
type Provides struct {
	Interface ProvidedInterface `json:"interface"`
}

// ProvidedInterface names it.
type ProvidedInterface struct {
	ID string `json:"id"`
}

// Credential is one entry of a stack's `credentials` list. Its value is
// an instance of Type, given when the stack is installed; the engine only
// ever carries references to such instances.
type Credential struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	ID          string `json:"$id,omitempty"`
	// Type is the path of the Type the instance must be.
	Type     string `json:"type,omitempty"`
	Required *bool  `json:"required,omitempty"`
}

// IsRequired: credentials are required unless they say otherwise.
func (c Credential) IsRequired() bool { return c.Required == nil || *c.Required }

// effectiveSharing returns the mode and the (unrendered) group name, with
// the seed's defaults: mode group, group "".
func (r Requirement) effectiveSharing() (SharingMode, string) {
	if r.Sharing == nil {
		return SharingGroupMode, ""
	}
	mode := r.Sharing.Mode
	if mode == "" {
		mode = SharingGroupMode
	}
	group := ""
	if r.Sharing.Group != nil {
		group = r.Sharing.Group.Name
	}
	return mode, group
}

// outputs returns the interface's outputs, document and shorthand merged.
func (i *Interface) items() (params, creds, outs []InterfaceItem) {
	if i == nil {
		return nil, nil, nil
	}
	params, creds, outs = i.Parameters, i.Credentials, i.Outputs
	if d := i.Document; d != nil {
		params = append(slices.Clone(params), d.Parameters...)
		creds = append(slices.Clone(creds), d.Credentials...)
		outs = append(slices.Clone(outs), d.Outputs...)
	}
	return params, creds, outs
}

// ParseDependencies decodes a stack.yaml `dependencies` section (kept
// verbatim as JSON by package stack) and checks what can be checked
// without the declaring stack: names, references, ranges, sharing modes.
// Errors name the field path, e.g.
// `dependencies.requires[1].bundle.version: "2.x.y" is not a semver range`.
func ParseDependencies(raw json.RawMessage) (*Dependencies, error) {
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return &Dependencies{}, nil
	}
	if err := checkFields(raw, "dependencies", dependenciesShape); err != nil {
		return nil, err
	}
	var d Dependencies
	if err := json.Unmarshal(raw, &d); err != nil {
		return nil, fmt.Errorf("dependencies: %w", jsonFieldError(err, "dependencies"))
	}
	if err := d.Validate(); err != nil {
		return nil, err
	}
	return &d, nil
}

// ParseCredentials decodes a stack.yaml `credentials` list.
func ParseCredentials(raw json.RawMessage) ([]Credential, error) {
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return nil, nil
	}
	if err := checkFields(raw, "credentials", []any{credentialShape}); err != nil {
		return nil, err
	}
	var cs []Credential
	if err := json.Unmarshal(raw, &cs); err != nil {
		return nil, fmt.Errorf("credentials: %w", jsonFieldError(err, "credentials"))
	}
	seen := map[string]bool{}
	for i, c := range cs {
		p := fmt.Sprintf("credentials[%d]", i)
		if !namePattern.MatchString(c.Name) {
			return nil, fmt.Errorf("%s.name: %q is not a valid name (letters, digits, '-' and '_', starting and ending with a letter or digit)", p, c.Name)
		}
		if seen[c.Name] {
			return nil, fmt.Errorf("%s.name: %q is declared twice", p, c.Name)
		}
		seen[c.Name] = true
	}
	return cs, nil
}

// namePattern: dependency, parameter, credential and output names. No dots,
// so template paths split unambiguously.
var namePattern = regexp.MustCompile(`^[A-Za-z0-9]([-_A-Za-z0-9]*[A-Za-z0-9])?$`)

// Validate checks the section's own consistency (not its templates, which
// need the declaring stack: see Stack.Validate).
func (d *Dependencies) Validate() error {
	seen := map[string]int{}
	for i, r := range d.Requires {
		p := fmt.Sprintf("dependencies.requires[%d]", i)
		if !namePattern.MatchString(r.Name) {
			return fmt.Errorf("%s.name: %q is not a valid name (letters, digits, '-' and '_', starting and ending with a letter or digit)", p, r.Name)
		}
		if j, dup := seen[r.Name]; dup {
			return fmt.Errorf("%s.name: %q is already the name of dependencies.requires[%d]", p, r.Name, j)
		}
		seen[r.Name] = i
		if err := r.validate(p); err != nil {
			return err
		}
	}
	if d.Provides != nil && strings.TrimSpace(d.Provides.Interface.ID) == "" {
		return fmt.Errorf("dependencies.provides.interface.id: must not be empty")
	}
	return nil
}

func (r Requirement) validate(p string) error {
	b := r.Bundle
	if b.Reference == "" && b.Interface == nil {
		return fmt.Errorf("%s.bundle: needs a reference, an interface, or both", p)
	}
	if b.Reference != "" {
		if _, err := ParseReference(b.Reference); err != nil {
			return fmt.Errorf("%s.bundle.reference: %w", p, err)
		}
	}
	if b.Version != "" {
		if _, err := semver.NewConstraint(b.Version); err != nil {
			return fmt.Errorf("%s.bundle.version: %q is not a semver range", p, b.Version)
		}
		if b.Reference == "" {
			return fmt.Errorf("%s.bundle.version: a version range needs bundle.reference (the stack it ranges over)", p)
		}
	}
	if i := b.Interface; i != nil {
		ip := p + ".bundle.interface"
		if i.Reference != "" {
			if _, err := ParseReference(i.Reference); err != nil {
				return fmt.Errorf("%s.reference: %w", ip, err)
			}
		}
		if i.Document != nil && i.Reference != "" {
			return fmt.Errorf("%s: reference and document are exclusive", ip)
		}
		params, creds, outs := i.items()
		if i.ID == "" && i.Reference == "" && len(params)+len(creds)+len(outs) == 0 {
			return fmt.Errorf("%s: an interface needs an id, a reference, or parameters, credentials or outputs", ip)
		}
		for kind, items := range map[string][]InterfaceItem{"parameters": params, "credentials": creds, "outputs": outs} {
			for j, it := range items {
				if it.Name == "" && it.ID == "" {
					return fmt.Errorf("%s.document.%s[%d]: needs a name or an $id", ip, kind, j)
				}
				if it.Name != "" && !namePattern.MatchString(it.Name) {
					return fmt.Errorf("%s.document.%s[%d].name: %q is not a valid name", ip, kind, j, it.Name)
				}
			}
		}
	}
	for _, k := range sortedKeys(r.Parameters) {
		if !namePattern.MatchString(k) {
			return fmt.Errorf("%s.parameters: %q is not a valid parameter name", p, k)
		}
	}
	for _, k := range sortedKeys(r.Credentials) {
		if !namePattern.MatchString(k) {
			return fmt.Errorf("%s.credentials: %q is not a valid credential name", p, k)
		}
	}
	for _, k := range sortedKeys(r.Outputs) {
		if !namePattern.MatchString(k) {
			return fmt.Errorf("%s.outputs: %q is not a valid output name", p, k)
		}
	}
	if s := r.Sharing; s != nil {
		switch s.Mode {
		case "", SharingNone, SharingGroupMode:
		default:
			return fmt.Errorf("%s.sharing.mode: %q is not one of none, group", p, s.Mode)
		}
		if s.Mode == SharingNone && s.Group != nil && s.Group.Name != "" {
			return fmt.Errorf("%s.sharing.group: a group means nothing with mode none", p)
		}
	}
	return nil
}

// The shapes ParseDependencies accepts, for errors naming an unknown field
// by its path (encoding/json names none). A map is an object with those
// keys; "*" any key; a one-element slice a list; nil any value.
var (
	itemShape      = map[string]any{"name": str{}, "type": str{}, "$id": str{}}
	interfaceShape = map[string]any{
		"id": str{}, "reference": str{},
		"document":   map[string]any{"parameters": []any{itemShape}, "credentials": []any{itemShape}, "outputs": []any{itemShape}},
		"parameters": []any{itemShape}, "credentials": []any{itemShape}, "outputs": []any{itemShape},
	}
	dependenciesShape = map[string]any{
		"requires": []any{map[string]any{
			"name":        str{},
			"bundle":      bundleShape{},
			"credentials": map[string]any{"*": str{}},
			"parameters":  map[string]any{"*": nil},
			"outputs":     map[string]any{"*": str{}},
			"sharing":     map[string]any{"mode": str{}, "group": map[string]any{"name": str{}}},
		}},
		"provides": map[string]any{"interface": map[string]any{"id": str{}}},
	}
	credentialShape = map[string]any{"name": str{}, "description": str{}, "$id": str{}, "type": str{}, "required": boolean{}}
)

// bundleShape: a string, or an object.
type bundleShape struct{}

// str and boolean: a value of that JSON type.
type (
	str     struct{}
	boolean struct{}
)

func checkFields(raw json.RawMessage, path string, shape any) error {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return checkShape(v, path, shape)
}

func checkShape(v any, path string, shape any) error {
	if v == nil || shape == nil {
		return nil
	}
	switch s := shape.(type) {
	case str:
		if _, ok := v.(string); !ok {
			return fmt.Errorf("%s: must be a string", path)
		}
	case boolean:
		if _, ok := v.(bool); !ok {
			return fmt.Errorf("%s: must be true or false", path)
		}
	case bundleShape:
		if _, ok := v.(string); ok {
			return nil
		}
		return checkShape(v, path, map[string]any{"reference": str{}, "version": str{}, "interface": interfaceShape})
	case []any:
		list, ok := v.([]any)
		if !ok {
			return fmt.Errorf("%s: must be a list", path)
		}
		for i, e := range list {
			if err := checkShape(e, fmt.Sprintf("%s[%d]", path, i), s[0]); err != nil {
				return err
			}
		}
	case map[string]any:
		obj, ok := v.(map[string]any)
		if !ok {
			return fmt.Errorf("%s: must be an object", path)
		}
		for _, k := range sortedKeys(obj) {
			sub, known := s[k]
			if !known {
				if any, ok := s["*"]; ok {
					sub, known = any, true
				}
			}
			if !known {
				return fmt.Errorf("%s: unknown field %q", path, k)
			}
			if err := checkShape(obj[k], path+"."+k, sub); err != nil {
				return err
			}
		}
	}
	return nil
}

// jsonFieldError names the field of a type mismatch.
func jsonFieldError(err error, root string) error {
	var te *json.UnmarshalTypeError
	if ok := asType(err, &te); ok && te.Field != "" {
		return fmt.Errorf("%s.%s: must be %s, not %s", root, te.Field, te.Type, te.Value)
	}
	return err
}

func asType[T error](err error, target *T) bool {
	t, ok := err.(T)
	if ok {
		*target = t
	}
	return ok
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
