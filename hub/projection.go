package hub

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/auth/rbac"
	"github.com/cairn-dev/cairn/backend/gotemplate"
)

// Projections (seed 000 "Dynamic TypeInstance projections").
//
// Every backend of Type cap.core.type.hub.storage.gotemplate is a projection
// backend, whether the hub runs it in-process (the instance every hub
// registers, id gotemplate.BackendID, alias "gotemplate") or it runs as an
// external service registered with that Type. For an instance created in
// one, the hub does what only it can, because it owns the uses tree and the
// batch:
//
//   - it resolves each variable's relatedTypeInstanceAlias by walking the new
//     instance's uses tree (the batch's usesRelations, then the stored uses
//     edges of every stored instance reached) to exactly one instance, and
//     writes its id beside the alias in the context it stores;
//   - it adds a uses edge from the projection to every instance a variable
//     names, in the create transaction, so no source can be deleted while a
//     projection needs it;
//   - it asks the backend to render once (GetPreCreateValue) with the
//     values of referenced instances of the same batch, which no backend
//     could read yet, in the context's reserved batchValues field; a template
//     that does not parse or render refuses the create and nothing is
//     stored. The rendered value is validated against the projection's Type.
//
// Projections of projections of the same batch are rendered sources first;
// a cycle is refused.
//
// Whoever creates a projection, or changes its template, must be allowed to
// read every stored instance it renders: reads of the projection render
// with the hub's rights, so otherwise anyone who may create an instance
// somewhere could read any value in the hub through one.

// isProjection reports whether b is a projection backend.
func isProjection(b *resolvedBackend) bool {
	return b != nil && b.TypeRef.Path == gotemplate.TypePath
}

// hubSource lets the in-process gotemplate backend read instances through
// the hub, so a projection of a projection, or of an external backend's
// instance, renders like any read.
type hubSource struct{ h *Hub }

func (s hubSource) Value(ctx context.Context, id string) (json.RawMessage, error) {
	inst, err := s.h.GetInstance(ctx, id, true)
	if err != nil {
		return nil, err
	}
	return inst.Latest.Value, nil
}

// Values reads the latest values of several instances with one metadata
// read and one read of the built-in value table (Hub.Values), so a
// projection with many variables renders in about the time of one read.
func (s hubSource) Values(ctx context.Context, ids []string) (map[string]json.RawMessage, error) {
	insts, err := s.h.st.GetInstancesBrief(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("read %d TypeInstances: %w", len(ids), err)
	}
	refs := make([]ValueRef, len(insts))
	found := make(map[string]bool, len(insts))
	for i, inst := range insts {
		refs[i] = ValueRef{Instance: inst, Version: inst.Latest}
		found[inst.ID] = true
	}
	for _, id := range ids {
		if !found[id] {
			return nil, notFound(id)
		}
	}
	vs, err := s.h.Values(ctx, refs)
	if err != nil {
		return nil, err
	}
	out := make(map[string]json.RawMessage, len(insts))
	for i, inst := range insts {
		out[inst.ID] = vs[i]
	}
	return out, nil
}

// inProcessBackend returns the client of a backend the hub runs itself, nil
// for any other.
func (h *Hub) inProcessBackend(sb cairn.StorageBackend) cairn.Backend {
	if sb.URL == gotemplate.InProcessURL && sb.TypeRef.Path == gotemplate.TypePath {
		return h.gotemplate
	}
	return nil
}

// GotemplateTypeRef is the Type of gotemplate backend instances.
func GotemplateTypeRef() cairn.TypeRef {
	return cairn.TypeRef{Path: gotemplate.TypePath, Revision: cairn.CoreRevision}
}

// bootstrapGotemplate registers the gotemplate backend Type and the hub's
// in-process instance of it once; safe when replicas start together.
func (h *Hub) bootstrapGotemplate(ctx context.Context) error {
	value, err := json.Marshal(map[string]any{
		"url":           gotemplate.InProcessURL,
		"acceptValue":   false,
		"contextSchema": json.RawMessage(gotemplate.ContextSchema),
	})
	if err != nil {
		return err
	}
	return h.registerSystemBackend(ctx, systemBackend{
		typeRef: GotemplateTypeRef(),
		schema:  json.RawMessage(gotemplate.TypeSchema),
		id:      gotemplate.BackendID,
		name:    "gotemplate",
		alias:   gotemplate.Alias,
		value:   value,
	})
}

