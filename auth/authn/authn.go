// Package authn authenticates HTTP requests the way the Kubernetes API
// server does: a chain of optional authenticators (static bearer tokens from
// a file, client certificates against a CA, OIDC ID tokens) tried in order.
// A request that presents no credential is anonymous; one that presents a
// credential nobody accepts is refused, never downgraded to anonymous.
package authn

import (
	"errors"
	"net/http"
	"slices"
	"strings"

	"github.com/cairn-dev/cairn"
)

// ErrInvalid is wrapped by every error meaning "a credential was presented
// and it is not valid"; the façade answers 401.
var ErrInvalid = errors.New("invalid credentials")

// Authenticator checks one kind of credential. ok is false with a nil error
// when the request carries no credential of that kind.
type Authenticator interface {
	Authenticate(r *http.Request) (u cairn.User, ok bool, err error)
}

// TokenAuthenticator checks a bearer token.
type TokenAuthenticator interface {
	AuthenticateToken(token string) (u cairn.User, ok bool, err error)
}

// Chain tries client certificates, then each token authenticator on the
// bearer token. The zero Chain authenticates everyone as anonymous.
type Chain struct {
	Certs  *ClientCerts // nil: client certificates are not checked
	Tokens []TokenAuthenticator
	// Peer, when set, authenticates requests without a credential that
	// come from a local process of the server's OS user.
	Peer *Peer
}

// Configured reports whether any authenticator is configured.
func (c *Chain) Configured() bool { return c.Certs != nil || len(c.Tokens) > 0 }

// Authenticate returns the caller. A request without credentials is
// system:anonymous in group system:unauthenticated; every authenticated user
// also gets group system:authenticated.
func (c *Chain) Authenticate(r *http.Request) (cairn.User, error) {
	if _, pass, ok := r.BasicAuth(); ok {
		// Clients that only speak basic auth (Terraform's http backend) give
		// a token as the password; the user name is not trusted.
		return c.token(pass)
	}
	if tok, present, err := BearerToken(r.Header); present {
		if err != nil {
			return cairn.User{}, err
		}
		return c.token(tok)
	}
	if c.Certs != nil {
		u, ok, err := c.Certs.Authenticate(r)
		if err != nil {
			return cairn.User{}, err
		}
		if ok {
			return authenticated(u), nil
		}
	}
	if c.Peer != nil {
		if u, ok := c.Peer.Authenticate(r); ok {
			return authenticated(u), nil
		}
	}
	return AnonymousUser(), nil
}

func (c *Chain) token(tok string) (cairn.User, error) {
	if tok == "" {
		return cairn.User{}, errors.Join(ErrInvalid, errors.New("the token is empty"))
	}
	for _, t := range c.Tokens {
		u, ok, err := t.AuthenticateToken(tok)
		if err != nil {
			return cairn.User{}, err
		}
		if ok {
			return authenticated(u), nil
		}
	}
	return cairn.User{}, errors.Join(ErrInvalid, errors.New("the token is not valid"))
}

// AnonymousUser is the caller that presented no credential.
func AnonymousUser() cairn.User {
	return cairn.User{Name: cairn.Anonymous, Groups: []string{cairn.Unauthenticated}}
}

func authenticated(u cairn.User) cairn.User {
	if !slices.Contains(u.Groups, cairn.Authenticated) {
		u.Groups = append(slices.Clip(u.Groups), cairn.Authenticated)
	}
	return u
}

// BearerToken extracts the token of an "Authorization: Bearer" header.
// present is false when there is no Authorization header; a header that is
// there but malformed is an error (wrapping ErrInvalid) that never quotes it.
func BearerToken(h http.Header) (token string, present bool, err error) {
	vals := h.Values("Authorization")
	if len(vals) == 0 {
		return "", false, nil
	}
	if len(vals) > 1 {
		return "", true, errors.Join(ErrInvalid, errors.New("more than one Authorization header"))
	}
	scheme, tok, found := strings.Cut(strings.TrimSpace(vals[0]), " ")
	if !found || !strings.EqualFold(scheme, "bearer") {
		return "", true, errors.Join(ErrInvalid, errors.New(`the Authorization header is not "Bearer <token>"`))
	}
	tok = strings.TrimSpace(tok)
	if tok == "" || strings.ContainsAny(tok, " \t\r\n") {
		return "", true, errors.Join(ErrInvalid, errors.New("the bearer token is empty or contains spaces"))
	}
	return tok, true, nil
}
