package client

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/api/rest"
	restclient "github.com/cairn-dev/cairn/api/rest/client"
	"github.com/cairn-dev/cairn/hub"
	"github.com/cairn-dev/cairn/manifest"
	"github.com/cairn-dev/cairn/policy"
	"github.com/cairn-dev/cairn/store"
)

// REST implements Interface with a cairn server's REST API: the hub's own
// resources (hub.cairn.dev/v1 types, typeinstances, backends, policies) and
// their subresources (history, backend check, policy explain).
//
// Differences from the hub in process, both forced by the wire: a
// request's caller is the client's identity (WithActor), so CreatedBy of
// NewInstance and UpdateInstance must be empty or that identity; and
// UpdateInstances takes one update per call, since the REST API replaces
// one TypeInstance per request and a batch could not be all or nothing.
type REST struct {
	c *restclient.Client
}

var _ Interface = (*REST)(nil)

// NewREST returns the REST implementation over c.
func NewREST(c *restclient.Client) *REST { return &REST{c: c} }

func (r *REST) ListTypes(ctx context.Context, f store.TypeFilter) ([]cairn.Type, error) {
	o := restclient.ListOptions{}
	q := url.Values{}
	if f.PathPrefix != "" {
		q.Set("pathPrefix", f.PathPrefix)
	}
	if f.Parent != "" {
		q.Set("parent", f.Parent)
	}
	o.Extra = q
	l, err := r.c.ListAll(ctx, restclient.Types, "", o)
	if err != nil {
		return nil, err
	}
	out := []cairn.Type{}
	for _, raw := range l.Items {
		t, err := decodeType(raw)
		if err != nil {
			return nil, err
		}
		if (f.Group != "" && t.Group != f.Group) || (f.Version != "" && t.Version != f.Version) {
			continue
		}
		out = append(out, t)
	}
	return out, nil
}

func decodeType(raw json.RawMessage) (cairn.Type, error) {
	var o rest.TypeObject
	if err := json.Unmarshal(raw, &o); err != nil {
		return cairn.Type{}, fmt.Errorf("decode a Type the server sent: %w", err)
	}
	t := cairn.Type{Path: o.Spec.Path, Revision: o.Spec.Revision, AdditionalRefs: o.Spec.AdditionalRefs, JSONSchema: o.Spec.JSONSchema,
		CreatedAt: parseTime(o.Metadata.CreationTimestamp)}
	if o.Spec.REST != nil {
		t.Group, t.Version, t.Names = o.Spec.REST.Group, o.Spec.REST.Version, o.Spec.REST.Names
		t.PrinterColumns = o.Spec.REST.AdditionalPrinterColumns
	}
	return t, nil
}

func parseTime(s string) time.Time {
	t, _ := time.Parse(time.RFC3339, s)
	return t
}

func (r *REST) GetType(ctx context.Context, ref cairn.TypeRef) (cairn.Type, error) {
	raw, err := r.c.Get(ctx, restclient.Types, "", rest.TypeName(ref))
	if err != nil {
		return cairn.Type{}, err
	}
	return decodeType(raw)
}

func (r *REST) ApplyType(ctx context.Context, t cairn.Type) (cairn.Type, bool, error) {
	cur, err := r.GetType(ctx, t.Ref())
	switch {
	case err == nil && sameType(cur, t):
		return cur, false, nil
	case err == nil:
		return cur, false, cairn.Errorf(cairn.CodeConflict, "Type %s exists with another definition; Type revisions are immutable", t.Ref())
	case !cairn.HasCode(err, cairn.CodeNotFound):
		return cairn.Type{}, false, err
	}
	doc := map[string]any{"apiVersion": manifest.APIVersion, "kind": "Type",
		"metadata": map[string]any{"name": t.Path}, "spec": typeSpec(t)}
	raw, err := r.c.Create(ctx, restclient.Types, "", doc)
	if err != nil {
		return cairn.Type{}, false, err
	}
	created, err := decodeType(raw)
	return created, true, err
}

// typeSpec is a Type in the form POST types reads (rest.TypeSpec).
func typeSpec(t cairn.Type) rest.TypeSpec {
	s := rest.TypeSpec{Path: t.Path, Revision: t.Revision, AdditionalRefs: t.AdditionalRefs, JSONSchema: t.JSONSchema}
	if t.Group != "" {
		s.REST = &rest.TypeREST{Group: t.Group, Version: t.Version, Names: t.Names, AdditionalPrinterColumns: t.PrinterColumns}
	}
	return s
}

