package authn

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"

	"github.com/cairn-dev/cairn"
)

// OIDCConfig configures the OIDC authenticator, after the Kubernetes API
// server's --oidc-* flags.
type OIDCConfig struct {
	IssuerURL string
	ClientID  string
	// UsernameClaim is the claim that names the user; default "sub".
	UsernameClaim string
	// UsernamePrefix is put before the user name (e.g. "oidc:") so OIDC
	// users cannot pose as users of other authenticators. As the API
	// server's --oidc-username-prefix: empty is the issuer URL and "#"
	// unless UsernameClaim is "email", and "-" is no prefix.
	UsernamePrefix string
	// GroupsClaim is the claim holding the groups (a string or a list);
	// empty: no groups.
	GroupsClaim  string
	GroupsPrefix string
	// HTTPClient reaches the issuer (e.g. trusting its CA); nil: the default.
	HTTPClient *http.Client
}

// OIDC validates ID tokens (signed JWTs) against the issuer's JWKS, found
// through its discovery document.
type OIDC struct {
	cfg      OIDCConfig
	verifier *oidc.IDTokenVerifier
}

// NewOIDC fetches the issuer's discovery document; keys are fetched (and
// refreshed on rotation) by go-oidc when tokens come.
func NewOIDC(ctx context.Context, cfg OIDCConfig) (*OIDC, error) {
	if cfg.IssuerURL == "" || cfg.ClientID == "" {
		return nil, errors.New("oidc: both the issuer URL and the client ID are required")
	}
	if cfg.UsernameClaim == "" {
		cfg.UsernameClaim = "sub"
	}
	switch {
	case cfg.UsernamePrefix == "-":
		cfg.UsernamePrefix = ""
	case cfg.UsernamePrefix == "" && cfg.UsernameClaim != "email":
		// A subject is unique only within its issuer: unprefixed, "admin"
		// or a token file's "ci" would get those users' bindings.
		cfg.UsernamePrefix = cfg.IssuerURL + "#"
	}
	if cfg.HTTPClient != nil {
		ctx = oidc.ClientContext(ctx, cfg.HTTPClient)
	}
	// Bound discovery so a dead issuer fails start-up clearly. go-oidc keeps
	// only the HTTP client of this context for fetching keys later, not its
	// deadline.
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	p, err := oidc.NewProvider(dctx, cfg.IssuerURL)
	if err != nil {
		return nil, fmt.Errorf("oidc issuer %s: %w", cfg.IssuerURL, err)
	}
	return &OIDC{cfg: cfg, verifier: p.Verifier(&oidc.Config{ClientID: cfg.ClientID})}, nil
}

// AuthenticateToken implements TokenAuthenticator. A token that is not a
// JWT is not ours (ok false); a JWT that fails verification is invalid.
func (o *OIDC) AuthenticateToken(token string) (cairn.User, bool, error) {
	if strings.Count(token, ".") != 2 {
		return cairn.User{}, false, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	idt, err := o.verifier.Verify(ctx, token)
	if err != nil {
		return cairn.User{}, false, errors.Join(ErrInvalid, fmt.Errorf("oidc: %w", err))
	}
	var claims map[string]any
	if err := idt.Claims(&claims); err != nil {
		return cairn.User{}, false, errors.Join(ErrInvalid, fmt.Errorf("oidc: claims: %w", err))
	}
	name, _ := claims[o.cfg.UsernameClaim].(string)
	if name == "" {
		return cairn.User{}, false, errors.Join(ErrInvalid, fmt.Errorf("oidc: the token has no string claim %q", o.cfg.UsernameClaim))
	}
	if o.cfg.UsernameClaim == "email" {
		if v, ok := claims["email_verified"].(bool); ok && !v {
			return cairn.User{}, false, errors.Join(ErrInvalid, errors.New("oidc: the email is not verified"))
		}
	}
	u := cairn.User{Name: o.cfg.UsernamePrefix + name, UID: idt.Subject}
	if o.cfg.GroupsClaim != "" {
		switch g := claims[o.cfg.GroupsClaim].(type) {
		case string:
			u.Groups = []string{o.cfg.GroupsPrefix + g}
		case []any:
			for _, v := range g {
				if s, ok := v.(string); ok {
					u.Groups = append(u.Groups, o.cfg.GroupsPrefix+s)
				}
			}
		}
	}
	return u, true, nil
}
