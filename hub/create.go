package hub

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/labels"
	"github.com/cairn-dev/cairn/store"
)

// CreateRequest creates several instances and the uses relations between
// them (and existing instances) in one atomic call.
type CreateRequest struct {
	Instances     []NewInstance
	UsesRelations []UsesRelation
}

// NewInstance is one instance to create.
type NewInstance struct {
	// Alias names the instance within the batch (usesRelations ends); it is
	// generated when empty and stored as metadata.
	Alias       string
	Namespace   string // default "default"
	Name        string // default: readable, from the alias or the Type (names.go)
	TypeRef     cairn.TypeRef
	Labels      map[string]string
	Annotations map[string]string
	Attributes  []cairn.AttributeRef
	// Value is nil when not given.
	Value   json.RawMessage
	Backend *BackendInput
	// CreatedBy defaults to the caller's identity from the context.
	CreatedBy string
	// ManagedFields is the server-side apply field ownership to store with
	// the instance (Kubernetes managedFields form), or nil.
	ManagedFields json.RawMessage

	// ID, when set, is the id the instance had before it was deleted: a
	// UUID no instance has now. It exists so an instance recreated from
	// the form cairn serves it in (kubectl replace --force deletes, then
	// creates from that form) keeps its id; new instances leave it empty
	// and get a new one.
	ID string

	// id, when set, is the instance's id instead of a new UUID: the hub
	// gives some of its own instances a readable, deterministic id
	// (Terraform states and outputs, terraform.go).
	id string
}

// BackendInput selects the backend of a new instance and carries its context.
type BackendInput struct {
	ID      string
	Context json.RawMessage
	// Abstract is refused: only the hub's built-in backend is abstract. It
	// exists so façades can pass it through and get the hub's error.
	Abstract bool
}

// UsesRelation says From uses To; each end is an alias from the batch or an
// existing instance id.
type UsesRelation struct {
	From string
	To   string
}

// Created maps an alias of the batch to the id the instance got.
type Created struct {
	Alias string
	ID    string
	// Instance is the instance as the create's own transaction stored it
	// (relations and Seq included): an answer built from it never shows
	// another writer's later change. Its Latest.Value is the value stored
	// when the backend accepts values, nil when the backend derives it.
	Instance cairn.Instance
}

// pending is one instance of a batch being created.
type pending struct {
	in      NewInstance
	inst    cairn.Instance
	value   json.RawMessage
	backend *resolvedBackend
	// checkedValue was checked against checkedType (nil: the Type was not
	// registered) before the transaction (createtypes.go).
	checkedType  *keptType
	checkedValue json.RawMessage
}

// CreateInstances creates the batch atomically: either every instance, its
// first resource version and every relation exist afterwards, or nothing
// does (values already stored in external backends are deleted again).
// The result lists the instances in request order.
func (h *Hub) CreateInstances(ctx context.Context, req CreateRequest) ([]Created, error) {
	if len(req.Instances) == 0 {
		return nil, cairn.Errorf(cairn.CodeInvalid, "no TypeInstances to create")
	}
	now := h.now().UTC()
	items, err := h.prepareCreate(ctx, req, now)
	if err != nil {
		return nil, err
	}
	edges, err := h.resolveRelations(ctx, req.UsesRelations, items)
	if err != nil {
		return nil, err
	}
	if edges, err = h.prepareProjections(ctx, items, edges); err != nil {
		return nil, err
	}

	j, err := h.storeExternal(ctx, items)
	if err != nil {
		return nil, err
	}
	var (
		stored []cairn.Instance
		// The transaction logs one change per instance and no other (the
		// instances' own, their backend edge included): told to the kept
		// backends (a create whose position read sees this commit scans
		// past it without reading the log only once it is told), by the
		// store right after the commit when it can (told), before the
		// commit's position is read by most.
		tell = len(edges) == 0 && !isDryRun(ctx)
		told bool
	)
	err = h.write(ctx, func(ctx context.Context, tx store.Tx) error {
		var err error
		stored, err = h.storeCreates(ctx, tx, items, edges)
		if err == nil && tell {
			if a, ok := tx.(store.AfterCommitter); ok {
				created := stored
				told = a.AfterCommit(func() { h.kept.committed(created) })
			}
		}
		return err
	})
	if err != nil {
		return nil, h.undo(ctx, j, err)
	}
	if tell && !told {
		h.kept.committed(stored)
	}
	h.settle(ctx, j)

	out := make([]Created, len(items))
	for i, p := range items {
		if p.inst.Backend.Abstract {
			stored[i].Latest.Value = p.value
		}
		out[i] = Created{Alias: p.inst.Alias, ID: p.inst.ID, Instance: stored[i]}
		if p.backend.AcceptValue {
			out[i].Instance.Latest.Value = p.value
		}
	}
	if h.cache != nil && !isDryRun(ctx) {
		h.cache.Created(stored)
	}
	if h.log.Enabled(ctx, slog.LevelDebug) { // every request is in the audit log too
		h.log.DebugContext(ctx, "created instances", "count", len(out), "actor", cairn.Actor(ctx), impersonatorAttr(ctx))
	}
	return out, nil
}

