package stack

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/Masterminds/semver/v3"
	"sigs.k8s.io/kustomize/api/types"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/expr"
	"github.com/cairn-dev/cairn/schema"
)

var (
	dnsLabelRE  = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	dnsSubRE    = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)+$`)
	kindRE      = regexp.MustCompile(`^[A-Z][A-Za-z0-9]*$`)
	varNameRE   = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	outputRE    = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_-]*$`)
	columnTypes = []string{"integer", "number", "string", "boolean", "date"}
	readyTypes  = []ReadinessType{NonEmpty, MatchString, MatchInteger, MatchCondition, None}
)

// installationFields are the fields of the installation an output or a var
// may read besides the parameters.
var installationFields = []string{"apiVersion", "kind", "name", "namespace", "uid", "labels", "annotations"}

// validate checks the manifest, fills its defaults and compiles its
// parameters schema and output templates. d locates problems in stack.yaml.
func (m *Manifest) validate(p *problems, d *yamlDoc) *schema.Schema {
	at := func(msg string, path ...any) { p.add(d.file, d.line(path...), fieldName(path...), msg) }

	switch {
	case m.Name == "":
		at("is required", "name")
	case len(m.Name) > 63 || !dnsLabelRE.MatchString(m.Name):
		at(fmt.Sprintf("%q must be a DNS label: lower case letters, digits and '-', at most 63 characters", m.Name), "name")
	}
	if m.Version == "" {
		at("is required (a semantic version such as 0.1.0)", "version")
	} else if v, err := semver.StrictNewVersion(m.Version); err != nil {
		at(fmt.Sprintf("%q is not a semantic version MAJOR.MINOR.PATCH (e.g. 0.1.0): %v", m.Version, err), "version")
	} else {
		m.Version = v.String()
	}

	k := &m.Kind
	switch {
	case k.Group == "":
		at("is required (a DNS subdomain such as gcp.stacks.example.com)", "kind", "group")
	case !dnsSubRE.MatchString(k.Group):
		at(fmt.Sprintf("%q must be a DNS subdomain with at least one dot, in lower case", k.Group), "kind", "group")
	}
	if k.Version == "" {
		at("is required (a Kubernetes API version such as v1alpha1)", "kind", "version")
	} else if _, err := cairn.RevisionForVersion(k.Version); err != nil {
		at(err.Error(), "kind", "version")
	}
	switch {
	case k.Names.Kind == "":
		at("is required (the installation kind, e.g. MinimalGCP)", "kind", "names", "kind")
	case !kindRE.MatchString(k.Names.Kind):
		at(fmt.Sprintf("%q must be CamelCase: a capital letter, then letters and digits", k.Names.Kind), "kind", "names", "kind")
	}
	if k.Names.Singular == "" {
		k.Names.Singular = strings.ToLower(k.Names.Kind)
	}
	// A plural left out stays out: the hub derives it from the kind
	// (cairn.PluralForKind) unless the kind is registered already, when its
	// installations keep the plural they are served as.
	for _, f := range []struct {
		name, v string
	}{{"singular", k.Names.Singular}, {"plural", k.Names.Plural}} {
		if f.v != "" && !dnsLabelRE.MatchString(f.v) {
			at(fmt.Sprintf("%q must be lower case letters, digits and '-'", f.v), "kind", "names", f.name)
		}
	}
	for i, s := range k.Names.ShortNames {
		if !dnsLabelRE.MatchString(s) {
			at(fmt.Sprintf("%q must be lower case letters, digits and '-'", s), "kind", "names", "shortNames", i)
		}
	}
	for i, s := range k.Names.Categories {
		if !dnsLabelRE.MatchString(s) {
			at(fmt.Sprintf("%q must be lower case letters, digits and '-'", s), "kind", "names", "categories", i)
		}
	}
	switch k.Scope {
	case "":
		k.Scope = Namespaced
	case Namespaced, Cluster:
	default:
		at(fmt.Sprintf("%q: want Namespaced or Cluster", k.Scope), "kind", "scope")
	}
	for i, c := range k.AdditionalPrinterColumns {
		if c.Name == "" {
			at("is required", "kind", "additionalPrinterColumns", i, "name")
		}
		if !slices.Contains(columnTypes, c.Type) {
			at(fmt.Sprintf("%q: want one of %s", c.Type, strings.Join(columnTypes, ", ")), "kind", "additionalPrinterColumns", i, "type")
		}
		if !strings.HasPrefix(c.JSONPath, ".") {
			at(fmt.Sprintf("%q must be a JSONPath starting with '.', e.g. .spec.region", c.JSONPath), "kind", "additionalPrinterColumns", i, "jsonPath")
		}
	}
	m.validateConfigurations(at)
	params := m.compileParameters(at)

	seenVar := map[string]bool{}
	for i, v := range m.Vars {
		switch {
		case !varNameRE.MatchString(v.Name):
			at(fmt.Sprintf("%q must be letters, digits and '_' (used as $(%s))", v.Name, v.Name), "vars", i, "name")
		case seenVar[v.Name]:
			at(fmt.Sprintf("%q is declared twice", v.Name), "vars", i, "name")
		}
		seenVar[v.Name] = true
		if msg := m.checkInstallationPath(v.FieldPath); msg != "" {
			at(msg, "vars", i, "fieldPath")
		}
	}

	for i, r := range m.Replacements {
		if r.Source == nil || r.Source.Kind != k.Names.Kind {
			continue
		}
		if msg := m.checkInstallationPath(installationSourcePath(r)); msg != "" {
			at(msg, "replacements", i, "source", "fieldPath")
		}
	}

	seenOut := map[string]bool{}
	for i := range m.Outputs {
		o := &m.Outputs[i]
		switch {
		case !outputRE.MatchString(o.Name):
			at(fmt.Sprintf("%q must start with a letter and hold letters, digits, '_' and '-'", o.Name), "outputs", i, "name")
		case seenOut[o.Name]:
			at(fmt.Sprintf("%q is declared twice", o.Name), "outputs", i, "name")
		}
		seenOut[o.Name] = true
		if o.Value == "" {
			at("is required (a template such as ${resources.Network.network.metadata.name})", "outputs", i, "value")
			continue
		}
		tpl, err := expr.Parse(o.Value)
		if err != nil {
			at(err.Error(), "outputs", i, "value")
			continue
		}
		for _, ref := range tpl.Refs() {
			if msg := m.checkOutputRef(ref); msg != "" {
				at(msg, "outputs", i, "value")
			}
		}
		o.tpl = tpl
	}

	for i := range m.Readiness {
		c := &m.Readiness[i]
		if !slices.Contains(readyTypes, c.Type) {
			at(fmt.Sprintf("%q: want one of NonEmpty, MatchString, MatchInteger, MatchCondition, None", c.Type), "readiness", i, "type")
			continue
		}
		switch c.Type {
		case NonEmpty, MatchString, MatchInteger:
			if c.FieldPath == "" {
				at(fmt.Sprintf("is required by a %s check", c.Type), "readiness", i, "fieldPath")
			} else if _, err := expr.ParsePath(c.FieldPath); err != nil {
				at(err.Error(), "readiness", i, "fieldPath")
			}
		case MatchCondition:
			if c.MatchCondition == nil || c.MatchCondition.Type == "" {
				at("is required by a MatchCondition check: {type: Ready, status: \"True\"}", "readiness", i, "matchCondition")
			} else if c.MatchCondition.Status == "" {
				c.MatchCondition.Status = "True"
			}
		}
	}
	return params
}

