package deps

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/Masterminds/semver/v3"

	"github.com/cairn-dev/cairn/expr"
	"github.com/cairn-dev/cairn/stack"
)

// Installer is what the executor acts through: the hub's installations
// (phase 2: controller/), or any other implementation.
type Installer interface {
	// Get returns the installation namespace/name, or nil if there is none.
	Get(ctx context.Context, namespace, name string) (*Installed, error)
	// Install creates the installation (req.Create) or updates it, waits
	// until it is ready and returns it with its outputs. Creating one that
	// already exists (another installer won a race) must fail with an
	// error wrapping ErrExists and change nothing.
	Install(ctx context.Context, req InstallRequest) (*Installed, error)
}

// Waiter is implemented by an Installer that can wait for an installation
// someone else is installing: a shared one another install created (in a
// race, or just before) is used once it is ready, so its outputs are there.
type Waiter interface {
	// Wait returns the installation once it is ready.
	Wait(ctx context.Context, namespace, name string) (*Installed, error)
}

// ready waits for got to be ready when the installer can.
func (r *run) ready(ctx context.Context, n *Node, got *Installed) (*Installed, error) {
	if got.Ready {
		return got, nil
	}
	w, ok := r.e.Installer.(Waiter)
	if !ok {
		return got, nil
	}
	return w.Wait(ctx, n.Namespace, n.Name)
}

// ErrExists is wrapped by Installer.Install when creating an installation
// that exists.
var ErrExists = errors.New("installation exists")

// Installed is an installation as the executor sees it.
type Installed struct {
	ID      string              `json:"id"`
	Stack   Reference           `json:"stack"`
	Sharing InstallationSharing `json:"sharing"`
	// Digest is the InstallRequest.Digest it was last installed with.
	Digest string `json:"digest"`
	// RootID is the root installation of the graph that created it.
	RootID  string         `json:"rootID"`
	Ready   bool           `json:"ready"`
	Outputs map[string]any `json:"outputs,omitempty"`
	// Parameters are its spec as it is, when the Installer knows it: a
	// preview names the parameters an update changes.
	Parameters map[string]any `json:"-"`
}

// InstallRequest is one node to install, its inputs rendered.
type InstallRequest struct {
	Namespace   string                     `json:"namespace"`
	Name        string                     `json:"name"`
	Stack       Reference                  `json:"stack"`
	Sharing     InstallationSharing        `json:"sharing"`
	RootID      string                     `json:"rootID"`
	Parameters  map[string]any             `json:"parameters,omitempty"`
	Credentials map[string]CredentialInput `json:"credentials,omitempty"`
	// Outputs are set on the installation from its dependencies' outputs
	// (dependencies.requires[].outputs).
	Outputs map[string]any `json:"outputs,omitempty"`
	// Uses are the installations (namespace/name) it depends on: its
	// `uses` edges.
	Uses []string `json:"uses,omitempty"`
	// Digest identifies the inputs, so a re-run skips what is installed.
	Digest string `json:"digest"`
	Create bool   `json:"create"`
}

// CredentialInput is a credential handed to an installation: a reference
// to a credential instance, or (when wired from a dependency's output) a
// value, which is never marshalled, printed or logged.
type CredentialInput struct {
	Ref   string `json:"ref,omitempty"`
	Value any    `json:"-"`
}

// String hides the value.
func (c CredentialInput) String() string {
	if c.Ref != "" {
		return "credential instance " + c.Ref
	}
	return "credential value (hidden)"
}

// GoString hides the value from %#v too.
func (c CredentialInput) GoString() string { return c.String() }

// LogValue hides the value from log/slog.
func (c CredentialInput) LogValue() slog.Value { return slog.StringValue(c.String()) }

// Phase of a node's execution, reported through Executor.Progress.
type Phase string

