package deps

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
)

// Installation is what the resolver needs of an existing installation:
// the seed's Installation Resource fields used to decide whether it can
// satisfy a dependency.
type Installation struct {
	ID   string `json:"id"`
	Kind string `json:"kind,omitempty"`
	// Namespace is "" for a cluster-scoped installation: a candidate of
	// the global tier (Resolver) for every namespace's dependencies.
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Stack is the stack and version it was installed from.
	Stack Reference `json:"stack"`
	// Sharing is copied from the dependency that created it, and editable
	// by the user (seed 002 "Installation Resource").
	Sharing InstallationSharing `json:"sharing"`
	// Status is cairn's cache of the stack definition, for the query.
	Status SharingStatus `json:"status"`
}

// InstallationSharing is an installation's sharing mode and group. The
// zero value is mode group, group "": shareable by default, as the seed.
type InstallationSharing struct {
	Mode  SharingMode `json:"mode,omitempty"`
	Group string      `json:"group,omitempty"`
}

// Shareable reports whether the installation may satisfy another's
// dependency.
func (s InstallationSharing) Shareable() bool { return s.Mode != SharingNone }

// SharingStatus is status.sharing: the interface digest, the interface the
// stack provides, and (cairn's addition, for matching by $id or name) the
// names and $ids of its outputs.
type SharingStatus struct {
	InterfaceDigest string    `json:"interfaceDigest,omitempty"`
	Provides        *Provides `json:"provides,omitempty"`
	Outputs         []Output  `json:"outputs,omitempty"`
}

// SharingStatusOf computes status.sharing for an installation of s.
func SharingStatusOf(s *Stack) SharingStatus {
	ii := s.InstallationInterface()
	st := SharingStatus{InterfaceDigest: ii.Digest(), Outputs: ii.Outputs}
	if ii.Provides != "" {
		st.Provides = &Provides{Interface: ProvidedInterface{ID: ii.Provides}}
	}
	return st
}

func (i *Installation) provides() string {
	if i.Status.Provides != nil {
		return i.Status.Provides.Interface.ID
	}
	return ""
}

// Query asks for shareable installations of one namespace and sharing
// group that match every criterion given: of Stack (by name), providing
// InterfaceID, having outputs with all OutputIDs and all OutputNames.
type Query struct {
	Namespace string `json:"namespace"`
	Group     string `json:"group"`
	// Name, if set, asks for that one installation (still subject to the
	// other criteria).
	Name        string   `json:"name,omitempty"`
	Stack       string   `json:"stack,omitempty"`
	InterfaceID string   `json:"interfaceID,omitempty"`
	OutputIDs   []string `json:"outputIDs,omitempty"`
	OutputNames []string `json:"outputNames,omitempty"`
}

func (q Query) empty() bool {
	return q.Name == "" && q.Stack == "" && q.InterfaceID == "" && len(q.OutputIDs) == 0 && len(q.OutputNames) == 0
}

// Installations is the candidate query over existing installations (the
// hub's index, or Index).
type Installations interface {
	// Candidates returns the shareable installations matching q, in a
	// deterministic order. A query with no criterion is an error.
	Candidates(ctx context.Context, q Query) ([]Installation, error)
	// Installation returns one installation by kind, namespace and name
	// (a user's --dependency); an unknown one wraps ErrNotFound.
	Installation(ctx context.Context, ref InstallationRef) (*Installation, error)
}

// Index is an in-memory Installations: maps keyed by namespace and group,
// then by stack, provided interface, output $id and output name, so a
// query reads the shortest matching list instead of every installation.
// Safe for concurrent use.
type Index struct {
	mu      sync.RWMutex
	byKey   map[string]*Installation // namespace/name
	byKind  map[InstallationRef]*Installation
	buckets map[bucketKey]*bucket
}

type bucketKey struct{ namespace, group string }

type bucket struct {
	byStack    map[string]map[string]*Installation // stack -> key -> installation
	byProvides map[string]map[string]*Installation
	byOutputID map[string]map[string]*Installation
	byOutput   map[string]map[string]*Installation
}

// NewIndex returns an empty index.
func NewIndex() *Index {
	return &Index{byKey: map[string]*Installation{}, byKind: map[InstallationRef]*Installation{}, buckets: map[bucketKey]*bucket{}}
}

// Key is an installation's key in a plan and the index: NAMESPACE/NAME,
// or NAME alone for a cluster-scoped one (no namespace), as Kubernetes
// keys objects.
func Key(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}

// SplitKey is the inverse of Key.
func SplitKey(key string) (namespace, name string) {
	if ns, n, ok := strings.Cut(key, "/"); ok {
		return ns, n
	}
	return "", key
}

func instKey(namespace, name string) string { return Key(namespace, name) }

