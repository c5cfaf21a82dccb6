package graphql

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strings"

	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/api/graphql/exec"
	"github.com/cairn-dev/cairn/api/graphql/model"
	"github.com/cairn-dev/cairn/auth/rbac"
	"github.com/cairn-dev/cairn/hub"
	"github.com/cairn-dev/cairn/store"
)

// resolver implements the schema by calling the hub; it holds no rules of
// its own beyond translating shapes and errors.
type resolver struct {
	hub    *hub.Hub
	capact bool // Config.Capact
}

func (r *resolver) Mutation() exec.MutationResolver         { return (*mutation)(r) }
func (r *resolver) Query() exec.QueryResolver               { return (*query)(r) }
func (r *resolver) TypeInstance() exec.TypeInstanceResolver { return (*typeInstance)(r) }
func (r *resolver) TypeInstanceBackendReference() exec.TypeInstanceBackendReferenceResolver {
	return (*backendRef)(r)
}
func (r *resolver) TypeInstanceResourceVersionSpec() exec.TypeInstanceResourceVersionSpecResolver {
	return (*spec)(r)
}

type (
	mutation     resolver
	query        resolver
	typeInstance resolver
	backendRef   resolver
	spec         resolver
)

// fail turns a hub error into the GraphQL error clients match.
func fail(op operation, id string, err error) error {
	return &gqlerror.Error{Message: message(op, id, err)}
}

// ---- conversions

func toInstance(inst cairn.Instance) model.TypeInstance {
	out := model.TypeInstance{
		ID:        inst.ID,
		TypeRef:   model.TypeInstanceTypeReference{Path: inst.TypeRef.Path, Revision: inst.TypeRef.Revision},
		Backend:   model.TypeInstanceBackendReference{ID: inst.Backend.ID, Abstract: inst.Backend.Abstract},
		Namespace: inst.Namespace,
		Name:      inst.Name,
		Labels:    []model.Label{},
		Status:    model.RawJSON(inst.Status),
		Instance:  inst,
	}
	if !inst.CreatedAt.IsZero() {
		t := inst.CreatedAt
		out.CreatedAt = &t
	}
	if inst.LockedBy != "" {
		s := inst.LockedBy
		out.LockedBy = &s
	}
	for _, k := range slices.Sorted(maps.Keys(inst.Labels)) {
		out.Labels = append(out.Labels, model.Label{Key: k, Value: inst.Labels[k]})
	}
	return out
}

// instance converts inst, presenting the built-in backend under Capact's
// Type when the handler follows Capact.
func (r *resolver) instance(inst cairn.Instance) model.TypeInstance {
	out := toInstance(inst)
	if r.capact && inst.ID == cairn.BuiltinBackendID {
		out.TypeRef = model.TypeInstanceTypeReference{Path: CapactBuiltinTypePath, Revision: CapactBuiltinTypeRevision}
	}
	return out
}

func toVersion(inst cairn.Instance, rv cairn.ResourceVersion) *model.TypeInstanceResourceVersion {
	out := &model.TypeInstanceResourceVersion{
		ResourceVersion: rv.ResourceVersion,
		Spec: model.TypeInstanceResourceVersionSpec{
			Backend:  model.TypeInstanceResourceVersionSpecBackend{Context: model.RawJSON(rv.Context)},
			Instance: inst,
			Version:  rv,
		},
	}
	if rv.CreatedBy != "" {
		s := rv.CreatedBy
		out.CreatedBy = &s
	}
	if !rv.CreatedAt.IsZero() {
		t := rv.CreatedAt
		out.CreatedAt = &t
	}
	// Never null: Local Hub answers a version without attributes with [] (a
	// relation list), and clients iterate it without a null check.
	out.Metadata.Attributes = make([]model.AttributeReference, len(rv.Attributes))
	for i, a := range rv.Attributes {
		out.Metadata.Attributes[i] = model.AttributeReference{Path: a.Path, Revision: a.Revision}
	}
	return out
}

func attributes(in []model.AttributeReferenceInput) []cairn.AttributeRef {
	if in == nil {
		return nil
	}
	out := make([]cairn.AttributeRef, len(in))
	for i, a := range in {
		out[i] = cairn.AttributeRef{Path: a.Path, Revision: a.Revision}
	}
	return out
}