const (
	PhaseStart     Phase = "start"
	PhaseInstalled Phase = "installed"
	// PhaseSkipped: installed already with the same inputs (a resumed run).
	PhaseSkipped Phase = "skipped"
	// PhaseReused: an existing installation, used as it is.
	PhaseReused   Phase = "reused"
	PhaseFailed   Phase = "failed"
	PhaseCanceled Phase = "canceled"
)

// Event reports one node's progress. It carries no input values.
type Event struct {
	Node    string        `json:"node"`
	Action  Action        `json:"action"`
	Phase   Phase         `json:"phase"`
	Message string        `json:"message,omitempty"`
	Elapsed time.Duration `json:"elapsed,omitempty"`
}

// Executor runs a plan.
type Executor struct {
	Installer Installer
	// Parallelism bounds the nodes running at once (default 4).
	Parallelism int
	// Progress, if set, is called for each event, from one goroutine at a
	// time.
	Progress func(Event)
}

// NodeError is the first failure of a run: which node and why.
type NodeError struct {
	Node string
	Path string
	Err  error
}

func (e *NodeError) Error() string {
	where := e.Path
	if where == "" {
		where = "root"
	}
	return fmt.Sprintf("%s (%s): %v; what completed stays installed, and running the install again resumes here", e.Node, where, e.Err)
}

func (e *NodeError) Unwrap() error { return e.Err }

// Result is what a run did.
type Result struct {
	// Outputs of every node, by key.
	Outputs   map[string]map[string]any `json:"-"`
	Installed []string                  `json:"installed,omitempty"`
	Skipped   []string                  `json:"skipped,omitempty"`
	Reused    []string                  `json:"reused,omitempty"`
}

type run struct {
	e    *Executor
	plan *Plan
	mu   sync.Mutex
	outs map[string]map[string]any
	// params: rendered parameters of nodes, for their dependencies'
	// templates.
	params map[string]map[string]any
	// defaulted: params completed with each stack's schema defaults.
	defaulted map[string]map[string]any
	creds     map[string]map[string]CredentialInput
	res       *Result
	events    sync.Mutex
}

// Run executes the plan: nodes whose needs are met run in parallel (up to
// Parallelism), outputs flow to their dependents, the first failure stops
// the run (running nodes are canceled) and is returned as a *NodeError.
// Running the same plan again resumes: installed nodes with the same
// inputs are skipped.
func (e *Executor) Run(ctx context.Context, p *Plan) (*Result, error) {
	if p.req == nil {
		return nil, errors.New("run: the plan was not made by Resolver.Plan in this process (a decoded plan is for reading)")
	}
	if err := p.Ready(); err != nil {
		return nil, err
	}
	par := e.Parallelism
	if par <= 0 {
		par = 4
	}
	r := &run{e: e, plan: p, outs: map[string]map[string]any{}, params: map[string]map[string]any{}, defaulted: map[string]map[string]any{},
		creds: map[string]map[string]CredentialInput{}, res: &Result{}}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	indeg := map[string]int{}
	next := map[string][]string{}
	for _, ed := range p.Edges {
		indeg[ed.To]++
		next[ed.From] = append(next[ed.From], ed.To)
	}
	var ready []string
	for _, n := range p.Nodes {
		if indeg[n.Key] == 0 {
			ready = append(ready, n.Key)
		}
	}
	type done struct {
		key string
		err error
	}
	results := make(chan done)
	running := 0
	var first *NodeError
	started := map[string]bool{}
	for len(ready) > 0 || running > 0 {
		for first == nil && running < par && len(ready) > 0 {
			k := ready[0]
			ready = ready[1:]
			started[k] = true
			running++
			go func() { results <- done{k, r.node(ctx, p.byKey[k])} }()
		}
		if running == 0 {
			break // stopped by a failure, with nothing left running
		}
		d := <-results
		running--
		if d.err != nil {
			if first == nil {
				n := p.byKey[d.key]
				first = &NodeError{Node: d.key, Path: n.Paths[0], Err: d.err}
				cancel()
			}
			continue
		}
		var nl []string
		for _, t := range next[d.key] {
			indeg[t]--
			if indeg[t] == 0 {
				nl = append(nl, t)
			}
		}
		slices.Sort(nl)
		ready = append(ready, nl...)
	}
	r.res.Outputs = r.outs
	if first != nil {
		for _, n := range p.Nodes {
			if !started[n.Key] {
				r.emit(Event{Node: n.Key, Action: n.Action, Phase: PhaseCanceled, Message: "not run: " + first.Node + " failed"})
			}
		}
		return r.res, first
	}
	return r.res, nil
}

