package graphql_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/api/graphql"
	"github.com/cairn-dev/cairn/hub"
)

// allFields asks for every field of a TypeInstance, as Capact's clients do.
const allFields = `
fragment RV on TypeInstanceResourceVersion {
  resourceVersion createdBy createdAt
  metadata { attributes { path revision } }
  spec { value backend { context } instrumentation { health { url } } }
}
fragment TI on TypeInstance {
  id createdAt lockedBy namespace name labels { key value }
  typeRef { path revision }
  backend { id abstract alias url acceptValue contextSchema }
  uses { id typeRef { path revision } }
  usedBy { id typeRef { path revision } }
  latestResourceVersion { ...RV }
  firstResourceVersion { ...RV }
  previousResourceVersion { ...RV }
  resourceVersions { ...RV }
}`

type rv struct {
	ResourceVersion int
	CreatedBy       *string
	Metadata        struct{ Attributes []cairn.AttributeRef }
	Spec            struct {
		Value   json.RawMessage
		Backend struct{ Context json.RawMessage }
	}
}

type instance struct {
	ID        string
	CreatedAt *time.Time
	LockedBy  *string
	Namespace string
	Name      string
	Labels    []struct{ Key, Value string }
	TypeRef   cairn.TypeRef
	Backend   struct {
		ID            string
		Abstract      bool
		Alias         *string
		URL           *string
		AcceptValue   *bool
		ContextSchema json.RawMessage
	}
	Uses                    []struct{ ID string }
	UsedBy                  []struct{ ID string }
	LatestResourceVersion   *rv
	FirstResourceVersion    *rv
	PreviousResourceVersion *rv
	ResourceVersions        []rv
}

func ids(list []struct{ ID string }) []string {
	out := make([]string, len(list))
	for i, x := range list {
		out[i] = x.ID
	}
	return out
}

func (e *env) get(id string) *instance {
	e.t.Helper()
	var out struct{ TypeInstance *instance }
	e.ok(allFields+`query($id: ID!) { typeInstance(id: $id) { ...TI } }`, map[string]any{"id": id}, &out)
	return out.TypeInstance
}

func TestCreateAndRead(t *testing.T) {
	e := newEnv(t)
	app := ti("app", "cap.type.app", "0.1.0", map[string]any{"name": "billing", "big": json.Number("12345678901234567890")})
	app["createdBy"] = "tester"
	app["attributes"] = []map[string]any{{"path": "cap.attribute.prod", "revision": "0.1.0"}}
	app["namespace"] = "team-a"
	app["name"] = "billing"
	app["labels"] = []map[string]any{{"key": "tier", "value": "gold"}, {"key": "app", "value": "billing"}}
	got := e.create([]map[string]any{app, ti("db", "cap.type.db", "0.1.0", "postgres")}, [2]string{"app", "db"})
	if len(got) != 2 || got["app"] == "" || got["db"] == "" {
		t.Fatalf("created %v", got)
	}

	a := e.get(got["app"])
	if a == nil {
		t.Fatal("typeInstance(app) is null")
	}
	checks := []struct {
		name string
		ok   bool
	}{
		{"typeRef", a.TypeRef == cairn.TypeRef{Path: "cap.type.app", Revision: "0.1.0"}},
		{"namespace/name", a.Namespace == "team-a" && a.Name == "billing"},
		{"labels sorted by key", len(a.Labels) == 2 && a.Labels[0].Key == "app" && a.Labels[1].Value == "gold"},
		{"createdAt", a.CreatedAt != nil && time.Since(*a.CreatedAt) < time.Minute},
		{"not locked", a.LockedBy == nil},
		{"built-in backend", a.Backend.ID == cairn.BuiltinBackendID && a.Backend.Abstract},
		{"backend alias", a.Backend.Alias != nil && *a.Backend.Alias == cairn.BuiltinBackendAlias},
		{"backend accepts values, no url", a.Backend.AcceptValue != nil && *a.Backend.AcceptValue && a.Backend.URL == nil},
		{"uses db and its backend", slices.Contains(ids(a.Uses), got["db"]) && slices.Contains(ids(a.Uses), cairn.BuiltinBackendID)},
		{"usedBy none", len(a.UsedBy) == 0},
		{"latest version 1", a.LatestResourceVersion != nil && a.LatestResourceVersion.ResourceVersion == 1},
		{"value kept exactly (big number)", a.LatestResourceVersion != nil && string(a.LatestResourceVersion.Spec.Value) == `{"big":12345678901234567890,"name":"billing"}`},
		{"createdBy", a.LatestResourceVersion != nil && a.LatestResourceVersion.CreatedBy != nil && *a.LatestResourceVersion.CreatedBy == "tester"},
		{"attributes", a.LatestResourceVersion != nil && len(a.LatestResourceVersion.Metadata.Attributes) == 1 && a.LatestResourceVersion.Metadata.Attributes[0].Path == "cap.attribute.prod"},
		{"context null", a.LatestResourceVersion != nil && string(a.LatestResourceVersion.Spec.Backend.Context) == "null"},
		{"first is 1", a.FirstResourceVersion != nil && a.FirstResourceVersion.ResourceVersion == 1},
		{"no previous", a.PreviousResourceVersion == nil},
		{"one version", len(a.ResourceVersions) == 1},
	}
	for _, c := range checks {
		if !c.ok {
			t.Errorf("%s: got %+v", c.name, a)
		}
	}
	if db := e.get(got["db"]); db == nil || !slices.Equal(ids(db.UsedBy), []string{got["app"]}) || string(db.LatestResourceVersion.Spec.Value) != `"postgres"` {
		t.Errorf("db: %+v", db)
	}

	// createTypeInstance returns the id.
	var one struct{ CreateTypeInstance string }
	e.ok(`mutation($in: CreateTypeInstanceInput!) { createTypeInstance(in: $in) }`,
		map[string]any{"in": ti("", "cap.type.single", "0.1.0", 1)}, &one)
	if s := e.get(one.CreateTypeInstance); s == nil || s.TypeRef.Path != "cap.type.single" {
		t.Errorf("createTypeInstance: %+v", s)
	}

	// A missing id is null, not an error.
	if missing := e.get("00000000-0000-0000-0000-000000000000"); missing != nil {
		t.Errorf("missing instance: %+v", missing)
	}
}

