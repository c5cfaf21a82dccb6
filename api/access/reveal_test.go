package access_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/hub"
)

// TestRevealVerb: secret values show in the clear only to callers granted
// the reveal verb (cairn-editor, cairn-admin); cairn-viewer, like
// Kubernetes' view role, which reads no Secrets, gets the object and its
// status with the secret redacted and may not ask a list for values. The
// kept bodies of reads never carry one caller's answer to another, in
// either order.
func TestRevealVerb(t *testing.T) {
	e := start(t)
	const admin, viewer, editor = "admin (OIDC)", "viewer (token file)", "editor of a (cert)"
	const clear = "open-sesame-1234"
	rd := `{"apiVersion": "cup.flipt.io/v1alpha1", "kind": "ResourceDefinition", "metadata": {"name": "vaults.example.org"},
 "names": {"kind": "Vault", "singular": "vault", "plural": "vaults"},
 "spec": {"group": "example.org", "versions": {"v1": {"schema": {"type": "object", "properties": {"user": {"type": "string"}, "password": {"type": "string", "x-cairn-secret": true}}}}}}}`
	if code, body := e.do(t, admin, "POST", "/apis/hub.cairn.dev/v1/types", rd); code != http.StatusCreated {
		t.Fatalf("register the Type: %d %s", code, body)
	}
	const list = "/apis/example.org/v1/namespaces/a/vaults"
	obj := list + "/v1"
	if code, body := e.do(t, admin, "POST", list, `{"apiVersion":"example.org/v1","kind":"Vault","metadata":{"name":"v1"},"spec":{"user":"u","password":"`+clear+`"}}`); code != http.StatusCreated {
		t.Fatalf("create: %d %s", code, body)
	}
	for _, step := range []struct {
		who, path string
		code      int
		clear     bool
	}{
		{viewer, obj, 200, false},
		{admin, obj, 200, true},
		{viewer, obj, 200, false}, // not the admin's kept body
		{editor, obj, 200, true},
		{viewer, obj + "/status", 200, false},
		{viewer, list, 200, false},
		{viewer, list + "?values=true", 403, false},
		{editor, list + "?values=true", 200, true},
		{viewer, obj, 200, false},
	} {
		code, body := e.do(t, step.who, "GET", step.path, "")
		if code != step.code {
			t.Errorf("%s GET %s: %d %.300s, want %d", step.who, step.path, code, body, step.code)
			continue
		}
		if code != 200 {
			if !strings.Contains(body, `cannot reveal resource \"vaults\"`) {
				t.Errorf("%s GET %s: %s, want the refusal to name reveal", step.who, step.path, body)
			}
			continue
		}
		if got := strings.Contains(body, clear); got != step.clear {
			t.Errorf("%s GET %s shows the password: %v, want %v: %.300s", step.who, step.path, got, step.clear, body)
		}
		if !step.clear && !strings.Contains(body, hub.SecretMarker) {
			t.Errorf("%s GET %s lacks the marker: %.300s", step.who, step.path, body)
		}
	}
}
