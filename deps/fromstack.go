package deps

import (
	"fmt"

	"github.com/cairn-dev/cairn/stack"
)

// FromManifest is the engine's view of a loaded stack: its parameters
// from kind.parameters, its credentials and dependencies sections parsed
// (package stack keeps them verbatim for this package), its outputs'
// names and $ids. The result is validated: templates name what exists and
// the wiring has no cycle.
func FromManifest(m *stack.Manifest) (*Stack, error) {
	params, err := ParametersFromSchema(m.Kind.Parameters)
	if err != nil {
		return nil, fmt.Errorf("stack %s: kind.%w", m.Name, err)
	}
	creds, err := ParseCredentials(m.Credentials)
	if err != nil {
		return nil, fmt.Errorf("stack %s: %w", m.Name, err)
	}
	d, err := ParseDependencies(m.Dependencies)
	if err != nil {
		return nil, fmt.Errorf("stack %s: %w", m.Name, err)
	}
	s := &Stack{Name: m.Name, Version: m.Version, Kind: m.Kind.Names.Kind, Cluster: m.Kind.Scope == stack.Cluster,
		ParametersSchema: m.Kind.Parameters, Parameters: params, Credentials: creds, Dependencies: d}
	for _, o := range m.Outputs {
		s.Outputs = append(s.Outputs, Output{Name: o.Name, ID: o.ID})
	}
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("stack %s@%s: %w", m.Name, m.Version, err)
	}
	return s, nil
}
