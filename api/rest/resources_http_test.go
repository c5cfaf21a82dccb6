package rest_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/api/rest"
	"github.com/cairn-dev/cairn/hub"
)

func TestGet(t *testing.T) {
	e := newFlagsEnv(t)
	created := e.createFlag("default", "one", map[string]string{"team": "a"}, `{"key":"one","port":8080}`)

	got := decodeObj(t, e.mustDo("GET", flagPath("default", "one"), "", nil, http.StatusOK))
	if got.APIVersion != "flipt.io/v1alpha1" || got.Kind != "Flag" {
		t.Errorf("apiVersion/kind = %s/%s", got.APIVersion, got.Kind)
	}
	m := got.Metadata
	if m.Name != "one" || m.Namespace != "default" || m.UID != created.Metadata.UID || m.ResourceVersion != created.Metadata.ResourceVersion ||
		m.Generation != 1 || m.Labels["team"] != "a" {
		t.Errorf("metadata = %+v", m)
	}
	if _, err := cairnUID(m.UID); err != nil {
		t.Errorf("uid %q: %v", m.UID, err)
	}
	if ts, err := time.Parse(time.RFC3339, m.CreationTimestamp); err != nil || time.Since(ts) > time.Hour {
		t.Errorf("creationTimestamp %q: %v", m.CreationTimestamp, err)
	}
	if got.Spec["key"] != "one" || got.Spec["port"] != float64(8080) {
		t.Errorf("spec = %v", got.Spec)
	}
	if tr, _ := got.Status["typeRef"].(map[string]any); tr["path"] != flagType.Path || tr["revision"] != flagType.Revision {
		t.Errorf("status.typeRef = %v", got.Status["typeRef"])
	}
	// The instance is the same one the hub serves.
	inst, err := e.h.GetInstance(e.ctx, m.UID, true)
	if err != nil || inst.Name != "one" || strconv.FormatInt(inst.Seq, 10) != m.ResourceVersion {
		t.Errorf("hub instance = %+v, %v", inst, err)
	}

	t.Run("every served version of a Type serves the same objects", func(t *testing.T) {
		e := e.with(t)
		// As Kubernetes serves a CRD's objects at each of its versions.
		v1 := decodeObj(t, e.mustDo("GET", "/apis/flipt.io/v1/namespaces/default/flags/one", "", nil, http.StatusOK))
		if v1.APIVersion != "flipt.io/v1" || v1.Metadata.UID != created.Metadata.UID {
			t.Errorf("GET through v1 = %s", v1.Raw)
		}
	})

	tests := []struct {
		name, path string
		code       int
		reason     string
		msgs       []string
	}{
		{"missing name", flagPath("default", "two"), 404, "NotFound", []string{`flags.flipt.io "two" not found`}},
		{"other namespace", flagPath("other", "one"), 404, "NotFound", []string{`"one"`}},
		{"named item outside a namespace", flagsGV + "/flags/one", 404, "NotFound", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := e.with(t)
			st := wantStatus(t, e.get(tt.path), tt.code, tt.reason, tt.msgs...)
			if tt.name == "missing name" && (st.Details == nil || st.Details.Name != "two" || st.Details.Group != "flipt.io" || st.Details.Kind != "flags") {
				t.Errorf("details = %+v", st.Details)
			}
		})
	}
}

