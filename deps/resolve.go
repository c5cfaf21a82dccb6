package deps

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/Masterminds/semver/v3"
)

// DefaultGlobalNamespace is where installations shared with every
// namespace live (seed 002 "Prefer Local": same namespace first, then
// global, never another namespace).
const DefaultGlobalNamespace = "global"

// Resolver turns an install request into a Plan.
type Resolver struct {
	Catalog       Catalog
	Installations Installations
	// GlobalNamespace defaults to DefaultGlobalNamespace.
	GlobalNamespace string
}

// Request is one install: the root installation and what the user gave.
type Request struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// RootID is the root installation's id (${installation.root.id}). It
	// must stay the same when a failed run is run again, so groups named
	// after it find what the first run created.
	RootID string `json:"rootID"`
	// RootIDPending says RootID stands in for an id not assigned yet: the
	// root installation does not exist, and what is computed from
	// ${installation.root.id} will differ once it does (Plan.RootIDPending).
	RootIDPending bool `json:"rootIDPending,omitempty"`
	// Stack is the root's stack; without a version, the highest.
	Stack      Reference      `json:"stack"`
	Parameters map[string]any `json:"parameters,omitempty"`
	// Credentials reference credential instances by name; values are never
	// given to the engine.
	Credentials map[string]string `json:"credentials,omitempty"`
	// Inputs answer unmapped inputs of dependencies, by dependency path.
	Inputs    map[string]Inputs `json:"inputs,omitempty"`
	Overrides []Override        `json:"overrides,omitempty"`
	// Injected are installations a policy's inject.requiredTypeInstances
	// names; they satisfy any dependency they match, before existing
	// installations are searched.
	Injected []Installation `json:"injected,omitempty"`
}

// Inputs are a user's answers for one dependency.
type Inputs struct {
	Parameters  map[string]any    `json:"parameters,omitempty"`
	Credentials map[string]string `json:"credentials,omitempty"`
}

// binding is one dependency edge: the requirement dep of parent, resolved
// to child.
type binding struct {
	parent *Node
	path   string
	c      *compiled
	child  *Node
	// outputMap: the name the parent reads an output under -> the child's
	// output name (they differ when matched by $id).
	outputMap map[string]string
	iface     ifaceReq
}

type resolution struct {
	r        *Resolver
	req      *Request
	plan     *Plan
	global   string
	compiled map[*Stack][]*compiled
	digests  map[Reference]string
	override map[string]Override
	usedOver map[string]bool
	versions map[string]*semver.Version
	// usedInputs: the answers' paths that met a new installation.
	usedInputs map[string]bool
	// planned: the new shared installations of this plan by namespace and
	// sharing group, in the order they were planned.
	planned map[[2]string][]*Node
	// readRootID: a template read ${installation.root.id}.
	readRootID bool
	// defaulted: each node's parameters with its schema's defaults.
	defaulted map[*Node]map[string]Value
}

// version parses a version once per resolution (nil if not semver).
func (res *resolution) version(s string) *semver.Version {
	v, ok := res.versions[s]
	if !ok {
		v, _ = semver.NewVersion(s)
		res.versions[s] = v
	}
	return v
}

func (res *resolution) compareVersions(a, b string) int {
	va, vb := res.version(a), res.version(b)
	if va == nil || vb == nil {
		return cmpString(a, b)
	}
	return va.Compare(vb)
}

