package access_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/api/access"
	"github.com/cairn-dev/cairn/api/rest"
	"github.com/cairn-dev/cairn/auth/authn"
	"github.com/cairn-dev/cairn/auth/peer"
	"github.com/cairn-dev/cairn/auth/rbac"
	"github.com/cairn-dev/cairn/hub"
	"github.com/cairn-dev/cairn/store/sqlite"
)

// startPeer serves the hub as a loopback `cairn serve` with nothing
// configured does: local processes of our uid are admin (peer
// authentication), everyone else is anonymous with no rights. lookup, when
// set, replaces the kernel lookup (to play another local user).
func startPeer(t *testing.T, lookup func(server, client netip.AddrPort) (int, error)) string {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "cairn.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	pol := rbac.Policy{ClusterRoleBindings: []rbacv1.ClusterRoleBinding{{
		ObjectMeta: metav1.ObjectMeta{Name: "cairn-loopback-peers"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: rbac.AdminRole},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.GroupKind, Name: authn.PeersGroup}},
	}}}
	h, err := hub.New(ctx, hub.Config{Store: st, RBAC: pol})
	if err != nil {
		t.Fatal(err)
	}
	tf, _ := authn.ParseTokenFile(strings.NewReader("admin-token,admin,admin,cairn:admins\n"))
	uid := os.Getuid()
	chain := &authn.Chain{Tokens: []authn.TokenAuthenticator{tf},
		Peer: &authn.Peer{UID: uid, User: cairn.User{Name: "me", UID: strconv.Itoa(uid), Groups: []string{authn.PeersGroup}}}}
	g := access.New(access.Config{Authn: chain, Authz: h, HostCheck: true, ServerHosts: []string{"cairn.test"},
		Public: []string{"/healthz"}})
	mux := http.NewServeMux()
	g.Handle(mux)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	mux.Handle("/", rest.New(rest.Config{Hub: h}))
	srv := httptest.NewUnstartedServer(g.Wrap(mux))
	srv.Config.ConnContext = (&peer.Conns{Lookup: lookup}).ConnContext
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.URL
}

func get(t *testing.T, url, token string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestPeerAuthentication: a connection from our own uid is admin without
// credentials, and recorded under the OS user's name; a connection from
// another uid is anonymous and told what to present; a presented
// credential is checked as before.
func TestPeerAuthentication(t *testing.T) {
	if !peer.Supported() {
		t.Skip("peer authentication is Linux-only")
	}
	review := `{"apiVersion":"authorization.k8s.io/v1","kind":"SelfSubjectAccessReview","spec":{"resourceAttributes":{"verb":"delete","group":"hub.cairn.dev","resource":"types"}}}`
	t.Run("same uid", func(t *testing.T) {
		url := startPeer(t, nil)
		if code, out := get(t, url+"/apis/hub.cairn.dev/v1/typeinstances", ""); code != 200 {
			t.Fatalf("same uid, no credentials: %d %s", code, out)
		}
		resp, err := http.Post(url+access.SelfSubjectAccessReviewPath, "application/json", strings.NewReader(review))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(b), `"allowed":true`) {
			t.Errorf("same uid may not delete types: %s", b)
		}
		resp, err = http.Post(url+"/apis/hub.cairn.dev/v1/types", "application/json", strings.NewReader(flagsRD))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		resp, err = http.Post(url+"/apis/flipt.io/v1/namespaces/a/flags", "application/json", strings.NewReader(ti("a", "mine")))
		if err != nil {
			t.Fatal(err)
		}
		b, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 201 || !strings.Contains(string(b), `"createdBy":"me"`) {
			t.Errorf("create as the peer: %d %.300s", resp.StatusCode, b)
		}
		if code, _ := get(t, url+"/apis/hub.cairn.dev/v1/typeinstances", "wrong-token"); code != 401 {
			t.Errorf("a wrong token from the same uid: %d, want 401 (a credential presented is checked)", code)
		}
	})
	t.Run("another uid", func(t *testing.T) {
		url := startPeer(t, func(server, client netip.AddrPort) (int, error) { return os.Getuid() + 1, nil })
		code, out := get(t, url+"/apis/hub.cairn.dev/v1/typeinstances", "")
		if code != 401 || !strings.Contains(out, "only local processes of its own OS user (peer authentication)") {
			t.Errorf("another uid, no credentials: %d %s", code, out)
		}
		if code, out := get(t, url+"/apis/hub.cairn.dev/v1/typeinstances", "admin-token"); code != 200 {
			t.Errorf("another uid with the admin token: %d %s", code, out)
		}
		if code, _ := get(t, url+"/healthz", ""); code != 200 {
			t.Errorf("/healthz is public: %d", code)
		}
	})
	t.Run("lookup fails", func(t *testing.T) {
		url := startPeer(t, func(server, client netip.AddrPort) (int, error) { return 0, peer.ErrNotFound })
		if code, _ := get(t, url+"/apis/hub.cairn.dev/v1/typeinstances", ""); code != 401 {
			t.Errorf("a peer that cannot be found: %d, want 401", code)
		}
	})
}