// cairnUID checks an instance id is a UUID.
func cairnUID(s string) (string, error) {
	if !regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`).MatchString(s) {
		return "", fmt.Errorf("not a UUID")
	}
	return s, nil
}

func TestList(t *testing.T) {
	e := newFlagsEnv(t)
	fixtures := []struct {
		ns, name string
		labels   map[string]string
	}{
		{"default", "a", map[string]string{"team": "a", "tier": "web"}},
		{"default", "b", map[string]string{"team": "b", "tier": "db"}},
		{"default", "c", map[string]string{"team": "c"}},
		{"default", "d", nil},
		{"other", "a", map[string]string{"team": "a", "tier": "db"}},
		{"other", "e", map[string]string{"team": "b"}},
	}
	for _, f := range fixtures {
		e.createFlag(f.ns, f.name, f.labels, fmt.Sprintf(`{"key":%q}`, f.name))
	}
	// An instance of another Type in the same namespace never shows.
	e.mustDo("POST", hubGV+"/types", "application/yaml", pgType, http.StatusCreated)
	e.mustDo("POST", "/apis/database.cairn.dev/v1/namespaces/default/postgresconfigs", "application/json",
		`{"metadata":{"name":"a","labels":{"team":"a"}},"spec":{"host":"h","port":1}}`, http.StatusCreated)

	tests := []struct {
		name  string
		path  string
		query string
		want  []string // namespace/name
	}{
		{"all in a namespace", flagsIn("default"), "", []string{"default/a", "default/b", "default/c", "default/d"}},
		{"=", flagsIn("default"), "labelSelector=team=a", []string{"default/a"}},
		{"==", flagsIn("default"), "labelSelector=team==b", []string{"default/b"}},
		{"!=", flagsIn("default"), "labelSelector=team!=a", []string{"default/b", "default/c", "default/d"}},
		{"in", flagsIn("default"), "labelSelector=team in (a,c)", []string{"default/a", "default/c"}},
		{"notin", flagsIn("default"), "labelSelector=team notin (a,c)", []string{"default/b", "default/d"}},
		{"exists", flagsIn("default"), "labelSelector=tier", []string{"default/a", "default/b"}},
		{"!exists", flagsIn("default"), "labelSelector=!tier", []string{"default/c", "default/d"}},
		{"several requirements", flagsIn("default"), "labelSelector=team,tier!=db", []string{"default/a", "default/c"}}, // != matches a missing key
		{"several requirements, all set", flagsIn("default"), "labelSelector=tier,tier!=db", []string{"default/a"}},
		{"no match", flagsIn("default"), "labelSelector=team=zzz", nil},
		{"field metadata.name", flagsIn("default"), "fieldSelector=metadata.name=b", []string{"default/b"}},
		{"field metadata.name==", flagsIn("default"), "fieldSelector=metadata.name==b", []string{"default/b"}},
		{"field metadata.name!=", flagsIn("default"), "fieldSelector=metadata.name!=b", []string{"default/a", "default/c", "default/d"}},
		{"field metadata.namespace on a namespace", flagsIn("default"), "fieldSelector=metadata.namespace=default", []string{"default/a", "default/b", "default/c", "default/d"}},
		{"field metadata.namespace of another namespace", flagsIn("default"), "fieldSelector=metadata.namespace=other", nil},
		{"all namespaces", flagsGV + "/flags", "", []string{"default/a", "default/b", "default/c", "default/d", "other/a", "other/e"}},
		{"all namespaces by label", flagsGV + "/flags", "labelSelector=team=a", []string{"default/a", "other/a"}},
		{"all namespaces, field namespace", flagsGV + "/flags", "fieldSelector=metadata.namespace=other", []string{"other/a", "other/e"}},
		{"all namespaces, field name", flagsGV + "/flags", "fieldSelector=metadata.name=a", []string{"default/a", "other/a"}},
		{"label and field", flagsGV + "/flags", "labelSelector=tier=db&fieldSelector=metadata.namespace=other", []string{"other/a"}},
		// Every term of a field selector holds, as on the API server: two
		// != terms exclude both names, two = terms of one field match
		// nothing unless they agree, and metadata.namespace takes != too.
		{"field two metadata.name!=", flagsIn("default"), "fieldSelector=metadata.name!=b,metadata.name!=c", []string{"default/a", "default/d"}},
		{"field two metadata.name= that differ", flagsIn("default"), "fieldSelector=metadata.name=a,metadata.name=b", nil},
		{"field two metadata.name= that agree", flagsIn("default"), "fieldSelector=metadata.name=a,metadata.name==a", []string{"default/a"}},
		{"field metadata.name= and !=", flagsGV + "/flags", "fieldSelector=metadata.name=a,metadata.name!=b", []string{"default/a", "other/a"}},
		{"field metadata.namespace!=", flagsGV + "/flags", "fieldSelector=metadata.namespace!=default", []string{"other/a", "other/e"}},
		{"field metadata.namespace!= the namespace listed", flagsIn("default"), "fieldSelector=metadata.namespace!=default", nil},
		{"field two metadata.namespace=", flagsGV + "/flags", "fieldSelector=metadata.namespace=default,metadata.namespace=other", nil},
		{"field namespace and name", flagsGV + "/flags", "fieldSelector=metadata.namespace!=default,metadata.name!=e", []string{"other/a"}},
		{"field value with an escaped comma", flagsIn("default"), `fieldSelector=metadata.name!=a\,b`, []string{"default/a", "default/b", "default/c", "default/d"}},
		{"empty namespace", flagsIn("empty"), "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := e.with(t)
			q := ""
			if tt.query != "" {
				v, err := url.ParseQuery(tt.query)
				if err != nil {
					t.Fatal(err)
				}
				q = "?" + v.Encode()
			}
			r := e.mustDo("GET", tt.path+q, "", nil, http.StatusOK)
			l := decodeObj(t, r)
			if l.APIVersion != "flipt.io/v1alpha1" || l.Kind != "FlagList" {
				t.Errorf("list apiVersion/kind = %s/%s", l.APIVersion, l.Kind)
			}
			if _, err := strconv.ParseInt(l.Metadata.ResourceVersion, 10, 64); err != nil {
				t.Errorf("list resourceVersion %q: %v", l.Metadata.ResourceVersion, err)
			}
			if !strings.Contains(string(r.body), `"items":[`) {
				t.Errorf("items is not an array: %s", r.body)
			}
			var got []string
			for _, it := range l.Items {
				if it.Kind != "Flag" || it.Metadata.UID == "" {
					t.Errorf("item = %+v", it)
				}
				got = append(got, it.Metadata.Namespace+"/"+it.Metadata.Name)
			}
			slices.Sort(got)
			if !slices.Equal(got, tt.want) {
				t.Errorf("items = %v, want %v", got, tt.want)
			}
		})
	}

	errs := []struct {
		name, query, msg string
	}{
		{"bad label selector", "labelSelector=team in a", "unable to parse"},
		{"bad label key", "labelSelector=-bad-=1", "unable to parse"},
		{"unsupported field", "fieldSelector=spec.key=a", "field label not supported"},
		{"field selector without operator", "fieldSelector=metadata.name", "invalid field selector"},
		{"negative limit", "limit=-1", "limit"},
		{"limit not a number", "limit=ten", "limit"},
		{"continue token not base64", "limit=1&continue=!!!", "continue"},
		{"continue token not JSON", "limit=1&continue=bm9wZQ", "continue"},
		{"continue token of typeinstances", "limit=1&continue=eyJvIjoiaWQiLCJpIjoieCJ9", "another resource"},
	}
	for _, tt := range errs {
		t.Run(tt.name, func(t *testing.T) {
			e := e.with(t)
			v, err := url.ParseQuery(tt.query)
			if err != nil {
				t.Fatal(err)
			}
			wantStatus(t, e.get(flagsIn("default")+"?"+v.Encode()), 400, "BadRequest", tt.msg)
		})
	}
	// A token of a cairn that paged in the store's order has no meaning
	// in name order: 410 Expired, on which clients list again.
	wantStatus(t, e.get(flagsIn("default")+"?limit=1&continue=eyJpIjoieCIsInAiOiJpby5mbGlwdC5mbGFnIiwiciI6IjEuMC4wIiwiYyI6MH0"), 410, "Expired", "too old")
}

func TestListPaging(t *testing.T) {
	e := newFlagsEnv(t)
	const n = 23
	want := map[string]bool{}
	for i := range n {
		ns := []string{"default", "other"}[i%2]
		labels := map[string]string{"parity": strconv.Itoa(i % 2), "tens": strconv.Itoa(i / 10)}
		name := fmt.Sprintf("f%02d", i)
		e.createFlag(ns, name, labels, fmt.Sprintf(`{"key":%q}`, name))
		want[ns+"/"+name] = true
	}
	expect := func(filter func(key string) bool) map[string]bool {
		out := map[string]bool{}
		for k := range want {
			if filter(k) {
				out[k] = true
			}
		}
		return out
	}
	index := func(k string) int { i, _ := strconv.Atoi(k[len(k)-2:]); return i }

	tests := []struct {
		name  string
		path  string
		query url.Values
		limit int
		want  map[string]bool
	}{
		{"all namespaces by 5", flagsGV + "/flags", url.Values{}, 5, want},
		{"all namespaces by 1", flagsGV + "/flags", url.Values{}, 1, want},
		{"all namespaces in one page", flagsGV + "/flags", url.Values{}, 100, want},
		{"one namespace by 4", flagsIn("other"), url.Values{}, 4, expect(func(k string) bool { return strings.HasPrefix(k, "other/") })},
		{"label selector by 3", flagsGV + "/flags", url.Values{"labelSelector": {"tens in (0,2)"}}, 3,
			expect(func(k string) bool { return index(k) < 10 || index(k) >= 20 })},
		{"exact multiple of the page size", flagsIn("default"), url.Values{}, 6, expect(func(k string) bool { return strings.HasPrefix(k, "default/") })},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := e.with(t)
			seen := map[string]bool{}
			token := ""
			for page := 0; ; page++ {
				if page > n+1 {
					t.Fatalf("more than %d pages: the continue token does not advance", n+1)
				}
				q := url.Values{}
				for k, v := range tt.query {
					q[k] = v
				}
				q.Set("limit", strconv.Itoa(tt.limit))
				if token != "" {
					q.Set("continue", token)
				}
				l := decodeObj(t, e.mustDo("GET", tt.path+"?"+q.Encode(), "", nil, http.StatusOK))
				if len(l.Items) > tt.limit {
					t.Fatalf("page %d has %d items, limit %d", page, len(l.Items), tt.limit)
				}
				for _, it := range l.Items {
					k := it.Metadata.Namespace + "/" + it.Metadata.Name
					if seen[k] {
						t.Errorf("page %d repeats %s", page, k)
					}
					seen[k] = true
				}
				if page > 0 && len(l.Items) == 0 {
					// As on the API server, the last page has no continue
					// token: a client does not ask for a page that is empty.
					t.Errorf("page %d is empty, though the page before it had a continue token", page)
				}
				token = l.Metadata.Continue
				if token == "" {
					break
				}
				if len(l.Items) < tt.limit {
					t.Errorf("page %d is short (%d < %d) but has a continue token", page, len(l.Items), tt.limit)
				}
			}
			if len(seen) != len(tt.want) {
				t.Errorf("paged through %d objects, want %d", len(seen), len(tt.want))
			}
			for k := range tt.want {
				if !seen[k] {
					t.Errorf("paging missed %s", k)
				}
			}
		})
	}
}

func TestCreate(t *testing.T) {
	e := newFlagsEnv(t)
	e.createFlag("default", "taken", nil, `{"key":"taken"}`)

	t.Run("created", func(t *testing.T) {
		e := e.with(t)
		r := e.do("POST", flagsIn("default"), "application/json",
			`{"apiVersion":"flipt.io/v1alpha1","kind":"Flag","metadata":{"name":"new","namespace":"default","labels":{"a":"b"},"annotations":{"note":"x"}},"spec":{"key":"new","enabled":true}}`)
		if r.code != http.StatusCreated {
			t.Fatalf("POST = %s, want 201", r)
		}
		o := decodeObj(t, r)
		if o.Metadata.Name != "new" || o.Metadata.Namespace != "default" || o.Metadata.UID == "" || o.Metadata.ResourceVersion == "" ||
			o.Metadata.Generation != 1 || o.Metadata.CreationTimestamp == "" || o.Metadata.Labels["a"] != "b" || o.Metadata.Annotations["note"] != "x" ||
			o.Spec["enabled"] != true {
			t.Errorf("created = %s", r.body)
		}
		if got := decodeObj(t, e.mustDo("GET", flagPath("default", "new"), "", nil, 200)); got.Metadata.UID != o.Metadata.UID {
			t.Errorf("GET after create has uid %s, POST said %s", got.Metadata.UID, o.Metadata.UID)
		}
	})
	t.Run("apiVersion, kind and namespace may be left out", func(t *testing.T) {
		e := e.with(t)
		o := decodeObj(t, e.mustDo("POST", flagsIn("elsewhere"), "application/json", `{"metadata":{"name":"bare"},"spec":{"key":"k"}}`, 201))
		if o.Metadata.Namespace != "elsewhere" || o.APIVersion != "flipt.io/v1alpha1" || o.Kind != "Flag" {
			t.Errorf("created = %s", o.Raw)
		}
	})
	t.Run("generateName", func(t *testing.T) {
		e := e.with(t)
		seen := map[string]bool{}
		for range 3 {
			o := decodeObj(t, e.mustDo("POST", flagsIn("default"), "application/json", `{"metadata":{"generateName":"gen-"},"spec":{"key":"g"}}`, 201))
			if !regexp.MustCompile(`^gen-[a-z0-9]{5}$`).MatchString(o.Metadata.Name) || seen[o.Metadata.Name] {
				t.Errorf("generated name %q", o.Metadata.Name)
			}
			seen[o.Metadata.Name] = true
			e.mustDo("GET", flagPath("default", o.Metadata.Name), "", nil, 200)
		}
	})
	t.Run("Impersonate-User is recorded as createdBy", func(t *testing.T) {
		e := e.with(t)
		req, _ := http.NewRequest("POST", e.url+flagsIn("default"), strings.NewReader(`{"metadata":{"name":"who"},"spec":{"key":"w"}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Impersonate-User", "jane")
		resp, err := e.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		o := decodeObj(t, e.mustDo("GET", flagPath("default", "who"), "", nil, 200))
		if o.Status["createdBy"] != "jane" {
			t.Errorf("status.createdBy = %v, want jane", o.Status["createdBy"])
		}
	})

	tests := []struct {
		name   string
		path   string
		query  string
		body   string
		code   int
		reason string
		msgs   []string
		causes []string // field of each cause, in any order
	}{
		{name: "AlreadyExists", body: `{"metadata":{"name":"taken"},"spec":{"key":"x"}}`,
			code: 409, reason: "AlreadyExists", msgs: []string{`flags.flipt.io "taken" already exists`}},
		{name: "one cause per schema violation", body: `{"metadata":{"name":"bad"},"spec":{"key":"","port":0,"tags":["ok","long"],"extra":1}}`,
			code: 422, reason: "Invalid", msgs: []string{`Flag "bad" is invalid`},
			causes: []string{"spec.key", "spec.port", "spec.tags[1]", "spec"}},
		{name: "required property", body: `{"metadata":{"name":"bad"},"spec":{"enabled":true}}`,
			code: 422, reason: "Invalid", causes: []string{"spec"}, msgs: []string{"key"}},
		{name: "wrong type", body: `{"metadata":{"name":"bad"},"spec":{"key":"k","port":"80"}}`,
			code: 422, reason: "Invalid", causes: []string{"spec.port"}},
		{name: "no spec", body: `{"metadata":{"name":"bad"}}`, code: 422, reason: "Invalid", causes: []string{"spec"}},
		{name: "no name", body: `{"metadata":{},"spec":{"key":"k"}}`, code: 422, reason: "Invalid", causes: []string{"metadata.name"}, msgs: []string{"name or generateName is required"}},
		{name: "invalid name", body: `{"metadata":{"name":"Not A Name!"},"spec":{"key":"k"}}`, code: 422, reason: "Invalid"},
		{name: "invalid label", body: `{"metadata":{"name":"l","labels":{"-x-":"y"}},"spec":{"key":"k"}}`, code: 422, reason: "Invalid"},
		{name: "wrong apiVersion", body: `{"apiVersion":"flipt.io/v1","kind":"Flag","metadata":{"name":"v"},"spec":{"key":"k"}}`,
			code: 422, reason: "Invalid", causes: []string{"apiVersion"}, msgs: []string{"flipt.io/v1alpha1"}},
		{name: "wrong kind", body: `{"apiVersion":"flipt.io/v1alpha1","kind":"Toggle","metadata":{"name":"v"},"spec":{"key":"k"}}`,
			code: 422, reason: "Invalid", causes: []string{"kind"}, msgs: []string{"Flag"}},
		{name: "wrong apiVersion and kind", body: `{"apiVersion":"x/v1","kind":"Toggle","metadata":{"name":"v"},"spec":{"key":"k"}}`,
			code: 422, reason: "Invalid", causes: []string{"apiVersion", "kind"}},
		{name: "namespace mismatch", body: `{"metadata":{"name":"n","namespace":"other"},"spec":{"key":"k"}}`,
			code: 400, reason: "BadRequest", msgs: []string{"other", "default"}},
		{name: "not JSON", body: `{"metadata":`, code: 400, reason: "BadRequest"},
		{name: "unknown field under fieldValidation=Strict", query: "?fieldValidation=Strict", body: `{"metadata":{"name":"s"},"spec":{"key":"k"},"bogus":1}`,
			code: 400, reason: "BadRequest", msgs: []string{"bogus"}},
		{name: "create on the all-namespaces path", path: flagsGV + "/flags", body: `{"metadata":{"name":"x"},"spec":{"key":"k"}}`,
			code: 405, reason: "MethodNotAllowed"},
		{name: "create on an item path", path: flagPath("default", "x"), body: `{"metadata":{"name":"x"},"spec":{"key":"k"}}`,
			code: 405, reason: "MethodNotAllowed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := e.with(t)
			path := tt.path
			if path == "" {
				path = flagsIn("default")
			}
			st := wantStatus(t, e.do("POST", path+tt.query, "application/json", tt.body), tt.code, tt.reason, tt.msgs...)
			if tt.causes == nil {
				return
			}
			if st.Details == nil {
				t.Fatalf("no details in %+v", st)
			}
			if tt.reason == "Invalid" && tt.name != "no name" && st.Details.Name != "bad" && st.Details.Name != "v" {
				t.Errorf("details.name = %q, want the object's name", st.Details.Name)
			}
			var got []string
			for _, c := range st.Details.Causes {
				got = append(got, c.Field)
				if c.Message == "" || c.Type == "" {
					t.Errorf("cause without reason or message: %+v", c)
				}
			}
			slices.Sort(got)
			want := slices.Sorted(slices.Values(tt.causes))
			if !slices.Equal(got, want) {
				t.Errorf("cause fields = %v, want %v (causes %+v)", got, want, st.Details.Causes)
			}
		})
	}
	t.Run("unknown fields are ignored without fieldValidation=Strict", func(t *testing.T) {
		e := e.with(t)
		e.mustDo("POST", flagsIn("default"), "application/json", `{"metadata":{"name":"lax","managedFields":[{}]},"spec":{"key":"k"},"bogus":1}`, 201)
	})
	t.Run("a refused create leaves nothing", func(t *testing.T) {
		e := e.with(t)
		wantStatus(t, e.get(flagPath("default", "bad")), 404, "NotFound")
		wantStatus(t, e.get(flagPath("default", "v")), 404, "NotFound")
	})
}

