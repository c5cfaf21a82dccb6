package deps

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// ifaceReq is what an implementation of a dependency must have.
type ifaceReq struct {
	id       string
	outputs  []InterfaceItem // name -> $id or name; by $id when one is given
	params   []InterfaceItem
	creds    []InterfaceItem
	declared bool // an interface was written (not only inferred)
}

func (res *resolution) interfaceOf(ctx context.Context, c *compiled) (ifaceReq, error) {
	var ir ifaceReq
	i := c.req.Bundle.Interface
	if i != nil {
		ir.declared = true
		ir.id = i.ID
		ir.params, ir.creds, ir.outputs = i.items()
		if i.Reference != "" {
			ref, _ := ParseReference(i.Reference)
			s, err := res.stack(ctx, ref, nil)
			if err != nil {
				return ir, fmt.Errorf("bundle.interface.reference: %w", err)
			}
			for _, o := range s.AllOutputs() {
				ir.outputs = append(ir.outputs, InterfaceItem{Name: o.Name, ID: o.ID})
			}
			for _, p := range s.Parameters {
				ir.params = append(ir.params, InterfaceItem{Name: p.Name, Type: p.Type, ID: p.ID})
			}
			for _, cr := range s.Credentials {
				ir.creds = append(ir.creds, InterfaceItem{Name: cr.Name, Type: cr.Type, ID: cr.ID})
			}
			if ir.id == "" {
				ir.id = s.Provides()
			}
		}
	}
	// The outputs the declaring stack reads are part of the interface.
	for _, u := range c.used {
		if !slices.ContainsFunc(ir.outputs, func(it InterfaceItem) bool { return it.Name == u }) {
			ir.outputs = append(ir.outputs, InterfaceItem{Name: u})
		}
	}
	return ir, nil
}

func (ir ifaceReq) describe() string {
	var parts []string
	if ir.id != "" {
		parts = append(parts, "id "+ir.id)
	}
	for _, o := range ir.outputs {
		if o.ID != "" {
			parts = append(parts, "output $id "+o.ID)
		} else {
			parts = append(parts, "output "+o.Name)
		}
	}
	return strings.Join(parts, ", ")
}

// matchOutputs maps the interface's outputs onto outs, or says what is
// missing.
func (ir ifaceReq) matchOutputs(outs []Output) (map[string]string, string) {
	m := map[string]string{}
	var missing []string
	for _, it := range ir.outputs {
		i := slices.IndexFunc(outs, func(o Output) bool {
			if it.ID != "" {
				return o.ID == it.ID
			}
			return o.Name == it.Name
		})
		switch {
		case i < 0 && it.ID != "":
			missing = append(missing, "no output with $id "+it.ID)
		case i < 0:
			missing = append(missing, "no output "+it.Name)
		case it.Name != "":
			m[it.Name] = outs[i].Name
		}
	}
	return m, strings.Join(missing, ", ")
}

// checkInstallation: does an installation satisfy the interface (outputs
// and provided id only, as the seed says)?
func (ir ifaceReq) checkInstallation(in *Installation) (map[string]string, string) {
	if ir.id != "" && in.provides() != ir.id {
		return nil, fmt.Sprintf("does not provide interface %s", ir.id)
	}
	return ir.matchOutputs(in.Status.Outputs)
}

// checkStack: does a stack implement the interface (outputs, provided id,
// and the document's parameters and credentials)?
func (ir ifaceReq) checkStack(s *Stack) (map[string]string, string) {
	if ir.id != "" && s.Provides() != ir.id {
		return nil, fmt.Sprintf("does not provide interface %s", ir.id)
	}
	m, missing := ir.matchOutputs(s.AllOutputs())
	var more []string
	if missing != "" {
		more = append(more, missing)
	}
	for _, it := range ir.params {
		i := slices.IndexFunc(s.Parameters, func(p Parameter) bool { return it.ID != "" && p.ID == it.ID || it.ID == "" && p.Name == it.Name })
		switch {
		case i < 0:
			more = append(more, "no parameter "+itemName(it))
		case it.Type != "" && s.Parameters[i].Type != "" && it.Type != s.Parameters[i].Type:
			more = append(more, fmt.Sprintf("parameter %s is of type %s, not %s", s.Parameters[i].Name, s.Parameters[i].Type, it.Type))
		}
	}
	for _, it := range ir.creds {
		i := slices.IndexFunc(s.Credentials, func(c Credential) bool { return it.ID != "" && c.ID == it.ID || it.ID == "" && c.Name == it.Name })
		switch {
		case i < 0:
			more = append(more, "no credential "+itemName(it))
		case it.Type != "" && s.Credentials[i].Type != "" && it.Type != s.Credentials[i].Type:
			more = append(more, fmt.Sprintf("credential %s is of Type %s, not %s", s.Credentials[i].Name, s.Credentials[i].Type, it.Type))
		}
	}
	return m, strings.Join(more, ", ")
}

func itemName(it InterfaceItem) string {
	if it.ID != "" {
		return "with $id " + it.ID
	}
	return it.Name
}

func outputKeys(ir ifaceReq) (ids, names []string) {
	for _, o := range ir.outputs {
		if o.ID != "" {
			ids = append(ids, o.ID)
		} else {
			names = append(names, o.Name)
		}
	}
	return ids, names
}