// compileParameters checks that the parameters schema compiles and is of
// type object, defaulting an absent one to {"type": "object"}.
func (m *Manifest) compileParameters(at func(string, ...any)) *schema.Schema {
	k := &m.Kind
	if len(k.Parameters) == 0 || string(k.Parameters) == "null" {
		k.Parameters = json.RawMessage(`{"type":"object"}`)
	}
	var doc map[string]any
	if err := json.Unmarshal(k.Parameters, &doc); err != nil {
		at("must be a JSON Schema of type object (the installation's spec)", "kind", "parameters")
		return nil
	}
	switch t := doc["type"].(type) {
	case string:
		if t != "object" {
			at(fmt.Sprintf("must be a JSON Schema of type object (the installation's spec), not of type %q", t), "kind", "parameters", "type")
			return nil
		}
	case nil:
		at(`must say type: object (the installation's spec is an object)`, "kind", "parameters")
		return nil
	default:
		at(fmt.Sprintf("must be the single type object (the installation's spec), not %v", t), "kind", "parameters", "type")
		return nil
	}
	s, err := schema.Compile(k.Parameters)
	if err != nil {
		msg := err.Error()
		for _, c := range cairn.Causes(err) {
			if !strings.Contains(msg, c.String()) {
				msg += "; " + c.String()
			}
		}
		at(msg, "kind", "parameters")
		return nil
	}
	return s
}

// checkDefaults checks every property's default against the property's own
// schema (with the defaults nested in it applied, as an installation gets
// them): a wrong default is the author's mistake and is refused here,
// rather than reported to each user as invalid parameters they never gave.
// A property schema that does not compile alone (a $ref into the whole) is
// not judged.
func checkDefaults(at func(string, ...any), sch map[string]any, path []any) {
	props, _ := sch["properties"].(map[string]any)
	for _, name := range sortedKeys(props) {
		ps, ok := props[name].(map[string]any)
		if !ok {
			continue
		}
		here := append(slices.Clone(path), "properties", name)
		if d, has := ps["default"]; has {
			v := deepCopy(d)
			if m, ok := v.(map[string]any); ok {
				applyDefaults(ps, m)
			}
			if msg := defaultProblem(ps, v); msg != "" {
				at(msg, append(here, "default")...)
			}
		}
		checkDefaults(at, ps, here)
	}
}

