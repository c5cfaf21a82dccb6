// Package install plans and executes the install of a stack with its
// dependencies (seed 002) through the hub: it resolves the dependencies
// against the hub's catalog and installations (package deps), creates the
// root installation first (pending, so its id is the graph's
// ${installation.root.id} on every run), then creates or reuses each
// dependency in plan order, waits until each is ready (the stack
// controller renders them) and finally lets the root render with its
// dependencies' outputs wired into its parameters.
//
// It is a controller: a client of the hub like any façade. The CLI runs it
// in process in local mode; `cairn serve` runs it for the REST install
// endpoint, so a plan is computed and executed where the catalog and the
// installations are, and resuming is running the same install again.
package install

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/Masterminds/semver/v3"

	"github.com/cairn-dev/cairn"
	stackctl "github.com/cairn-dev/cairn/controller/stack"
	"github.com/cairn-dev/cairn/deps"
	"github.com/cairn-dev/cairn/hub"
	pkg "github.com/cairn-dev/cairn/stack"
	"github.com/cairn-dev/cairn/store"
)

// Request is one install (or plan) as a user gives it.
type Request struct {
	Namespace string `json:"namespace"`
	// Name of the root installation; default the stack's name.
	Name string `json:"name"`
	// Stack is NAME or NAME@VERSION in the catalog (default: highest).
	Stack       string            `json:"stack"`
	Parameters  map[string]any    `json:"parameters,omitempty"`
	Credentials map[string]string `json:"credentials,omitempty"`
	// Dependencies are --dependency PATH=[NAMESPACE/]KIND/NAME|STACK@VERSION overrides.
	Dependencies []string `json:"dependencies,omitempty"`
	// Inputs answer required inputs of dependencies that no mapping sets
	// (the plan's unmapped inputs), by dependency path ("flags",
	// "web.db"); credentials by reference NAMESPACE/NAME.
	Inputs map[string]deps.Inputs `json:"inputs,omitempty"`
	// IfParametersDigest, when set, is the hub.ParametersDigest of the
	// root's spec the parameters were read from (Runner): the root is
	// written only while its spec still has it, so a later change of the
	// spec is not overwritten with the older one.
	IfParametersDigest string `json:"-"`
	// Unattended: the stack controller runs the install (Runner) for an
	// installation written without cairn install, as itself, for no user
	// whose rights it could check. It then creates what the installation
	// needs (as creating it grants what it renders) and updates the
	// installation and its exclusive dependencies, but changes the stack
	// version of no shared installation: that is a user's cairn install,
	// with their own rights.
	Unattended bool `json:"-"`
}

// ErrSpecChanged is wrapped by Install when the root installation's spec
// changed while the install ran: the install stops rather than overwrite
// it, and installing again (with the new spec) resumes.
var ErrSpecChanged = errors.New("the installation's spec changed during the install")

// Service plans and installs through a hub.
type Service struct {
	Hub *hub.Hub
	Log *slog.Logger
	// Poll is how often an installation's readiness is read. Default 200 ms.
	Poll time.Duration
	// Timeout bounds the wait for one installation to be ready. Default 2 min.
	Timeout time.Duration
	// Parallelism bounds the nodes installed at once. Default 4.
	Parallelism int
}

func (s *Service) log() *slog.Logger {
	if s.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return s.Log
}

// resolve turns a Request into the engine's request, checking what the
// user gave. rootID "" takes the existing root's id, or a new one.
func (s *Service) resolve(ctx context.Context, r Request) (deps.Request, hub.StackEntry, *cairn.Instance, error) {
	ref, err := deps.ParseReference(r.Stack)
	if err != nil {
		return deps.Request{}, hub.StackEntry{}, nil, cairn.Errorf(cairn.CodeInvalid, "stack %q: %v", r.Stack, err)
	}
	entry, err := s.Hub.GetStack(ctx, ref.Name, ref.Version)
	if err != nil {
		return deps.Request{}, hub.StackEntry{}, nil, err
	}
	ns := r.Namespace
	if ns == "" {
		ns = cairn.DefaultNamespace
	}
	// A cluster-scoped installation has no namespace (-n is ignored): the
	// plan keys it by name and resolves its dependencies as one of the
	// global namespace would, and the namespaced ones it installs go there
	// (docs/dependencies.md).
	if entry.Manifest.Kind.Scope == pkg.Cluster {
		ns = ""
	}
	name := r.Name
	if name == "" {
		name = entry.Name
	}
	// The root's parameters with their schema defaults, so a dependency
	// mapping ${bundle.parameters.X} of a defaulted X has its value.
	params := r.Parameters
	if st, err := entry.Stack(); err == nil {
		if withDefaults, err := st.Defaults(maps.Clone(params)); err == nil {
			params = withDefaults
		}
		// Checked before the plan, as cairn render does: a plan that
		// passes is one whose root the hub then accepts.
		if err := st.ValidateParameters(params); err != nil {
			return deps.Request{}, entry, nil, err
		}
	}
	if err := s.checkCredentials(ctx, entry, r.Credentials); err != nil {
		return deps.Request{}, entry, nil, err
	}
	for _, path := range slices.Sorted(maps.Keys(r.Inputs)) {
		for _, k := range slices.Sorted(maps.Keys(r.Inputs[path].Credentials)) {
			if err := s.checkCredential(ctx, path+"."+k, r.Inputs[path].Credentials[k], ""); err != nil {
				return deps.Request{}, entry, nil, err
			}
		}
	}
	req := deps.Request{Namespace: ns, Name: name, Stack: deps.Reference{Name: entry.Name, Version: entry.Version},
		Parameters: params, Credentials: r.Credentials, Inputs: r.Inputs}
	for _, d := range r.Dependencies {
		o, err := deps.ParseOverride(d)
		if err != nil {
			return deps.Request{}, entry, nil, cairn.Errorf(cairn.CodeInvalid, "--dependency %s: %v", d, err)
		}
		req.Overrides = append(req.Overrides, o)
	}
	// Whether the root exists is told only to a caller who may read it:
	// the answer is the same forbidden either way.
	if err := s.Hub.AuthorizeInstance(ctx, "get", entry.InstallationType, ns, name, "", forbiddenWhy); err != nil {
		return deps.Request{}, entry, nil, err
	}
	var root *cairn.Instance
	cur, err := s.Hub.GetInstanceByName(ctx, entry.InstallationType.Path, ns, name, false)
	switch {
	case err == nil:
		root = &cur
		req.RootID = rootIDOf(cur)
		if err := s.checkUsers(ctx, cur, entry, nil); err != nil {
			return deps.Request{}, entry, nil, err
		}
	case cairn.HasCode(err, cairn.CodeNotFound):
		// The root's id is assigned when Install creates it; until then
		// a stand-in, which the plan shows as one where it matters.
		req.RootID, req.RootIDPending = RootIDStandIn, true
	default:
		return deps.Request{}, entry, nil, err
	}
	return req, entry, root, nil
}