// raw returns nil for an absent or null Any, so the hub sees "not given".
func raw(j model.RawJSON) json.RawMessage {
	if len(j) == 0 || string(j) == "null" {
		return nil
	}
	return json.RawMessage(j)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// ---- queries

func (q *query) TypeInstances(ctx context.Context, filter *model.TypeInstanceFilter) ([]model.TypeInstance, error) {
	var f store.InstanceFilter
	if filter != nil {
		if filter.TypeRef != nil {
			f.TypePath = filter.TypeRef.Path
			f.TypeRevision = deref(filter.TypeRef.Revision)
			if q.capact && f.TypePath == CapactBuiltinTypePath && (f.TypeRevision == "" || f.TypeRevision == CapactBuiltinTypeRevision) {
				// Capact's clients find the built-in backend by its Type.
				b := q.hub.BuiltinTypeRef()
				f.TypePath, f.TypeRevision = b.Path, b.Revision
			}
		}
		f.CreatedBy = deref(filter.CreatedBy)
		for _, a := range filter.Attributes {
			if a == nil {
				continue
			}
			f.Attributes = append(f.Attributes, store.AttributeFilter{
				Path: a.Path, Revision: deref(a.Revision),
				Exclude: a.Rule != nil && *a.Rule == model.FilterRuleExclude,
			})
		}
	}
	g, err := guardFrom(ctx)
	if err != nil {
		return nil, err
	}
	list, err := q.hub.ListInstances(ctx, f, false)
	if err != nil {
		return nil, fail(opRead, "", err)
	}
	list = g.readable(ctx, list)
	out := make([]model.TypeInstance, len(list))
	for i, inst := range list {
		out[i] = (*resolver)(q).instance(inst)
	}
	return out, nil
}

func (q *query) TypeInstance(ctx context.Context, id string) (*model.TypeInstance, error) {
	g, err := guardFrom(ctx)
	if err != nil {
		return nil, err
	}
	inst, err := q.hub.GetInstance(ctx, id, false)
	if cairn.HasCode(err, cairn.CodeNotFound) {
		// Local Hub answers null for a missing id; a caller who may not
		// read every instance gets the denial an instance it may not see
		// gets, so the answer does not tell which ids exist.
		return nil, denied(ctx, g.hiddenMissing(ctx, "get", []string{id}, nil))
	}
	if err != nil {
		return nil, fail(opRead, id, err)
	}
	if err := denied(ctx, g.denials(ctx, "get", []target{targetOf(inst)})); err != nil {
		return nil, err
	}
	out := (*resolver)(q).instance(inst)
	return &out, nil
}

func (q *query) Types(ctx context.Context, filter *model.TypeFilter) ([]model.HubType, error) {
	var f store.TypeFilter
	if filter != nil {
		f.PathPrefix = deref(filter.PathPattern)
	}
	if err := checkCluster(ctx, "list", "types", ""); err != nil {
		return nil, err
	}
	ts, err := q.hub.ListTypes(ctx, f)
	if err != nil {
		return nil, fail(opRead, "", err)
	}
	out := make([]model.HubType, len(ts))
	for i, t := range ts {
		prefix, name := "", t.Path
		if i := strings.LastIndexByte(t.Path, '.'); i >= 0 {
			prefix, name = t.Path[:i], t.Path[i+1:]
		}
		out[i] = model.HubType{
			Path: t.Path, Revision: t.Revision, Name: name, Prefix: prefix,
			JSONSchema:     model.RawJSON(t.JSONSchema),
			AdditionalRefs: append([]string{}, t.AdditionalRefs...),
		}
		if !t.CreatedAt.IsZero() {
			c := t.CreatedAt
			out[i].CreatedAt = &c
		}
	}
	return out, nil
}

func (q *query) StorageBackends(ctx context.Context) ([]model.StorageBackend, error) {
	l, err := loadersFrom(ctx)
	if err != nil {
		return nil, err
	}
	if err := l.guard.check(ctx, clusterAttrs("list", "backends", "")); err != nil {
		return nil, err
	}
	list, err := q.hub.ListInstances(ctx, store.InstanceFilter{
		Attributes: []store.AttributeFilter{{Path: cairn.StorageAttributePath}},
	}, false)
	if err != nil {
		return nil, fail(opRead, "", err)
	}
	out := make([]model.StorageBackend, 0, len(list))
	for _, inst := range list {
		sb, _, err := l.backends.load(ctx, inst.ID)
		if err != nil {
			return nil, fail(opRead, inst.ID, err)
		}
		b := model.StorageBackend{
			ID:            sb.ID,
			Abstract:      sb.Abstract,
			AcceptValue:   sb.AcceptValue,
			ContextSchema: model.RawJSON(sb.ContextSchema),
			TypeInstance:  (*resolver)(q).instance(inst),
		}
		b.TypeRef = b.TypeInstance.TypeRef // the instance's, as presented
		if sb.Alias != "" {
			b.Alias = &sb.Alias
		}
		if sb.URL != "" {
			b.URL = &sb.URL
		}
		out = append(out, b)
	}
	return out, nil
}

// ---- TypeInstance fields

// related loads instances by id, in the order given (the hub's: type path
// ascending, revision descending, createdAt descending). Ids deleted since
// the parent was read are left out.
func (r *resolver) related(ctx context.Context, ids []string) ([]model.TypeInstance, error) {
	l, err := loadersFrom(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]model.TypeInstance, 0, len(ids))
	for _, id := range ids {
		inst, found, err := l.instances.load(ctx, id)
		if err != nil {
			return nil, fail(opRead, id, err)
		}
		// What the caller may not get is left out, as a deleted one is.
		if !found {
			continue
		}
		if ok, _ := l.guard.may(ctx, "get", targetOf(inst)); ok {
			out = append(out, r.instance(inst))
		}
	}
	return out, nil
}

