package rest_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/api/rest"
)

// pgDoc is a TypeInstance document of pgType in cairn's manifest form.
func pgDoc(name, extra string) string {
	return `apiVersion: hub.cairn.dev/v1
kind: TypeInstance
metadata:
  name: ` + name + `
  labels: {env: dev}
spec:
  typeRef: {path: cap.type.database.postgresql.config, revision: 0.1.0}
  value: {host: db.local, port: 5432}
` + extra
}

func decodeTI(t *testing.T, r response) rest.TypeInstanceObject {
	t.Helper()
	var o rest.TypeInstanceObject
	if err := json.Unmarshal(r.body, &o); err != nil {
		t.Fatalf("decode %s: %v", r, err)
	}
	return o
}

func TestCreateTypeInstances(t *testing.T) {
	e := newRestEnv(t)
	e.mustDo("POST", hubGV+"/types", "application/yaml", pgType, http.StatusCreated)
	tis := hubGV + "/typeinstances"

	var first rest.TypeInstanceObject
	t.Run("one document", func(t *testing.T) {
		e := e.with(t)
		first = decodeTI(t, e.mustDo("POST", tis, "application/yaml", pgDoc("one", ""), http.StatusCreated))
		if first.Kind != "TypeInstance" || first.Metadata.Name == "" || first.Metadata.Name != first.Metadata.UID ||
			first.Spec.Name != "one" || first.Spec.Namespace != "default" || first.Spec.Alias != "one" ||
			first.Metadata.Labels["env"] != "dev" || !strings.Contains(string(first.Spec.Value), `"port":5432`) ||
			first.Status.ResourceVersion != 1 || first.Spec.Backend.ID != cairn.BuiltinBackendID {
			t.Errorf("created = %+v", first)
		}
	})

	t.Run("a List in one batch, uses by name, by id and a backend alias", func(t *testing.T) {
		e := e.with(t)
		body := pgDoc("server", "") + "---\n" +
			pgDoc("config", "  uses: [server, "+first.Metadata.UID+"]\n  backend: {id: "+cairn.BuiltinBackendAlias+"}\n")
		var l struct {
			Kind  string                    `json:"kind"`
			Items []rest.TypeInstanceObject `json:"items"`
		}
		r := e.mustDo("POST", tis, "application/yaml", body, http.StatusCreated)
		if err := json.Unmarshal(r.body, &l); err != nil || l.Kind != "TypeInstanceList" || len(l.Items) != 2 {
			t.Fatalf("created = %s (%v), want a TypeInstanceList of 2", r, err)
		}
		server, config := l.Items[0], l.Items[1]
		if server.Spec.Name != "server" || config.Spec.Name != "config" {
			t.Fatalf("items out of request order: %s, %s", server.Spec.Name, config.Spec.Name)
		}
		for _, id := range []string{server.Metadata.UID, first.Metadata.UID, cairn.BuiltinBackendID} {
			if !slices.Contains(config.Status.Uses, id) {
				t.Errorf("config uses %v, want %s", config.Status.Uses, id)
			}
		}
	})

	errs := []struct {
		name   string
		body   string
		code   int
		reason string
		msgs   []string
	}{
		{"empty body", "", 400, "BadRequest", []string{"no TypeInstance document"}},
		{"a Type document", pgType, 400, "BadRequest", []string{"only TypeInstance documents", "not Type"}},
		{"metadata.id", strings.Replace(pgDoc("x", ""), "name: x", "name: x\n  id: "+cairn.BuiltinBackendID, 1), 422, "Invalid", []string{"metadata.id"}},
		{"unknown field", pgDoc("x", "  colour: red\n"), 422, "Invalid", []string{"colour", "is not a known field"}},
		{"duplicate aliases", strings.Replace(pgDoc("x", ""), "name: x", "name: x\n  alias: a", 1) + "---\n" +
			strings.Replace(pgDoc("z", ""), "name: z", "name: z\n  alias: a", 1), 422, "Invalid", []string{`alias "a"`, "unique"}},
		{"uses without an alias", pgDoc("x", "") + "---\n" + pgDoc("x", "  uses: [x]\n"), 422, "Invalid", []string{"spec.uses needs", "alias"}},
		{"unknown backend alias", pgDoc("x", "  backend: {id: nowhere}\n"), 404, "NotFound", []string{`"nowhere"`}},
		{"value against the schema", strings.Replace(pgDoc("x", ""), "port: 5432", "port: 0", 1), 422, "Invalid", []string{"port"}},
		{"name taken", pgDoc("one", ""), 409, "AlreadyExists", []string{"one"}},
		{"missing uses target", pgDoc("x", "  uses: [00000000-0000-4000-8000-000000000001]\n"), 404, "NotFound", []string{"00000000-0000-4000-8000-000000000001"}},
	}
	for _, tt := range errs {
		t.Run(tt.name, func(t *testing.T) {
			e := e.with(t)
			wantStatus(t, e.do("POST", tis, "application/yaml", tt.body), tt.code, tt.reason, tt.msgs...)
		})
	}
	t.Run("a failing batch creates nothing", func(t *testing.T) {
		e := e.with(t)
		body := pgDoc("fine", "") + "---\n" + strings.Replace(pgDoc("broken", ""), "port: 5432", "port: 0", 1)
		wantStatus(t, e.do("POST", tis, "application/yaml", body), 422, "Invalid")
		wantStatus(t, e.get("/apis/database.cairn.dev/v1/namespaces/default/postgresconfigs/fine"), 404, "NotFound")
	})
}

