package client_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/api/rest"
	restclient "github.com/cairn-dev/cairn/api/rest/client"
	"github.com/cairn-dev/cairn/client"
	"github.com/cairn-dev/cairn/hub"
	"github.com/cairn-dev/cairn/labels"
	"github.com/cairn-dev/cairn/policy"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/sqlite"
)

// Both implementations of client.Interface — the hub in process and the
// REST API of a real server on loopback — answer the same calls alike.
func TestImplementationsAgree(t *testing.T) {
	for _, impl := range []string{"hub", "rest", "in-process rest"} {
		t.Run(impl, func(t *testing.T) {
			ctx := cairn.WithActor(context.Background(), "tester")
			st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "cairn.db"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			h, err := hub.New(ctx, hub.Config{Store: st})
			if err != nil {
				t.Fatal(err)
			}
			var c client.Interface
			switch impl {
			case "hub":
				c = h
			case "rest":
				srv := httptest.NewServer(rest.New(rest.Config{Hub: h}))
				t.Cleanup(srv.Close)
				rc, err := restclient.New(srv.URL, restclient.WithActor("tester"))
				if err != nil {
					t.Fatal(err)
				}
				c = client.NewREST(rc)
			default:
				c = client.NewREST(restclient.NewInProcess(rest.New(rest.Config{Hub: h}), restclient.WithActor("tester")))
			}
			exercise(t, ctx, c)
		})
	}
}