// Plan resolves every dependency of the request's stack, recursively, and
// orders the result. It reads the catalog and the installations and
// changes nothing. Missing inputs do not fail it: they are listed in
// Plan.Unmapped and Plan.Ready reports them.
func (r *Resolver) Plan(ctx context.Context, req Request) (*Plan, error) {
	if req.Name == "" || req.RootID == "" {
		return nil, errors.New("plan: name and root id are required")
	}
	res := &resolution{
		r: r, req: &req,
		plan:       &Plan{RootID: req.RootID, Namespace: req.Namespace, byKey: map[string]*Node{}, req: &req},
		global:     r.GlobalNamespace,
		compiled:   map[*Stack][]*compiled{},
		digests:    map[Reference]string{},
		override:   map[string]Override{},
		usedOver:   map[string]bool{},
		versions:   map[string]*semver.Version{},
		usedInputs: map[string]bool{},
		planned:    map[[2]string][]*Node{},
		defaulted:  map[*Node]map[string]Value{},
	}
	if res.global == "" {
		res.global = DefaultGlobalNamespace
	}
	res.plan.global = res.global
	for _, o := range req.Overrides {
		if _, dup := res.override[o.Path]; dup {
			return nil, fmt.Errorf("--dependency %s given twice", o.Path)
		}
		res.override[o.Path] = o
	}
	root, err := res.stack(ctx, req.Stack, nil)
	if err != nil {
		return nil, err
	}
	// A cluster-scoped root has no namespace (the request's is ignored,
	// as kubectl ignores -n for one); its dependencies resolve as from the
	// global namespace (home).
	ns := req.Namespace
	if root.Cluster {
		ns = ""
	} else if ns == "" {
		return nil, fmt.Errorf("plan: stack %s is namespaced: the root installation needs a namespace", root.Ref())
	}
	res.plan.Namespace = ns
	node := &Node{
		Key: instKey(ns, req.Name), Action: ActionInstall, Namespace: ns, Name: req.Name,
		Stack: root.Ref(), Paths: []string{""}, Reason: "the installation requested", stack: root,
	}
	res.plan.Root = node.Key
	res.plan.byKey[node.Key] = node
	for _, k := range sortedKeys(req.Parameters) {
		if root.parameter(k) == nil {
			return nil, fmt.Errorf("parameter %s: stack %s has no such parameter%s", k, root.Ref(), known(paramNames(root)))
		}
	}
	for _, k := range sortedKeys(req.Credentials) {
		if root.credential(k) == nil {
			return nil, fmt.Errorf("credential %s: stack %s has no such credential%s", k, root.Ref(), known(credNames(root)))
		}
	}
	node.Parameters, node.Credentials = res.rootInputs()
	if err := res.expand(ctx, node, []string{root.Ref().String()}); err != nil {
		return nil, err
	}
	for _, p := range sortedKeys(req.Inputs) {
		if !res.usedInputs[p] {
			return nil, fmt.Errorf("answers for %s: the plan installs no dependency at that path", p)
		}
	}
	for _, p := range sortedKeys(res.override) {
		if !res.usedOver[p] {
			return nil, fmt.Errorf("--dependency %s: the graph has no dependency at that path", p)
		}
	}
	if err := res.finish(); err != nil {
		return nil, err
	}
	if req.RootIDPending && res.readRootID {
		res.plan.RootIDPending = true
		res.plan.Notes = append(res.plan.Notes, fmt.Sprintf("%s does not exist yet: its id is assigned when the install creates it, so what is computed here from ${installation.root.id} (sharing groups, and the names of new shared installations) uses a stand-in and will differ", res.plan.Root))
	}
	return res.plan, nil
}

func (res *resolution) stack(ctx context.Context, ref Reference, rng *semver.Constraints) (*Stack, error) {
	if ref.Version == "" {
		v, seen, err := highest(ctx, res.r.Catalog, ref.Name, rng)
		if err != nil {
			return nil, err
		}
		if v == "" {
			if len(seen) == 0 {
				return nil, fmt.Errorf("stack %s is not in the catalog", ref.Name)
			}
			return nil, fmt.Errorf("no version of stack %s in range %s (the catalog has %s)", ref.Name, rng, strings.Join(seen, ", "))
		}
		ref.Version = v
	}
	s, err := res.r.Catalog.Stack(ctx, ref)
	if err != nil {
		return nil, fmt.Errorf("catalog: %w", err)
	}
	return s, nil
}

