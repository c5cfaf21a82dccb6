package hub

import (
	"context"
	"fmt"
	"strings"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/auth/rbac"
	"github.com/cairn-dev/cairn/store"
)

// clusterChildrenWhy ends the refusal of a cluster-scoped installation whose
// stack puts a child where its author may not create one.
const clusterChildrenWhy = "; a cluster-scoped installation's stack puts its namespaced children in the namespaces its resources name, and its author must be allowed to create them there (docs/security.md#installs-and-stacks)"

// checkClusterChildren refuses a caller's write of an installation of a
// cluster-scoped kind (ref) when the stack that renders it (pinned: the
// version it pins) puts a child in a namespace where the caller may not
// create that child. The stack controller writes children with its own
// identity; a namespaced installation's stay in its own namespace, which
// creating it there grants, but a cluster-scoped one's go wherever its
// package says, so its author is asked for each. In-process callers are
// not checked, nor a kind no stack defines (the controller reports that).
func (h *Hub) checkClusterChildren(ctx context.Context, ref cairn.TypeRef, name, pinned string) error {
	if _, ok := cairn.UserFrom(ctx); !ok {
		return nil
	}
	entry, err := h.StackFor(ctx, ref, pinned)
	if cairn.HasCode(err, cairn.CodeNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	s, err := entry.Stack()
	if err != nil {
		return err
	}
	asked := map[string]bool{}
	for _, r := range s.NamespacedResources() {
		group, plural, err := h.kindResource(ctx, r.APIVersion(), r.Kind())
		if err != nil {
			return err
		}
		ns := r.Namespace()
		if key := group + "/" + plural + "/" + ns; asked[key] {
			continue
		} else {
			asked[key] = true
		}
		child := name + "-" + r.OriginalName
		if h.Authorize(ctx, rbac.Attributes{Verb: "create", ResourceRequest: true, APIGroup: rbac.HubGroup, Resource: "typeinstances", Namespace: ns}).Allowed ||
			h.Authorize(ctx, rbac.Attributes{Verb: "create", ResourceRequest: true, APIGroup: group, Resource: plural, Namespace: ns, Name: child}).Allowed {
			continue
		}
		u, _ := cairn.UserFrom(ctx)
		return &cairn.Error{Code: cairn.CodeForbidden, Msg: fmt.Sprintf(
			"%s.%s %q is forbidden: User %q cannot create resource %q in API group %q in the namespace %q%s",
			plural, group, child, u.Name, plural, group, ns, clusterChildrenWhy)}
	}
	return nil
}

// kindResource is the REST group and plural apiVersion/kind is served as:
// its Type's, else what KindType would register (without registering it).
func (h *Hub) kindResource(ctx context.Context, apiVersion, kind string) (group, plural string, err error) {
	group, version, ok := strings.Cut(apiVersion, "/")
	if !ok {
		group, version = "", apiVersion
	}
	if group == "" {
		group = "core"
	}
	ts, err := h.st.ListTypes(ctx, store.TypeFilter{Group: group, Version: version})
	if err != nil {
		return "", "", fmt.Errorf("find the Type of %s %s: %w", apiVersion, kind, err)
	}
	for _, t := range ts {
		if t.Names != nil && t.Names.Kind == kind {
			return group, t.Names.Plural, nil
		}
	}
	return group, cairn.PluralForKind(kind), nil
}