func sameType(a, b cairn.Type) bool {
	x, _ := json.Marshal(typeSpec(a))
	y, _ := json.Marshal(typeSpec(b))
	return cairn.JSONEqual(x, y)
}

func (r *REST) DeleteType(ctx context.Context, ref cairn.TypeRef) error {
	return r.c.Delete(ctx, restclient.Types, "", rest.TypeName(ref), restclient.WriteOptions{})
}

// DecodeInstance reads a TypeInstance as the server serves it (the Capact
// view of hub.cairn.dev/v1 typeinstances).
func DecodeInstance(raw json.RawMessage) (cairn.Instance, error) {
	var o rest.TypeInstanceObject
	if err := json.Unmarshal(raw, &o); err != nil {
		return cairn.Instance{}, fmt.Errorf("decode a TypeInstance the server sent: %w", err)
	}
	seq, _ := strconv.ParseInt(o.Metadata.ResourceVersion, 10, 64)
	inst := cairn.Instance{
		ID: o.Metadata.UID, TypeRef: o.Spec.TypeRef, Namespace: o.Spec.Namespace, Name: o.Spec.Name, Alias: o.Spec.Alias,
		Labels: o.Metadata.Labels, Annotations: o.Metadata.Annotations,
		Backend:  cairn.BackendRef{ID: o.Spec.Backend.ID, Abstract: o.Spec.Backend.Abstract},
		LockedBy: o.Status.LockedBy, CreatedAt: parseTime(o.Metadata.CreationTimestamp),
		Uses: o.Status.Uses, UsedBy: o.Status.UsedBy, Seq: seq,
		Latest: cairn.ResourceVersion{ResourceVersion: o.Status.ResourceVersion, CreatedBy: o.Status.CreatedBy,
			Attributes: o.Spec.Attributes, Value: o.Spec.Value, Context: o.Spec.Backend.Context},
	}
	if inst.Uses == nil {
		inst.Uses = []string{}
	}
	if inst.UsedBy == nil {
		inst.UsedBy = []string{}
	}
	return inst, nil
}

func withoutValue(inst cairn.Instance, withValue bool) cairn.Instance {
	if !withValue {
		inst.Latest.Value = nil
	}
	return inst
}

func (r *REST) GetInstance(ctx context.Context, id string, withValue bool) (cairn.Instance, error) {
	raw, err := r.c.Get(ctx, restclient.TypeInstances, "", id)
	if err != nil {
		return cairn.Instance{}, err
	}
	inst, err := DecodeInstance(raw)
	return withoutValue(inst, withValue), err
}

