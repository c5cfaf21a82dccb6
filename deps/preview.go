package deps

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
)

// Change is what executing a plan does with one node.
type Change string

const (
	// ChangeInstall creates the installation.
	ChangeInstall Change = "install"
	// ChangeUpdate writes an existing installation with new inputs.
	ChangeUpdate Change = "update"
	// ChangeSkip leaves an installation installed with the same inputs.
	ChangeSkip Change = "skip"
	// ChangeReuse uses an existing installation as it is.
	ChangeReuse Change = "reuse"
	// ChangeFail: the run will stop at this node (its name is taken).
	ChangeFail Change = "fail"
)

// Previewer is implemented by an Installer that can tell what updating an
// installation with req would change of its own children (its rendered
// resources), without writing: one line per change.
type Previewer interface {
	PreviewInstall(ctx context.Context, req InstallRequest) ([]string, error)
}

// Preview sets each node's Change, ChangeReason and (through a Previewer)
// Children to what Run would do against the installations as they are
// now, reading them through the Installer and writing nothing. It follows
// Run's own decisions: a node installed already with the inputs it would
// get is skipped, one with other inputs updated, a missing one installed.
// A node whose inputs read the outputs of a node this run installs or
// updates first is compared with that node's current outputs, and the
// reason says so: Run compares the outputs that node then has.
func (e *Executor) Preview(ctx context.Context, p *Plan) error {
	if p.req == nil {
		return errors.New("preview: the plan was not made by Resolver.Plan in this process (a decoded plan is for reading)")
	}
	r := &run{e: e, plan: p, outs: map[string]map[string]any{}, params: map[string]map[string]any{}, defaulted: map[string]map[string]any{},
		creds: map[string]map[string]CredentialInput{}, res: &Result{}}
	changing := map[string]bool{}
	for _, n := range p.Nodes {
		n.Change, n.ChangeReason, n.Children = "", "", nil
		got, err := e.Installer.Get(ctx, n.Namespace, n.Name)
		if err != nil {
			return fmt.Errorf("preview %s: %w", n.Key, err)
		}
		if got != nil {
			r.outs[n.Key] = got.Outputs
		}
		if n.Action == ActionReuse {
			n.Change = ChangeReuse
			if got == nil {
				n.Change, n.ChangeReason = ChangeFail, "the installation to reuse no longer exists; plan again"
			}
			continue
		}
		if got == nil {
			n.Change = ChangeInstall
			changing[n.Key] = true
			continue
		}
		var first []string
		for _, a := range n.After {
			if changing[a] {
				first = append(first, a)
			}
		}
		unless := ""
		if len(first) > 0 {
			unless = fmt.Sprintf(" (compared with the current outputs of %s, which this install changes first)", strings.Join(first, ", "))
		}
		shared := n.Sharing.Mode != SharingNone && n.Paths[0] != ""
		req, rerr := r.request(n)
		switch {
		case shared && got.RootID != p.RootID && !got.Sharing.Shareable():
			n.Change, n.ChangeReason = ChangeFail, exclusiveNow(n).Error()
			continue
		case rerr == nil && got.Ready && got.Digest == req.Digest:
			n.Change, n.ChangeReason = ChangeSkip, "installed already with the same inputs"+unless
			continue
		case shared && got.RootID != p.RootID:
			n.Change, n.ChangeReason = ChangeReuse, "created by another install of the sharing group"
			if got.Stack.Name != "" {
				if err := sameStack(got, n); err != nil {
					n.Change, n.ChangeReason = ChangeFail, err.Error()
				}
			}
			continue
		case got.RootID != p.RootID:
			n.Change, n.ChangeReason = ChangeFail, fmt.Sprintf("installation %s exists and belongs to another install (root %s)", n.Key, got.RootID)
			continue
		}
		n.Change = ChangeUpdate
		changing[n.Key] = true
		switch {
		case rerr != nil:
			n.ChangeReason = fmt.Sprintf("its inputs read the outputs of %s, which this install changes first: they are known then (%v)", strings.Join(first, ", "), rerr)
			continue
		case got.Digest == req.Digest:
			n.ChangeReason = "installed with the same inputs but not ready: written again"
		default:
			n.ChangeReason = "inputs changed: " + changedInputs(got, req, n.Paths[0] == "") + unless
		}
		if pv, ok := e.Installer.(Previewer); ok {
			children, err := pv.PreviewInstall(ctx, req)
			if err != nil {
				n.Children = []string{"cannot tell: " + err.Error()}
			} else {
				n.Children = children
			}
		}
	}
	return nil
}

// changedInputs names what differs between an installation and the
// request that would update it: parameters by name (values may be long),
// the stack version, the sharing; otherwise the rest the digest covers.
// A root's sharing is not compared: the plan gives a root the default,
// and installing one that another install made its dependency keeps
// that install's.
func changedInputs(got *Installed, req InstallRequest, root bool) string {
	var out []string
	if got.Stack.Name != "" && got.Stack != req.Stack {
		out = append(out, fmt.Sprintf("stack %s -> %s", got.Stack, req.Stack))
	}
	if got.Parameters != nil {
		keys := slices.Sorted(maps.Keys(req.Parameters))
		for k := range got.Parameters {
			if _, ok := req.Parameters[k]; !ok {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		for _, k := range slices.Compact(keys) {
			if !reflect.DeepEqual(normalize(got.Parameters[k]), normalize(req.Parameters[k])) {
				out = append(out, "parameters."+k)
			}
		}
	}
	if !root && got.Sharing.Mode != "" && (modeOrDefault(got.Sharing.Mode) != modeOrDefault(req.Sharing.Mode) || got.Sharing.Group != req.Sharing.Group) {
		out = append(out, "sharing")
	}
	if len(out) == 0 {
		return "the installations it uses, its credentials or the outputs set on it"
	}
	return strings.Join(out, ", ")
}

// normalize gives a value the shape JSON decoding gives it (numbers as
// float64), so a stored spec compares with rendered parameters.
func normalize(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		return v
	}
	var out any
	if json.Unmarshal(b, &out) != nil {
		return v
	}
	return out
}
