package authn_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"errors"
	"math/big"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/auth/authn"
)

func TestParseTokenFile(t *testing.T) {
	tf, err := authn.ParseTokenFile(strings.NewReader("# comment\nsecret-1,jane,u1,\"ops,dev\"\nsecret-2,joe,u2\n"))
	if err != nil {
		t.Fatal(err)
	}
	u, ok, err := tf.AuthenticateToken("secret-1")
	if err != nil || !ok || u.Name != "jane" || u.UID != "u1" || !slices.Equal(u.Groups, []string{"ops", "dev", cairn.Authenticated}) {
		t.Fatalf("secret-1: %+v %v %v", u, ok, err)
	}
	if _, ok, _ := tf.AuthenticateToken("secret-3"); ok {
		t.Fatal("an unknown token was accepted")
	}
	for _, tc := range []struct{ in, want string }{
		{"tok,jane\n", "line 1: want token,user,uid"},
		{"ok,a,1\n,jane,u\n", "line 2: the token is empty"},
		{"tok,,u\n", "line 1: the user name is empty"},
		{"tok,a,1\ntok,b,2\n", `line 2: the token of user "b" is already given`},
	} {
		_, err := authn.ParseTokenFile(strings.NewReader(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %v, want %q", tc.in, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "tok,") {
			t.Errorf("%q: the error quotes the token: %v", tc.in, err)
		}
	}
}

func TestChainBearer(t *testing.T) {
	tf, _ := authn.ParseTokenFile(strings.NewReader("s3cret,jane,u1,ops\n"))
	c := &authn.Chain{Tokens: []authn.TokenAuthenticator{tf}}
	for _, tc := range []struct {
		header string
		user   string
		err    bool
	}{
		{"", cairn.Anonymous, false},
		{"Bearer s3cret", "jane", false},
		{"bearer s3cret", "jane", false},
		{"Bearer wrong", "", true},
		{"Basic amFuZTpw", "", true},
		{"Bearer ", "", true},
		{"Bearer a b", "", true},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		if tc.header != "" {
			r.Header.Set("Authorization", tc.header)
		}
		u, err := c.Authenticate(r)
		if tc.err {
			if !errors.Is(err, authn.ErrInvalid) {
				t.Errorf("%q: err %v, want ErrInvalid", tc.header, err)
			}
			if err != nil && strings.Contains(err.Error(), "s3cret") {
				t.Errorf("%q: error quotes the token", tc.header)
			}
			continue
		}
		if err != nil || u.Name != tc.user {
			t.Errorf("%q: %+v %v, want %s", tc.header, u, err, tc.user)
		}
		if tc.user == "jane" && !slices.Contains(u.Groups, cairn.Authenticated) {
			t.Errorf("jane lacks %s: %v", cairn.Authenticated, u.Groups)
		}
	}
}

// ca makes a CA and issues client certificates from it.
type ca struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

func newCA(t *testing.T, name string) *ca {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name}, IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := x509.ParseCertificate(der)
	return &ca{c, key}
}

func (c *ca) issue(t *testing.T, cn string, orgs ...string) *x509.Certificate {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: cn, Organization: orgs},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.cert, &key.PublicKey, c.key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ := x509.ParseCertificate(der)
	return leaf
}

func TestClientCerts(t *testing.T) {
	good, other := newCA(t, "cairn-ca"), newCA(t, "other-ca")
	pool := x509.NewCertPool()
	pool.AddCert(good.cert)
	c := &authn.Chain{Certs: authn.NewClientCerts(pool)}
	req := func(cert *x509.Certificate) *http.Request {
		r := httptest.NewRequest("GET", "/", nil)
		r.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{cert}}
		return r
	}
	u, err := c.Authenticate(req(good.issue(t, "jane", "ops", "dev")))
	if err != nil || u.Name != "jane" || !slices.Contains(u.Groups, "ops") || !slices.Contains(u.Groups, "dev") {
		t.Fatalf("good cert: %+v %v", u, err)
	}
	if _, err := c.Authenticate(req(other.issue(t, "jane", "ops"))); !errors.Is(err, authn.ErrInvalid) {
		t.Fatalf("a certificate of another CA: err %v, want ErrInvalid", err)
	}
}

// issuer is a real OIDC issuer: discovery, JWKS and RS256-signed ID tokens.
type issuer struct {
	srv *httptest.Server
	key *rsa.PrivateKey
}

func newIssuer(t *testing.T) *issuer {
	is := &issuer{}
	is.key, _ = rsa.GenerateKey(rand.Reader, 2048)
	mux := http.NewServeMux()
	is.srv = httptest.NewServer(mux)
	t.Cleanup(is.srv.Close)
	mux.HandleFunc("/.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(map[string]any{"issuer": is.srv.URL, "jwks_uri": is.srv.URL + "/keys",
			"authorization_endpoint": is.srv.URL + "/auth", "token_endpoint": is.srv.URL + "/token",
			"id_token_signing_alg_values_supported": []string{"RS256"}})
	})
	mux.HandleFunc("/keys", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &is.key.PublicKey, KeyID: "k1", Algorithm: "RS256", Use: "sig"}}})
	})
	return is
}

