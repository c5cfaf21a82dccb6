package deps

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
)

// Plan is the execution plan of one install: every installation the
// root needs, reused or new, in an order that cannot fail mid-run for want
// of an input. It is what `cairn plan -o json|yaml` prints; credential
// values never appear in it, only references to credential instances.
type Plan struct {
	// Root is the key of the root installation's node: namespace/name, or
	// name alone for a cluster-scoped one (Key).
	Root   string `json:"root"`
	RootID string `json:"rootID"`
	// RootIDPending: the root does not exist yet, so RootID is a stand-in,
	// and something read ${installation.root.id}: the sharing groups and
	// names computed from it are not those an install will compute with
	// the root's id, assigned when it creates the root.
	RootIDPending bool `json:"rootIDPending,omitempty"`
	// Namespace is the root's; "" when it is cluster-scoped.
	Namespace string `json:"namespace"`
	// Nodes in execution order: level by level, by key within a level.
	Nodes []*Node `json:"nodes"`
	// Levels groups node keys: each level's nodes only need earlier levels,
	// so they may run in parallel.
	Levels [][]string `json:"levels"`
	Edges  []Edge     `json:"edges"`
	// Unmapped lists the required inputs no mapping or answer sets,
	// aggregated over the whole graph; the user must give them.
	Unmapped []Unmapped `json:"unmapped,omitempty"`
	// Notes: mappings the resolved stack has no input for (ignored, as the
	// seed says), and similar things worth knowing.
	Notes []string `json:"notes,omitempty"`

	byKey map[string]*Node
	req   *Request
	// global is the resolver's global namespace.
	global string
}

// home is the namespace node n's dependencies resolve from and its new
// namespaced dependencies go to: its own, or the global namespace for a
// cluster-scoped node (which has none). ${installation.namespace} is it.
func (p *Plan) home(n *Node) string {
	if n.Namespace == "" {
		if p.global == "" {
			return DefaultGlobalNamespace
		}
		return p.global
	}
	return n.Namespace
}

// Action is what execution does with a node.
type Action string

const (
	// ActionInstall creates (or, on a resumed run, completes) an installation.
	ActionInstall Action = "install"
	// ActionReuse uses an existing installation as it is.
	ActionReuse Action = "reuse"
)

// Node is one installation of the plan.
type Node struct {
	// Key is namespace/name, or name alone for a cluster-scoped
	// installation (Namespace "").
	Key       string    `json:"key"`
	Action    Action    `json:"action"`
	Namespace string    `json:"namespace"`
	Name      string    `json:"name"`
	Stack     Reference `json:"stack"`
	// InstallationID is the reused installation's id.
	InstallationID string              `json:"installationID,omitempty"`
	Sharing        InstallationSharing `json:"sharing"`
	// Paths are the dependency paths that resolve to this node: "" is the
	// root, "web.db" the dependency db of the dependency web.
	Paths []string `json:"paths"`
	// Reason says why this installation or stack was chosen.
	Reason string `json:"reason"`
	// Candidates: every one considered, chosen or not, and why.
	Candidates []Candidate `json:"candidates,omitempty"`
	// Parameters and Credentials say how each input of a new installation
	// is set: a value known now, a template rendered during execution, or a
	// reference to a credential instance.
	Parameters  map[string]Value `json:"parameters,omitempty"`
	Credentials map[string]Value `json:"credentials,omitempty"`
	// Outputs set on this installation from its dependencies' outputs.
	Outputs map[string]Value `json:"outputs,omitempty"`
	// After lists the nodes that must complete first.
	After []string `json:"after,omitempty"`
	// Change is what executing the plan will do with the node against the
	// installations as they are (Executor.Preview; empty until then), and
	// ChangeReason why. Children lists, for an update, the changes to the
	// installation's own children (its rendered resources) when the
	// Installer can tell (Previewer).
	Change       Change   `json:"change,omitempty"`
	ChangeReason string   `json:"changeReason,omitempty"`
	Children     []string `json:"children,omitempty"`

	stack    *Stack
	bindings []*binding // this node as a dependency, first one gives its inputs
	children []*binding // this node's own dependencies
	parents  []string
}

// Value is how one input is set.
type Value struct {
	// Value is known at plan time (a literal, a user's answer, or a
	// template over known values).
	Value any `json:"value,omitempty"`
	// Template is rendered during execution, from the outputs of Needs.
	Template string `json:"template,omitempty"`
	// Credential references the credential instance handed on.
	Credential string `json:"credential,omitempty"`
	// Source: "parameter", "answer", "mapping", "dependency output".
	Source string   `json:"source"`
	Needs  []string `json:"needs,omitempty"`

	known bool
	t     *template
	// self is the dependency binding the template is evaluated for: its
	// parent declared it.
	self *binding
	// hidden is a literal credential's value, kept out of JSON and text.
	hidden any
}

