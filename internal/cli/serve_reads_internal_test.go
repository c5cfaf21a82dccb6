package cli

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/cairn-dev/cairn/api/access"
)

// TestRESTFirstAnswersAsTheMux: restFirst sends REST requests straight to
// the API handler; every request must reach the handler the mux alone
// would have chosen, redirects and the access reviews' POSTs included.
func TestRESTFirstAnswersAsTheMux(t *testing.T) {
	named := func(name string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Header().Set("X-Handler", name) })
	}
	api := named("api")
	mux := http.NewServeMux()
	mux.Handle("GET /healthz", named("healthz"))
	for _, p := range access.ReviewPaths() {
		mux.Handle("POST "+p, named("review"))
	}
	mux.Handle("/graphql", named("graphql"))
	mux.Handle("GET /hooks/git/{backend}", named("hooks"))
	mux.Handle("/", api)
	fast := restFirst(mux, api, access.ReviewPaths())
	type req struct{ method, target string }
	cases := []req{
		{"HEAD", "/api/v1/namespaces"},
		{"GET", "/apis/flipt.io/../v1alpha1/x"},
		{"GET", "/apis/./x"},
		{"POST", "/apis/flipt.io/v1alpha1/namespaces/default/flags/."},
		{"GET", "/healthz"},
		{"POST", "/healthz"},
		{"GET", "/graphql"},
		{"POST", "/graphql"},
		{"GET", "/hooks/git/b"},
		{"GET", "/version"},
		{"CONNECT", "/apis/flipt.io/v1alpha1"},
	}
	for _, m := range []string{"GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"} {
		cases = append(cases, req{m, "/apis/flipt.io/v1alpha1/namespaces/default/flags"},
			req{m, "/apis/flipt.io/v1alpha1/namespaces/default/flags/f042"},
			req{m, "/api/v1/namespaces/default/configmaps/x/"})
		for _, p := range access.ReviewPaths() {
			cases = append(cases, req{m, p}, req{m, p + "/x"})
		}
	}
	for _, tc := range cases {
		want, got := httptest.NewRecorder(), httptest.NewRecorder()
		mux.ServeHTTP(want, httptest.NewRequest(tc.method, tc.target, nil))
		fast.ServeHTTP(got, httptest.NewRequest(tc.method, tc.target, nil))
		if got.Code != want.Code || got.Header().Get("X-Handler") != want.Header().Get("X-Handler") || got.Header().Get("Location") != want.Header().Get("Location") {
			t.Errorf("%s %s: restFirst answered %d by %q (Location %q), the mux %d by %q (Location %q)", tc.method, tc.target,
				got.Code, got.Header().Get("X-Handler"), got.Header().Get("Location"), want.Code, want.Header().Get("X-Handler"), want.Header().Get("Location"))
		}
	}
	// A path with an empty segment reaches api, which refuses it; the mux
	// would redirect it to its cleaned form, another resource.
	for _, tc := range []req{{"GET", "/apis//flipt.io/v1alpha1"}, {"DELETE", "/api//v1/namespaces/x"},
		{"GET", "/apis/flipt.io/v1alpha1/namespaces//flags"}, {"PUT", "/cup/apis/flipt.io/v1alpha1/namespaces//flags/f"}} {
		rec := httptest.NewRecorder()
		fast.ServeHTTP(rec, httptest.NewRequest(tc.method, tc.target, nil))
		if h, loc := rec.Header().Get("X-Handler"), rec.Header().Get("Location"); h != "api" || loc != "" {
			t.Errorf("%s %s: reached %q with %d (Location %q), want api and no redirect", tc.method, tc.target, h, rec.Code, loc)
		}
	}
	// The reviews must reach the mux's handler, not api: the test above
	// would pass with both sent to api were the mux not to route them.
	rec := httptest.NewRecorder()
	fast.ServeHTTP(rec, httptest.NewRequest("POST", access.SelfSubjectReviewPath, nil))
	if h := rec.Header().Get("X-Handler"); h != "review" {
		t.Errorf("POST %s reached %q", access.SelfSubjectReviewPath, h)
	}
}

// BenchmarkRESTFirst: a create's POST routed by the mux alone and by
// restFirst in front of it, to a handler that does nothing.
func BenchmarkRESTFirst(b *testing.B) {
	api := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	mux := http.NewServeMux()
	mux.Handle("GET /healthz", api)
	for _, p := range access.ReviewPaths() {
		mux.Handle("POST "+p, api)
	}
	mux.Handle("/graphql", api)
	mux.Handle("POST /hooks/git/{backend}", api)
	mux.Handle("GET /hooks/git/{backend}", api)
	mux.Handle("/terraform/v1/", api)
	mux.Handle("/", api)
	mux.Handle("/ui/", api)
	mux.Handle("GET /{$}", api)
	r := httptest.NewRequest("POST", "/apis/flipt.io/v1alpha1/namespaces/default/flags", nil)
	w := httptest.NewRecorder()
	for name, h := range map[string]http.Handler{"mux": mux, "restFirst": restFirst(mux, api, access.ReviewPaths())} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				h.ServeHTTP(w, r)
			}
		})
	}
}