func (is *issuer) token(t *testing.T, key *rsa.PrivateKey, claims map[string]any) string {
	sig, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: key}, (&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", "k1"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := jwt.Signed(sig).Claims(claims).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestOIDC(t *testing.T) {
	is := newIssuer(t)
	o, err := authn.NewOIDC(context.Background(), authn.OIDCConfig{IssuerURL: is.srv.URL, ClientID: "cairn",
		UsernameClaim: "email", UsernamePrefix: "oidc:", GroupsClaim: "groups"})
	if err != nil {
		t.Fatal(err)
	}
	c := &authn.Chain{Tokens: []authn.TokenAuthenticator{o}}
	now := time.Now()
	claims := func(mod func(map[string]any)) map[string]any {
		m := map[string]any{"iss": is.srv.URL, "aud": "cairn", "sub": "123", "email": "jane@example.com", "email_verified": true,
			"groups": []string{"ops"}, "iat": now.Unix(), "exp": now.Add(time.Hour).Unix()}
		if mod != nil {
			mod(m)
		}
		return m
	}
	otherKey, _ := rsa.GenerateKey(rand.Reader, 2048)
	// Forgeries that need no key of the issuer's.
	seg := func(v any) string { b, _ := json.Marshal(v); return base64.RawURLEncoding.EncodeToString(b) }
	unsigned := seg(map[string]string{"alg": "none", "typ": "JWT", "kid": "k1"}) + "." + seg(claims(nil)) + "."
	pub, _ := x509.MarshalPKIXPublicKey(&is.key.PublicKey)
	hs, _ := jose.NewSigner(jose.SigningKey{Algorithm: jose.HS256, Key: pub}, (&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", "k1"))
	hsToken, _ := jwt.Signed(hs).Claims(claims(nil)).Serialize()
	good := strings.Split(is.token(t, is.key, claims(nil)), ".")
	spliced := good[0] + "." + seg(claims(func(m map[string]any) { m["email"] = "root@example.com" })) + "." + good[2]
	for _, tc := range []struct {
		name  string
		token string
		user  string
	}{
		{"valid", is.token(t, is.key, claims(nil)), "oidc:jane@example.com"},
		{"unsigned (alg none)", unsigned, ""},
		{"HS256 keyed with the issuer's public key", hsToken, ""},
		{"claims changed under a valid signature", spliced, ""},
		{"no expiry", is.token(t, is.key, claims(func(m map[string]any) { delete(m, "exp") })), ""},
		{"expired", is.token(t, is.key, claims(func(m map[string]any) { m["exp"] = now.Add(-time.Minute).Unix() })), ""},
		{"signed by another key", is.token(t, otherKey, claims(nil)), ""},
		{"another audience", is.token(t, is.key, claims(func(m map[string]any) { m["aud"] = "other" })), ""},
		{"another issuer", is.token(t, is.key, claims(func(m map[string]any) { m["iss"] = "https://evil.example.com" })), ""},
		{"email not verified", is.token(t, is.key, claims(func(m map[string]any) { m["email_verified"] = false })), ""},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("Authorization", "Bearer "+tc.token)
		u, err := c.Authenticate(r)
		if tc.user == "" {
			if !errors.Is(err, authn.ErrInvalid) {
				t.Errorf("%s: %+v %v, want ErrInvalid", tc.name, u, err)
			}
			continue
		}
		if err != nil || u.Name != tc.user || u.UID != "123" || !slices.Contains(u.Groups, "ops") {
			t.Errorf("%s: %+v %v", tc.name, u, err)
		}
	}
}

func FuzzBearerToken(f *testing.F) {
	tf, _ := authn.ParseTokenFile(strings.NewReader("s3cret,jane,u1,ops\n"))
	c := &authn.Chain{Tokens: []authn.TokenAuthenticator{tf}}
	for _, s := range []string{"Bearer s3cret", "bearer  s3cret ", "Basic x", "Bearer", "Bearer a.b.c", "", "Bearer \x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, h string) {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header["Authorization"] = []string{h}
		u, err := c.Authenticate(r)
		if err != nil {
			if !errors.Is(err, authn.ErrInvalid) {
				t.Fatalf("%q: error %v does not wrap ErrInvalid", h, err)
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Fatalf("%q: the error quotes the token", h)
			}
			return
		}
		// Only the exact token authenticates; nothing else is anonymous.
		if u.Name != "jane" {
			t.Fatalf("%q authenticated as %q without error", h, u.Name)
		}
		tok, _, _ := authn.BearerToken(r.Header)
		if _, pass, ok := r.BasicAuth(); ok {
			tok = pass
		}
		if tok != "s3cret" {
			t.Fatalf("%q authenticated jane with token %q", h, tok)
		}
	})
}

// TestOIDCUsernamePrefix: as in the API server, OIDC user names are
// prefixed with the issuer URL and "#" unless told otherwise, so a subject
// of the issuer named like a user of the token file (or "admin", the admin
// token's) is not that user and does not get that user's bindings.
func TestOIDCUsernamePrefix(t *testing.T) {
	is := newIssuer(t)
	tok := is.token(t, is.key, map[string]any{"iss": is.srv.URL, "aud": "cairn", "sub": "admin", "email": "jane@example.com",
		"email_verified": true, "iat": time.Now().Unix(), "exp": time.Now().Add(time.Hour).Unix()})
	for _, tc := range []struct {
		claim, prefix, want string
	}{
		{"", "", is.srv.URL + "#admin"},
		{"sub", "", is.srv.URL + "#admin"},
		{"sub", "-", "admin"},
		{"sub", "oidc:", "oidc:admin"},
		{"email", "", "jane@example.com"}, // an email names one person whichever issuer says it
		{"email", "oidc:", "oidc:jane@example.com"},
	} {
		o, err := authn.NewOIDC(context.Background(), authn.OIDCConfig{IssuerURL: is.srv.URL, ClientID: "cairn",
			UsernameClaim: tc.claim, UsernamePrefix: tc.prefix})
		if err != nil {
			t.Fatal(err)
		}
		u, ok, err := o.AuthenticateToken(tok)
		if err != nil || !ok || u.Name != tc.want {
			t.Errorf("claim %q prefix %q: %+v %v %v, want %q", tc.claim, tc.prefix, u, ok, err, tc.want)
		}
	}
}