// storeCreates writes prepared instances, their first resource versions,
// their uses edges to their backends and edges in tx, and returns the
// instances as stored, in order.
func (h *Hub) storeCreates(ctx context.Context, tx store.Tx, items []*pending, edges []UsesRelation) ([]cairn.Instance, error) {
	if err := h.pinTypes(ctx, tx, items); err != nil {
		return nil, err
	}
	for _, p := range items {
		if err := tx.CreateInstance(ctx, p.inst); err != nil {
			return nil, &cairn.Error{Code: cairn.ErrorCode(err), Subject: subjectOf(p.in.Alias), Msg: err.Error(), Err: err}
		}
		if p.inst.Backend.Abstract {
			if err := tx.PutValue(ctx, p.inst.ID, 1, p.value); err != nil {
				return nil, fmt.Errorf("store value of %q: %w", p.inst.ID, err)
			}
		}
		// The store keeps this edge without writing it (store.Tx.AddUses):
		// the call checks that the backend is still there and keeps it
		// from being deleted before the commit.
		if err := tx.AddUses(ctx, p.inst.ID, p.inst.Backend.ID); err != nil {
			return nil, fmt.Errorf("relate %q to its backend: %w", p.inst.ID, err)
		}
	}
	for _, e := range edges {
		if err := tx.AddUses(ctx, e.From, e.To); err != nil {
			return nil, fmt.Errorf("add uses relation %s -> %s: %w", e.From, e.To, err)
		}
	}
	if len(edges) == 0 && len(items) == 1 {
		// The instance is what this transaction wrote, as it wrote it, and
		// the change it logged (one per instance and transaction, its
		// backend edge's included) is the newest the transaction sees: no
		// read back.
		seq, err := tx.LastSeq(ctx)
		if err != nil {
			return nil, fmt.Errorf("read the change of %q: %w", items[0].inst.ID, err)
		}
		return []cairn.Instance{createdForm(items[0].inst, seq)}, nil
	}
	ids := make([]string, len(items))
	for i, p := range items {
		ids[i] = p.inst.ID
	}
	if len(edges) > 0 {
		return tx.GetInstances(ctx, ids)
	}
	// Nothing but its backend edge relates a new instance (no other
	// transaction can see it yet): read them back without the relation
	// queries and add that edge.
	stored, err := tx.GetInstancesBrief(ctx, ids)
	if err != nil {
		return nil, err
	}
	for i := range stored {
		stored[i].Uses = []string{stored[i].Backend.ID}
	}
	return stored, nil
}

// createdForm is inst, just created with change number seq and no uses
// edge but the one to its backend, as a read of the store gives it back
// (GetInstancesBrief, that edge added): empty maps and lists are nil and
// JSON documents compact, as both stores keep them.
func createdForm(inst cairn.Instance, seq int64) cairn.Instance {
	inst.Seq = seq
	if len(inst.Labels) == 0 {
		inst.Labels = nil
	}
	if len(inst.Annotations) == 0 {
		inst.Annotations = nil
	}
	inst.Latest.Attributes = slices.Clip(slices.Clone(inst.Latest.Attributes)) // the caller's slice: not shared
	if len(inst.Latest.Attributes) == 0 {
		inst.Latest.Attributes = nil
	}
	inst.ManagedFields = compactRaw(inst.ManagedFields)
	inst.Status = compactRaw(inst.Status)
	inst.Latest.Context = compactRaw(inst.Latest.Context)
	inst.Latest.Value = nil
	inst.Uses, inst.UsedBy = []string{inst.Backend.ID}, nil
	return inst
}

