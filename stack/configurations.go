package stack

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/cairn-dev/cairn"
)

// Configurations declares a stack's configuration sets (seed 004: "it
// should be possible to have different sets of configurations in one stack
// and user should be able to choose from them via the CR"): one spec field
// of the installation names the set, and each set is a kustomize directory
// of the package, rendered instead of resources/.
type Configurations struct {
	// Field is the spec field that chooses the set (e.g. tier). Loading
	// adds it to the parameters schema as a string whose enum is the set
	// names and whose default is Default, so kubectl explain, the OpenAPI
	// document, the hub's validation and GraphQL clients all see it.
	Field string `json:"field"`
	// Default is the set of an installation that does not choose one; the
	// first set when empty.
	Default string `json:"default,omitempty"`
	// Description becomes the field's description in the schema.
	Description string             `json:"description,omitempty"`
	Sets        []ConfigurationSet `json:"sets"`
}

// ConfigurationSet is one set: a kustomize directory (a kustomization)
// that is resources/ or under it, typically an overlay of a shared base.
type ConfigurationSet struct {
	Name string `json:"name"`
	// Path is the set's directory, relative to the package root; default
	// resources/NAME.
	Path        string `json:"path,omitempty"`
	Description string `json:"description,omitempty"`
}

// fieldRE is what a configurations field may be: a plain property name, so
// it can be written as -p FIELD=SET and as the JSONPath .spec.FIELD.
var fieldRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// validateConfigurations checks the configurations, fills their defaults
// and adds the field to the parameters schema. It runs before the schema
// is compiled, so vars, replacements and outputs may read the field like
// any parameter.
func (m *Manifest) validateConfigurations(at func(string, ...any)) {
	c := m.Configurations
	if c == nil {
		return
	}
	ok := true
	switch {
	case c.Field == "":
		at("is required: the spec field installations choose a set with, e.g. tier", "configurations", "field")
		ok = false
	case !fieldRE.MatchString(c.Field):
		at(fmt.Sprintf("%q must be a property name: letters, digits and '_', not starting with a digit", c.Field), "configurations", "field")
		ok = false
	}
	if len(c.Sets) == 0 {
		at("at least one set is required: {name: NAME, path: resources/NAME}", "configurations", "sets")
		return
	}
	seen := map[string]bool{}
	for i := range c.Sets {
		s := &c.Sets[i]
		switch {
		case s.Name == "":
			at("is required", "configurations", "sets", i, "name")
		case len(s.Name) > 63 || !dnsLabelRE.MatchString(s.Name):
			at(fmt.Sprintf("%q must be lower case letters, digits and '-', at most 63 characters", s.Name), "configurations", "sets", i, "name")
		case seen[s.Name]:
			at(fmt.Sprintf("%q is declared twice", s.Name), "configurations", "sets", i, "name")
		}
		seen[s.Name] = true
		if s.Path == "" {
			s.Path = "resources/" + s.Name
		}
		p, err := cleanPath(s.Path)
		switch {
		case err != nil:
			at(err.Error(), "configurations", "sets", i, "path")
		case p != "resources" && !strings.HasPrefix(p, "resources/"):
			at(fmt.Sprintf("%q: a set's directory must be resources/ or a directory under it (e.g. resources/%s)", s.Path, cmpOr(s.Name, "NAME")), "configurations", "sets", i, "path")
		default:
			s.Path = p
		}
	}
	names := c.names()
	if c.Default == "" {
		c.Default = c.Sets[0].Name
	} else if !slices.Contains(names, c.Default) {
		at(fmt.Sprintf("%q is not one of the sets (%s)", c.Default, strings.Join(names, ", ")), "configurations", "default")
	}
	if ok {
		m.addConfigurationParameter(at)
	}
}

func (c *Configurations) names() []string {
	out := make([]string, len(c.Sets))
	for i, s := range c.Sets {
		out[i] = s.Name
	}
	return out
}