// Put adds or replaces an installation (by namespace and name).
func (x *Index) Put(in Installation) {
	x.mu.Lock()
	defer x.mu.Unlock()
	k := instKey(in.Namespace, in.Name)
	if old, ok := x.byKey[k]; ok {
		x.remove(old)
	}
	p := &in
	x.byKey[k] = p
	x.byKind[InstallationRef{Kind: in.Kind, Namespace: in.Namespace, Name: in.Name}] = p
	if !in.Sharing.Shareable() {
		return // never a candidate: not in the query maps
	}
	b := x.buckets[bucketKey{in.Namespace, in.Sharing.Group}]
	if b == nil {
		b = &bucket{byStack: map[string]map[string]*Installation{}, byProvides: map[string]map[string]*Installation{},
			byOutputID: map[string]map[string]*Installation{}, byOutput: map[string]map[string]*Installation{}}
		x.buckets[bucketKey{in.Namespace, in.Sharing.Group}] = b
	}
	add(b.byStack, in.Stack.Name, k, p)
	if id := p.provides(); id != "" {
		add(b.byProvides, id, k, p)
	}
	for _, o := range in.Status.Outputs {
		add(b.byOutput, o.Name, k, p)
		if o.ID != "" {
			add(b.byOutputID, o.ID, k, p)
		}
	}
}

// Delete removes an installation.
func (x *Index) Delete(namespace, name string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if old, ok := x.byKey[instKey(namespace, name)]; ok {
		x.remove(old)
	}
}

// Len is the number of installations held.
func (x *Index) Len() int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return len(x.byKey)
}

func (x *Index) remove(old *Installation) {
	k := instKey(old.Namespace, old.Name)
	delete(x.byKey, k)
	delete(x.byKind, InstallationRef{Kind: old.Kind, Namespace: old.Namespace, Name: old.Name})
	b := x.buckets[bucketKey{old.Namespace, old.Sharing.Group}]
	if b == nil || !old.Sharing.Shareable() {
		return
	}
	del(b.byStack, old.Stack.Name, k)
	del(b.byProvides, old.provides(), k)
	for _, o := range old.Status.Outputs {
		del(b.byOutput, o.Name, k)
		del(b.byOutputID, o.ID, k)
	}
}

func add(m map[string]map[string]*Installation, key, name string, p *Installation) {
	inner := m[key]
	if inner == nil {
		inner = map[string]*Installation{}
		m[key] = inner
	}
	inner[name] = p
}

func del(m map[string]map[string]*Installation, key, name string) {
	if inner := m[key]; inner != nil {
		delete(inner, name)
		if len(inner) == 0 {
			delete(m, key)
		}
	}
}

// Candidates implements Installations.
func (x *Index) Candidates(_ context.Context, q Query) ([]Installation, error) {
	if q.empty() {
		return nil, errors.New("installation query: no criterion (stack, interface id or outputs)")
	}
	x.mu.RLock()
	defer x.mu.RUnlock()
	b := x.buckets[bucketKey{q.Namespace, q.Group}]
	if b == nil {
		return nil, nil
	}
	// The shortest list among the criteria's keys; the rest filter it.
	var lists []map[string]*Installation
	if q.Name != "" {
		one := map[string]*Installation{}
		if in, ok := x.byKey[instKey(q.Namespace, q.Name)]; ok && in.Sharing.Shareable() && in.Sharing.Group == q.Group {
			one[q.Name] = in
		}
		lists = append(lists, one)
	}
	if q.Stack != "" {
		lists = append(lists, b.byStack[q.Stack])
	}
	if q.InterfaceID != "" {
		lists = append(lists, b.byProvides[q.InterfaceID])
	}
	for _, id := range q.OutputIDs {
		lists = append(lists, b.byOutputID[id])
	}
	for _, n := range q.OutputNames {
		lists = append(lists, b.byOutput[n])
	}
	shortest := slices.MinFunc(lists, func(a, b map[string]*Installation) int { return len(a) - len(b) })
	out := make([]Installation, 0, len(shortest))
	for _, in := range shortest {
		if q.Stack != "" && in.Stack.Name != q.Stack {
			continue
		}
		if q.InterfaceID != "" && in.provides() != q.InterfaceID {
			continue
		}
		if !hasOutputs(in.Status.Outputs, q.OutputIDs, q.OutputNames) {
			continue
		}
		out = append(out, *in)
	}
	slices.SortFunc(out, func(a, b Installation) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

func hasOutputs(outs []Output, ids, names []string) bool {
	for _, id := range ids {
		if !slices.ContainsFunc(outs, func(o Output) bool { return o.ID == id }) {
			return false
		}
	}
	for _, n := range names {
		if !slices.ContainsFunc(outs, func(o Output) bool { return o.Name == n }) {
			return false
		}
	}
	return true
}

// Installation implements Installations.
func (x *Index) Installation(_ context.Context, ref InstallationRef) (*Installation, error) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	in, ok := x.byKind[ref]
	if !ok {
		return nil, fmt.Errorf("installation %s: %w", ref, ErrNotFound)
	}
	c := *in
	return &c, nil
}
