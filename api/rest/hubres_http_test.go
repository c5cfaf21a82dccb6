package rest_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/backend/gotemplate"
	"github.com/cairn-dev/cairn/hub"
)

// typeObj is a served hub.cairn.dev/v1 Type.
type typeObj struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		Path       string          `json:"path"`
		Revision   string          `json:"revision"`
		JSONSchema json.RawMessage `json:"jsonSchema"`
		REST       *struct {
			Group   string `json:"group"`
			Version string `json:"version"`
			Names   struct {
				Kind, Singular, Plural string
				ShortNames             []string
			} `json:"names"`
		} `json:"rest"`
	} `json:"spec"`
	Items []typeObj `json:"items"`
}

func decodeType(t *testing.T, r response) typeObj {
	t.Helper()
	var o typeObj
	if err := json.Unmarshal(r.body, &o); err != nil {
		t.Fatalf("decode %s: %v", r, err)
	}
	return o
}

func TestRegisterTypes(t *testing.T) {
	e := newRestEnv(t)

	t.Run("cup ResourceDefinition makes one Type per version", func(t *testing.T) {
		e := e.with(t)
		l := decodeType(t, e.mustDo("POST", hubGV+"/types", "application/json", flagsRD, http.StatusCreated))
		if l.Kind != "TypeList" || len(l.Items) != 2 {
			t.Fatalf("created = %+v, want a TypeList of 2", l)
		}
		want := map[string]string{"v1": "1.0.0", "v1alpha1": "1.0.0-alpha.1"}
		for _, ty := range l.Items {
			r := ty.Spec.REST
			if r == nil || ty.Spec.Path != "io.flipt.flag" || want[r.Version] != ty.Spec.Revision || r.Group != "flipt.io" ||
				r.Names.Kind != "Flag" || r.Names.Plural != "flags" || !slices.Equal(r.Names.ShortNames, []string{"fl"}) {
				t.Errorf("Type = %+v", ty)
			}
			if ty.Metadata.Name != ty.Spec.Path+":"+ty.Spec.Revision || ty.APIVersion != "hub.cairn.dev/v1" || ty.Kind != "Type" {
				t.Errorf("Type identity = %s %s %s", ty.APIVersion, ty.Kind, ty.Metadata.Name)
			}
		}
	})
	t.Run("cairn Type document", func(t *testing.T) {
		e := e.with(t)
		ty := decodeType(t, e.mustDo("POST", hubGV+"/types", "application/yaml", pgType, http.StatusCreated))
		if ty.Kind != "Type" || ty.Metadata.Name != "cap.type.database.postgresql.config:0.1.0" || ty.Spec.REST == nil ||
			ty.Spec.REST.Group != "database.cairn.dev" || !strings.Contains(string(ty.Spec.JSONSchema), `"port"`) {
			t.Errorf("Type = %+v", ty)
		}
	})
	t.Run("a Type as GET serves it is created again from that body", func(t *testing.T) {
		// kubectl get type X -o yaml > t.yaml; kubectl create -f t.yaml (on
		// another hub, or after a delete): metadata.name is <path>:<revision>
		// and metadata.creationTimestamp is set.
		e := e.with(t)
		doc := strings.Replace(pgType, "cap.type.database.postgresql.config", "cap.type.served.form", 1)
		doc = strings.Replace(doc, "database.cairn.dev", "served.cairn.dev", 1)
		doc = strings.NewReplacer("PostgresConfig", "ServedForm", "postgresconfig", "servedform", "pgc", "sfm").Replace(doc)
		e.mustDo("POST", hubGV+"/types", "application/yaml", doc, http.StatusCreated)
		served := e.mustDo("GET", hubGV+"/types/cap.type.served.form:0.1.0", "", nil, http.StatusOK).body
		if !strings.Contains(string(served), `"creationTimestamp"`) {
			t.Fatalf("served Type has no creationTimestamp: %s", served)
		}
		e.mustDo("DELETE", hubGV+"/types/cap.type.served.form:0.1.0", "", nil, http.StatusOK)
		again := decodeType(t, e.mustDo("POST", hubGV+"/types", "application/json", served, http.StatusCreated))
		was := decodeType(t, response{body: served})
		if again.Metadata.Name != "cap.type.served.form:0.1.0" || !reflect.DeepEqual(again.Spec, was.Spec) {
			t.Errorf("created again = %+v, want the spec of %+v", again, was)
		}
		// A name whose path or revision differs from the spec's is refused.
		wrong := strings.Replace(string(served), `"name":"cap.type.served.form:0.1.0"`, `"name":"cap.type.served.form:0.2.0"`, 1)
		wantStatus(t, e.do("POST", hubGV+"/types", "application/json", wrong), 422, "Invalid", "is not spec.path:spec.revision")
	})
	t.Run("get and list", func(t *testing.T) {
		e := e.with(t)
		ty := decodeType(t, e.mustDo("GET", hubGV+"/types/io.flipt.flag:1.0.0-alpha.1", "", nil, http.StatusOK))
		if ty.Spec.REST == nil || ty.Spec.REST.Version != "v1alpha1" {
			t.Errorf("GET Type = %+v", ty)
		}
		l := decodeType(t, e.mustDo("GET", hubGV+"/types", "", nil, http.StatusOK))
		var got []string
		for _, it := range l.Items {
			got = append(got, it.Metadata.Name)
		}
		for _, w := range []string{"io.flipt.flag:1.0.0", "io.flipt.flag:1.0.0-alpha.1", "cap.type.database.postgresql.config:0.1.0", "cap.core.type.hub.storage.sqlite:0.1.0"} {
			if !slices.Contains(got, w) {
				t.Errorf("Type list %v lacks %s", got, w)
			}
		}
		l = decodeType(t, e.mustDo("GET", hubGV+"/types?pathPrefix=io.flipt", "", nil, http.StatusOK))
		if len(l.Items) != 2 {
			t.Errorf("pathPrefix=io.flipt lists %d Types, want 2", len(l.Items))
		}
	})

	errs := []struct {
		name, method, path, ct, body string
		code                         int
		reason                       string
		msgs                         []string
	}{
		{"the same cup document again", "POST", "/types", "application/json", flagsRD, 409, "AlreadyExists", []string{"io.flipt.flag"}},
		{"invalid cup document", "POST", "/types", "application/json",
			`{"apiVersion":"cup.flipt.io/v1alpha1","kind":"ResourceDefinition","metadata":{"name":"x"},"names":{},"spec":{"versions":{}}}`,
			422, "Invalid", []string{"names/kind"}},
		{"schema that does not compile", "POST", "/types", "application/json",
			`{"apiVersion":"hub.cairn.dev/v1","kind":"Type","metadata":{"name":"cap.type.bad"},"spec":{"revision":"0.1.0","jsonSchema":{"type":12}}}`,
			422, "Invalid", []string{"jsonSchema"}},
		{"not a Type document", "POST", "/types", "application/yaml",
			"apiVersion: hub.cairn.dev/v1\nkind: TypeInstance\nmetadata: {name: x}\nspec: {typeRef: {path: cap.type.x, revision: 0.1.0}, value: 1}\n",
			400, "BadRequest", []string{"only Type documents"}},
		{"missing Type", "GET", "/types/cap.type.none:0.1.0", "", "", 404, "NotFound", []string{"cap.type.none"}},
		{"Type name without a revision", "GET", "/types/cap.type.none", "", "", 404, "NotFound", []string{"<path>:<revision>"}},
		{"replace a Type", "PUT", "/types/io.flipt.flag:1.0.0", "application/json", "{}", 405, "MethodNotAllowed", nil},
		{"delete the built-in backend's Type", "DELETE", "/types/cap.core.type.hub.storage.sqlite:0.1.0", "", "", 422, "Invalid", []string{"built-in"}},
	}
	for _, tt := range errs {
		t.Run(tt.name, func(t *testing.T) {
			e := e.with(t)
			var body any
			if tt.body != "" {
				body = tt.body
			}
			wantStatus(t, e.do(tt.method, hubGV+tt.path, tt.ct, body), tt.code, tt.reason, tt.msgs...)
		})
	}

	t.Run("delete a Type in use, then unused", func(t *testing.T) {
		e := e.with(t)
		e.createFlag("default", "f", nil, `{"key":"f"}`)
		st := wantStatus(t, e.do("DELETE", hubGV+"/types/io.flipt.flag:1.0.0-alpha.1", "", nil), 409, "Conflict", "instance")
		if st.Details == nil || st.Details.Name != "io.flipt.flag:1.0.0-alpha.1" {
			t.Errorf("details = %+v", st.Details)
		}
		e.mustDo("DELETE", flagPath("default", "f"), "", nil, http.StatusOK)
		r := e.mustDo("DELETE", hubGV+"/types/io.flipt.flag:1.0.0-alpha.1", "", nil, http.StatusOK)
		var ok map[string]any
		if json.Unmarshal(r.body, &ok); ok["kind"] != "Status" || ok["status"] != "Success" {
			t.Errorf("DELETE Type = %s, want a Success Status", r.body)
		}
		wantStatus(t, e.get(flagsIn("default")), 404, "NotFound")
	})
}