func TestReplaceTypeInstance(t *testing.T) {
	e := newRestEnv(t)
	e.mustDo("POST", hubGV+"/types", "application/yaml", pgType, http.StatusCreated)
	created := decodeTI(t, e.mustDo("POST", hubGV+"/typeinstances", "application/yaml", pgDoc("db", ""), http.StatusCreated))
	path := hubGV + "/typeinstances/" + created.Metadata.UID

	// edit returns the current object changed by fn, as a client would PUT it.
	edit := func(t *testing.T, fn func(o map[string]any)) map[string]any {
		t.Helper()
		var o map[string]any
		if err := json.Unmarshal(e.with(t).get(path).body, &o); err != nil {
			t.Fatal(err)
		}
		fn(o)
		return o
	}
	spec := func(o map[string]any) map[string]any { return o["spec"].(map[string]any) }
	meta := func(o map[string]any) map[string]any { return o["metadata"].(map[string]any) }

	t.Run("a new value and labels make a new resource version", func(t *testing.T) {
		e := e.with(t)
		body := edit(t, func(o map[string]any) {
			spec(o)["value"] = map[string]any{"host": "db.local", "port": 5433}
			meta(o)["labels"] = map[string]any{"env": "prod"}
		})
		got := decodeTI(t, e.mustDo("PUT", path, "application/json", body, 200))
		if got.Status.ResourceVersion != 2 || !strings.Contains(string(got.Spec.Value), `"port":5433`) || got.Metadata.Labels["env"] != "prod" {
			t.Errorf("replaced = %+v", got)
		}
	})
	t.Run("nothing changed: no new resource version", func(t *testing.T) {
		e := e.with(t)
		before := decodeTI(t, e.get(path))
		got := decodeTI(t, e.mustDo("PUT", path, "application/json", edit(t, func(map[string]any) {}), 200))
		if got.Status.ResourceVersion != 2 || got.Metadata.ResourceVersion != before.Metadata.ResourceVersion {
			t.Errorf("no-op replace = version %d rv %s, want 2 and %s", got.Status.ResourceVersion, got.Metadata.ResourceVersion, before.Metadata.ResourceVersion)
		}
	})
	t.Run("a value left out is carried over", func(t *testing.T) {
		e := e.with(t)
		got := decodeTI(t, e.mustDo("PUT", path, "application/json", edit(t, func(o map[string]any) {
			delete(spec(o), "value")
			meta(o)["annotations"] = map[string]any{"note": "x"}
		}), 200))
		if got.Status.ResourceVersion != 3 || !strings.Contains(string(got.Spec.Value), `"port":5433`) || got.Metadata.Annotations["note"] != "x" {
			t.Errorf("replaced = %+v", got)
		}
	})

	stale := edit(t, func(o map[string]any) { spec(o)["value"] = map[string]any{"host": "stale", "port": 1} })
	e.mustDo("PUT", path, "application/json", edit(t, func(o map[string]any) { meta(o)["labels"] = map[string]any{"env": "qa"} }), 200)
	// The object as it now is, sent with the resourceVersion read before
	// the last change.
	staleSame := edit(t, func(o map[string]any) { meta(o)["resourceVersion"] = meta(stale)["resourceVersion"] })
	if err := e.h.LockInstances(e.ctx, []string{created.Metadata.UID}, "alice"); err != nil {
		t.Fatal(err)
	}
	locked := edit(t, func(o map[string]any) { meta(o)["labels"] = map[string]any{"env": "locked"} })
	errs := []struct {
		name   string
		path   string
		body   any
		code   int
		reason string
		msgs   []string
	}{
		{"stale resourceVersion", path + "?lockOwner=alice", stale, 409, "Conflict", []string{"has been modified"}},
		{"stale resourceVersion, nothing changed", path + "?lockOwner=alice", staleSame, 409, "Conflict", []string{`Operation cannot be fulfilled on typeinstances.hub.cairn.dev "` + created.Metadata.UID + `": the object has been modified; please apply your changes to the latest version and try again`}},
		{"locked, no owner", path, locked, 409, "Conflict", []string{"locked"}},
		{"locked, wrong owner", path + "?lockOwner=bob", locked, 409, "Conflict", []string{"locked"}},
		{"typeRef is immutable", path, edit(t, func(o map[string]any) {
			spec(o)["typeRef"] = map[string]any{"path": "cap.type.other", "revision": "0.1.0"}
			spec(o)["name"] = "renamed"
		}), 422, "Invalid", []string{"spec.typeRef", "immutable"}},
		{"backend is immutable", path, edit(t, func(o map[string]any) {
			spec(o)["backend"] = map[string]any{"id": "00000000-0000-4000-8000-000000000001"}
		}), 422, "Invalid", []string{"spec.backend.id"}},
		{"name does not match", path, edit(t, func(o map[string]any) { meta(o)["name"] = "other" }), 400, "BadRequest", []string{"does not match"}},
		{"wrong kind", path, edit(t, func(o map[string]any) { o["kind"] = "Flag" }), 422, "Invalid", []string{"kind"}},
		{"invalid value", path + "?lockOwner=alice", edit(t, func(o map[string]any) { spec(o)["value"] = map[string]any{"host": "h", "port": 0} }), 422, "Invalid", []string{"port"}},
		{"not JSON", path, "{", 400, "BadRequest", []string{"not a valid TypeInstance"}},
		{"missing", hubGV + "/typeinstances/00000000-0000-4000-8000-000000000001", locked, 404, "NotFound", nil},
	}
	for _, tt := range errs {
		t.Run(tt.name, func(t *testing.T) {
			e := e.with(t)
			st := wantStatus(t, e.do("PUT", tt.path, "application/json", tt.body), tt.code, tt.reason, tt.msgs...)
			if tt.name == "typeRef is immutable" && (st.Details == nil || len(st.Details.Causes) != 2) {
				t.Errorf("details = %+v, want a cause for typeRef and one for name", st.Details)
			}
		})
	}
	t.Run("the lock owner may write", func(t *testing.T) {
		e := e.with(t)
		got := decodeTI(t, e.mustDo("PUT", path+"?lockOwner=alice", "application/json", locked, 200))
		if got.Metadata.Labels["env"] != "locked" || got.Status.LockedBy != "alice" {
			t.Errorf("replaced = %+v", got)
		}
	})
}

