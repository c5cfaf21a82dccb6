package access_test

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/cairn-dev/cairn/api/access"
	"github.com/cairn-dev/cairn/api/graphql"
	"github.com/cairn-dev/cairn/api/rest"
	"github.com/cairn-dev/cairn/auth/audit"
	"github.com/cairn-dev/cairn/auth/authn"
	"github.com/cairn-dev/cairn/auth/rbac"
	"github.com/cairn-dev/cairn/hub"
	"github.com/cairn-dev/cairn/store/sqlite"
)

const policyYAML = `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: viewers}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cairn-viewer}
subjects: [{kind: User, name: vic}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: editors, namespace: a}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cairn-editor}
subjects: [{kind: User, name: ed}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: flag-updater, namespace: a}
rules: [{apiGroups: [flipt.io], resources: [flags], verbs: [get, update]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: updaters, namespace: a}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: flag-updater}
subjects: [{kind: User, name: upd}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: flag-patcher, namespace: a}
rules: [{apiGroups: [flipt.io], resources: [flags], verbs: [get, patch]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: patchers, namespace: a}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: flag-patcher}
subjects: [{kind: User, name: pat}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: flag-status-writer, namespace: a}
rules:
- {apiGroups: [flipt.io], resources: [flags/status], verbs: [get, update, patch]}
- {apiGroups: [example.org], resources: [vaults/status], verbs: [get, update, patch]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: status-writers, namespace: a}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: flag-status-writer}
subjects: [{kind: User, name: stat}]`

const tokens = "viewer-token,vic,u-vic\nupdater-token,upd,u-upd\npatcher-token,pat,u-pat\nstatus-token,stat,u-stat\n"

type env struct {
	url      string
	client   *http.Client // trusts the server, presents no certificate
	certFor  map[string]tls.Certificate
	tokenFor map[string]string
	audit    string
	flush    func() error // the audit writer's
	caFile   string
	requests int // made through do, each of which the audit log must record
}

type ca struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

func newCA(t *testing.T) *ca {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ca"}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, _ := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	c, _ := x509.ParseCertificate(der)
	return &ca{c, key}
}

func (c *ca) client(t *testing.T, cn string, orgs ...string) tls.Certificate {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn, Organization: orgs},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.cert, &key.PublicKey, c.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// oidcIssuer serves discovery and JWKS and signs ID tokens with RS256.
func oidcIssuer(t *testing.T) (url string, sign func(key *rsa.PrivateKey, sub string, groups []string, exp time.Time) string, key *rsa.PrivateKey) {
	key, _ = rsa.GenerateKey(rand.Reader, 2048)
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	mux.HandleFunc("/.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(map[string]any{"issuer": srv.URL, "jwks_uri": srv.URL + "/keys", "authorization_endpoint": srv.URL + "/auth",
			"id_token_signing_alg_values_supported": []string{"RS256"}})
	})
	mux.HandleFunc("/keys", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: "k", Algorithm: "RS256", Use: "sig"}}})
	})
	sign = func(k *rsa.PrivateKey, sub string, groups []string, exp time.Time) string {
		s, _ := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: k}, (&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", "k"))
		tok, err := jwt.Signed(s).Claims(map[string]any{"iss": srv.URL, "aud": "cairn", "sub": sub, "groups": groups,
			"iat": time.Now().Unix(), "exp": exp.Unix()}).Serialize()
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	return srv.URL, sign, key
}