// projector prepares the projections of one create batch.
type projector struct {
	h      *Hub
	byID   map[string]*pending
	out    map[string][]string // batch uses edges by from
	stored map[string]cairn.Instance
	values map[string]json.RawMessage // rendered values of batch projections
	state  map[string]error           // done (nil or its error)
	active map[string]bool            // on the current path, to refuse cycles
	added  []UsesRelation
}

// prepareProjections resolves, renders and relates the batch's projections
// (see the comment at the top of this file) and returns edges with the
// projections' uses edges added.
func (h *Hub) prepareProjections(ctx context.Context, items []*pending, edges []UsesRelation) ([]UsesRelation, error) {
	var projs []*pending
	for _, p := range items {
		if isProjection(p.backend) {
			projs = append(projs, p)
		}
	}
	if len(projs) == 0 {
		return edges, nil // the usual batch: no projector to set up
	}
	pr := &projector{h: h, byID: make(map[string]*pending, len(items)), out: map[string][]string{}, stored: map[string]cairn.Instance{},
		values: map[string]json.RawMessage{}, state: map[string]error{}, active: map[string]bool{}}
	for _, p := range items {
		pr.byID[p.inst.ID] = p
	}
	for _, e := range edges {
		pr.out[e.From] = append(pr.out[e.From], e.To)
	}
	var errs []error
	for _, p := range projs {
		if err := pr.prepare(ctx, p); err != nil {
			errs = append(errs, withSubject(err, subjectOf(p.in.Alias)))
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return append(edges, pr.added...), nil
}

func (pr *projector) prepare(ctx context.Context, p *pending) error {
	id := p.inst.ID
	if err, done := pr.state[id]; done {
		return err
	}
	if pr.active[id] {
		return &cairn.Error{Code: cairn.CodeInvalid, IDs: []string{id},
			Msg: fmt.Sprintf("projection %q is part of a cycle of projections that reference each other", p.in.Alias)}
	}
	pr.active[id] = true
	err := pr.prepareOnce(ctx, p)
	delete(pr.active, id)
	pr.state[id] = err
	return err
}

func (pr *projector) prepareOnce(ctx context.Context, p *pending) error {
	doc := p.inst.Latest.Context
	c, err := gotemplate.ParseContext(doc)
	if err != nil {
		return err
	}
	if len(c.BatchValues) > 0 {
		return cairn.Errorf(cairn.CodeInvalid, "context field %q is reserved for the hub", gotemplate.BatchValuesField)
	}
	batch := map[string]json.RawMessage{}
	var refs []string
	for _, name := range sortedNames(c.Variables) {
		v := c.Variables[name]
		var ref string
		switch {
		case v.RelatedTypeInstanceAlias != "":
			if ref, err = pr.resolveAlias(ctx, p, v.RelatedTypeInstanceAlias); err != nil {
				return fmt.Errorf("variable %q: %w", name, err)
			}
			if v.TypeInstanceID != "" && v.TypeInstanceID != ref {
				return cairn.Errorf(cairn.CodeInvalid, "variable %q: typeInstanceID %q is not the instance alias %q resolves to (%q)", name, v.TypeInstanceID, v.RelatedTypeInstanceAlias, ref)
			}
		case v.TypeInstanceID != "":
			ref = v.TypeInstanceID
			if _, inBatch := pr.byID[ref]; !inBatch {
				if _, err := pr.storedInstance(ctx, ref); err != nil {
					return fmt.Errorf("variable %q: %w", name, err)
				}
			}
		default:
			return cairn.Errorf(cairn.CodeInvalid, "variable %q names no TypeInstance: give typeInstanceID or relatedTypeInstanceAlias", name)
		}
		if ref == p.inst.ID {
			return cairn.Errorf(cairn.CodeInvalid, "variable %q: a projection cannot reference itself", name)
		}
		if _, inBatch := pr.byID[ref]; !inBatch {
			src, err := pr.storedInstance(ctx, ref)
			if err != nil {
				return fmt.Errorf("variable %q: %w", name, err)
			}
			if err := pr.h.authorizeSource(ctx, name, src); err != nil {
				return err
			}
		}
		v.TypeInstanceID = ref
		c.Variables[name] = v
		if src, inBatch := pr.byID[ref]; inBatch {
			val, err := pr.batchValue(ctx, src)
			if err != nil {
				return fmt.Errorf("variable %q: %w", name, err)
			}
			batch[ref] = val
		}
		if !slices.Contains(refs, ref) {
			refs = append(refs, ref)
		}
	}

	// The stored context: the one given, with the ids added beside the
	// aliases (seed 000 keeps the alias "for better readability").
	var m map[string]json.RawMessage
	if err := json.Unmarshal(doc, &m); err != nil {
		return cairn.Errorf(cairn.CodeInvalid, "context: %w", err)
	}
	if m["variables"], err = json.Marshal(c.Variables); err != nil {
		return err
	}
	stored, err := json.Marshal(m)
	if err != nil {
		return err
	}
	m[gotemplate.BatchValuesField], err = json.Marshal(batch)
	if err != nil {
		return err
	}
	withBatch, err := json.Marshal(m)
	if err != nil {
		return err
	}
	value, err := p.backend.client.GetPreCreateValue(ctx, cairn.GetPreCreateValueRequest{Context: withBatch})
	if err != nil {
		return pr.h.externalErr(ctx, p.backend.ID, "render the projection", err)
	}
	if err := pr.h.checkValue(ctx, subjectOf(p.in.Alias), p.in.TypeRef, value); err != nil {
		return err
	}
	p.inst.Latest.Context = stored
	pr.values[p.inst.ID] = value
	for _, ref := range refs {
		if !slices.Contains(pr.out[p.inst.ID], ref) {
			pr.added = append(pr.added, UsesRelation{From: p.inst.ID, To: ref})
		}
	}
	return nil
}

// batchValue is the value a referenced instance of the batch will have.
func (pr *projector) batchValue(ctx context.Context, src *pending) (json.RawMessage, error) {
	switch {
	case isProjection(src.backend):
		if err := pr.prepare(ctx, src); err != nil {
			return nil, fmt.Errorf("projection %q it references: %w", src.in.Alias, err)
		}
		return pr.values[src.inst.ID], nil
	case src.value != nil || src.backend.AcceptValue:
		return src.value, nil
	default:
		v, err := src.backend.client.GetPreCreateValue(ctx, cairn.GetPreCreateValueRequest{Context: src.inst.Latest.Context})
		if err != nil {
			return nil, pr.h.externalErr(ctx, src.backend.ID, "get pre-create value", err)
		}
		return v, nil
	}
}

func (pr *projector) storedInstance(ctx context.Context, id string) (cairn.Instance, error) {
	if inst, ok := pr.stored[id]; ok {
		return inst, nil
	}
	found, err := pr.h.st.GetInstances(ctx, []string{id})
	if err != nil {
		return cairn.Instance{}, fmt.Errorf("read TypeInstance %q: %w", id, err)
	}
	if len(found) == 0 {
		return cairn.Instance{}, notFound(id)
	}
	pr.stored[id] = found[0]
	return found[0], nil
}

// resolveAlias finds the one instance with alias in p's uses tree: the
// batch's edges from batch instances, the stored edges from stored ones.
func (pr *projector) resolveAlias(ctx context.Context, p *pending, alias string) (string, error) {
	seen := map[string]bool{p.inst.ID: true}
	queue := slices.Clone(pr.out[p.inst.ID])
	var matches []string
	for len(queue) > 0 {
		id := queue[0]
		queue = queue[1:]
		if seen[id] {
			continue
		}
		seen[id] = true
		var a string
		var next []string
		if b, ok := pr.byID[id]; ok {
			a, next = b.inst.Alias, pr.out[id]
		} else {
			inst, err := pr.storedInstance(ctx, id)
			if err != nil {
				return "", err
			}
			a, next = inst.Alias, inst.Uses
		}
		if a == alias {
			matches = append(matches, id)
		}
		queue = append(queue, next...)
	}
	switch len(matches) {
	case 1:
		return matches[0], nil
	case 0:
		return "", &cairn.Error{Code: cairn.CodeInvalid,
			Msg: fmt.Sprintf("relatedTypeInstanceAlias %q matches no TypeInstance in the uses tree of %q; add a usesRelation from it to the instance", alias, p.in.Alias)}
	default:
		return "", &cairn.Error{Code: cairn.CodeInvalid, IDs: matches,
			Msg: fmt.Sprintf("relatedTypeInstanceAlias %q matches several TypeInstances in the uses tree of %q (%s); use typeInstanceID", alias, p.in.Alias, cairn.QuoteIDs(matches))}
	}
}

// checkProjectionUpdate refuses a new context for a projection that
// references instances it does not already use (uses edges are added at
// create only), and renders it once so a broken template is refused.
func (h *Hub) checkProjectionUpdate(ctx context.Context, b *resolvedBackend, inst cairn.Instance, doc json.RawMessage) error {
	if !isProjection(b) || doc == nil {
		return nil
	}
	c, err := gotemplate.ParseContext(doc)
	if err != nil {
		return err
	}
	found, err := h.st.GetInstances(ctx, []string{inst.ID})
	if err != nil {
		return fmt.Errorf("read TypeInstance %q: %w", inst.ID, err)
	}
	if len(found) == 0 {
		return notFound(inst.ID)
	}
	for _, name := range sortedNames(c.Variables) {
		v := c.Variables[name]
		if v.TypeInstanceID == "" || !slices.Contains(found[0].Uses, v.TypeInstanceID) {
			return cairn.Errorf(cairn.CodeInvalid, "variable %q: an update of a projection may only name, by typeInstanceID, instances the projection already uses; create a new projection to reference others", name)
		}
		src, err := h.st.GetInstancesBrief(ctx, []string{v.TypeInstanceID})
		if err != nil {
			return fmt.Errorf("variable %q: read TypeInstance %q: %w", name, v.TypeInstanceID, err)
		}
		if len(src) == 0 {
			return fmt.Errorf("variable %q: %w", name, notFound(v.TypeInstanceID))
		}
		if err := h.authorizeSource(ctx, name, src[0]); err != nil {
			return err
		}
	}
	value, err := b.client.GetPreCreateValue(ctx, cairn.GetPreCreateValueRequest{Context: doc})
	if err != nil {
		return h.externalErr(ctx, b.ID, "render the projection", err)
	}
	return h.checkValue(ctx, subjectOf(inst.ID), inst.TypeRef, value)
}

// authorizeSource refuses a source of a projection that the caller may not
// read. A read is granted as GraphQL grants it (api/graphql): get on
// typeinstances in the source's namespace, or on the resource its Type is
// served as; a source whose Type marks secrets needs reveal as well, as
// reading its secrets by name does. In-process callers (no user in ctx)
// read everything.
func (h *Hub) authorizeSource(ctx context.Context, variable string, src cairn.Instance) error {
	verb, err := h.deniedRead(ctx, src)
	if err != nil {
		return fmt.Errorf("variable %q: %w", variable, err)
	}
	if verb == "" {
		return nil
	}
	u, _ := cairn.UserFrom(ctx)
	ns := cmp.Or(src.Namespace, cairn.DefaultNamespace)
	return &cairn.Error{Code: cairn.CodeForbidden, IDs: []string{src.ID}, Msg: fmt.Sprintf(
		"variable %q: typeinstances.%s %q is forbidden: User %q cannot %s resource \"typeinstances\" in API group %q in the namespace %q; "+
			"a projection renders only instances that whoever creates or changes it may read",
		variable, rbac.HubGroup, src.ID, u.Name, verb, rbac.HubGroup, ns)}
}

// MayRead reports whether the caller of ctx may read src whole, as GraphQL
// grants a read: get on typeinstances in its namespace or on the resource
// its Type is served as, and reveal as well when its Type marks secrets.
// In-process callers (no user in ctx) may read everything.
func (h *Hub) MayRead(ctx context.Context, src cairn.Instance) (bool, error) {
	verb, err := h.deniedRead(ctx, src)
	return verb == "" && err == nil, err
}

// deniedRead returns the first verb the caller of ctx lacks to read src
// whole (see MayRead), "" when it lacks none.
func (h *Hub) deniedRead(ctx context.Context, src cairn.Instance) (string, error) {
	if _, ok := cairn.UserFrom(ctx); !ok {
		return "", nil
	}
	ns := cmp.Or(src.Namespace, cairn.DefaultNamespace)
	verbs := []string{"get"}
	secret, err := h.marksSecrets(ctx, &src)
	if err != nil {
		return "", err
	}
	if secret {
		verbs = append(verbs, rbac.RevealVerb)
	}
	var served *rbac.Attributes
	t, terr := h.GetType(ctx, src.TypeRef)
	if terr == nil && t.ClusterScoped() {
		ns = "" // granted at the cluster scope only, as over REST
	}
	if terr == nil && t.Names != nil && t.Group != "" {
		served = &rbac.Attributes{ResourceRequest: true, APIGroup: t.Group, Resource: t.Names.Plural, Namespace: ns, Name: src.Name}
	}
	for _, verb := range verbs {
		if h.Authorize(ctx, rbac.Attributes{Verb: verb, ResourceRequest: true, APIGroup: rbac.HubGroup,
			Resource: "typeinstances", Namespace: ns, Name: src.ID}).Allowed {
			continue
		}
		if served != nil {
			a := *served
			a.Verb = verb
			if h.Authorize(ctx, a).Allowed {
				continue
			}
		}
		return verb, nil
	}
	return "", nil
}

func sortedNames(m map[string]gotemplate.Variable) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