func (res *resolution) compile(s *Stack) ([]*compiled, error) {
	if cs, ok := res.compiled[s]; ok {
		return cs, nil
	}
	cs, err := compileStack(s)
	if err != nil {
		return nil, fmt.Errorf("stack %s: %w", s.Ref(), err)
	}
	if cs, err = wiringOrder(cs); err != nil {
		return nil, fmt.Errorf("stack %s: %w", s.Ref(), err)
	}
	res.compiled[s] = cs
	return cs, nil
}

func (res *resolution) rootInputs() (map[string]Value, map[string]Value) {
	params := map[string]Value{}
	for _, k := range sortedKeys(res.req.Parameters) {
		params[k] = Value{Value: res.req.Parameters[k], Source: "parameter", known: true}
	}
	creds := map[string]Value{}
	for _, k := range sortedKeys(res.req.Credentials) {
		creds[k] = Value{Credential: res.req.Credentials[k], Source: "credential", known: true}
	}
	return params, creds
}

// expand resolves node's own dependencies (node is a new installation).
func (res *resolution) expand(ctx context.Context, node *Node, ancestry []string) error {
	cs, err := res.compile(node.stack)
	if err != nil {
		return err
	}
	siblings := map[string]*binding{}
	for _, c := range cs {
		path := c.req.Name
		if p := node.Paths[0]; p != "" {
			path = p + "." + c.req.Name
		}
		b := &binding{parent: node, path: path, c: c}
		if err := res.resolve(ctx, b, siblings, ancestry); err != nil {
			return fmt.Errorf("dependency %s: %w", path, err)
		}
		siblings[c.req.Name] = b
		node.children = append(node.children, b)
	}
	// Promoted outputs: set on node from its dependencies' outputs.
	for _, b := range node.children {
		for _, k := range sortedKeys(b.c.outs) {
			if node.Outputs == nil {
				node.Outputs = map[string]Value{}
			}
			v, err := res.planValue(b.c.outs[k], node, siblings, b)
			if err != nil {
				return fmt.Errorf("dependency %s: outputs.%s: %w", b.path, k, err)
			}
			node.Outputs[k] = v
		}
	}
	return nil
}

