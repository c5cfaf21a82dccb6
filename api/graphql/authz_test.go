package graphql_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/api/access"
	"github.com/cairn-dev/cairn/api/graphql"
	"github.com/cairn-dev/cairn/auth/authn"
	"github.com/cairn-dev/cairn/auth/rbac"
	"github.com/cairn-dev/cairn/hub"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/sqlite"
)

// The roles of the matrix, as an operator would write them for
// cairn serve --rbac-file: vic views everything, ed edits namespace a.
const authzRBAC = `apiVersion: rbac.authorization.k8s.io/v1
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
metadata: {name: flag-editor, namespace: a}
rules: [{apiGroups: [flipt.io], resources: [flags], verbs: [get, list, create, update]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: flag-editors, namespace: a}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: flag-editor}
subjects: [{kind: User, name: fay}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: one-flag, namespace: a}
rules: [{apiGroups: [flipt.io], resources: [flags], resourceNames: [fa], verbs: [get, update]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: one-flag, namespace: a}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: one-flag}
subjects: [{kind: User, name: nora}]`

// The --token-auth-file of the matrix.
const authzTokens = `admin-token,ada,1,"cairn:admins"
viewer-token,vic,2
editor-token,ed,3
flags-token,fay,4
nora-token,nora,5
`

type guarded struct {
	h   *hub.Hub
	url string
}

// startGuarded serves GraphQL behind the access guard, as cairn serve does
// with --token-auth-file and --rbac-file, over real HTTP.
func startGuarded(t *testing.T) *guarded {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "cairn.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	var pol rbac.Policy
	for doc := range strings.SplitSeq(authzRBAC, "\n---\n") {
		if err := pol.Parse([]byte(doc)); err != nil {
			t.Fatal(err)
		}
	}
	h, err := hub.New(ctx, hub.Config{Store: st, RBAC: pol})
	if err != nil {
		t.Fatal(err)
	}
	tf, err := authn.ParseTokenFile(strings.NewReader(authzTokens))
	if err != nil {
		t.Fatal(err)
	}
	g := access.New(access.Config{Authn: &authn.Chain{Tokens: []authn.TokenAuthenticator{tf}}, Authz: h})
	mux := http.NewServeMux()
	mux.Handle("/graphql", graphql.New(graphql.Config{Hub: h}))
	srv := httptest.NewServer(g.Wrap(mux))
	t.Cleanup(srv.Close)
	return &guarded{h: h, url: srv.URL + "/graphql"}
}

// post sends query with token ("" for none) and returns the HTTP status and
// the GraphQL response.
func (g *guarded) post(t *testing.T, token, query string) (int, response) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"query": query})
	req, _ := http.NewRequest(http.MethodPost, g.url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	var out response
	if res.StatusCode == http.StatusOK {
		if err := json.Unmarshal(b, &out); err != nil {
			t.Fatalf("decode %s: %v", b, err)
		}
	}
	return res.StatusCode, out
}

func errText(r response) string {
	var msgs []string
	for _, e := range r.Errors {
		msgs = append(msgs, e.Message)
	}
	return strings.Join(msgs, " | ")
}

// listedIDs returns the ids of data.<field>, a list of objects with an id.
func listedIDs(t *testing.T, data json.RawMessage, path ...string) []string {
	t.Helper()
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	for _, p := range path {
		m, _ := v.(map[string]any)
		v = m[p]
	}
	var out []string
	list, _ := v.([]any)
	for _, e := range list {
		if m, ok := e.(map[string]any); ok {
			out = append(out, m["id"].(string))
		}
	}
	slices.Sort(out)
	return out
}

const testType = "cap.type.authz.thing"

func typeRef() cairn.TypeRef { return cairn.TypeRef{Path: testType, Revision: "0.1.0"} }

// flagRef is a Type served over REST as flags.flipt.io.
var flagRef = cairn.TypeRef{Path: "io.flipt.flag", Revision: "1.0.0"}