func TestTypeInstancesFilter(t *testing.T) {
	e := newEnv(t)
	mk := func(alias, path, rev, createdBy string, attrs ...string) map[string]any {
		in := ti(alias, path, rev, alias)
		in["createdBy"] = createdBy
		var as []map[string]any
		for _, a := range attrs {
			as = append(as, map[string]any{"path": a, "revision": "0.1.0"})
		}
		in["attributes"] = as
		return in
	}
	got := e.create([]map[string]any{
		mk("a1", "cap.type.aws.s3", "0.1.0", "alice", "cap.attribute.prod"),
		mk("a2", "cap.type.aws.s3", "0.2.0", "bob", "cap.attribute.dev"),
		mk("a3", "cap.type.aws.rds", "0.1.0", "alice"),
		mk("g1", "cap.type.gcp.gcs", "0.1.0", "bob", "cap.attribute.prod"),
	})
	tests := []struct {
		name   string
		filter map[string]any
		want   []string // aliases, in list order
	}{
		{"type path", map[string]any{"typeRef": map[string]any{"path": "cap.type.aws.s3"}}, []string{"a2", "a1"}},
		{"type path and revision", map[string]any{"typeRef": map[string]any{"path": "cap.type.aws.s3", "revision": "0.1.0"}}, []string{"a1"}},
		{"type path pattern", map[string]any{"typeRef": map[string]any{"path": "cap.type.aws.*"}}, []string{"a3", "a2", "a1"}},
		{"createdBy", map[string]any{"createdBy": "bob"}, []string{"a2", "g1"}},
		{"attribute include", map[string]any{"attributes": []map[string]any{{"path": "cap.attribute.prod"}}}, []string{"a1", "g1"}},
		{"attribute exclude", map[string]any{"typeRef": map[string]any{"path": "cap.type.aws.*"}, "attributes": []map[string]any{{"path": "cap.attribute.prod", "rule": "EXCLUDE"}}}, []string{"a3", "a2"}},
		{"attribute revision", map[string]any{"attributes": []map[string]any{{"path": "cap.attribute.prod", "revision": "9.9.9"}}}, nil},
	}
	byID := map[string]string{}
	for alias, id := range got {
		byID[id] = alias
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out struct{ TypeInstances []struct{ ID string } }
			e.ok(`query($f: TypeInstanceFilter) { typeInstances(filter: $f) { id } }`, map[string]any{"f": tc.filter}, &out)
			var aliases []string
			for _, x := range out.TypeInstances {
				aliases = append(aliases, byID[x.ID])
			}
			if !slices.Equal(aliases, tc.want) {
				t.Errorf("got %v, want %v", aliases, tc.want)
			}
		})
	}
	// No filter lists everything, the built-in and gotemplate backends included.
	var all struct{ TypeInstances []struct{ ID string } }
	e.ok(`{ typeInstances { id } }`, nil, &all)
	if len(all.TypeInstances) != 6 {
		t.Errorf("unfiltered: %d instances, want 6", len(all.TypeInstances))
	}
}

