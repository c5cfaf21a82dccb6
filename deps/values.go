package deps

import (
	"fmt"
	"slices"

	"github.com/cairn-dev/cairn/expr"
	"github.com/cairn-dev/cairn/stack"
)

// deferredParam stands for a parameter rendered at run time while the
// schema's defaults are applied to the known ones: present, so it gets
// no default.
type deferredParam struct{}

// parameters are node n's parameters as its dependencies' mappings read
// them: completed with its stack's schema defaults (top level and nested
// in known objects), as the hub completes the spec on create. A value
// rendered at run time is completed then (run.parameters).
func (res *resolution) parameters(n *Node) map[string]Value {
	if out, ok := res.defaulted[n]; ok {
		return out
	}
	out := n.Parameters
	if n.stack != nil && len(n.stack.ParametersSchema) > 0 {
		known := map[string]any{}
		for k, v := range n.Parameters {
			if v.known {
				known[k] = v.Value
			} else {
				known[k] = deferredParam{}
			}
		}
		if full, err := stack.ApplyDefaults(n.stack.ParametersSchema, known); err == nil {
			out = make(map[string]Value, len(full))
			for k, x := range full {
				v, given := n.Parameters[k]
				switch {
				case !given:
					out[k] = Value{Value: x, Source: "default", known: true}
				case v.known:
					v.Value = x
					out[k] = v
				default:
					out[k] = v
				}
			}
		}
	}
	res.defaulted[n] = out
	return out
}

// inputs computes how each input of a new installation of s is set by
// the dependency's mappings and the user's answers, mapping names through
// the interface's $ids.
func (res *resolution) inputs(b *binding, s *Stack, siblings map[string]*binding) (map[string]Value, map[string]Value, error) {
	params, creds := map[string]Value{}, map[string]Value{}
	for _, k := range sortedKeys(b.c.req.Parameters) {
		target, ok := inputName(k, b.iface.params, func(n string) bool { return s.parameter(n) != nil }, func(id string) string {
			for _, p := range s.Parameters {
				if p.ID == id {
					return p.Name
				}
			}
			return ""
		})
		if !ok {
			res.plan.Notes = append(res.plan.Notes, fmt.Sprintf("%s: parameter mapping %s ignored: stack %s has no such parameter", b.path, k, s.Ref()))
			continue
		}
		if t := b.c.params[k]; t != nil {
			v, err := res.planValue(t, b.parent, siblings, b)
			if err != nil {
				return nil, nil, fmt.Errorf("parameters.%s: %w", k, err)
			}
			if v.known && v.Value == nil && len(t.refs) == 1 && t.refs[0].kind == refParam && isWholeRef(t.src) {
				continue // the parent's parameter is not set: leave the default
			}
			params[target] = v
		} else {
			params[target] = Value{Value: b.c.req.Parameters[k], Source: "mapping", known: true}
		}
	}
	for _, k := range sortedKeys(b.c.req.Credentials) {
		target, ok := inputName(k, b.iface.creds, func(n string) bool { return s.credential(n) != nil }, func(id string) string {
			for _, c := range s.Credentials {
				if c.ID == id {
					return c.Name
				}
			}
			return ""
		})
		if !ok {
			res.plan.Notes = append(res.plan.Notes, fmt.Sprintf("%s: credential mapping %s ignored: stack %s has no such credential", b.path, k, s.Ref()))
			continue
		}
		v, err := res.planValue(b.c.creds[k], b.parent, siblings, b)
		if err != nil {
			return nil, nil, fmt.Errorf("credentials.%s: %w", k, err)
		}
		if v.Credential == "" && v.known && len(b.c.creds[k].refs) == 1 && b.c.creds[k].refs[0].kind == refCred {
			continue // the parent's credential is not given: unmapped there
		}
		if v.known && v.Credential == "" {
			// A literal credential: handed on, never shown.
			v.hidden, v.Value, v.Source = v.Value, nil, "literal (hidden)"
		}
		creds[target] = v
	}
	if in, ok := res.req.Inputs[b.path]; ok {
		res.usedInputs[b.path] = true
		for _, k := range sortedKeys(in.Parameters) {
			if s.parameter(k) == nil {
				return nil, nil, fmt.Errorf("answer %s.%s: stack %s has no parameter %q", b.path, k, s.Ref(), k)
			}
			params[k] = Value{Value: in.Parameters[k], Source: "answer", known: true}
		}
		for _, k := range sortedKeys(in.Credentials) {
			if s.credential(k) == nil {
				return nil, nil, fmt.Errorf("answer %s.%s: stack %s has no credential %q", b.path, k, s.Ref(), k)
			}
			creds[k] = Value{Credential: in.Credentials[k], Source: "answer", known: true}
		}
	}
	return params, creds, nil
}

