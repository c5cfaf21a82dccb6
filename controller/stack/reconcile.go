package stack

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/deps"
	"github.com/cairn-dev/cairn/hub"
	pkg "github.com/cairn-dev/cairn/stack"
)

// child is one rendered resource as the instance it becomes.
type child struct {
	res     pkg.Resource
	typ     cairn.Type
	ns      string
	name    string
	labels  map[string]string
	annots  map[string]string
	value   json.RawMessage
	bySpec  bool // the value is the object's spec (see valueOf)
	current *cairn.Instance
}

func (d *child) key() string { return d.typ.Path + "/" + d.ns + "/" + d.name }

func instKey(inst cairn.Instance) string {
	return inst.TypeRef.Path + "/" + inst.Namespace + "/" + inst.Name
}

// valueOf is the value a rendered object is stored as: its spec when spec
// is all it has besides apiVersion, kind, metadata and status (so REST
// serves it back as the same object), else every other top-level field.
func valueOf(obj map[string]any) (json.RawMessage, bool, error) {
	rest := map[string]any{}
	for k, v := range obj {
		switch k {
		case "apiVersion", "kind", "metadata", "status":
		default:
			rest[k] = v
		}
	}
	if spec, ok := rest["spec"]; ok && len(rest) == 1 {
		b, err := json.Marshal(spec)
		return b, true, err
	}
	b, err := json.Marshal(rest)
	return b, false, err
}

// observed is a child as readiness checks and outputs see it: the rendered
// object's shape with the stored value, metadata and status.
func observed(d *child) map[string]any {
	obj := map[string]any{"apiVersion": d.res.APIVersion(), "kind": d.res.Kind()}
	inst := d.current
	if inst == nil {
		return obj
	}
	var v any
	_ = json.Unmarshal(inst.Latest.Value, &v)
	if d.bySpec {
		obj["spec"] = v
	} else if m, ok := v.(map[string]any); ok {
		for k, x := range m {
			obj[k] = x
		}
	}
	md := map[string]any{"name": inst.Name, "namespace": inst.Namespace, "uid": inst.ID}
	if len(inst.Labels) > 0 {
		md["labels"] = toAny(inst.Labels)
	}
	if len(inst.Annotations) > 0 {
		md["annotations"] = toAny(inst.Annotations)
	}
	obj["metadata"] = md
	if len(inst.Status) > 0 {
		var st any
		if json.Unmarshal(inst.Status, &st) == nil {
			obj["status"] = st
		}
	}
	return obj
}