func TestUsesAndUsedByOrder(t *testing.T) {
	e := newEnv(t)
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	var tick int
	e2 := newEnv(t, func(h *hub.Config, _ *graphql.Config) {
		h.Now = func() time.Time { tick++; return now.Add(time.Duration(tick) * time.Second) }
	})
	_ = e
	e = e2
	// Created one request each so createdAt differs.
	hubID := e.create([]map[string]any{ti("hub", "cap.type.hub", "0.1.0", 0)})["hub"]
	var order []string
	for _, c := range []struct{ alias, path, rev string }{
		{"b-old", "cap.type.b", "0.1.0"},
		{"a", "cap.type.a", "0.1.0"},
		{"b-new-rev", "cap.type.b", "0.2.0"},
		{"b-old-later", "cap.type.b", "0.1.0"},
	} {
		id := e.create([]map[string]any{ti(c.alias, c.path, c.rev, 0)}, [2]string{c.alias, hubID})[c.alias]
		e.create([]map[string]any{ti("user-"+c.alias, "cap.type.user", "0.1.0", 0)}, [2]string{hubID, id})
		order = append(order, id)
	}
	// Type path ascending, revision descending, createdAt descending.
	want := []string{order[1], order[2], order[3], order[0]}
	h := e.get(hubID)
	if got := ids(h.UsedBy); !slices.Equal(got, want) {
		t.Errorf("usedBy order %v, want %v", got, want)
	}
	uses := ids(h.Uses)
	// hub uses the four plus the built-in backend (cap.core... sorts first).
	if len(uses) != 5 || uses[0] != cairn.BuiltinBackendID || !slices.Equal(uses[1:], want) {
		t.Errorf("uses order %v, want builtin then %v", uses, want)
	}
}