// defaultProblem validates v against the property schema ps.
func defaultProblem(ps map[string]any, v any) string {
	doc, err := json.Marshal(ps)
	if err != nil {
		return ""
	}
	sub, err := schema.Compile(doc)
	if err != nil {
		return ""
	}
	b, err := json.Marshal(v)
	if err != nil {
		return err.Error()
	}
	causes := sub.ValidateShowingValues("default", b)
	if len(causes) == 0 {
		return ""
	}
	msgs := make([]string, len(causes))
	for i, c := range causes {
		msgs[i] = strings.TrimPrefix(strings.TrimPrefix(c.String(), "default"), " ")
	}
	return fmt.Sprintf("%s is not valid for its own schema: %s", b, strings.Join(msgs, "; "))
}

// checkInstallationPath checks the field path of a var: a parameter the
// schema declares (spec.region) or a field of the installation's metadata.
func (m *Manifest) checkInstallationPath(fp string) string {
	if fp == "" {
		return "is required (e.g. spec.region)"
	}
	steps, err := expr.ParsePath(fp)
	if err != nil {
		return err.Error()
	}
	switch steps[0].Key {
	case "metadata":
		if len(steps) == 2 && slices.Contains([]string{"name", "namespace", "uid"}, steps[1].Key) ||
			len(steps) == 3 && (steps[1].Key == "labels" || steps[1].Key == "annotations") {
			return ""
		}
		return fmt.Sprintf("%q: of the metadata, read metadata.name, metadata.namespace, metadata.uid, metadata.labels.KEY or metadata.annotations.KEY", fp)
	case "spec":
		if len(steps) < 2 {
			return fmt.Sprintf("%q: name a parameter, e.g. spec.region", fp)
		}
		return m.checkParameterPath(fp, steps[1:])
	}
	return fmt.Sprintf("%q: read spec.PARAMETER or metadata of the installation", fp)
}

// checkParameterPath checks that the parameters schema declares the
// property at steps (or allows any property there).
func (m *Manifest) checkParameterPath(fp string, steps []expr.Step) string {
	var cur map[string]any
	if json.Unmarshal(m.Kind.Parameters, &cur) != nil {
		return "" // reported by compileParameters
	}
	for _, s := range steps {
		if s.IsIndex {
			if items, ok := cur["items"].(map[string]any); ok {
				cur = items
				continue
			}
			return ""
		}
		props, _ := cur["properties"].(map[string]any)
		next, ok := props[s.Key].(map[string]any)
		if !ok {
			if ap, has := cur["additionalProperties"]; len(props) == 0 || has && ap != false {
				return "" // a free-form object: any key may be there
			}
			known := make([]string, 0, len(props))
			for k := range props {
				known = append(known, k)
			}
			slices.Sort(known)
			return fmt.Sprintf("%q: the parameters schema declares no property %q (declared: %s)", fp, s.Key, strings.Join(known, ", "))
		}
		cur = next
	}
	return ""
}

// checkOutputRef checks the root of one reference of an output template.
func (m *Manifest) checkOutputRef(ref string) string {
	steps, err := expr.ParsePath(ref)
	if err != nil {
		return err.Error()
	}
	switch steps[0].Key {
	case "parameters":
		if len(steps) < 2 {
			return fmt.Sprintf("reference %q: name a parameter, e.g. parameters.region", ref)
		}
		if msg := m.checkParameterPath(ref, steps[1:]); msg != "" {
			return "reference " + msg
		}
		return ""
	case "installation":
		if len(steps) < 2 || !slices.Contains(installationFields, steps[1].Key) {
			return fmt.Sprintf("reference %q: the installation has %s", ref, strings.Join(installationFields, ", "))
		}
		return ""
	case "resources":
		if len(steps) < 3 {
			return fmt.Sprintf("reference %q: want resources.KIND.NAME.FIELD, NAME as in resources/", ref)
		}
		return ""
	}
	return fmt.Sprintf("reference %q: a stack output reads parameters.*, installation.* or resources.KIND.NAME.*", ref)
}

// installationSourcePath is the field a replacement reads from its source
// (kustomize's default is metadata.name).
func installationSourcePath(r types.Replacement) string {
	if r.Source.FieldPath == "" {
		return types.DefaultReplacementFieldPath
	}
	return r.Source.FieldPath
}
