package access

import (
	"net/http/httptest"
	"reflect"
	"testing"

	"github.com/cairn-dev/cairn/auth/rbac"
)

// TestRequestAttributes: requests map to RBAC attributes as the Kubernetes
// API server's RequestInfoFactory maps them.
func TestRequestAttributes(t *testing.T) {
	res := func(verb, group, resource, sub, ns, name string) rbac.Attributes {
		return rbac.Attributes{Verb: verb, ResourceRequest: true, APIGroup: group, Resource: resource, Subresource: sub, Namespace: ns, Name: name}
	}
	path := func(verb, p string) rbac.Attributes { return rbac.Attributes{Verb: verb, Path: p} }
	const flags = "/apis/flipt.io/v1/namespaces/a/flags"
	for _, tc := range []struct {
		method, url string
		want        rbac.Attributes
	}{
		{"GET", flags, res("list", "flipt.io", "flags", "", "a", "")},
		{"GET", flags + "/f", res("get", "flipt.io", "flags", "", "a", "f")},
		{"HEAD", flags + "/f", res("get", "flipt.io", "flags", "", "a", "f")},
		{"GET", flags + "?watch=true", res("watch", "flipt.io", "flags", "", "a", "")},
		{"GET", flags + "?watch=1&resourceVersion=3", res("watch", "flipt.io", "flags", "", "a", "")},
		{"GET", flags + "?labelSelector=watch%3Dme", res("list", "flipt.io", "flags", "", "a", "")},
		{"GET", "/apis/flipt.io/v1/watch/namespaces/a/flags", res("watch", "flipt.io", "flags", "", "a", "")},
		{"GET", "/apis/flipt.io/v1/flags", res("list", "flipt.io", "flags", "", "", "")},
		{"POST", flags, res("create", "flipt.io", "flags", "", "a", "")},
		{"PUT", flags + "/f", res("update", "flipt.io", "flags", "", "a", "f")},
		{"PATCH", flags + "/f", res("patch", "flipt.io", "flags", "", "a", "f")},
		{"DELETE", flags + "/f", res("delete", "flipt.io", "flags", "", "a", "f")},
		{"DELETE", flags, res("deletecollection", "flipt.io", "flags", "", "a", "")},
		{"PUT", flags + "/f/status", res("update", "flipt.io", "flags", "status", "a", "f")},
		{"GET", "/api/v1/namespaces/a", res("get", "", "namespaces", "", "", "a")},
		{"GET", "/api/v1/namespaces/a/configmaps/c", res("get", "", "configmaps", "", "a", "c")},
		{"GET", "/apis/hub.cairn.dev/v1/types", res("list", "hub.cairn.dev", "types", "", "", "")},
		{"GET", "/metrics", path("get", "/metrics")},
		{"HEAD", "/healthz", path("get", "/healthz")},
		{"POST", "/graphql", path("post", "/graphql")},
		{"DELETE", "/hooks/git/x", path("delete", "/hooks/git/x")},
		{"GET", "/apis", path("get", "/apis")},
		{"GET", "/apis/flipt.io/v1", path("get", "/apis/flipt.io/v1")},
		{"GET", "/api/v1", path("get", "/api/v1")},
		{"GET", "/", path("get", "/")},
		// cup's API (rest.CupPrefix) is authorized as the same request
		// under /apis: its definitions as discovery, its objects as
		// Kubernetes' (a cup PUT also needs create: guard.serve).
		{"GET", "/cup/apis", path("get", "/apis")},
		{"GET", "/cup/apis/", path("get", "/apis")},
		{"GET", "/cup/apis/flipt.io/v1/namespaces/a/flags", res("list", "flipt.io", "flags", "", "a", "")},
		{"GET", "/cup/apis/flipt.io/v1/namespaces/a/flags/f", res("get", "flipt.io", "flags", "", "a", "f")},
		{"PUT", "/cup/apis/flipt.io/v1/namespaces/a/flags/f", res("update", "flipt.io", "flags", "", "a", "f")},
		{"DELETE", "/cup/apis/flipt.io/v1/namespaces/a/flags/f", res("delete", "flipt.io", "flags", "", "a", "f")},
		{"GET", "/cup", path("get", "/cup")},
		{"GET", "/cupboard/apis/x/v1/namespaces/a/y", path("get", "/cupboard/apis/x/v1/namespaces/a/y")},
	} {
		got := requestAttributes(httptest.NewRequest(tc.method, tc.url, nil))
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s %s: %+v, want %+v", tc.method, tc.url, got, tc.want)
		}
	}
}

func TestAPIVersionOf(t *testing.T) {
	for _, tc := range []struct{ path, want string }{
		{"/api/v1/namespaces/default/pods/p", "v1"},
		{"/api/v1", "v1"},
		{"/api", ""},
		{"/apis/flipt.io/v1alpha1/namespaces/default/flags/f", "v1alpha1"},
		{"/apis/flipt.io/v1alpha1", "v1alpha1"},
		{"/apis/flipt.io", ""},
		{"/apis/flipt.io/", ""},
		{"/apis//v1", "v1"}, // an empty group segment counts, as strings.Split finds it
		{"/version", ""},
		{"/cup/apis/flipt.io/v1alpha1/namespaces/default/flags/f", "v1alpha1"},
		{"/", ""},
	} {
		if got := apiVersionOf(tc.path); got != tc.want {
			t.Errorf("apiVersionOf(%q) = %q, want %q", tc.path, got, tc.want)
		}
	}
}
