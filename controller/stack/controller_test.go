package stack_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn"
	stackctl "github.com/cairn-dev/cairn/controller/stack"
	"github.com/cairn-dev/cairn/hub"
	"github.com/cairn-dev/cairn/labels"
	"github.com/cairn-dev/cairn/stack"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/sqlite"
)

// env is a hub on a real SQLite file with a controller that is driven by
// calling Reconcile, so every test decides when a reconcile happens.
type env struct {
	t   testing.TB
	ctx context.Context
	h   *hub.Hub
	c   *stackctl.Controller
}

func newEnv(t testing.TB) *env {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "cairn.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	h, err := hub.New(ctx, hub.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	return &env{t: t, ctx: cairn.WithActor(ctx, "tester"), h: h, c: stackctl.New(stackctl.Config{Hub: h, Identity: "test-controller"})}
}

func repoPath(parts ...string) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(append([]string{filepath.Dir(file), "..", ".."}, parts...)...)
}

func (e *env) addStack(dir string) hub.StackEntry {
	e.t.Helper()
	s, err := stack.Load(e.ctx, dir)
	if err != nil {
		e.t.Fatal(err)
	}
	b, err := s.Archive()
	if err != nil {
		e.t.Fatal(err)
	}
	entry, added, err := e.h.AddStack(e.ctx, b)
	if err != nil || !added {
		e.t.Fatalf("AddStack(%s) = %v, %v", dir, added, err)
	}
	return entry
}

