package hub

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/auth/rbac"
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
}

func (a *authz) init(p rbac.Policy) {
	a.config = p
	a.cur.Store(rbac.New(rbac.Defaults().Merge(p)))
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
	a.cur.Store(rbac.New(rbac.Defaults().Merge(a.config).Merge(docOf(keep).policy())))
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
	// RBAC objects written through another replica are seen within the
	// poll interval; a failed look keeps what is loaded.
	if err := h.refreshRBAC(ctx, false); err != nil {
		h.log.WarnContext(ctx, "RBAC objects not reloaded", "err", err)
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
