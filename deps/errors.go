package deps

import (
	"fmt"
	"strings"
)

// NoCandidateError: an interface-only dependency nothing satisfies.
type NoCandidateError struct {
	Path       string
	Interface  string
	Namespaces []string
	Candidates []Candidate
}

func (e *NoCandidateError) Error() string {
	var rej []string
	for _, c := range e.Candidates {
		if c.Installation != "" {
			rej = append(rej, c.Installation+" ("+c.Reason+")")
		}
	}
	s := fmt.Sprintf("no installation in %s satisfies the interface (%s) and the dependency names no stack to install; give one with --dependency %s=KIND/NAME or --dependency %s=STACK@VERSION",
		strings.Join(e.Namespaces, " or "), e.Interface, e.Path, e.Path)
	if len(rej) > 0 {
		s += "; rejected: " + strings.Join(rej, ", ")
	}
	return s
}

// DanglingError: wiring reads an output the resolved dependency lacks.
type DanglingError struct {
	Path, Stack, Missing string
	Ref                  string
}

func (e *DanglingError) Error() string {
	if e.Ref != "" {
		return fmt.Sprintf("dangling wiring ${%s}: dependency %s resolves to %s, which has %s", e.Ref, e.Path, e.Stack, e.Missing)
	}
	return fmt.Sprintf("stack %s does not satisfy the dependency (its interface and the outputs its wiring reads): %s", e.Stack, e.Missing)
}