// writeStack writes a stack package's files (path -> content) into a new
// directory and returns it.
func writeStack(t testing.TB, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func (e *env) install(entry hub.StackEntry, name string, labels map[string]string, spec string) cairn.Instance {
	e.t.Helper()
	created, err := e.h.CreateInstances(e.ctx, hub.CreateRequest{Instances: []hub.NewInstance{{
		Name: name, TypeRef: entry.InstallationType, Labels: labels, Value: json.RawMessage(spec)}}})
	if err != nil {
		e.t.Fatal(err)
	}
	return created[0].Instance
}

func (e *env) reconcile(id string) {
	e.t.Helper()
	if _, err := e.c.Reconcile(e.ctx, id); err != nil {
		e.t.Fatalf("Reconcile: %v", err)
	}
}

func (e *env) get(id string) cairn.Instance {
	e.t.Helper()
	inst, err := e.h.GetInstance(e.ctx, id, true)
	if err != nil {
		e.t.Fatal(err)
	}
	return inst
}

func (e *env) status(id string) stackctl.Status {
	e.t.Helper()
	var st stackctl.Status
	if raw := e.get(id).Status; len(raw) > 0 {
		if err := json.Unmarshal(raw, &st); err != nil {
			e.t.Fatal(err)
		}
	}
	return st
}

func cond(st stackctl.Status, typ string) stackctl.Condition {
	for _, c := range st.Conditions {
		if c.Type == typ {
			return c
		}
	}
	return stackctl.Condition{Type: typ, Status: "Unknown"}
}

// children lists the instances labelled as the installation's, with values.
func (e *env) children(inst cairn.Instance) []cairn.Instance {
	e.t.Helper()
	sel, err := labels.Parse(hub.LabelInstallationUID + "=" + inst.ID)
	if err != nil {
		e.t.Fatal(err)
	}
	list, err := e.h.ListInstances(e.ctx, store.InstanceFilter{Labels: sel}, true)
	if err != nil {
		e.t.Fatal(err)
	}
	return list
}

func TestInstallFollowsParametersAndSetsHandEditsBack(t *testing.T) {
	e := newEnv(t)
	entry := e.addStack(repoPath("examples", "stacks", "minimal-gcp"))
	inst := e.install(entry, "small-infra", map[string]string{"foo-key": "bar-value"}, `{"region":"us-west2","projectID":"foo-project"}`)
	e.reconcile(inst.ID)

	st := e.status(inst.ID)
	if c := cond(st, "Synced"); c.Status != "True" || c.Reason != "ReconcileSuccess" {
		t.Fatalf("Synced = %+v", c)
	}
	if c := cond(st, "Ready"); c.Status != "True" {
		t.Fatalf("Ready = %+v", c)
	}
	kids := e.children(inst)
	if len(kids) < 4 || len(kids) != len(st.Resources) {
		t.Fatalf("%d children, status lists %d", len(kids), len(st.Resources))
	}
	inst = e.get(inst.ID)
	for _, k := range kids {
		if k.Labels["foo-key"] != "bar-value" || k.Labels[hub.LabelInstallationName] != "small-infra" {
			t.Errorf("child %s labels %v: the installation's labels are not propagated", k.Name, k.Labels)
		}
		if !strings.HasPrefix(k.Name, "small-infra-") {
			t.Errorf("child %s is not prefixed with the installation's name", k.Name)
		}
		if !slices.Contains(inst.Uses, k.ID) {
			t.Errorf("the installation does not use its child %s", k.Name)
		}
	}
	if st.Outputs["region"] != "us-west2" || st.Outputs["network"] != "small-infra-network" {
		t.Errorf("outputs = %v", st.Outputs)
	}
	if st.ObservedGeneration != 1 {
		t.Errorf("observedGeneration = %d, want 1", st.ObservedGeneration)
	}

	// A reconcile with nothing to change writes nothing.
	before, _ := e.h.LastSeq(e.ctx)
	e.reconcile(inst.ID)
	if after, _ := e.h.LastSeq(e.ctx); after != before {
		t.Errorf("an idle reconcile wrote %d changes", after-before)
	}

	// A parameter change reaches every child that carried the old value.
	if _, err := e.h.UpdateInstances(e.ctx, []hub.UpdateInstance{{ID: inst.ID, Value: json.RawMessage(`{"region":"europe-west9","projectID":"foo-project"}`)}}); err != nil {
		t.Fatal(err)
	}
	e.reconcile(inst.ID)
	carried := 0
	for _, k := range e.children(inst) {
		v := string(k.Latest.Value)
		if strings.Contains(v, "us-west2") {
			t.Errorf("child %s still has the old region: %s", k.Name, v)
		}
		if strings.Contains(v, "europe-west9") {
			carried++
		}
	}
	if carried < 3 {
		t.Errorf("%d children carry the new region", carried)
	}
	if st := e.status(inst.ID); st.ObservedGeneration != 2 || st.Outputs["region"] != "europe-west9" {
		t.Errorf("after the change: observedGeneration %d, outputs %v", st.ObservedGeneration, st.Outputs)
	}

	// A hand edit of a child is set back: the installation is the source
	// of truth.
	var net cairn.Instance
	for _, k := range e.children(inst) {
		if strings.HasSuffix(k.Name, "-subnetwork") {
			net = k
		}
	}
	edited := strings.ReplaceAll(string(net.Latest.Value), "europe-west9", "hand-edited")
	if _, err := e.h.UpdateInstances(e.ctx, []hub.UpdateInstance{{ID: net.ID, Value: json.RawMessage(edited), Labels: map[string]string{}}}); err != nil {
		t.Fatal(err)
	}
	e.reconcile(inst.ID)
	got := e.get(net.ID)
	if strings.Contains(string(got.Latest.Value), "hand-edited") || got.Labels[hub.LabelInstallationUID] != inst.ID {
		t.Errorf("hand edit not set back: %s %v", got.Latest.Value, got.Labels)
	}
	if evs := e.status(inst.ID).Events; len(evs) == 0 || evs[len(evs)-1].Reason != "Applied" {
		t.Errorf("events = %+v, want an Applied event last", evs)
	}
}

func TestReadinessFollowsChildStatus(t *testing.T) {
	e := newEnv(t)
	entry := e.addStack("testdata/db")
	inst := e.install(entry, "orders", nil, `{"engine":"mysql"}`)
	e.reconcile(inst.ID)
	st := e.status(inst.ID)
	ready := cond(st, "Ready")
	if ready.Status != "False" || !strings.Contains(ready.Message, "Database orders-main") || strings.Contains(ready.Message, "Bucket") {
		t.Fatalf("Ready = %+v, want False naming only the Database", ready)
	}
	if cond(st, "Synced").Status != "True" {
		t.Fatalf("Synced = %+v", cond(st, "Synced"))
	}
	var db cairn.Instance
	for _, k := range e.children(inst) {
		if k.Name == "orders-main" {
			db = k
		}
	}
	if !strings.Contains(string(db.Latest.Value), `"mysql"`) {
		t.Fatalf("Database value %s does not carry the parameter", db.Latest.Value)
	}
	// Whatever acts on the Database reports it ready in its status.
	if _, err := e.h.UpdateStatus(e.ctx, db.ID, json.RawMessage(`{"conditions":[{"type":"Ready","status":"True"}]}`), 0); err != nil {
		t.Fatal(err)
	}
	e.reconcile(inst.ID)
	if c := cond(e.status(inst.ID), "Ready"); c.Status != "True" {
		t.Fatalf("Ready after the child's status = %+v", c)
	}
	// The child's status is its own: a reconcile does not touch it.
	if got := e.get(db.ID); !strings.Contains(string(got.Status), `"Ready"`) {
		t.Errorf("the child's status was changed: %s", got.Status)
	}
}

func TestBadInputSetsConditionAndChangesNothing(t *testing.T) {
	e := newEnv(t)
	entry := e.addStack("testdata/db")

	t.Run("parameters violating the schema are refused", func(t *testing.T) {
		_, err := e.h.CreateInstances(e.ctx, hub.CreateRequest{Instances: []hub.NewInstance{{
			Name: "bad", TypeRef: entry.InstallationType, Value: json.RawMessage(`{"engine":42}`)}}})
		if !cairn.HasCode(err, cairn.CodeInvalid) || !strings.Contains(err.Error(), "engine") {
			t.Fatalf("create with engine 42: %v, want Invalid naming engine", err)
		}
	})

	t.Run("render fails", func(t *testing.T) {
		tier := e.addStack("testdata/tier")
		inst := e.install(tier, "t", nil, `{"tier":"gold"}`)
		e.reconcile(inst.ID)
		kids := e.children(inst)
		if len(kids) != 1 || !strings.Contains(string(kids[0].Latest.Value), "gold") {
			t.Fatalf("children = %v", kids)
		}
		// Without tier the stack's var has no value: the render fails,
		// the condition says why, and the child stays as it was.
		if _, err := e.h.UpdateInstances(e.ctx, []hub.UpdateInstance{{ID: inst.ID, Value: json.RawMessage(`{}`)}}); err != nil {
			t.Fatal(err)
		}
		e.reconcile(inst.ID)
		st := e.status(inst.ID)
		if c := cond(st, "Synced"); c.Status != "False" || !strings.Contains(c.Message, "TIER") || c.ObservedGeneration != 2 {
			t.Fatalf("Synced = %+v", c)
		}
		if evs := st.Events; evs[len(evs)-1].Reason != "RenderError" {
			t.Errorf("events = %+v", evs)
		}
		after := e.children(inst)
		if len(after) != 1 || after[0].Latest.ResourceVersion != 1 || string(after[0].Latest.Value) != string(kids[0].Latest.Value) {
			t.Errorf("the child changed after a failed render: %+v", after)
		}
		// Reconciling the same bad input again writes nothing.
		before, _ := e.h.LastSeq(e.ctx)
		e.reconcile(inst.ID)
		if now, _ := e.h.LastSeq(e.ctx); now != before {
			t.Errorf("a repeated failure wrote %d changes", now-before)
		}
	})

	t.Run("name collision", func(t *testing.T) {
		typ, err := e.h.KindType(e.ctx, "example.org/v1", "Bucket")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.h.CreateInstances(e.ctx, hub.CreateRequest{Instances: []hub.NewInstance{{
			Name: "clash-backups", TypeRef: typ.Ref(), Value: json.RawMessage(`{"mine":true}`)}}}); err != nil {
			t.Fatal(err)
		}
		inst := e.install(entry, "clash", nil, `{}`)
		e.reconcile(inst.ID)
		st := e.status(inst.ID)
		c := cond(st, "Synced")
		if c.Status != "False" || c.Reason != "ReconcileError" || !strings.Contains(c.Message, "clash-backups") || !strings.Contains(c.Message, "not owned") {
			t.Fatalf("Synced = %+v", c)
		}
		if n := len(e.children(inst)); n != 0 {
			t.Errorf("%d children created despite the collision", n)
		}
		if evs := st.Events; len(evs) == 0 || evs[len(evs)-1].Reason != "NameCollision" || evs[len(evs)-1].Type != "Warning" {
			t.Errorf("events = %+v", evs)
		}
		// The other instance is untouched.
		other, err := e.h.GetInstanceByName(e.ctx, typ.Path, "default", "clash-backups", true)
		if err != nil || string(other.Latest.Value) != `{"mine":true}` || other.Latest.ResourceVersion != 1 {
			t.Errorf("the colliding instance changed: %v %s", err, other.Latest.Value)
		}
	})

	t.Run("child in another namespace", func(t *testing.T) {
		// A parameter picks the namespace of the child: the installation
		// (in default) must not have it created in team-b, where its
		// creator may have no rights at all.
		dir := writeStack(t, map[string]string{
			"stack.yaml": `name: elsewhere
version: 0.1.0
kind:
  group: elsewhere.stacks.example.org
  version: v1
  names: {kind: Elsewhere}
  parameters:
    type: object
    properties:
      target: {type: string}
replacements:
- source: {kind: Elsewhere, fieldPath: spec.target}
  targets:
  - select: {kind: Bucket}
    fieldPaths: [metadata.namespace]
    options: {create: true}
`,
			"resources/kustomization.yaml": "resources: [bucket.yaml]\n",
			"resources/bucket.yaml":        "apiVersion: example.org/v1\nkind: Bucket\nmetadata: {name: b}\nspec: {size: 1}\n",
		})
		inst := e.install(e.addStack(dir), "away", nil, `{"target":"team-b"}`)
		e.reconcile(inst.ID)
		st := e.status(inst.ID)
		c := cond(st, "Synced")
		want := `Bucket b (away-b) is rendered into namespace "team-b": an installation's children live in its own namespace ("default")`
		if c.Status != "False" || !strings.Contains(c.Message, want) {
			t.Fatalf("Synced = %+v\nwant False containing %q", c, want)
		}
		if evs := st.Events; len(evs) == 0 || evs[len(evs)-1].Reason != "RenderError" {
			t.Errorf("events = %+v", evs)
		}
		if kids := e.children(inst); len(kids) != 0 {
			t.Errorf("children created: %+v", kids)
		}
		// Its own namespace renders.
		if _, err := e.h.UpdateInstances(e.ctx, []hub.UpdateInstance{{ID: inst.ID, Value: json.RawMessage(`{"target":"default"}`)}}); err != nil {
			t.Fatal(err)
		}
		e.reconcile(inst.ID)
		if c := cond(e.status(inst.ID), "Synced"); c.Status != "True" {
			t.Fatalf("Synced = %+v", c)
		}
		if kids := e.children(inst); len(kids) != 1 || kids[0].Namespace != "default" {
			t.Errorf("children = %+v", kids)
		}
	})

	t.Run("ownership cycle", func(t *testing.T) {
		// An installation that its own stack renders again under the
		// same name would own itself. The name comes from a child
		// patcher (seed 004's ChildResourcePatcher) that names the child
		// after the installation.
		self := e.addStack("testdata/self")
		inst := e.install(self, "loop", nil, `{}`)
		unprefixed := stack.ChildResourcePatcherFunc(func(_ context.Context, in stack.Installation, rs []stack.Resource) ([]stack.Resource, error) {
			for _, r := range rs {
				r.Object["metadata"].(map[string]any)["name"] = in.Name
			}
			return rs, nil
		})
		c := stackctl.New(stackctl.Config{Hub: e.h, Renderer: stack.Renderer{ChildPatchers: []stack.ChildResourcePatcher{unprefixed}}})
		if _, err := c.Reconcile(e.ctx, inst.ID); err != nil {
			t.Fatal(err)
		}
		if sc := cond(e.status(inst.ID), "Synced"); sc.Status != "False" || !strings.Contains(sc.Message, "own its own owner") {
			t.Fatalf("Synced = %+v", sc)
		}
		if n := len(e.children(inst)); n != 0 {
			t.Errorf("%d children created despite the cycle", n)
		}
	})
}

// A rendered resource of apiVersion v1 (ConfigMap, Secret, ...) is of the
// Kubernetes core group, which has no name: its Type is served as group
// core, so the child can be stored and read.
func TestCoreGroupKind(t *testing.T) {
	e := newEnv(t)
	// apiVersion v1 (ConfigMap, Secret, ...) is the Kubernetes core
	// group, which has no name; its Type is served as group core.
	typ, err := e.h.KindType(e.ctx, "v1", "ConfigMap")
	if err != nil {
		t.Fatal(err)
	}
	if typ.Group != "core" || typ.Version != "v1" || typ.Names == nil || typ.Names.Plural != "configmaps" {
		t.Fatalf("Type %+v", typ)
	}
	again, err := e.h.KindType(e.ctx, "v1", "ConfigMap")
	if err != nil || again.Ref() != typ.Ref() {
		t.Fatalf("second lookup: %+v, %v", again, err)
	}
	if _, err := e.h.CreateInstances(e.ctx, hub.CreateRequest{Instances: []hub.NewInstance{{
		Name: "settings", TypeRef: typ.Ref(), Value: json.RawMessage(`{"data":{"a":"b"}}`)}}}); err != nil {
		t.Fatal(err)
	}
}

// Kubernetes' own groups without a dot (apps, batch, autoscaling, policy,
// extensions) are served under their names, so a stack with a Deployment,
// the commonest child there is, installs; any other group still needs a
// dot, as a CRD's does.
func TestBuiltinGroupKinds(t *testing.T) {
	e := newEnv(t)
	for _, c := range []struct{ apiVersion, kind, group, plural string }{
		{"apps/v1", "Deployment", "apps", "deployments"},
		{"batch/v1", "CronJob", "batch", "cronjobs"},
		{"autoscaling/v2", "HorizontalPodAutoscaler", "autoscaling", "horizontalpodautoscalers"},
		{"policy/v1", "PodDisruptionBudget", "policy", "poddisruptionbudgets"},
		{"extensions/v1beta1", "Ingress", "extensions", "ingresses"},
	} {
		typ, err := e.h.KindType(e.ctx, c.apiVersion, c.kind)
		if err != nil {
			t.Fatalf("%s %s: %v", c.apiVersion, c.kind, err)
		}
		if typ.Group != c.group || typ.Names == nil || typ.Names.Plural != c.plural {
			t.Fatalf("%s %s: Type %+v", c.apiVersion, c.kind, typ)
		}
	}
	if _, err := e.h.KindType(e.ctx, "example/v1", "Widget"); err == nil || !strings.Contains(err.Error(), `"example" must be a DNS subdomain with at least one dot`) {
		t.Fatalf("group example: %v", err)
	}

	entry := e.addStack(writeStack(t, map[string]string{
		"stack.yaml": `name: web
version: 0.1.0
kind: {group: web.example.dev, version: v1, names: {kind: Web}, parameters: {type: object}}
`,
		"resources/kustomization.yaml": "resources: [deploy.yaml]\n",
		"resources/deploy.yaml": `apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec: {replicas: 2}
`,
	}))
	inst := e.install(entry, "shop", nil, `{}`)
	e.reconcile(inst.ID)
	if sc := cond(e.status(inst.ID), "Synced"); sc.Status != "True" {
		t.Fatalf("Synced = %+v", sc)
	}
	if kids := e.children(inst); len(kids) != 1 || kids[0].Name != "shop-web" || kids[0].TypeRef.Path != "apps.deployment" {
		t.Fatalf("children %+v", kids)
	}
}

func TestDeleteInBands(t *testing.T) {
	e := newEnv(t)
	entry := e.addStack(repoPath("examples", "stacks", "minimal-gcp"))
	inst := e.install(entry, "env", nil, `{"region":"us-west2","projectID":"foo-project"}`)
	e.reconcile(inst.ID)
	kids := e.children(inst)
	kindOf := map[string]string{}
	for _, k := range kids {
		kindOf[k.ID] = k.TypeRef.Path[strings.LastIndex(k.TypeRef.Path, ".")+1:]
	}

	// A child locked by someone outside the stack stops the deletion
	// before anything is deleted.
	if err := e.h.LockInstances(e.ctx, []string{kids[0].ID}, "someone-else"); err != nil {
		t.Fatal(err)
	}
	if err := e.h.DeleteInstance(e.ctx, inst.ID, ""); err != nil {
		t.Fatalf("delete the installation: %v", err)
	}
	if got := e.get(inst.ID); got.Annotations[hub.AnnotationDeletionRequested] == "" {
		t.Fatal("deleting an installation with children did not record the request")
	}
	if _, err := e.c.Reconcile(e.ctx, inst.ID); err == nil {
		t.Fatal("Reconcile with a locked child succeeded")
	}
	c := cond(e.status(inst.ID), "Deleting")
	if c.Status != "False" || c.Reason != "DeletionBlocked" || !strings.Contains(c.Message, kids[0].ID) || !strings.Contains(c.Message, "no child was deleted") {
		t.Fatalf("Deleting = %+v", c)
	}
	if n := len(e.children(inst)); n != len(kids) {
		t.Fatalf("%d of %d children left after a blocked deletion", n, len(kids))
	}
	if err := e.h.UnlockInstances(e.ctx, []string{kids[0].ID}, "someone-else"); err != nil {
		t.Fatal(err)
	}

	// Band by band, highest priority first.
	var order [][]string
	left := map[string]bool{}
	for _, k := range kids {
		left[k.ID] = true
	}
	for range len(kids) + 2 {
		if _, err := e.c.Reconcile(e.ctx, inst.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := e.h.GetInstance(e.ctx, inst.ID, false); cairn.HasCode(err, cairn.CodeNotFound) {
			break
		}
		var gone []string
		now := map[string]bool{}
		for _, k := range e.children(inst) {
			now[k.ID] = true
		}
		for id := range left {
			if !now[id] {
				gone = append(gone, kindOf[id])
				delete(left, id)
			}
		}
		slices.Sort(gone)
		order = append(order, gone)
	}
	if _, err := e.h.GetInstance(e.ctx, inst.ID, false); !cairn.HasCode(err, cairn.CodeNotFound) {
		t.Fatalf("the installation still exists after its children: %v", err)
	}
	want := [][]string{{"connection"}, {"globaladdress"}, {"subnetwork"}, {"cloudmemorystoreinstanceclass", "cloudsqlinstanceclass", "gkeclusterclass"}, {"network"}, {"provider"}}
	if len(order) != len(want) {
		t.Fatalf("deleted in bands %v, want %v", order, want)
	}
	for i := range want {
		if !slices.Equal(order[i], want[i]) {
			t.Fatalf("deleted in bands %v, want %v", order, want)
		}
	}
}

func TestDeleteNestedInstallations(t *testing.T) {
	e := newEnv(t)
	e.addStack("testdata/db")
	outer := e.install(e.addStack("testdata/outer"), "o", nil, `{}`)
	e.reconcile(outer.ID)
	inner := e.children(outer)
	if len(inner) != 1 || inner[0].Name != "o-inner" {
		t.Fatalf("outer's children = %v", inner)
	}
	e.reconcile(inner[0].ID)
	if n := len(e.children(inner[0])); n != 2 {
		t.Fatalf("inner has %d children, want 2", n)
	}
	if err := e.h.DeleteInstance(e.ctx, outer.ID, ""); err != nil {
		t.Fatal(err)
	}
	// Drive both installations as the controller's queue would.
	for range 20 {
		for _, id := range []string{outer.ID, inner[0].ID} {
			if _, err := e.c.Reconcile(e.ctx, id); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, id := range []string{outer.ID, inner[0].ID} {
		if _, err := e.h.GetInstance(e.ctx, id, false); !cairn.HasCode(err, cairn.CodeNotFound) {
			t.Errorf("installation %s left: %v", id, err)
		}
	}
	if left := e.children(inner[0]); len(left) != 0 {
		t.Errorf("the nested installation's children were orphaned: %v", left)
	}
}

// Every condition describes the generation the status observed: after an
// installation stops waiting for its dependencies and its render fails,
// Ready says that it could not be applied (not that it waits), and once
// the render is fixed Ready and Synced are those of the new generation.
func TestConditionsDescribeTheCurrentGeneration(t *testing.T) {
	e := newEnv(t)
	tier := e.addStack("testdata/tier")
	created, err := e.h.CreateInstances(e.ctx, hub.CreateRequest{Instances: []hub.NewInstance{{
		Name: "w", TypeRef: tier.InstallationType, Value: json.RawMessage(`{}`),
		Annotations: map[string]string{hub.AnnotationWaiting: "default/dep"}}}})
	if err != nil {
		t.Fatal(err)
	}
	id := created[0].ID
	current := func(step string) stackctl.Status {
		t.Helper()
		e.reconcile(id)
		inst := e.get(id)
		st := e.status(id)
		gen := int64(inst.Latest.ResourceVersion)
		if st.ObservedGeneration != gen {
			t.Errorf("%s: status.observedGeneration %d, want %d", step, st.ObservedGeneration, gen)
		}
		for _, c := range st.Conditions {
			if c.ObservedGeneration != gen {
				t.Errorf("%s: condition %s observedGeneration %d, want %d: %+v", step, c.Type, c.ObservedGeneration, gen, c)
			}
			if inst.Annotations[hub.AnnotationWaiting] == "" && strings.Contains(c.Message, "waiting for the dependencies") {
				t.Errorf("%s: condition %s still says it waits: %+v", step, c.Type, c)
			}
		}
		return st
	}
	if c := cond(current("waiting"), "Ready"); c.Reason != "WaitingForDependencies" {
		t.Fatalf("waiting: Ready %+v", c)
	}

	// The install is done (its dependencies ready, the annotation gone) and
	// the render fails: TIER has no value.
	inst := e.get(id)
	if _, err := e.h.UpdateInstances(e.ctx, []hub.UpdateInstance{{ID: id, IfSeq: inst.Seq, Value: json.RawMessage(`{"tier":""}`),
		Annotations: hub.WithAnnotations(inst.Annotations, map[string]string{hub.AnnotationRootID: id}, hub.AnnotationWaiting)}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.h.UpdateInstances(e.ctx, []hub.UpdateInstance{{ID: id, Value: json.RawMessage(`{}`)}}); err != nil {
		t.Fatal(err)
	}
	st := current("render error")
	if c := cond(st, "Ready"); c.Status != "False" || c.Reason != "ReconcileError" || !strings.Contains(c.Message, "TIER") {
		t.Errorf("render error: Ready %+v", c)
	}

	// Fixed.
	if _, err := e.h.UpdateInstances(e.ctx, []hub.UpdateInstance{{ID: id, Value: json.RawMessage(`{"tier":"gold"}`)}}); err != nil {
		t.Fatal(err)
	}
	st = current("fixed")
	if c := cond(st, "Synced"); c.Status != "True" {
		t.Errorf("fixed: Synced %+v", c)
	}
	if c := cond(st, "Ready"); c.Status != "True" {
		t.Errorf("fixed: Ready %+v", c)
	}
}