func TestCreateBodyLimit(t *testing.T) {
	e := newFlagsEnv(t, func(c *rest.Config) { c.MaxBodyBytes = 4096 })
	big := fmt.Sprintf(`{"metadata":{"name":"big"},"spec":{"key":%q}}`, strings.Repeat("k", 5000))
	wantStatus(t, e.do("POST", flagsIn("default"), "application/json", big), 413, "RequestEntityTooLarge", "4096")
	wantStatus(t, e.do("PUT", flagPath("default", "big"), "application/json", big), 413, "RequestEntityTooLarge")
	e.mustDo("POST", flagsIn("default"), "application/json", `{"metadata":{"name":"small"},"spec":{"key":"k"}}`, 201)
}

func TestReplace(t *testing.T) {
	e := newFlagsEnv(t)
	put := func(name string, o any) response {
		t.Helper()
		return e.do("PUT", flagPath("default", name), "application/json", o)
	}
	cur := e.createFlag("default", "r", map[string]string{"v": "1"}, `{"key":"r","port":1}`)

	t.Run("with the current resourceVersion", func(t *testing.T) {
		e := e.with(t)
		o := flag("r", map[string]string{"v": "2"}, `{"key":"r","port":2}`)
		o["metadata"].(map[string]any)["resourceVersion"] = cur.Metadata.ResourceVersion
		r := put("r", o)
		if r.code != 200 {
			t.Fatalf("PUT = %s", r)
		}
		got := decodeObj(t, r)
		if got.Spec["port"] != float64(2) || got.Metadata.Labels["v"] != "2" || got.Metadata.Generation != 2 ||
			got.Metadata.UID != cur.Metadata.UID || got.Metadata.ResourceVersion == cur.Metadata.ResourceVersion {
			t.Errorf("replaced = %s", r.body)
		}
		if a, _ := strconv.Atoi(got.Metadata.ResourceVersion); a <= mustAtoi(t, cur.Metadata.ResourceVersion) {
			t.Errorf("resourceVersion went from %s to %s", cur.Metadata.ResourceVersion, got.Metadata.ResourceVersion)
		}
		if got := decodeObj(t, e.get(flagPath("default", "r"))); got.Spec["port"] != float64(2) {
			t.Errorf("GET after PUT = %v", got.Spec)
		}
	})
	t.Run("with a stale resourceVersion", func(t *testing.T) {
		e := e.with(t)
		o := flag("r", nil, `{"key":"r","port":3}`)
		o["metadata"].(map[string]any)["resourceVersion"] = cur.Metadata.ResourceVersion
		st := wantStatus(t, put("r", o), 409, "Conflict", `Operation cannot be fulfilled on flags.flipt.io "r"`)
		if st.Details == nil || st.Details.Name != "r" || st.Details.Kind != "flags" {
			t.Errorf("details = %+v", st.Details)
		}
		if got := decodeObj(t, e.get(flagPath("default", "r"))); got.Spec["port"] != float64(2) {
			t.Errorf("a refused PUT changed the object: %v", got.Spec)
		}
	})
	t.Run("a no-op keeps the resourceVersion", func(t *testing.T) {
		e := e.with(t)
		now := decodeObj(t, e.get(flagPath("default", "r")))
		got := decodeObj(t, e.mustDo("PUT", flagPath("default", "r"), "application/json", now.Raw, 200))
		if got.Metadata.ResourceVersion != now.Metadata.ResourceVersion || got.Metadata.Generation != now.Metadata.Generation {
			t.Errorf("no-op PUT moved %s/%d to %s/%d", now.Metadata.ResourceVersion, now.Metadata.Generation, got.Metadata.ResourceVersion, got.Metadata.Generation)
		}
	})
	t.Run("without a resourceVersion it is unconditional", func(t *testing.T) {
		e := e.with(t)
		got := decodeObj(t, e.mustDo("PUT", flagPath("default", "r"), "application/json", flag("r", nil, `{"key":"r","port":4}`), 200))
		if got.Spec["port"] != float64(4) || len(got.Metadata.Labels) != 0 {
			t.Errorf("replaced = %s (labels left out are removed)", got.Raw)
		}
	})

	stale := func(spec string) map[string]any {
		o := flag("r", nil, spec)
		o["metadata"].(map[string]any)["resourceVersion"] = "1"
		return o
	}
	withMeta := func(k, v string) map[string]any {
		o := flag("r", nil, `{"key":"r","port":9}`)
		o["metadata"].(map[string]any)[k] = v
		return o
	}
	tests := []struct {
		name   string
		target string
		body   any
		code   int
		reason string
		msgs   []string
	}{
		{"missing object", "nobody", flag("nobody", nil, `{"key":"n"}`), 404, "NotFound", []string{`"nobody" not found`}},
		{"stale and invalid: conflict or invalid, never applied", "r", stale(`{"key":""}`), 0, "", nil},
		{"stale and unchanged", "r", stale(`{"key":"r","port":4}`), 409, "Conflict", []string{`Operation cannot be fulfilled on flags.flipt.io "r": the object has been modified; please apply your changes to the latest version and try again`}},
		{"schema violation", "r", flag("r", nil, `{"key":"r","port":70000}`), 422, "Invalid", []string{`Flag "r" is invalid`}},
		{"name mismatch", "r", flag("s", nil, `{"key":"r"}`), 400, "BadRequest", []string{"s", "r"}},
		{"namespace mismatch", "r", withMeta("namespace", "other"), 400, "BadRequest", []string{"other"}},
		{"uid mismatch", "r", withMeta("uid", "00000000-0000-0000-0000-000000000000"), 409, "Conflict", []string{"Precondition failed"}},
		{"resourceVersion not a number", "r", withMeta("resourceVersion", "abc"), 400, "BadRequest", []string{"abc"}},
		{"wrong kind", "r", map[string]any{"apiVersion": "flipt.io/v1alpha1", "kind": "Toggle", "metadata": map[string]any{"name": "r"}, "spec": map[string]any{"key": "r"}}, 422, "Invalid", []string{"kind"}},
		{"not JSON", "r", "{", 400, "BadRequest", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := e.with(t)
			before := decodeObj(t, e.get(flagPath("default", "r")))
			r := put(tt.target, tt.body)
			if tt.code == 0 {
				if r.code != 409 && r.code != 422 {
					t.Errorf("PUT = %s, want 409 or 422", r)
				}
			} else {
				st := wantStatus(t, r, tt.code, tt.reason, tt.msgs...)
				if tt.reason == "Invalid" && tt.name == "schema violation" {
					if st.Details == nil || len(st.Details.Causes) != 1 || st.Details.Causes[0].Field != "spec.port" {
						t.Errorf("causes = %+v", st.Details)
					}
				}
			}
			after := decodeObj(t, e.get(flagPath("default", "r")))
			if after.Metadata.ResourceVersion != before.Metadata.ResourceVersion {
				t.Errorf("a refused PUT moved resourceVersion %s to %s", before.Metadata.ResourceVersion, after.Metadata.ResourceVersion)
			}
		})
	}
}

func mustAtoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("%q is not a number: %v", s, err)
	}
	return n
}

func TestPatch(t *testing.T) {
	e := newFlagsEnv(t)
	e.createFlag("default", "p", map[string]string{"keep": "me"}, `{"key":"p","port":1,"tags":["a"]}`)
	patch := func(ct, body string) response {
		t.Helper()
		return e.do("PATCH", flagPath("default", "p"), ct, body)
	}

	ok := []struct {
		name, ct, body string
		check          func(o obj) bool
	}{
		{"merge patch sets a field", "application/merge-patch+json", `{"spec":{"port":8080}}`,
			func(o obj) bool {
				return o.Spec["port"] == float64(8080) && o.Spec["key"] == "p" && o.Metadata.Labels["keep"] == "me"
			}},
		{"merge patch removes a field with null", "application/merge-patch+json", `{"spec":{"tags":null}}`,
			func(o obj) bool { _, has := o.Spec["tags"]; return !has && o.Spec["port"] == float64(8080) }},
		{"merge patch adds a label", "application/merge-patch+json", `{"metadata":{"labels":{"new":"yes"}}}`,
			func(o obj) bool { return o.Metadata.Labels["new"] == "yes" && o.Metadata.Labels["keep"] == "me" }},
		{"JSON patch replace", "application/json-patch+json", `[{"op":"replace","path":"/spec/port","value":9090}]`,
			func(o obj) bool { return o.Spec["port"] == float64(9090) }},
		{"JSON patch add and test", "application/json-patch+json", `[{"op":"test","path":"/spec/key","value":"p"},{"op":"add","path":"/spec/enabled","value":true}]`,
			func(o obj) bool { return o.Spec["enabled"] == true }},
		{"JSON patch removes a label", "application/json-patch+json", `[{"op":"remove","path":"/metadata/labels/new"}]`,
			func(o obj) bool { _, has := o.Metadata.Labels["new"]; return !has }},
		{"content type with charset", "application/merge-patch+json; charset=utf-8", `{"spec":{"port":7}}`,
			func(o obj) bool { return o.Spec["port"] == float64(7) }},
	}
	for _, tt := range ok {
		t.Run(tt.name, func(t *testing.T) {
			e := e.with(t)
			before := decodeObj(t, e.get(flagPath("default", "p")))
			r := patch(tt.ct, tt.body)
			if r.code != 200 {
				t.Fatalf("PATCH = %s", r)
			}
			got := decodeObj(t, r)
			if !tt.check(got) {
				t.Errorf("patched = %s", r.body)
			}
			if got.Metadata.ResourceVersion == before.Metadata.ResourceVersion {
				t.Errorf("resourceVersion did not move: %s", got.Metadata.ResourceVersion)
			}
			if stored := decodeObj(t, e.get(flagPath("default", "p"))); stored.Metadata.ResourceVersion != got.Metadata.ResourceVersion || !tt.check(stored) {
				t.Errorf("GET after PATCH = %s", stored.Raw)
			}
		})
	}

	cur := decodeObj(t, e.get(flagPath("default", "p")))
	errs := []struct {
		name, target, ct, body string
		code                   int
		reason                 string
		msgs                   []string
	}{
		{"strategic merge patch", "p", "application/strategic-merge-patch+json", `{"spec":{"port":1}}`, 415, "UnsupportedMediaType", []string{"the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"}},
		{"apply patch without a field manager", "p", "application/apply-patch+yaml", `spec: {port: 1}`, 422, "Invalid", []string{"fieldManager: Required value: is required for apply patch"}},
		{"plain JSON", "p", "application/json", `{"spec":{"port":1}}`, 415, "UnsupportedMediaType", nil},
		{"merge patch with a stale resourceVersion", "p", "application/merge-patch+json", `{"metadata":{"resourceVersion":"1"},"spec":{"port":2}}`, 409, "Conflict", nil},
		{"merge patch that breaks the schema", "p", "application/merge-patch+json", `{"spec":{"port":-1}}`, 422, "Invalid", []string{`Flag "p" is invalid`}},
		{"merge patch that renames", "p", "application/merge-patch+json", `{"metadata":{"name":"q"}}`, 400, "BadRequest", nil},
		{"JSON patch test fails", "p", "application/json-patch+json", `[{"op":"test","path":"/spec/key","value":"other"}]`, 422, "Invalid", nil},
		{"JSON patch is not a patch", "p", "application/json-patch+json", `{"op":"replace"}`, 400, "BadRequest", nil},
		{"JSON patch path missing", "p", "application/json-patch+json", `[{"op":"replace","path":"/spec/nothing/deeper","value":1}]`, 422, "Invalid", nil},
		{"missing object", "nobody", "application/merge-patch+json", `{"spec":{"port":2}}`, 404, "NotFound", []string{`"nobody"`}},
		{"locked", "p", "application/merge-patch+json", `{"spec":{"port":2}}`, 0, "", nil}, // see TestLockRefusal
	}
	for _, tt := range errs {
		if tt.code == 0 {
			continue
		}
		t.Run(tt.name, func(t *testing.T) {
			e := e.with(t)
			st := wantStatus(t, e.do("PATCH", flagPath("default", tt.target), tt.ct, tt.body), tt.code, tt.reason, tt.msgs...)
			if strings.Contains(tt.name, "schema") && (st.Details == nil || len(st.Details.Causes) != 1 || st.Details.Causes[0].Field != "spec.port") {
				t.Errorf("details = %+v, want one cause for spec.port", st.Details)
			}
		})
	}
	if after := decodeObj(t, e.get(flagPath("default", "p"))); after.Metadata.ResourceVersion != cur.Metadata.ResourceVersion {
		t.Errorf("refused patches moved resourceVersion %s to %s", cur.Metadata.ResourceVersion, after.Metadata.ResourceVersion)
	}
	t.Run("merge patch with the current resourceVersion", func(t *testing.T) {
		e := e.with(t)
		body := fmt.Sprintf(`{"metadata":{"resourceVersion":%q},"spec":{"port":3}}`, cur.Metadata.ResourceVersion)
		if got := decodeObj(t, e.mustDo("PATCH", flagPath("default", "p"), "application/merge-patch+json", body, 200)); got.Spec["port"] != float64(3) {
			t.Errorf("patched = %s", got.Raw)
		}
	})
}