func TestTypeInstancesAndBackends(t *testing.T) {
	e := newFlagsEnv(t)
	a := e.createFlag("default", "a", map[string]string{"team": "x"}, `{"key":"a"}`)
	e.createFlag("other", "b", nil, `{"key":"b"}`)

	type ti struct {
		Kind     string `json:"kind"`
		Metadata struct {
			Name, UID, ResourceVersion string
			Labels                     map[string]string
		} `json:"metadata"`
		Spec struct {
			TypeRef   cairn.TypeRef   `json:"typeRef"`
			Namespace string          `json:"namespace"`
			Name      string          `json:"name"`
			Value     json.RawMessage `json:"value"`
			Backend   struct {
				ID       string `json:"id"`
				Abstract bool   `json:"abstract"`
			} `json:"backend"`
		} `json:"spec"`
		Status struct {
			LockedBy        string   `json:"lockedBy"`
			ResourceVersion int      `json:"resourceVersion"`
			Uses            []string `json:"uses"`
			UsedBy          []string `json:"usedBy"`
		} `json:"status"`
	}
	type tiList struct {
		Kind  string `json:"kind"`
		Items []ti   `json:"items"`
	}
	decode := func(r response, v any) {
		t.Helper()
		if err := json.Unmarshal(r.body, v); err != nil {
			t.Fatalf("decode %s: %v", r, err)
		}
	}

	t.Run("get by id", func(t *testing.T) {
		e := e.with(t)
		var got ti
		decode(e.mustDo("GET", hubGV+"/typeinstances/"+a.Metadata.UID, "", nil, 200), &got)
		if got.Kind != "TypeInstance" || got.Metadata.Name != a.Metadata.UID || got.Spec.Name != "a" || got.Spec.Namespace != "default" ||
			got.Spec.TypeRef != flagType || string(got.Spec.Value) != `{"key":"a"}` || got.Status.ResourceVersion != 1 ||
			got.Spec.Backend.ID != cairn.BuiltinBackendID || !slices.Contains(got.Status.Uses, cairn.BuiltinBackendID) {
			t.Errorf("typeinstance = %+v", got)
		}
	})
	lists := []struct {
		query string
		want  []string // spec.name of each item
	}{
		{"", []string{"a", "b", "builtin", "gotemplate"}},
		{"?typePath=io.flipt.flag", []string{"a", "b"}},
		{"?labelSelector=team%3Dx", []string{"a"}},
		{"?fieldSelector=metadata.namespace%3Dother", []string{"b"}},
	}
	for _, tt := range lists {
		t.Run("list"+tt.query, func(t *testing.T) {
			e := e.with(t)
			var l tiList
			decode(e.mustDo("GET", hubGV+"/typeinstances"+tt.query, "", nil, 200), &l)
			var got []string
			for _, it := range l.Items {
				got = append(got, it.Spec.Name)
			}
			slices.Sort(got)
			if l.Kind != "TypeInstanceList" || !slices.Equal(got, tt.want) {
				t.Errorf("%s = %v, want %v", l.Kind, got, tt.want)
			}
		})
	}
	t.Run("backends", func(t *testing.T) {
		e := e.with(t)
		var l struct {
			Kind  string `json:"kind"`
			Items []struct {
				Metadata struct{ Name string } `json:"metadata"`
				Spec     struct {
					Alias       string          `json:"alias"`
					AcceptValue bool            `json:"acceptValue"`
					Abstract    bool            `json:"abstract"`
					Context     json.RawMessage `json:"contextSchema"`
				} `json:"spec"`
			} `json:"items"`
		}
		decode(e.mustDo("GET", hubGV+"/backends", "", nil, 200), &l)
		// The built-in and the in-process gotemplate backends, by id.
		if l.Kind != "BackendList" || len(l.Items) != 2 || l.Items[0].Metadata.Name != gotemplate.BackendID || l.Items[0].Spec.AcceptValue {
			t.Fatalf("backends = %+v", l)
		}
		b := l.Items[1]
		if b.Metadata.Name != cairn.BuiltinBackendID || b.Spec.Alias != cairn.BuiltinBackendAlias || !b.Spec.AcceptValue || !b.Spec.Abstract || string(b.Spec.Context) != "null" {
			t.Errorf("built-in backend = %+v", b)
		}
		one := e.mustDo("GET", hubGV+"/backends/"+cairn.BuiltinBackendID, "", nil, 200)
		if !strings.Contains(string(one.body), `"kind":"Backend"`) {
			t.Errorf("GET backend = %s", one)
		}
	})

	errs := []struct {
		name, method, path string
		code               int
		reason             string
		msgs               []string
	}{
		{"missing typeinstance", "GET", "/typeinstances/00000000-0000-0000-0000-000000000000", 404, "NotFound", []string{"00000000-0000-0000-0000-000000000000"}},
		{"an instance that is not a backend", "GET", "/backends/" + a.Metadata.UID, 404, "NotFound", []string{"is not a storage backend", "cap.core.attribute.hub.storage.backend"}},
		{"missing backend", "GET", "/backends/00000000-0000-0000-0000-000000000000", 404, "NotFound", nil},
		{"cluster-scoped resource under a namespace", "GET", "/namespaces/default/typeinstances", 404, "NotFound", nil},
		{"create a typeinstance without a document", "POST", "/typeinstances", 400, "BadRequest", []string{"no TypeInstance document"}},
		{"write a backend", "PUT", "/backends/" + cairn.BuiltinBackendID, 405, "MethodNotAllowed", nil},
		{"delete the built-in backend", "DELETE", "/typeinstances/" + cairn.BuiltinBackendID, 422, "Invalid", []string{"built-in"}},
	}
	for _, tt := range errs {
		t.Run(tt.name, func(t *testing.T) {
			e := e.with(t)
			wantStatus(t, e.do(tt.method, hubGV+tt.path, "application/json", nil), tt.code, tt.reason, tt.msgs...)
		})
	}

	t.Run("lock shows in status, delete by id", func(t *testing.T) {
		e := e.with(t)
		if err := e.h.LockInstances(e.ctx, []string{a.Metadata.UID}, "alice"); err != nil {
			t.Fatal(err)
		}
		var got ti
		decode(e.mustDo("GET", hubGV+"/typeinstances/"+a.Metadata.UID, "", nil, 200), &got)
		if got.Status.LockedBy != "alice" {
			t.Errorf("lockedBy = %q, want alice", got.Status.LockedBy)
		}
		wantStatus(t, e.do("DELETE", hubGV+"/typeinstances/"+a.Metadata.UID, "", nil), 409, "Conflict", "locked")
		e.mustDo("DELETE", hubGV+"/typeinstances/"+a.Metadata.UID+"?lockOwner=alice", "", nil, 200)
		wantStatus(t, e.get(hubGV+"/typeinstances/"+a.Metadata.UID), 404, "NotFound")
		wantStatus(t, e.get(flagPath("default", "a")), 404, "NotFound")
	})
	t.Run("used-by refusal on delete by id", func(t *testing.T) {
		e := e.with(t)
		b := decodeObj(t, e.mustDo("GET", flagPath("other", "b"), "", nil, 200))
		created, err := e.h.CreateInstances(e.ctx, hub.CreateRequest{
			Instances:     []hub.NewInstance{{Alias: "user", Namespace: "other", Name: "user", TypeRef: flagType, Value: json.RawMessage(`{"key":"u"}`)}},
			UsesRelations: []hub.UsesRelation{{From: "user", To: b.Metadata.UID}},
		})
		if err != nil {
			t.Fatal(err)
		}
		st := wantStatus(t, e.do("DELETE", hubGV+"/typeinstances/"+b.Metadata.UID, "", nil), 409, "Conflict", created[0].ID)
		if st.Details == nil || len(st.Details.Causes) != 1 || st.Details.Causes[0].Type != "UsedBy" {
			t.Errorf("details = %+v, want one UsedBy cause", st.Details)
		}
	})
}