// withRelations returns obj's instance with its relations: instances that an
// update returned come without them (see hub.UpdateInstances).
func withRelations(ctx context.Context, obj *model.TypeInstance) (cairn.Instance, error) {
	if obj.Instance.Uses != nil && obj.Instance.UsedBy != nil {
		return obj.Instance, nil
	}
	l, err := loadersFrom(ctx)
	if err != nil {
		return cairn.Instance{}, err
	}
	inst, found, err := l.instances.load(ctx, obj.ID)
	if err != nil {
		return cairn.Instance{}, fail(opRead, obj.ID, err)
	}
	if !found {
		return obj.Instance, nil
	}
	return inst, nil
}

func (t *typeInstance) Uses(ctx context.Context, obj *model.TypeInstance) ([]model.TypeInstance, error) {
	inst, err := withRelations(ctx, obj)
	if err != nil {
		return nil, err
	}
	return (*resolver)(t).related(ctx, inst.Uses)
}

func (t *typeInstance) UsedBy(ctx context.Context, obj *model.TypeInstance) ([]model.TypeInstance, error) {
	inst, err := withRelations(ctx, obj)
	if err != nil {
		return nil, err
	}
	return (*resolver)(t).related(ctx, inst.UsedBy)
}

func (t *typeInstance) LatestResourceVersion(ctx context.Context, obj *model.TypeInstance) (*model.TypeInstanceResourceVersion, error) {
	return toVersion(obj.Instance, obj.Instance.Latest), nil
}

// version returns resource version n of obj, nil when it has none. The
// latest comes with the instance; others are loaded once per request.
func version(ctx context.Context, obj *model.TypeInstance, n int) (*model.TypeInstanceResourceVersion, error) {
	if n == obj.Instance.Latest.ResourceVersion {
		return toVersion(obj.Instance, obj.Instance.Latest), nil
	}
	if n < 1 || n > obj.Instance.Latest.ResourceVersion {
		return nil, nil
	}
	rvs, err := versions(ctx, obj)
	if err != nil {
		return nil, err
	}
	for _, rv := range rvs {
		if rv.ResourceVersion == n {
			return toVersion(obj.Instance, rv), nil
		}
	}
	return nil, nil
}

func versions(ctx context.Context, obj *model.TypeInstance) ([]cairn.ResourceVersion, error) {
	l, err := loadersFrom(ctx)
	if err != nil {
		return nil, err
	}
	rvs, _, err := l.versions.load(ctx, obj.ID)
	if err != nil {
		return nil, fail(opRead, obj.ID, err)
	}
	return rvs, nil
}