// resolve decides one dependency: GetOrCreate, by the seed's precedence.
func (res *resolution) resolve(ctx context.Context, b *binding, siblings map[string]*binding, ancestry []string) error {
	c := b.c
	ns := res.home(b.parent)
	ir, err := res.interfaceOf(ctx, c)
	if err != nil {
		return err
	}
	b.iface = ir
	var ref Reference
	if c.req.Bundle.Reference != "" {
		ref, _ = ParseReference(c.req.Bundle.Reference)
	}
	var rng *semver.Constraints
	if c.req.Bundle.Version != "" {
		rng, _ = semver.NewConstraint(c.req.Bundle.Version)
	}
	mode, _ := c.req.effectiveSharing()
	group := ""
	if c.group != nil {
		v, err := res.planValue(c.group, b.parent, siblings, b)
		if err != nil {
			return fmt.Errorf("sharing.group.name: %w", err)
		}
		if !v.known {
			return fmt.Errorf("sharing.group.name %q must be known before anything runs", c.group.src)
		}
		group = fmt.Sprint(v.Value)
	}
	def, err := res.definition(b, siblings)
	if err != nil {
		return err
	}
	// A dependency that maps parameters or credentials reuses only an
	// installation made from the same definition (seed 002 "Unshared": one
	// installation per unique definition); that is the one with the name a
	// new installation would get. Racing installers compute it alike.
	wantName := ""
	if ref.Name != "" && len(c.req.Parameters)+len(c.req.Credentials) > 0 {
		wantName = sharedName(ref.Name, group, def)
	}
	var cands []Candidate
	reuse := func(in *Installation, kind, why string, outMap map[string]string) error {
		cands = append(cands, Candidate{Kind: kind, Installation: instKey(in.Namespace, in.Name), Stack: in.Stack.String(), Chosen: true, Reason: why})
		key := instKey(in.Namespace, in.Name)
		n := res.plan.byKey[key]
		if n == nil {
			n = &Node{Key: key, Action: ActionReuse, Namespace: in.Namespace, Name: in.Name, Stack: in.Stack,
				InstallationID: in.ID, Sharing: in.Sharing, Reason: why}
			res.plan.byKey[key] = n
		}
		n.Paths = append(n.Paths, b.path)
		n.Candidates = append(n.Candidates, cands...)
		n.bindings = append(n.bindings, b)
		b.child, b.outputMap = n, outMap
		return nil
	}

	// 1. What the user gave: --dependency, then the policy's injections.
	if o, ok := res.override[b.path]; ok {
		res.usedOver[b.path] = true
		if o.Installation != nil {
			iref := *o.Installation
			if iref.Namespace == "" {
				iref.Namespace = ns
			}
			if iref.Namespace != ns && iref.Namespace != res.global {
				return fmt.Errorf("--dependency %s=%s: installation %s is in namespace %s: a dependency of %s is satisfied from namespace %s or %s only",
					b.path, o.Installation, iref, iref.Namespace, res.plan.Root, ns, res.global)
			}
			in, err := res.r.Installations.Installation(ctx, iref)
			if errors.Is(err, ErrNotFound) {
				// A cluster-scoped installation has no namespace: named
				// with or without one (global/KIND/NAME, KIND/NAME).
				cref := iref
				cref.Namespace = ""
				if cin, cerr := res.r.Installations.Installation(ctx, cref); cerr == nil {
					in, err = cin, nil
				}
			}
			if err != nil {
				return fmt.Errorf("--dependency %s=%s: %w", b.path, o.Installation, err)
			}
			if !in.Sharing.Shareable() {
				return fmt.Errorf("--dependency %s=%s: the installation's sharing mode is none, so it satisfies no other installation's dependency (edit its sharing to reuse it)", b.path, o.Installation)
			}
			m, missing := ir.checkInstallation(in)
			if missing != "" {
				return fmt.Errorf("--dependency %s=%s: the installation does not satisfy the dependency's interface: %s", b.path, o.Installation, missing)
			}
			return reuse(in, "override", "given with --dependency", m)
		}
		s, err := res.stack(ctx, *o.Stack, nil)
		if err != nil {
			return fmt.Errorf("--dependency %s=%s: %w", b.path, o.Stack, err)
		}
		m, missing := ir.checkStack(s)
		if missing != "" {
			return fmt.Errorf("--dependency %s=%s: the stack does not satisfy the dependency's interface: %s", b.path, o.Stack, missing)
		}
		cands = append(cands, Candidate{Kind: "override", Stack: s.Ref().String(), Chosen: true, Reason: "given with --dependency"})
		return res.install(ctx, b, s, m, mode, group, def, "stack given with --dependency", cands, siblings, ancestry)
	}
	if mode != SharingNone {
		for i := range res.req.Injected {
			in := &res.req.Injected[i]
			why, m := res.satisfies(ctx, in, ref, rng, ir)
			if why == "" && !in.Sharing.Shareable() {
				why = "sharing mode none"
			}
			if why != "" {
				if matchesAny(in, ref, ir) {
					cands = append(cands, Candidate{Kind: "policy", Installation: instKey(in.Namespace, in.Name), Stack: in.Stack.String(), Reason: why})
				}
				continue
			}
			return reuse(in, "policy", "injected by policy (inject.requiredTypeInstances)", m)
		}
	}

	// 2. Existing installations: this namespace, then the global one.
	if mode == SharingNone {
		cands = append(cands, Candidate{Kind: "installation", Reason: "not searched: sharing mode none"})
	} else {
		spaces := []string{ns}
		if res.global != ns {
			spaces = append(spaces, res.global)
		}
		for _, space := range spaces {
			found, err := res.existing(ctx, space, group, ref, rng, ir, wantName)
			if err != nil {
				return err
			}
			var chosen *scored
			for i := range found {
				f := &found[i]
				if f.why == "" && chosen == nil {
					chosen = f
					continue
				}
				why := f.why
				if why == "" {
					why = "ranked after " + instKey(chosen.in.Namespace, chosen.in.Name)
				}
				cands = append(cands, Candidate{Kind: "installation", Installation: instKey(f.in.Namespace, f.in.Name), Stack: f.in.Stack.String(), Reason: why})
			}
			if chosen != nil {
				where := "in the same namespace"
				switch {
				case chosen.in.Namespace == "":
					where = "(cluster-scoped)"
				case space != ns:
					where = "in the global namespace " + space
				}
				return reuse(&chosen.in, "installation", fmt.Sprintf("existing installation %s, sharing group %q", where, group), chosen.outMap)
			}
		}
	}

	// A new installation this plan makes for another dependency that
	// satisfies this one is shared as an existing one would be: a diamond
	// whose ranges overlap gets one installation, as it does installed one
	// dependent after the other.
	if mode != SharingNone && wantName == "" {
		if n, m := res.plannedFor(ns, group, ref, rng, ir, ancestry); n != nil {
			cands = append(cands, Candidate{Kind: "installation", Installation: n.Key, Stack: n.Stack.String(), Chosen: true,
				Reason: fmt.Sprintf("new in this plan for %s, sharing group %q", strings.Join(n.Paths, ", "), group)})
			n.Paths = append(n.Paths, b.path)
			n.Candidates = append(n.Candidates, cands...)
			n.bindings = append(n.bindings, b)
			b.child, b.outputMap = n, m
			return nil
		}
	}

	wantCand := -1
	switch {
	case wantName != "":
		wantCand = len(cands)
		cands = append(cands, Candidate{Kind: "installation", Installation: instKey(ns, wantName),
			Reason: "none: the dependency maps parameters or credentials, so it reuses only an installation made from the same definition, which would have this name"})
	case mode != SharingNone && !slices.ContainsFunc(cands, func(c Candidate) bool { return c.Kind == "installation" }):
		cands = append(cands, Candidate{Kind: "installation",
			Reason: fmt.Sprintf("none in %s with sharing group %q", strings.Join(res.spaces(ns), " or "), group)})
	}

	// 3 and 4. A new installation: the highest version in range, else the
	// reference itself.
	if c.req.Bundle.Reference == "" {
		cands = append(cands, Candidate{Kind: "catalog", Reason: "no bundle.reference: nothing to install"})
		return &NoCandidateError{Path: b.path, Interface: ir.describe(), Namespaces: res.spaces(ns), Candidates: cands}
	}
	target := ref
	kind, why := "reference", "the reference (default implementation)"
	if rng != nil || ref.Version == "" {
		v, seen, err := highest(ctx, res.r.Catalog, ref.Name, rng)
		if err != nil {
			return err
		}
		if v == "" {
			if len(seen) == 0 {
				return fmt.Errorf("stack %s is not in the catalog", ref.Name)
			}
			if rng == nil {
				return fmt.Errorf("no version of stack %s in the catalog", ref.Name)
			}
			return fmt.Errorf("no version of stack %s in range %s (the catalog has %s)", ref.Name, c.req.Bundle.Version, strings.Join(seen, ", "))
		}
		target.Version = v
		kind = "catalog"
		if rng != nil {
			why = fmt.Sprintf("the highest version in range %s", c.req.Bundle.Version)
		} else {
			why = "the highest version (the reference names none)"
		}
		if ref.Version != "" && ref.Version != v {
			cands = append(cands, Candidate{Kind: "reference", Stack: ref.String(), Reason: "not used: " + v + " is higher and in range"})
		}
	}
	s, err := res.stack(ctx, target, nil)
	if err != nil {
		return err
	}
	if wantCand >= 0 && s.Cluster {
		cands[wantCand].Installation = wantName // it would have no namespace
	}
	m, missing := ir.checkStack(s)
	if missing != "" {
		return &DanglingError{Path: b.path, Stack: s.Ref().String(), Missing: missing}
	}
	cands = append(cands, Candidate{Kind: kind, Stack: s.Ref().String(), Chosen: true, Reason: why})
	return res.install(ctx, b, s, m, mode, group, def, "new installation of "+why, cands, siblings, ancestry)
}

