package graphql

import (
	"context"
	"slices"
	"strings"
	"sync"

	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/auth/rbac"
	"github.com/cairn-dev/cairn/hub"
)

// Every field that reads or writes hub objects asks hub.Authorize, the
// decision REST's guard asks, with the attributes a REST request for the
// same object would carry. GraphQL's TypeInstances are checked as
// typeinstances.hub.cairn.dev in the instance's own namespace (named by its
// id, as REST names them), so a RoleBinding in namespace a opens exactly the
// instances of a; Types, backends and the policy are cluster-scoped as on
// REST.

// hubGroup is the API group of the hub's own resources (api/rest.HubGroup).
const hubGroup = "hub.cairn.dev"

// guard holds one request's decisions about collections (a list asks once
// per namespace, however many instances it holds).
type guard struct {
	hub *hub.Hub
	mu  sync.Mutex
	ok  map[string]bool // by verb, resource and namespace, for name-less attributes
}

func newGuard(h *hub.Hub) *guard { return &guard{hub: h, ok: map[string]bool{}} }

func instanceAttrs(verb, namespace, id string) rbac.Attributes {
	if namespace == "" {
		namespace = cairn.DefaultNamespace
	}
	return rbac.Attributes{Verb: verb, ResourceRequest: true, APIGroup: hubGroup, Resource: "typeinstances", Namespace: namespace, Name: id}
}

func clusterAttrs(verb, resource, name string) rbac.Attributes {
	return rbac.Attributes{Verb: verb, ResourceRequest: true, APIGroup: hubGroup, Resource: resource, Name: name}
}

// allowed reports whether the caller may do a.
func (g *guard) allowed(ctx context.Context, a rbac.Attributes) bool {
	if _, ok := cairn.UserFrom(ctx); !ok {
		return true // in-process caller: hub.Authorize allows it too
	}
	if a.Name != "" {
		return g.hub.Authorize(ctx, a).Allowed
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

// check returns the GraphQL error for a denial of a, nil when allowed.
func (g *guard) check(ctx context.Context, a rbac.Attributes) error {
	if g.allowed(ctx, a) {
		return nil
	}
	return &gqlerror.Error{Message: forbiddenMessage(ctx, a)}
}

// checkAll checks every attribute set and reports every denial at once, so a
// multi-instance mutation says everything it may not do; nothing is done
// unless all are allowed.
func (g *guard) checkAll(ctx context.Context, as []rbac.Attributes) error {
	var msgs []string
	for _, a := range as {
		if !g.allowed(ctx, a) {
			if m := forbiddenMessage(ctx, a); !slices.Contains(msgs, m) {
				msgs = append(msgs, m)
			}
		}
	}
	if len(msgs) == 0 {
		return nil
	}
	return &gqlerror.Error{Message: strings.Join(msgs, "; ")}
}

// forbiddenMessage is the Kubernetes API server's denial text (also REST's),
// which names user, verb, resource, group and namespace.
func forbiddenMessage(ctx context.Context, a rbac.Attributes) string {
	u, _ := cairn.UserFrom(ctx)
	qual := a.Resource + "." + a.APIGroup
	if a.Name != "" {
		qual += " \"" + a.Name + "\""
	}
	scope := "at the cluster scope"
	if a.Namespace != "" {
		scope = "in the namespace \"" + a.Namespace + "\""
	}
	return qual + " is forbidden: User \"" + u.Name + "\" cannot " + a.Verb + " resource \"" + a.Resource + "\" in API group \"" + a.APIGroup + "\" " + scope
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
	if _, ok := cairn.UserFrom(ctx); !ok {
		return list
	}
	return slices.DeleteFunc(list, func(inst cairn.Instance) bool {
		return !g.allowed(ctx, instanceAttrs("list", inst.Namespace, ""))
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
	if _, ok := cairn.UserFrom(ctx); !ok {
		return nil
	}
	g, err := guardFrom(ctx)
	if err != nil {
		return err
	}
	var as []rbac.Attributes
	aliases := map[string]bool{}
	for _, in := range req.Instances {
		as = append(as, instanceAttrs("create", in.Namespace, ""))
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
	// Missing ids are the hub's to report.
	found, err := m.hub.GetInstances(ctx, ids)
	if err != nil {
		return fail(opCreateMany, "", err)
	}
	for _, inst := range found {
		as = append(as, instanceAttrs("get", inst.Namespace, inst.ID))
	}
	return g.checkAll(ctx, as)
}

// mayChange checks verb on each existing instance of ids, in its namespace,
// before the hub is asked; ids that do not exist are left for the hub to
// report in Local Hub's words.
func (m *mutation) mayChange(ctx context.Context, verb string, ids []string) error {
	if _, ok := cairn.UserFrom(ctx); !ok {
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
	as := make([]rbac.Attributes, len(found))
	for i, inst := range found {
		as[i] = instanceAttrs(verb, inst.Namespace, inst.ID)
	}
	return g.checkAll(ctx, as)
}