func (t *typeInstance) FirstResourceVersion(ctx context.Context, obj *model.TypeInstance) (*model.TypeInstanceResourceVersion, error) {
	return version(ctx, obj, 1)
}

func (t *typeInstance) PreviousResourceVersion(ctx context.Context, obj *model.TypeInstance) (*model.TypeInstanceResourceVersion, error) {
	return version(ctx, obj, obj.Instance.Latest.ResourceVersion-1)
}

func (t *typeInstance) ResourceVersion(ctx context.Context, obj *model.TypeInstance, resourceVersion int) (*model.TypeInstanceResourceVersion, error) {
	return version(ctx, obj, resourceVersion)
}

func (t *typeInstance) ResourceVersions(ctx context.Context, obj *model.TypeInstance) ([]model.TypeInstanceResourceVersion, error) {
	if obj.Instance.Latest.ResourceVersion == 1 {
		return []model.TypeInstanceResourceVersion{*toVersion(obj.Instance, obj.Instance.Latest)}, nil
	}
	rvs, err := versions(ctx, obj)
	if err != nil {
		return nil, err
	}
	out := make([]model.TypeInstanceResourceVersion, len(rvs))
	for i, rv := range rvs {
		out[i] = *toVersion(obj.Instance, rv)
	}
	return out, nil
}

// ---- spec and backend details

func (s *spec) Value(ctx context.Context, obj *model.TypeInstanceResourceVersionSpec) (model.RawJSON, error) {
	l, err := loadersFrom(ctx)
	if err != nil {
		return nil, err
	}
	v := obj.Version.Value
	if v == nil {
		if v, err = l.value(ctx, obj.Instance, obj.Version); err != nil {
			return nil, fail(opRead, obj.Instance.ID, err)
		}
	}
	if v == nil || string(bytes.TrimSpace(v)) == "null" {
		// value is Any!: an instance created without a value has none to
		// give. Local Hub stores it as null, and graphql-js (its server)
		// answers a null in a non-null field with this error, the field's
		// nullable parent null; a JSON null here would break typed clients.
		return nil, errors.New("Cannot return null for non-nullable field TypeInstanceResourceVersionSpec.value.")
	}
	if ok, _ := l.guard.may(ctx, rbac.RevealVerb, targetOf(obj.Instance)); !ok {
		// Not granted reveal: secret values redacted, as REST shows them
		// to such a caller (docs/secrets.md).
		one := []cairn.Instance{obj.Instance}
		one[0].Latest.Value = v
		if err := l.guard.hub.RedactSecrets(ctx, one); err != nil {
			return nil, fail(opRead, obj.Instance.ID, err)
		}
		v = one[0].Latest.Value
	}
	return model.RawJSON(v), nil
}

func (s *spec) Instrumentation(ctx context.Context, obj *model.TypeInstanceResourceVersionSpec) (*model.TypeInstanceInstrumentation, error) {
	return nil, nil // not implemented, as in Local Hub
}

// details loads the backend's details, which are the backend's own (REST's
// backends.hub.cairn.dev): reading them needs get on the backend.
func (b *backendRef) details(ctx context.Context, obj *model.TypeInstanceBackendReference) (cairn.StorageBackend, error) {
	l, err := loadersFrom(ctx)
	if err != nil {
		return cairn.StorageBackend{}, err
	}
	if err := l.guard.check(ctx, clusterAttrs("get", "backends", obj.ID)); err != nil {
		return cairn.StorageBackend{}, err
	}
	sb, _, err := l.backends.load(ctx, obj.ID)
	if err != nil {
		return cairn.StorageBackend{}, fail(opRead, obj.ID, err)
	}
	return sb, nil
}

func (b *backendRef) Alias(ctx context.Context, obj *model.TypeInstanceBackendReference) (*string, error) {
	sb, err := b.details(ctx, obj)
	if err != nil || sb.Alias == "" {
		return nil, err
	}
	return &sb.Alias, nil
}