func TestUpdateAndRevisions(t *testing.T) {
	e := newEnv(t)
	id := e.create([]map[string]any{ti("cfg", "cap.type.cfg", "0.1.0", map[string]any{"v": 1})})["cfg"]
	const update = `mutation($in: [UpdateTypeInstancesInput]!) { updateTypeInstances(in: $in) {
	  id latestResourceVersion { resourceVersion createdBy spec { value } metadata { attributes { path } } } uses { id } } }`
	for v := 2; v <= 3; v++ {
		var out struct {
			UpdateTypeInstances []instance
		}
		e.ok(update, map[string]any{"in": []map[string]any{{"id": id, "createdBy": fmt.Sprintf("rev%d", v),
			"typeInstance": map[string]any{"value": map[string]any{"v": v}}}}}, &out)
		u := out.UpdateTypeInstances
		if len(u) != 1 || u[0].LatestResourceVersion.ResourceVersion != v || string(u[0].LatestResourceVersion.Spec.Value) != fmt.Sprintf(`{"v":%d}`, v) {
			t.Fatalf("update to %d: %+v", v, u)
		}
		// The updated instance's relations are resolved too.
		if !slices.Equal(ids(u[0].Uses), []string{cairn.BuiltinBackendID}) {
			t.Errorf("updated instance uses %v", ids(u[0].Uses))
		}
	}
	// Attributes only: the value is carried over.
	e.ok(update, map[string]any{"in": []map[string]any{{"id": id, "typeInstance": map[string]any{
		"attributes": []map[string]any{{"path": "cap.attribute.x", "revision": "0.1.0"}}}}}}, nil)

	got := e.get(id)
	tests := []struct {
		name string
		rv   *rv
		n    int
		val  string
	}{
		{"latest", got.LatestResourceVersion, 4, `{"v":3}`},
		{"first", got.FirstResourceVersion, 1, `{"v":1}`},
		{"previous", got.PreviousResourceVersion, 3, `{"v":3}`},
	}
	for _, tc := range tests {
		if tc.rv == nil || tc.rv.ResourceVersion != tc.n || string(tc.rv.Spec.Value) != tc.val {
			t.Errorf("%s: %+v, want version %d with %s", tc.name, tc.rv, tc.n, tc.val)
		}
	}
	if len(got.ResourceVersions) != 4 || got.ResourceVersions[1].ResourceVersion != 2 || string(got.ResourceVersions[1].Spec.Value) != `{"v":2}` ||
		*got.ResourceVersions[1].CreatedBy != "rev2" {
		t.Errorf("resourceVersions: %+v", got.ResourceVersions)
	}
	if a := got.LatestResourceVersion.Metadata.Attributes; len(a) != 1 || a[0].Path != "cap.attribute.x" {
		t.Errorf("latest attributes %v", a)
	}
	var byN struct {
		TypeInstance struct {
			Two, Missing *rv
		}
	}
	e.ok(`query($id: ID!) { typeInstance(id: $id) {
	  two: resourceVersion(resourceVersion: 2) { resourceVersion spec { value } }
	  missing: resourceVersion(resourceVersion: 9) { resourceVersion } } }`, map[string]any{"id": id}, &byN)
	if byN.TypeInstance.Two == nil || string(byN.TypeInstance.Two.Spec.Value) != `{"v":2}` || byN.TypeInstance.Missing != nil {
		t.Errorf("resourceVersion(n): %+v", byN.TypeInstance)
	}
}

func TestLockUnlockDelete(t *testing.T) {
	e := newEnv(t)
	got := e.create([]map[string]any{ti("a", "cap.type.a", "0.1.0", 1), ti("b", "cap.type.b", "0.1.0", 2)})
	both := []string{got["a"], got["b"]}
	var locked struct{ LockTypeInstances []string }
	e.ok(`mutation($in: LockTypeInstancesInput!) { lockTypeInstances(in: $in) }`, map[string]any{"in": map[string]any{"ids": both, "ownerID": "me"}}, &locked)
	if !slices.Equal(locked.LockTypeInstances, both) {
		t.Errorf("lock returned %v", locked.LockTypeInstances)
	}
	if a := e.get(got["a"]); a.LockedBy == nil || *a.LockedBy != "me" {
		t.Errorf("lockedBy %+v", a.LockedBy)
	}
	// The owner may update a locked instance.
	e.ok(`mutation($in: [UpdateTypeInstancesInput]!) { updateTypeInstances(in: $in) { id } }`,
		map[string]any{"in": []map[string]any{{"id": got["a"], "ownerID": "me", "typeInstance": map[string]any{"value": 10}}}}, nil)
	// And delete it.
	var del struct{ DeleteTypeInstance string }
	e.ok(`mutation($id: ID!, $o: LockOwnerID) { deleteTypeInstance(id: $id, ownerID: $o) }`, map[string]any{"id": got["a"], "o": "me"}, &del)
	if del.DeleteTypeInstance != got["a"] || e.get(got["a"]) != nil {
		t.Errorf("delete returned %q; instance still there: %v", del.DeleteTypeInstance, e.get(got["a"]) != nil)
	}
	var unlocked struct{ UnlockTypeInstances []string }
	e.ok(`mutation($in: UnlockTypeInstancesInput!) { unlockTypeInstances(in: $in) }`, map[string]any{"in": map[string]any{"ids": []string{got["b"]}, "ownerID": "me"}}, &unlocked)
	if b := e.get(got["b"]); b.LockedBy != nil || !slices.Equal(unlocked.UnlockTypeInstances, []string{got["b"]}) {
		t.Errorf("after unlock: lockedBy %v, returned %v", b.LockedBy, unlocked.UnlockTypeInstances)
	}
}

