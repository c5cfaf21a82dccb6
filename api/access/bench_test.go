package access_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/api/access"
	"github.com/cairn-dev/cairn/api/rest"
	"github.com/cairn-dev/cairn/auth/audit"
	"github.com/cairn-dev/cairn/auth/authn"
	"github.com/cairn-dev/cairn/auth/rbac"
	"github.com/cairn-dev/cairn/hub"
	"github.com/cairn-dev/cairn/store/sqlite"
)

// BenchmarkGET compares a REST GET of one Flag served bare with the same
// GET behind the guard (bearer token from a token file, RBAC through a
// RoleBinding); the ratio of the two is the cost of authn+authz per request
// (issue 16: under 10%). Audit is measured separately (it writes a file).
func BenchmarkGET(b *testing.B) {
	api, guarded, do := benchSetup(b)
	// Alternate the two in one loop so machine noise hits both alike.
	// The order flips each round, so neither profits from the other's
	// warm caches.
	var bare, guard time.Duration
	timed := func(hd http.Handler) time.Duration {
		t0 := time.Now()
		do(hd, "GET", "/apis/flipt.io/v1/namespaces/a/flags/f", "", 200)
		return time.Since(t0)
	}
	for i := 0; b.Loop(); i++ {
		if i%2 == 0 {
			bare += timed(api)
			guard += timed(guarded)
		} else {
			guard += timed(guarded)
			bare += timed(api)
		}
	}
	b.ReportMetric(float64(guard)/float64(bare), "guarded/bare")
	b.ReportMetric(float64(bare.Nanoseconds())/float64(b.N), "bare-ns/op")
	b.ReportMetric(float64(guard.Nanoseconds())/float64(b.N), "guarded-ns/op")
}

// BenchmarkGETOverHTTP is BenchmarkGET as a client sees it: the same GET
// over a loopback connection (kept alive) to a server with the bare API
// and to one with the guard in front, alternating; over plain HTTP and
// over TLS, as kubectl sends a bearer token (only over TLS).
func BenchmarkGETOverHTTP(b *testing.B) {
	api, guarded, _ := benchSetup(b)
	for _, tc := range []struct {
		name  string
		serve func(http.Handler) *httptest.Server
	}{{"http", httptest.NewServer}, {"https", httptest.NewTLSServer}} {
		b.Run(tc.name, func(b *testing.B) {
			bareSrv, guardSrv := tc.serve(api), tc.serve(guarded)
			defer bareSrv.Close()
			defer guardSrv.Close()
			get := func(srv *httptest.Server) time.Duration {
				req, _ := http.NewRequest("GET", srv.URL+"/apis/flipt.io/v1/namespaces/a/flags/f", nil)
				req.Header.Set("Authorization", "Bearer ed-token")
				t0 := time.Now()
				resp, err := srv.Client().Do(req)
				if err != nil {
					b.Fatal(err)
				}
				_, err = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if err != nil || resp.StatusCode != 200 {
					b.Fatalf("GET: %d %v", resp.StatusCode, err)
				}
				return time.Since(t0)
			}
			var bare, guard time.Duration
			for i := 0; b.Loop(); i++ {
				if i%2 == 0 {
					bare += get(bareSrv)
					guard += get(guardSrv)
				} else {
					guard += get(guardSrv)
					bare += get(bareSrv)
				}
			}
			b.ReportMetric(float64(guard)/float64(bare), "guarded/bare")
			b.ReportMetric(float64(bare.Nanoseconds())/float64(b.N), "bare-ns/op")
			b.ReportMetric(float64(guard.Nanoseconds())/float64(b.N), "guarded-ns/op")
		})
	}
}

// benchSetup serves one Flag from a hub on SQLite: the bare REST API, the
// same behind the guard, and a request helper that checks the status.
func benchSetup(b *testing.B) (api, guarded http.Handler, do func(hd http.Handler, method, path, body string, code int)) {
	h := benchHub(b)
	api = rest.New(rest.Config{Hub: h})
	do = func(hd http.Handler, method, path, body string, code int) {
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer ed-token")
		rec := httptest.NewRecorder()
		hd.ServeHTTP(rec, req)
		if rec.Code != code {
			b.Fatalf("%s %s: %d %s", method, path, rec.Code, rec.Body)
		}
	}
	do(api, "POST", "/apis/hub.cairn.dev/v1/types", flagsRD, 201)
	do(api, "POST", "/apis/flipt.io/v1/namespaces/a/flags", ti("a", "f"), 201)
	tf, _ := authn.ParseTokenFile(strings.NewReader("ed-token,ed,1\n"))
	guarded = access.New(access.Config{Authn: &authn.Chain{Tokens: []authn.TokenAuthenticator{tf}}, Authz: h}).Wrap(api)
	return api, guarded, do
}

