package rest

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/managedfields"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/auth/rbac"
	"github.com/cairn-dev/cairn/store"
)

// HubGroup is cairn's own API group.
const (
	HubGroup   = "hub.cairn.dev"
	HubVersion = "v1"
)

// resource is one served resource: a user Type's instances, or one of the
// hub's own collections.
type resource struct {
	group, version string
	// gv is group/version, set for the resources of Types (every request
	// to them names it, most of them twice).
	gv         string
	kind       string
	plural     string
	singular   string
	shortNames []string
	namespaced bool
	verbs      []string
	categories []string
	// typ is the Type revision served at group/version; nil for the hub's
	// own resources.
	typ *cairn.Type
	// hubKind names a hub resource: "types", "typeinstances", "backends".
	hubKind string

	// The field manager (apply.go), built on first use.
	fmOnce sync.Once
	fm     *managedfields.FieldManager
	fmErr  error
	// createFields keeps the managed fields of creates (createfields.go).
	createFields createFields
	// fmMemo keeps the managed fields of updates (fieldsmemo.go).
	fmMemo fieldsMemo
}

func (r *resource) apiVersion() string {
	if r.gv != "" {
		return r.gv
	}
	return r.group + "/" + r.version
}

// objectAttrs are the authorization attributes of an object of r, as the
// access guard builds them for a request naming it (without a verb).
func (r *resource) objectAttrs(namespace, name string) rbac.Attributes {
	return rbac.Attributes{ResourceRequest: true, APIGroup: r.group, Resource: r.plural, Namespace: namespace, Name: name}
}

func (r *resource) target(name string) target {
	t := target{group: r.group, kind: r.kind, name: name}
	if r.hubKind == "" {
		t.served = r.plural
	}
	return t
}

var (
	userVerbs = []string{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}
)

// hubResources are served in hub.cairn.dev/v1.
func hubResources() []*resource {
	return append([]*resource{
		{group: HubGroup, version: HubVersion, kind: "Type", plural: "types", singular: "type",
			verbs: []string{"create", "delete", "get", "list"}, hubKind: "types"},
		{group: HubGroup, version: HubVersion, kind: "TypeInstance", plural: "typeinstances", singular: "typeinstance",
			shortNames: []string{"ti"}, categories: []string{"all", "cairn"}, verbs: []string{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}, hubKind: "typeinstances"},
		{group: HubGroup, version: HubVersion, kind: "Backend", plural: "backends", singular: "backend",
			verbs: []string{"get", "list"}, hubKind: "backends"},
		// Locking is an action on several instances at once, all or
		// nothing; like Kubernetes' review resources it is create-only.
		{group: HubGroup, version: HubVersion, kind: "LockRequest", plural: "lockrequests", singular: "lockrequest",
			verbs: []string{"create"}, hubKind: "lockrequests"},
		// The hub's one policy, a singleton named "default" (policy.go).
		{group: HubGroup, version: HubVersion, kind: "Policy", plural: "policies", singular: "policy",
			verbs: []string{"get", "list", "update"}, hubKind: "policies"},
		// The stack catalog (stacks.go): stacks/<name>[@<version>].
		{group: HubGroup, version: HubVersion, kind: "Stack", plural: "stacks", singular: "stack",
			verbs: []string{"create", "get", "list"}, hubKind: "stacks"},
		// Plans and installs of stacks with dependencies (installs.go):
		// create-only actions, like lockrequests.
		{group: HubGroup, version: HubVersion, kind: "Plan", plural: "plans", singular: "plan",
			verbs: []string{"create"}, hubKind: "plans"},
		{group: HubGroup, version: HubVersion, kind: "Install", plural: "installs", singular: "install",
			verbs: []string{"create"}, hubKind: "installs"},
		// Changes backends proposed for review (proposals.go): read-only.
		{group: HubGroup, version: HubVersion, kind: "Proposal", plural: "proposals", singular: "proposal",
			verbs: []string{"get", "list"}, hubKind: "proposals"},
	}, rbacResources()...)
}

// reviewResources are the access reviews the access guard answers, as the
// API server lists them: cluster-scoped, create only. A request that
// reaches this server for them is one the guard does not answer (any
// method but POST): 405, as there.
func reviewResources() []*resource {
	mk := func(group, kind string) *resource {
		plural := strings.ToLower(kind) + "s"
		return &resource{group: group, version: "v1", kind: kind, plural: plural, singular: strings.ToLower(kind),
			verbs: []string{"create"}, categories: []string{}, hubKind: "reviews"}
	}
	return []*resource{
		mk("authorization.k8s.io", "SelfSubjectAccessReview"), mk("authorization.k8s.io", "SelfSubjectRulesReview"),
		mk("authorization.k8s.io", "SubjectAccessReview"), mk("authentication.k8s.io", "SelfSubjectReview"),
	}
}