func TestTypesAndStorageBackends(t *testing.T) {
	e := newEnv(t)
	for _, p := range []string{"cap.core.type.hub.storage.vault", "cap.type.other"} {
		if _, err := e.h.CreateType(e.ctx, cairn.Type{Path: p, Revision: "0.1.0", JSONSchema: json.RawMessage(`{"type":"object"}`)}); err != nil {
			t.Fatal(err)
		}
	}
	var types struct {
		Types []struct {
			Path, Revision, Name, Prefix string
			JSONSchema                   json.RawMessage
		}
	}
	e.ok(`{ types(filter: {pathPattern: "cap.core.type.hub.storage.*"}) { path revision name prefix jsonSchema } }`, nil, &types)
	var paths []string
	for _, ty := range types.Types {
		paths = append(paths, ty.Path)
	}
	if !slices.Equal(paths, []string{"cap.core.type.hub.storage.gotemplate", "cap.core.type.hub.storage.sqlite", "cap.core.type.hub.storage.vault"}) {
		t.Fatalf("types: %v", paths)
	}
	if v := types.Types[2]; v.Name != "vault" || v.Prefix != "cap.core.type.hub.storage" || string(v.JSONSchema) != `{"type":"object"}` {
		t.Errorf("vault type: %+v", v)
	}

	ctxSchema := `{"type":"object","properties":{"provider":{"type":"string"}}}`
	bid := e.registerBackend("vault", `{"url":"grpc://127.0.0.1:1","acceptValue":false,"contextSchema":`+ctxSchema+`}`)
	var sbs struct {
		StorageBackends []struct {
			ID            string
			Alias         *string
			Abstract      bool
			URL           *string
			AcceptValue   bool
			ContextSchema json.RawMessage
			TypeInstance  struct{ ID string }
		}
	}
	e.ok(`{ storageBackends { id alias abstract url acceptValue contextSchema typeInstance { id } } }`, nil, &sbs)
	if len(sbs.StorageBackends) != 3 { // built-in, gotemplate and vault
		t.Fatalf("storage backends: %+v", sbs)
	}
	found := false
	for _, sb := range sbs.StorageBackends {
		if sb.ID == bid {
			found = true
			if *sb.Alias != "vault" || sb.Abstract || *sb.URL != "grpc://127.0.0.1:1" || sb.AcceptValue || !cairn.JSONEqual(sb.ContextSchema, json.RawMessage(ctxSchema)) || sb.TypeInstance.ID != bid {
				t.Errorf("vault backend: %+v", sb)
			}
		}
	}
	if !found {
		t.Errorf("backend %s not listed", bid)
	}
}

// TestExternalBackendValues stores values in the example file backend over
// real gRPC and reads them back through spec.value, per resource version.
func TestExternalBackendValues(t *testing.T) {
	e := newEnv(t)
	bid := e.fileBackend(&faults{})
	in := ti("creds", "cap.type.creds", "0.1.0", map[string]any{"user": "billing", "password": "s3cret"})
	in["backend"] = map[string]any{"id": bid}
	id := e.create([]map[string]any{in})["creds"]
	e.ok(`mutation($in: [UpdateTypeInstancesInput]!) { updateTypeInstances(in: $in) { id } }`,
		map[string]any{"in": []map[string]any{{"id": id, "typeInstance": map[string]any{"value": map[string]any{"user": "billing", "password": "rotated"}}}}}, nil)

	got := e.get(id)
	if got.Backend.ID != bid || got.Backend.Abstract || got.Backend.URL == nil || !strings.HasPrefix(*got.Backend.URL, "grpc://127.0.0.1:") {
		t.Errorf("backend: %+v", got.Backend)
	}
	if v := string(got.LatestResourceVersion.Spec.Value); v != `{"password":"rotated","user":"billing"}` {
		t.Errorf("latest value from the backend: %s", v)
	}
	if v := string(got.FirstResourceVersion.Spec.Value); v != `{"password":"s3cret","user":"billing"}` {
		t.Errorf("first value from the backend: %s", v)
	}
	// The hub's own store holds no copy: the value came from the backend.
	if _, err := e.st.Value(e.ctx, id, 1); !cairn.HasCode(err, cairn.CodeNotFound) {
		t.Errorf("value of an external instance in the built-in table: %v", err)
	}
}

