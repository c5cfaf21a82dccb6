package cairn

import "context"

// User is an authenticated caller, in the shape of the Kubernetes API
// server's user.Info: a name, an optional stable UID and the groups RBAC
// binds roles to. Impersonator names the real caller when Name was
// impersonated (Impersonate-User); both are recorded.
type User struct {
	Name         string
	UID          string
	Groups       []string
	Impersonator string
}

// Well-known users and groups, as the Kubernetes API server names them.
const (
	Anonymous       = "system:anonymous"
	Unauthenticated = "system:unauthenticated"
	Authenticated   = "system:authenticated"
	// Masters is the group every authorizer allows everything.
	Masters = "system:masters"
)

type userKey struct{}

// WithUser returns a context carrying the authenticated caller; it also sets
// the actor (WithActor) the hub records as createdBy, lock owner and commit
// author, and the impersonator (Impersonator) when u was impersonated.
func WithUser(ctx context.Context, u User) context.Context {
	return &userContext{Context: ctx, u: u, a: actor{name: u.Name, impersonator: u.Impersonator}}
}

// userContext carries a user and the actor it implies as one value: every
// request gets one, so it is one allocation rather than four
// (context.WithValue twice, each boxing a struct).
type userContext struct {
	context.Context
	u User
	a actor
}

func (c *userContext) Value(key any) any {
	switch key.(type) {
	case userKey:
		return &c.u
	case actorKey:
		return &c.a
	}
	return c.Context.Value(key)
}

// UserFrom returns the authenticated caller carried by ctx; ok is false when
// the request did not pass through an authenticator (in-process callers,
// tests, the CLI's local mode), which the hub treats as trusted.
func UserFrom(ctx context.Context) (u User, ok bool) {
	p, ok := ctx.Value(userKey{}).(*User)
	if !ok {
		return User{}, false
	}
	return *p, true
}
