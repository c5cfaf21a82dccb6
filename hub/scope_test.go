package hub_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/hub"
	"github.com/cairn-dev/cairn/store"
)

// A Cluster Type (seed 004: "CRD of the configuration stack should be
// cluster-scoped") has instances without a namespace.
func TestClusterScopedInstances(t *testing.T) {
	env := newEnv(t)
	h, ctx := env.h, env.ctx
	cluster := cairn.Type{Path: "dev.cairn.test.envs", Revision: "1.0.0", Group: "test.cairn.dev", Version: "v1",
		Names: &cairn.Names{Kind: "Env", Plural: "envs"}, JSONSchema: json.RawMessage(`{"type":"object","x-cairn-scope":"Cluster"}`)}
	if _, err := h.CreateType(ctx, cluster); err != nil {
		t.Fatal(err)
	}
	env.registerType(cfgType.Path, cfgType.Revision, cfgSchema)

	// The Type's scope is kept and read back.
	got, err := h.GetType(ctx, cluster.Ref())
	if err != nil || got.Scope() != cairn.ScopeCluster {
		t.Fatalf("GetType = %s, %v; want scope Cluster", got.Scope(), err)
	}
	if got, _ := h.GetType(ctx, cfgType); got.Scope() != cairn.ScopeNamespaced {
		t.Fatalf("a Type without %s is %s, want Namespaced", cairn.ScopeKey, got.Scope())
	}

	for _, tc := range []struct {
		name   string
		in     hub.NewInstance
		wantNS string
		want   string // error text; "" for success
	}{
		{"cluster, no namespace", hub.NewInstance{TypeRef: cluster.Ref(), Name: "small"}, "", ""},
		{"cluster, a namespace", hub.NewInstance{TypeRef: cluster.Ref(), Namespace: "team-a", Name: "big"}, "",
			`metadata/namespace "team-a": Env is cluster-scoped: its objects have no namespace`},
		{"namespaced, no namespace: default", hub.NewInstance{TypeRef: cfgType, Name: "db", Value: json.RawMessage(`{"host":"h"}`)}, "default", ""},
		{"namespaced, bad namespace", hub.NewInstance{TypeRef: cfgType, Namespace: "Team", Name: "db", Value: json.RawMessage(`{"host":"h"}`)}, "",
			`"Team" must be a DNS label`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := h.CreateInstances(ctx, hub.CreateRequest{Instances: []hub.NewInstance{tc.in}})
			if tc.want != "" {
				wantCode(t, err, cairn.CodeInvalid)
				wantContains(t, err, tc.want)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if out[0].Instance.Namespace != tc.wantNS {
				t.Fatalf("namespace = %q, want %q", out[0].Instance.Namespace, tc.wantNS)
			}
		})
	}

	// Read by name with the empty namespace, from the store and the cache.
	inst, err := h.GetInstanceByName(ctx, cluster.Path, "", "small", true)
	if err != nil || inst.Namespace != "" {
		t.Fatalf("GetInstanceByName(%s, \"\", small) = %+v, %v", cluster.Path, inst, err)
	}
	if _, err := h.GetInstanceByName(ctx, cluster.Path, "default", "small", false); !cairn.HasCode(err, cairn.CodeNotFound) {
		t.Fatalf("GetInstanceByName in namespace default: %v, want not found", err)
	}
	list, err := h.ListInstances(ctx, store.InstanceFilter{TypePath: cluster.Path}, false)
	if err != nil || len(list) != 1 || list[0].Namespace != "" {
		t.Fatalf("ListInstances = %+v, %v", list, err)
	}
	if err := h.DeleteInstance(ctx, inst.ID, ""); err != nil {
		t.Fatal(err)
	}

	// A backend that keeps resources by namespace and name (the Git
	// backend's path templates) has no place for one without: refused, with
	// what to do, before the backend is called.
	gitID, git := env.addBackend("git-like", true, "")
	git.namer = true
	_, err = h.CreateInstances(ctx, hub.CreateRequest{Instances: []hub.NewInstance{{TypeRef: cluster.Ref(), Name: "in-git", Backend: &hub.BackendInput{ID: gitID}}}})
	wantCode(t, err, cairn.CodeInvalid)
	wantContains(t, err, `Env is cluster-scoped and backend "`+gitID+`" keeps resources by namespace and name`, "the built-in backend")
	if calls := git.called("OnCreate"); len(calls) != 0 {
		t.Fatalf("the backend was called: %v", calls)
	}
}

func TestTypeScopeValidation(t *testing.T) {
	env := newEnv(t)
	for _, tc := range []struct {
		name string
		typ  cairn.Type
		want string
	}{
		{"unknown scope", cairn.Type{Path: "dev.cairn.test.a", Revision: "1.0.0", Group: "test.cairn.dev", Version: "v1",
			Names: &cairn.Names{Kind: "A", Plural: "as"}, JSONSchema: json.RawMessage(`{"x-cairn-scope":"Global"}`)},
			`jsonSchema/x-cairn-scope "Global" must be Namespaced or Cluster`},
		{"cluster without REST names", cairn.Type{Path: "dev.cairn.test.b", Revision: "1.0.0",
			JSONSchema: json.RawMessage(`{"x-cairn-scope":"Cluster"}`)},
			`jsonSchema/x-cairn-scope "Cluster" needs a Type served over REST: give it group, version and names`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := env.h.CreateType(env.ctx, tc.typ)
			wantCode(t, err, cairn.CodeInvalid)
			wantContains(t, err, tc.want)
		})
	}
}

// stack.yaml's kind.scope: Cluster makes the installation Type Cluster.
func TestClusterStackKind(t *testing.T) {
	env := newEnv(t)
	e, _, err := env.h.AddStack(env.ctx, stackArchive(t, func(s string) string {
		return strings.Replace(s, "names: {kind: DB, plural: dbs}", "names: {kind: DB, plural: dbs}\n  scope: Cluster", 1)
	}))
	if err != nil {
		t.Fatal(err)
	}
	typ, err := env.h.GetType(env.ctx, e.InstallationType)
	if err != nil || !typ.ClusterScoped() {
		t.Fatalf("installation Type %s: ClusterScoped = %v, %v", e.InstallationType, typ.ClusterScoped(), err)
	}
}