func TestDelete(t *testing.T) {
	e := newFlagsEnv(t)
	mk := func(name string) obj { return e.createFlag("default", name, nil, fmt.Sprintf(`{"key":%q}`, name)) }

	t.Run("deleted", func(t *testing.T) {
		e := e.with(t)
		d := mk("d")
		r := e.mustDo("DELETE", flagPath("default", "d"), "", nil, 200)
		var st rest.Status
		if err := json.Unmarshal(r.body, &st); err != nil {
			t.Fatal(err)
		}
		if st.Kind != "Status" || st.APIVersion != "v1" || st.Status != "Success" || st.Code != 200 ||
			st.Details == nil || st.Details.Name != "d" || st.Details.UID != d.Metadata.UID || st.Details.Kind != "flags" || st.Details.Group != "flipt.io" {
			t.Errorf("DELETE = %s", r.body)
		}
		wantStatus(t, e.get(flagPath("default", "d")), 404, "NotFound")
		if _, err := e.h.GetInstance(e.ctx, d.Metadata.UID, false); !cairn.HasCode(err, cairn.CodeNotFound) {
			t.Errorf("hub still has the instance: %v", err)
		}
		wantStatus(t, e.do("DELETE", flagPath("default", "d"), "", nil), 404, "NotFound", `"d" not found`)
	})
	t.Run("DeleteOptions body without preconditions", func(t *testing.T) {
		e := e.with(t)
		mk("opts")
		e.mustDo("DELETE", flagPath("default", "opts"), "application/json", `{"kind":"DeleteOptions","apiVersion":"v1","propagationPolicy":"Background"}`, 200)
	})

	tests := []struct {
		name   string
		body   func(o obj) string
		query  func(o obj) string
		code   int
		reason string
	}{
		{"precondition uid matches", func(o obj) string { return fmt.Sprintf(`{"preconditions":{"uid":%q}}`, o.Metadata.UID) }, nil, 200, ""},
		{"precondition uid differs", func(o obj) string { return `{"preconditions":{"uid":"00000000-0000-0000-0000-000000000000"}}` }, nil, 409, "Conflict"},
		{"precondition resourceVersion current", func(o obj) string {
			return fmt.Sprintf(`{"preconditions":{"resourceVersion":%q}}`, o.Metadata.ResourceVersion)
		}, nil, 200, ""},
		{"precondition resourceVersion stale", func(o obj) string { return `{"preconditions":{"resourceVersion":"1"}}` }, nil, 409, "Conflict"},
		{"precondition resourceVersion not a number", func(o obj) string { return `{"preconditions":{"resourceVersion":"x"}}` }, nil, 400, "BadRequest"},
		{"both preconditions current", func(o obj) string {
			return fmt.Sprintf(`{"preconditions":{"uid":%q,"resourceVersion":%q}}`, o.Metadata.UID, o.Metadata.ResourceVersion)
		}, nil, 200, ""},
		{"resourceVersion query current", nil, func(o obj) string { return "?resourceVersion=" + o.Metadata.ResourceVersion }, 200, ""},
		{"resourceVersion query stale", nil, func(o obj) string { return "?resourceVersion=1" }, 409, "Conflict"},
		{"body not JSON", func(o obj) string { return `{"preconditions":` }, nil, 400, "BadRequest"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := e.with(t)
			name := fmt.Sprintf("pre%d", i)
			o := mk(name)
			var body any
			if tt.body != nil {
				body = tt.body(o)
			}
			q := ""
			if tt.query != nil {
				q = tt.query(o)
			}
			r := e.do("DELETE", flagPath("default", name)+q, "application/json", body)
			if tt.code == 200 {
				if r.code != 200 {
					t.Fatalf("DELETE = %s", r)
				}
				wantStatus(t, e.get(flagPath("default", name)), 404, "NotFound")
				return
			}
			wantStatus(t, r, tt.code, tt.reason)
			e.mustDo("GET", flagPath("default", name), "", nil, 200) // still there
		})
	}
	// A collection delete is TestDeleteCollection's.
}