// resourceTTL bounds how long a Type created or deleted by another process
// takes to show in discovery; changes made through this process's hub show
// at once.
const resourceTTL = 2 * time.Second

// resourceCache holds the served resources derived from the Types.
type resourceCache struct {
	mu     sync.Mutex
	list   []*resource
	gen    int64
	loaded time.Time
}

// resources returns every served resource: the hub's own and one per Type
// revision that declares REST names.
func (s *Server) resources(ctx context.Context) ([]*resource, error) {
	c := &s.cache
	gen := s.hub.TypesGeneration()
	c.mu.Lock()
	if c.list != nil && c.gen == gen && time.Since(c.loaded) < resourceTTL {
		list := c.list
		c.mu.Unlock()
		return list, nil
	}
	c.mu.Unlock()
	list, err := s.loadResources(ctx)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.list, c.gen, c.loaded = list, gen, time.Now()
	c.mu.Unlock()
	return list, nil
}

func (s *Server) loadResources(ctx context.Context) ([]*resource, error) {
	types, err := s.hub.ListTypes(ctx, store.TypeFilter{})
	if err != nil {
		return nil, err
	}
	out := hubResources()
	if s.reviews {
		out = append(out, reviewResources()...)
	}
	for i := range types {
		t := &types[i]
		if t.Group == "" || t.Names == nil {
			continue
		}
		singular := t.Names.Singular
		if singular == "" {
			singular = strings.ToLower(t.Names.Kind)
		}
		// Every served kind is in "all" (kubectl get all) and "cairn",
		// besides the categories its Type declares.
		cats := []string{"all", "cairn"}
		for _, c := range t.Names.Categories {
			if !slices.Contains(cats, c) {
				cats = append(cats, c)
			}
		}
		out = append(out, &resource{
			group: t.Group, version: t.Version, gv: t.Group + "/" + t.Version, kind: t.Names.Kind, plural: t.Names.Plural,
			singular: singular, shortNames: t.Names.ShortNames, namespaced: !t.ClusterScoped(), verbs: userVerbs, typ: t,
			categories: cats,
		})
	}
	return out, nil
}

// findResource resolves group/version/plural (or singular or short name).
func (s *Server) findResource(ctx context.Context, group, version, name string) (*resource, error) {
	all, err := s.resources(ctx)
	if err != nil {
		return nil, err
	}
	if r := lookupResource(all, group, version, name); r != nil {
		return r, nil
	}
	// A Type another replica registered is unknown here until the cache
	// expires; a miss reloads it, at most every missReloadInterval, so a
	// client that found the resource through one replica is not told by
	// another that it does not exist, and unknown paths cannot make every
	// request list the Types.
	c := &s.cache
	c.mu.Lock()
	stale := time.Since(c.loaded) >= missReloadInterval
	c.mu.Unlock()
	if !stale {
		return nil, nil
	}
	gen := s.hub.TypesGeneration()
	all, err = s.loadResources(ctx)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.list, c.gen, c.loaded = all, gen, time.Now()
	c.mu.Unlock()
	return lookupResource(all, group, version, name), nil
}

// missReloadInterval bounds how often a request for an unknown resource
// reloads the served resources.
const missReloadInterval = 250 * time.Millisecond

func lookupResource(all []*resource, group, version, name string) *resource {
	for _, r := range all {
		if r.group == group && r.version == version && r.plural == name {
			return r
		}
	}
	return nil
}

// groupVersions groups resources for discovery, versions sorted newest
// first as Kubernetes prefers (v2 > v1 > v1beta1 > v1alpha1).
func groupVersions(all []*resource) (groups []string, versions map[string][]string) {
	versions = map[string][]string{}
	for _, r := range all {
		if !slices.Contains(versions[r.group], r.version) {
			versions[r.group] = append(versions[r.group], r.version)
		}
	}
	for g, vs := range versions {
		slices.SortFunc(vs, compareAPIVersions)
		versions[g] = vs
		groups = append(groups, g)
	}
	slices.Sort(groups)
	return groups, versions
}

// compareAPIVersions orders v2 before v1 before v1beta2 before v1alpha1.
func compareAPIVersions(a, b string) int {
	ka, kb := versionKey(a), versionKey(b)
	for i := range ka {
		if ka[i] != kb[i] {
			if ka[i] > kb[i] {
				return -1
			}
			return 1
		}
	}
	return strings.Compare(a, b)
}