// compactRaw is raw compacted (raw itself when it is); nil when empty.
// raw was checked as JSON.
func compactRaw(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return nil
	}
	inString, escaped := false, false
	for _, c := range raw {
		switch {
		case escaped:
			escaped = false
		case inString && c == '\\':
			escaped = true
		case c == '"':
			inString = !inString
		case !inString && (c == ' ' || c == '\t' || c == '\n' || c == '\r'):
			if c, err := compactJSON(raw); err == nil {
				return c
			}
			return raw
		}
	}
	return raw
}

// pinTypes reads the Types of the batch inside its transaction, which keeps
// a concurrent DeleteType from removing one before the instances commit (the
// store then refuses the delete: the Type has instances). A Type deleted
// before this point makes the instances ones of an unregistered Type, as if
// the delete had come first; only a strict hub refuses those. A value
// checked against another version of its Type than the one read here is
// checked again (recheckValues). When every value of a Type was checked
// against one kept Type, and the store's Type still has its schema and
// draft (store.TypeMatcher), every check holds: the Type is pinned without
// reading it whole.
func (h *Hub) pinTypes(ctx context.Context, tx store.Tx, items []*pending) error {
	seen := make(map[cairn.TypeRef]bool, 1)
	matcher := typeMatcher(tx)
	for _, p := range items {
		ref := p.inst.TypeRef
		if seen[ref] {
			continue
		}
		seen[ref] = true
		if kt := checkedAgainst(ref, items); kt != nil {
			if ok, err := h.typeMatches(ctx, matcher, ref, kt.doc, kt.named); err == nil && ok {
				continue
			}
		}
		t, err := tx.GetType(ctx, ref)
		switch {
		case cairn.HasCode(err, cairn.CodeNotFound):
			if h.strict {
				return &cairn.Error{Code: cairn.CodeInvalid, Subject: subjectOf(p.in.Alias),
					Msg: fmt.Sprintf("Type %s is not registered and the hub runs in strict mode", ref)}
			}
		case err != nil:
			return fmt.Errorf("read Type %s: %w", ref, err)
		default:
			if err := h.recheckValues(ref, t, items); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkedAgainst returns the kept Type every value of Type ref in items
// was checked against; nil when they were not checked against one.
func checkedAgainst(ref cairn.TypeRef, items []*pending) *keptType {
	var kt *keptType
	for _, p := range items {
		if p.inst.TypeRef != ref {
			continue
		}
		if p.checkedType == nil || kt != nil && p.checkedType != kt {
			return nil
		}
		kt = p.checkedType
	}
	return kt
}

func subjectOf(alias string) string { return "TypeInstance " + strconv.Quote(alias) }

// prepareCreate validates every instance of the batch and resolves its
// backend, collecting every error rather than stopping at the first.
func (h *Hub) prepareCreate(ctx context.Context, req CreateRequest, now time.Time) ([]*pending, error) {
	// Microseconds are what both stores keep of a time (PostgreSQL's
	// timestamptz), so the instance storeCreates assembles after writing it
	// is the one a read of the store gives.
	now = now.Truncate(time.Microsecond)
	var errs []error
	items := make([]*pending, len(req.Instances))
	aliases := map[string]int{}
	bs := h.newBackendSet()
	picker := h.newPolicyPicker(bs)
	actor := cairn.Actor(ctx)

	for i, in := range req.Instances {
		id := in.id
		var idCause *cairn.Cause
		switch {
		case id != "":
		case in.ID != "":
			id = in.ID
			if u, err := uuid.Parse(id); err != nil || u.String() != id {
				idCause = &cairn.Cause{Field: "metadata/uid", Message: fmt.Sprintf("%q is not an id cairn gives (a lower-case UUID); only an instance's former id may be given", id)}
			}
		default:
			id = newID()
		}
		if in.Name == "" {
			in.Name = defaultName(in.Alias, in.TypeRef.Path, id)
		}
		if in.Alias == "" {
			in.Alias = id
		}
		subject := subjectOf(in.Alias)
		if j, dup := aliases[in.Alias]; dup {
			errs = append(errs, &cairn.Error{Code: cairn.CodeInvalid, Subject: subject,
				Msg: fmt.Sprintf("alias %q is used by TypeInstances %d and %d of the batch; aliases must be unique within a batch", in.Alias, j, i)})
		}
		aliases[in.Alias] = i

		var causes []cairn.Cause
		if idCause != nil {
			causes = append(causes, *idCause)
		}
		if c := checkAlias(in.Alias); c != nil {
			causes = append(causes, *c)
		}
		if c := checkPath("typeRef/path", in.TypeRef.Path); c != nil {
			causes = append(causes, *c)
		} else if in.TypeRef.Path == RBACTypePath {
			errs = append(errs, withSubject(refuseRBACInstance(RBACID), subject))
		} else if in.TypeRef.Path == PolicyTypePath {
			// Its id and name are the policy's; ApplyPolicy creates it.
			errs = append(errs, withSubject(refusePolicyInstance(PolicyID), subject))
		} else if err := refuseTerraformCreate(in); err != nil {
			errs = append(errs, err)
		}
		if c := checkRevision("typeRef/revision", in.TypeRef.Revision); c != nil {
			causes = append(causes, *c)
		}
		scope, kind := cairn.ScopeNamespaced, in.TypeRef.Path
		if checkPath("", in.TypeRef.Path) == nil && checkRevision("", in.TypeRef.Revision) == nil {
			kt, err := h.createType(ctx, in.TypeRef)
			if err != nil {
				return nil, err
			}
			if kt != nil {
				scope, kind = kt.scope, cmp.Or(kt.kind, kind)
			}
		}
		if c := checkScopedNamespace(&in.Namespace, scope, kind); c != nil {
			causes = append(causes, *c)
		}
		if c := checkName(in.Name); c != nil {
			causes = append(causes, *c)
		}
		if err := labels.Validate(in.Labels); err != nil {
			causes = append(causes, cairn.Cause{Field: "metadata/labels", Message: err.Error()})
		}
		causes = append(causes, checkAttributes(in.Attributes)...)
		if in.Value != nil {
			v, err := compactJSON(in.Value)
			if err != nil {
				causes = append(causes, cairn.Cause{Field: "spec/value", Message: "must be valid JSON: " + err.Error()})
			}
			in.Value = v
		}
		if in.Backend != nil && in.Backend.Context != nil {
			c, err := compactJSON(in.Backend.Context)
			if err != nil {
				causes = append(causes, cairn.Cause{Field: "backend/context", Message: "must be valid JSON: " + err.Error()})
			}
			in.Backend.Context = c
		}
		if err := invalid(subject, "invalid TypeInstance", causes); err != nil {
			errs = append(errs, err)
			continue
		}
		if in.Backend != nil && in.Backend.Abstract {
			errs = append(errs, &cairn.Error{Code: cairn.CodeInvalid, Subject: subject,
				Msg: "backend.abstract is reserved for the hub's built-in backend; no TypeInstance can be created in another abstract backend"})
			continue
		}

		var backendID string
		var ctxDoc json.RawMessage
		if in.Backend != nil {
			backendID, ctxDoc = in.Backend.ID, in.Backend.Context
		}
		if backendID == "" {
			// No backend named: the policy's rule for the Type, else the
			// built-in backend (policy.go).
			id, err := picker.backendFor(ctx, in.TypeRef)
			if err != nil {
				return nil, err
			}
			backendID = id
		}
		b, err := bs.get(ctx, backendID)
		if err != nil {
			errs = append(errs, withSubject(picker.explain(err, in.TypeRef, backendID), subject))
			continue
		}
		if err := b.checkInput(in.Value, ctxDoc); err != nil {
			errs = append(errs, withSubject(err, subject))
			continue
		}
		if err := checkScopedBackend(scope, kind, b); err != nil {
			errs = append(errs, withSubject(err, subject))
			continue
		}
		value := in.Value
		if !b.AcceptValue && value == nil && !isProjection(b) {
			// A context-only backend may derive the value from the context.
			// A projection renders once its aliases are resolved
			// (prepareProjections).
			v, err := b.client.GetPreCreateValue(ctx, cairn.GetPreCreateValueRequest{Context: ctxDoc})
			if err != nil {
				errs = append(errs, withSubject(h.externalErr(ctx, b.ID, "get pre-create value", err), subject))
				continue
			}
			value = v
		}
		checkedType, err := h.checkKeptValue(ctx, subject, in.TypeRef, value)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if isStorage(in.Attributes) {
			if err := h.mayWriteBackend(ctx, "create", subject, ""); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		if err := checkStorageValue(subject, in.Attributes, value); err != nil {
			errs = append(errs, err)
			continue
		}
		if err := h.checkBackendConfig(ctx, subject, in.TypeRef, in.Attributes, value); err != nil {
			errs = append(errs, err)
			continue
		}

		createdBy := in.CreatedBy
		if createdBy == "" {
			createdBy = actor
		}
		annotations, err := h.StoredAnnotations(ctx, in.TypeRef, in.Annotations)
		if err != nil {
			errs = append(errs, withSubject(err, subject))
			continue
		}
		if err := h.checkDependencyAnnotations(ctx, in.Namespace, nil, annotations); err != nil {
			errs = append(errs, withSubject(err, subject))
			continue
		}
		if scope == cairn.ScopeCluster {
			if err := h.checkClusterChildren(ctx, in.TypeRef, in.Name, annotations[AnnotationStackVersion]); err != nil {
				errs = append(errs, withSubject(err, subject))
				continue
			}
		}
		items[i] = &pending{
			in:           in,
			value:        in.Value,
			backend:      b,
			checkedType:  checkedType,
			checkedValue: value,
			inst: cairn.Instance{
				ID:            id,
				TypeRef:       in.TypeRef,
				Namespace:     in.Namespace,
				Name:          in.Name,
				Alias:         in.Alias,
				Labels:        maps.Clone(in.Labels),
				Annotations:   maps.Clone(annotations),
				Backend:       cairn.BackendRef{ID: b.ID, Abstract: b.Abstract},
				CreatedAt:     now,
				ManagedFields: in.ManagedFields,
				Latest: cairn.ResourceVersion{
					ResourceVersion: 1,
					CreatedBy:       createdBy,
					CreatedAt:       now,
					Attributes:      in.Attributes,
					Context:         ctxDoc,
				},
			},
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return items, nil
}

// checkScopedBackend refuses an instance of a Cluster Type in a backend
// that names what it stores after the instance's namespace and name (the Git
// backend's path templates): it has no place for one without a namespace.
func checkScopedBackend(scope cairn.Scope, kind string, b *resolvedBackend) error {
	if scope != cairn.ScopeCluster {
		return nil
	}
	if n, ok := b.client.(cairn.ResourceNamer); ok && n.NamesResources() {
		return &cairn.Error{Code: cairn.CodeInvalid, IDs: []string{b.ID}, Msg: fmt.Sprintf(
			"%s is cluster-scoped and backend %q keeps resources by namespace and name (a Git backend's paths): keep its instances in the built-in backend (give backend.id %s, or a policy rule for the Type)",
			kind, b.ID, cairn.BuiltinBackendID)}
	}
	return nil
}

// withSubject names the batch item an error is about, keeping its code.
func withSubject(err error, subject string) error {
	var e *cairn.Error
	if errors.As(err, &e) && e.Subject == "" {
		c := *e
		c.Subject = subject
		return &c
	}
	return err
}

// resolveRelations maps each relation end to an id: an alias of the batch,
// else an existing instance id.
func (h *Hub) resolveRelations(ctx context.Context, rels []UsesRelation, items []*pending) ([]UsesRelation, error) {
	byAlias := make(map[string]string, len(items))
	for _, p := range items {
		byAlias[p.inst.Alias] = p.inst.ID
	}
	var unknown []string
	seen := map[string]bool{}
	out := make([]UsesRelation, len(rels))
	for i, r := range rels {
		out[i] = r
		for _, end := range []*string{&out[i].From, &out[i].To} {
			if id, ok := byAlias[*end]; ok {
				*end = id
			} else if !seen[*end] {
				seen[*end] = true
				unknown = append(unknown, *end)
			}
		}
	}
	if len(unknown) > 0 {
		found, err := h.st.GetInstancesBrief(ctx, unknown)
		if err != nil {
			return nil, fmt.Errorf("resolve usesRelations: %w", err)
		}
		exists := map[string]bool{}
		for _, f := range found {
			exists[f.ID] = true
		}
		var missing []string
		for _, u := range unknown {
			if !exists[u] {
				missing = append(missing, u)
			}
		}
		if len(missing) > 0 {
			return nil, &cairn.Error{Code: cairn.CodeNotFound, IDs: missing,
				Msg: fmt.Sprintf("usesRelations: %s are neither aliases of the batch nor ids of existing TypeInstances", cairn.QuoteIDs(missing))}
		}
	}
	for i, r := range out {
		if r.From == r.To {
			return nil, &cairn.Error{Code: cairn.CodeInvalid,
				Msg: fmt.Sprintf("usesRelations[%d]: %q cannot use itself", i, rels[i].From)}
		}
	}
	return out, nil
}

// storeExternal calls OnCreate on every external backend of the batch
// (OnBatch on those that take batches). When one fails, what was stored
// already is taken back; else the journal says what to take back should
// the store transaction fail.
func (h *Hub) storeExternal(ctx context.Context, items []*pending) (*journal, error) {
	ws := h.createWrites(items)
	if err := h.checkNamesFree(ctx, ws); err != nil {
		return nil, err
	}
	j, failed, err := h.writeExternal(ctx, ws)
	if err != nil {
		if failed == nil { // the intent journal, before any backend call
			return nil, h.undo(ctx, j, err)
		}
		err = withSubject(h.externalErr(ctx, failed.b.ID, "create", err), subjectOf(failed.inst.Alias))
		return nil, h.undo(ctx, j, err)
	}
	return j, nil
}

// checkNamesFree refuses, before any backend is called, a create whose
// name is taken: a backend that keeps values under the instance's name (a
// Git file path) would otherwise overwrite the holder's value and only
// take it back after the store refused the create. The store's own check
// stays the rule; this one only spares the backend a write it would undo
// (a concurrent create of the same name still ends there).
func (h *Hub) checkNamesFree(ctx context.Context, ws []*externalWrite) error {
	for _, w := range ws {
		in := w.inst
		if in.Name == "" {
			continue
		}
		taken, err := h.st.GetInstanceByName(ctx, in.TypeRef.Path, in.Namespace, in.Name)
		switch {
		case err == nil:
			return withSubject(&cairn.Error{Code: cairn.CodeAlreadyExists, IDs: []string{taken.ID},
				Msg: fmt.Sprintf("instance %q already exists", in.TypeRef.Path+"/"+in.Namespace+"/"+in.Name)}, subjectOf(in.Alias))
		case !cairn.HasCode(err, cairn.CodeNotFound):
			return fmt.Errorf("check the name of %s: %w", in.Name, err)
		}
	}
	return nil
}

// createWrites are the external writes of a create: one OnCreate per
// instance not in the built-in backend.
func (h *Hub) createWrites(items []*pending) []*externalWrite {
	var ws []*externalWrite
	for _, p := range items {
		if p.inst.Backend.Abstract {
			continue
		}
		ws = append(ws, &externalWrite{b: p.backend, inst: p.inst,
			w: cairn.BatchWrite{Create: &cairn.OnCreateRequest{InstanceID: p.inst.ID, Value: p.value, Context: p.inst.Latest.Context}},
			done: func(newCtx json.RawMessage) {
				if newCtx != nil {
					p.inst.Latest.Context = newCtx
				}
			}})
	}
	return ws
}
