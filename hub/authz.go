package hub

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/auth/rbac"
)

// authz holds the RBAC decision point: the default roles, what the server
// was configured with and the RBAC objects stored in the hub.
type authz struct {
	mu     sync.Mutex // serializes rebuilds
	config rbac.Policy
	cur    atomic.Pointer[rbac.Authorizer]
}

func (a *authz) init(p rbac.Policy) {
	a.config = p
	a.cur.Store(rbac.New(rbac.Defaults().Merge(p)))
}

// set replaces the stored objects.
func (a *authz) set(stored rbac.Policy) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.cur.Store(rbac.New(rbac.Defaults().Merge(a.config).Merge(stored)))
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
	return h.authz.cur.Load().Authorize(attrs)
}

// AuthorizeUser decides attrs for attrs.User, who need not be the caller
// (SubjectAccessReview, impersonation checks).
func (h *Hub) AuthorizeUser(attrs rbac.Attributes) rbac.Decision {
	return h.authz.cur.Load().Authorize(attrs)
}

// impersonatorAttr is the log attribute naming the authenticated user who
// impersonated the actor; empty (and left out by slog) when nobody did.
func impersonatorAttr(ctx context.Context) slog.Attr {
	if imp := cairn.Impersonator(ctx); imp != "" {
		return slog.String("impersonator", imp)
	}
	return slog.Attr{}
}