func (r *REST) GetInstanceByName(ctx context.Context, typePath, namespace, name string, withValue bool) (cairn.Instance, error) {
	// One object asked for by name: its secret values too (?values=true,
	// which needs the get verb), as GetInstance by id shows them.
	// "" is the hub's: the namespace of a cluster-scoped kind's instances,
	// and default for a namespaced kind, whose instances always have one.
	// A list over every namespace finds either.
	list, err := r.listInstances(ctx, store.InstanceFilter{TypePath: typePath, Namespace: namespace, Name: name}, withValue, withValue)
	if err != nil {
		return cairn.Instance{}, err
	}
	if namespace == "" {
		list = slices.DeleteFunc(list, func(in cairn.Instance) bool { return in.Namespace != "" && in.Namespace != cairn.DefaultNamespace })
	}
	if len(list) == 0 {
		return cairn.Instance{}, cairn.Errorf(cairn.CodeNotFound, "TypeInstance %s/%s of Type %s not found", cmpOr(namespace, cairn.DefaultNamespace), name, typePath)
	}
	return list[0], nil
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// ListInstances lists over REST; as the hub's own list, secret values come
// replaced by hub.SecretMarker.
func (r *REST) ListInstances(ctx context.Context, f store.InstanceFilter, withValues bool) ([]cairn.Instance, error) {
	return r.listInstances(ctx, f, withValues, false)
}

func (r *REST) listInstances(ctx context.Context, f store.InstanceFilter, withValues, secrets bool) ([]cairn.Instance, error) {
	if f.Limit != 0 || f.After != nil {
		return nil, errors.New("client: ListInstances over REST lists everything; Limit and After are not supported")
	}
	q := url.Values{}
	set := func(k, v string) {
		if v != "" {
			q.Set(k, v)
		}
	}
	set("typePath", f.TypePath)
	set("typeRevision", f.TypeRevision)
	set("createdBy", f.CreatedBy)
	set("backend", f.BackendID)
	switch {
	case secrets:
		q.Set("values", "true")
	case !withValues:
		// None read from a backend: a backend that is down does not fail
		// a list that does not need its values.
		q.Set("values", "false")
	}
	for _, a := range f.Attributes {
		k := "attribute"
		if a.Exclude {
			k = "excludeAttribute"
		}
		v := a.Path
		if a.Revision != "" {
			v += ":" + a.Revision
		}
		q.Add(k, v)
	}
	// A TypeInstance's metadata.name is its id; its name and namespace
	// are in spec.
	var fields []string
	if f.Namespace != "" {
		fields = append(fields, "spec.namespace="+f.Namespace)
	}
	if f.Name != "" {
		fields = append(fields, "spec.name="+f.Name)
	}
	if f.ID != "" {
		fields = append(fields, "metadata.name="+f.ID)
	}
	sel := make([]string, len(f.Labels))
	for i, l := range f.Labels {
		sel[i] = l.String()
	}
	l, err := r.c.ListAll(ctx, restclient.TypeInstances, "", restclient.ListOptions{
		LabelSelector: strings.Join(sel, ","), FieldSelector: strings.Join(fields, ","), Extra: q})
	if err != nil {
		return nil, err
	}
	out := make([]cairn.Instance, 0, len(l.Items))
	for _, raw := range l.Items {
		inst, err := DecodeInstance(raw)
		if err != nil {
			return nil, err
		}
		out = append(out, withoutValue(inst, withValues))
	}
	sortInstances(out, f.Order)
	return out, nil
}

// sortInstances puts a list in the hub's order o: the server lists
// typeinstances by id, as the Kubernetes API server lists by name.
// Creation times come to the second, so the default order breaks ties
// within a second by id.
func sortInstances(list []cairn.Instance, o store.InstanceOrder) {
	switch o {
	case store.ByID:
		slices.SortFunc(list, func(a, b cairn.Instance) int { return strings.Compare(a.ID, b.ID) })
	case store.ByName:
		slices.SortFunc(list, func(a, b cairn.Instance) int {
			return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name), strings.Compare(a.TypeRef.Path, b.TypeRef.Path))
		})
	default:
		keys := make(map[string]string, len(list))
		for _, in := range list {
			keys[in.TypeRef.Revision] = store.RevisionKey(in.TypeRef.Revision)
		}
		slices.SortFunc(list, func(a, b cairn.Instance) int {
			return cmp.Or(strings.Compare(a.TypeRef.Path, b.TypeRef.Path),
				strings.Compare(keys[b.TypeRef.Revision], keys[a.TypeRef.Revision]),
				strings.Compare(b.TypeRef.Revision, a.TypeRef.Revision),
				b.CreatedAt.Compare(a.CreatedAt), strings.Compare(a.ID, b.ID))
		})
	}
}

func (r *REST) ResourceVersions(ctx context.Context, id string, withValues bool) ([]cairn.ResourceVersion, error) {
	return r.c.History(ctx, id, withValues)
}