func TestProtection(t *testing.T) {
	e := newEnv(t, func(_ *hub.Config, g *graphql.Config) {
		g.MaxDepth = 4
		g.MaxComplexity = 30
		g.MaxBodyBytes = 2048
	})
	closed := newEnv(t, func(_ *hub.Config, g *graphql.Config) { g.Introspection = false })
	tests := []struct {
		name  string
		env   *env
		query string
		want  string // the error message; "" for success
	}{
		{"within limits", e, `{ typeInstances { id uses { id } } }`, ""},
		{"too deep", e, `{ typeInstances { uses { uses { uses { id } } } } }`, "operation is nested 5 levels deep, more than the limit of 4"},
		{"too deep through fragments", e, `fragment F on TypeInstance { uses { uses { id } } } { typeInstances { uses { ...F } } }`, "operation is nested 5 levels deep, more than the limit of 4"},
		{"too many selections", e, `{ a: typeInstances { id name namespace } b: typeInstances { id name namespace } c: typeInstances { id name namespace } d: typeInstances { id name namespace } e: typeInstances { id name namespace } f: typeInstances { id name namespace } g: typeInstances { id name namespace } h: typeInstances { id name namespace } }`, "the document has 32 selections, more than the limit of 30: ask for fewer fields"},
		{"too complex", e, `fragment F on TypeInstance { id name namespace } { a: typeInstances { ...F } b: typeInstances { ...F } c: typeInstances { ...F } d: typeInstances { ...F } e: typeInstances { ...F } f: typeInstances { ...F } g: typeInstances { ...F } h: typeInstances { ...F } }`, "operation has complexity 32, which exceeds the limit of 30"},
		{"body too large", e, `{ typeInstances { id } }` + strings.Repeat(" ", 4096), "could not read request body: http: request body too large"},
		{"introspection on", e, `{ __schema { queryType { name } } }`, ""},
		{"introspection off", closed, `{ __schema { queryType { name } } }`, "introspection disabled"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := tc.env.do(tc.query, nil)
			switch {
			case tc.want == "" && len(res.Errors) > 0:
				t.Fatalf("errors: %+v", res.Errors)
			case tc.want != "" && (len(res.Errors) != 1 || !strings.HasPrefix(res.Errors[0].Message, tc.want)):
				t.Fatalf("errors %+v, want %q", res.Errors, tc.want)
			}
		})
	}
}

func TestGETAndPage(t *testing.T) {
	e := newEnv(t)
	get := func(q, accept string) (int, string, string) {
		t.Helper()
		u := e.url
		if q != "" {
			u += "?query=" + url.QueryEscape(q)
		}
		req, _ := http.NewRequestWithContext(e.ctx, http.MethodGet, u, nil)
		req.Header.Set("Accept", accept)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, res.Header.Get("Content-Type"), string(b)
	}
	tests := []struct {
		name, query, accept string
		code                int
		contentType, body   string
	}{
		{"query over GET", `{ typeInstance(id: "x") { id } }`, "application/json", 200, "application/json", `{"data":{"typeInstance":null}}`},
		{"mutation over GET refused", `mutation { lockTypeInstances(in: {ids: ["x"], ownerID: "o"}) }`, "application/json", 405, "application/json", `{"errors":[{"message":"a mutation cannot be sent with GET: POST it"}]}`},
		{"browser gets the page", "", "text/html,application/xhtml+xml", 200, "text/html; charset=utf-8", "<title>cairn GraphQL</title>"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, ct, body := get(tc.query, tc.accept)
			if code != tc.code || ct != tc.contentType || !strings.Contains(body, tc.body) {
				t.Errorf("got %d %q %.300s; want %d %q containing %q", code, ct, body, tc.code, tc.contentType, tc.body)
			}
		})
	}
	// The page is self-contained: nothing is fetched from elsewhere.
	_, _, page := get("", "text/html")
	for _, ref := range []string{"http://", "https://", "src=\"", "href=\""} {
		if strings.Contains(page, ref) {
			t.Errorf("page refers to %q: it must work offline", ref)
		}
	}
}