// BenchmarkGuardAlone is the guard's own cost, in front of a handler that
// does nothing: authentication by bearer token, RBAC through a
// RoleBinding, no audit.
func BenchmarkGuardAlone(b *testing.B) {
	h := benchHub(b)
	// The Type serves flags.flipt.io (which cairn-editor then covers).
	if _, err := h.CreateType(context.Background(), cairn.Type{Path: "io.flipt.flag", Revision: "1.0.0", Group: "flipt.io", Version: "v1",
		Names: &cairn.Names{Kind: "Flag", Plural: "flags"}}); err != nil {
		b.Fatal(err)
	}
	tf, _ := authn.ParseTokenFile(strings.NewReader("ed-token,ed,1\n"))
	g := access.New(access.Config{Authn: &authn.Chain{Tokens: []authn.TokenAuthenticator{tf}}, Authz: h}).
		Wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	req := httptest.NewRequest("GET", "/apis/flipt.io/v1/namespaces/a/flags/f", nil)
	req.Header.Set("Authorization", "Bearer ed-token")
	w := httptest.NewRecorder()
	b.ReportAllocs()
	for b.Loop() {
		g.ServeHTTP(w, req)
	}
	if w.Code != 200 {
		b.Fatalf("%d %s", w.Code, w.Body)
	}
}

// benchHub is a hub on SQLite with the RBAC policy of the matrix (ed edits
// namespace a).
func benchHub(b *testing.B) *hub.Hub {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "cairn.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	var pol rbac.Policy
	for doc := range strings.SplitSeq(policyYAML, "\n---\n") {
		if err := pol.Parse([]byte(doc)); err != nil {
			b.Fatal(err)
		}
	}
	h, err := hub.New(ctx, hub.Config{Store: st, RBAC: pol})
	if err != nil {
		b.Fatal(err)
	}
	return h
}

// BenchmarkCreatedName is what naming a create's object in its audit event
// costs the guard: the answer of a real REST create of a Flag, served by a
// handler that tells the name (audit.Created, as the REST API does) and by
// one that does not (the guard decodes the answer), alternating in one
// loop; told/read is the ratio of the two.
func BenchmarkCreatedName(b *testing.B) {
	h := benchHub(b)
	api := rest.New(rest.Config{Hub: h})
	var answer []byte
	for _, post := range [][2]string{{"/apis/hub.cairn.dev/v1/types", flagsRD}, {"/apis/flipt.io/v1/namespaces/a/flags", ti("a", "g")}} {
		req := httptest.NewRequest("POST", post[0], strings.NewReader(post[1]))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		api.ServeHTTP(rec, req)
		if rec.Code != 201 {
			b.Fatalf("POST %s: %d %s", post[0], rec.Code, rec.Body)
		}
		answer = rec.Body.Bytes()
	}
	aw, err := audit.Open(filepath.Join(b.TempDir(), "audit.log"), 1<<30, 0)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { aw.Close() })
	tf, _ := authn.ParseTokenFile(strings.NewReader("ed-token,ed,1\n"))
	guard := access.New(access.Config{Authn: &authn.Chain{Tokens: []authn.TokenAuthenticator{tf}}, Authz: h,
		Audit: aw, AuditLevel: audit.LevelMetadata})
	handler := func(tell bool) http.Handler {
		return guard.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if tell {
				audit.Created(r.Context(), "a", "g")
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusCreated)
			w.Write(answer)
		}))
	}
	told, read := handler(true), handler(false)
	timed := func(hd http.Handler) time.Duration {
		req := httptest.NewRequest("POST", "/apis/flipt.io/v1/namespaces/a/flags", nil)
		req.Header.Set("Authorization", "Bearer ed-token")
		w := httptest.NewRecorder()
		t0 := time.Now()
		hd.ServeHTTP(w, req)
		d := time.Since(t0)
		if w.Code != 201 {
			b.Fatalf("%d %s", w.Code, w.Body)
		}
		return d
	}
	var dt, dr time.Duration
	for i := 0; b.Loop(); i++ {
		if i%2 == 0 {
			dt += timed(told)
			dr += timed(read)
		} else {
			dr += timed(read)
			dt += timed(told)
		}
	}
	b.ReportMetric(float64(dt)/float64(dr), "told/read")
	b.ReportMetric(float64(dt.Nanoseconds())/float64(b.N), "told-ns/op")
	b.ReportMetric(float64(dr.Nanoseconds())/float64(b.N), "read-ns/op")
	b.ReportMetric(float64(len(answer)), "answer-bytes")
}
