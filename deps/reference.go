package deps

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/Masterminds/semver/v3"
)

// Reference names a stack in the catalog, optionally at one version.
type Reference struct {
	Name    string `json:"name"`
	Version string `json:"version,omitempty"`
}

func (r Reference) String() string {
	if r.Version == "" {
		return r.Name
	}
	return r.Name + "@" + r.Version
}

var stackNamePattern = regexp.MustCompile(`^[a-z0-9]([-a-z0-9._]*[a-z0-9])?(/[a-z0-9]([-a-z0-9._]*[a-z0-9])?)*$`)

// ParseReference reads NAME, NAME@VERSION, or the seed's OCI-like
// NAME:VERSION (getporter/redis:v1.0.2). The version must be semver.
func ParseReference(s string) (Reference, error) {
	name, version := s, ""
	if i := strings.LastIndex(s, "@"); i >= 0 {
		name, version = s[:i], s[i+1:]
	} else if i := strings.LastIndex(s, ":"); i > strings.LastIndex(s, "/") {
		name, version = s[:i], s[i+1:]
	}
	if !stackNamePattern.MatchString(name) {
		return Reference{}, fmt.Errorf("%q is not a stack reference (NAME, NAME@VERSION or NAME:VERSION, with a lower-case name)", s)
	}
	if version != "" {
		v, err := semver.NewVersion(version)
		if err != nil {
			return Reference{}, fmt.Errorf("%q: version %q is not semver", s, version)
		}
		version = v.String()
	} else if strings.ContainsAny(s, "@") {
		return Reference{}, fmt.Errorf("%q: empty version", s)
	}
	return Reference{Name: name, Version: version}, nil
}

// Override is a user's answer for one dependency (`--dependency`): an
// existing installation (KIND/NAME, in the root's namespace) or a stack
// reference (STACK@VERSION).
type Override struct {
	// Path is the dependency's path from the root: "db", or "web.db" for
	// the dependency db of the dependency web.
	Path         string           `json:"path"`
	Installation *InstallationRef `json:"installation,omitempty"`
	Stack        *Reference       `json:"stack,omitempty"`
}

// InstallationRef names an installation by the kind of its stack's Type and
// its name.
type InstallationRef struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
}

// String is [NAMESPACE/]KIND/NAME, as --dependency takes it.
func (r InstallationRef) String() string {
	s := r.Kind + "/" + r.Name
	if r.Namespace != "" {
		s = r.Namespace + "/" + s
	}
	return s
}

// namespacePattern is a Kubernetes namespace name (a DNS label).
var namespacePattern = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// ParseOverride reads NAME=[NAMESPACE/]KIND/NAME or NAME=STACK@VERSION. A
// right-hand side with '@' is a stack reference; one with one or two '/'
// and no '@' an installation, in the root's namespace unless NAMESPACE
// says (the global one: seed 002 resolves from those two), so stack names
// with '/' need an @VERSION to be told apart.
func ParseOverride(s string) (Override, error) {
	path, rhs, ok := strings.Cut(s, "=")
	if !ok || path == "" || rhs == "" {
		return Override{}, fmt.Errorf("--dependency %q: want NAME=[NAMESPACE/]KIND/NAME or NAME=STACK@VERSION", s)
	}
	for _, seg := range strings.Split(path, ".") {
		if !namePattern.MatchString(seg) {
			return Override{}, fmt.Errorf("--dependency %q: %q is not a dependency path (names joined by '.')", s, path)
		}
	}
	if strings.Contains(rhs, "@") {
		ref, err := ParseReference(rhs)
		if err != nil {
			return Override{}, fmt.Errorf("--dependency %q: %w", s, err)
		}
		return Override{Path: path, Stack: &ref}, nil
	}
	parts := strings.Split(rhs, "/")
	if len(parts) < 2 || len(parts) > 3 || slices.Contains(parts, "") {
		return Override{}, fmt.Errorf("--dependency %q: want NAME=[NAMESPACE/]KIND/NAME or NAME=STACK@VERSION", s)
	}
	ref := InstallationRef{Kind: parts[len(parts)-2], Name: parts[len(parts)-1]}
	if len(parts) == 3 {
		if ref.Namespace = parts[0]; !namespacePattern.MatchString(ref.Namespace) {
			return Override{}, fmt.Errorf("--dependency %q: %q is not a namespace name (lower-case letters, digits and '-')", s, ref.Namespace)
		}
	}
	return Override{Path: path, Installation: &ref}, nil
}
