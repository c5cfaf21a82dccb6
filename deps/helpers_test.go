package deps

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

// stackYAML builds a Stack from a compact YAML document the way package
// stack hands sections over: dependencies and credentials verbatim.
func stackYAML(t testing.TB, doc string) *Stack {
	t.Helper()
	var ts struct {
		Name         string          `json:"name"`
		Version      string          `json:"version"`
		Parameters   json.RawMessage `json:"parameters"`
		Credentials  json.RawMessage `json:"credentials"`
		Outputs      []Output        `json:"outputs"`
		Dependencies json.RawMessage `json:"dependencies"`
	}
	if err := yaml.UnmarshalStrict([]byte(doc), &ts); err != nil {
		t.Fatalf("test stack: %v", err)
	}
	params, err := ParametersFromSchema(ts.Parameters)
	if err != nil {
		t.Fatal(err)
	}
	creds, err := ParseCredentials(ts.Credentials)
	if err != nil {
		t.Fatal(err)
	}
	s := &Stack{Name: ts.Name, Version: ts.Version, ParametersSchema: ts.Parameters, Parameters: params, Credentials: creds, Outputs: ts.Outputs}
	if len(ts.Dependencies) > 0 {
		if s.Dependencies, err = ParseDependencies(ts.Dependencies); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

func catalog(t testing.TB, stacks ...*Stack) *MemCatalog {
	t.Helper()
	c, err := NewMemCatalog(stacks...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// existing is an installation of s as the hub would index it.
func existing(s *Stack, ns, name string, sharing InstallationSharing) Installation {
	return Installation{ID: "id-" + ns + "-" + name, Kind: kindOf(s.Name), Namespace: ns, Name: name, Stack: s.Ref(), Sharing: sharing, Status: SharingStatusOf(s)}
}

func kindOf(stack string) string {
	b := base(stack)
	return strings.ToUpper(b[:1]) + b[1:]
}

// memInstaller is an Installer over memory that also keeps the index up
// to date, as the hub will. Outputs of an installation: each declared
// output is "<output>@<name>", unless the parameter of the same name is
// set, whose value it then echoes (so wiring is observable).
type memInstaller struct {
	mu        sync.Mutex
	cat       *MemCatalog
	idx       *Index
	installs  map[string]*Installed
	requests  map[string]InstallRequest
	order     []string
	fail      map[string]error // node name -> error of Install
	delay     time.Duration
	running   atomic.Int32
	maxPar    atomic.Int32
	beforeAdd func(req InstallRequest) // test hook, called before the create is committed
}

func newMemInstaller(cat *MemCatalog, idx *Index) *memInstaller {
	return &memInstaller{cat: cat, idx: idx, installs: map[string]*Installed{}, requests: map[string]InstallRequest{}, fail: map[string]error{}}
}

func (m *memInstaller) Get(_ context.Context, ns, name string) (*Installed, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if in, ok := m.installs[Key(ns, name)]; ok {
		c := *in
		return &c, nil
	}
	return nil, nil
}

func (m *memInstaller) Install(ctx context.Context, req InstallRequest) (*Installed, error) {
	n := m.running.Add(1)
	defer m.running.Add(-1)
	for {
		old := m.maxPar.Load()
		if n <= old || m.maxPar.CompareAndSwap(old, n) {
			break
		}
	}
	if m.delay > 0 {
		select {
		case <-time.After(m.delay):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if m.beforeAdd != nil {
		m.beforeAdd(req)
	}
	s, err := m.cat.Stack(ctx, req.Stack)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.fail[req.Name]; err != nil {
		return nil, err
	}
	key := Key(req.Namespace, req.Name)
	if _, ok := m.installs[key]; ok && req.Create {
		return nil, fmt.Errorf("%s: %w", key, ErrExists)
	}
	outs := map[string]any{}
	for _, o := range s.Outputs {
		if v, ok := req.Parameters[o.Name]; ok {
			outs[o.Name] = v
		} else {
			outs[o.Name] = o.Name + "@" + req.Name
		}
	}
	for k, v := range req.Outputs {
		outs[k] = v
	}
	in := &Installed{ID: "id-" + req.Name, Stack: req.Stack, Sharing: req.Sharing, Digest: req.Digest, RootID: req.RootID, Ready: true, Outputs: outs}
	m.installs[key] = in
	m.requests[key] = req
	m.order = append(m.order, key)
	if m.idx != nil {
		m.idx.Put(Installation{ID: in.ID, Kind: kindOf(s.Name), Namespace: req.Namespace, Name: req.Name, Stack: req.Stack, Sharing: req.Sharing, Status: SharingStatusOf(s)})
	}
	c := *in
	return &c, nil
}

func (m *memInstaller) keys() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Sorted(func(yield func(string) bool) {
		for k := range m.installs {
			if !yield(k) {
				return
			}
		}
	})
}

// nodeSummary is "action key stack" per node, in plan order.
func nodeSummary(p *Plan) []string {
	var out []string
	for _, n := range p.Nodes {
		out = append(out, fmt.Sprintf("%s %s %s", n.Action, n.Key, n.Stack))
	}
	return out
}

func nodeByPath(t testing.TB, p *Plan, path string) *Node {
	t.Helper()
	for _, n := range p.Nodes {
		if slices.Contains(n.Paths, path) {
			return n
		}
	}
	t.Fatalf("no node for path %q in %v", path, nodeSummary(p))
	return nil
}