func (r *run) emit(ev Event) {
	if r.e.Progress == nil {
		return
	}
	r.events.Lock()
	defer r.events.Unlock()
	r.e.Progress(ev)
}

func (r *run) node(ctx context.Context, n *Node) error {
	start := time.Now()
	r.emit(Event{Node: n.Key, Action: n.Action, Phase: PhaseStart})
	err := r.do(ctx, n)
	if err != nil {
		phase := PhaseFailed
		if ctx.Err() != nil && errors.Is(err, context.Canceled) {
			phase = PhaseCanceled
		}
		r.emit(Event{Node: n.Key, Action: n.Action, Phase: phase, Message: err.Error(), Elapsed: time.Since(start)})
	}
	return err
}

func (r *run) finish(n *Node, inst *Installed, phase Phase, msg string, start time.Time) {
	r.mu.Lock()
	r.outs[n.Key] = inst.Outputs
	switch phase {
	case PhaseInstalled:
		r.res.Installed = append(r.res.Installed, n.Key)
	case PhaseSkipped:
		r.res.Skipped = append(r.res.Skipped, n.Key)
	case PhaseReused:
		r.res.Reused = append(r.res.Reused, n.Key)
	}
	r.mu.Unlock()
	r.emit(Event{Node: n.Key, Action: n.Action, Phase: phase, Message: msg, Elapsed: time.Since(start)})
}

func (r *run) do(ctx context.Context, n *Node) error {
	start := time.Now()
	inst := r.e.Installer
	if n.Action == ActionReuse {
		got, err := inst.Get(ctx, n.Namespace, n.Name)
		if err != nil {
			return err
		}
		if got == nil {
			return fmt.Errorf("the installation to reuse no longer exists; plan again")
		}
		if !got.Sharing.Shareable() {
			return fmt.Errorf("the installation's sharing mode is now none; plan again")
		}
		if got, err = r.ready(ctx, n, got); err != nil {
			return err
		}
		r.finish(n, got, PhaseReused, "existing installation", start)
		return nil
	}
	req, err := r.request(n)
	if err != nil {
		return err
	}
	got, err := inst.Get(ctx, n.Namespace, n.Name)
	if err != nil {
		return err
	}
	shared := n.Sharing.Mode != SharingNone && n.Paths[0] != ""
	if got != nil {
		switch {
		case shared && got.RootID != r.plan.RootID && !got.Sharing.Shareable():
			return exclusiveNow(n)
		case got.Ready && got.Digest == req.Digest:
			r.finish(n, got, PhaseSkipped, "installed already with the same inputs", start)
			return nil
		case shared && got.RootID != r.plan.RootID:
			// Another install created it (first, or in a race): share it.
			// Ready first: the stack and version it carries are in the
			// status its controller writes, absent until it reconciles.
			if got, err = r.ready(ctx, n, got); err != nil {
				return err
			}
			if err := sameStack(got, n); err != nil {
				return err
			}
			r.finish(n, got, PhaseReused, "created by another install of the sharing group", start)
			return nil
		case got.RootID != r.plan.RootID:
			return fmt.Errorf("installation %s exists and belongs to another install (root %s)", n.Key, got.RootID)
		}
	}
	req.Create = got == nil
	done, err := inst.Install(ctx, req)
	if errors.Is(err, ErrExists) && shared {
		// Lost the race to create it: use the winner's.
		if got, err = inst.Get(ctx, n.Namespace, n.Name); err != nil {
			return err
		}
		if got == nil {
			return fmt.Errorf("installation %s: created concurrently, then gone", n.Key)
		}
		if got, err = r.ready(ctx, n, got); err != nil {
			return err
		}
		if err := sameStack(got, n); err != nil {
			return err
		}
		r.finish(n, got, PhaseReused, "created concurrently by another install of the sharing group", start)
		return nil
	}
	if err != nil {
		return err
	}
	r.finish(n, done, PhaseInstalled, "", start)
	return nil
}

