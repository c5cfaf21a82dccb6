package deps

import (
	"fmt"
	"slices"
	"strings"

	"github.com/cairn-dev/cairn/expr"
)

// The template variables of seed 002's dependencies section:
//
//	${bundle.parameters.X}             a parameter of the declaring stack
//	${bundle.credentials.X}            a credential of the declaring stack (whole, in credentials only)
//	${bundle.dependencies.D.outputs.O} an output of the sibling dependency D
//	${outputs.O}                       an output of this dependency (in its outputs only)
//	${bundle.name}, ${bundle.version}  the declaring stack
//	${installation.name}, ${installation.namespace}, ${installation.root.id}
//
// A path may go on into a value (${bundle.parameters.db.host}).
type refKind int

const (
	refParam refKind = iota + 1
	refCred
	refDepOutput
	refOwnOutput
	refBundle
	refInstallation
)

type ref struct {
	kind  refKind
	path  string // as written
	dep   string // refDepOutput
	name  string // parameter, credential or output name; bundle or installation field
	steps []expr.Step
}

// template is a parsed template with its references classified.
type template struct {
	src  string
	t    *expr.Template
	refs []ref
}

// where a template is used decides which variables it may name.
type use int

const (
	useParameter use = iota + 1
	useCredential
	useOutput
	useGroup
)

func (u use) allows(k refKind) bool {
	switch k {
	case refParam, refBundle, refInstallation:
		return true
	case refCred:
		return u == useCredential
	case refDepOutput:
		return u != useGroup
	case refOwnOutput:
		return u == useOutput
	}
	return false
}

func (u use) String() string {
	return [...]string{"", "a parameter", "a credential", "an output", "a sharing group"}[u]
}

func parseRef(p string) (ref, error) {
	steps, err := expr.ParsePath(p)
	if err != nil {
		return ref{}, err
	}
	key := func(i int) string {
		if i < len(steps) && !steps[i].IsIndex {
			return steps[i].Key
		}
		return ""
	}
	r := ref{path: p}
	switch {
	case key(0) == "bundle" && key(1) == "parameters" && key(2) != "":
		r.kind, r.name, r.steps = refParam, key(2), steps[3:]
	case key(0) == "bundle" && key(1) == "credentials" && key(2) != "" && len(steps) == 3:
		r.kind, r.name = refCred, key(2)
	case key(0) == "bundle" && key(1) == "dependencies" && key(2) != "" && key(3) == "outputs" && key(4) != "":
		r.kind, r.dep, r.name, r.steps = refDepOutput, key(2), key(4), steps[5:]
	case key(0) == "outputs" && key(1) != "":
		r.kind, r.name, r.steps = refOwnOutput, key(1), steps[2:]
	case key(0) == "bundle" && (key(1) == "name" || key(1) == "version") && len(steps) == 2:
		r.kind, r.name = refBundle, key(1)
	case strings.EqualFold(key(0), "installation") && len(steps) == 2 &&
		(strings.EqualFold(key(1), "name") || strings.EqualFold(key(1), "namespace")):
		// The seed writes ${ installation.Namespace }; the issue lower case.
		r.kind, r.name = refInstallation, strings.ToLower(key(1))
	case strings.EqualFold(key(0), "installation") && strings.EqualFold(key(1), "root") && strings.EqualFold(key(2), "id") && len(steps) == 3:
		r.kind, r.name = refInstallation, "root.id"
	default:
		return ref{}, fmt.Errorf("unknown variable ${%s} (want bundle.parameters.X, bundle.credentials.X, bundle.dependencies.D.outputs.O, outputs.O, bundle.name, bundle.version, installation.name, installation.namespace or installation.root.id)", p)
	}
	return r, nil
}