// inputName maps a mapping's key to the resolved stack's input: the same
// name, else the input with the $id the interface gives that name.
func inputName(key string, items []InterfaceItem, has func(string) bool, byID func(string) string) (string, bool) {
	if has(key) {
		return key, true
	}
	for _, it := range items {
		if it.Name == key && it.ID != "" {
			if n := byID(it.ID); n != "" {
				return n, true
			}
		}
	}
	return "", false
}

// planValue evaluates a template now if everything it reads is known,
// else keeps it for execution with the nodes it needs.
func (res *resolution) planValue(t *template, parent *Node, siblings map[string]*binding, self *binding) (Value, error) {
	var needs []string
	deferred := false
	var credRef string
	lookup := func(r ref) (any, bool, error) {
		switch r.kind {
		case refParam:
			v, ok := res.parameters(parent)[r.name]
			if !ok {
				return nil, true, nil // unset: an unmapped input of the parent, null here
			}
			if !v.known {
				deferred = true
				needs = append(needs, v.Needs...)
				return nil, false, nil
			}
			x, ok := expr.Walk(v.Value, r.steps)
			if !ok {
				return nil, false, fmt.Errorf("${%s}: no such field in the value", r.path)
			}
			return x, true, nil
		case refCred:
			if v, ok := parent.Credentials[r.name]; ok {
				credRef = v.Credential
			}
			return nil, true, nil
		case refDepOutput:
			sb := siblings[r.dep]
			if sb == nil {
				return nil, false, fmt.Errorf("${%s}: dependency %s is not resolved before this one", r.path, r.dep)
			}
			if _, ok := sb.outputMap[r.name]; !ok {
				return nil, false, &DanglingError{Path: sb.path, Stack: sb.child.Stack.String(), Missing: "no output " + r.name, Ref: r.path}
			}
			deferred = true
			needs = append(needs, sb.child.Key)
			return nil, false, nil
		case refOwnOutput:
			if _, ok := self.outputMap[r.name]; !ok {
				return nil, false, &DanglingError{Path: self.path, Stack: self.child.Stack.String(), Missing: "no output " + r.name, Ref: r.path}
			}
			deferred = true
			needs = append(needs, self.child.Key)
			return nil, false, nil
		case refBundle:
			if r.name == "name" {
				return parent.Stack.Name, true, nil
			}
			return parent.Stack.Version, true, nil
		case refInstallation:
			switch r.name {
			case "name":
				return parent.Name, true, nil
			case "namespace":
				return res.home(parent), true, nil
			default:
				res.readRootID = true
				return res.req.RootID, true, nil
			}
		}
		return nil, false, fmt.Errorf("${%s}: unknown variable", r.path)
	}
	vals := map[string]any{}
	for _, r := range t.refs {
		x, ok, err := lookup(r)
		if err != nil {
			return Value{}, err
		}
		if ok {
			vals[r.path] = x
		}
	}
	if credRef != "" || (len(t.refs) == 1 && t.refs[0].kind == refCred) {
		return Value{Credential: credRef, Source: "credential", known: true}, nil
	}
	if deferred {
		slices.Sort(needs)
		return Value{Template: t.src, Source: "dependency output", Needs: slices.Compact(needs), t: t, self: self}, nil
	}
	v, err := t.t.Eval(func(p string) (any, bool) { x, ok := vals[p]; return x, ok })
	if err != nil {
		return Value{}, err
	}
	return Value{Value: v, Source: "mapping", known: true, t: t}, nil
}