func exercise(t *testing.T, ctx context.Context, c client.Interface) {
	typ := cairn.Type{Path: "cap.type.test.db", Revision: "0.1.0", JSONSchema: json.RawMessage(`{"type":"object","required":["port"]}`)}
	got, created, err := c.ApplyType(ctx, typ)
	if err != nil || !created || got.Path != typ.Path {
		t.Fatalf("ApplyType = %+v, %v, %v", got, created, err)
	}
	if _, created, err := c.ApplyType(ctx, typ); err != nil || created {
		t.Errorf("ApplyType again = %v, %v; want unchanged", created, err)
	}
	other := typ
	other.JSONSchema = json.RawMessage(`{"type":"object"}`)
	if _, _, err := c.ApplyType(ctx, other); !cairn.HasCode(err, cairn.CodeConflict) && !cairn.HasCode(err, cairn.CodeAlreadyExists) {
		t.Errorf("ApplyType with another schema: %v, want a conflict", err)
	}
	if ts, err := c.ListTypes(ctx, store.TypeFilter{PathPrefix: "cap.type.test"}); err != nil || len(ts) != 1 {
		t.Errorf("ListTypes = %+v, %v", ts, err)
	}

	out, err := c.CreateInstances(ctx, hub.CreateRequest{
		Instances: []hub.NewInstance{
			{Alias: "a", Name: "a", TypeRef: typ.Ref(), Labels: map[string]string{"env": "dev"}, Value: json.RawMessage(`{"port":1}`)},
			{Alias: "b", Name: "b", TypeRef: typ.Ref(), Value: json.RawMessage(`{"port":2}`)},
		},
		UsesRelations: []hub.UsesRelation{{From: "b", To: "a"}},
	})
	if err != nil || len(out) != 2 {
		t.Fatalf("CreateInstances = %+v, %v", out, err)
	}
	a, b := out[0].ID, out[1].ID
	if _, err := c.CreateInstances(ctx, hub.CreateRequest{Instances: []hub.NewInstance{{Name: "bad", TypeRef: typ.Ref(), Value: json.RawMessage(`{}`)}}}); !cairn.HasCode(err, cairn.CodeInvalid) {
		t.Errorf("create with a value the schema refuses: %v, want Invalid", err)
	}

	inst, err := c.GetInstance(ctx, b, true)
	if err != nil || inst.Name != "b" || len(inst.Uses) == 0 || !cairn.JSONEqual(inst.Latest.Value, json.RawMessage(`{"port":2}`)) || inst.Latest.CreatedBy != "tester" {
		t.Errorf("GetInstance = %+v, %v", inst, err)
	}
	if byName, err := c.GetInstanceByName(ctx, typ.Path, cairn.DefaultNamespace, "a", false); err != nil || byName.ID != a || byName.Latest.Value != nil {
		t.Errorf("GetInstanceByName = %+v, %v", byName, err)
	}
	if _, err := c.GetInstanceByName(ctx, typ.Path, cairn.DefaultNamespace, "nope", false); !cairn.HasCode(err, cairn.CodeNotFound) {
		t.Errorf("GetInstanceByName of a missing name: %v", err)
	}
	sel, _ := labels.Parse("env=dev")
	if l, err := c.ListInstances(ctx, store.InstanceFilter{TypePath: "cap.type.test.*", Labels: sel}, false); err != nil || len(l) != 1 || l[0].ID != a {
		t.Errorf("ListInstances by label = %+v, %v", l, err)
	}
	if l, err := c.ListInstances(ctx, store.InstanceFilter{CreatedBy: "tester", Namespace: cairn.DefaultNamespace}, false); err != nil || len(l) != 2 {
		t.Errorf("ListInstances by creator = %+v, %v", l, err)
	}
	// A list comes in the hub's order (by Type, the newest revision
	// first) from either: the server lists typeinstances by id.
	newer := typ
	newer.Revision = "0.10.0"
	if _, _, err := c.ApplyType(ctx, newer); err != nil {
		t.Fatal(err)
	}
	newest, err := c.CreateInstances(ctx, hub.CreateRequest{Instances: []hub.NewInstance{{Name: "zz-newest", TypeRef: newer.Ref(), Value: json.RawMessage(`{"port":4}`)}}})
	if err != nil {
		t.Fatal(err)
	}
	if l, err := c.ListInstances(ctx, store.InstanceFilter{TypePath: typ.Path}, false); err != nil || len(l) != 3 || l[0].ID != newest[0].ID {
		t.Errorf("ListInstances = %+v, %v; want %s first", l, err, newest[0].ID)
	}
	if err := c.DeleteInstance(ctx, newest[0].ID, ""); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteType(ctx, newer.Ref()); err != nil {
		t.Fatal(err)
	}

	if err := c.LockInstances(ctx, []string{a}, "deploy"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.UpdateInstances(ctx, []hub.UpdateInstance{{ID: a, Value: json.RawMessage(`{"port":3}`)}}); !cairn.HasCode(err, cairn.CodeLocked) {
		t.Errorf("update of a locked instance: %v, want Locked", err)
	}
	up, err := c.UpdateInstances(ctx, []hub.UpdateInstance{{ID: a, OwnerID: "deploy", Value: json.RawMessage(`{"port":3}`)}})
	if err != nil || up[0].Latest.ResourceVersion != 2 || up[0].Labels["env"] != "dev" {
		t.Errorf("update by the owner = %+v, %v (labels carried over)", up, err)
	}
	if err := c.UnlockInstances(ctx, []string{a}, "deploy"); err != nil {
		t.Fatal(err)
	}
	rvs, err := c.ResourceVersions(ctx, a, true)
	if err != nil || len(rvs) != 2 || !cairn.JSONEqual(rvs[0].Value, json.RawMessage(`{"port":1}`)) {
		t.Errorf("ResourceVersions = %+v, %v", rvs, err)
	}

	if err := c.DeleteInstance(ctx, a, ""); !cairn.HasCode(err, cairn.CodeUsedBy) {
		t.Errorf("delete of a used instance: %v, want UsedBy", err)
	}
	if err := c.DeleteType(ctx, typ.Ref()); !cairn.HasCode(err, cairn.CodeUsedBy) {
		t.Errorf("delete of a Type in use: %v, want UsedBy", err)
	}
	for _, id := range []string{b, a} {
		if err := c.DeleteInstance(ctx, id, ""); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.DeleteType(ctx, typ.Ref()); err != nil {
		t.Errorf("DeleteType: %v", err)
	}

	sb, health, err := c.CheckBackend(ctx, cairn.BuiltinBackendID)
	if err != nil || health.Status != "SERVING" || !sb.Abstract {
		t.Errorf("CheckBackend = %+v %+v %v", sb, health, err)
	}
	if sb, err := c.StorageBackend(ctx, cairn.BuiltinBackendID); err != nil || sb.Alias != "cairn-builtin" {
		t.Errorf("StorageBackend = %+v, %v", sb, err)
	}

	if doc, err := c.GetPolicy(ctx); err != nil || doc.ResourceVersion != 0 {
		t.Errorf("GetPolicy before any apply = %+v, %v", doc, err)
	}
	p, err := policy.Parse(json.RawMessage(`{"typeInstance":{"rules":[{"typeRef":{"path":"cap.*"},"backend":{"id":"cairn-builtin"}}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	doc, err := c.ApplyPolicy(ctx, p)
	if err != nil || doc.ResourceVersion != 1 || doc.CreatedBy != "tester" {
		t.Errorf("ApplyPolicy = %+v, %v", doc, err)
	}
	ex, err := c.ExplainPolicy(ctx, "cap.type.test.db", "")
	if err != nil || !ex.Matched || ex.RuleIndex != 0 || ex.BackendID != cairn.BuiltinBackendID || ex.PolicyVersion != 1 {
		t.Errorf("ExplainPolicy = %+v, %v", ex, err)
	}
}

// An update over REST (every update in local mode, since local mode
// answers the hub operations through the REST façade) carries over the
// labels, annotations and attributes it does not change as they are when
// it commits: a change another writer makes between the read and the
// write is kept, not overwritten with what was read.
func TestRESTUpdateKeepsConcurrentChanges(t *testing.T) {
	ctx := cairn.WithActor(context.Background(), "tester")
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "cairn.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	h, err := hub.New(ctx, hub.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	created, err := h.CreateInstances(ctx, hub.CreateRequest{Instances: []hub.NewInstance{{
		Name: "db", TypeRef: cairn.TypeRef{Path: "cap.type.test.db", Revision: "0.1.0"},
		Value: json.RawMessage(`{"port":1}`), Labels: map[string]string{"env": "dev"}}}})
	if err != nil {
		t.Fatal(err)
	}
	id := created[0].ID
	srv := rest.New(rest.Config{Hub: h})
	interfered := false
	c := client.NewREST(restclient.NewInProcess(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut && !interfered {
			// Another writer labels the instance between the client's
			// read and its write.
			interfered = true
			if _, err := h.UpdateInstances(ctx, []hub.UpdateInstance{{ID: id, Labels: map[string]string{"env": "dev", "team": "db"}}}); err != nil {
				t.Error(err)
			}
		}
		srv.ServeHTTP(w, r)
	}), restclient.WithActor("tester")))
	if _, err := c.UpdateInstances(ctx, []hub.UpdateInstance{{ID: id, Value: json.RawMessage(`{"port":2}`)}}); err != nil {
		t.Fatal(err)
	}
	got, err := h.GetInstance(ctx, id, true)
	if err != nil {
		t.Fatal(err)
	}
	if got.Labels["team"] != "db" || string(got.Latest.Value) != `{"port":2}` {
		t.Errorf("after an update racing a label change: labels %v, value %s; want team=db kept and the value {\"port\":2}", got.Labels, got.Latest.Value)
	}
}