// TestAuthorization is the identity x operation matrix of GraphQL: every
// field asks the RBAC decision REST asks, lists are filtered per namespace,
// gets and writes that are not allowed fail naming verb, resource and
// namespace, and a multi-instance write is all or nothing.
func TestAuthorization(t *testing.T) {
	g := startGuarded(t)
	ctx := context.Background()
	if _, err := g.h.CreateType(ctx, cairn.Type{Path: flagRef.Path, Revision: flagRef.Revision, Group: "flipt.io", Version: "v1",
		Names: &cairn.Names{Kind: "Flag", Singular: "flag", Plural: "flags"}, JSONSchema: json.RawMessage(`{"type":"object"}`)}); err != nil {
		t.Fatal(err)
	}
	seed, err := g.h.CreateInstances(ctx, hub.CreateRequest{
		Instances: []hub.NewInstance{
			{Alias: "a1", Namespace: "a", Name: "a1", TypeRef: typeRef(), Value: json.RawMessage(`{"n":1}`)},
			{Alias: "b1", Namespace: "b", Name: "b1", TypeRef: typeRef(), Value: json.RawMessage(`{"n":2}`)},
			{Alias: "fa", Namespace: "a", Name: "fa", TypeRef: flagRef, Value: json.RawMessage(`{}`)},
			{Alias: "fb", Namespace: "b", Name: "fb", TypeRef: flagRef, Value: json.RawMessage(`{}`)},
		},
		UsesRelations: []hub.UsesRelation{{From: "a1", To: "b1"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	a1, b1, fa, fb := seed[0].ID, seed[1].ID, seed[2].ID, seed[3].ID
	flags := []string{fa, fb}
	slices.Sort(flags)
	both := []string{a1, b1}
	slices.Sort(both)
	usedByA1 := []string{b1, cairn.BuiltinBackendID} // a1's value lives in the built-in backend
	slices.Sort(usedByA1)

	const (
		anon   = ""
		admin  = "admin-token"
		viewer = "viewer-token"
		editor = "editor-token"
		// fay may edit flags.flipt.io in a, nothing else: over GraphQL
		// she reaches the Flags of a and no other instance.
		flagger = "flags-token"
	)
	forbidden := func(verb, resource, ns string) string {
		scope := "at the cluster scope"
		if ns != "" {
			scope = `in the namespace "` + ns + `"`
		}
		return `cannot ` + verb + ` resource "` + resource + `" in API group "hub.cairn.dev" ` + scope
	}
	type want struct {
		err string   // a substring of the errors; "" for none
		ids []string // for list operations: the ids answered
	}
	ok := want{}
	create := func(ns string) string {
		return `mutation { createTypeInstance(in: {typeRef: {path: "` + testType + `", revision: "0.1.0"}, namespace: "` + ns + `", value: {}}, dryRun: true) }`
	}
	createFlag := func(ns string) string {
		return `mutation { createTypeInstance(in: {typeRef: {path: "io.flipt.flag", revision: "1.0.0"}, namespace: "` + ns + `", name: "new", value: {}}, dryRun: true) }`
	}
	noTI := func(verb, ns string) want { return want{err: `User "fay" ` + forbidden(verb, "typeinstances", ns)} }
	for _, op := range []struct {
		name  string
		query string
		list  []string // path to the list whose ids are compared
		want  map[string]want
	}{
		{"list typeInstances", `{ typeInstances(filter: {typeRef: {path: "` + testType + `"}}) { id } }`, []string{"typeInstances"},
			map[string]want{admin: {ids: both}, viewer: {ids: both}, editor: {ids: []string{a1}}, flagger: {ids: nil}}},
		{"list flags", `{ typeInstances(filter: {typeRef: {path: "io.flipt.flag"}}) { id } }`, []string{"typeInstances"},
			map[string]want{admin: {ids: flags}, viewer: {ids: flags}, editor: {ids: []string{fa}}, flagger: {ids: []string{fa}}}},
		{"get a flag in a", `{ typeInstance(id: "` + fa + `") { id } }`, nil,
			map[string]want{admin: ok, viewer: ok, editor: ok, flagger: ok}},
		{"get a flag in b", `{ typeInstance(id: "` + fb + `") { id } }`, nil,
			map[string]want{admin: ok, viewer: ok, editor: {err: forbidden("get", "typeinstances", "")}, flagger: noTI("get", "")}},
		{"create a flag in a", createFlag("a"), nil,
			map[string]want{admin: ok, viewer: {err: forbidden("create", "typeinstances", "a")}, editor: ok, flagger: ok}},
		{"update a flag in a", `mutation { updateTypeInstances(in: [{id: "` + fa + `", typeInstance: {value: {on: true}}}], dryRun: true) { id } }`, nil,
			map[string]want{admin: ok, viewer: {err: forbidden("update", "typeinstances", "a")}, editor: ok, flagger: ok}},
		{"delete a flag in a", `mutation { deleteTypeInstance(id: "` + fa + `", dryRun: true) }`, nil,
			map[string]want{admin: ok, viewer: {err: forbidden("delete", "typeinstances", "a")}, editor: ok, flagger: noTI("delete", "a")}},
		{"get in a", `{ typeInstance(id: "` + a1 + `") { id } }`, nil,
			map[string]want{admin: ok, viewer: ok, editor: ok, flagger: noTI("get", "")}},
		{"get in b", `{ typeInstance(id: "` + b1 + `") { id } }`, nil,
			map[string]want{admin: ok, viewer: ok, editor: {err: `typeinstances.hub.cairn.dev "` + b1 + `" is forbidden: User "ed" ` + forbidden("get", "typeinstances", "")}, flagger: noTI("get", "")}},
		{"relations of a1", `{ typeInstance(id: "` + a1 + `") { uses { id } } }`, []string{"typeInstance", "uses"},
			map[string]want{admin: {ids: usedByA1}, viewer: {ids: usedByA1}, editor: {ids: nil}, flagger: {err: `User "fay" ` + forbidden("get", "typeinstances", "")}}},
		{"backend details of a1", `{ typeInstance(id: "` + a1 + `") { backend { id url acceptValue } } }`, nil,
			map[string]want{admin: ok, viewer: ok, editor: {err: `backends.hub.cairn.dev "` + cairn.BuiltinBackendID + `" is forbidden: User "ed" ` + forbidden("get", "backends", "")},
				flagger: noTI("get", "")}},
		{"types", `{ types { path } }`, nil,
			map[string]want{admin: ok, viewer: ok, editor: {err: forbidden("list", "types", "")}, flagger: {err: forbidden("list", "types", "")}}},
		{"storageBackends", `{ storageBackends { id } }`, nil,
			map[string]want{admin: ok, viewer: ok, editor: {err: forbidden("list", "backends", "")}, flagger: {err: forbidden("list", "backends", "")}}},
		{"policy", `{ policy { resourceVersion } }`, nil,
			map[string]want{admin: ok, viewer: ok, editor: {err: forbidden("get", "policies", "")}, flagger: {err: forbidden("get", "policies", "")}}},
		{"create in a", create("a"), nil,
			map[string]want{admin: ok, viewer: {err: `User "vic" ` + forbidden("create", "typeinstances", "a")}, editor: ok, flagger: noTI("create", "a")}},
		{"create in b", create("b"), nil,
			map[string]want{admin: ok, viewer: {err: forbidden("create", "typeinstances", "b")}, editor: {err: `User "ed" ` + forbidden("create", "typeinstances", "b")}, flagger: noTI("create", "b")}},
		{"update in a", `mutation { updateTypeInstances(in: [{id: "` + a1 + `", typeInstance: {value: {n: 3}}}], dryRun: true) { id } }`, nil,
			map[string]want{admin: ok, viewer: {err: forbidden("update", "typeinstances", "a")}, editor: ok, flagger: noTI("update", "")}},
		{"delete in b", `mutation { deleteTypeInstance(id: "` + b1 + `", dryRun: true) }`, nil,
			map[string]want{admin: {err: "used by other TypeInstances"}, viewer: {err: forbidden("delete", "typeinstances", "b")}, editor: {err: forbidden("delete", "typeinstances", "")}, flagger: noTI("delete", "")}},
		{"lock in a", `mutation { lockTypeInstances(in: {ids: ["` + a1 + `"], ownerID: "o"}, dryRun: true) }`, nil,
			map[string]want{admin: ok, viewer: {err: forbidden("update", "typeinstances", "a")}, editor: ok, flagger: noTI("update", "")}},
	} {
		for _, who := range []string{anon, viewer, editor, flagger, admin} {
			code, res := g.post(t, who, op.query)
			name := map[string]string{anon: "anonymous", admin: "admin", viewer: "viewer", editor: "editor of a", flagger: "flags editor of a"}[who]
			if who == anon {
				// With an authenticator configured, nothing answers
				// without credentials.
				if code != http.StatusForbidden {
					t.Errorf("%s / %s: HTTP %d, want 403", name, op.name, code)
				}
				continue
			}
			if code != http.StatusOK {
				t.Errorf("%s / %s: HTTP %d, want 200", name, op.name, code)
				continue
			}
			w := op.want[who]
			switch got := errText(res); {
			case w.err == "" && got != "":
				t.Errorf("%s / %s: unexpected errors: %s", name, op.name, got)
			case w.err != "" && !strings.Contains(got, w.err):
				t.Errorf("%s / %s: errors %q, want one containing %q", name, op.name, got, w.err)
			}
			if op.list != nil && w.err == "" {
				if got := listedIDs(t, res.Data, op.list...); !slices.Equal(got, w.ids) {
					t.Errorf("%s / %s: ids %v, want %v", name, op.name, got, w.ids)
				}
			}
		}
	}

	// All or nothing: a batch the editor may make only in part changes
	// nothing, and the error names every denial.
	code, res := g.post(t, editor, `mutation { createTypeInstances(in: {typeInstances: [
		{alias: "x", typeRef: {path: "`+testType+`", revision: "0.1.0"}, namespace: "a", name: "x", value: {}},
		{alias: "y", typeRef: {path: "`+testType+`", revision: "0.1.0"}, namespace: "b", name: "y", value: {}},
		{alias: "z", typeRef: {path: "`+testType+`", revision: "0.1.0"}, namespace: "c", name: "z", value: {}}], usesRelations: []}) { id } }`)
	if code != 200 || !strings.Contains(errText(res), forbidden("create", "typeinstances", "b")) || !strings.Contains(errText(res), forbidden("create", "typeinstances", "c")) {
		t.Errorf("editor's batch over a, b and c: %d %s", code, errText(res))
	}
	code, res = g.post(t, editor, `mutation { updateTypeInstances(in: [{id: "`+a1+`", typeInstance: {value: {n: 9}}}, {id: "`+b1+`", typeInstance: {value: {n: 9}}}]) { id } }`)
	if code != 200 || !strings.Contains(errText(res), forbidden("update", "typeinstances", "")) {
		t.Errorf("editor's update of a1 and b1: %d %s", code, errText(res))
	}
	// A relation to what the editor cannot see is refused too.
	code, res = g.post(t, editor, `mutation { createTypeInstances(in: {typeInstances: [
		{alias: "x", typeRef: {path: "`+testType+`", revision: "0.1.0"}, namespace: "a", name: "x", value: {}}],
		usesRelations: [{from: "x", to: "`+b1+`"}]}) { id } }`)
	if code != 200 || !strings.Contains(errText(res), forbidden("get", "typeinstances", "")) {
		t.Errorf("editor relating a new instance to b1: %d %s", code, errText(res))
	}
	list, err := g.h.ListInstances(ctx, store.InstanceFilter{TypePath: testType}, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 {
		t.Errorf("after the refused writes there are %d instances, want the 2 seeded", len(list))
	}
	for _, inst := range list {
		if inst.Latest.ResourceVersion != 1 || strings.Contains(string(inst.Latest.Value), "9") {
			t.Errorf("%s changed by a refused write: version %d, value %s", inst.Name, inst.Latest.ResourceVersion, inst.Latest.Value)
		}
	}

	// A Role naming one object (resourceNames) opens that object for the
	// verbs it grants, and no list.
	for _, c := range []struct {
		query, want string
	}{
		{`{ typeInstance(id: "` + fa + `") { name } }`, `{"typeInstance":{"name":"fa"}}`},
		{`{ typeInstances(filter: {typeRef: {path: "io.flipt.flag"}}) { id } }`, `{"typeInstances":[]}`},
		{`{ typeInstance(id: "` + fb + `") { name } }`, forbidden("get", "typeinstances", "")},
		{`mutation { updateTypeInstances(in: [{id: "` + fa + `", typeInstance: {value: {on: true}}}], dryRun: true) { name } }`, `"name":"fa"`},
		{`mutation { deleteTypeInstance(id: "` + fa + `", dryRun: true) }`, forbidden("delete", "typeinstances", "a")},
	} {
		_, res := g.post(t, "nora-token", c.query)
		if got := string(res.Data) + errText(res); !strings.Contains(got, c.want) {
			t.Errorf("nora: %s: %s, want %s", c.query, got, c.want)
		}
	}

	// An id the caller may not see and an id that does not exist get the
	// same answer, the id aside: the denial at the cluster scope, as on
	// REST, never the namespace the instance is in. A caller who may read
	// every instance learns that an id does not exist (null, Local Hub's
	// answer; Local Hub's "not found" for a write).
	const missing = "3f0c0b9e-0000-4000-8000-000000000000"
	for _, q := range []string{
		`{ typeInstance(id: "%s") { id } }`,
		`mutation { updateTypeInstances(in: [{id: "%s", typeInstance: {value: {n: 3}}}], dryRun: true) { id } }`,
		`mutation { deleteTypeInstance(id: "%s", dryRun: true) }`,
		`mutation { lockTypeInstances(in: {ids: ["%s"], ownerID: "o"}, dryRun: true) }`,
		`mutation { createTypeInstances(in: {typeInstances: [{alias: "x", typeRef: {path: "` + testType + `", revision: "0.1.0"}, namespace: "a", value: {}}], usesRelations: [{from: "x", to: "%s"}]}, dryRun: true) { id } }`,
	} {
		_, hidden := g.post(t, editor, strings.ReplaceAll(q, "%s", b1))
		_, absent := g.post(t, editor, strings.ReplaceAll(q, "%s", missing))
		h, m := strings.ReplaceAll(errText(hidden), b1, "ID"), strings.ReplaceAll(errText(absent), missing, "ID")
		if h == "" || h != m || strings.Contains(h, `namespace "b"`) {
			t.Errorf("editor: %s\n  on b1:      %s\n  on a missing id: %s\nwant the same denial at the cluster scope", q, h, m)
		}
	}
	if _, res := g.post(t, viewer, `{ typeInstance(id: "`+missing+`") { id } }`); len(res.Errors) > 0 || string(res.Data) != `{"typeInstance":null}` {
		t.Errorf("viewer reading a missing id: %s %s, want null", res.Data, errText(res))
	}
	if _, res := g.post(t, admin, `mutation { deleteTypeInstance(id: "`+missing+`", dryRun: true) }`); !strings.Contains(errText(res), "not found") {
		t.Errorf("admin deleting a missing id: %s, want not found", errText(res))
	}

	// createdBy naming someone else is impersonating them: the editor may
	// not, the admin may; one's own name is always fine.
	claim := func(token, createdBy string) response {
		_, res := g.post(t, token, `mutation { createTypeInstance(in: {typeRef: {path: "`+testType+`", revision: "0.1.0"}, namespace: "a", createdBy: "`+createdBy+`", value: {}}, dryRun: true) }`)
		return res
	}
	if res := claim(editor, "someone-else"); !strings.Contains(errText(res), `users "someone-else" is forbidden: User "ed" cannot impersonate resource "users" in API group "" at the cluster scope: createdBy names another user`) {
		t.Errorf("editor claiming createdBy someone-else: %s", errText(res))
	}
	if res := claim(editor, "ed"); len(res.Errors) > 0 {
		t.Errorf("editor giving their own name as createdBy: %s", errText(res))
	}
	if res := claim(admin, "capact-engine"); len(res.Errors) > 0 {
		t.Errorf("admin claiming createdBy: %s", errText(res))
	}
	if _, res := g.post(t, editor, `mutation { updateTypeInstances(in: [{id: "`+a1+`", createdBy: "someone-else", typeInstance: {value: {n: 4}}}]) { id } }`); !strings.Contains(errText(res), "createdBy names another user") {
		t.Errorf("editor updating with createdBy someone-else: %s", errText(res))
	}
	if inst, err := g.h.GetInstance(ctx, a1, false); err != nil || inst.Latest.ResourceVersion != 1 {
		t.Errorf("a1 after the refused update: version %d, %v", inst.Latest.ResourceVersion, err)
	}

	// What is allowed happens, with the authenticated user recorded.
	code, res = g.post(t, editor, `mutation { createTypeInstance(in: {typeRef: {path: "`+testType+`", revision: "0.1.0"}, namespace: "a", name: "mine", value: {}}) }`)
	if code != 200 || len(res.Errors) > 0 {
		t.Fatalf("editor creating in a: %d %s", code, errText(res))
	}
	mine, err := g.h.GetInstanceByName(ctx, testType, "a", "mine", false)
	if err != nil {
		t.Fatal(err)
	}
	if mine.Latest.CreatedBy != "ed" {
		t.Errorf("createdBy %q, want the authenticated ed", mine.Latest.CreatedBy)
	}
}

// BenchmarkFieldAuthorization is the cost of asking RBAC per field: the
// list of 100 instances with every field Capact's clients read (relations
// included, each checked) as a viewer bound by a ClusterRoleBinding, against
// the same request from an in-process caller, for whom nothing is asked;
// alternated in one loop, authorized/bare is the ratio.
func BenchmarkFieldAuthorization(b *testing.B) {
	var pol rbac.Policy
	if err := pol.Parse([]byte(strings.Split(authzRBAC, "\n---\n")[0])); err != nil {
		b.Fatal(err)
	}
	e := newEnv(b, func(h *hub.Config, _ *graphql.Config) { h.RBAC = pol })
	seed(e, 100)
	hd := graphql.New(graphql.Config{Hub: e.h})
	body, _ := json.Marshal(map[string]any{"query": listQuery})
	vic := cairn.User{Name: "vic", Groups: []string{cairn.Authenticated}}
	timed := func(asVic bool) time.Duration {
		req := httptest.NewRequest("POST", "/graphql", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if asVic {
			req = req.WithContext(cairn.WithUser(req.Context(), vic))
		}
		rec := httptest.NewRecorder()
		t0 := time.Now()
		hd.ServeHTTP(rec, req)
		d := time.Since(t0)
		if rec.Code != 200 || bytes.Contains(rec.Body.Bytes(), []byte(`"errors"`)) || !bytes.Contains(rec.Body.Bytes(), []byte(`"usedBy"`)) {
			b.Fatalf("%d %.300s", rec.Code, rec.Body)
		}
		return d
	}
	var authorized, bare time.Duration
	for i := 0; b.Loop(); i++ {
		if i%2 == 0 {
			bare += timed(false)
			authorized += timed(true)
		} else {
			authorized += timed(true)
			bare += timed(false)
		}
	}
	b.ReportMetric(float64(authorized)/float64(bare), "authorized/bare")
	b.ReportMetric(float64(bare.Nanoseconds())/float64(b.N), "bare-ns/op")
	b.ReportMetric(float64(authorized.Nanoseconds())/float64(b.N), "authorized-ns/op")
}