// CreateInstances sends the batch as one POST typeinstances: the server
// creates it in one hub transaction, as the hub in process would.
func (r *REST) CreateInstances(ctx context.Context, req hub.CreateRequest) ([]hub.Created, error) {
	uses := map[string][]string{}
	for _, u := range req.UsesRelations {
		uses[u.From] = append(uses[u.From], u.To)
	}
	docs := make([]any, 0, len(req.Instances))
	for i, n := range req.Instances {
		if n.CreatedBy != "" && n.CreatedBy != r.c.Actor() {
			return nil, cairn.Errorf(cairn.CodeInvalid, "instance %d: CreatedBy %q is not the client's identity %q; over REST the caller is who creates", i, n.CreatedBy, r.c.Actor())
		}
		md := map[string]any{"name": n.Name, "namespace": n.Namespace, "alias": n.Alias, "labels": n.Labels, "annotations": n.Annotations}
		spec := map[string]any{"typeRef": n.TypeRef}
		if n.Value != nil {
			spec["value"] = n.Value
		}
		if len(n.Attributes) > 0 {
			spec["attributes"] = n.Attributes
		}
		if b := n.Backend; b != nil {
			be := map[string]any{"id": b.ID}
			if b.Context != nil {
				be["context"] = b.Context
			}
			if b.Abstract {
				be["abstract"] = true
			}
			spec["backend"] = be
		}
		if u := uses[n.Alias]; n.Alias != "" && len(u) > 0 {
			spec["uses"] = u
		}
		docs = append(docs, map[string]any{"apiVersion": manifest.APIVersion, "kind": "TypeInstance", "metadata": md, "spec": spec})
	}
	var body any = docs[0]
	if len(docs) > 1 {
		body = map[string]any{"apiVersion": "v1", "kind": "List", "items": docs}
	}
	raw, err := r.c.Create(ctx, restclient.TypeInstances, "", body)
	if err != nil {
		return nil, err
	}
	var items []json.RawMessage
	if len(docs) == 1 {
		items = []json.RawMessage{raw}
	} else {
		var l struct {
			Items []json.RawMessage `json:"items"`
		}
		if err := json.Unmarshal(raw, &l); err != nil {
			return nil, fmt.Errorf("decode the created TypeInstances: %w", err)
		}
		items = l.Items
	}
	out := make([]hub.Created, 0, len(items))
	for _, it := range items {
		inst, err := DecodeInstance(it)
		if err != nil {
			return nil, err
		}
		out = append(out, hub.Created{Alias: inst.Alias, ID: inst.ID, Instance: inst})
	}
	return out, nil
}

// maxReplaceAttempts bounds the re-reads of an update that carries over
// what it does not change and loses the race to another writer.
const maxReplaceAttempts = 10

// UpdateInstances replaces one TypeInstance (PUT typeinstances/{id}) with
// what up changes, the rest carried over. What is carried over (labels,
// annotations, attributes) is read first, so the PUT is made on the
// resourceVersion read: a writer that changed the instance in between
// makes it fail with a conflict, and the update is read and made again,
// as the hub's own update carries them over in its transaction. An
// up.IfSeq given is the caller's condition: its conflict is the caller's.
func (r *REST) UpdateInstances(ctx context.Context, ups []hub.UpdateInstance) ([]cairn.Instance, error) {
	if len(ups) != 1 {
		return nil, cairn.Errorf(cairn.CodeInvalid, "over REST an update changes one TypeInstance per request, not %d", len(ups))
	}
	up := ups[0]
	if up.CreatedBy != "" && up.CreatedBy != r.c.Actor() {
		return nil, cairn.Errorf(cairn.CodeInvalid, "CreatedBy %q is not the client's identity %q; over REST the caller is who updates", up.CreatedBy, r.c.Actor())
	}
	for attempt := 1; ; attempt++ {
		inst, err := r.replaceInstance(ctx, up)
		if up.IfSeq != 0 || !cairn.HasCode(err, cairn.CodeConflict) || attempt == maxReplaceAttempts {
			if err != nil {
				return nil, err
			}
			return []cairn.Instance{inst}, nil
		}
	}
}

// replaceInstance is one read and PUT of UpdateInstances.
func (r *REST) replaceInstance(ctx context.Context, up hub.UpdateInstance) (cairn.Instance, error) {
	cur, err := r.GetInstance(ctx, up.ID, false)
	if err != nil {
		return cairn.Instance{}, err
	}
	lbls, ann, attrs := cur.Labels, cur.Annotations, cur.Latest.Attributes
	if up.Labels != nil {
		lbls = up.Labels
	}
	if up.Annotations != nil {
		ann = up.Annotations
	}
	if up.Attributes != nil {
		attrs = *up.Attributes
	}
	md := map[string]any{"name": cur.ID, "labels": lbls, "annotations": ann}
	if seq := cmp.Or(up.IfSeq, cur.Seq); seq != 0 {
		md["resourceVersion"] = strconv.FormatInt(seq, 10)
	}
	spec := map[string]any{"attributes": slices.Clip(attrs)}
	if up.Value != nil {
		spec["value"] = up.Value
	}
	if up.Context != nil {
		spec["backend"] = map[string]any{"context": up.Context}
	}
	body := map[string]any{"apiVersion": manifest.APIVersion, "kind": "TypeInstance", "metadata": md, "spec": spec}
	raw, err := r.c.Replace(ctx, restclient.TypeInstances, "", cur.ID, body, restclient.WriteOptions{LockOwner: up.OwnerID})
	if err != nil {
		return cairn.Instance{}, err
	}
	return DecodeInstance(raw)
}