// TestPatchTypeInstance: PATCH typeinstances/{id} (kubectl label,
// annotate, edit, patch, apply) patches the object as GET serves it and
// writes it as PUT does, refusing what PUT refuses.
func TestPatchTypeInstance(t *testing.T) {
	e := newRestEnv(t)
	e.mustDo("POST", hubGV+"/types", "application/yaml", pgType, http.StatusCreated)
	created := decodeTI(t, e.mustDo("POST", hubGV+"/typeinstances", "application/yaml", pgDoc("db", ""), http.StatusCreated))
	path := hubGV + "/typeinstances/" + created.Metadata.UID
	const merge, jsonPatch = "application/merge-patch+json", "application/json-patch+json"

	got := decodeTI(t, e.mustDo("PATCH", path, merge, `{"metadata":{"labels":{"env":"prod"}},"spec":{"value":{"port":5433}}}`, 200))
	if got.Status.ResourceVersion != 2 || got.Metadata.Labels["env"] != "prod" || !strings.Contains(string(got.Spec.Value), `"port":5433`) || !strings.Contains(string(got.Spec.Value), `"host"`) {
		t.Errorf("merge patch: %+v", got)
	}
	got = decodeTI(t, e.mustDo("PATCH", path, jsonPatch, `[{"op":"add","path":"/metadata/annotations","value":{"note":"x"}}]`, 200))
	if got.Metadata.Annotations["note"] != "x" || got.Metadata.Labels["env"] != "prod" {
		t.Errorf("JSON patch: %+v", got)
	}
	// By name, as kubectl label ti NAME sends it.
	if got := decodeTI(t, e.mustDo("PATCH", hubGV+"/typeinstances/db", merge, `{"metadata":{"labels":{"env":"qa"}}}`, 200)); got.Metadata.UID != created.Metadata.UID || got.Metadata.Labels["env"] != "qa" {
		t.Errorf("patch by name: %+v", got)
	}
	before := e.get(path).body
	for _, tt := range []struct {
		name, ct, body string
		code           int
		reason         string
		msgs           []string
	}{
		{"typeRef is immutable", merge, `{"spec":{"typeRef":{"path":"cap.type.other","revision":"0.1.0"}}}`, 422, "Invalid", []string{"spec.typeRef", "immutable"}},
		{"invalid value", merge, `{"spec":{"value":{"port":0}}}`, 422, "Invalid", []string{"port"}},
		{"stale resourceVersion", merge, `{"metadata":{"resourceVersion":"1","labels":{"env":"x"}}}`, 409, "Conflict", []string{"has been modified"}},
		{"unknown field", merge + "", `{"metadata":{"colour":"red"}}`, 200, "", nil},
		{"a JSON patch that does not apply", jsonPatch, `[{"op":"replace","path":"/spec/nothing/here","value":1}]`, 422, "Invalid", []string{"the patch could not be applied"}},
		{"strategic merge patch", "application/strategic-merge-patch+json", `{}`, 415, "UnsupportedMediaType", []string{"application/merge-patch+json"}},
		{"server-side apply", "application/apply-patch+yaml", `{}`, 415, "UnsupportedMediaType", []string{"server-side apply is not supported for TypeInstances"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := e.with(t)
			r := e.do("PATCH", path, tt.ct, tt.body)
			if tt.code == 200 {
				if r.code != 200 || !strings.Contains(r.header.Get("Warning"), `unknown field \"metadata.colour\"`) {
					t.Errorf("PATCH = %s (Warning %q), want 200 with a warning", r, r.header.Get("Warning"))
				}
				return
			}
			wantStatus(t, r, tt.code, tt.reason, tt.msgs...)
			if after := e.get(path).body; !bytes.Equal(after, before) {
				t.Errorf("a refused patch changed the instance:\n%s\nwas\n%s", after, before)
			}
		})
	}
	wantStatus(t, e.do("PATCH", hubGV+"/typeinstances/00000000-0000-4000-8000-000000000001", merge, `{}`), 404, "NotFound")
}