// plannedFor returns the first new shared installation of the plan in
// namespace ns and the sharing group that satisfies the dependency as an
// existing installation would (the referenced stack in range, or another
// that provides the declared interface), and the output map. One of the
// dependency's ancestors is never returned (that would be a cycle).
func (res *resolution) plannedFor(ns, group string, ref Reference, rng *semver.Constraints, ir ifaceReq, ancestry []string) (*Node, map[string]string) {
	// A new cluster-scoped installation is one of the global tier, for
	// every namespace.
	for _, n := range slices.Concat(res.planned[[2]string{ns, group}], res.planned[[2]string{"", group}]) {
		if slices.ContainsFunc(ancestry, func(a string) bool { return strings.SplitN(a, "@", 2)[0] == n.Stack.Name }) {
			continue
		}
		if n.Stack.Name == ref.Name && rng != nil {
			if v := res.version(n.Stack.Version); v == nil || !rng.Check(v) {
				continue
			}
		}
		if n.Stack.Name != ref.Name && !ir.declared {
			continue
		}
		if m, missing := ir.checkStack(n.stack); missing == "" {
			return n, m
		}
	}
	return nil, nil
}

// home is Plan.home.
func (res *resolution) home(n *Node) string { return res.plan.home(n) }

func (res *resolution) spaces(ns string) []string {
	if ns == res.global {
		return []string{ns}
	}
	return []string{ns, res.global}
}