// exclusiveNow is the error for a shared node whose name another install's
// installation has, with its sharing mode set to none since (seed 002's
// "break glass"): it satisfies no other installation's dependency, however
// well it matches.
func exclusiveNow(n *Node) error {
	return fmt.Errorf("installation %s exists with sharing mode none, so it satisfies no other installation's dependency: set its sharing mode back to group, delete it, or resolve the dependency yourself with --dependency %s=KIND/NAME or %s=STACK@VERSION", n.Key, n.Paths[0], n.Paths[0])
}

// sameStack checks that an installation someone else created under the
// node's name can stand for it: the same stack, in every range asked.
func sameStack(got *Installed, n *Node) error {
	if got.Stack.Name != n.Stack.Name {
		return fmt.Errorf("installation %s is of stack %s, not %s", n.Key, got.Stack, n.Stack.Name)
	}
	v, err := semver.NewVersion(got.Stack.Version)
	for _, b := range n.bindings {
		if rng := b.c.req.Bundle.Version; rng != "" {
			if c, _ := semver.NewConstraint(rng); err != nil || c == nil || !c.Check(v) {
				return fmt.Errorf("installation %s exists at %s, outside the range %s of dependency %s", n.Key, got.Stack, rng, b.path)
			}
		}
	}
	return nil
}