// checkCredentials checks that each credential the user gives refers to an
// instance that exists, of the credential's Type when it declares one:
// the install records the references on the installations and hands them
// on, so one that names nothing would fail only where it is used, long
// after. Values are never read. A credential the stack does not declare is
// left to the resolver, which names the ones it does.
func (s *Service) checkCredentials(ctx context.Context, entry hub.StackEntry, creds map[string]string) error {
	if len(creds) == 0 {
		return nil
	}
	ds, err := deps.FromManifest(&entry.Manifest)
	if err != nil {
		return fmt.Errorf("stack %s@%s: %w", entry.Name, entry.Version, err)
	}
	declared := map[string]deps.Credential{}
	for _, c := range ds.Credentials {
		declared[c.Name] = c
	}
	for _, k := range slices.Sorted(maps.Keys(creds)) {
		if c, ok := declared[k]; ok {
			if err := s.checkCredential(ctx, k, creds[k], c.Type); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkCredential checks one credential reference: NAMESPACE/NAME, naming
// an instance, of Type typ unless typ is "". A dependency's credential
// answered by the user is checked with typ "": which stack it reaches is
// known only once planned.
func (s *Service) checkCredential(ctx context.Context, what, ref, typ string) error {
	ns, name, ok := strings.Cut(ref, "/")
	if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		return cairn.Errorf(cairn.CodeInvalid, "credential %s: %q is not a reference NAMESPACE/NAME to the instance holding it", what, ref)
	}
	found, err := s.Hub.ListInstances(ctx, store.InstanceFilter{Namespace: ns, Name: name}, false)
	if err != nil {
		return fmt.Errorf("credential %s: %w", what, err)
	}
	// The install hands the credential on for the caller: it must be one
	// the caller may read. One it may not read is answered as one that
	// does not exist, so the check tells nobody what exists where they
	// cannot look (nor its Type).
	found = slices.DeleteFunc(found, func(in cairn.Instance) bool {
		ok, err := s.Hub.MayRead(ctx, in)
		return err != nil || !ok
	})
	if typ == "" {
		if len(found) == 0 {
			return cairn.Errorf(cairn.CodeInvalid, "credential %s: no instance %s", what, ref)
		}
		return nil
	}
	var others []string
	for _, in := range found {
		if in.TypeRef.Path == typ {
			return nil
		}
		others = append(others, in.TypeRef.Path)
	}
	msg := fmt.Sprintf("credential %s: no instance %s of Type %s", what, ref, typ)
	if len(others) > 0 {
		msg += fmt.Sprintf(" (%s is a %s)", ref, strings.Join(others, ", a "))
	}
	return cairn.Errorf(cairn.CodeInvalid, "%s", msg)
}

// checkUsers refuses to install an existing installation at a version of
// its stack that an installation using it does not admit: a shared
// dependency upgraded for one user (installed again at a new version)
// would otherwise be outside another user's range, which the user's next
// install refuses and which its stack was never meant to run against.
// A user admits the version when one of its stack's dependencies on that
// stack has no range or a range the version meets.
func (s *Service) checkUsers(ctx context.Context, inst cairn.Instance, entry hub.StackEntry, skip map[string]bool) error {
	v, err := semver.NewVersion(entry.Version)
	if err != nil || len(inst.UsedBy) == 0 {
		return nil
	}
	var refuse []string
	for _, id := range inst.UsedBy {
		u, err := s.Hub.GetInstance(ctx, id, false)
		if cairn.HasCode(err, cairn.CodeNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		if skip[u.Namespace+"/"+u.Name] {
			continue
		}
		if ok, err := s.Hub.IsInstallationType(ctx, u.TypeRef); err != nil || !ok {
			continue // a child or another instance: not a dependent
		}
		ue, err := s.Hub.StackFor(ctx, u.TypeRef, u.Annotations[hub.AnnotationStackVersion])
		if err != nil {
			continue
		}
		ds, err := deps.FromManifest(&ue.Manifest)
		if err != nil || ds.Dependencies == nil {
			continue
		}
		var ranges []string
		admits := false
		for _, r := range ds.Dependencies.Requires {
			ref, err := deps.ParseReference(r.Bundle.Reference)
			if err != nil || ref.Name != entry.Name {
				continue
			}
			c, err := semver.NewConstraint(r.Bundle.Version)
			if r.Bundle.Version == "" || err != nil || c.Check(v) {
				admits = true
				break
			}
			ranges = append(ranges, fmt.Sprintf("%s admits %s", r.Name, r.Bundle.Version))
		}
		if !admits && len(ranges) > 0 {
			refuse = append(refuse, fmt.Sprintf("%s/%s (%s@%s, whose dependency %s)", u.Namespace, u.Name, ue.Name, ue.Version, strings.Join(ranges, ", ")))
		}
	}
	if len(refuse) == 0 {
		return nil
	}
	slices.Sort(refuse)
	return cairn.Errorf(cairn.CodeInvalid, "%s/%s cannot be installed at %s@%s: it is used by %s; upgrade those first (or install the new version under another name)",
		inst.Namespace, inst.Name, entry.Name, entry.Version, strings.Join(refuse, "; "))
}

// checkUpgrades runs checkUsers for each existing installation other than
// the root that the plan installs at another stack version (a shared
// dependency upgraded by a --dependency STACK@VERSION override): its users
// outside the plan must admit the new version, as when it is installed as
// a root. Those in the plan are installed by it, against the plan's
// choice.
func (s *Service) checkUpgrades(ctx context.Context, p *deps.Plan, in *installer) error {
	inPlan := map[string]bool{}
	for _, n := range p.Nodes {
		inPlan[n.Key] = true
	}
	for _, n := range p.Nodes {
		if n.Key == p.Root || n.Action != deps.ActionInstall {
			continue
		}
		t, err := in.typeOf(n.Key)
		if err != nil {
			return err
		}
		cur, err := s.Hub.GetInstanceByName(ctx, t.Path, n.Namespace, n.Name, false)
		if cairn.HasCode(err, cairn.CodeNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		from := installed(&cur).Stack
		if from.Name == "" {
			from = deps.Reference{Name: n.Stack.Name, Version: cur.Annotations[hub.AnnotationStackVersion]}
		}
		if from == n.Stack {
			continue
		}
		entry, err := s.Hub.GetStack(ctx, n.Stack.Name, n.Stack.Version)
		if err != nil {
			return err
		}
		if err := s.checkUsers(ctx, cur, entry, inPlan); err != nil {
			return err
		}
	}
	return nil
}

// RootIDStandIn is ${installation.root.id} in the plan of a root that does
// not exist yet (deps.Request.RootIDPending).
const RootIDStandIn = "<root id>"

func rootIDOf(inst cairn.Instance) string {
	if id := inst.Annotations[hub.AnnotationRootID]; id != "" {
		return id
	}
	return inst.ID
}

// Plan resolves the request's dependencies and orders them; it changes
// nothing. An unrunnable plan (unmapped inputs) is returned with the error
// Plan.Ready gives.
func (s *Service) Plan(ctx context.Context, r Request) (*deps.Plan, error) {
	req, entry, _, err := s.resolve(ctx, r)
	if err != nil {
		return nil, err
	}
	p, err := s.plan(ctx, req, false)
	if p == nil {
		return nil, err
	}
	// What install will do with each node, against the installations as
	// they are: an unchanged one is skipped, a changed one updated, with
	// the children that would change.
	st, serr := entry.Stack()
	if serr != nil {
		return p, serr
	}
	in := &installer{s: s, root: deps.Key(req.Namespace, req.Name), types: map[string]cairn.TypeRef{}, stacks: map[string]*pkg.Stack{}, paths: map[string][]string{},
		ids: map[string]string{}, stack: st, withValues: true}
	if lerr := in.learn(ctx, p); lerr != nil {
		return p, lerr
	}
	if aerr := s.authorize(ctx, p, in, false); aerr != nil {
		return nil, aerr
	}
	if uerr := s.checkUpgrades(ctx, p, in); uerr != nil {
		return p, uerr
	}
	if perr := (&deps.Executor{Installer: in}).Preview(ctx, p); perr != nil {
		return p, perr
	}
	return p, err
}

func (s *Service) plan(ctx context.Context, req deps.Request, unattended bool) (*deps.Plan, error) {
	res := &deps.Resolver{Catalog: s.Hub.DependencyCatalog()}
	// Where an unattended install looks (candidates): the root's
	// namespace; a cluster-scoped root has none.
	where, look, from := "in "+req.Namespace, "in "+req.Namespace+" alone", "from namespace "+req.Namespace+" alone"
	if req.Namespace == "" {
		where, look, from = "named", "at no namespace (a cluster-scoped installation has none)",
			"from no namespace (a cluster-scoped installation has none)"
	}
	idx, err := s.candidates(ctx, req, unattended)
	if err != nil {
		return nil, err
	}
	res.Installations = idx
	p, err := res.Plan(ctx, req)
	if err != nil {
		var nc *deps.NoCandidateError
		if unattended && errors.As(err, &nc) {
			// deps' text names the global tier, which was not searched, and
			// --dependency flags, which a kubectl user has none of.
			return nil, &cairn.Error{Code: cairn.CodeInvalid, Err: err, Msg: fmt.Sprintf(
				"the plan cannot complete: dependency %s: no installation %s satisfies the interface (%s) and the dependency names no stack to install; installing for no user, the stack controller looks %s: name an installation of %s (or a stack) in the annotation %s, a JSON list of --dependency values: '[\"%s=%s/KIND/NAME\"]' or '[\"%s=STACK@VERSION\"]' (docs/dependencies.md#kubectl-apply)",
				nc.Path, where, nc.Interface, look, deps.DefaultGlobalNamespace, hub.AnnotationDependencyOverrides, nc.Path, deps.DefaultGlobalNamespace, nc.Path)}
		}
		err = planError(err)
		if unattended {
			err = fmt.Errorf("%w (installing for no user, the stack controller satisfies a dependency %s, or with a %s installation that %s names: %s)",
				err, from, deps.DefaultGlobalNamespace, hub.AnnotationDependencyOverrides, unattendedDoc)
		}
		return nil, err
	}
	return p, p.Ready()
}

const unattendedDoc = "docs/security.md#installs-and-stacks"

// candidates is the installations a plan may reuse: those of the root's
// namespace and the global one that the caller may read. An unattended
// install has no caller whose rights say what it may read, while what it
// reuses flows into what the root renders and outputs, which its writer
// reads: it reuses the root namespace's installations (writing the root
// there is what it acts on) and, of the global namespace, only those the
// root's dependency overrides name, which the hub checked against the
// rights of whoever wrote them (hub.AnnotationDependencyOverrides).
func (s *Service) candidates(ctx context.Context, req deps.Request, unattended bool) (*deps.Index, error) {
	home := cmp.Or(req.Namespace, deps.DefaultGlobalNamespace)
	if !unattended || req.Namespace == deps.DefaultGlobalNamespace {
		return s.Hub.DependencyCandidates(ctx, home, deps.DefaultGlobalNamespace)
	}
	// A cluster-scoped root has no namespace of its own: writing it acts
	// on no namespace's installations, so it reuses only those named.
	idx := deps.NewIndex()
	if req.Namespace != "" {
		var err error
		if idx, err = s.Hub.DependencyCandidates(ctx, req.Namespace); err != nil {
			return nil, err
		}
	}
	var named []deps.InstallationRef
	for _, o := range req.Overrides {
		if o.Installation == nil || (o.Installation.Namespace != "" && o.Installation.Namespace != deps.DefaultGlobalNamespace) {
			continue
		}
		named = append(named, *o.Installation)
		// A cluster-scoped installation is of the global tier and has no
		// namespace: KIND/NAME and global/KIND/NAME both name it.
		cluster := *o.Installation
		cluster.Namespace = ""
		named = append(named, cluster)
	}
	if len(named) == 0 {
		return idx, nil
	}
	global, err := s.Hub.DependencyCandidates(ctx, deps.DefaultGlobalNamespace)
	if err != nil {
		return nil, err
	}
	for _, ref := range named {
		if in, err := global.Installation(ctx, ref); err == nil && in != nil {
			idx.Put(*in)
		}
	}
	return idx, nil
}

// planError marks the engine's refusals as invalid input.
func planError(err error) error {
	if cairn.ErrorCode(err) != cairn.CodeInternal {
		return err
	}
	return &cairn.Error{Code: cairn.CodeInvalid, Msg: "the plan cannot complete: " + err.Error(), Err: err}
}

// Install plans the request and executes the plan, calling progress for
// each node's events. A failure stops the run (what completed stays) and
// running the same install again resumes. The root installation is
// created first, waiting for its dependencies; a plan that cannot complete
// fails before anything is written.
func (s *Service) Install(ctx context.Context, r Request, progress func(deps.Event)) (*deps.Plan, *deps.Result, error) {
	req, entry, root, err := s.resolve(ctx, r)
	if err != nil {
		return nil, nil, err
	}
	p, err := s.plan(ctx, req, r.Unattended)
	if err != nil {
		return p, nil, err
	}
	st, err := entry.Stack()
	if err != nil {
		return p, nil, err
	}
	digest, err := hub.ParametersDigest(st, req.Parameters)
	if err != nil {
		return p, nil, err
	}
	in := &installer{s: s, root: deps.Key(req.Namespace, req.Name), types: map[string]cairn.TypeRef{}, stacks: map[string]*pkg.Stack{}, paths: map[string][]string{}, ids: map[string]string{},
		stack: st, digest: digest, overrides: r.Dependencies, inputs: r.Inputs, ifSpec: r.IfParametersDigest}
	// A root that an install created as the dependency of another (its
	// spec changed since: the stack controller installs its dependencies
	// again) stays what that install made it: its sharing is kept.
	in.keepSharing = root != nil && rootIDOf(*root) != root.ID
	in.unattended = r.Unattended
	if root != nil && in.ifSpec == "" {
		// What the install changes is the spec as it is now: a change
		// made while it runs is not overwritten.
		cur, err := s.Hub.GetInstance(ctx, root.ID, true)
		if err != nil {
			return p, nil, err
		}
		if in.ifSpec, err = hub.ParametersDigest(st, specOf(cur)); err != nil {
			return p, nil, err
		}
	}
	if err := in.learn(ctx, p); err != nil {
		return p, nil, err
	}
	// Before anything is written: a plan the caller may not carry out
	// changes nothing.
	if err := s.authorize(ctx, p, in, true); err != nil {
		return nil, nil, err
	}
	if err := s.checkUpgrades(ctx, p, in); err != nil {
		return p, nil, err
	}
	if in.unattended {
		for _, n := range p.Nodes {
			if err := in.checkUnattended(ctx, n.Key, n.Stack); err != nil {
				return p, nil, err
			}
		}
	}
	if root != nil {
		in.rootID = root.ID
	}
	if root == nil {
		// Create the root first, waiting, so its id is the root id of
		// this and every resumed run; then plan again with it.
		created, err := s.createRoot(ctx, req, entry, p)
		if err != nil {
			return p, nil, err
		}
		req.RootID, req.RootIDPending = created, false
		in.ifSpec = digest
		in.rootID = created
		if p, err = s.plan(ctx, req, r.Unattended); err != nil {
			if derr := s.Hub.DeleteInstance(context.WithoutCancel(ctx), created, ""); derr != nil {
				err = fmt.Errorf("%w (and removing the root installation created for it failed: %v)", err, derr)
			}
			return p, nil, err
		}
		if err := in.learn(ctx, p); err != nil {
			return p, nil, err
		}
	}
	ex := &deps.Executor{Installer: in, Parallelism: s.Parallelism, Progress: progress}
	res, err := ex.Run(ctx, p)
	return p, res, err
}

// forbiddenWhy ends the refusal of an install's read or write.
const forbiddenWhy = "; an install creates, updates and reuses installations with its caller's own rights (docs/security.md#installs-and-stacks)"

// authorize refuses a plan whose caller may not do, in each node's
// namespace, what the install would do there: create an installation
// that does not exist, update one that does, read one it reuses (its
// outputs flow into the caller's installation). The REST guard authorized
// only create installs (or plans), which is cluster-wide; without this a
// caller could install into any namespace, or upgrade another team's
// installation. What an installation's stack renders in its namespace is
// what creating that installation grants (docs/security.md). A plan
// (write false) needs only the reads: it tells what the install would do
// there, no more than a reader may see.
func (s *Service) authorize(ctx context.Context, p *deps.Plan, in *installer, write bool) error {
	if _, ok := cairn.UserFrom(ctx); !ok {
		return nil
	}
	refused := func(n *deps.Node, err error) error {
		if p.Namespace == "" && n.Namespace != "" {
			// Say why a cluster-scoped root's install asks rights there.
			return fmt.Errorf("%s %s: %w (%s is cluster-scoped: its namespaced dependencies are resolved and installed in %s, with its installer's rights there, docs/dependencies.md#resolution)", n.Action, n.Key, err, p.Root, n.Namespace)
		}
		return fmt.Errorf("%s %s: %w", n.Action, n.Key, err)
	}
	for _, n := range p.Nodes {
		ns, name := n.Namespace, n.Name
		t, err := in.typeOf(n.Key)
		if err != nil {
			return err
		}
		if err := s.Hub.AuthorizeInstance(ctx, "get", t, ns, name, "", forbiddenWhy); err != nil {
			return refused(n, err)
		}
		cur, err := s.Hub.GetInstanceByName(ctx, t.Path, ns, name, false)
		switch {
		case cairn.HasCode(err, cairn.CodeNotFound):
			err = nil
			if write {
				err = s.Hub.AuthorizeInstance(ctx, "create", t, ns, name, "", forbiddenWhy)
			}
		case err != nil:
		case n.Action == deps.ActionReuse:
			var ok bool
			if ok, err = s.Hub.MayRead(ctx, cur); err == nil && !ok {
				// get is held (above): what it lacks is reveal.
				err = s.Hub.AuthorizeInstance(ctx, "reveal", t, ns, name, cur.ID, forbiddenWhy)
			}
		case write:
			err = s.Hub.AuthorizeInstance(ctx, "update", t, ns, name, cur.ID, forbiddenWhy)
		}
		if err != nil {
			return refused(n, err)
		}
	}
	return nil
}

// createRoot creates the root installation with its parameters, waiting
// for its dependencies (hub.AnnotationWaiting), and returns its id.
func (s *Service) createRoot(ctx context.Context, req deps.Request, entry hub.StackEntry, p *deps.Plan) (string, error) {
	var waiting []string
	for _, n := range p.Nodes {
		if n.Key != p.Root {
			waiting = append(waiting, n.Key)
		}
	}
	if len(waiting) == 0 {
		waiting = []string{"(none)"}
	}
	value, err := json.Marshal(nonNilMap(req.Parameters))
	if err != nil {
		return "", err
	}
	ann := map[string]string{hub.AnnotationWaiting: strings.Join(waiting, ", "), hub.AnnotationStackVersion: entry.Version}
	if len(req.Credentials) > 0 {
		b, _ := json.Marshal(req.Credentials)
		ann[hub.AnnotationCredentials] = string(b)
	}
	created, err := s.Hub.CreateInstances(ctx, hub.CreateRequest{Instances: []hub.NewInstance{{
		Namespace: req.Namespace, Name: req.Name, TypeRef: entry.InstallationType, Value: value, Annotations: ann,
	}}})
	if err != nil {
		return "", fmt.Errorf("create the root installation %s: %w", deps.Key(req.Namespace, req.Name), err)
	}
	return created[0].ID, nil
}

func nonNilMap(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}

// installer is deps.Installer over the hub.
type installer struct {
	s *Service
	// root is the root installation's key: Install creates it before the
	// plan runs, so the executor finding it gone means it was deleted
	// since, and it is not created again.
	root string
	mu   sync.Mutex
	// types: node key -> the installation Type of its stack; stacks:
	// node key -> its stack.
	types  map[string]cairn.TypeRef
	stacks map[string]*pkg.Stack
	// paths: node key -> its dependency paths in the plan.
	paths map[string][]string
	// ids: node key -> installation id, once known.
	ids map[string]string
	// stack is the root's stack; digest the hub.ParametersDigest of the
	// root's planned parameters, recorded on it; overrides its
	// --dependency flags, recorded on it too, so an install the stack
	// controller starts again for a changed spec resolves them the same.
	stack     *pkg.Stack
	digest    string
	overrides []string
	// inputs: the answers for dependencies' unmapped inputs, recorded on the root.
	inputs map[string]deps.Inputs
	// ifSpec is the ParametersDigest the root's spec must still have when
	// the root is written (ErrSpecChanged).
	ifSpec string
	// keepSharing: the root's sharing annotations are left as they are.
	keepSharing bool
	// unattended is Request.Unattended.
	unattended bool
	// rootID is the root installation's id once it exists: every
	// installation the run reads or writes is held by a uses edge from it
	// (hold), so none it chose can be deleted before its dependents use
	// it. "" (a preview) holds nothing.
	rootID string
	// withValues: Get reads each installation's spec too (a preview
	// names the parameters an update changes); preview renders for it.
	withValues bool
	preview    *stackctl.Controller
}

// PreviewInstall implements deps.Previewer: the children the stack
// controller would create, update or delete once the installation has
// req's parameters (and stack version), rendered without writing.
func (in *installer) PreviewInstall(ctx context.Context, req deps.InstallRequest) ([]string, error) {
	t, err := in.typeOf(deps.Key(req.Namespace, req.Name))
	if err != nil {
		return nil, err
	}
	cur, err := in.s.Hub.GetInstanceByName(ctx, t.Path, req.Namespace, req.Name, true)
	if err != nil {
		return nil, err
	}
	if cur.Latest.Value, err = json.Marshal(nonNilMap(req.Parameters)); err != nil {
		return nil, err
	}
	cur.Annotations = hub.WithAnnotations(cur.Annotations, map[string]string{hub.AnnotationStackVersion: req.Stack.Version}, hub.AnnotationWaiting)
	if in.preview == nil {
		// A controller of its own, never run: its render cache is not
		// the serving controller's.
		in.preview = stackctl.New(stackctl.Config{Hub: in.s.Hub, Identity: "cairn-plan"})
	}
	return in.preview.PreviewChildren(ctx, cur)
}

func specOf(inst cairn.Instance) map[string]any {
	var spec map[string]any
	_ = json.Unmarshal(inst.Latest.Value, &spec)
	return spec
}

// learn maps every node of the plan to its installation Type.
func (in *installer) learn(ctx context.Context, p *deps.Plan) error {
	for _, n := range p.Nodes {
		e, err := in.s.Hub.GetStack(ctx, n.Stack.Name, n.Stack.Version)
		if err != nil {
			return fmt.Errorf("node %s: %w", n.Key, err)
		}
		st, err := e.Stack()
		if err != nil {
			return fmt.Errorf("node %s: %w", n.Key, err)
		}
		in.mu.Lock()
		in.types[n.Key] = e.InstallationType
		in.stacks[n.Key] = st
		in.paths[n.Key] = n.Paths
		in.mu.Unlock()
	}
	return nil
}

func (in *installer) typeOf(key string) (cairn.TypeRef, error) {
	in.mu.Lock()
	defer in.mu.Unlock()
	t, ok := in.types[key]
	if !ok {
		return t, fmt.Errorf("installation %s is not in the plan", key)
	}
	return t, nil
}

func (in *installer) read(ctx context.Context, namespace, name string) (*cairn.Instance, error) {
	key := deps.Key(namespace, name)
	t, err := in.typeOf(key)
	if err != nil {
		return nil, err
	}
	inst, err := in.s.Hub.GetInstanceByName(ctx, t.Path, namespace, name, in.withValues)
	if cairn.HasCode(err, cairn.CodeNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	in.mu.Lock()
	in.ids[key] = inst.ID
	in.mu.Unlock()
	return &inst, nil
}

func installed(inst *cairn.Instance) *deps.Installed {
	var st stackctl.Status
	if len(inst.Status) > 0 {
		_ = json.Unmarshal(inst.Status, &st)
	}
	out := &deps.Installed{ID: inst.ID, Sharing: hub.SharingOf(*inst), Digest: inst.Annotations[hub.AnnotationInputsDigest],
		RootID: rootIDOf(*inst), Outputs: st.Outputs}
	if st.Stack != nil {
		out.Stack = deps.Reference{Name: st.Stack.Name, Version: st.Stack.Version}
	}
	if len(inst.Latest.Value) > 0 {
		out.Parameters = specOf(*inst)
	}
	out.Ready = inst.Annotations[hub.AnnotationWaiting] == "" && condTrue(st, "Ready") && condGen(st, "Ready") >= int64(inst.Latest.ResourceVersion)
	return out
}

func condTrue(st stackctl.Status, t string) bool {
	for _, c := range st.Conditions {
		if c.Type == t {
			return c.Status == "True"
		}
	}
	return false
}

func condGen(st stackctl.Status, t string) int64 {
	for _, c := range st.Conditions {
		if c.Type == t {
			return c.ObservedGeneration
		}
	}
	return 0
}

// hold adds the uses edge root -> id, so that the installation the run
// chose (to reuse, or that it installed) cannot be deleted before its
// dependents get their own edges to it: a user uninstalling its last
// other user, then it, while this install waits for another dependency,
// is told that the install uses it. The root's final write sets its edges
// to exactly its own dependencies, dropping the holds on the others; a
// failed run keeps them until the root is installed again or deleted.
// It reports false when the installation is gone.
func (in *installer) hold(ctx context.Context, id string) (bool, error) {
	if in.rootID == "" || id == in.rootID {
		return true, nil
	}
	err := in.s.Hub.AddUses(ctx, in.rootID, []string{id})
	if err == nil || !cairn.HasCode(err, cairn.CodeNotFound) {
		return true, err
	}
	if _, gerr := in.s.Hub.GetInstance(ctx, id, false); cairn.HasCode(gerr, cairn.CodeNotFound) {
		return false, nil
	}
	// The root is gone: the run stops at the root's write, naming it.
	return true, nil
}

// Get implements deps.Installer.
func (in *installer) Get(ctx context.Context, namespace, name string) (*deps.Installed, error) {
	inst, err := in.read(ctx, namespace, name)
	if err != nil || inst == nil {
		return nil, err
	}
	if ok, err := in.hold(ctx, inst.ID); err != nil {
		return nil, fmt.Errorf("hold %s/%s for the install: %w", namespace, name, err)
	} else if !ok {
		return nil, nil
	}
	got := installed(inst)
	// With its schema's defaults, as the plan renders parameters: a
	// default the stored spec leaves out is no change.
	in.mu.Lock()
	st := in.stacks[deps.Key(namespace, name)]
	in.mu.Unlock()
	if got.Parameters != nil && st != nil {
		if withDefaults, err := st.Defaults(got.Parameters); err == nil {
			got.Parameters = withDefaults
		}
	}
	return got, nil
}

// Install implements deps.Installer: it creates or updates the
// installation with its inputs, sharing and uses edges, then waits until
// the stack controller reports it ready.
func (in *installer) Install(ctx context.Context, req deps.InstallRequest) (*deps.Installed, error) {
	key := deps.Key(req.Namespace, req.Name)
	t, err := in.typeOf(key)
	if err != nil {
		return nil, err
	}
	value, err := json.Marshal(nonNilMap(req.Parameters))
	if err != nil {
		return nil, fmt.Errorf("parameters: %w", err)
	}
	set := map[string]string{
		hub.AnnotationSharingMode:  string(req.Sharing.Mode),
		hub.AnnotationSharingGroup: req.Sharing.Group,
		hub.AnnotationRootID:       req.RootID,
		hub.AnnotationInputsDigest: req.Digest,
		hub.AnnotationStackVersion: req.Stack.Version,
		// A new resource version on every install, so the stack
		// controller reconciles it again even when nothing else changed
		// (a resumed install after the cause of a failure was removed).
		hub.AnnotationInstalledAt: time.Now().UTC().Format(time.RFC3339Nano),
	}
	if set[hub.AnnotationSharingMode] == "" {
		set[hub.AnnotationSharingMode] = string(deps.SharingGroupMode)
	}
	del := []string{hub.AnnotationWaiting}
	// Every installation records the spec its dependencies were installed
	// for: the stack controller installs them again when its spec changes
	// (a kubectl patch), the root's or an intermediate one's.
	in.mu.Lock()
	nodeStack := in.stacks[key]
	in.mu.Unlock()
	if nodeStack != nil {
		d, err := hub.ParametersDigest(nodeStack, req.Parameters)
		if err != nil {
			return nil, fmt.Errorf("parameters: %w", err)
		}
		set[hub.AnnotationParametersDigest] = d
	}
	if key == in.root {
		set[hub.AnnotationParametersDigest] = in.digest
		if in.keepSharing {
			delete(set, hub.AnnotationSharingMode)
			delete(set, hub.AnnotationSharingGroup)
		}
		if len(in.overrides) > 0 {
			b, err := json.Marshal(in.overrides)
			if err != nil {
				return nil, fmt.Errorf("overrides: %w", err)
			}
			set[hub.AnnotationDependencyOverrides] = string(b)
		} else {
			del = append(del, hub.AnnotationDependencyOverrides)
		}
		if len(in.inputs) > 0 {
			b, err := json.Marshal(in.inputs)
			if err != nil {
				return nil, fmt.Errorf("inputs: %w", err)
			}
			set[hub.AnnotationDependencyInputs] = string(b)
		} else {
			del = append(del, hub.AnnotationDependencyInputs)
		}
	}
	if len(req.Outputs) > 0 {
		b, err := json.Marshal(req.Outputs)
		if err != nil {
			return nil, fmt.Errorf("outputs: %w", err)
		}
		set[hub.AnnotationOutputs] = string(b)
	} else {
		del = append(del, hub.AnnotationOutputs)
	}
	// Credential instances are recorded by reference; a value wired from
	// a dependency's output is never stored here.
	refs := map[string]string{}
	for k, c := range req.Credentials {
		if c.Ref != "" {
			refs[k] = c.Ref
		}
	}
	if len(refs) > 0 {
		b, _ := json.Marshal(refs)
		set[hub.AnnotationCredentials] = string(b)
	} else {
		del = append(del, hub.AnnotationCredentials)
	}
	uses := make([]string, 0, len(req.Uses))
	for _, u := range req.Uses {
		in.mu.Lock()
		id, ok := in.ids[u]
		in.mu.Unlock()
		if !ok {
			ns, name := deps.SplitKey(u)
			inst, err := in.read(ctx, ns, name)
			if err != nil {
				return nil, err
			}
			if inst == nil {
				return nil, fmt.Errorf("its dependency %s does not exist", u)
			}
			id = inst.ID
		}
		uses = append(uses, id)
	}
	var id string
	var dropped []string
	if req.Create && key == in.root {
		return nil, fmt.Errorf("the root installation %s was deleted during the install; it is not created again (install again to recreate it)", key)
	}
	verb := "update"
	if req.Create {
		verb = "create"
	}
	// Checked before the run too (authorize); again here, since the plan
	// made once the root exists may differ.
	if err := in.s.Hub.AuthorizeInstance(ctx, verb, t, req.Namespace, req.Name, "", forbiddenWhy); err != nil {
		return nil, err
	}
	if err := in.checkUnattendedScope(ctx, key); err != nil {
		return nil, err
	}
	if req.Create {
		nr := hub.CreateRequest{Instances: []hub.NewInstance{{Alias: "installation", Namespace: req.Namespace, Name: req.Name, TypeRef: t,
			Value: value, Annotations: hub.WithAnnotations(nil, set)}}}
		for _, u := range uses {
			nr.UsesRelations = append(nr.UsesRelations, hub.UsesRelation{From: "installation", To: u})
		}
		created, err := in.s.Hub.CreateInstances(ctx, nr)
		if cairn.HasCode(err, cairn.CodeAlreadyExists) {
			return nil, fmt.Errorf("%w: %v", deps.ErrExists, err)
		}
		if err != nil {
			return nil, err
		}
		id = created[0].ID
	} else {
		cur, err := in.read(ctx, req.Namespace, req.Name)
		if err != nil {
			return nil, err
		}
		if cur == nil {
			return nil, fmt.Errorf("installation %s disappeared", key)
		}
		id = cur.ID
		// Checked before the run too; again here, since the plan made
		// once the root exists may differ.
		if err := in.checkUnattended(ctx, key, req.Stack); err != nil {
			return nil, err
		}
		if key == in.root {
			full, err := in.s.Hub.GetInstance(ctx, id, true)
			if err != nil {
				return nil, err
			}
			if err := in.checkSpec(key, full, in.ifSpec); err != nil {
				return nil, err
			}
		}
		// The uses edges first: once the waiting annotation goes, the
		// installation renders, and its dependencies must not be deletable.
		// Those of a former install that this plan no longer resolves to
		// go.
		if dropped, err = in.s.Hub.SetDependencyUses(ctx, id, uses); err != nil {
			return nil, fmt.Errorf("uses edges: %w", err)
		}
		// Read, change, write; the stack controller writes the same
		// installation's status at any time, so a conflict means "read
		// again", as a kubectl client would.
		for attempt := 1; ; attempt++ {
			full, err := in.s.Hub.GetInstance(ctx, id, true)
			if err != nil {
				return nil, err
			}
			if err := in.checkSpec(key, full, in.ifSpec); err != nil {
				return nil, err
			}
			ann := hub.WithAnnotations(full.Annotations, set, del...)
			// Sharing is the user's once the installation exists (seed
			// 002's "break glass": mode none set by hand): an update
			// keeps what it has. The name of a shared installation
			// derives from its group, so a plan's other sharing is
			// another installation, never an update of this one.
			if _, ok := full.Annotations[hub.AnnotationSharingMode]; ok || full.Annotations[hub.AnnotationSharingGroup] != "" {
				for _, k := range []string{hub.AnnotationSharingMode, hub.AnnotationSharingGroup} {
					if v, ok := full.Annotations[k]; ok {
						ann[k] = v
					} else {
						delete(ann, k)
					}
				}
			}
			up := hub.UpdateInstance{ID: id, IfSeq: full.Seq, Annotations: ann, Labels: full.Labels}
			if !cairn.JSONEqual(full.Latest.Value, value) {
				up.Value = value
			}
			_, err = in.s.Hub.UpdateInstances(ctx, []hub.UpdateInstance{up})
			if err == nil {
				break
			}
			if !cairn.HasCode(err, cairn.CodeConflict) || attempt == maxConflictRetries {
				return nil, err
			}
		}
	}
	in.mu.Lock()
	in.ids[key] = id
	in.mu.Unlock()
	if _, err := in.hold(ctx, id); err != nil {
		return nil, fmt.Errorf("hold %s for the install: %w", key, err)
	}
	in.s.log().InfoContext(ctx, "installation written; waiting until ready", "installation", key, "stack", req.Stack.String(), "create", req.Create)
	got, err := in.wait(ctx, id, key)
	if err != nil {
		return nil, err
	}
	// Ready on its new dependencies: the exclusive ones it no longer
	// needs go. A failure leaves them installed, unused, and is logged;
	// the install itself succeeded.
	if deleted, err := in.s.Hub.DeleteDroppedDependencies(ctx, req.RootID, dropped); err != nil {
		in.s.log().WarnContext(ctx, "exclusive dependencies no longer used were not all deleted", "installation", key, "deleted", deleted, "err", err)
	} else if len(deleted) > 0 {
		in.s.log().InfoContext(ctx, "exclusive dependencies no longer used deleted", "installation", key, "deleted", deleted)
	}
	return got, nil
}

// checkUnattended refuses, in an unattended install, to install the
// existing shared installation key (other than the root) at another stack
// than it has: the stack controller acts for no user whose rights it could
// check, and a STACK@VERSION override or a pinned version written on an
// installation by a user who may edit only it would otherwise have it
// upgrade a shared installation that user may not update (cairn install
// refuses them that). An installation that does not exist yet, the root
// and exclusive dependencies (sharing mode none: the root's own) are
// installed as before.
func (in *installer) checkUnattended(ctx context.Context, key string, to deps.Reference) error {
	if !in.unattended || key == in.root {
		return nil
	}
	ns, name := deps.SplitKey(key)
	cur, err := in.read(ctx, ns, name)
	if err != nil {
		return err
	}
	if cur == nil {
		return in.checkUnattendedScope(ctx, key)
	}
	if !hub.SharingOf(*cur).Shareable() {
		return nil
	}
	from := installed(cur).Stack
	if from.Name == "" {
		from = deps.Reference{Name: to.Name, Version: cur.Annotations[hub.AnnotationStackVersion]}
	}
	if from.Version == "" || from == to {
		return nil
	}
	t, err := in.typeOf(key)
	if err != nil {
		return err
	}
	kind := t.Path
	if typ, err := in.s.Hub.GetType(ctx, t); err == nil && typ.Names != nil {
		kind = typ.Names.Plural + "." + typ.Group
	}
	return cairn.Errorf(cairn.CodeForbidden, "the shared installation %s would go from %s to %s: the stack controller installs the dependencies of %s for no user, so it upgrades no shared installation; install %s with cairn install as a user who may update %s in %s (docs/security.md#installs-and-stacks)",
		key, from, to, in.root, in.root, kind, ns)
}

// checkUnattendedScope refuses, in an unattended install, to write the
// installation key (other than the root) outside the root's namespace:
// one of a cluster-scoped kind, whose children go to the namespaces its
// stack names and whose creation asks for rights at the cluster scope and
// in those namespaces (hub.checkClusterChildren); and any dependency of a
// cluster-scoped root, which has no namespace, so that its namespaced
// dependencies go to the global namespace, where cairn install asks its
// caller's rights (authorize). Nobody's rights were checked for those
// here. An existing one is reused when the root's dependency overrides
// name it.
func (in *installer) checkUnattendedScope(ctx context.Context, key string) error {
	if !in.unattended || key == in.root {
		return nil
	}
	in.mu.Lock()
	st, paths := in.stacks[key], in.paths[key]
	in.mu.Unlock()
	rootNS := in.rootNamespace()
	if st == nil || (st.Manifest.Kind.Scope != pkg.Cluster && rootNS != "") {
		return nil
	}
	ns, name := deps.SplitKey(key)
	path := "PATH"
	if len(paths) > 0 && paths[0] != "" {
		path = paths[0]
	}
	kind, resource := st.Manifest.Kind.Names.Kind, st.Manifest.Kind.Group
	if t, err := in.typeOf(key); err == nil {
		if typ, err := in.s.Hub.GetType(ctx, t); err == nil && typ.Names != nil {
			resource = typ.Names.Plural + "." + typ.Group
		}
	}
	if st.Manifest.Kind.Scope != pkg.Cluster {
		return cairn.Errorf(cairn.CodeForbidden, "dependency %s: %s %s would be created or changed in the namespace %s: %s is cluster-scoped, so its namespaced dependencies go to %s, and the stack controller installs them for no user, so it creates or changes nothing there; install %s with cairn install as a user who may create and update %s in %s, or name an existing %s in the annotation %s ('[\"%s=%s/%s/NAME\"]', docs/dependencies.md#kubectl-apply)",
			path, kind, key, ns, in.root, ns, in.root, resource, ns, kind, hub.AnnotationDependencyOverrides, path, ns, kind)
	}
	return cairn.Errorf(cairn.CodeForbidden, "dependency %s: %s %s would be created or changed, and %s is cluster-scoped: the stack controller installs the dependencies of %s for no user, so it writes no cluster-scoped installation (its stack writes outside %s); install %s with cairn install as a user who may create %s, or name an existing %s in the annotation %s ('[\"%s=global/%s/NAME\"]', docs/dependencies.md#kubectl-apply)",
		path, kind, name, kind, in.root, in.rootNamespace(), in.root, resource, kind, hub.AnnotationDependencyOverrides, path, kind)
}

// rootNamespace is the namespace of the install's root key.
func (in *installer) rootNamespace() string {
	ns, _ := deps.SplitKey(in.root)
	return ns
}

// checkSpec fails with ErrSpecChanged when the installation is the root
// and its spec no longer has the digest want (nothing to check when "").
func (in *installer) checkSpec(key string, cur cairn.Instance, want string) error {
	if key != in.root || want == "" {
		return nil
	}
	if d, err := hub.ParametersDigest(in.stack, specOf(cur)); err != nil || d != want {
		return fmt.Errorf("%w (now at resource version %d): not overwritten; install again to apply it", ErrSpecChanged, cur.Latest.ResourceVersion)
	}
	return nil
}

// maxConflictRetries bounds the re-reads of an installation whose write
// raced with another writer (the stack controller's status updates).
const maxConflictRetries = 5

// Wait implements deps.Waiter: a shared installation another install is
// creating is used once it is ready.
func (in *installer) Wait(ctx context.Context, namespace, name string) (*deps.Installed, error) {
	inst, err := in.read(ctx, namespace, name)
	if err != nil {
		return nil, err
	}
	if inst == nil {
		return nil, fmt.Errorf("installation %s is gone", deps.Key(namespace, name))
	}
	return in.wait(ctx, inst.ID, deps.Key(namespace, name))
}

// wait polls the installation until the stack controller reports it ready
// for its latest resource version, or a reconcile error that only a change
// of input fixes.
func (in *installer) wait(ctx context.Context, id, key string) (*deps.Installed, error) {
	poll, limit := in.s.Poll, in.s.Timeout
	if poll <= 0 {
		poll = 200 * time.Millisecond
	}
	if limit <= 0 {
		limit = 2 * time.Minute
	}
	deadline := time.Now().Add(limit)
	last := "not reconciled yet"
	var failingSince time.Time
	const grace = 2 * time.Second
	for {
		// The root with its spec: one changed since the install wrote it
		// waits for another install (the stack controller holds it back
		// until its dependencies are installed for it), not for this one.
		inst, err := in.s.Hub.GetInstance(ctx, id, key == in.root)
		if err != nil {
			return nil, err
		}
		if err := in.checkSpec(key, inst, in.digest); err != nil {
			return nil, err
		}
		got := installed(&inst)
		if got.Ready {
			return got, nil
		}
		var st stackctl.Status
		_ = json.Unmarshal(inst.Status, &st)
		failing := false
		for _, c := range st.Conditions {
			if c.Type == "Synced" && c.Status == "False" && c.ObservedGeneration >= int64(inst.Latest.ResourceVersion) {
				// The status may predate this install's write (an
				// annotation change keeps the resource version): it fails
				// the install once it has stood for a grace period, in
				// which the controller reconciles the write.
				failing = true
				if failingSince.IsZero() {
					failingSince = time.Now()
				}
				if time.Since(failingSince) > grace {
					return nil, fmt.Errorf("the stack controller cannot apply it: %s", c.Message)
				}
			}
			if c.Type == "Ready" && c.Message != "" {
				last = c.Message
			}
		}
		if !failing {
			failingSince = time.Time{}
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("not ready after %s: %s (is cairn serve's stack controller running?)", limit, last)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(poll):
		}
	}
}