func (b *backendRef) URL(ctx context.Context, obj *model.TypeInstanceBackendReference) (*string, error) {
	sb, err := b.details(ctx, obj)
	if err != nil || sb.URL == "" {
		return nil, err
	}
	return &sb.URL, nil
}

func (b *backendRef) AcceptValue(ctx context.Context, obj *model.TypeInstanceBackendReference) (*bool, error) {
	sb, err := b.details(ctx, obj)
	if err != nil {
		return nil, err
	}
	return &sb.AcceptValue, nil
}

func (b *backendRef) ContextSchema(ctx context.Context, obj *model.TypeInstanceBackendReference) (model.RawJSON, error) {
	sb, err := b.details(ctx, obj)
	if err != nil {
		return nil, err
	}
	return model.RawJSON(sb.ContextSchema), nil
}

// ---- mutations

func newInstance(in model.CreateTypeInstanceInput) hub.NewInstance {
	ni := hub.NewInstance{
		Alias:      deref(in.Alias),
		CreatedBy:  deref(in.CreatedBy),
		Attributes: attributes(in.Attributes),
		Value:      raw(in.Value),
		Namespace:  deref(in.Namespace),
		Name:       deref(in.Name),
	}
	if in.TypeRef != nil {
		ni.TypeRef = cairn.TypeRef{Path: in.TypeRef.Path, Revision: in.TypeRef.Revision}
	}
	if in.Backend != nil {
		ni.Backend = &hub.BackendInput{ID: in.Backend.ID, Context: raw(in.Backend.Context)}
	}
	if len(in.Labels) > 0 {
		ni.Labels = make(map[string]string, len(in.Labels))
		for _, l := range in.Labels {
			ni.Labels[l.Key] = l.Value
		}
	}
	return ni
}

func (m *mutation) create(ctx context.Context, in model.CreateTypeInstancesInput) ([]hub.Created, error) {
	req := hub.CreateRequest{Instances: make([]hub.NewInstance, len(in.TypeInstances))}
	for i, ti := range in.TypeInstances {
		req.Instances[i] = newInstance(ti)
	}
	for _, r := range in.UsesRelations {
		req.UsesRelations = append(req.UsesRelations, hub.UsesRelation{From: r.From, To: r.To})
	}
	if err := m.mayCreate(ctx, req); err != nil {
		return nil, err
	}
	return m.hub.CreateInstances(ctx, req)
}

func (m *mutation) CreateTypeInstances(ctx context.Context, in model.CreateTypeInstancesInput, dryRun *bool) ([]model.CreateTypeInstanceOutput, error) {
	if len(in.TypeInstances) == 0 && len(in.UsesRelations) == 0 {
		return []model.CreateTypeInstanceOutput{}, nil // an empty batch, as Local Hub answers it
	}
	ctx = withDryRun(ctx, dryRun)
	created, err := m.create(ctx, in)
	if err != nil {
		return nil, fail(opCreateMany, "", err)
	}
	out := make([]model.CreateTypeInstanceOutput, len(created))
	for i, c := range created {
		out[i] = model.CreateTypeInstanceOutput{ID: c.ID, Alias: c.Alias}
	}
	return out, nil
}

func (m *mutation) CreateTypeInstance(ctx context.Context, in model.CreateTypeInstanceInput, dryRun *bool) (string, error) {
	ctx = withDryRun(ctx, dryRun)
	created, err := m.create(ctx, model.CreateTypeInstancesInput{TypeInstances: []model.CreateTypeInstanceInput{in}})
	if err != nil {
		return "", fail(opCreateOne, "", err)
	}
	return created[0].ID, nil
}