// Candidate is one option the resolver weighed for a dependency.
type Candidate struct {
	// Kind: "override" (--dependency), "policy" (inject), "installation"
	// (existing), "catalog" (highest in range), "reference" (default).
	Kind         string `json:"kind"`
	Installation string `json:"installation,omitempty"`
	Stack        string `json:"stack,omitempty"`
	Chosen       bool   `json:"chosen"`
	Reason       string `json:"reason"`
}

// Edge orders two nodes: From completes before To starts.
type Edge struct {
	From string `json:"from"`
	To   string `json:"to"`
	// Kind is "requires" (To depends on From) or "wiring" (an input of To
	// reads an output of From).
	Kind string `json:"kind"`
	// Via names the inputs a wiring edge feeds.
	Via []string `json:"via,omitempty"`
}

// Unmapped is one required input nothing sets.
type Unmapped struct {
	Node        string `json:"node"`
	Path        string `json:"path"`
	Kind        string `json:"kind"` // parameter | credential
	Name        string `json:"name"`
	Type        string `json:"type,omitempty"`
	Description string `json:"description,omitempty"`
}

func (u Unmapped) String() string {
	where := u.Path
	if where == "" {
		where = "(root)"
	}
	s := fmt.Sprintf("%s %s %s of %s", where, u.Kind, u.Name, u.Node)
	if u.Type != "" {
		s += " (" + u.Type + ")"
	}
	return s
}

// ErrUnmapped is wrapped by Ready when inputs are missing.
var ErrUnmapped = errors.New("unmapped inputs")

// Ready reports whether the plan can run: an error listing every unmapped
// input (wrapping ErrUnmapped) if not.
func (p *Plan) Ready() error {
	if len(p.Unmapped) == 0 {
		return nil
	}
	lines := make([]string, len(p.Unmapped))
	for i, u := range p.Unmapped {
		lines[i] = u.String()
	}
	return fmt.Errorf("%w (required, and set by no mapping or answer):\n  %s", ErrUnmapped, strings.Join(lines, "\n  "))
}

// Node returns a node by key.
func (p *Plan) Node(key string) *Node { return p.byKey[key] }