// TestDeleteTypeInstancePreconditions: typeinstances honour a DELETE's
// preconditions as every other resource does, so a client deletes the
// version it read or nothing.
func TestDeleteTypeInstancePreconditions(t *testing.T) {
	e := newRestEnv(t)
	e.mustDo("POST", hubGV+"/types", "application/yaml", pgType, http.StatusCreated)
	read := func(o rest.TypeInstanceObject) string {
		return fmt.Sprintf(`{"preconditions":{"uid":%q,"resourceVersion":%q}}`, o.Metadata.UID, o.Metadata.ResourceVersion)
	}
	tests := []struct {
		name    string
		body    func(o rest.TypeInstanceObject) string
		query   string
		changed bool // the instance changes after the read
		code    int
		reason  string
	}{
		{"none", func(rest.TypeInstanceObject) string { return "" }, "", true, 200, ""},
		{"uid and resourceVersion read", read, "", false, 200, ""},
		{"changed since read", read, "", true, 409, "Conflict"},
		{"uid differs", func(rest.TypeInstanceObject) string {
			return `{"preconditions":{"uid":"00000000-0000-0000-0000-000000000000"}}`
		}, "", false, 409, "Conflict"},
		{"resourceVersion query stale", func(rest.TypeInstanceObject) string { return "" }, "?resourceVersion=1", false, 409, "Conflict"},
		{"resourceVersion not a number", func(rest.TypeInstanceObject) string { return `{"preconditions":{"resourceVersion":"x"}}` }, "", false, 400, "BadRequest"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := e.with(t)
			o := decodeTI(t, e.mustDo("POST", hubGV+"/typeinstances", "application/yaml", pgDoc(fmt.Sprintf("del%d", i), ""), http.StatusCreated))
			path := hubGV + "/typeinstances/" + o.Metadata.UID
			if tt.changed {
				e.mustDo("PUT", path, "application/json", map[string]any{"apiVersion": "hub.cairn.dev/v1", "kind": "TypeInstance",
					"metadata": map[string]any{"name": o.Metadata.UID, "resourceVersion": o.Metadata.ResourceVersion, "labels": map[string]string{"env": "changed"}},
					"spec":     map[string]any{"typeRef": o.Spec.TypeRef, "value": map[string]any{"host": "db.local", "port": 5432}}}, 200)
			}
			var body any
			if b := tt.body(o); b != "" {
				body = b
			}
			r := e.do("DELETE", path+tt.query, "application/json", body)
			if tt.code == 200 {
				if r.code != 200 {
					t.Fatalf("DELETE = %s", r)
				}
				wantStatus(t, e.get(path), 404, "NotFound")
				return
			}
			wantStatus(t, r, tt.code, tt.reason)
			e.mustDo("GET", path, "", nil, 200) // still there
		})
	}
}