// TestLockRefusal locks an instance through the hub: writes over REST need
// ?lockOwner=<owner>.
func TestLockRefusal(t *testing.T) {
	e := newFlagsEnv(t)
	o := e.createFlag("default", "locked", nil, `{"key":"l","port":1}`)
	if err := e.h.LockInstances(e.ctx, []string{o.Metadata.UID}, "alice"); err != nil {
		t.Fatal(err)
	}
	if got := decodeObj(t, e.get(flagPath("default", "locked"))); got.Status["lockedBy"] != "alice" {
		t.Errorf("status.lockedBy = %v", got.Status["lockedBy"])
	}
	path := flagPath("default", "locked")
	tests := []struct {
		name, method, query, ct, body string
		code                          int
	}{
		{"PUT without lockOwner", "PUT", "", "application/json", `{"metadata":{"name":"locked"},"spec":{"key":"l","port":2}}`, 409},
		{"PUT by another owner", "PUT", "?lockOwner=bob", "application/json", `{"metadata":{"name":"locked"},"spec":{"key":"l","port":2}}`, 409},
		{"merge patch without lockOwner", "PATCH", "", "application/merge-patch+json", `{"spec":{"port":3}}`, 409},
		{"JSON patch without lockOwner", "PATCH", "", "application/json-patch+json", `[{"op":"replace","path":"/spec/port","value":3}]`, 409},
		{"DELETE without lockOwner", "DELETE", "", "", "", 409},
		{"PUT with lockOwner", "PUT", "?lockOwner=alice", "application/json", `{"metadata":{"name":"locked"},"spec":{"key":"l","port":2}}`, 200},
		{"PATCH with lockOwner", "PATCH", "?lockOwner=alice", "application/merge-patch+json", `{"spec":{"port":3}}`, 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := e.with(t)
			var body any
			if tt.body != "" {
				body = tt.body
			}
			before := decodeObj(t, e.get(path))
			r := e.do(tt.method, path+tt.query, tt.ct, body)
			if tt.code == 200 {
				if r.code != 200 {
					t.Fatalf("%s = %s", tt.method, r)
				}
				return
			}
			// Said of the object the request named, in the API server's words
			// for a refused write, with what lets the owner through; the
			// cause names the instance by id.
			st := wantStatus(t, r, 409, "Conflict", `Operation cannot be fulfilled on flags.flipt.io "locked": it is locked by another owner`, "?lockOwner=")
			if st.Details == nil || !slices.ContainsFunc(st.Details.Causes, func(c rest.StatusCause) bool {
				return c.Type == "Locked" && strings.Contains(c.Message, o.Metadata.UID)
			}) {
				t.Errorf("details = %+v, want a Locked cause naming %s", st.Details, o.Metadata.UID)
			}
			if after := decodeObj(t, e.get(path)); after.Metadata.ResourceVersion != before.Metadata.ResourceVersion {
				t.Errorf("a refused write changed the object")
			}
		})
	}
	if got := decodeObj(t, e.get(path)); got.Spec["port"] != float64(3) || got.Metadata.Generation != 3 {
		t.Errorf("after the owner's writes: %s", got.Raw)
	}
	e.mustDo("DELETE", path+"?lockOwner=alice", "", nil, 200)
}