// sqliteHub is a hub on a fresh SQLite file, closed with the test.
func sqliteHub(t *testing.T) *hub.Hub {
	t.Helper()
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "cairn.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	h, err := hub.New(t.Context(), hub.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func start(t *testing.T) *env {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "cairn.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	var pol rbac.Policy
	for doc := range strings.SplitSeq(policyYAML, "\n---\n") {
		if err := pol.Parse([]byte(doc)); err != nil {
			t.Fatal(err)
		}
	}
	h, err := hub.New(ctx, hub.Config{Store: st, RBAC: pol})
	if err != nil {
		t.Fatal(err)
	}
	tf, err := authn.ParseTokenFile(strings.NewReader(tokens))
	if err != nil {
		t.Fatal(err)
	}
	issuer, sign, issuerKey := oidcIssuer(t)
	oc, err := authn.NewOIDC(ctx, authn.OIDCConfig{IssuerURL: issuer, ClientID: "cairn", UsernamePrefix: "oidc:", GroupsClaim: "groups"})
	if err != nil {
		t.Fatal(err)
	}
	good, other := newCA(t), newCA(t)
	pool := x509.NewCertPool()
	pool.AddCert(good.cert)
	auditPath := filepath.Join(t.TempDir(), "audit.log")
	aw, err := audit.Open(auditPath, 10<<20, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { aw.Close() })
	g := access.New(access.Config{Authn: &authn.Chain{Certs: authn.NewClientCerts(pool), Tokens: []authn.TokenAuthenticator{tf, oc}},
		Authz: h, Audit: aw, AuditLevel: audit.LevelRequest})
	mux := http.NewServeMux()
	g.Handle(mux)
	mux.Handle("/graphql", graphql.New(graphql.Config{Hub: h}))
	mux.Handle("/", rest.New(rest.Config{Hub: h, AccessReviews: true}))
	srv := httptest.NewUnstartedServer(g.Wrap(mux))
	srv.TLS = &tls.Config{ClientAuth: tls.RequestClientCert}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	caFile := filepath.Join(t.TempDir(), "ca.crt")
	os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600)
	otherKey, _ := rsa.GenerateKey(rand.Reader, 2048)
	return &env{url: srv.URL, client: srv.Client(), audit: auditPath, flush: aw.Flush, caFile: caFile,
		certFor: map[string]tls.Certificate{"editor of a (cert)": good.client(t, "ed", "team-a"), "cert of another CA": other.client(t, "admin", "cairn:admins")},
		tokenFor: map[string]string{
			"viewer (token file)":     "viewer-token",
			"updater of a (token)":    "updater-token",
			"patcher of a (token)":    "patcher-token",
			"status writer of a":      "status-token",
			"admin (OIDC)":            sign(issuerKey, "root", []string{rbac.AdminsGroup}, time.Now().Add(time.Hour)),
			"expired OIDC token":      sign(issuerKey, "root", []string{rbac.AdminsGroup}, time.Now().Add(-time.Minute)),
			"OIDC token of other key": sign(otherKey, "root", []string{rbac.AdminsGroup}, time.Now().Add(time.Hour)),
		}}
}

