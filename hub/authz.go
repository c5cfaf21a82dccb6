package hub

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/auth/rbac"
	"github.com/cairn-dev/cairn/store"
)

// authz holds the RBAC decision point: the default roles, what the server
// was configured with and the RBAC objects stored in the hub (rbac.go).
type authz struct {
	mu     sync.Mutex // serializes loads; guards config, stored, seq
	config rbac.Policy
	stored rbac.Policy
	// seq is the stored objects' instance's last change when loaded.
	seq     int64
	checked atomic.Int64 // unix nanoseconds of the last look at the store
	cur     atomic.Pointer[rbac.Authorizer]

	// groups are the API groups of the Types, which cairn-editor and
	// cairn-viewer list (rbac.Defaults); guarded by mu, known mirrors them
	// for lock-free reads. groupsMu serializes their reloads, groupsGen is
	// the hub's typesGen they were loaded at, groupsChecked (unix
	// nanoseconds) when they were last loaded.
	groups        []string
	known         atomic.Pointer[map[string]bool]
	groupsMu      sync.Mutex
	groupsGen     atomic.Int64
	groupsChecked atomic.Int64
}

func (a *authz) init(p rbac.Policy) {
	a.config = p
	a.setGroupsLocked(nil)
	a.cur.Store(rbac.New(rbac.Defaults().Merge(p)))
}

func (a *authz) setGroupsLocked(groups []string) {
	a.groups = groups
	known := map[string]bool{}
	for _, g := range rbac.ServedGroups(groups...) {
		known[g] = true
	}
	a.known.Store(&known)
}

// syncGroups reloads the API groups of the Types when a Type changed
// through this hub, or, with force, when a request named a group the
// roles do not list yet (a Type another replica created) and the last
// look is a poll interval old. The default roles are rebuilt when the
// groups changed.
func (h *Hub) syncGroups(ctx context.Context, force bool) error {
	a := &h.authz
	a.groupsMu.Lock()
	defer a.groupsMu.Unlock()
	gen := h.typesGen.Load()
	switch {
	case !force && a.groupsGen.Load() == gen:
		return nil // another caller just did
	case force && a.groupsGen.Load() == gen && time.Now().UnixNano()-a.groupsChecked.Load() < int64(h.pollInterval):
		return nil
	}
	types, err := h.st.ListTypes(ctx, store.TypeFilter{})
	if err != nil {
		return fmt.Errorf("read the API groups of the Types: %w", err)
	}
	var groups []string
	for _, t := range types {
		if t.Group != "" && t.Names != nil {
			groups = append(groups, t.Group)
		}
	}
	groups = rbac.ServedGroups(groups...)
	a.groupsGen.Store(gen)
	a.groupsChecked.Store(time.Now().UnixNano())
	a.mu.Lock()
	defer a.mu.Unlock()
	if slices.Equal(groups, rbac.ServedGroups(a.groups...)) {
		return nil
	}
	a.setGroupsLocked(groups)
	a.setLocked(a.stored)
	return nil
}

func (a *authz) due(interval time.Duration) bool {
	return time.Now().UnixNano()-a.checked.Load() >= int64(interval)
}

func (a *authz) touch() { a.checked.Store(time.Now().UnixNano()) }

// setLocked replaces the stored objects; a.mu is held. A stored object
// named like a default or configured one is left out: those are read-only
// and win (they may have been added to --rbac-file after it was stored).
func (a *authz) setLocked(stored rbac.Policy) {
	a.stored = stored
	taken := map[string]bool{}
	for _, o := range a.readOnly() {
		taken[keyOf(o)] = true
	}
	var keep []RBACObject
	for _, o := range objectsOf(stored) {
		if !taken[keyOf(o)] {
			keep = append(keep, o)
		}
	}
	a.cur.Store(rbac.New(rbac.Defaults(a.groups...).Merge(a.config).Merge(docOf(keep).policy())))
}

// Authorize decides whether the caller carried by ctx (cairn.WithUser) may
// do what attrs describe; it is the one place every façade asks. A context
// without an authenticated user comes from an in-process caller (the CLI in
// local mode, controllers, tests) and is allowed.
func (h *Hub) Authorize(ctx context.Context, attrs rbac.Attributes) rbac.Decision {
	u, ok := cairn.UserFrom(ctx)
	if !ok {
		return rbac.Decision{Allowed: true, Reason: "in-process caller"}
	}
	attrs.User = u
	return h.AuthorizeUser(ctx, attrs)
}

// AuthorizeUser decides attrs for attrs.User, who need not be the caller
// (SubjectAccessReview, impersonation checks).
func (h *Hub) AuthorizeUser(ctx context.Context, attrs rbac.Attributes) rbac.Decision {
	a := h.currentAuthz(ctx)
	d := a.cur.Load().Authorize(attrs)
	if !d.Allowed && attrs.ResourceRequest && !(*a.known.Load())[attrs.APIGroup] && !rbac.Reserved(attrs.APIGroup) {
		// Perhaps a Type of this group was created through another
		// replica: look (at most once a poll interval) and decide again.
		if err := h.syncGroups(ctx, true); err != nil {
			h.log.WarnContext(ctx, "API groups not reloaded", "err", err)
		}
		d = a.cur.Load().Authorize(attrs)
	}
	return d
}

// RulesFor returns the rules u holds in namespace, what a
// SelfSubjectRulesReview reports (kubectl auth can-i --list): those of the
// ClusterRoleBindings that apply to u and of the RoleBindings of namespace,
// as loaded for AuthorizeUser.
func (h *Hub) RulesFor(ctx context.Context, u cairn.User, namespace string) []rbacv1.PolicyRule {
	return h.currentAuthz(ctx).cur.Load().RulesFor(u, namespace)
}

// currentAuthz is the authorizer's state brought up to date: RBAC objects
// written through another replica are seen within the poll interval, and
// the API groups follow the Types; a failed look keeps what is loaded.
func (h *Hub) currentAuthz(ctx context.Context) *authz {
	if err := h.refreshRBAC(ctx, false); err != nil {
		h.log.WarnContext(ctx, "RBAC objects not reloaded", "err", err)
	}
	a := &h.authz
	if a.groupsGen.Load() != h.typesGen.Load() {
		if err := h.syncGroups(ctx, false); err != nil {
			h.log.WarnContext(ctx, "API groups not reloaded", "err", err)
		}
	}
	return a
}

// impersonatorAttr is the log attribute naming the authenticated user who
// impersonated the actor; empty (and left out by slog) when nobody did.
func impersonatorAttr(ctx context.Context) slog.Attr {
	if imp := cairn.Impersonator(ctx); imp != "" {
		return slog.String("impersonator", imp)
	}
	return slog.Attr{}
}