// TestListWhileABackendIsDown: typeInstances reads no value unless the
// query selects spec.value. With the backend of one instance down, a list
// without values has every instance and no error; a list with values still
// has every instance, the unreadable one with latestResourceVersion null
// and an error at its path naming the backend and the instance, never an
// empty value.
func TestListWhileABackendIsDown(t *testing.T) {
	e := newEnv(t)
	bid, stop := e.stoppableFileBackend(&faults{})
	down := ti("down", "cap.type.down", "0.1.0", map[string]any{"k": "v"})
	down["backend"] = map[string]any{"id": bid}
	ids := e.create([]map[string]any{ti("here", "cap.type.down", "0.1.0", map[string]any{"k": "w"}), down})
	stop()

	type item struct {
		ID                    string
		LatestResourceVersion *struct {
			ResourceVersion int
			Spec            *struct{ Value json.RawMessage }
		}
	}
	var bare struct{ TypeInstances []item }
	e.ok(`{ typeInstances(filter: {typeRef: {path: "cap.type.down"}}) { id latestResourceVersion { resourceVersion } } }`, nil, &bare)
	if len(bare.TypeInstances) != 2 {
		t.Fatalf("without values: %+v", bare.TypeInstances)
	}

	res := e.do(`{ typeInstances(filter: {typeRef: {path: "cap.type.down"}}) { id latestResourceVersion { resourceVersion spec { value } } } }`, nil)
	var full struct{ TypeInstances []item }
	if err := json.Unmarshal(res.Data, &full); err != nil {
		t.Fatalf("decode %s: %v", res.Data, err)
	}
	if len(full.TypeInstances) != 2 {
		t.Fatalf("with values: %s, errors %+v", res.Data, res.Errors)
	}
	for _, it := range full.TypeInstances {
		switch it.ID {
		case ids["here"]:
			if it.LatestResourceVersion == nil || string(it.LatestResourceVersion.Spec.Value) != `{"k":"w"}` {
				t.Errorf("readable instance: %s", res.Data)
			}
		case ids["down"]:
			if it.LatestResourceVersion != nil {
				t.Errorf("unreadable instance shows %+v, want null", it.LatestResourceVersion)
			}
		}
	}
	if len(res.Errors) != 1 || !strings.Contains(res.Errors[0].Message, bid) || !strings.Contains(res.Errors[0].Message, ids["down"]) ||
		len(res.Errors[0].Path) < 3 || res.Errors[0].Path[0] != "typeInstances" {
		t.Errorf("errors = %+v, want one at typeInstances.N.latestResourceVersion naming backend %s and instance %s", res.Errors, bid, ids["down"])
	}
}

// TestAttributesAreAListNeverNull: Local Hub answers metadata.attributes of a
// resource version without attributes as [] (a relation list), and Capact's
// clients give [] to clear them; cairn answered null for both, which a client
// iterating the list (attributes.map in JS) fails on.
func TestAttributesAreAListNeverNull(t *testing.T) {
	e := newEnv(t)
	none := ti("none", "cap.type.a", "0.1.0", 1)
	empty := ti("empty", "cap.type.a", "0.1.0", 2)
	empty["attributes"] = []any{}
	some := ti("some", "cap.type.a", "0.1.0", 3)
	some["attributes"] = []map[string]any{{"path": "cap.attribute.x", "revision": "0.1.0"}}
	got := e.create([]map[string]any{none, empty, some})
	// An update giving [] clears the attributes of the new version.
	e.ok(`mutation($in: [UpdateTypeInstancesInput]!) { updateTypeInstances(in: $in) { id } }`,
		map[string]any{"in": []map[string]any{{"id": got["some"], "typeInstance": map[string]any{"attributes": []any{}}}}}, nil)

	const q = `query($id: ID!) { typeInstance(id: $id) {
	  latestResourceVersion { metadata { attributes { path } } }
	  firstResourceVersion { metadata { attributes { path } } } } }`
	tests := []struct{ alias, want string }{
		{"none", `{"typeInstance":{"latestResourceVersion":{"metadata":{"attributes":[]}},"firstResourceVersion":{"metadata":{"attributes":[]}}}}`},
		{"empty", `{"typeInstance":{"latestResourceVersion":{"metadata":{"attributes":[]}},"firstResourceVersion":{"metadata":{"attributes":[]}}}}`},
		{"some", `{"typeInstance":{"latestResourceVersion":{"metadata":{"attributes":[]}},"firstResourceVersion":{"metadata":{"attributes":[{"path":"cap.attribute.x"}]}}}}`},
	}
	for _, tc := range tests {
		res := e.do(q, map[string]any{"id": got[tc.alias]})
		if len(res.Errors) > 0 || string(res.Data) != tc.want {
			t.Errorf("%s: %s %+v\nwant %s", tc.alias, res.Data, res.Errors, tc.want)
		}
	}
}