func matchesAny(in *Installation, ref Reference, ir ifaceReq) bool {
	return in.Stack.Name == ref.Name || ir.declared
}

type scored struct {
	in     Installation
	outMap map[string]string
	why    string // empty: acceptable
}

// existing queries one namespace for installations that satisfy the
// dependency, ranked: acceptable first; of the reference's stack before
// other implementations of the interface; higher versions first; by name.
func (res *resolution) existing(ctx context.Context, ns, group string, ref Reference, rng *semver.Constraints, ir ifaceReq, wantName string) ([]scored, error) {
	seen := map[string]bool{}
	var all []scored
	var queries []Query
	ids, names := outputKeys(ir)
	if wantName != "" {
		// Only the installation of the same definition qualifies.
		queries = append(queries, Query{Namespace: ns, Group: group, Name: wantName, Stack: ref.Name})
	} else if ref.Name != "" {
		queries = append(queries, Query{Namespace: ns, Group: group, Stack: ref.Name, InterfaceID: ir.id, OutputIDs: ids, OutputNames: names})
	}
	if wantName == "" && ir.declared && (ir.id != "" || len(ids)+len(names) > 0) {
		queries = append(queries, Query{Namespace: ns, Group: group, InterfaceID: ir.id, OutputIDs: ids, OutputNames: names})
	}
	if ns == res.global {
		// Cluster-scoped installations (no namespace) are candidates of
		// the global tier, ranked with its own.
		for _, q := range slices.Clone(queries) {
			q.Namespace = ""
			queries = append(queries, q)
		}
	}
	for _, q := range queries {
		found, err := res.r.Installations.Candidates(ctx, q)
		if err != nil {
			return nil, fmt.Errorf("installations in %s: %w", ns, err)
		}
		for _, in := range found {
			k := instKey(in.Namespace, in.Name)
			if seen[k] {
				continue
			}
			seen[k] = true
			why, m := res.satisfies(ctx, &in, ref, rng, ir)
			all = append(all, scored{in: in, outMap: m, why: why})
		}
	}
	slices.SortStableFunc(all, func(a, b scored) int {
		if (a.why == "") != (b.why == "") {
			if a.why == "" {
				return -1
			}
			return 1
		}
		if am, bm := a.in.Stack.Name == ref.Name, b.in.Stack.Name == ref.Name; am != bm {
			if am {
				return -1
			}
			return 1
		}
		if c := res.compareVersions(b.in.Stack.Version, a.in.Stack.Version); c != 0 {
			return c
		}
		return strings.Compare(a.in.Name, b.in.Name)
	})
	return all, nil
}