func toAny(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// reconcileError is a failure that the installation's status reports as
// Synced=False; retry says whether trying again may help (a locked child,
// an unreachable backend) or only a change of the input will (a bad
// parameter, a kustomize error).
type reconcileError struct {
	reason string
	msg    string
	retry  bool
}

func (e *reconcileError) Error() string { return e.msg }

func badInput(reason, format string, args ...any) *reconcileError {
	return &reconcileError{reason: reason, msg: fmt.Sprintf(format, args...)}
}

// Reconcile converges one installation; it is idempotent. again > 0 asks
// to be called again after that long (a deletion waiting for its next
// band); an error is retried with backoff.
func (c *Controller) Reconcile(ctx context.Context, id string) (again time.Duration, err error) {
	// What goes wrong is written into the status, which whoever may get
	// the installation reads: the hub keeps a backend's words from it.
	ctx = hub.WithholdBackendWords(cairn.WithActor(ctx, c.identity))
	inst, err := c.hub.GetInstance(ctx, id, true)
	if cairn.HasCode(err, cairn.CodeNotFound) {
		c.forgetOwner(id)
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	st := readStatus(inst)
	if inst.Annotations[hub.AnnotationDeletionRequested] != "" {
		return c.finalize(ctx, inst, st)
	}

	if waiting := inst.Annotations[hub.AnnotationWaiting]; waiting != "" {
		// Created by an install before its dependencies: nothing is
		// rendered until the install has them ready and says so.
		next := st.clone()
		next.ObservedGeneration = int64(inst.Latest.ResourceVersion)
		now := time.Now().UTC()
		msg := "waiting for the dependencies " + waiting
		next.setCondition(Condition{Type: "Dependencies", Status: "False", Reason: "Waiting", Message: msg}, now)
		next.setCondition(Condition{Type: "Ready", Status: "False", Reason: "WaitingForDependencies", Message: msg}, now)
		return 0, c.writeStatus(ctx, inst, st, next)
	}

	if c.deps != nil {
		// Applied without cairn install, or its spec changed since its
		// dependencies were installed: they are installed (again) first,
		// in the background, and it renders once they are.
		if e, err := c.stackFor(ctx, inst); err == nil && hasRequires(e) && c.dependenciesStale(inst, e) {
			if msg, done := c.deps.Ensure(ctx, inst, e); !done {
				next := st.clone()
				next.ObservedGeneration = int64(inst.Latest.ResourceVersion)
				now := time.Now().UTC()
				next.setCondition(Condition{Type: "Dependencies", Status: "False", Reason: "Installing", Message: msg}, now)
				next.setCondition(Condition{Type: "Ready", Status: "False", Reason: "WaitingForDependencies", Message: msg}, now)
				return time.Second, c.writeStatus(ctx, inst, st, next)
			}
		}
	}

	// Parameters given by reference are read again on every reconcile.
	eff, srcIDs, rerr := c.withSources(ctx, inst)
	c.setSources(inst.ID, srcIDs)
	var (
		desired []*child
		owned   map[string]cairn.Instance
		s       *pkg.Stack
		entry   *hub.StackEntry
		stats   applyStats
	)
	if rerr == nil {
		desired, owned, s, entry, rerr = c.desired(ctx, eff)
	}
	if rerr == nil {
		stats, rerr = c.apply(ctx, inst, desired, owned)
	}
	if rerr == nil && (len(srcIDs) > 0 || slices.ContainsFunc(inst.Uses, isOutputID)) {
		if err := c.useSources(ctx, inst, srcIDs); err != nil {
			rerr = &reconcileError{reason: "ApplyError", msg: err.Error(), retry: true}
		}
	}
	now := time.Now().UTC()
	next := st.clone()
	next.ObservedGeneration = int64(inst.Latest.ResourceVersion)
	if entry != nil {
		next.Stack = &stackRef{Name: entry.Name, Version: entry.Version, Digest: entry.Digest}
		next.Sharing = c.sharingStatus(*entry)
	}
	if inst.Annotations[hub.AnnotationRootID] != "" {
		if next.condition("Dependencies") != nil {
			next.setCondition(Condition{Type: "Dependencies", Status: "True", Reason: "Ready", Message: "every dependency is ready"}, now)
		}
	}
	if rerr != nil {
		next.setCondition(Condition{Type: "Synced", Status: "False", Reason: "ReconcileError", Message: rerr.Error()}, now)
		next.event(now, "Warning", rerr.reason, rerr.Error())
		// Ready says what the children are only when a reconcile of this
		// generation saw them (a transient failure on a resync keeps it);
		// otherwise it would describe an earlier spec, or an earlier
		// state (waiting for the dependencies), as if it were this one.
		if r := next.condition("Ready"); r == nil || r.ObservedGeneration != next.ObservedGeneration || (r.Reason != "Available" && r.Reason != "Unavailable") {
			next.setCondition(Condition{Type: "Ready", Status: "False", Reason: "ReconcileError", Message: "the installation could not be applied: " + rerr.Error()}, now)
		}
	} else {
		next.setCondition(Condition{Type: "Synced", Status: "True", Reason: "ReconcileSuccess"}, now)
		next.Configuration = ""
		if set, ok := s.ConfigurationSet(specOf(eff)); ok {
			next.Configuration = set.Name
		}
		if stats.changed() {
			next.event(now, "Normal", "Applied", stats.String())
		}
		c.readiness(ctx, &next, s, eff, desired, stats.changed(), now)
	}
	if err := c.writeStatus(ctx, inst, st, next); err != nil {
		return 0, err
	}
	if rerr != nil && rerr.retry {
		return 0, rerr
	}
	return 0, nil
}

// desired renders the installation and maps every rendered resource to the
// instance it must be, checking everything that could make the apply fail
// for a reason in the input (parameters, kustomize, a name taken by an
// instance the installation does not own, an ownership cycle) before
// anything is written.
func (c *Controller) desired(ctx context.Context, inst cairn.Instance) ([]*child, map[string]cairn.Instance, *pkg.Stack, *hub.StackEntry, *reconcileError) {
	entry, err := c.stackFor(ctx, inst)
	if err != nil {
		return nil, nil, nil, nil, &reconcileError{reason: "StackNotFound", msg: err.Error(), retry: !cairn.HasCode(err, cairn.CodeNotFound)}
	}
	s, err := c.stackOf(entry)
	if err != nil {
		return nil, nil, nil, &entry, badInput("InvalidStack", "%v", err)
	}
	var spec map[string]any
	if len(inst.Latest.Value) > 0 {
		if err := json.Unmarshal(inst.Latest.Value, &spec); err != nil {
			return nil, nil, s, &entry, badInput("InvalidParameters", "spec is not an object: %v", err)
		}
	}
	in := s.NewInstallation(inst.Namespace, inst.Name, inst.ID, inst.Labels, spec)
	in.Annotations = inst.Annotations
	if err := s.ValidateParameters(spec); err != nil {
		return nil, nil, s, &entry, badInput("InvalidParameters", "parameters: %v", err)
	}
	rendered, err := c.render(ctx, s, entry.Digest, inst, in)
	if err != nil {
		return nil, nil, s, &entry, badInput("RenderError", "%v", err)
	}
	out := make([]*child, 0, len(rendered))
	seen := map[string]bool{}
	for _, r := range rendered {
		typ, err := c.hub.KindType(ctx, r.APIVersion(), r.Kind())
		if err != nil {
			return nil, nil, s, &entry, &reconcileError{reason: "TypeError", msg: fmt.Sprintf("%s %s: %v", r.Kind(), r.Name(), err), retry: cairn.ErrorCode(err) != cairn.CodeInvalid}
		}
		v, bySpec, err := valueOf(r.Object)
		if err != nil {
			return nil, nil, s, &entry, badInput("RenderError", "%s %s: %v", r.Kind(), r.Name(), err)
		}
		labels := maps.Clone(r.Labels())
		if labels == nil {
			labels = map[string]string{}
		}
		labels[hub.LabelInstallationName] = inst.Name
		labels[hub.LabelInstallationUID] = inst.ID
		ns := r.Namespace()
		switch {
		case typ.ClusterScoped() && ns != "":
			return nil, nil, s, &entry, badInput("RenderError", "%s %s (%s) is put in namespace %q, but %s is cluster-scoped: its objects have no namespace; remove it from the stack's resources",
				r.Kind(), r.OriginalName, r.Name(), ns, r.Kind())
		case typ.ClusterScoped():
		case ns == "" && inst.Namespace == "":
			// No silent default: the package says where each namespaced
			// child of a cluster-scoped installation goes.
			return nil, nil, s, &entry, badInput("RenderError", "%s %s (%s) has no namespace: %s is cluster-scoped, so a namespaced child goes to the namespace its stack's resources give it; set metadata.namespace in resources/, or namespace: in a kustomization",
				r.Kind(), r.OriginalName, r.Name(), s.Manifest.Kind.Names.Kind)
		case ns == "":
			ns = inst.Namespace
		}
		d := &child{res: r, typ: typ, ns: ns, name: r.Name(), labels: labels, annots: r.Annotations(), value: v, bySpec: bySpec}
		if seen[d.key()] {
			return nil, nil, s, &entry, badInput("RenderError", "the stack renders %s %s/%s twice", r.Kind(), ns, r.Name())
		}
		seen[d.key()] = true
		out = append(out, d)
	}
	owned, rerr := c.checkOwnership(ctx, inst, out)
	if rerr != nil {
		return nil, nil, s, &entry, rerr
	}
	return out, owned, s, &entry, nil
}

// checkOwnership refuses a rendered resource that names the installation
// itself or an installation that (transitively) owns it, which would make
// an ownership cycle, and one whose name an instance the installation does
// not own already has.
func (c *Controller) checkOwnership(ctx context.Context, inst cairn.Instance, desired []*child) (map[string]cairn.Instance, *reconcileError) {
	ancestors := map[string]bool{instKey(inst): true}
	frontier := []string{inst.ID}
	for depth := 0; len(frontier) > 0 && depth < 32; depth++ {
		cur, err := c.hub.GetInstances(ctx, frontier)
		if err != nil {
			return nil, &reconcileError{reason: "ReadError", msg: err.Error(), retry: true}
		}
		frontier = nil
		for _, x := range cur {
			if uid := x.Labels[hub.LabelInstallationUID]; uid != "" && slices.Contains(x.UsedBy, uid) {
				frontier = append(frontier, uid)
			}
			ancestors[instKey(x)] = true
		}
	}
	owned, err := c.ownedChildren(ctx, inst, desired)
	if err != nil {
		return nil, &reconcileError{reason: "ReadError", msg: err.Error(), retry: true}
	}
	for _, d := range desired {
		if ancestors[d.key()] {
			return nil, badInput("OwnershipCycle", "%s %s/%s would own its own owner: the installation %s/%s renders it, and it is that installation or one of its owners",
				d.res.Kind(), d.ns, d.name, inst.Namespace, inst.Name)
		}
		if cur, ok := owned[d.key()]; ok {
			cp := cur
			d.current = &cp
			continue
		}
		other, err := c.hub.GetInstanceByName(ctx, d.typ.Path, d.ns, d.name, false)
		switch {
		case err == nil:
			return nil, badInput("NameCollision", "%s %s/%s already exists (TypeInstance %q) and is not owned by %s/%s: delete or rename it, or change the installation's name",
				d.res.Kind(), d.ns, d.name, other.ID, inst.Namespace, inst.Name)
		case !cairn.HasCode(err, cairn.CodeNotFound):
			return nil, &reconcileError{reason: "ReadError", msg: err.Error(), retry: true}
		}
	}
	return owned, nil
}

// ownedChildren returns, by key, the instances the installation owns: those
// it uses that carry its uid label, or whose identity a rendered resource
// has (a hand edit may have dropped the label), with their values.
func (c *Controller) ownedChildren(ctx context.Context, inst cairn.Instance, desired []*child) (map[string]cairn.Instance, error) {
	want := map[string]bool{}
	for _, d := range desired {
		want[d.key()] = true
	}
	var ids []string
	for _, u := range inst.Uses {
		if u != inst.Backend.ID {
			ids = append(ids, u)
		}
	}
	used, err := c.hub.GetInstances(ctx, ids)
	if err != nil {
		return nil, err
	}
	var kids []cairn.Instance
	for _, u := range used {
		if u.Labels[hub.LabelInstallationUID] == inst.ID || want[instKey(u)] {
			kids = append(kids, u)
		}
	}
	refs := make([]hub.ValueRef, len(kids))
	for i, k := range kids {
		refs[i] = hub.ValueRef{Instance: k, Version: k.Latest}
	}
	vals, err := c.hub.Values(ctx, refs)
	if err != nil {
		return nil, err
	}
	out := make(map[string]cairn.Instance, len(kids))
	for i, k := range kids {
		k.Latest.Value = vals[i]
		out[instKey(k)] = k
	}
	return out, nil
}

type applyStats struct{ created, updated, deleted int }

func (s applyStats) changed() bool { return s.created+s.updated+s.deleted > 0 }

func (s applyStats) String() string {
	return fmt.Sprintf("created %d, updated %d, deleted %d children", s.created, s.updated, s.deleted)
}

// apply writes the difference between the desired children and the owned
// ones in one hub call: every new child (with the installation's uses edge
// to it), every changed child and the deletion of every child no longer
// rendered, in one store transaction and, per backend that takes batches,
// one write (a Git backend: one commit or one pull request per
// reconcile). It is atomic: on a failure nothing is left changed.
func (c *Controller) apply(ctx context.Context, inst cairn.Instance, desired []*child, owned map[string]cairn.Instance) (applyStats, *reconcileError) {
	var stats applyStats
	ch, _ := childChanges(desired, owned)
	ids := make([]string, 0, len(owned))
	for _, cur := range owned {
		ids = append(ids, cur.ID)
	}
	c.setOwners(inst.ID, ids)
	if ch.Empty() {
		return stats, nil
	}
	done, err := c.hub.ApplyChildren(ctx, inst.ID, ch)
	if err != nil {
		return stats, applyErr(err)
	}
	stats = applyStats{created: len(done.Created), updated: len(done.Updated), deleted: len(done.Deleted)}
	ids = ids[:0]
	for _, cr := range done.Created {
		ids = append(ids, cr.ID)
	}
	c.setOwners(inst.ID, ids)
	return stats, nil
}

// childChanges is the difference between the desired children and the
// owned ones, and the same for people: one line per change ("create
// Flag dev/x-dark-mode"), sorted.
func childChanges(desired []*child, owned map[string]cairn.Instance) (hub.ChildChanges, []string) {
	var ch hub.ChildChanges
	var lines []string
	keep := map[string]bool{}
	for _, d := range desired {
		keep[d.key()] = true
		cur, ok := owned[d.key()]
		if !ok {
			alias := fmt.Sprintf("child-%d", len(ch.Create))
			ch.Create = append(ch.Create, hub.NewInstance{Alias: alias, Namespace: d.ns, Name: d.name, TypeRef: d.typ.Ref(),
				Labels: d.labels, Annotations: d.annots, Value: d.value})
			lines = append(lines, fmt.Sprintf("create %s %s/%s", d.res.Kind(), d.ns, d.name))
			continue
		}
		up := hub.UpdateInstance{ID: cur.ID, IfSeq: cur.Seq}
		changed := false
		if !cairn.JSONEqual(cur.Latest.Value, d.value) {
			up.Value, changed = d.value, true
		}
		if !maps.Equal(cur.Labels, d.labels) || !maps.Equal(nonNil(cur.Annotations), nonNil(d.annots)) {
			up.Labels, up.Annotations, changed = d.labels, nonNil(d.annots), true
		}
		if changed {
			ch.Update = append(ch.Update, up)
			lines = append(lines, fmt.Sprintf("update %s %s/%s", d.res.Kind(), d.ns, d.name))
		}
	}
	for k, cur := range owned {
		if !keep[k] {
			ch.Delete = append(ch.Delete, cur.ID)
			lines = append(lines, fmt.Sprintf("delete %s %s/%s", cur.TypeRef.Path, cur.Namespace, cur.Name))
		}
	}
	slices.Sort(ch.Delete)
	slices.Sort(lines)
	return ch, lines
}

// PreviewChildren says what reconciling inst (an installation, with the
// spec it would have) would change of its children, writing nothing: one
// line per child created, updated or deleted. cairn plan shows it for an
// installation an install would update. An error is what the reconcile
// would report (invalid parameters, a render error, a name collision).
func (c *Controller) PreviewChildren(ctx context.Context, inst cairn.Instance) ([]string, error) {
	eff, _, rerr := c.withSources(ctx, inst)
	if rerr != nil {
		return nil, rerr
	}
	desired, owned, _, _, rerr := c.desired(ctx, eff)
	if rerr != nil {
		return nil, rerr
	}
	_, lines := childChanges(desired, owned)
	return lines, nil
}

func applyErr(err error) *reconcileError {
	code := cairn.ErrorCode(err)
	retry := code != cairn.CodeInvalid
	reason := "ApplyError"
	switch code {
	case cairn.CodeLocked:
		reason = "ChildLocked"
	case cairn.CodeAlreadyExists:
		reason = "NameCollision"
	}
	return &reconcileError{reason: reason, msg: fmt.Sprintf("apply children: %v", err), retry: retry}
}

func nonNil(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

// readiness reads every child as it is now and sets Ready, the outputs
// and the per-child summary.
func (c *Controller) readiness(ctx context.Context, st *Status, s *pkg.Stack, inst cairn.Instance, desired []*child, applied bool, now time.Time) {
	// Read again when the apply changed what the installation owns;
	// otherwise desired[i].current is what checkOwnership read.
	if applied {
		if fresh, err := c.hub.GetInstance(ctx, inst.ID, false); err == nil {
			if owned, err := c.ownedChildren(ctx, fresh, desired); err == nil {
				for _, d := range desired {
					d.current = nil
					if cur, ok := owned[d.key()]; ok {
						cp := cur
						d.current = &cp
					}
				}
			}
		}
	}
	var unready []string
	st.Resources = st.Resources[:0]
	obs := map[string]map[string]any{}
	rendered := make([]pkg.Resource, 0, len(desired))
	for _, d := range desired {
		rendered = append(rendered, d.res)
		rs := ResourceStatus{APIVersion: d.res.APIVersion(), Kind: d.res.Kind(), Namespace: d.ns, Name: d.name, Synced: true}
		if d.current == nil {
			rs.Synced, rs.Reason = false, "not created yet"
			unready = append(unready, fmt.Sprintf("%s %s: not created yet", d.res.Kind(), d.name))
		} else {
			rs.UID, rs.Backend = d.current.ID, backendName(d.current.Backend.ID)
			obj := observed(d)
			obs[d.res.Key()] = obj
			ok, why := s.Ready(d.res, obj)
			rs.Ready = ok
			if !ok {
				rs.Reason = why
				unready = append(unready, fmt.Sprintf("%s %s: %s", d.res.Kind(), d.name, why))
			}
		}
		st.Resources = append(st.Resources, rs)
	}
	in := s.NewInstallation(inst.Namespace, inst.Name, inst.ID, inst.Labels, specOf(inst))
	in.Annotations = inst.Annotations
	outputs, err := s.Outputs(in, rendered, obs)
	if promoted := inst.Annotations[hub.AnnotationOutputs]; promoted != "" {
		// Outputs its dependencies set on it (dependencies.requires[].outputs).
		var more map[string]any
		if jerr := json.Unmarshal([]byte(promoted), &more); jerr == nil && len(more) > 0 {
			if outputs == nil {
				outputs = map[string]any{}
			}
			maps.Copy(outputs, more)
		}
	}
	st.Outputs = outputs
	if len(unready) == 0 && err != nil {
		unready = append(unready, "outputs: "+err.Error())
	}
	if len(unready) == 0 {
		st.setCondition(Condition{Type: "Ready", Status: "True", Reason: "Available", Message: fmt.Sprintf("all %d children are ready", len(desired))}, now)
		return
	}
	st.setCondition(Condition{Type: "Ready", Status: "False", Reason: "Unavailable",
		Message: fmt.Sprintf("%d of %d children not ready: %s", len(unready), len(desired), strings.Join(unready, "; "))}, now)
}

func specOf(inst cairn.Instance) map[string]any {
	var spec map[string]any
	_ = json.Unmarshal(inst.Latest.Value, &spec)
	return spec
}

// writeStatus writes next when it differs from what the installation has,
// so a reconcile with nothing to change writes nothing.
func (c *Controller) writeStatus(ctx context.Context, inst cairn.Instance, prev, next Status) error {
	b, err := json.Marshal(next)
	if err != nil {
		return err
	}
	if pb, _ := json.Marshal(prev); cairn.JSONEqual(pb, b) {
		return nil
	}
	_, err = c.hub.UpdateStatus(ctx, inst.ID, b, 0)
	if cairn.HasCode(err, cairn.CodeNotFound) {
		return nil
	}
	return err
}

// backendName names a child's backend in the status: its id, as the
// child itself holds it, the built-in one by its alias (documented, the
// same everywhere). Whoever may get the installation reads the status; a
// backend's alias is shown to those who may get the backend (cairn trace
// and the web console look it up).
func backendName(id string) string {
	if id == cairn.BuiltinBackendID {
		return cairn.BuiltinBackendAlias
	}
	return id
}

// renderCache keeps an installation's last render: an installation whose
// stack, spec, name and labels did not change renders the same, so an
// idle reconcile need not run kustomize again.
type renderCache struct {
	key      string
	rendered []pkg.Resource
}

func (c *Controller) render(ctx context.Context, s *pkg.Stack, digest string, inst cairn.Instance, in pkg.Installation) ([]pkg.Resource, error) {
	k, _ := json.Marshal([]any{digest, inst.Namespace, inst.Name, inst.Latest.Value, inst.Labels, inst.Annotations})
	key := string(k)
	c.mu.Lock()
	rc, ok := c.renders[inst.ID]
	c.mu.Unlock()
	if ok && rc.key == key {
		return rc.rendered, nil
	}
	rendered, err := c.renderer.Render(ctx, s, in)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.renders[inst.ID] = renderCache{key: key, rendered: rendered}
	c.mu.Unlock()
	return rendered, nil
}

// catalogTTL bounds how long the controller uses what it read of the
// catalog: a new stack version is picked up within it.
const catalogTTL = 3 * time.Second

type catalogEntry struct {
	entry hub.StackEntry
	at    time.Time
}

// stackFor is hub.StackFor, cached for catalogTTL: reading the catalog
// reads every package, which an idle reconcile should not.
func (c *Controller) stackFor(ctx context.Context, inst cairn.Instance) (hub.StackEntry, error) {
	pinned := inst.Annotations[hub.AnnotationStackVersion]
	key := inst.TypeRef.String() + "@" + pinned
	c.mu.Lock()
	ce, ok := c.catalog[key]
	gen := c.catalogGen
	c.mu.Unlock()
	if ok && time.Since(ce.at) < catalogTTL {
		return ce.entry, nil
	}
	e, err := c.hub.StackFor(ctx, inst.TypeRef, pinned)
	if err != nil {
		return e, err
	}
	c.mu.Lock()
	if c.catalogGen == gen {
		c.catalog[key] = catalogEntry{entry: e, at: time.Now()}
	}
	c.mu.Unlock()
	return e, nil
}

// sharingStatus is status.sharing for installations of a catalog entry,
// cached by digest.
func (c *Controller) sharingStatus(e hub.StackEntry) *deps.SharingStatus {
	c.mu.Lock()
	ss, ok := c.sharing[e.Digest]
	c.mu.Unlock()
	if ok {
		return ss
	}
	ds, err := deps.FromManifest(&e.Manifest)
	if err != nil {
		return nil
	}
	v := deps.SharingStatusOf(ds)
	ss = &v
	c.mu.Lock()
	c.sharing[e.Digest] = ss
	c.mu.Unlock()
	return ss
}

// dependenciesStale reports whether an installation's dependencies were
// installed for another spec than it has: never installed (applied
// without cairn install), or the spec changed since (a kubectl patch),
// by hub.ParametersDigest, which the installer records on every
// installation it writes and which counts schema defaults, so an
// unchanged spec is never installed again. That holds for an installation
// an install created as the dependency of another (the middle of a chain)
// as for a root: its own dependencies follow its spec. One written before
// installers recorded the digest on dependencies has none and is left as
// it is; invalid parameters are left to the render, which reports them.
func (c *Controller) dependenciesStale(inst cairn.Instance, e hub.StackEntry) bool {
	root := inst.Annotations[hub.AnnotationRootID]
	if root == "" {
		return true
	}
	if root != inst.ID && inst.Annotations[hub.AnnotationParametersDigest] == "" {
		return false
	}
	s, err := c.stackOf(e)
	if err != nil {
		return false
	}
	spec := specOf(inst)
	if s.ValidateParameters(spec) != nil {
		return false
	}
	d, err := hub.ParametersDigest(s, spec)
	return err == nil && d != inst.Annotations[hub.AnnotationParametersDigest]
}

// hasRequires reports whether a stack declares dependencies.requires.
func hasRequires(e hub.StackEntry) bool {
	if len(e.Manifest.Dependencies) == 0 {
		return false
	}
	var d struct {
		Requires []json.RawMessage `json:"requires"`
	}
	return json.Unmarshal(e.Manifest.Dependencies, &d) == nil && len(d.Requires) > 0
}