func versionKey(v string) [3]int {
	rev, err := cairn.RevisionForVersion(v)
	if err != nil {
		return [3]int{}
	}
	var major, n int
	stage := 3
	fmt.Sscanf(rev, "%d", &major)
	switch {
	case strings.Contains(rev, "-alpha."):
		stage = 1
		fmt.Sscanf(rev[strings.Index(rev, "-alpha.")+7:], "%d", &n)
	case strings.Contains(rev, "-beta."):
		stage = 2
		fmt.Sscanf(rev[strings.Index(rev, "-beta.")+6:], "%d", &n)
	}
	return [3]int{major, stage, n}
}

type groupVersionForDiscovery struct {
	GroupVersion string `json:"groupVersion"`
	Version      string `json:"version"`
}

type apiGroup struct {
	Name             string                     `json:"name"`
	Versions         []groupVersionForDiscovery `json:"versions"`
	PreferredVersion groupVersionForDiscovery   `json:"preferredVersion"`
}

func makeGroup(name string, versions []string) apiGroup {
	g := apiGroup{Name: name}
	for _, v := range versions {
		g.Versions = append(g.Versions, groupVersionForDiscovery{GroupVersion: name + "/" + v, Version: v})
	}
	g.PreferredVersion = g.Versions[0]
	return g
}

type apiResource struct {
	Name         string   `json:"name"`
	SingularName string   `json:"singularName"`
	Namespaced   bool     `json:"namespaced"`
	Kind         string   `json:"kind"`
	Verbs        []string `json:"verbs"`
	ShortNames   []string `json:"shortNames,omitempty"`
	Categories   []string `json:"categories,omitempty"`
}

func (s *Server) discoverGroups(w http.ResponseWriter, r *http.Request) {
	all, err := s.resources(r.Context())
	if err != nil {
		writeStatus(w, errorStatus(err, target{}))
		return
	}
	groups, versions := groupVersions(all)
	list := make([]apiGroup, 0, len(groups))
	for _, g := range groups {
		list = append(list, makeGroup(g, versions[g]))
	}
	writeJSON(w, http.StatusOK, map[string]any{"kind": "APIGroupList", "apiVersion": "v1", "groups": list})
}

func (s *Server) discoverGroup(w http.ResponseWriter, r *http.Request, group string) {
	all, err := s.resources(r.Context())
	if err != nil {
		writeStatus(w, errorStatus(err, target{}))
		return
	}
	_, versions := groupVersions(all)
	vs, ok := versions[group]
	if !ok {
		writeStatus(w, notFoundStatus(fmt.Sprintf("the server could not find the requested resource: group %q", group)))
		return
	}
	g := makeGroup(group, vs)
	writeJSON(w, http.StatusOK, map[string]any{"kind": "APIGroup", "apiVersion": "v1",
		"name": g.Name, "versions": g.Versions, "preferredVersion": g.PreferredVersion})
}

func (s *Server) discoverResources(w http.ResponseWriter, r *http.Request, group, version string) {
	all, err := s.resources(r.Context())
	if err != nil {
		writeStatus(w, errorStatus(err, target{}))
		return
	}
	list := []apiResource{}
	for _, res := range all {
		if res.group != group || res.version != version {
			continue
		}
		list = append(list, apiResource{Name: res.plural, SingularName: res.singular, Namespaced: res.namespaced,
			Kind: res.kind, Verbs: res.verbs, ShortNames: res.shortNames, Categories: res.categoriesOrDefault()})
		if res.typ != nil {
			// Every user Type has the status subresource (subresources.go).
			list = append(list, apiResource{Name: res.plural + "/status", SingularName: "", Namespaced: res.namespaced,
				Kind: res.kind, Verbs: []string{"get", "patch", "update"}})
		}
	}
	if len(list) == 0 {
		writeStatus(w, notFoundStatus(fmt.Sprintf("the server could not find the requested resource: %s/%s", group, version)))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"kind": "APIResourceList", "apiVersion": "v1",
		"groupVersion": group + "/" + version, "resources": list})
}

// categoriesOrDefault are the categories discovery shows: kubectl lists
// every resource of a category, so only listable ones are in any.
func (r *resource) categoriesOrDefault() []string {
	switch {
	case !slices.Contains(r.verbs, "list"):
		return nil
	case r.categories != nil:
		return r.categories
	}
	return []string{"cairn"}
}