// satisfies says why an installation cannot be used ("" if it can), and
// maps the interface's outputs onto its outputs. Its cached status is
// checked against the catalog's stack definition, so stale data cannot
// cause a mismatch.
func (res *resolution) satisfies(ctx context.Context, in *Installation, ref Reference, rng *semver.Constraints, ir ifaceReq) (string, map[string]string) {
	if !in.Sharing.Shareable() {
		return "sharing mode none", nil
	}
	if in.Stack.Name == ref.Name && rng != nil {
		v := res.version(in.Stack.Version)
		if v == nil || !rng.Check(v) {
			return fmt.Sprintf("version %s not in range %s", in.Stack.Version, rng), nil
		}
	}
	if in.Stack.Name != ref.Name && !ir.declared {
		return "another stack, and the dependency declares no interface", nil
	}
	m, missing := ir.checkInstallation(in)
	if missing != "" {
		return missing, nil
	}
	if d, ok := res.digest(ctx, in.Stack); ok && in.Status.InterfaceDigest != "" && d != in.Status.InterfaceDigest {
		return fmt.Sprintf("status.sharing.interfaceDigest %s is stale (stack %s has %s)", in.Status.InterfaceDigest, in.Stack, d), nil
	}
	return "", m
}

func (res *resolution) digest(ctx context.Context, ref Reference) (string, bool) {
	if d, ok := res.digests[ref]; ok {
		return d, d != ""
	}
	s, err := res.r.Catalog.Stack(ctx, ref)
	d := ""
	if err == nil {
		d = s.InstallationInterface().Digest()
	}
	res.digests[ref] = d
	return d, d != ""
}

// install adds (or joins) the node of a new installation of s.
func (res *resolution) install(ctx context.Context, b *binding, s *Stack, outMap map[string]string, mode SharingMode, group string, def map[string]any, why string, cands []Candidate, siblings map[string]*binding, ancestry []string) error {
	ref := s.Ref().String()
	for _, a := range ancestry {
		if strings.SplitN(a, "@", 2)[0] == s.Name {
			return &CycleError{Path: append(slices.Clone(ancestry), ref)}
		}
	}
	params, creds, err := res.inputs(b, s, siblings)
	if err != nil {
		return err
	}
	ns := res.home(b.parent)
	var name string
	sharing := InstallationSharing{Mode: mode, Group: group}
	if mode == SharingNone {
		name = dnsName(b.parent.Name + "-" + b.c.req.Name)
		if s.Cluster && b.parent.Namespace != "" {
			// One name for every namespace: the parent's namespace keeps
			// the exclusive ones of team-a/shop and team-b/shop apart.
			name = dnsName(b.parent.Namespace + "-" + b.parent.Name + "-" + b.c.req.Name)
		}
	} else {
		// Two installers (on two replicas) that need the same shared
		// installation compute the same name, so the database's uniqueness
		// makes the race create it once.
		name = sharedName(s.Name, group, def)
	}
	if s.Cluster {
		ns = "" // a cluster-scoped installation has no namespace
	}
	key := instKey(ns, name)
	n := res.plan.byKey[key]
	if n != nil {
		if n.Stack.Name != s.Name || n.Action != ActionInstall {
			return fmt.Errorf("installation name %s is needed by %s and by %s", key, strings.Join(n.Paths, ", "), b.path)
		}
		if n.Stack.Version != s.Version {
			return fmt.Errorf("the shared installation %s is needed at %s by %s and at %s by %s", key, n.Stack, strings.Join(n.Paths, ", "), s.Ref(), b.path)
		}
		n.Paths = append(n.Paths, b.path)
		n.bindings = append(n.bindings, b)
		b.child, b.outputMap = n, outMap
		return nil
	}
	n = &Node{Key: key, Action: ActionInstall, Namespace: ns, Name: name, Stack: s.Ref(), Sharing: sharing,
		Paths: []string{b.path}, Reason: why, Candidates: cands, Parameters: params, Credentials: creds, stack: s}
	res.plan.byKey[key] = n
	if mode != SharingNone {
		res.planned[[2]string{ns, group}] = append(res.planned[[2]string{ns, group}], n)
	}
	n.bindings = append(n.bindings, b)
	b.child, b.outputMap = n, outMap
	return res.expand(ctx, n, append(slices.Clone(ancestry), ref))
}

