package cli

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestReadsFirstAnswersAsTheMux: readsFirst sends REST reads straight to
// the API handler; every request must reach the handler the mux alone
// would have chosen, redirects included.
func TestReadsFirstAnswersAsTheMux(t *testing.T) {
	named := func(name string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Header().Set("X-Handler", name) })
	}
	api := named("api")
	mux := http.NewServeMux()
	mux.Handle("GET /healthz", named("healthz"))
	mux.Handle("POST /apis/authorization.k8s.io/v1/selfsubjectaccessreviews", named("review"))
	mux.Handle("/graphql", named("graphql"))
	mux.Handle("GET /hooks/git/{backend}", named("hooks"))
	mux.Handle("/", api)
	fast := readsFirst(mux, api)
	for _, tc := range []struct{ method, target string }{
		{"GET", "/apis/flipt.io/v1alpha1/namespaces/default/flags/f042"},
		{"HEAD", "/api/v1/namespaces"},
		{"GET", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"},
		{"POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"},
		{"POST", "/apis/flipt.io/v1alpha1/namespaces/default/flags"},
		{"GET", "/apis//flipt.io/v1alpha1"},
		{"GET", "/apis/flipt.io/../v1alpha1/x"},
		{"GET", "/apis/./x"},
		{"GET", "/healthz"},
		{"GET", "/graphql"},
		{"GET", "/hooks/git/b"},
		{"GET", "/version"},
	} {
		want, got := httptest.NewRecorder(), httptest.NewRecorder()
		mux.ServeHTTP(want, httptest.NewRequest(tc.method, tc.target, nil))
		fast.ServeHTTP(got, httptest.NewRequest(tc.method, tc.target, nil))
		if got.Code != want.Code || got.Header().Get("X-Handler") != want.Header().Get("X-Handler") || got.Header().Get("Location") != want.Header().Get("Location") {
			t.Errorf("%s %s: readsFirst answered %d by %q (Location %q), the mux %d by %q (Location %q)", tc.method, tc.target,
				got.Code, got.Header().Get("X-Handler"), got.Header().Get("Location"), want.Code, want.Header().Get("X-Handler"), want.Header().Get("Location"))
		}
	}
}