// WriteText writes the plan for people: order, each node with its reason
// and candidates, wiring, unmapped inputs.
func (p *Plan) WriteText(w io.Writer) error {
	var b strings.Builder
	if p.RootIDPending {
		fmt.Fprintf(&b, "Plan for %s (root id not assigned yet)\n", p.Root)
	} else {
		fmt.Fprintf(&b, "Plan for %s (root id %s)\n", p.Root, p.RootID)
	}
	for i, level := range p.Levels {
		fmt.Fprintf(&b, "\nLevel %d", i+1)
		if len(level) > 1 {
			fmt.Fprintf(&b, " (%d in parallel)", len(level))
		}
		b.WriteString(":\n")
		for _, k := range level {
			n := p.byKey[k]
			paths := make([]string, len(n.Paths))
			for j, s := range n.Paths {
				if s == "" {
					s = "(root)"
				}
				paths[j] = s
			}
			what := string(n.Action)
			if n.Change != "" {
				what = string(n.Change)
			}
			fmt.Fprintf(&b, "  %-7s %s  %s  [%s]\n", what, n.Key, n.Stack, strings.Join(paths, ", "))
			fmt.Fprintf(&b, "          why: %s\n", n.Reason)
			if n.ChangeReason != "" {
				fmt.Fprintf(&b, "          %s: %s\n", n.Change, n.ChangeReason)
			}
			for _, c := range n.Children {
				fmt.Fprintf(&b, "          child: %s\n", c)
			}
			if n.Action == ActionInstall {
				fmt.Fprintf(&b, "          sharing: mode %s", modeOrDefault(n.Sharing.Mode))
				if n.Sharing.Mode != SharingNone {
					fmt.Fprintf(&b, ", group %q", n.Sharing.Group)
				}
				b.WriteString("\n")
			}
			for _, c := range n.Candidates {
				mark := "-"
				if c.Chosen {
					mark = "+"
				}
				what := c.Installation
				if what == "" {
					what = c.Stack
				} else if c.Stack != "" {
					what += " (" + c.Stack + ")"
				}
				if what != "" {
					what = " " + what
				}
				fmt.Fprintf(&b, "          %s %s%s: %s\n", mark, c.Kind, what, c.Reason)
			}
			writeValues(&b, "parameter", n.Parameters)
			writeValues(&b, "credential", n.Credentials)
			writeValues(&b, "output", n.Outputs)
		}
	}
	var wires []string
	for _, e := range p.Edges {
		if e.Kind == "wiring" {
			wires = append(wires, fmt.Sprintf("  %s -> %s: %s", e.From, e.To, strings.Join(e.Via, ", ")))
		}
	}
	if len(wires) > 0 {
		b.WriteString("\nWiring:\n" + strings.Join(wires, "\n") + "\n")
	}
	if len(p.Notes) > 0 {
		b.WriteString("\nNotes:\n")
		for _, n := range p.Notes {
			b.WriteString("  " + n + "\n")
		}
	}
	if len(p.Unmapped) > 0 {
		b.WriteString("\nUnmapped inputs (give them before installing):\n")
		for _, u := range p.Unmapped {
			b.WriteString("  " + u.String() + "\n")
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func modeOrDefault(m SharingMode) SharingMode {
	if m == "" {
		return SharingGroupMode
	}
	return m
}

func writeValues(b *strings.Builder, kind string, vs map[string]Value) {
	for _, k := range sortedKeys(vs) {
		v := vs[k]
		switch {
		case v.Credential != "":
			fmt.Fprintf(b, "          %s %s <- credential instance %s\n", kind, k, v.Credential)
		case v.Template != "":
			fmt.Fprintf(b, "          %s %s <- %s (at run time)\n", kind, k, v.Template)
		case kind == "credential":
			fmt.Fprintf(b, "          %s %s <- literal (%s)\n", kind, k, v.Source)
		default:
			fmt.Fprintf(b, "          %s %s = %s (%s)\n", kind, k, short(v.Value), v.Source)
		}
	}
}

func short(v any) string {
	s := fmt.Sprintf("%v", v)
	if str, ok := v.(string); ok {
		s = fmt.Sprintf("%q", str)
	}
	if len(s) > 60 {
		s = s[:57] + "..."
	}
	return s
}

// order computes the levels (Kahn's algorithm, by key within a level) and
// the node order, or reports a cycle with its path.
func (p *Plan) order() error {
	indeg := map[string]int{}
	next := map[string][]string{}
	for k := range p.byKey {
		indeg[k] = 0
	}
	for _, e := range p.Edges {
		indeg[e.To]++
		next[e.From] = append(next[e.From], e.To)
	}
	var level []string
	for k, d := range indeg {
		if d == 0 {
			level = append(level, k)
		}
	}
	var order []*Node
	p.Levels = nil
	for len(level) > 0 {
		slices.Sort(level)
		p.Levels = append(p.Levels, level)
		var nl []string
		for _, k := range level {
			order = append(order, p.byKey[k])
			for _, t := range next[k] {
				indeg[t]--
				if indeg[t] == 0 {
					nl = append(nl, t)
				}
			}
		}
		level = nl
	}
	if len(order) != len(p.byKey) {
		return p.cycle(indeg)
	}
	p.Nodes = order
	return nil
}

// cycle finds one cycle among the nodes Kahn's algorithm could not order
// and names it as a path, each node needing the next.
func (p *Plan) cycle(indeg map[string]int) error {
	left := map[string][]Edge{}
	for _, e := range p.Edges {
		if indeg[e.From] > 0 && indeg[e.To] > 0 {
			left[e.To] = append(left[e.To], e) // To needs From
		}
	}
	var start string
	for _, k := range sortedKeys(indeg) {
		if indeg[k] > 0 {
			start = k
			break
		}
	}
	seen := map[string]int{}
	var path []string
	cur := start
	for {
		if i, ok := seen[cur]; ok {
			cyc := append(path[i:], cur)
			return &CycleError{Path: cyc}
		}
		seen[cur] = len(path)
		path = append(path, cur)
		es := left[cur]
		if len(es) == 0 {
			return &CycleError{Path: path}
		}
		slices.SortFunc(es, func(a, b Edge) int { return strings.Compare(a.From, b.From) })
		cur = es[0].From
	}
}

// CycleError is a dependency cycle: each node of Path needs the next.
type CycleError struct{ Path []string }

func (e *CycleError) Error() string {
	return "dependency cycle: " + strings.Join(e.Path, " -> ") + " (each needs the next first)"
}