// TestBrowserProtections: a request trusted without credentials (here a
// local peer) is refused when a web page could have sent it: a Host that
// is not the server's (DNS rebinding) or a cross-site write (CSRF). The
// same-origin web console and clients that are not browsers keep working,
// and a presented credential is not subject to these checks.
func TestBrowserProtections(t *testing.T) {
	if !peer.Supported() {
		t.Skip("peer authentication is Linux-only")
	}
	url := startPeer(t, nil)
	port := url[strings.LastIndex(url, ":")+1:]
	self := "http://127.0.0.1:" + port
	create := func(name string) string { return ti("a", name) }
	if code, out := do(t, url, "POST", "/apis/hub.cairn.dev/v1/types", flagsRD, ""); code != 201 {
		t.Fatalf("register flags: %d %s", code, out)
	}
	const flags = "/apis/flipt.io/v1/namespaces/a/flags"
	for i, tc := range []struct {
		name, method, path string
		hdr                []string
		code               int
		want               string
	}{
		{"curl, no browser headers", "POST", flags, nil, 201, ""},
		{"Host localhost", "GET", flags, []string{"Host", "localhost:" + port}, 200, ""},
		{"Host [::1]", "GET", flags, []string{"Host", "[::1]:" + port}, 200, ""},
		{"Host a .localhost name", "GET", flags, []string{"Host", "cairn.localhost:" + port}, 200, ""},
		{"Host the configured address", "GET", flags, []string{"Host", "cairn.test:" + port}, 200, ""},
		{"a rebound name", "GET", flags, []string{"Host", "evil.example:" + port}, 403, `Host \"evil.example:` + port + `\" is not a loopback name or address of this server`},
		{"a rebound name for a public page", "GET", "/healthz", []string{"Host", "evil.example"}, 403, "DNS rebinding"},
		{"a rebound name with a token", "GET", flags, []string{"Host", "evil.example:" + port, "Authorization", "Bearer admin-token"}, 200, ""},
		{"the console: same-origin write", "POST", flags, []string{"Origin", self, "Sec-Fetch-Site", "same-origin"}, 201, ""},
		{"a write from another site", "POST", flags, []string{"Origin", "http://evil.example", "Sec-Fetch-Site", "cross-site"}, 403, "a cross-site request (Sec-Fetch-Site) without credentials may not write"},
		{"a write from another port of localhost", "POST", flags, []string{"Origin", "http://localhost:3000", "Sec-Fetch-Site", "same-site"}, 403, "same-site request"},
		{"an old browser: Origin only", "DELETE", flags + "/x0", []string{"Origin", "http://evil.example"}, 403, `from origin \"http://evil.example\" without credentials may not write`},
		{"a sandboxed page: Origin null", "POST", flags, []string{"Origin", "null"}, 403, `origin \"null\"`},
		{"a typed URL (Sec-Fetch-Site none)", "POST", flags, []string{"Sec-Fetch-Site", "none"}, 201, ""},
		{"a cross-site read is left to the same-origin policy", "GET", flags, []string{"Origin", "http://evil.example", "Sec-Fetch-Site", "cross-site"}, 200, ""},
		{"a cross-site write with a token", "POST", flags, []string{"Origin", "http://evil.example", "Sec-Fetch-Site", "cross-site", "Authorization", "Bearer admin-token"}, 201, ""},
	} {
		body := ""
		if tc.method == "POST" {
			body = create("x" + strconv.Itoa(i))
		}
		code, out := do(t, url, tc.method, tc.path, body, "", tc.hdr...)
		if code != tc.code || !strings.Contains(out, tc.want) {
			t.Errorf("%s: %d %.300s\nwant %d with %s", tc.name, code, out, tc.code, tc.want)
		}
	}
}

func do(t *testing.T, url, method, path, body, token string, hdr ...string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i] == "Host" {
			req.Host = hdr[i+1]
			continue
		}
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