func (r *REST) DeleteInstance(ctx context.Context, id, ownerID string) error {
	return r.c.Delete(ctx, restclient.TypeInstances, "", id, restclient.WriteOptions{LockOwner: ownerID})
}

func (r *REST) LockInstances(ctx context.Context, ids []string, owner string) error {
	return r.c.Lock(ctx, ids, owner)
}

func (r *REST) UnlockInstances(ctx context.Context, ids []string, owner string) error {
	return r.c.Unlock(ctx, ids, owner)
}

// StorageBackend reads the backend (backends/{id}) and its instance, whose
// value holds the backend's own settings.
func (r *REST) StorageBackend(ctx context.Context, id string) (cairn.StorageBackend, error) {
	raw, err := r.c.Get(ctx, restclient.Backends, "", id)
	if err != nil {
		return cairn.StorageBackend{}, err
	}
	var o rest.BackendObject
	if err := json.Unmarshal(raw, &o); err != nil {
		return cairn.StorageBackend{}, fmt.Errorf("decode the backend %q the server sent: %w", id, err)
	}
	sb := storageBackend(o.Metadata.UID, o.Spec)
	if inst, err := r.GetInstance(ctx, sb.ID, true); err == nil {
		sb.ResourceVersion, sb.Value = inst.Latest.ResourceVersion, inst.Latest.Value
	}
	return sb, nil
}

func storageBackend(id string, s rest.BackendSpec) cairn.StorageBackend {
	sb := cairn.StorageBackend{ID: id, Alias: s.Alias, TypeRef: s.TypeRef, Abstract: s.Abstract, URL: s.URL, AcceptValue: s.AcceptValue}
	if len(s.ContextSchema) > 0 && string(s.ContextSchema) != "null" {
		sb.ContextSchema = s.ContextSchema
	}
	return sb
}

func (r *REST) CheckBackend(ctx context.Context, id string) (cairn.StorageBackend, cairn.BackendHealth, error) {
	c, err := r.c.BackendHealth(ctx, id)
	if err != nil {
		return cairn.StorageBackend{}, cairn.BackendHealth{}, err
	}
	return storageBackend(c.ID, c.Backend), c.Health, nil
}

func (r *REST) RotateBackendKeys(ctx context.Context, id string, k hub.KeyRotation) (hub.KeyRotationResult, error) {
	return r.c.RotateKeys(ctx, id, k)
}

func (r *REST) GetPolicy(ctx context.Context) (hub.PolicyDocument, error) {
	raw, err := r.c.Get(ctx, restclient.Policies, "", rest.PolicyName)
	if err != nil {
		return hub.PolicyDocument{}, err
	}
	return decodePolicy(raw)
}

func decodePolicy(raw json.RawMessage) (hub.PolicyDocument, error) {
	var o rest.PolicyObject
	if err := json.Unmarshal(raw, &o); err != nil {
		return hub.PolicyDocument{}, fmt.Errorf("decode the policy the server sent: %w", err)
	}
	seq, _ := strconv.ParseInt(o.Metadata.ResourceVersion, 10, 64)
	return hub.PolicyDocument{Policy: o.Spec, ResourceVersion: int(o.Metadata.Generation), Seq: seq,
		CreatedBy: o.Metadata.Annotations[rest.CreatedByAnnotation], CreatedAt: parseTime(o.Metadata.CreationTimestamp)}, nil
}

func (r *REST) ApplyPolicy(ctx context.Context, p policy.Policy) (hub.PolicyDocument, error) {
	body := rest.PolicyObject{APIVersion: rest.HubGroup + "/" + rest.HubVersion, Kind: "Policy",
		Metadata: rest.ObjectMeta{Name: rest.PolicyName}, Spec: p}
	raw, err := r.c.Replace(ctx, restclient.Policies, "", rest.PolicyName, body, restclient.WriteOptions{})
	if err != nil {
		return hub.PolicyDocument{}, err
	}
	return decodePolicy(raw)
}

func (r *REST) ExplainPolicy(ctx context.Context, path, revision string) (hub.PolicyExplanation, error) {
	return r.c.Explain(ctx, path, revision)
}