func (m *mutation) UpdateTypeInstances(ctx context.Context, in []*model.UpdateTypeInstancesInput, dryRun *bool) ([]model.TypeInstance, error) {
	if len(in) == 0 {
		return []model.TypeInstance{}, nil // an empty batch, as Local Hub answers it
	}
	ctx = withDryRun(ctx, dryRun)
	ups := make([]hub.UpdateInstance, 0, len(in))
	for _, u := range in {
		if u == nil {
			continue
		}
		up := hub.UpdateInstance{ID: u.ID, OwnerID: deref(u.OwnerID), CreatedBy: deref(u.CreatedBy)}
		if ti := u.TypeInstance; ti != nil {
			up.Value = raw(ti.Value)
			if ti.Attributes != nil {
				a := attributes(ti.Attributes)
				up.Attributes = &a
			}
			if ti.Backend != nil {
				up.Context = raw(ti.Backend.Context)
			}
		}
		ups = append(ups, up)
	}
	ids := make([]string, len(ups))
	claimed := make([]string, len(ups))
	for i, u := range ups {
		ids[i], claimed[i] = u.ID, u.CreatedBy
	}
	if err := m.mayChange(ctx, "update", ids, claimed...); err != nil {
		return nil, err
	}
	updated, err := m.hub.UpdateInstances(ctx, ups)
	if err != nil {
		return nil, fail(opUpdate, "", err)
	}
	if cairn.IsDryRun(ctx) {
		// The version a dry run would have written exists nowhere to be
		// read back: answer its value as it would have been.
		for i := range updated {
			v := ups[i].Value
			if v == nil {
				cur, err := m.hub.GetInstance(ctx, ups[i].ID, true)
				if err != nil {
					return nil, fail(opUpdate, ups[i].ID, err)
				}
				v = cur.Latest.Value
			}
			updated[i].Latest.Value = v
		}
	}
	out := make([]model.TypeInstance, len(updated))
	for i, inst := range updated {
		out[i] = (*resolver)(m).instance(inst)
	}
	return out, nil
}

func (m *mutation) DeleteTypeInstance(ctx context.Context, id string, ownerID *string, dryRun *bool) (string, error) {
	ctx = withDryRun(ctx, dryRun)
	if err := m.mayChange(ctx, "delete", []string{id}); err != nil {
		return "", err
	}
	if err := m.hub.DeleteInstance(ctx, id, deref(ownerID)); err != nil {
		return "", fail(opDelete, id, err)
	}
	return id, nil
}

func (m *mutation) LockTypeInstances(ctx context.Context, in model.LockTypeInstancesInput, dryRun *bool) ([]string, error) {
	if len(in.Ids) == 0 {
		// Capact's engine locks an Action's TypeInstances whenever their list
		// is not nil, empty included; Local Hub answers [].
		return []string{}, nil
	}
	ctx = withDryRun(ctx, dryRun)
	if err := m.mayChange(ctx, "update", in.Ids); err != nil {
		return nil, err
	}
	if err := m.hub.LockInstances(ctx, in.Ids, in.OwnerID); err != nil {
		return nil, fail(opLock, "", err)
	}
	return in.Ids, nil
}

func (m *mutation) UnlockTypeInstances(ctx context.Context, in model.UnlockTypeInstancesInput, dryRun *bool) ([]string, error) {
	if len(in.Ids) == 0 {
		return []string{}, nil // as lockTypeInstances
	}
	ctx = withDryRun(ctx, dryRun)
	if err := m.mayChange(ctx, "update", in.Ids); err != nil {
		return nil, err
	}
	if err := m.hub.UnlockInstances(ctx, in.Ids, in.OwnerID); err != nil {
		return nil, fail(opUnlock, "", err)
	}
	return in.Ids, nil
}

// Policy returns the current policy document.
func (q *query) Policy(ctx context.Context) (*model.Policy, error) {
	if err := checkCluster(ctx, "get", "policies", "default"); err != nil {
		return nil, err
	}
	doc, err := q.hub.GetPolicy(ctx)
	if err != nil {
		return nil, fail(opRead, "", err)
	}
	raw, err := json.Marshal(doc.Policy)
	if err != nil {
		return nil, fail(opRead, "", err)
	}
	p := &model.Policy{ResourceVersion: doc.ResourceVersion, Document: model.RawJSON(raw)}
	if doc.CreatedBy != "" {
		p.CreatedBy = &doc.CreatedBy
	}
	if !doc.CreatedAt.IsZero() {
		t := doc.CreatedAt
		p.CreatedAt = &t
	}
	return p, nil
}

// withDryRun makes the mutation a dry run when its dryRun argument is true.
func withDryRun(ctx context.Context, dryRun *bool) context.Context {
	if dryRun != nil && *dryRun {
		return cairn.WithDryRun(ctx)
	}
	return ctx
}