// parseTemplate parses s for one use, checking each reference against the
// declaring stack: its parameters, credentials and dependencies. self is
// the dependency the template belongs to.
func parseTemplate(s string, u use, st *Stack, self string) (*template, error) {
	t, err := expr.Parse(s)
	if err != nil {
		return nil, err
	}
	out := &template{src: s, t: t}
	for _, p := range t.Refs() {
		r, err := parseRef(p)
		if err != nil {
			return nil, err
		}
		if !u.allows(r.kind) {
			return nil, fmt.Errorf("${%s} cannot be used in %s", p, u)
		}
		switch r.kind {
		case refParam:
			if st.parameter(r.name) == nil {
				return nil, fmt.Errorf("${%s}: stack %s has no parameter %q%s", p, st.Name, r.name, known(paramNames(st)))
			}
		case refCred:
			if st.credential(r.name) == nil {
				return nil, fmt.Errorf("${%s}: stack %s has no credential %q%s", p, st.Name, r.name, known(credNames(st)))
			}
			if len(t.Refs()) != 1 || strings.TrimSpace(s) != s || !isWholeRef(s) {
				// Credential values never pass through the engine: a
				// credential is handed on as a reference to its instance.
				return nil, fmt.Errorf("${%s} must be the whole value: a credential is passed on as a reference to its instance, never spliced into text", p)
			}
		case refDepOutput:
			if !hasRequirement(st, r.dep) {
				return nil, fmt.Errorf("${%s}: unknown dependency %q%s", p, r.dep, known(requirementNames(st)))
			}
		}
		out.refs = append(out.refs, r)
	}
	return out, nil
}

func isWholeRef(s string) bool {
	// A reference ends at the first '}', so a whole one ends the string.
	return strings.HasPrefix(s, "${") && strings.IndexByte(s, '}') == len(s)-1
}

func known(names []string) string {
	if len(names) == 0 {
		return " (it declares none)"
	}
	return " (known: " + strings.Join(names, ", ") + ")"
}

func paramNames(s *Stack) []string {
	var out []string
	for _, p := range s.Parameters {
		out = append(out, p.Name)
	}
	return out
}

func credNames(s *Stack) []string {
	var out []string
	for _, c := range s.Credentials {
		out = append(out, c.Name)
	}
	return out
}

func requirementNames(s *Stack) []string {
	var out []string
	if s.Dependencies != nil {
		for _, r := range s.Dependencies.Requires {
			out = append(out, r.Name)
		}
	}
	return out
}

func hasRequirement(s *Stack, name string) bool {
	return slices.Contains(requirementNames(s), name)
}

// compiled is a requirement with its templates parsed.
type compiled struct {
	req    Requirement
	index  int
	params map[string]*template // nil entry: a literal in req.Parameters
	creds  map[string]*template
	outs   map[string]*template
	group  *template
	// wires: the sibling dependencies whose outputs its parameters or
	// credentials read (they must run first).
	wires []string
	// used: outputs of this dependency the declaring stack reads, by the
	// name it reads them under (the inferred interface).
	used []string
}

