package graphql

import (
	"context"
	"slices"
	"strings"
	"sync"

	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/auth/audit"
	"github.com/cairn-dev/cairn/auth/rbac"
	"github.com/cairn-dev/cairn/hub"
)

// Every field that reads or writes hub objects asks hub.Authorize, the
// decision REST's guard asks, with the attributes of a REST request for the
// same object. REST reaches an instance two ways, so GraphQL accepts either
// grant, in the instance's own namespace: typeinstances.hub.cairn.dev (named
// by its id, as REST names them), or the resource its Type is served as
// (flags.flipt.io, named by the instance's name). A RoleBinding in
// namespace a thus opens exactly the instances of a. Types, backends and
// the policy are cluster-scoped, as on REST.

// hubGroup is the API group of the hub's own resources (api/rest.HubGroup).
const hubGroup = "hub.cairn.dev"

// guard holds one request's decisions about collections (a list asks once
// per namespace and Type, however many instances it holds) and the REST
// resource of each Type it met.
type guard struct {
	hub *hub.Hub

	mu        sync.Mutex
	ok        map[string]bool // by verb, resource and namespace, for name-less attributes
	resources map[cairn.TypeRef]restResource
}

// restResource is what a Type's instances are served as over REST; zero
// when the Type declares no REST names (or is not registered).
type restResource struct {
	group, plural string
	// cluster: the Type is cluster-scoped; its instances have no namespace.
	cluster bool
}

func newGuard(h *hub.Hub) *guard {
	return &guard{hub: h, ok: map[string]bool{}, resources: map[cairn.TypeRef]restResource{}}
}

// instanceAttrs are the typeinstances attributes of verb on an instance.
func instanceAttrs(verb, namespace, id string) rbac.Attributes {
	if namespace == "" {
		namespace = cairn.DefaultNamespace
	}
	return rbac.Attributes{Verb: verb, ResourceRequest: true, APIGroup: hubGroup, Resource: "typeinstances", Namespace: namespace, Name: id}
}

func clusterAttrs(verb, resource, name string) rbac.Attributes {
	return rbac.Attributes{Verb: verb, ResourceRequest: true, APIGroup: hubGroup, Resource: resource, Name: name}
}

// guarded reports whether ctx carries an authenticated caller; without one
// (in-process callers) hub.Authorize allows everything and nothing needs
// asking.
func guarded(ctx context.Context) bool {
	_, ok := cairn.UserFrom(ctx)
	return ok
}

// allowed reports whether the caller may do a.
func (g *guard) allowed(ctx context.Context, a rbac.Attributes) bool {
	if !guarded(ctx) {
		return true
	}
	if a.Name != "" {
		// A rule without resourceNames grants every name, so what is
		// allowed for the namespace (cached) is allowed for each name in
		// it; only a rule naming objects needs the name asked.
		nameless := a
		nameless.Name = ""
		return g.allowed(ctx, nameless) || g.hub.Authorize(ctx, a).Allowed
	}
	key := a.Verb + " " + a.Resource + "." + a.APIGroup + " " + a.Namespace
	g.mu.Lock()
	ok, seen := g.ok[key]
	g.mu.Unlock()
	if seen {
		return ok
	}
	ok = g.hub.Authorize(ctx, a).Allowed
	g.mu.Lock()
	g.ok[key] = ok
	g.mu.Unlock()
	return ok
}

// resourceOf returns the REST resource instances of ref are served as.
func (g *guard) resourceOf(ctx context.Context, ref cairn.TypeRef) restResource {
	g.mu.Lock()
	r, seen := g.resources[ref]
	g.mu.Unlock()
	if seen {
		return r
	}
	if t, err := g.hub.GetType(ctx, ref); err == nil && t.Names != nil && t.Group != "" {
		r = restResource{group: t.Group, plural: t.Names.Plural, cluster: t.ClusterScoped()}
	}
	g.mu.Lock()
	g.resources[ref] = r
	g.mu.Unlock()
	return r
}

// target is an instance a field reads or writes (or creates: no id, no
// name needed).
type target struct {
	ref       cairn.TypeRef
	namespace string
	id, name  string
}

func targetOf(inst cairn.Instance) target {
	return target{ref: inst.TypeRef, namespace: inst.Namespace, id: inst.ID, name: inst.Name}
}

