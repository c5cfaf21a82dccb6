package hub

import (
	"cmp"
	"context"
	"fmt"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/auth/rbac"
)

// AuthorizeInstance refuses, with a Forbidden error worded as the API
// server's, verb on the instance name (id once it exists) of Type t in
// namespace ns unless the caller of ctx holds it, granted as GraphQL
// grants it: on typeinstances.hub.cairn.dev in ns, or on the resource the
// Type is served as (flagsenvs.flags.stacks.cairn.dev). It is for the
// controllers that write instances on a caller's behalf (an install): the
// REST guard authorized only the request (create installs), not what it
// writes where. why ends the message. In-process callers (no user in ctx)
// are allowed.
func (h *Hub) AuthorizeInstance(ctx context.Context, verb string, t cairn.TypeRef, ns, name, id, why string) error {
	u, ok := cairn.UserFrom(ctx)
	if !ok {
		return nil
	}
	typ, terr := h.GetType(ctx, t)
	if terr != nil || !typ.ClusterScoped() {
		ns = cmp.Or(ns, cairn.DefaultNamespace)
	} else {
		// An instance of a Cluster Type has no namespace: as for a
		// cluster-scoped resource, only a ClusterRoleBinding grants it.
		ns = ""
	}
	if h.Authorize(ctx, rbac.Attributes{Verb: verb, ResourceRequest: true, APIGroup: rbac.HubGroup,
		Resource: "typeinstances", Namespace: ns, Name: id}).Allowed {
		return nil
	}
	group, resource := rbac.HubGroup, "typeinstances"
	if terr == nil && typ.Names != nil && typ.Group != "" {
		group, resource = typ.Group, typ.Names.Plural
		if h.Authorize(ctx, rbac.Attributes{Verb: verb, ResourceRequest: true, APIGroup: group,
			Resource: resource, Namespace: ns, Name: name}).Allowed {
			return nil
		}
	}
	where := fmt.Sprintf("in the namespace %q", ns)
	if ns == "" {
		where = "at the cluster scope"
	}
	return &cairn.Error{Code: cairn.CodeForbidden, Msg: fmt.Sprintf(
		"%s.%s %q is forbidden: User %q cannot %s resource %q in API group %q %s%s",
		resource, group, name, u.Name, verb, resource, group, where, why)}
}