// TestHubKindsNotFound: a missing object of the hub's own kinds is
// reported as the API server reports one, "<plural>.<group> "<name>" not
// found" with details naming it, whatever the hub's own words for it; an
// instance that is not a storage backend is not a backend.
func TestHubKindsNotFound(t *testing.T) {
	e := newFlagsEnv(t)
	a := e.createFlag("default", "a", nil, `{"key":"a"}`)
	for _, tt := range []struct {
		method, plural, name string
	}{
		{"GET", "types", "io.flipt.nothing:1.0.0"},
		{"DELETE", "types", "io.flipt.nothing:1.0.0"},
		{"GET", "backends", "nosuch"},
		{"GET", "backends", a.Metadata.UID},
		{"GET", "typeinstances", "00000000-0000-4000-8000-000000000001"},
		{"DELETE", "typeinstances", "00000000-0000-4000-8000-000000000001"},
	} {
		t.Run(tt.method+" "+tt.plural+"/"+tt.name, func(t *testing.T) {
			r := e.with(t).do(tt.method, hubGV+"/"+tt.plural+"/"+tt.name, "", nil)
			st := wantStatus(t, r, http.StatusNotFound, "NotFound")
			// The message may go on to say why (an instance that is not a backend).
			if want := fmt.Sprintf("%s.hub.cairn.dev %q not found", tt.plural, tt.name); st.Message != want && !strings.HasPrefix(st.Message, want+": ") {
				t.Errorf("message = %q, want %q", st.Message, want)
			}
			if d := st.Details; d == nil || d.Name != tt.name || d.Group != "hub.cairn.dev" || d.Kind != tt.plural {
				t.Errorf("details = %+v, want name %s, group hub.cairn.dev, kind %s", d, tt.name, tt.plural)
			}
		})
	}
}
