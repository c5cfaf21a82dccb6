package access_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestApplyNeedsItsVerbs: a server-side apply is authorized as the PATCH it
// is, and what it does beyond a patch needs its own verb, as in the API
// server: an apply that creates the object needs create too, and the
// status subresource, whose grant covers status alone, takes no apply (an
// apply configuration cannot own status, so it would write the spec or
// create the object instead).
func TestApplyNeedsItsVerbs(t *testing.T) {
	e := start(t)
	const admin, patcher, statusWriter = "admin (OIDC)", "patcher of a (token)", "status writer of a"
	if code, out := e.do(t, admin, "POST", "/apis/hub.cairn.dev/v1/types", flagsRD); code != http.StatusCreated {
		t.Fatalf("register flags: %d %s", code, out)
	}
	const flags = "/apis/flipt.io/v1/namespaces/a/flags"
	if code, out := e.do(t, admin, "POST", flags, ti("a", "seed")); code != http.StatusCreated {
		t.Fatalf("seed: %d %s", code, out)
	}
	apply := func(name, desc string) string {
		return `{"apiVersion":"flipt.io/v1","kind":"Flag","metadata":{"name":"` + name + `"},"spec":{"description":"` + desc + `"}}`
	}
	const ssa = "application/apply-patch+yaml"
	for _, tc := range []struct {
		name, who, method, path, body, ct string
		code                              int
		say                               string // in the answer
	}{
		{"apply creating, patch without create", patcher, "PATCH", flags + "/new1?fieldManager=t", apply("new1", "x"), ssa,
			http.StatusForbidden, `flags.flipt.io \"new1\" is forbidden: User \"pat\" cannot create resource \"flags\" in API group \"flipt.io\" in the namespace \"a\"`},
		{"apply creating, dry run", patcher, "PATCH", flags + "/new1?fieldManager=t&dryRun=All", apply("new1", "x"), ssa,
			http.StatusForbidden, `cannot create resource \"flags\"`},
		{"apply to an existing object, patch", patcher, "PATCH", flags + "/seed?fieldManager=t&force=true", apply("seed", "by pat"), ssa,
			http.StatusOK, `"description":"by pat"`},
		{"apply creating, admin", admin, "PATCH", flags + "/new2?fieldManager=t", apply("new2", "x"), ssa,
			http.StatusCreated, `"name":"new2"`},
		{"apply to status creating", statusWriter, "PATCH", flags + "/new3/status?fieldManager=t", apply("new3", "x"), ssa,
			http.StatusUnsupportedMediaType, "server-side apply of the status subresource is not supported"},
		{"apply to status of an existing object", statusWriter, "PATCH", flags + "/seed/status?fieldManager=t&force=true", apply("seed", "by stat"), ssa,
			http.StatusUnsupportedMediaType, "server-side apply of the status subresource is not supported"},
		{"merge patch of status", statusWriter, "PATCH", flags + "/seed/status", `{"spec":{"description":"by stat"}}`, "application/merge-patch+json",
			http.StatusOK, `"description":"by pat"`},
	} {
		code, out := e.do(t, tc.who, tc.method, tc.path, tc.body, "Content-Type", tc.ct)
		if code != tc.code || !strings.Contains(out, tc.say) {
			t.Errorf("%s: %d %.400s, want %d saying %s", tc.name, code, out, tc.code, tc.say)
		}
	}
	for name, want := range map[string]int{"new1": 404, "new2": 200, "new3": 404} {
		if code, out := e.do(t, admin, "GET", flags+"/"+name, ""); code != want {
			t.Errorf("GET %s after the applies: %d %.200s, want %d", name, code, out, want)
		}
	}
	if _, out := e.do(t, admin, "GET", flags+"/seed", ""); !strings.Contains(out, `"description":"by pat"`) {
		t.Errorf("seed after the applies: %.400s, want the patcher's description, untouched by the status writer", out)
	}
}

// TestStatusWriterSeesNoSecrets: a grant of the status subresource writes
// status and reads the object as get does, so without reveal the secret
// values stay hidden from it: not in the answer to its write, and not
// reachable by a JSON patch that copies or tests them (whose copy in
// status anyone who may get the object would then read).
func TestStatusWriterSeesNoSecrets(t *testing.T) {
	e := start(t)
	const admin, statusWriter = "admin (OIDC)", "status writer of a"
	const clear = "open-sesame-1234"
	rd := `{"apiVersion": "cup.flipt.io/v1alpha1", "kind": "ResourceDefinition", "metadata": {"name": "vaults.example.org"},
 "names": {"kind": "Vault", "singular": "vault", "plural": "vaults"},
 "spec": {"group": "example.org", "versions": {"v1": {"schema": {"type": "object", "properties": {"user": {"type": "string"}, "password": {"type": "string", "x-cairn-secret": true}}}}}}}`
	if code, body := e.do(t, admin, "POST", "/apis/hub.cairn.dev/v1/types", rd); code != http.StatusCreated {
		t.Fatalf("register the Type: %d %s", code, body)
	}
	const obj = "/apis/example.org/v1/namespaces/a/vaults/v1"
	if code, body := e.do(t, admin, "POST", "/apis/example.org/v1/namespaces/a/vaults", `{"apiVersion":"example.org/v1","kind":"Vault","metadata":{"name":"v1"},"spec":{"user":"u","password":"`+clear+`"}}`); code != http.StatusCreated {
		t.Fatalf("create: %d %s", code, body)
	}
	const jsonPatch = "application/json-patch+json"
	for _, tc := range []struct {
		name, method, body, ct string
		code                   int
	}{
		{"PUT status", "PUT", `{"apiVersion":"example.org/v1","kind":"Vault","metadata":{"name":"v1"},"status":{"phase":"ok"}}`, "application/json", http.StatusOK},
		{"merge patch of status", "PATCH", `{"status":{"phase":"ok2"}}`, "application/merge-patch+json", http.StatusOK},
		{"JSON patch copying the secret to status", "PATCH", `[{"op":"copy","from":"/spec/password","path":"/status/leak"}]`, jsonPatch, http.StatusOK},
		{"JSON patch testing the secret", "PATCH", `[{"op":"test","path":"/spec/password","value":"` + clear + `"},{"op":"add","path":"/status/guessed","value":"yes"}]`, jsonPatch, http.StatusUnprocessableEntity},
	} {
		code, out := e.do(t, statusWriter, tc.method, obj+"/status", tc.body, "Content-Type", tc.ct)
		if code != tc.code || strings.Contains(out, clear) {
			t.Errorf("%s: %d %.400s, want %d without the password", tc.name, code, out, tc.code)
		}
	}
	_, out := e.do(t, admin, "GET", obj, "")
	if strings.Contains(out, `"leak":"`+clear) || strings.Contains(out, `"guessed"`) {
		t.Errorf("the status writer reached the secret: %.600s", out)
	}
	if !strings.Contains(out, clear) {
		t.Errorf("the password itself changed: %.600s", out)
	}
}