// finish adds edges, orders the graph and aggregates unmapped inputs.
func (res *resolution) finish() error {
	p := res.plan
	type ek struct{ from, to, kind string }
	edges := map[ek]map[string]bool{}
	addEdge := func(from, to, kind, via string) {
		if from == to {
			return
		}
		k := ek{from, to, kind}
		if edges[k] == nil {
			edges[k] = map[string]bool{}
		}
		if via != "" {
			edges[k][via] = true
		}
	}
	for _, n := range p.byKey {
		for _, b := range n.children {
			addEdge(b.child.Key, n.Key, "requires", "")
		}
		if n.Action != ActionInstall {
			continue
		}
		for _, group := range []struct {
			kind string
			vs   map[string]Value
		}{{"parameters", n.Parameters}, {"credentials", n.Credentials}, {"outputs", n.Outputs}} {
			for _, k := range sortedKeys(group.vs) {
				for _, need := range group.vs[k].Needs {
					if group.kind == "outputs" {
						continue // the node's own dependencies: already a requires edge
					}
					addEdge(need, n.Key, "wiring", group.kind+"."+k)
				}
			}
		}
	}
	p.Edges = nil
	for k, via := range edges {
		p.Edges = append(p.Edges, Edge{From: k.from, To: k.to, Kind: k.kind, Via: sortedKeys(via)})
	}
	// A wiring edge that duplicates a requires edge is still shown: it says
	// which inputs flow.
	slices.SortFunc(p.Edges, func(a, b Edge) int {
		if c := strings.Compare(a.From, b.From); c != 0 {
			return c
		}
		if c := strings.Compare(a.To, b.To); c != 0 {
			return c
		}
		return strings.Compare(a.Kind, b.Kind)
	})
	if err := p.order(); err != nil {
		return err
	}
	for _, n := range p.Nodes {
		for _, e := range p.Edges {
			if e.To == n.Key && !slices.Contains(n.After, e.From) {
				n.After = append(n.After, e.From)
			}
		}
		slices.Sort(n.After)
		if n.Action != ActionInstall {
			continue
		}
		path := n.Paths[0]
		for _, prm := range n.stack.Parameters {
			if _, ok := n.Parameters[prm.Name]; !ok && prm.Required && !prm.HasDefault {
				p.Unmapped = append(p.Unmapped, Unmapped{Node: n.Key, Path: path, Kind: "parameter", Name: prm.Name, Type: prm.Type})
			}
		}
		for _, c := range n.stack.Credentials {
			if v, ok := n.Credentials[c.Name]; (!ok || (v.Credential == "" && v.known && v.hidden == nil)) && c.IsRequired() {
				p.Unmapped = append(p.Unmapped, Unmapped{Node: n.Key, Path: path, Kind: "credential", Name: c.Name, Type: c.Type, Description: c.Description})
			}
		}
	}
	slices.Sort(p.Notes)
	p.Notes = slices.Compact(p.Notes)
	return nil
}