// TestTypeInstancesFieldSelector: a TypeInstance's metadata.name is its
// id, so fieldSelector=metadata.name selects by id, as on every Kubernetes
// resource (kubectl get ti ID -w, wait and delete --wait select the object
// they watch that way); spec.name and spec.namespace (metadata.namespace
// too) select by the instance's name and namespace. The same in a list, a
// table, a watch and a delete of the collection.
func TestTypeInstancesFieldSelector(t *testing.T) {
	e := newFlagsEnv(t)
	a := e.createFlag("default", "a", nil, `{"key":"a"}`).Metadata.UID
	otherA := e.createFlag("other", "a", nil, `{"key":"a"}`).Metadata.UID
	b := e.createFlag("default", "b", nil, `{"key":"b"}`).Metadata.UID
	tis := hubGV + "/typeinstances"
	sorted := func(ids ...string) []string { slices.Sort(ids); return ids }
	for _, c := range []struct {
		fs   string
		want []string
	}{
		{"metadata.name=" + a, []string{a}},
		{"metadata.name==" + a, []string{a}},
		{"metadata.name!=" + a, sorted(otherA, b)},
		{"metadata.name=a", nil}, // a name two instances have, not an id
		// The name of exactly one instance, as GET typeinstances/b finds
		// it: kubectl get ti b -w, wait ti/b and delete --wait then watch
		// with metadata.name=b.
		{"metadata.name=b", []string{b}},
		{"spec.name=a", sorted(a, otherA)},
		{"spec.name!=a", []string{b}},
		{"spec.name=a,metadata.namespace=default", []string{a}},
		{"spec.name=a,spec.namespace=other", []string{otherA}},
		{"spec.namespace!=default", []string{otherA}},
		{"metadata.name=" + a + ",spec.name=b", nil},
		{"metadata.name=" + b + ",spec.name=b", []string{b}},
	} {
		for _, q := range []string{"", "&values=false", "&limit=1"} {
			l := decodeObj(t, e.mustDo("GET", tis+"?fieldSelector="+url.QueryEscape(c.fs)+q, "", nil, http.StatusOK))
			var got []string
			for _, it := range l.Items {
				if slices.Contains([]string{a, otherA, b}, it.Metadata.Name) { // not the hub's own
					got = append(got, it.Metadata.Name)
				}
			}
			want := c.want
			if q == "&limit=1" && len(want) > 1 {
				want = want[:1]
			}
			if q == "&limit=1" && strings.Contains(c.fs, "!=") {
				// A page holds the store's matches; != is applied to it.
				want = got
				if len(got) > 1 || len(got) == 1 && !slices.Contains(c.want, got[0]) {
					t.Errorf("typeinstances?fieldSelector=%s%s = %v, want at most one of %v", c.fs, q, got, c.want)
				}
			}
			if !slices.Equal(got, want) {
				t.Errorf("typeinstances?fieldSelector=%s%s = %v, want %v", c.fs, q, got, want)
			}
		}
	}
	r := e.do("GET", tis+"?fieldSelector=status.name%3Da", "", nil)
	wantStatus(t, r, http.StatusBadRequest, "BadRequest", "status.name", "metadata.name (the id)", "spec.name")
	// spec.name is a TypeInstance's: a kind's objects have their name in metadata.name.
	wantStatus(t, e.do("GET", flagsIn("default")+"?fieldSelector=spec.name%3Da", "", nil), http.StatusBadRequest, "BadRequest", "spec.name")

	tbl := e.mustDo("GET", tis+"?fieldSelector=metadata.name%3D"+a, "application/json;as=Table;g=meta.k8s.io;v=v1", nil, http.StatusOK)
	if !strings.Contains(string(tbl.body), a) || strings.Contains(string(tbl.body), b) {
		t.Errorf("table of metadata.name=%s: %s", a, tbl.body)
	}

	w := e.watch(tis + "?fieldSelector=metadata.name%3D" + b)
	w.expect("ADDED " + b)
	e.mustDo("PATCH", flagPath("default", "a"), "application/merge-patch+json", `{"spec":{"key":"a2"}}`, http.StatusOK)
	e.mustDo("PATCH", flagPath("default", "b"), "application/merge-patch+json", `{"spec":{"key":"b2"}}`, http.StatusOK)
	w.expect("MODIFIED " + b)
	e.mustDo("DELETE", flagPath("default", "b"), "", nil, http.StatusOK)
	// A DELETED event names the instance as its table row does (kubectl
	// get ti -w prints spec.name), not by its id alone.
	if ev := w.expect("DELETED " + b); ev[0].obj.Spec["name"] != "b" || ev[0].obj.Spec["namespace"] != "default" {
		t.Errorf("DELETED event of typeinstance %s: %s", b, ev[0].Object)
	}

	l := decodeObj(t, e.mustDo("DELETE", tis+"?fieldSelector=metadata.name%3D"+otherA, "", nil, http.StatusOK))
	if got := names(l); !slices.Equal(got, []string{otherA}) {
		t.Errorf("deletecollection of metadata.name=%s deleted %v", otherA, got)
	}
	e.mustDo("GET", tis+"/"+a, "", nil, http.StatusOK)
}