func (e *env) do(t *testing.T, who, method, path, body string, hdr ...string) (int, string) {
	t.Helper()
	e.requests++
	c := e.client
	if cert, ok := e.certFor[who]; ok {
		tr := e.client.Transport.(*http.Transport).Clone()
		tr.TLSClientConfig.Certificates = []tls.Certificate{cert}
		c = &http.Client{Transport: tr}
	}
	req, _ := http.NewRequest(method, e.url+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if method == "PATCH" {
		req.Header.Set("Content-Type", "application/merge-patch+json")
	}
	if tok, ok := e.tokenFor[who]; ok {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i] == "Content-Type" {
			req.Header.Set(hdr[i], hdr[i+1]) // in place of the default
			continue
		}
		req.Header.Add(hdr[i], hdr[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var sb strings.Builder
	bufio.NewReader(resp.Body).WriteTo(&sb)
	return resp.StatusCode, sb.String()
}

const flagsRD = `{"apiVersion": "cup.flipt.io/v1alpha1", "kind": "ResourceDefinition", "metadata": {"name": "flags.flipt.io"},
 "names": {"kind": "Flag", "singular": "flag", "plural": "flags"},
 "spec": {"group": "flipt.io", "versions": {"v1": {"schema": {"type": "object", "properties": {"description": {"type": "string"}}}}}}}`

// ti is a namespaced Flag whose value holds a would-be secret.
func ti(ns, name string) string {
	return fmt.Sprintf(`{"apiVersion":"flipt.io/v1","kind":"Flag","metadata":{"name":%q,"namespace":%q},
	"spec":{"description":"hunter2-%s"}}`, name, ns, name)
}

// TestMatrix is the identity x verb x resource matrix over REST and GraphQL.
func TestMatrix(t *testing.T) {
	e := start(t)
	const (
		anon   = "anonymous"
		viewer = "viewer (token file)"
		editor = "editor of a (cert)"
		admin  = "admin (OIDC)"
	)
	invalid := []string{"expired OIDC token", "OIDC token of other key", "cert of another CA"}
	if code, out := e.do(t, admin, "POST", "/apis/hub.cairn.dev/v1/types", flagsRD); code != 201 {
		t.Fatalf("register flags: %d %s", code, out)
	}
	for _, ns := range []string{"a", "b"} {
		if code, out := e.do(t, admin, "POST", "/apis/flipt.io/v1/namespaces/"+ns+"/flags", ti(ns, "seed")); code != 201 {
			t.Fatalf("seed a flag in %s: %d %s", ns, code, out)
		}
	}
	type op struct {
		name, method, path string
		body               func(who string) string
		ok                 int
	}
	slug := func(who string) string {
		return strings.Map(func(r rune) rune {
			if r >= 'a' && r <= 'z' {
				return r
			}
			return -1
		}, who)
	}
	ops := []op{
		{"create in a", "POST", "/apis/flipt.io/v1/namespaces/a/flags", func(w string) string { return ti("a", "x"+slug(w)) }, 201},
		{"create in b", "POST", "/apis/flipt.io/v1/namespaces/b/flags", func(w string) string { return ti("b", "x"+slug(w)) }, 201},
		{"list in a", "GET", "/apis/flipt.io/v1/namespaces/a/flags", nil, 200},
		{"list everywhere", "GET", "/apis/flipt.io/v1/flags", nil, 200},
		{"graphql query", "POST", "/graphql", func(string) string { return `{"query":"{ typeInstances { id } }"}` }, 200},
		{"graphql mutation", "POST", "/graphql", func(w string) string {
			return `{"query":"mutation { createTypeInstance(in: {typeRef: {path: \"cap.type.x\", revision: \"0.1.0\"}, value: {}}) }"}`
		}, 200},
		{"metrics path", "GET", "/metrics", nil, 404}, // allowed through, nothing served there in this mux
		{"get in a", "GET", "/apis/flipt.io/v1/namespaces/a/flags/seed", nil, 200},
		{"get in b", "GET", "/apis/flipt.io/v1/namespaces/b/flags/seed", nil, 200},
		{"patch in a", "PATCH", "/apis/flipt.io/v1/namespaces/a/flags/seed", func(string) string { return `{"metadata":{"labels":{"x":"y"}}}` }, 200},
		{"delete in b", "DELETE", "/apis/flipt.io/v1/namespaces/b/flags/seed?dryRun=All", nil, 200},
		{"list types", "GET", "/apis/hub.cairn.dev/v1/types", nil, 200},
		{"create a type", "POST", "/apis/hub.cairn.dev/v1/types", func(w string) string {
			return strings.NewReplacer("flags", slug(w)+"s", "Flag", "X"+slug(w)).Replace(flagsRD)
		}, 201},
		{"list backends", "GET", "/apis/hub.cairn.dev/v1/backends", nil, 200},
		{"list role bindings in a", "GET", "/apis/rbac.authorization.k8s.io/v1/namespaces/a/rolebindings", nil, 200},
		{"bind in a", "POST", "/apis/rbac.authorization.k8s.io/v1/namespaces/a/rolebindings", func(w string) string {
			return `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"RoleBinding","metadata":{"name":"b-` + slug(w) + `","namespace":"a"},
			 "roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"cairn-editor"},"subjects":[{"kind":"Group","name":"system:unauthenticated"}]}`
		}, 201},
		// cup's API (rest.CupPrefix): the same decisions as for /apis.
		{"cup definitions", "GET", "/cup/apis", nil, 200},
		{"cup list in a", "GET", "/cup/apis/flipt.io/v1/namespaces/a/flags", nil, 200},
		{"cup get in b", "GET", "/cup/apis/flipt.io/v1/namespaces/b/flags/seed", nil, 200},
		{"cup put in a", "PUT", "/cup/apis/flipt.io/v1/namespaces/a/flags/cupped", func(w string) string {
			return strings.Replace(ti("a", "cupped"), "hunter2-cupped", "cupped by "+slug(w), 1) // each writer changes it
		}, 202},
		{"cup delete in b", "DELETE", "/cup/apis/flipt.io/v1/namespaces/b/flags/seed", nil, 202},
	}
	// Every authenticated user reaches /graphql; its fields are authorized
	// one by one (api/graphql's TestAuthorization).
	// An editor of a neither reads nor writes RBAC objects there, as
	// Kubernetes' edit role (it could otherwise bind its role to anyone).
	allowed := map[string][]string{
		anon: {},
		viewer: {"list in a", "list everywhere", "graphql query", "graphql mutation", "get in a", "get in b", "list types", "list backends",
			"cup definitions", "cup list in a", "cup get in b"},
		editor: {"create in a", "list in a", "graphql query", "graphql mutation", "get in a", "patch in a",
			"cup definitions", "cup list in a", "cup put in a"},
	}
	for _, o := range ops {
		allowed[admin] = append(allowed[admin], o.name)
	}
	for _, who := range []string{anon, viewer, editor, admin} {
		for _, o := range ops {
			body := ""
			if o.body != nil {
				body = o.body(who)
			}
			code, out := e.do(t, who, o.method, o.path, body)
			want := 403
			for _, a := range allowed[who] {
				if a == o.name {
					want = o.ok
				}
			}
			if code != want {
				t.Errorf("%s / %s: %d, want %d: %.200s", who, o.name, code, want, out)
			}
			if code == 403 && !strings.Contains(out, "is forbidden") && !strings.Contains(out, "forbidden:") {
				t.Errorf("%s / %s: 403 without the reason: %s", who, o.name, out)
			}
		}
	}
	// An invalid credential is refused whatever it asks, never taken for
	// anonymous.
	for _, who := range invalid {
		for _, o := range ops {
			body := ""
			if o.body != nil {
				body = o.body(who)
			}
			if code, out := e.do(t, who, o.method, o.path, body); code != 401 {
				t.Errorf("%s / %s: %d, want 401: %.200s", who, o.name, code, out)
			}
		}
	}
	// The editor's 403 names verb, resource and namespace.
	_, out := e.do(t, editor, "POST", "/apis/flipt.io/v1/namespaces/b/flags", ti("b", "y"))
	if !strings.Contains(out, `User \"ed\" cannot create resource \"flags\" in API group \"flipt.io\" in the namespace \"b\"`) {
		t.Errorf("editor's denial: %s", out)
	}
	// A cup PUT creates when the name is free: it needs create as well as
	// update, so one who may only update replaces but does not create,
	// and the denial names the verb missing.
	const updater = "updater of a (token)"
	code, out := e.do(t, updater, "PUT", "/cup/apis/flipt.io/v1/namespaces/a/flags/fresh", ti("a", "fresh"))
	if code != 403 || !strings.Contains(out, `User \"upd\" cannot create resource \"flags\" in API group \"flipt.io\" in the namespace \"a\"`) {
		t.Errorf("updater's cup PUT of a new flag: %d %s, want 403 naming create", code, out)
	}
	if code, out := e.do(t, updater, "GET", "/apis/flipt.io/v1/namespaces/a/flags/fresh", ""); code != 404 {
		t.Errorf("the refused cup PUT created the flag: %d %.200s", code, out)
	}
	if code, out := e.do(t, updater, "PUT", "/cup/apis/flipt.io/v1/namespaces/a/flags/seed", ti("a", "seed")); code != 403 {
		t.Errorf("updater's cup PUT of an existing flag: %d %.200s, want 403 (it may create)", code, out)
	}
	// createdBy is the authenticated user, not a claim.
	_, out = e.do(t, admin, "GET", "/apis/flipt.io/v1/namespaces/a/flags/xadmin", "")
	if !strings.Contains(out, "oidc:root") {
		t.Errorf("createdBy of the admin's instance: %.300s", out)
	}

	// A List body creates several: its event names them all.
	item := func(name string) string {
		return `{"apiVersion":"hub.cairn.dev/v1","kind":"TypeInstance","metadata":{"name":"` + name + `","namespace":"a"},
		 "spec":{"typeRef":{"path":"io.flipt.flag","revision":"1.0.0"},"value":{"description":"d"}}}`
	}
	if code, out := e.do(t, admin, "POST", "/apis/hub.cairn.dev/v1/typeinstances",
		`{"apiVersion":"v1","kind":"List","items":[`+item("in-list-1")+","+item("in-list-2")+`]}`); code != 201 {
		t.Errorf("create a list of flags: %d %.300s", code, out)
	}

	// A refusal of the handler (here: the object exists) is in the audit
	// event with its reason and message, as the guard's own are.
	if code, out := e.do(t, admin, "POST", "/apis/flipt.io/v1/namespaces/a/flags", ti("a", "seed")); code != 409 {
		t.Errorf("create an existing flag: %d %.300s", code, out)
	}

	// Impersonation needs the verb: the viewer cannot, the admin can.
	if code, out := e.do(t, viewer, "GET", "/apis/hub.cairn.dev/v1/typeinstances", "", "Impersonate-User", "ed"); code != 403 || !strings.Contains(out, "cannot impersonate") {
		t.Errorf("viewer impersonating: %d %s", code, out)
	}
	if code, out := e.do(t, admin, "POST", "/apis/flipt.io/v1/namespaces/a/flags", ti("a", "asjane"), "Impersonate-User", "ed"); code != 201 {
		t.Errorf("admin as ed creating in a: %d %s", code, out)
	}
	if code, _ := e.do(t, admin, "POST", "/apis/flipt.io/v1/namespaces/b/flags", ti("b", "asjane"), "Impersonate-User", "ed"); code != 403 {
		t.Errorf("admin as ed creating in b: %d, want 403 (ed's rights, not the admin's)", code)
	}
	// Extras are impersonated as in the API server: only with a user, and
	// only by whoever may impersonate userextras; never ignored.
	for _, tc := range []struct {
		who  string
		hdr  []string
		code int
		want string
	}{
		{viewer, []string{"Impersonate-Extra-Scopes", "view"}, 400, "Impersonate-Extra-Scopes needs Impersonate-User"},
		{viewer, []string{"Impersonate-User", "vic", "Impersonate-Extra-Scopes", "view"}, 403, `cannot impersonate resource \"users\"`},
		{admin, []string{"Impersonate-Extra-Scopes", "view"}, 400, "needs Impersonate-User"},
		{admin, []string{"Impersonate-User", "ed", "Impersonate-Extra-Scopes", "view"}, 200, ""},
	} {
		code, out := e.do(t, tc.who, "GET", "/apis/flipt.io/v1/namespaces/a/flags", "", tc.hdr...)
		if code != tc.code || !strings.Contains(out, tc.want) {
			t.Errorf("%s with %q: %d %.300s, want %d %s", tc.who, tc.hdr, code, out, tc.code, tc.want)
		}
	}

	// Access reviews.
	code, out = e.do(t, viewer, "POST", access.SelfSubjectAccessReviewPath,
		`{"apiVersion":"authorization.k8s.io/v1","kind":"SelfSubjectAccessReview","spec":{"resourceAttributes":{"verb":"create","group":"flipt.io","resource":"flags","namespace":"a"}}}`)
	if code != 201 || !strings.Contains(out, `"allowed":false`) {
		t.Errorf("viewer can-i create: %d %s", code, out)
	}
	code, out = e.do(t, admin, "POST", access.SubjectAccessReviewPath,
		`{"apiVersion":"authorization.k8s.io/v1","kind":"SubjectAccessReview","spec":{"user":"ed","resourceAttributes":{"verb":"delete","group":"flipt.io","resource":"flags","namespace":"a"}}}`)
	if code != 201 || !strings.Contains(out, `"allowed":true`) {
		t.Errorf("SubjectAccessReview for ed: %d %s", code, out)
	}
	if code, _ := e.do(t, viewer, "POST", access.SubjectAccessReviewPath, `{"spec":{"user":"ed"}}`); code != 403 {
		t.Errorf("viewer asking a SubjectAccessReview: %d, want 403", code)
	}
	// Who am I: every authenticated user may ask, an anonymous caller may not.
	for who, want := range map[string]string{viewer: `"username":"vic"`, admin: `"username":"oidc:root"`, editor: `"username":"ed"`} {
		code, out := e.do(t, who, "POST", access.SelfSubjectReviewPath, `{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}`)
		if code != 201 || !strings.Contains(out, want) || !strings.Contains(out, `"system:authenticated"`) {
			t.Errorf("%s: SelfSubjectReview %d %s, want %s", who, code, out, want)
		}
	}
	if code, out := e.do(t, anon, "POST", access.SelfSubjectReviewPath, `{}`); code != 403 {
		t.Errorf("anonymous SelfSubjectReview: %d %s, want 403", code, out)
	}
	if code, out := e.do(t, viewer, "POST", access.SelfSubjectReviewPath, `not json`); code != 400 {
		t.Errorf("SelfSubjectReview of a bad body: %d %s, want 400", code, out)
	}

	// The audit log: one event per request, both identities, no secrets.
	if err := e.flush(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(e.audit)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != e.requests {
		t.Errorf("audit log has %d events, want one per request: %d", len(lines), e.requests)
	}
	for _, secret := range []string{"hunter2", "viewer-token", e.tokenFor[admin]} {
		if strings.Contains(string(b), secret) {
			t.Errorf("the audit log holds a secret (%.12s...)", secret)
		}
	}
	var sawImpersonation, sawGraphQLDenial, sawForbidden, sawUnauthorized, sawCreatedName, sawCreatedList, sawHandlerRefusal bool
	for _, l := range lines {
		var ev audit.Event
		if err := json.Unmarshal([]byte(l), &ev); err != nil || ev.AuditID == "" || ev.ResponseStatus == nil || ev.Verb == "" {
			t.Fatalf("audit line %s: %v", l, err)
		}
		if rs := ev.ResponseStatus; rs.Code == 409 && rs.Reason == "AlreadyExists" && strings.Contains(rs.Message, `"seed"`) && rs.Status == "Failure" {
			sawHandlerRefusal = true
		}
		// (TypeInstances are named by their ids.)
		if regexp.MustCompile(`^[0-9a-f-]{36}, [0-9a-f-]{36}$`).MatchString(ev.Annotations[access.CreatedAnnotation]) {
			sawCreatedList = true
		}
		// A create names what it created, as the API server's events do,
		// though the path has no name.
		if ev.Verb == "create" && ev.ResponseStatus.Code == 201 && ev.ObjectRef != nil && ev.ObjectRef.Resource == "flags" && ev.Annotations[access.CreatedAnnotation] == "" {
			if ev.ObjectRef.Name == "" || ev.ObjectRef.Namespace == "" {
				t.Errorf("a create's event without the object's name: %s", l)
			}
			if ev.ObjectRef.Name == "x"+slug(admin) && ev.ObjectRef.Namespace == "a" {
				sawCreatedName = true
			}
		}
		if ev.ImpersonatedUser != nil && ev.ImpersonatedUser.Username == "ed" && ev.User.Username == "oidc:root" {
			sawImpersonation = true
		}
		// A GraphQL request is allowed as a whole; each field it was
		// refused is in the event.
		if ev.RequestURI == "/graphql" && ev.User.Username == "vic" &&
			strings.Contains(ev.Annotations[graphql.ForbiddenAnnotation], `User "vic" cannot create resource "typeinstances"`) {
			sawGraphQLDenial = true
		}
		switch rs := ev.ResponseStatus; rs.Code {
		case 403:
			if rs.Reason == "Forbidden" && strings.Contains(rs.Message, "is forbidden") && ev.Annotations["authorization.k8s.io/decision"] == "forbid" {
				sawForbidden = true
			}
		case 401:
			if rs.Reason != "Unauthorized" || ev.User.Username != "system:anonymous" {
				t.Errorf("a refused credential's event: %s", l)
			}
			sawUnauthorized = true
		}
	}
	if !sawCreatedName || !sawCreatedList {
		t.Errorf("no audit event names the flag the admin created in a (%v), or the list of two (%v)", sawCreatedName, sawCreatedList)
	}
	if !sawHandlerRefusal {
		t.Errorf("no audit event has the reason and message of the 409 the REST handler answered")
	}
	if !sawImpersonation {
		t.Error("no audit event records both the admin and the impersonated ed")
	}
	if !sawGraphQLDenial {
		t.Errorf("no audit event records the viewer's GraphQL mutation refused")
	}
	if !sawForbidden || !sawUnauthorized {
		t.Errorf("403 and 401 events with their reason: %v %v", sawForbidden, sawUnauthorized)
	}
}

// TestKubectl runs the real kubectl over TLS with a generated kubeconfig.
func TestKubectl(t *testing.T) {
	if _, err := exec.LookPath("kubectl"); err != nil {
		t.Skip("kubectl not installed")
	}
	e := start(t)
	if code, out := e.do(t, "admin (OIDC)", "POST", "/apis/hub.cairn.dev/v1/types", flagsRD); code != 201 {
		t.Fatalf("register flags: %d %s", code, out)
	}
	dir := t.TempDir()
	// kubeconfig returns a kubeconfig for who: its token or its client
	// certificate.
	kubeconfig := func(who string) string {
		user := "{}"
		if tok, ok := e.tokenFor[who]; ok {
			user = fmt.Sprintf("{token: %q}", tok)
		}
		if cert, ok := e.certFor[who]; ok {
			key, err := x509.MarshalECPrivateKey(cert.PrivateKey.(*ecdsa.PrivateKey))
			if err != nil {
				t.Fatal(err)
			}
			crt, kf := filepath.Join(dir, slugOf(who)+".crt"), filepath.Join(dir, slugOf(who)+".key")
			os.WriteFile(crt, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Certificate[0]}), 0o600)
			os.WriteFile(kf, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: key}), 0o600)
			user = fmt.Sprintf("{client-certificate: %q, client-key: %q}", crt, kf)
		}
		p := filepath.Join(dir, slugOf(who)+".kubeconfig")
		os.WriteFile(p, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: %q, certificate-authority: %q}}]