// TestEmptyBatches: Local Hub answers a create, update, lock or unlock of no
// TypeInstances with an empty list, and Capact's engine locks and unlocks an
// Action's TypeInstances whenever the list it rendered is not nil, empty
// included; cairn refused each (no TypeInstances to create, no ids given),
// failing such an Action. Nothing is written, so nothing is checked either.
func TestEmptyBatches(t *testing.T) {
	e := newEnv(t)
	tests := []struct {
		name, query string
		vars        map[string]any
		want        string
	}{
		{"createTypeInstances", `mutation($in: CreateTypeInstancesInput!) { createTypeInstances(in: $in) { id alias } }`,
			map[string]any{"in": map[string]any{"typeInstances": []any{}, "usesRelations": []any{}}}, `{"createTypeInstances":[]}`},
		{"updateTypeInstances", `mutation($in: [UpdateTypeInstancesInput]!) { updateTypeInstances(in: $in) { id } }`,
			map[string]any{"in": []any{}}, `{"updateTypeInstances":[]}`},
		{"lockTypeInstances", `mutation($in: LockTypeInstancesInput!) { lockTypeInstances(in: $in) }`,
			map[string]any{"in": map[string]any{"ids": []any{}, "ownerID": "default/act"}}, `{"lockTypeInstances":[]}`},
		{"unlockTypeInstances", `mutation($in: UnlockTypeInstancesInput!) { unlockTypeInstances(in: $in) }`,
			map[string]any{"in": map[string]any{"ids": []any{}, "ownerID": "default/act"}}, `{"unlockTypeInstances":[]}`},
	}
	for _, tc := range tests {
		res := e.do(tc.query, tc.vars)
		if len(res.Errors) > 0 || string(res.Data) != tc.want {
			t.Errorf("%s: %s %+v, want %s", tc.name, res.Data, res.Errors, tc.want)
		}
	}
	// A relation alone is not an empty batch: it is refused as before.
	res := e.do(`mutation($in: CreateTypeInstancesInput!) { createTypeInstances(in: $in) { id } }`,
		map[string]any{"in": map[string]any{"typeInstances": []any{}, "usesRelations": []map[string]any{{"from": "a", "to": "b"}}}})
	if len(res.Errors) == 0 {
		t.Errorf("relations without instances: %s, want an error", res.Data)
	}
}

// TestValueOfInstanceWithoutValue: an instance created without a value has
// no value to put in spec.value, which is non-null (Any!). Local Hub (Apollo
// Server on graphql-js) answers that as graphql-js does: the field error
// "Cannot return null for non-nullable field ...", its nullable parent
// null. cairn answers the same, rather than a null a typed client rejects.
func TestValueOfInstanceWithoutValue(t *testing.T) {
	e := newEnv(t)
	id := e.create([]map[string]any{ti("empty", "cap.type.empty", "0.1.0", nil)})["empty"]

	res := e.do(`query($id: ID!) { typeInstance(id: $id) { id latestResourceVersion { resourceVersion spec { value } } } }`, map[string]any{"id": id})
	const want = "Cannot return null for non-nullable field TypeInstanceResourceVersionSpec.value."
	if len(res.Errors) != 1 || res.Errors[0].Message != want {
		t.Fatalf("errors = %+v, want one: %s", res.Errors, want)
	}
	if got := fmt.Sprint(res.Errors[0].Path); got != "[typeInstance latestResourceVersion spec value]" {
		t.Errorf("error path = %s", got)
	}
	if !cairn.JSONEqual(res.Data, json.RawMessage(`{"typeInstance": {"id": "`+id+`", "latestResourceVersion": null}}`)) {
		t.Errorf("data = %s, want the instance with latestResourceVersion null", res.Data)
	}
	// Fields beside the value are read as ever.
	var out struct{ TypeInstance struct{ ID string } }
	e.ok(`query($id: ID!) { typeInstance(id: $id) { id latestResourceVersion { resourceVersion spec { backend { context } } } } }`, map[string]any{"id": id}, &out)
	if out.TypeInstance.ID != id {
		t.Errorf("typeInstance = %+v", out.TypeInstance)
	}
}