// may reports whether the caller may do verb on t; when not, the
// typeinstances attributes name the denial. name-less verbs (list,
// create) are decided for the namespace.
func (g *guard) may(ctx context.Context, verb string, t target) (bool, rbac.Attributes) {
	id, name := t.id, t.name
	if verb == "list" || verb == "create" {
		id, name = "", ""
	}
	if !guarded(ctx) {
		return true, instanceAttrs(verb, t.namespace, id)
	}
	r := g.resourceOf(ctx, t.ref)
	a := instanceAttrs(verb, t.namespace, id)
	if r.cluster {
		// As REST asks for a cluster-scoped resource: only a
		// ClusterRoleBinding grants it (and a namespace given is refused
		// by the hub).
		a.Namespace = ""
	}
	if g.allowed(ctx, a) {
		return true, a
	}
	if r.plural == "" {
		return false, a
	}
	return g.allowed(ctx, rbac.Attributes{Verb: verb, ResourceRequest: true, APIGroup: r.group, Resource: r.plural, Namespace: a.Namespace, Name: name}), a
}

// check returns the GraphQL error for a denial of a, nil when allowed.
func (g *guard) check(ctx context.Context, a rbac.Attributes) error {
	if g.allowed(ctx, a) {
		return nil
	}
	msg := forbiddenMessage(ctx, a)
	audit.Annotate(ctx, ForbiddenAnnotation, msg)
	return &gqlerror.Error{Message: msg}
}

// ForbiddenAnnotation is the audit event annotation that records each
// GraphQL field denied (the request itself is allowed: post /graphql).
const ForbiddenAnnotation = "graphql.cairn.dev/forbidden"

// denials returns the denial of verb on each target the caller may not
// touch, once each, so a multi-instance mutation says everything it may not
// do; nothing is done unless there are none.
func (g *guard) denials(ctx context.Context, verb string, ts []target) []string {
	var msgs []string
	for _, t := range ts {
		if ok, a := g.may(ctx, verb, t); !ok {
			if t.id != "" && (verb == "get" || !g.mayGet(ctx, t)) {
				// The caller may not see t: its namespace would tell
				// that the id exists, and where. Word the denial as
				// REST's (typeinstances are cluster-scoped there) and as
				// that of an id that does not exist (hiddenMissing).
				a = clusterAttrs(verb, "typeinstances", t.id)
			}
			if m := forbiddenMessage(ctx, a); !slices.Contains(msgs, m) {
				msgs = append(msgs, m)
			}
		}
	}
	return msgs
}

func (g *guard) mayGet(ctx context.Context, t target) bool {
	ok, _ := g.may(ctx, "get", t)
	return ok
}

// hiddenMissing returns, for each of ids not among found, the denial of verb
// at the cluster scope unless the caller may do it there: only a caller who
// could see any instance may learn that an id does not exist, as on REST.
// Others get the text an instance they may not see gets (denials).
func (g *guard) hiddenMissing(ctx context.Context, verb string, ids []string, found []cairn.Instance) []string {
	var msgs []string
	for _, id := range ids {
		if slices.ContainsFunc(found, func(inst cairn.Instance) bool { return inst.ID == id }) {
			continue
		}
		if a := clusterAttrs(verb, "typeinstances", id); !g.allowed(ctx, a) {
			if m := forbiddenMessage(ctx, a); !slices.Contains(msgs, m) {
				msgs = append(msgs, m)
			}
		}
	}
	return msgs
}

func denied(ctx context.Context, msgs []string) error {
	if len(msgs) == 0 {
		return nil
	}
	for _, m := range msgs {
		audit.Annotate(ctx, ForbiddenAnnotation, m)
	}
	return &gqlerror.Error{Message: strings.Join(msgs, "; ")}
}

// forbiddenMessage is the Kubernetes API server's denial text (also REST's),
// which names user, verb, resource, group and namespace.
func forbiddenMessage(ctx context.Context, a rbac.Attributes) string {
	u, _ := cairn.UserFrom(ctx)
	qual := a.Resource
	if a.APIGroup != "" {
		qual += "." + a.APIGroup
	}
	if a.Name != "" {
		qual += " \"" + a.Name + "\""
	}
	scope := "at the cluster scope"
	if a.Namespace != "" {
		scope = "in the namespace \"" + a.Namespace + "\""
	}
	return qual + " is forbidden: User \"" + u.Name + "\" cannot " + a.Verb + " resource \"" + a.Resource + "\" in API group \"" + a.APIGroup + "\" " + scope
}