users: [{name: u, user: %s}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`, e.url, e.caFile, user)), 0o600)
		return p
	}
	flag := func(ns, name string) string {
		p := filepath.Join(dir, ns+"-"+name+".yaml")
		os.WriteFile(p, []byte(fmt.Sprintf("apiVersion: flipt.io/v1\nkind: Flag\nmetadata: {name: %s, namespace: %s}\nspec: {description: d}\n", name, ns)), 0o600)
		return p
	}
	const (
		viewer = "viewer (token file)"
		editor = "editor of a (cert)"
		admin  = "admin (OIDC)"
	)
	review := filepath.Join(dir, "review.yaml")
	os.WriteFile(review, []byte("apiVersion: authorization.k8s.io/v1\nkind: SelfSubjectAccessReview\n"+
		"spec: {resourceAttributes: {group: flipt.io, resource: flags, verb: create, namespace: a}}\n"), 0o600)
	whoami := filepath.Join(dir, "whoami.yaml")
	os.WriteFile(whoami, []byte("apiVersion: authentication.k8s.io/v1\nkind: SelfSubjectReview\n"), 0o600)
	home := t.TempDir()
	for _, tc := range []struct {
		who  string
		args []string
		want string
	}{
		// The reviews are in discovery, so kubectl finds their kinds.
		{viewer, []string{"api-versions"}, "authentication.k8s.io/v1\nauthorization.k8s.io/v1\n"},
		{viewer, []string{"api-resources", "--api-group=authorization.k8s.io", "-o", "wide"}, "authorization.k8s.io/v1   false        SelfSubjectAccessReview   create"},
		{viewer, []string{"api-resources", "--api-group=authentication.k8s.io"}, "authentication.k8s.io/v1   false        SelfSubjectReview"},
		{editor, []string{"create", "-f", review, "-o", "yaml"}, "allowed: true"},
		{viewer, []string{"create", "-f", review, "-o", "yaml"}, "allowed: false"},
		{viewer, []string{"create", "-f", whoami, "-o", "jsonpath={.status.userInfo.username}"}, "vic"},
		{admin, []string{"auth", "can-i", "create", "typeinstances.hub.cairn.dev", "-n", "b"}, "yes"},
		{admin, []string{"create", "-f", flag("b", "by-admin")}, "created"},
		{admin, []string{"get", "--raw", "/apis/hub.cairn.dev/v1/typeinstances", "--as", "vic"}, "TypeInstanceList"},
		{admin, []string{"create", "rolebinding", "x", "-n", "a", "--clusterrole=cairn-viewer", "--user=jane"}, "created"},
		{viewer, []string{"auth", "can-i", "create", "typeinstances.hub.cairn.dev", "-n", "a"}, "no"},
		{viewer, []string{"auth", "can-i", "list", "typeinstances.hub.cairn.dev"}, "yes"},
		{viewer, []string{"auth", "whoami"}, "vic"},
		{viewer, []string{"get", "flags.flipt.io", "-n", "b"}, "by-admin"},
		{viewer, []string{"create", "-f", flag("a", "by-viewer")}, `User "vic" cannot create resource "flags"`},
		{viewer, []string{"delete", "flags.flipt.io", "by-admin", "-n", "b"}, `User "vic" cannot delete resource "flags"`},
		// kubectl's discovery, asked first, prints a 403 as "Forbidden:
		// unknown" (it does with the API server too, when its cache is
		// empty); --raw shows the message.
		{viewer, []string{"get", "typeinstances.hub.cairn.dev", "-n", "a", "--as", "ed"}, "Error from server (Forbidden)"},
		{viewer, []string{"get", "--raw", "/apis/hub.cairn.dev/v1/typeinstances", "--as", "ed"}, `User "vic" cannot impersonate resource "users"`},
		{editor, []string{"auth", "whoami"}, "ed"},
		{editor, []string{"auth", "can-i", "create", "flags.flipt.io", "-n", "a"}, "yes"},
		{editor, []string{"auth", "can-i", "create", "flags.flipt.io", "-n", "b"}, "no"},
		{editor, []string{"auth", "can-i", "create", "rolebindings", "-n", "a"}, "no"},
		{editor, []string{"create", "-f", flag("a", "by-editor")}, "created"},
		{editor, []string{"create", "-f", flag("b", "by-editor")}, `User "ed" cannot create resource "flags" in API group "flipt.io" in the namespace "b"`},
		{editor, []string{"delete", "flags.flipt.io", "by-admin", "-n", "b"}, `User "ed" cannot delete resource "flags"`},
		{editor, []string{"create", "rolebinding", "y", "-n", "a", "--clusterrole=cairn-editor", "--user=jane"}, `User "ed" cannot create resource "rolebindings"`},
		{editor, []string{"get", "--raw", "/apis/flipt.io/v1/namespaces/a/flags", "--as", "vic"}, `User "ed" cannot impersonate resource "users"`},
		// kubectl without credentials asks for a user name and password
		// and sends what it is told; TestMatrix asks as anonymous.
		{"expired OIDC token", []string{"get", "flags.flipt.io", "-n", "a"}, "You must be logged in to the server"},
		{"OIDC token of other key", []string{"get", "flags.flipt.io", "-n", "a"}, "You must be logged in to the server"},
		{"cert of another CA", []string{"get", "flags.flipt.io", "-n", "a"}, "You must be logged in to the server"},
	} {
		cmd := exec.Command("kubectl", append([]string{"--kubeconfig", kubeconfig(tc.who)}, tc.args...)...)
		cmd.Env = append(os.Environ(), "HOME="+home)
		b, _ := cmd.CombinedOutput()
		if out := string(b); !strings.Contains(out, tc.want) {
			t.Errorf("%s: kubectl %s: %q, want %q", tc.who, strings.Join(tc.args, " "), out, tc.want)
		}
	}

	// kubectl auth can-i --list asks a SelfSubjectRulesReview for the
	// rules the user holds in a namespace: RESOURCES, NON-RESOURCE URLS,
	// RESOURCE NAMES, VERBS.
	flipt := func(verbs string) string { return `(?m)^\*\.flipt\.io\s+\[\]\s+\[\]\s+\[` + verbs + `\]\s*$` }
	for _, tc := range []struct {
		who, ns   string
		want, not []string
	}{
		{viewer, "a", []string{flipt("get list watch"), `(?m)^selfsubjectrulesreviews\.authorization\.k8s\.io\s+\[\]\s+\[\]\s+\[create\]`, `(?m)^\s+\[/version\]\s+\[\]\s+\[get\]`}, nil},
		{editor, "a", []string{flipt("get list watch reveal create update patch delete deletecollection")}, nil},
		{editor, "b", []string{`(?m)^selfsubjectreviews\.authentication\.k8s\.io\s`}, []string{`flipt\.io`}},
	} {
		cmd := exec.Command("kubectl", "--kubeconfig", kubeconfig(tc.who), "auth", "can-i", "--list", "-n", tc.ns)
		cmd.Env = append(os.Environ(), "HOME="+home)
		b, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("%s: kubectl auth can-i --list -n %s: %v\n%s", tc.who, tc.ns, err, b)
			continue
		}
		for _, w := range tc.want {
			if !regexp.MustCompile(w).Match(b) {
				t.Errorf("%s: kubectl auth can-i --list -n %s lacks %s:\n%s", tc.who, tc.ns, w, b)
			}
		}
		for _, w := range tc.not {
			if regexp.MustCompile(w).Match(b) {
				t.Errorf("%s: kubectl auth can-i --list -n %s has %s:\n%s", tc.who, tc.ns, w, b)
			}
		}
	}
}

func slugOf(who string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' {
			return r
		}
		return -1
	}, who)
}
