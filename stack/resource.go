package stack

import (
	"strings"
)

// Resource is one rendered child of an installation.
type Resource struct {
	// Object is the whole rendered object (apiVersion, kind, metadata,
	// spec, ...), as JSON decodes it, numbers as json.Number so that no
	// integer loses precision.
	Object map[string]any
	// OriginalName is the resource's name in the stack's resources/ build,
	// before the installation's namePrefix: what readiness checks,
	// deletion priorities and outputs match on.
	OriginalName string
}

func (r Resource) str(path ...string) string {
	var cur any = r.Object
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return ""
		}
		cur = m[p]
	}
	s, _ := cur.(string)
	return s
}

func (r Resource) strMap(path ...string) map[string]string {
	var cur any = r.Object
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[p]
	}
	m, ok := cur.(map[string]any)
	if !ok {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		if s, ok := v.(string); ok {
			out[k] = s
		}
	}
	return out
}

func (r Resource) APIVersion() string { return r.str("apiVersion") }
func (r Resource) Kind() string       { return r.str("kind") }
func (r Resource) Name() string       { return r.str("metadata", "name") }
func (r Resource) Namespace() string  { return r.str("metadata", "namespace") }

// Group is the API group of the resource's apiVersion ("" for core).
func (r Resource) Group() string {
	g, _, ok := strings.Cut(r.APIVersion(), "/")
	if !ok {
		return ""
	}
	return g
}

// Labels returns a copy of the resource's labels.
func (r Resource) Labels() map[string]string { return r.strMap("metadata", "labels") }

// Annotations returns a copy of the resource's annotations.
func (r Resource) Annotations() map[string]string { return r.strMap("metadata", "annotations") }

// Key identifies the resource among the children of one installation:
// apiVersion/kind/namespace/name ("v1/ConfigMap/default/x"; the namespace
// is empty for a resource without one). Outputs takes observed objects
// keyed by it.
func (r Resource) Key() string {
	return r.APIVersion() + "/" + r.Kind() + "/" + r.Namespace() + "/" + r.Name()
}

// matches reports whether m selects r.
func (m Match) matches(r Resource) bool {
	return (m.APIVersion == "" || m.APIVersion == r.APIVersion()) &&
		(m.Kind == "" || m.Kind == r.Kind()) &&
		(m.Name == "" || m.Name == r.OriginalName)
}

// specificity orders matches: a name beats a kind beats an apiVersion.
func (m Match) specificity() int {
	n := 0
	if m.Name != "" {
		n += 4
	}
	if m.Kind != "" {
		n += 2
	}
	if m.APIVersion != "" {
		n++
	}
	return n
}

// String renders the match for messages.
func (m Match) String() string {
	var parts []string
	if m.APIVersion != "" {
		parts = append(parts, "apiVersion "+m.APIVersion)
	}
	if m.Kind != "" {
		parts = append(parts, "kind "+m.Kind)
	}
	if m.Name != "" {
		parts = append(parts, "name "+m.Name)
	}
	if len(parts) == 0 {
		return "every resource"
	}
	return strings.Join(parts, ", ")
}