// TestUsedByRefusal relates two instances through the hub: the used one
// cannot be deleted over REST while the other uses it.
func TestUsedByRefusal(t *testing.T) {
	e := newFlagsEnv(t)
	used := e.createFlag("default", "used", nil, `{"key":"used"}`)
	created, err := e.h.CreateInstances(e.ctx, hub.CreateRequest{
		Instances:     []hub.NewInstance{{Alias: "user", Namespace: "default", Name: "user", TypeRef: flagType, Value: json.RawMessage(`{"key":"user"}`)}},
		UsesRelations: []hub.UsesRelation{{From: "user", To: used.Metadata.UID}},
	})
	if err != nil {
		t.Fatal(err)
	}
	userID := created[0].ID
	if got := decodeObj(t, e.get(flagPath("default", "used"))); fmt.Sprint(got.Status["usedBy"]) != "["+userID+"]" {
		t.Errorf("status.usedBy = %v, want [%s]", got.Status["usedBy"], userID)
	}
	st := wantStatus(t, e.do("DELETE", flagPath("default", "used"), "", nil), 409, "Conflict", userID)
	if st.Details == nil || len(st.Details.Causes) != 1 || st.Details.Causes[0].Type != "UsedBy" || !strings.Contains(st.Details.Causes[0].Message, userID) {
		t.Errorf("details = %+v, want one UsedBy cause naming %s", st.Details, userID)
	}
	e.mustDo("GET", flagPath("default", "used"), "", nil, 200)
	e.mustDo("DELETE", flagPath("default", "user"), "", nil, 200)
	e.mustDo("DELETE", flagPath("default", "used"), "", nil, 200)
}