// uses are the installations a node's stack depends on: its `uses` edges.
func (n *Node) uses() []string {
	var out []string
	for _, b := range n.children {
		out = append(out, b.child.Key)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// request renders a node's inputs from its parent's inputs and its
// dependencies' outputs.
func (r *run) request(n *Node) (InstallRequest, error) {
	params, creds, err := r.inputs(n)
	if err != nil {
		return InstallRequest{}, err
	}
	req := InstallRequest{
		Namespace: n.Namespace, Name: n.Name, Stack: n.Stack, Sharing: n.Sharing, RootID: r.plan.RootID,
		Parameters: params, Credentials: creds, Uses: n.uses(),
	}
	for _, k := range sortedKeys(n.Outputs) {
		v := n.Outputs[k]
		x, err := r.eval(v, v.self)
		if err != nil {
			return InstallRequest{}, fmt.Errorf("outputs.%s: %w", k, err)
		}
		if req.Outputs == nil {
			req.Outputs = map[string]any{}
		}
		req.Outputs[k] = x
	}
	// The digest covers what decides the installation: never credential
	// values (a wired credential counts by its template), and which
	// installations it uses (a dependency given with --dependency on a
	// second run moves its uses edge even when no input changed).
	cr := map[string]string{}
	for k, v := range n.Credentials {
		if v.Credential != "" {
			cr[k] = "instance:" + v.Credential
		} else {
			cr[k] = "template:" + v.Template
		}
	}
	b, err := json.Marshal(map[string]any{"stack": n.Stack, "sharing": n.Sharing, "parameters": params, "credentials": cr, "outputs": req.Outputs, "uses": req.Uses})
	if err != nil {
		return InstallRequest{}, fmt.Errorf("inputs: %w", err)
	}
	sum := sha256.Sum256(b)
	req.Digest = "sha256:" + hex.EncodeToString(sum[:])
	return req, nil
}

// inputs returns a node's rendered parameters and credentials (memoized:
// its dependencies' templates read its parameters too).
func (r *run) inputs(n *Node) (map[string]any, map[string]CredentialInput, error) {
	r.mu.Lock()
	p, ok := r.params[n.Key]
	c := r.creds[n.Key]
	r.mu.Unlock()
	if ok {
		return p, c, nil
	}
	p, c = map[string]any{}, map[string]CredentialInput{}
	if n.Paths[0] == "" {
		for k, v := range r.plan.req.Parameters {
			p[k] = v
		}
		for k, v := range r.plan.req.Credentials {
			c[k] = CredentialInput{Ref: v}
		}
	} else {
		self := n.bindings[0]
		for _, k := range sortedKeys(n.Parameters) {
			x, err := r.eval(n.Parameters[k], self)
			if err != nil {
				return nil, nil, fmt.Errorf("parameters.%s: %w", k, err)
			}
			p[k] = x
		}
		for _, k := range sortedKeys(n.Credentials) {
			v := n.Credentials[k]
			if v.Credential != "" {
				c[k] = CredentialInput{Ref: v.Credential}
				continue
			}
			x, err := r.eval(v, self)
			if err != nil {
				return nil, nil, fmt.Errorf("credentials.%s: %w", k, err)
			}
			c[k] = CredentialInput{Value: x}
		}
	}
	r.mu.Lock()
	r.params[n.Key], r.creds[n.Key] = p, c
	r.mu.Unlock()
	return p, c, nil
}

// parameters are a node's rendered parameters as its dependencies'
// templates read them: with its stack's schema defaults (as the hub
// completes the spec on create, and Resolution.parameters at plan time).
func (r *run) parameters(n *Node) (map[string]any, error) {
	p, _, err := r.inputs(n)
	if err != nil || n.stack == nil || len(n.stack.ParametersSchema) == 0 {
		return p, err
	}
	r.mu.Lock()
	full, ok := r.defaulted[n.Key]
	r.mu.Unlock()
	if ok {
		return full, nil
	}
	full, err = stack.ApplyDefaults(n.stack.ParametersSchema, p)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", n.Key, err)
	}
	r.mu.Lock()
	r.defaulted[n.Key] = full
	r.mu.Unlock()
	return full, nil
}

// eval renders one value in the context of the dependency binding self
// (whose parent declared the template).
func (r *run) eval(v Value, self *binding) (any, error) {
	if v.known {
		if v.hidden != nil {
			return v.hidden, nil
		}
		return v.Value, nil
	}
	parent := self.parent
	pp, err := r.parameters(parent)
	if err != nil {
		return nil, err
	}
	siblings := map[string]*binding{}
	for _, b := range parent.children {
		siblings[b.c.req.Name] = b
	}
	output := func(b *binding, name string, steps []expr.Step) (any, bool) {
		r.mu.Lock()
		outs := r.outs[b.child.Key]
		r.mu.Unlock()
		x, ok := outs[b.outputMap[name]]
		if !ok {
			return nil, false
		}
		return expr.Walk(x, steps)
	}
	vals := map[string]any{}
	for _, rf := range v.t.refs {
		var x any
		ok := true
		switch rf.kind {
		case refParam:
			x, ok = pp[rf.name]
			if ok {
				x, ok = expr.Walk(x, rf.steps)
			}
		case refDepOutput:
			x, ok = output(siblings[rf.dep], rf.name, rf.steps)
		case refOwnOutput:
			x, ok = output(self, rf.name, rf.steps)
		case refBundle:
			x = parent.Stack.Name
			if rf.name == "version" {
				x = parent.Stack.Version
			}
		case refInstallation:
			switch rf.name {
			case "name":
				x = parent.Name
			case "namespace":
				x = r.plan.home(parent)
			default:
				x = r.plan.RootID
			}
		default:
			ok = false
		}
		if !ok {
			// Names the reference, never a value.
			return nil, fmt.Errorf("${%s} has no value", rf.path)
		}
		vals[rf.path] = x
	}
	return v.t.t.Eval(func(p string) (any, bool) { x, ok := vals[p]; return x, ok })
}
