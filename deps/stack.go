package deps

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// Stack is what the engine needs of one version of a stack. FromManifest
// (or the hub's catalog) builds it from a loaded stack.yaml; the engine
// uses package stack only for that and for its schema defaulting, so it
// stays testable on its own.
type Stack struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	// Kind is the kind of its installations (kind.names.kind).
	Kind string `json:"kind,omitempty"`
	// Cluster: the kind is cluster-scoped (kind.scope Cluster). Its
	// installations have no namespace: a plan keys them by name alone.
	Cluster bool `json:"cluster,omitempty"`
	// ParametersSchema is kind.parameters, whose defaults complete an
	// installation's parameters before its dependencies' mappings read
	// them (as the hub completes its spec on create).
	ParametersSchema json.RawMessage `json:"-"`
	Parameters       []Parameter     `json:"parameters,omitempty"`
	Credentials      []Credential    `json:"credentials,omitempty"`
	Outputs          []Output        `json:"outputs,omitempty"`
	Dependencies     *Dependencies   `json:"dependencies,omitempty"`
}

// Parameter is one property of the stack's parameters schema.
type Parameter struct {
	Name       string `json:"name"`
	Type       string `json:"type,omitempty"`
	ID         string `json:"$id,omitempty"`
	Required   bool   `json:"required,omitempty"`
	HasDefault bool   `json:"hasDefault,omitempty"`
}

// Output is one declared output of a stack (its value template is package
// stack's business).
type Output struct {
	Name string `json:"name"`
	ID   string `json:"$id,omitempty"`
}

// Ref is the stack's reference.
func (s *Stack) Ref() Reference { return Reference{Name: s.Name, Version: s.Version} }

// Provides returns the interface id the stack declares, or "".
func (s *Stack) Provides() string {
	if s.Dependencies != nil && s.Dependencies.Provides != nil {
		return s.Dependencies.Provides.Interface.ID
	}
	return ""
}

func (s *Stack) parameter(name string) *Parameter {
	for i := range s.Parameters {
		if s.Parameters[i].Name == name {
			return &s.Parameters[i]
		}
	}
	return nil
}

func (s *Stack) credential(name string) *Credential {
	for i := range s.Credentials {
		if s.Credentials[i].Name == name {
			return &s.Credentials[i]
		}
	}
	return nil
}

func (s *Stack) output(name string) *Output {
	for i := range s.Outputs {
		if s.Outputs[i].Name == name {
			return &s.Outputs[i]
		}
	}
	return nil
}

// ParametersFromSchema lists a stack's parameters from its JSON Schema
// object (`kind.parameters`): each property's type and $id, whether it is
// required and whether it has a default.
func ParametersFromSchema(schema json.RawMessage) ([]Parameter, error) {
	if len(schema) == 0 || string(schema) == "null" {
		return nil, nil
	}
	var s struct {
		Properties map[string]struct {
			Type    any             `json:"type"`
			ID      string          `json:"$id"`
			Default json.RawMessage `json:"default"`
		} `json:"properties"`
		Required []string `json:"required"`
	}
	if err := json.Unmarshal(schema, &s); err != nil {
		return nil, fmt.Errorf("parameters schema: %w", err)
	}
	out := make([]Parameter, 0, len(s.Properties))
	for _, name := range sortedKeys(s.Properties) {
		p := s.Properties[name]
		typ := ""
		switch t := p.Type.(type) {
		case string:
			typ = t
		case []any:
			parts := make([]string, 0, len(t))
			for _, e := range t {
				parts = append(parts, fmt.Sprint(e))
			}
			typ = strings.Join(parts, "|")
		}
		out = append(out, Parameter{
			Name: name, Type: typ, ID: p.ID,
			Required:   slices.Contains(s.Required, name),
			HasDefault: len(p.Default) > 0,
		})
	}
	return out, nil
}

// Interface is the installation interface of a stack (seed 002
// "Installation Interfaces"): what matching an existing installation looks
// at, its outputs and the interface it provides.
type InstallationInterface struct {
	Provides string   `json:"provides,omitempty"`
	Outputs  []Output `json:"outputs"`
}

// InstallationInterface returns the stack's installation interface.
func (s *Stack) InstallationInterface() InstallationInterface {
	return InstallationInterface{Provides: s.Provides(), Outputs: s.AllOutputs()}
}

// AllOutputs are the stack's declared outputs and those its dependencies
// set (dependencies.requires[].outputs), sorted by name: the outputs an
// installation of it has.
func (s *Stack) AllOutputs() []Output {
	outs := slices.Clone(s.Outputs)
	if s.Dependencies != nil {
		for _, r := range s.Dependencies.Requires {
			for _, k := range sortedKeys(r.Outputs) {
				if !slices.ContainsFunc(outs, func(o Output) bool { return o.Name == k }) {
					outs = append(outs, Output{Name: k})
				}
			}
		}
	}
	slices.SortFunc(outs, func(a, b Output) int { return strings.Compare(a.Name, b.Name) })
	if outs == nil {
		outs = []Output{}
	}
	return outs
}

// Digest is "sha256:" and the hex SHA-256 of the interface's canonical
// JSON (outputs sorted by name; encoding/json sorts nothing else that
// varies), the installation's status.sharing.interfaceDigest.
func (i InstallationInterface) Digest() string {
	b, _ := json.Marshal(i) // plain strings and slices: cannot fail
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}