// claims returns the denials of createdBy values that name someone other
// than the caller: recording a write as another user's is impersonating
// them, so it needs the impersonate verb on that user, as Impersonate-User
// does. Capact's clients that set createdBy keep working with a role that
// grants it.
func (g *guard) claims(ctx context.Context, names []string) []string {
	u, ok := cairn.UserFrom(ctx)
	if !ok {
		return nil
	}
	var msgs []string
	for _, n := range names {
		if n == "" || n == u.Name {
			continue
		}
		a := rbac.Attributes{Verb: "impersonate", ResourceRequest: true, Resource: "users", Name: n}
		if !g.allowed(ctx, a) {
			if m := forbiddenMessage(ctx, a) + ": createdBy names another user"; !slices.Contains(msgs, m) {
				msgs = append(msgs, m)
			}
		}
	}
	return msgs
}

// guardFrom returns the request's guard.
func guardFrom(ctx context.Context) (*guard, error) {
	l, err := loadersFrom(ctx)
	if err != nil {
		return nil, err
	}
	return l.guard, nil
}

// readable keeps the instances the caller may list in their namespace.
func (g *guard) readable(ctx context.Context, list []cairn.Instance) []cairn.Instance {
	if !guarded(ctx) {
		return list
	}
	return slices.DeleteFunc(list, func(inst cairn.Instance) bool {
		ok, _ := g.may(ctx, "list", targetOf(inst))
		return !ok
	})
}

// checkCluster checks a cluster-scoped hub resource.
func checkCluster(ctx context.Context, verb, resource, name string) error {
	g, err := guardFrom(ctx)
	if err != nil {
		return err
	}
	return g.check(ctx, clusterAttrs(verb, resource, name))
}

// mayCreate checks a create before anything is written: create in each new
// instance's namespace, and get on every existing instance a uses relation
// names (a relation to it blocks its deletion, so it must at least be
// visible to the caller).
func (m *mutation) mayCreate(ctx context.Context, req hub.CreateRequest) error {
	if !guarded(ctx) {
		return nil
	}
	g, err := guardFrom(ctx)
	if err != nil {
		return err
	}
	aliases := map[string]bool{}
	creates := make([]target, len(req.Instances))
	var claimed []string
	for i, in := range req.Instances {
		creates[i] = target{ref: in.TypeRef, namespace: in.Namespace}
		claimed = append(claimed, in.CreatedBy)
		if in.Alias != "" {
			aliases[in.Alias] = true
		}
	}
	var ids []string
	for _, r := range req.UsesRelations {
		for _, end := range []string{r.From, r.To} {
			if !aliases[end] && !slices.Contains(ids, end) {
				ids = append(ids, end)
			}
		}
	}
	// Missing ids are the hub's to report to a caller who may see any
	// instance (hiddenMissing).
	found, err := m.hub.GetInstances(ctx, ids)
	if err != nil {
		return fail(opCreateMany, "", err)
	}
	used := make([]target, len(found))
	for i, inst := range found {
		used[i] = targetOf(inst)
	}
	return denied(ctx, slices.Concat(g.denials(ctx, "create", creates), g.denials(ctx, "get", used),
		g.hiddenMissing(ctx, "get", ids, found), g.claims(ctx, claimed)))
}

// mayChange checks verb on each existing instance of ids, in its namespace,
// and the createdBy values claimed, before the hub is asked; ids that do not
// exist are left for the hub to report in Local Hub's words when the caller
// may do verb on any instance, and denied as one it may not see otherwise.
func (m *mutation) mayChange(ctx context.Context, verb string, ids []string, claimed ...string) error {
	if !guarded(ctx) {
		return nil
	}
	g, err := guardFrom(ctx)
	if err != nil {
		return err
	}
	found, err := m.hub.GetInstances(ctx, ids)
	if err != nil {
		return &gqlerror.Error{Message: err.Error()}
	}
	ts := make([]target, len(found))
	for i, inst := range found {
		ts[i] = targetOf(inst)
	}
	return denied(ctx, slices.Concat(g.denials(ctx, verb, ts), g.hiddenMissing(ctx, verb, ids, found), g.claims(ctx, claimed)))
}