// TestCreateRefusesResourceVersion: a create whose object carries a
// resourceVersion (an object read from the server, sent back by client-go or
// curl) is refused as the API server refuses it: 500, no reason, its text.
// kubectl create clears the field itself; a value the API server cannot
// read as a version ("0", "-1") passes there, and here; a dry run does not
// reach storage there, so it passes too.
func TestCreateRefusesResourceVersion(t *testing.T) {
	e := newRestEnv(t)
	e.mustDo("POST", hubGV+"/types", "application/json", flagsRD, http.StatusCreated)
	e.mustDo("POST", hubGV+"/types", "application/yaml", pgType, http.StatusCreated)
	tis := hubGV + "/typeinstances"
	tiDoc := func(name, rv string) string {
		return strings.Replace(pgDoc(name, ""), "name: "+name, "name: "+name+"\n  resourceVersion: "+rv, 1)
	}
	tests := []struct {
		name, path, body string
		query            string
		refused          bool
		gone             string // the object that must not exist afterwards
	}{
		{name: "served kind", path: flagsIn("default"), body: `{"metadata":{"name":"rv","resourceVersion":"7"},"spec":{"key":"k"}}`,
			refused: true, gone: flagPath("default", "rv")},
		{name: "TypeInstance", path: tis, body: tiDoc("rv", `"7"`), refused: true,
			gone: "/apis/database.cairn.dev/v1/namespaces/default/postgresconfigs/rv"},
		{name: "TypeInstance in a List", path: tis, body: pgDoc("rv2", "") + "---\n" + tiDoc("rv3", `"12"`), refused: true,
			gone: "/apis/database.cairn.dev/v1/namespaces/default/postgresconfigs/rv2"},
		{name: "served kind, version 0", path: flagsIn("default"), body: `{"metadata":{"name":"rv0","resourceVersion":"0"},"spec":{"key":"k"}}`},
		{name: "served kind, not a version", path: flagsIn("default"), body: `{"metadata":{"name":"rvx","resourceVersion":"-1"},"spec":{"key":"k"}}`},
		{name: "served kind, dry run", path: flagsIn("default"), query: "?dryRun=All", body: `{"metadata":{"name":"rvd","resourceVersion":"7"},"spec":{"key":"k"}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := e.with(t)
			r := e.do("POST", tt.path+tt.query, "application/yaml", tt.body)
			if !tt.refused {
				if r.code != http.StatusCreated {
					t.Fatalf("POST = %s, want 201", r)
				}
				return
			}
			var st rest.Status
			if err := json.Unmarshal(r.body, &st); err != nil || r.code != 400 || st.Code != 400 || st.Kind != "Status" ||
				st.Status != "Failure" || st.Reason != "BadRequest" || st.Message != "resourceVersion should not be set on objects to be created" {
				t.Fatalf("POST = %s (%v), want a 400 Status with the API server's message", r, err)
			}
			wantStatus(t, e.get(tt.gone), 404, "NotFound")
		})
	}
}

// TestCreateBackendAnnotation: the hub.cairn.dev/backend annotation of a
// create names the backend by id, alias or name, as cairn does elsewhere;
// one that names none is refused naming the annotation.
func TestCreateBackendAnnotation(t *testing.T) {
	e := newFlagsEnv(t)
	for _, tc := range []struct{ name, ref string }{
		{"by-id", cairn.BuiltinBackendID}, {"by-alias", cairn.BuiltinBackendAlias}, {"by-name", "builtin"},
	} {
		body := fmt.Sprintf(`{"metadata":{"name":%q,"annotations":{"hub.cairn.dev/backend":%q}},"spec":{"key":"k"}}`, tc.name, tc.ref)
		o := decodeObj(t, e.mustDo("POST", flagsIn("default"), "application/json", body, http.StatusCreated))
		if b, _ := o.Status["backend"].(map[string]any); b["id"] != cairn.BuiltinBackendID {
			t.Errorf("%s: backend %v, want the built-in one", tc.name, o.Status["backend"])
		}
	}
	st := wantStatus(t, e.do("POST", flagsIn("default"), "application/json",
		`{"metadata":{"name":"nowhere","annotations":{"hub.cairn.dev/backend":"nowhere"}},"spec":{"key":"k"}}`),
		422, "Invalid", `metadata.annotations[hub.cairn.dev/backend]`, `"nowhere"`, "neither the id, the alias nor the name")
	if st.Details == nil || len(st.Details.Causes) != 1 || st.Details.Causes[0].Field != "metadata.annotations[hub.cairn.dev/backend]" {
		t.Errorf("causes = %+v, want one naming the annotation", st.Details)
	}
	wantStatus(t, e.get(flagPath("default", "nowhere")), 404, "NotFound")
}