// addConfigurationParameter declares the configurations field in the
// parameters schema. A schema that is not an object is left for
// compileParameters to report.
func (m *Manifest) addConfigurationParameter(at func(string, ...any)) {
	c := m.Configurations
	k := &m.Kind
	if len(k.Parameters) == 0 || string(k.Parameters) == "null" {
		k.Parameters = json.RawMessage(`{"type":"object"}`)
	}
	var doc map[string]any
	if json.Unmarshal(k.Parameters, &doc) != nil || doc["type"] != "object" {
		return
	}
	props, isMap := doc["properties"].(map[string]any)
	if doc["properties"] != nil && !isMap {
		return // not a schema; compileParameters says so
	}
	if props == nil {
		props = map[string]any{}
	}
	if _, taken := props[c.Field]; taken {
		at(fmt.Sprintf("is the configurations field: cairn declares it (a string, one of %s, default %s); remove it here", strings.Join(c.names(), ", "), c.Default),
			"kind", "parameters", "properties", c.Field)
		return
	}
	desc := strings.TrimSpace(c.Description)
	if desc == "" {
		desc = "The configuration set to install."
	} else if !strings.HasSuffix(desc, ".") {
		desc += "."
	}
	sets := make([]string, len(c.Sets))
	for i, s := range c.Sets {
		sets[i] = s.Name
		if d := strings.TrimSuffix(strings.TrimSpace(s.Description), "."); d != "" {
			sets[i] += " (" + d + ")"
		}
	}
	desc += " One of: " + strings.Join(sets, ", ") + ". Default: " + c.Default + "."
	enum := make([]any, len(c.Sets))
	for i, s := range c.Sets {
		enum[i] = s.Name
	}
	props[c.Field] = map[string]any{"type": "string", "enum": enum, "default": c.Default, "description": desc}
	doc["properties"] = props
	b, err := json.Marshal(doc)
	if err != nil {
		at(err.Error(), "kind", "parameters")
		return
	}
	k.Parameters = b
}

// ConfigurationSet returns the set an installation's spec chooses (the
// default when the spec does not say), false when the stack has no sets
// or the spec names none of them.
func (s *Stack) ConfigurationSet(spec map[string]any) (ConfigurationSet, bool) {
	c := s.Manifest.Configurations
	if c == nil {
		return ConfigurationSet{}, false
	}
	name := c.Default
	if v, present := spec[c.Field]; present {
		name, _ = v.(string)
	}
	for _, set := range c.Sets {
		if set.Name == name {
			return set, true
		}
	}
	return ConfigurationSet{}, false
}

// renderDir is the kustomize directory inst renders: its set's, or
// resources/. inst.Spec has been validated, so a set is one of the stack's.
func (s *Stack) renderDir(inst Installation) (string, error) {
	c := s.Manifest.Configurations
	if c == nil {
		return "resources", nil
	}
	set, ok := s.ConfigurationSet(inst.Spec)
	if !ok {
		return "", cairn.Errorf(cairn.CodeInvalid, "render %s: spec.%s: %v is not a configuration set of stack %s (sets: %s)",
			inst.Name, c.Field, inst.Spec[c.Field], s.Manifest.Name, strings.Join(c.names(), ", "))
	}
	return set.Path, nil
}

// checkConfigurationDirs reports a set whose directory is not a kustomize
// directory of the package, at the set in stack.yaml, and returns the
// directories that are, to be checked and built.
func (s *Stack) checkConfigurationDirs(p *problems, d *yamlDoc) []string {
	c := s.Manifest.Configurations
	if c == nil {
		return []string{"resources"}
	}
	var good []string
	for i, set := range c.Sets {
		if !strings.HasPrefix(set.Path+"/", "resources/") {
			continue // reported by validateConfigurations
		}
		where := []any{"configurations", "sets", i, "path"}
		if kustomizationIn(s.Files, set.Path) != "" {
			if !slices.Contains(good, set.Path) {
				good = append(good, set.Path)
			}
			continue
		}
		msg := fmt.Sprintf("%q (set %s): no such directory in the stack package", set.Path, set.Name)
		if (&resourceChecker{files: s.Files}).isDir(set.Path) {
			msg = fmt.Sprintf("%q (set %s) has no kustomization.yaml: a set is a kustomize directory, e.g. an overlay with resources: [../base]", set.Path, set.Name)
		}
		p.add(d.file, d.line(where...), fieldName(where...), msg)
	}
	return good
}
