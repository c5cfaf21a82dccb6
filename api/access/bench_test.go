package access_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/api/access"
	"github.com/cairn-dev/cairn/api/rest"
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
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "cairn.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
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
	api := rest.New(rest.Config{Hub: h})
	do := func(hd http.Handler, method, path, body string, code int) {
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
	guarded := access.New(access.Config{Authn: &authn.Chain{Tokens: []authn.TokenAuthenticator{tf}}, Authz: h}).Wrap(api)
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