// compileStack parses and checks every template of a stack's dependencies
// section. Errors name the field path.
func compileStack(st *Stack) ([]*compiled, error) {
	if st.Dependencies == nil {
		return nil, nil
	}
	reqs := st.Dependencies.Requires
	out := make([]*compiled, len(reqs))
	used := map[string]map[string]bool{}
	use := func(dep, out string) {
		if used[dep] == nil {
			used[dep] = map[string]bool{}
		}
		used[dep][out] = true
	}
	promoted := map[string]string{}
	for i, r := range reqs {
		p := fmt.Sprintf("dependencies.requires[%d]", i)
		c := &compiled{req: r, index: i, params: map[string]*template{}, creds: map[string]*template{}, outs: map[string]*template{}}
		wires := map[string]bool{}
		for _, k := range sortedKeys(r.Parameters) {
			s, ok := r.Parameters[k].(string)
			if !ok {
				c.params[k] = nil
				continue
			}
			t, err := parseTemplate(s, useParameter, st, r.Name)
			if err != nil {
				return nil, fmt.Errorf("%s.parameters.%s: %w", p, k, err)
			}
			c.params[k] = t
		}
		for _, k := range sortedKeys(r.Credentials) {
			t, err := parseTemplate(r.Credentials[k], useCredential, st, r.Name)
			if err != nil {
				return nil, fmt.Errorf("%s.credentials.%s: %w", p, k, err)
			}
			c.creds[k] = t
		}
		for _, k := range sortedKeys(r.Outputs) {
			t, err := parseTemplate(r.Outputs[k], useOutput, st, r.Name)
			if err != nil {
				return nil, fmt.Errorf("%s.outputs.%s: %w", p, k, err)
			}
			if prev, dup := promoted[k]; dup {
				return nil, fmt.Errorf("%s.outputs.%s: output %q is already set by %s", p, k, k, prev)
			}
			if o := st.output(k); o != nil {
				// Stack outputs have their own value template; an output
				// is set in one place.
				return nil, fmt.Errorf("%s.outputs.%s: the stack's outputs already declare %q", p, k, k)
			}
			promoted[k] = p + ".outputs"
			c.outs[k] = t
			for _, rf := range t.refs {
				if rf.kind == refOwnOutput {
					use(r.Name, rf.name)
				}
			}
		}
		if s := r.Sharing; s != nil && s.Group != nil && s.Group.Name != "" {
			t, err := parseTemplate(s.Group.Name, useGroup, st, r.Name)
			if err != nil {
				return nil, fmt.Errorf("%s.sharing.group.name: %w", p, err)
			}
			c.group = t
		}
		for _, ts := range []map[string]*template{c.params, c.creds, c.outs} {
			for _, t := range ts {
				if t == nil {
					continue
				}
				for _, rf := range t.refs {
					if rf.kind == refDepOutput {
						use(rf.dep, rf.name)
					}
				}
			}
		}
		for _, ts := range []map[string]*template{c.params, c.creds} {
			for _, t := range ts {
				if t == nil {
					continue
				}
				for _, rf := range t.refs {
					if rf.kind == refDepOutput {
						wires[rf.dep] = true
					}
				}
			}
		}
		c.wires = sortedKeys(wires)
		out[i] = c
	}
	for _, c := range out {
		c.used = sortedKeys(used[c.req.Name])
	}
	return out, nil
}

// Validate checks a stack's dependencies section against the stack: every
// template parses and names a known parameter, credential or dependency,
// and the dependencies' wiring has no cycle.
func (s *Stack) Validate() error {
	if s.Dependencies == nil {
		return nil
	}
	if err := s.Dependencies.Validate(); err != nil {
		return err
	}
	cs, err := compileStack(s)
	if err != nil {
		return err
	}
	_, err = wiringOrder(cs)
	return err
}

// wiringOrder orders a stack's requirements so each comes after the
// siblings whose outputs it reads (by name among the ready ones, so the
// order is deterministic), or reports a cycle with its path.
func wiringOrder(cs []*compiled) ([]*compiled, error) {
	byName := map[string]*compiled{}
	for _, c := range cs {
		byName[c.req.Name] = c
	}
	const (
		unseen = iota
		active
		done
	)
	state := map[string]int{}
	var order []*compiled
	var stack []string
	var visit func(name string) error
	visit = func(name string) error {
		switch state[name] {
		case done:
			return nil
		case active:
			i := slices.Index(stack, name)
			cycle := append(slices.Clone(stack[i:]), name)
			return fmt.Errorf("dependency cycle: %s (each reads the outputs of the next)", strings.Join(cycle, " -> "))
		}
		state[name] = active
		stack = append(stack, name)
		for _, w := range byName[name].wires {
			if err := visit(w); err != nil {
				return err
			}
		}
		stack = stack[:len(stack)-1]
		state[name] = done
		order = append(order, byName[name])
		return nil
	}
	names := sortedKeys(byName)
	for _, n := range names {
		if err := visit(n); err != nil {
			return nil, err
		}
	}
	return order, nil
}
