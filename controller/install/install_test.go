package install_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/api/access"
	"github.com/cairn-dev/cairn/api/rest"
	"github.com/cairn-dev/cairn/auth/authn"
	"github.com/cairn-dev/cairn/auth/rbac"
	"github.com/cairn-dev/cairn/controller/install"
	stackctl "github.com/cairn-dev/cairn/controller/stack"
	"github.com/cairn-dev/cairn/deps"
	"github.com/cairn-dev/cairn/hub"
	"github.com/cairn-dev/cairn/stack"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/sqlite"
)

func repoPath(parts ...string) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(append([]string{filepath.Dir(file), "..", ".."}, parts...)...)
}

// newHub is a hub on a real SQLite file with the stack controller running,
// and the example stacks in its catalog.
func newHub(t *testing.T) (context.Context, *hub.Hub) {
	t.Helper()
	return newHubLogging(t, nil)
}

// newHubLogging is newHub whose dependency installer (install.Runner) logs
// to log.
func newHubLogging(t *testing.T, log *slog.Logger) (context.Context, *hub.Hub) {
	t.Helper()
	ctx, h, _ := newHubWith(t, log, nil)
	return ctx, h
}

// newHubWith is newHubLogging whose stack controller's Dependencies are
// wrap(the install.Runner) when wrap is set; it returns the controller.
func newHubWith(t *testing.T, log *slog.Logger, wrap func(stackctl.Dependencies) stackctl.Dependencies) (context.Context, *hub.Hub, *stackctl.Controller) {
	t.Helper()
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
	addTestStacks(t, ctx, h, repoPath("examples/stacks/flags-env"), repoPath("examples/stacks/team-portal"),
		repoPath("examples/dependencies/shared-sql-server"), repoPath("examples/dependencies/reporting"))
	cctx, cancel := context.WithCancel(context.Background())
	var d stackctl.Dependencies = install.NewRunner(cctx, &install.Service{Hub: h, Timeout: 30 * time.Second, Log: log})
	if wrap != nil {
		d = wrap(d)
	}
	c := stackctl.New(stackctl.Config{Hub: h, Identity: "ctl", LeaseDuration: 600 * time.Millisecond, Resync: time.Second,
		Dependencies: d})
	done := make(chan struct{})
	go func() { defer close(done); _ = c.Run(cctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return ctx, h, c
}

// installations lists every installation (namespace/name) of the hub.
func installations(t *testing.T, ctx context.Context, h *hub.Hub) []string {
	t.Helper()
	types, err := h.ListTypes(ctx, store.TypeFilter{Parent: hub.InstallationParent})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, ty := range types {
		insts, err := h.ListInstances(ctx, store.InstanceFilter{TypePath: ty.Path}, false)
		if err != nil {
			t.Fatal(err)
		}
		for _, in := range insts {
			out = append(out, in.Namespace+"/"+in.Name)
		}
	}
	return out
}

func nodeOf(p *deps.Plan, path string) *deps.Node {
	for _, n := range p.Nodes {
		for _, q := range n.Paths {
			if q == path {
				return n
			}
		}
	}
	return nil
}

// A shared dependency is created by the first install, reused by the
// second, kept when the first is uninstalled and refused deletion while
// the second uses it.
func TestSharedDependencyInstallReuseUninstall(t *testing.T) {
	ctx, h := newHub(t)
	svc := &install.Service{Hub: h, Timeout: 30 * time.Second}

	p, err := svc.Plan(ctx, install.Request{Namespace: "dev", Name: "p1", Stack: "team-portal", Parameters: map[string]any{"team": "data"}})
	if err != nil {
		t.Fatal(err)
	}
	if n := nodeOf(p, "flags"); n == nil || n.Action != deps.ActionInstall {
		t.Fatalf("first plan: flags node %+v, want install", n)
	}
	if got := installations(t, ctx, h); len(got) != 0 {
		t.Fatalf("a plan installed %v", got)
	}

	var mu sync.Mutex
	var events []deps.Event
	_, res, err := svc.Install(ctx, install.Request{Namespace: "dev", Name: "p1", Stack: "team-portal", Parameters: map[string]any{"team": "data"}},
		func(e deps.Event) { mu.Lock(); events = append(events, e); mu.Unlock() })
	if err != nil {
		t.Fatalf("install p1: %v (events %+v)", err, events)
	}
	if len(res.Installed) != 2 {
		t.Fatalf("installed %v, want the flags and p1", res.Installed)
	}
	root, err := h.GetInstanceByName(ctx, cairn.PathForGroupKind("examples.stacks.cairn.dev", "TeamPortal"), "dev", "p1", false)
	if err != nil {
		t.Fatal(err)
	}
	var st stackctl.Status
	_ = json.Unmarshal(root.Status, &st)
	if st.Outputs["newProjectFlag"] == nil || st.Outputs["settings"] != "p1-settings" {
		t.Errorf("p1 outputs %v: want newProjectFlag from the flags and its own settings", st.Outputs)
	}
	if st.Sharing == nil || !strings.HasPrefix(st.Sharing.InterfaceDigest, "sha256:") {
		t.Errorf("status.sharing %+v", st.Sharing)
	}
	flagsKey := nodeOf(p, "flags").Key
	flagsNS, flagsName, _ := strings.Cut(flagsKey, "/")
	flags, err := h.GetInstanceByName(ctx, cairn.PathForGroupKind("flags.stacks.cairn.dev", "FlagsEnv"), flagsNS, flagsName, false)
	if err != nil {
		t.Fatal(err)
	}
	if flags.Annotations[hub.AnnotationSharingGroup] != "dev" || flags.Annotations[hub.AnnotationSharingMode] != "group" {
		t.Errorf("flags sharing annotations %v", flags.Annotations)
	}
	if !contains(root.Uses, flags.ID) {
		t.Errorf("p1 uses %v, want the flags %s", root.Uses, flags.ID)
	}

	// Running it again changes nothing (resume of a finished install).
	_, res, err = svc.Install(ctx, install.Request{Namespace: "dev", Name: "p1", Stack: "team-portal", Parameters: map[string]any{"team": "data"}}, nil)
	if err != nil || len(res.Installed) != 0 || len(res.Skipped) != 1 || len(res.Reused) != 1 {
		t.Fatalf("install again: %+v, %v; want p1 skipped and the flags reused", res, err)
	}

	// A second portal of the same team reuses the flags.
	p2, err := svc.Plan(ctx, install.Request{Namespace: "dev", Name: "p2", Stack: "team-portal", Parameters: map[string]any{"team": "data"}})
	if err != nil {
		t.Fatal(err)
	}
	if n := nodeOf(p2, "flags"); n == nil || n.Action != deps.ActionReuse || n.Key != flagsKey {
		t.Fatalf("second plan: flags node %+v, want reuse of %s", n, flagsKey)
	}
	if _, res, err = svc.Install(ctx, install.Request{Namespace: "dev", Name: "p2", Stack: "team-portal", Parameters: map[string]any{"team": "data"}}, nil); err != nil {
		t.Fatal(err)
	}
	if len(res.Reused) != 1 || res.Reused[0] != flagsKey {
		t.Errorf("second install reused %v", res.Reused)
	}

	// Uninstall p1: the shared flags stay; deleting them is refused while
	// p2 uses them.
	if err := h.DeleteInstance(ctx, root.ID, ""); err != nil {
		t.Fatal(err)
	}
	waitGone(t, ctx, h, root.ID)
	if _, err := h.GetInstance(ctx, flags.ID, false); err != nil {
		t.Fatalf("the shared flags are gone after p1's uninstall: %v", err)
	}
	if err := h.DeleteInstance(ctx, flags.ID, ""); !cairn.HasCode(err, cairn.CodeUsedBy) {
		t.Fatalf("deleting the flags p2 uses: %v, want used by", err)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func waitGone(t *testing.T, ctx context.Context, h *hub.Hub, id string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, err := h.GetInstance(ctx, id, false)
		if cairn.HasCode(err, cairn.CodeNotFound) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not deleted: %v", id, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// The interface-only dependency: with no SQL Server registered the plan
// fails naming the interface and nothing is installed; an unmanaged
// shared-sql-server installation (applied as any installation is) then
// satisfies it through the output's $id, under another name.
func TestInterfaceOnlyDependencyAndUnmanagedResource(t *testing.T) {
	ctx, h := newHub(t)
	svc := &install.Service{Hub: h, Timeout: 30 * time.Second}
	req := install.Request{Namespace: "dev", Name: "reports", Stack: "reporting", Parameters: map[string]any{"team": "data"}}

	_, _, err := svc.Install(ctx, req, nil)
	if err == nil || !strings.Contains(err.Error(), "satisfies the interface (output $id https://cairn.dev/interfaces#sql-server.connection-string)") {
		t.Fatalf("install without a SQL Server: %v", err)
	}
	if got := installations(t, ctx, h); len(got) != 0 {
		t.Fatalf("a failed install left %v", got)
	}

	// Register the existing server.
	typ := cairn.TypeRef{Path: cairn.PathForGroupKind("examples.stacks.cairn.dev", "SharedSQLServer"), Revision: "0.1.0"}
	e, err := h.GetStack(ctx, "shared-sql-server", "")
	if err != nil {
		t.Fatal(err)
	}
	typ = e.InstallationType
	if _, err := h.CreateInstances(ctx, hub.CreateRequest{Instances: []hub.NewInstance{{Namespace: "dev", Name: "office-sql", TypeRef: typ,
		Value: json.RawMessage(`{"connectionString":"Server=closet;Database=reports"}`)}}}); err != nil {
		t.Fatal(err)
	}
	// The stack controller sets its status.sharing and outputs.
	deadline := time.Now().Add(20 * time.Second)
	for {
		inst, err := h.GetInstanceByName(ctx, typ.Path, "dev", "office-sql", false)
		if err != nil {
			t.Fatal(err)
		}
		var st stackctl.Status
		_ = json.Unmarshal(inst.Status, &st)
		if st.Sharing != nil && st.Outputs["connection-string"] != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("office-sql status %s", inst.Status)
		}
		time.Sleep(50 * time.Millisecond)
	}

	p, res, err := svc.Install(ctx, req, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n := nodeOf(p, "sqlserver"); n == nil || n.Action != deps.ActionReuse || n.Key != "dev/office-sql" {
		t.Fatalf("sqlserver node %+v", n)
	}
	if !contains(res.Reused, "dev/office-sql") {
		t.Errorf("reused %v", res.Reused)
	}
	root, err := h.GetInstanceByName(ctx, cairn.PathForGroupKind("examples.stacks.cairn.dev", "Reporting"), "dev", "reports", false)
	if err != nil {
		t.Fatal(err)
	}
	var st stackctl.Status
	_ = json.Unmarshal(root.Status, &st)
	if st.Outputs["database"] != "Server=closet;Database=reports" {
		t.Errorf("reports outputs %v: want the server's connection string as database", st.Outputs)
	}
}

// A failure mid-install stops the run naming the installation that
// failed; what completed stays, and running the install again resumes.
func TestFailureAndResume(t *testing.T) {
	ctx, h := newHub(t)
	svc := &install.Service{Hub: h, Timeout: 30 * time.Second}
	req := install.Request{Namespace: "dev", Name: "p1", Stack: "team-portal", Parameters: map[string]any{"team": "ops"}}
	p, err := svc.Plan(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	flags := nodeOf(p, "flags")
	// An instance not owned by the flags installation holds the name of
	// one of its children: the stack controller cannot apply it.
	ft, err := h.KindType(ctx, "flipt.io/v1alpha1", "Flag")
	if err != nil {
		t.Fatal(err)
	}
	blocker, err := h.CreateInstances(ctx, hub.CreateRequest{Instances: []hub.NewInstance{{Namespace: "dev", Name: flags.Name + "-new-project", TypeRef: ft.Ref(),
		Value: json.RawMessage(`{"enabled":true}`)}}})
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = svc.Install(ctx, req, nil)
	var ne *deps.NodeError
	if !errors.As(err, &ne) || ne.Node != flags.Key || !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("install with a blocked dependency: %v", err)
	}
	root, err := h.GetInstanceByName(ctx, cairn.PathForGroupKind("examples.stacks.cairn.dev", "TeamPortal"), "dev", "p1", false)
	if err != nil {
		t.Fatalf("the root created before its dependencies: %v", err)
	}
	if root.Annotations[hub.AnnotationWaiting] == "" {
		t.Errorf("the root is not waiting: %v", root.Annotations)
	}

	// Remove the blocker and run again: it resumes, with the same root.
	// (The flags installation exists now, so the plan reuses it and waits
	// for it; the controller's resync, a second here, applies it once the
	// blocker is gone, as nothing links the blocker to it.)
	if err := h.DeleteInstance(ctx, blocker[0].ID, ""); err != nil {
		t.Fatal(err)
	}
	_, res, err := svc.Install(ctx, req, nil)
	if err != nil {
		t.Fatalf("blocker %s: %v", blocker[0].ID, err)
	}
	if !contains(res.Installed, "dev/p1") {
		t.Errorf("resumed run: %+v", res)
	}
	again, err := h.GetInstance(ctx, root.ID, false)
	if err != nil || again.Annotations[hub.AnnotationWaiting] != "" || again.Annotations[hub.AnnotationRootID] != root.ID {
		t.Fatalf("root after the resumed run: %v %v", again.Annotations, err)
	}
}

// An installation applied directly (as kubectl apply does) whose stack
// has dependencies: the controller installs them first, then renders it
// with their outputs, and it uses them.
func TestAppliedInstallationGetsItsDependencies(t *testing.T) {
	ctx, h := newHub(t)
	e, err := h.GetStack(ctx, "team-portal", "")
	if err != nil {
		t.Fatal(err)
	}
	created, err := h.CreateInstances(ctx, hub.CreateRequest{Instances: []hub.NewInstance{{Namespace: "dev", Name: "applied", TypeRef: e.InstallationType,
		Value: json.RawMessage(`{"team":"qa"}`)}}})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	var st stackctl.Status
	var inst cairn.Instance
	for {
		inst, err = h.GetInstance(ctx, created[0].ID, false)
		if err != nil {
			t.Fatal(err)
		}
		st = stackctl.Status{}
		_ = json.Unmarshal(inst.Status, &st)
		ready := false
		for _, c := range st.Conditions {
			if c.Type == "Ready" && c.Status == "True" {
				ready = true
			}
		}
		if ready && st.Outputs["newProjectFlag"] != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("applied installation: %s", inst.Status)
		}
		time.Sleep(50 * time.Millisecond)
	}
	flags, err := h.ListInstances(ctx, store.InstanceFilter{TypePath: cairn.PathForGroupKind("flags.stacks.cairn.dev", "FlagsEnv"), Namespace: "dev"}, false)
	if err != nil || len(flags) != 1 {
		t.Fatalf("flags: %v %v", flags, err)
	}
	if !contains(inst.Uses, flags[0].ID) {
		t.Errorf("the applied installation uses %v, not its flags %s", inst.Uses, flags[0].ID)
	}
}

// An exclusive dependency (sharing mode none) is its root's alone: a
// second install gets its own, and it is deleted with its root.
func TestExclusiveDependencyDeletedWithRoot(t *testing.T) {
	ctx, h := newHub(t)
	s, err := stack.Load(ctx, "testdata/exclusive")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := s.Archive()
	if _, _, err := h.AddStack(ctx, b); err != nil {
		t.Fatal(err)
	}
	svc := &install.Service{Hub: h, Timeout: 30 * time.Second}
	for _, n := range []string{"a", "b"} {
		if _, res, err := svc.Install(ctx, install.Request{Namespace: "dev", Name: n, Stack: "solo"}, nil); err != nil || len(res.Installed) != 2 {
			t.Fatalf("install %s: %+v %v", n, res, err)
		}
	}
	flagsPath := cairn.PathForGroupKind("flags.stacks.cairn.dev", "FlagsEnv")
	if _, err := h.GetInstanceByName(ctx, flagsPath, "dev", "a-flags", false); err != nil {
		t.Fatal(err)
	}
	a, err := h.GetInstanceByName(ctx, cairn.PathForGroupKind("test.stacks.cairn.dev", "Solo"), "dev", "a", false)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.DeleteInstance(ctx, a.ID, ""); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, err := h.GetInstanceByName(ctx, flagsPath, "dev", "a-flags", false)
		if cairn.HasCode(err, cairn.CodeNotFound) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a-flags after a's deletion: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := h.GetInstanceByName(ctx, flagsPath, "dev", "b-flags", false); err != nil {
		t.Fatalf("b's own flags: %v", err)
	}
}

// An install stopped after its exclusive dependency was created, before
// the root got its uses edges (the CLI killed, the client gone), leaves
// the root waiting; deleting that root deletes the exclusive dependency
// too, as it does for a completed install, rather than orphaning it.
func TestInterruptedInstallRootDeletedWithExclusiveDependency(t *testing.T) {
	ctx, h := newHub(t)
	s, err := stack.Load(ctx, "testdata/exclusive")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := s.Archive()
	if _, _, err := h.AddStack(ctx, b); err != nil {
		t.Fatal(err)
	}
	svc := &install.Service{Hub: h, Timeout: 30 * time.Second}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	_, _, err = svc.Install(runCtx, install.Request{Namespace: "dev", Name: "a", Stack: "solo"}, func(ev deps.Event) {
		if ev.Node == "dev/a-flags" && ev.Phase == deps.PhaseInstalled {
			stop() // interrupted between the dependency and the root
		}
	})
	if err == nil {
		t.Fatal("the interrupted install succeeded")
	}
	flagsPath := cairn.PathForGroupKind("flags.stacks.cairn.dev", "FlagsEnv")
	if _, err := h.GetInstanceByName(ctx, flagsPath, "dev", "a-flags", false); err != nil {
		t.Fatalf("the exclusive dependency after the interrupted install: %v", err)
	}
	a, err := h.GetInstanceByName(ctx, cairn.PathForGroupKind("test.stacks.cairn.dev", "Solo"), "dev", "a", false)
	if err != nil {
		t.Fatal(err)
	}
	if a.Annotations[hub.AnnotationWaiting] == "" {
		t.Fatalf("the root is not waiting any more: %v", a.Annotations)
	}
	if err := h.DeleteInstance(ctx, a.ID, ""); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, err := h.GetInstanceByName(ctx, flagsPath, "dev", "a-flags", false)
		if cairn.HasCode(err, cairn.CodeNotFound) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a-flags after the deletion of its interrupted root: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// The plan of a root that does not exist yet cannot know the names that
// ${installation.root.id} gives its dependencies, and says so; once the
// root exists, its plan names exactly what the install created.
func TestPlanOfANewRootReadingTheRootID(t *testing.T) {
	ctx, h := newHub(t)
	s, err := stack.Load(ctx, "testdata/perroot")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := s.Archive()
	if _, _, err := h.AddStack(ctx, b); err != nil {
		t.Fatal(err)
	}
	svc := &install.Service{Hub: h, Timeout: 30 * time.Second}
	req := install.Request{Namespace: "dev", Name: "r1", Stack: "perroot"}
	before, err := svc.Plan(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if !before.RootIDPending || nodeOf(before, "flags").Sharing.Group != install.RootIDStandIn {
		t.Fatalf("plan of a new root: pending %v, flags %+v", before.RootIDPending, nodeOf(before, "flags"))
	}
	_, res, err := svc.Install(ctx, req, nil)
	if err != nil {
		t.Fatal(err)
	}
	after, err := svc.Plan(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	flags := nodeOf(after, "flags")
	if after.RootIDPending || !contains(res.Installed, flags.Key) || flags.Sharing.Group != after.RootID {
		t.Fatalf("plan after the install: pending %v, flags %s (group %q), installed %v", after.RootIDPending, flags.Key, flags.Sharing.Group, res.Installed)
	}
}

// Terraform outputs reach a dependent stack through the unmanaged-resource
// kind: an app-network installation reads the outputs of a Terraform state
// (stacks.cairn.dev/parameters-from) and exposes one as its output; the
// web-app stack's dependency on app-network reuses it and wires that output
// (examples/terraform).
func TestTerraformOutputsThroughADependency(t *testing.T) {
	ctx, h := newHub(t)
	if err := h.RegisterTerraformTypes(ctx); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{"examples/terraform/app-network", "examples/terraform/web-app"} {
		s, err := stack.Load(ctx, repoPath(dir))
		if err != nil {
			t.Fatal(err)
		}
		b, err := s.Archive()
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := h.AddStack(ctx, b); err != nil {
			t.Fatalf("add %s: %v", dir, err)
		}
	}
	doc := `{"version":4,"serial":1,"lineage":"L","outputs":{"vpc_cidr":{"value":"10.4.0.0/16","type":"string"},` +
		`"subnets":{"value":["10.4.1.0/24"],"type":["tuple",["string"]]}},"resources":[]}`
	if _, err := h.PutTerraformState(ctx, "dev", "network", "", json.RawMessage(doc)); err != nil {
		t.Fatal(err)
	}
	net, err := h.GetStack(ctx, "app-network", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.CreateInstances(ctx, hub.CreateRequest{Instances: []hub.NewInstance{{Namespace: "dev", Name: "shop", TypeRef: net.InstallationType,
		Annotations: map[string]string{hub.AnnotationParametersFrom: "vpcCIDR: {terraformOutput: network-vpc-cidr}\nsubnets: {terraformOutput: network-subnets}"},
		Value:       json.RawMessage(`{}`)}}}); err != nil {
		t.Fatal(err)
	}
	// The stack controller renders it and publishes its outputs.
	deadline := time.Now().Add(20 * time.Second)
	for {
		inst, err := h.GetInstanceByName(ctx, net.InstallationType.Path, "dev", "shop", false)
		if err != nil {
			t.Fatal(err)
		}
		var st stackctl.Status
		_ = json.Unmarshal(inst.Status, &st)
		if st.Sharing != nil && st.Outputs["vpcCIDR"] == "10.4.0.0/16" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("shop status %s", inst.Status)
		}
		time.Sleep(50 * time.Millisecond)
	}

	svc := &install.Service{Hub: h, Timeout: 30 * time.Second}
	p, _, err := svc.Install(ctx, install.Request{Namespace: "dev", Name: "web", Stack: "web-app"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n := nodeOf(p, "infra"); n == nil || n.Action != deps.ActionReuse || n.Key != "dev/shop" {
		t.Fatalf("infra node %+v: want the installation reading the state reused", n)
	}
	deadline = time.Now().Add(20 * time.Second)
	for {
		root, err := h.GetInstanceByName(ctx, cairn.PathForGroupKind("examples.stacks.cairn.dev", "WebApp"), "dev", "web", false)
		if err != nil {
			t.Fatal(err)
		}
		var st stackctl.Status
		_ = json.Unmarshal(root.Status, &st)
		if st.Outputs["allowFrom"] == "10.4.0.0/16" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("web outputs %v: want allowFrom, the state's vpc_cidr", st.Outputs)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func addTestStacks(t *testing.T, ctx context.Context, h *hub.Hub, dirs ...string) {
	t.Helper()
	for _, dir := range dirs {
		s, err := stack.Load(ctx, dir)
		if err != nil {
			t.Fatal(err)
		}
		b, err := s.Archive()
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := h.AddStack(ctx, b); err != nil {
			t.Fatalf("add %s: %v", dir, err)
		}
	}
}

// waitFor polls get until it returns an instance, or fails the test.
func waitFor(t *testing.T, what string, get func() (cairn.Instance, error)) cairn.Instance {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		inst, err := get()
		if err == nil {
			return inst
		}
		if !cairn.HasCode(err, cairn.CodeNotFound) || time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A root installation deleted while its install waits for a dependency
// stays deleted: the install fails and names it rather than create it
// again (the user's delete wins), whether the install was asked for (cairn
// install) or started by the controller for an applied installation.
func TestRootDeletedDuringInstallStaysDeleted(t *testing.T) {
	for _, applied := range []bool{false, true} {
		t.Run(map[bool]string{false: "install", true: "applied"}[applied], func(t *testing.T) {
			// The installer of an applied installation reports its
			// failure in the log only.
			warned := make(chan string, 10)
			ctx, h := newHubLogging(t, slog.New(chanHandler(warned)))
			addTestStacks(t, ctx, h, "testdata/gated", "testdata/waits")
			waitsPath := cairn.PathForGroupKind("test.stacks.cairn.dev", "Waits")
			svc := &install.Service{Hub: h, Timeout: 30 * time.Second}
			req := install.Request{Namespace: "dev", Name: "w1", Stack: "waits"}
			done := make(chan error, 1)
			if applied {
				e, err := h.GetStack(ctx, "waits", "")
				if err != nil {
					t.Fatal(err)
				}
				if _, err := h.CreateInstances(ctx, hub.CreateRequest{Instances: []hub.NewInstance{{Namespace: "dev", Name: "w1",
					TypeRef: e.InstallationType, Value: json.RawMessage(`{}`)}}}); err != nil {
					t.Fatal(err)
				}
				close(done)
			} else {
				go func() { _, _, err := svc.Install(ctx, req, nil); done <- err }()
			}
			p, err := svc.Plan(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			gate := nodeOf(p, "gate")
			gateTypePath := cairn.PathForGroupKind("test.cairn.dev", "Gate")
			child := waitFor(t, "the gate's child", func() (cairn.Instance, error) {
				return h.GetInstanceByName(ctx, gateTypePath, "dev", gate.Name+"-gate", false)
			})
			root := waitFor(t, "the root", func() (cairn.Instance, error) { return h.GetInstanceByName(ctx, waitsPath, "dev", "w1", false) })
			if err := h.DeleteInstance(ctx, root.ID, ""); err != nil {
				t.Fatalf("delete the waiting root: %v", err)
			}
			if _, err := h.UpdateStatus(ctx, child.ID, json.RawMessage(`{"conditions":[{"type":"Ready","status":"True"}]}`), 0); err != nil {
				t.Fatal(err)
			}
			if err := <-done; !applied && (err == nil || !strings.Contains(err.Error(), "dev/w1 was deleted")) {
				t.Errorf("install whose root was deleted: %v, want an error naming the deleted root", err)
			}
			if applied {
				select {
				case msg := <-warned:
					if !strings.Contains(msg, "dev/w1 was deleted") {
						t.Errorf("the installer's failure: %s, want it to name the deleted root", msg)
					}
				case <-time.After(20 * time.Second):
					t.Fatal("the installer of the applied installation did not finish")
				}
			}
			if got, err := h.GetInstanceByName(ctx, waitsPath, "dev", "w1", false); !cairn.HasCode(err, cairn.CodeNotFound) {
				t.Fatalf("the deleted root is back: %s %v", got.ID, err)
			}
		})
	}
}

// chanHandler is a slog handler sending each warning's message and
// attributes to c.
type chanHandler chan string

func (c chanHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (c chanHandler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool { fmt.Fprintf(&b, " %s=%v", a.Key, a.Value); return true })
	select {
	case c <- b.String():
	default: // the test reads the first ones only
	}
	return nil
}
func (c chanHandler) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c chanHandler) WithGroup(string) slog.Handler      { return c }

// Parameters the root stack's schema refuses fail the plan, as cairn render
// does, naming the parameter and the kind: cairn plan does not pass what
// cairn install then refuses, and nothing is created.
func TestInvalidRootParameters(t *testing.T) {
	ctx, h := newHub(t)
	svc := &install.Service{Hub: h, Timeout: 30 * time.Second}
	req := install.Request{Namespace: "dev", Name: "p1", Stack: "team-portal", Parameters: map[string]any{"team": ""}}
	const want = "invalid parameters of TeamPortal: spec/team"
	if _, err := svc.Plan(ctx, req); !cairn.HasCode(err, cairn.CodeInvalid) || !strings.Contains(err.Error(), want) {
		t.Errorf("plan: %v, want an invalid error with %q", err, want)
	}
	if _, _, err := svc.Install(ctx, req, nil); !cairn.HasCode(err, cairn.CodeInvalid) || !strings.Contains(err.Error(), want) {
		t.Errorf("install: %v, want an invalid error with %q", err, want)
	}
	if got := installations(t, ctx, h); len(got) != 0 {
		t.Errorf("installed %v", got)
	}
}

// Installing again with changed parameters moves the installation onto the
// dependency the new plan resolves: its uses edge to the one it used before
// goes (so that one can be deleted, and describe and trace show the graph
// as it is), its children and uses of other kinds stay.
func TestReinstallWithChangedParametersMovesUses(t *testing.T) {
	ctx, h := newHub(t)
	svc := &install.Service{Hub: h, Timeout: 30 * time.Second}
	flagsOf := func(team string) cairn.Instance {
		t.Helper()
		p, err := svc.Plan(ctx, install.Request{Namespace: "dev", Name: "p1", Stack: "team-portal", Parameters: map[string]any{"team": team}})
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := svc.Install(ctx, install.Request{Namespace: "dev", Name: "p1", Stack: "team-portal", Parameters: map[string]any{"team": team}}, nil); err != nil {
			t.Fatalf("install p1 for team %s: %v", team, err)
		}
		ns, name, _ := strings.Cut(nodeOf(p, "flags").Key, "/")
		f, err := h.GetInstanceByName(ctx, cairn.PathForGroupKind("flags.stacks.cairn.dev", "FlagsEnv"), ns, name, false)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	portal := func() cairn.Instance {
		t.Helper()
		root, err := h.GetInstanceByName(ctx, cairn.PathForGroupKind("examples.stacks.cairn.dev", "TeamPortal"), "dev", "p1", false)
		if err != nil {
			t.Fatal(err)
		}
		return root
	}
	web := flagsOf("web")
	before := portal()
	kids, err := h.Children(ctx, before)
	if err != nil || len(kids) != 1 {
		t.Fatalf("p1's children %v, %v", kids, err)
	}
	data := flagsOf("data")
	if data.ID == web.ID {
		t.Fatal("team data got team web's flags")
	}
	after := portal()
	if contains(after.Uses, web.ID) || !contains(after.Uses, data.ID) {
		t.Fatalf("p1 uses %v after moving to team data: want %s (data's flags), not %s (web's)", after.Uses, data.ID, web.ID)
	}
	for _, id := range before.Uses {
		if id != web.ID && !contains(after.Uses, id) {
			t.Fatalf("p1 lost its uses edge to %s (not a dependency)", id)
		}
	}
	// Nothing uses web's flags now: they can be deleted.
	if err := h.DeleteInstance(ctx, web.ID, ""); err != nil {
		t.Fatalf("deleting the flags p1 no longer uses: %v", err)
	}
}

// ensureCounter counts the stack controller's Dependencies.Ensure calls
// per installation id.
type ensureCounter struct {
	next stackctl.Dependencies
	mu   sync.Mutex
	n    map[string]int
}

func (e *ensureCounter) Ensure(ctx context.Context, inst cairn.Instance, s hub.StackEntry) (string, bool) {
	e.mu.Lock()
	e.n[inst.ID]++
	e.mu.Unlock()
	return e.next.Ensure(ctx, inst, s)
}

func (e *ensureCounter) count(id string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.n[id]
}

// An installation applied directly, then its spec changed (kubectl patch
// spec.team): the controller resolves and installs its dependencies again
// for the new spec: the new team's flags are installed and used, the edge
// to the old team's goes, the outputs are the new flags', and the
// conditions say so for the new generation. An unchanged installation is
// not handed to the installer again on a reconcile or a resync.
func TestAppliedInstallationSpecChangeReinstallsDependencies(t *testing.T) {
	counter := &ensureCounter{n: map[string]int{}}
	ctx, h, c := newHubWith(t, nil, func(d stackctl.Dependencies) stackctl.Dependencies { counter.next = d; return counter })
	e, err := h.GetStack(ctx, "team-portal", "")
	if err != nil {
		t.Fatal(err)
	}
	created, err := h.CreateInstances(ctx, hub.CreateRequest{Instances: []hub.NewInstance{{Namespace: "dev", Name: "applied", TypeRef: e.InstallationType,
		Value: json.RawMessage(`{"team":"kteam"}`)}}})
	if err != nil {
		t.Fatal(err)
	}
	id := created[0].ID
	flagsOf := func(team string) cairn.Instance { t.Helper(); return flagsEnvOf(t, ctx, h, "dev", team) }
	// settled waits until the installation is Ready and its dependencies
	// are for team, at its latest resource version.
	settled := func(team string) (cairn.Instance, stackctl.Status) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			inst, err := h.GetInstance(ctx, id, false)
			if err != nil {
				t.Fatal(err)
			}
			var st stackctl.Status
			_ = json.Unmarshal(inst.Status, &st)
			gen := int64(inst.Latest.ResourceVersion)
			ready, depsOK := false, false
			for _, c := range st.Conditions {
				ready = ready || c.Type == "Ready" && c.Status == "True" && c.ObservedGeneration >= gen
				depsOK = depsOK || c.Type == "Dependencies" && c.Status == "True"
			}
			f := flagsOf(team)
			if ready && depsOK && f.ID != "" && contains(inst.Uses, f.ID) && st.Outputs["newProjectFlag"] == f.Name+"-new-project" {
				return inst, st
			}
			if time.Now().After(deadline) {
				all, _ := h.ListInstances(ctx, store.InstanceFilter{TypePath: cairn.PathForGroupKind("flags.stacks.cairn.dev", "FlagsEnv"), Namespace: "dev"}, true)
				var fl []string
				for _, f := range all {
					fl = append(fl, fmt.Sprintf("%s %s %s %s", f.ID, f.Name, f.Latest.Value, f.Status))
				}
				t.Fatalf("installation for team %s: uses %v, flags %s, status %s; every flags installation: %s", team, inst.Uses, f.ID, inst.Status, strings.Join(fl, "\n"))
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	_, _ = settled("kteam")
	old := flagsOf("kteam")

	// Settled and unchanged: reconciling again (as every resync does)
	// never hands it to the installer again.
	n := counter.count(id)
	for range 3 {
		if _, err := c.Reconcile(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	if got := counter.count(id); got != n {
		t.Fatalf("an unchanged installation was handed to the installer %d more times", got-n)
	}

	// kubectl patch: spec.team kteam -> other.
	cur, err := h.GetInstance(ctx, id, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.UpdateInstances(ctx, []hub.UpdateInstance{{ID: id, IfSeq: cur.Seq, Value: json.RawMessage(`{"team":"other"}`)}}); err != nil {
		t.Fatal(err)
	}
	inst, st := settled("other")
	if inst, err = h.GetInstance(ctx, id, true); err != nil {
		t.Fatal(err)
	}
	if contains(inst.Uses, old.ID) {
		t.Errorf("after the change it still uses team kteam's flags %s: %v", old.ID, inst.Uses)
	}
	var spec map[string]any
	_ = json.Unmarshal(inst.Latest.Value, &spec)
	if spec["team"] != "other" {
		t.Errorf("spec after the install %v: want the team patched in", spec)
	}
	for _, c := range st.Conditions {
		if c.Type == "Synced" && c.Status != "True" {
			t.Errorf("Synced %+v", c)
		}
	}
	// The old flags are shared (sharing group dev): kept, and deletable
	// now that nothing uses them.
	if err := h.DeleteInstance(ctx, old.ID, ""); err != nil {
		t.Errorf("deleting team kteam's flags nothing uses now: %v", err)
	}

	// Settled again: no more installs.
	n = counter.count(id)
	for range 3 {
		if _, err := c.Reconcile(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	if got := counter.count(id); got != n {
		t.Fatalf("the changed installation, settled, was handed to the installer %d more times", got-n)
	}
}

// An exclusive dependency (sharing mode none) that an install no longer
// resolves to (here: the user gives an installation of their own with
// --dependency) is deleted once its dependent is ready without it: no
// other installation may ever use it. A shared one stays (above).
func TestDroppedExclusiveDependencyDeleted(t *testing.T) {
	ctx, h := newHub(t)
	addTestStacks(t, ctx, h, "testdata/exclusive")
	svc := &install.Service{Hub: h, Timeout: 30 * time.Second}
	if _, res, err := svc.Install(ctx, install.Request{Namespace: "dev", Name: "a", Stack: "solo"}, nil); err != nil || len(res.Installed) != 2 {
		t.Fatalf("install a: %+v %v", res, err)
	}
	flagsPath := cairn.PathForGroupKind("flags.stacks.cairn.dev", "FlagsEnv")
	own, err := h.GetInstanceByName(ctx, flagsPath, "dev", "a-flags", false)
	if err != nil {
		t.Fatal(err)
	}
	fe, err := h.GetStack(ctx, "flags-env", "")
	if err != nil {
		t.Fatal(err)
	}
	mine, err := h.CreateInstances(ctx, hub.CreateRequest{Instances: []hub.NewInstance{{Namespace: "dev", Name: "mine", TypeRef: fe.InstallationType,
		Value: json.RawMessage(`{"team":"mine"}`)}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, res, err := svc.Install(ctx, install.Request{Namespace: "dev", Name: "a", Stack: "solo", Dependencies: []string{"flags=FlagsEnv/mine"}}, nil); err != nil || !contains(res.Reused, "dev/mine") {
		t.Fatalf("install a with its flags given: %+v %v", res, err)
	}
	a, err := h.GetInstanceByName(ctx, cairn.PathForGroupKind("test.stacks.cairn.dev", "Solo"), "dev", "a", false)
	if err != nil {
		t.Fatal(err)
	}
	if !contains(a.Uses, mine[0].ID) || contains(a.Uses, own.ID) {
		t.Fatalf("a uses %v: want %s (given), not %s (its former exclusive flags)", a.Uses, mine[0].ID, own.ID)
	}
	// Deleted as any installation with children is: by the controller.
	waitGone(t, ctx, h, own.ID)
}

// A chain chain -> team-portal -> flags-env: when the spec of the
// intermediate installation (the portal) changes (kubectl patch of its
// team), its own dependencies are resolved and installed again for it, as
// for a root: the new team's flags are installed and used, the edge to
// the old team's goes, its outputs are the new flags', and it stays what
// its install made it (exclusive to the chain, of the chain's root).
func TestIntermediateSpecChangeReinstallsItsDependencies(t *testing.T) {
	counter := &ensureCounter{n: map[string]int{}}
	ctx, h, c := newHubWith(t, nil, func(d stackctl.Dependencies) stackctl.Dependencies { counter.next = d; return counter })
	addTestStacks(t, ctx, h, "testdata/chain")
	svc := &install.Service{Hub: h, Timeout: 30 * time.Second}
	if _, res, err := svc.Install(ctx, install.Request{Namespace: "dev", Name: "a", Stack: "chain", Parameters: map[string]any{"team": "kteam"}}, nil); err != nil || len(res.Installed) != 3 {
		t.Fatalf("install a: %+v %v", res, err)
	}
	portalPath := cairn.PathForGroupKind("examples.stacks.cairn.dev", "TeamPortal")
	a, err := h.GetInstanceByName(ctx, cairn.PathForGroupKind("test.stacks.cairn.dev", "Chain"), "dev", "a", false)
	if err != nil {
		t.Fatal(err)
	}
	b, err := h.GetInstanceByName(ctx, portalPath, "dev", "a-portal", true)
	if err != nil {
		t.Fatal(err)
	}
	flagsOf := func(team string) cairn.Instance { t.Helper(); return flagsEnvOf(t, ctx, h, "dev", team) }
	old := flagsOf("kteam")
	if old.ID == "" || !contains(b.Uses, old.ID) {
		t.Fatalf("a-portal uses %v: want team kteam's flags %s", b.Uses, old.ID)
	}
	// Settled: reconciling it again never hands it to the installer.
	n := counter.count(b.ID)
	if _, err := c.Reconcile(ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	if got := counter.count(b.ID); got != n {
		t.Fatalf("the unchanged intermediate installation was handed to the installer %d times", got-n)
	}

	// kubectl patch teamportal a-portal: spec.team kteam -> other.
	if _, err := h.UpdateInstances(ctx, []hub.UpdateInstance{{ID: b.ID, IfSeq: b.Seq, Value: json.RawMessage(`{"team":"other"}`)}}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		cur, err := h.GetInstance(ctx, b.ID, true)
		if err != nil {
			t.Fatal(err)
		}
		var st stackctl.Status
		_ = json.Unmarshal(cur.Status, &st)
		ready := false
		for _, c := range st.Conditions {
			ready = ready || c.Type == "Ready" && c.Status == "True" && c.ObservedGeneration >= int64(cur.Latest.ResourceVersion)
		}
		f := flagsOf("other")
		if ready && f.ID != "" && contains(cur.Uses, f.ID) && st.Outputs["newProjectFlag"] == f.Name+"-new-project" {
			if contains(cur.Uses, old.ID) {
				t.Errorf("a-portal still uses team kteam's flags: %v", cur.Uses)
			}
			if hub.SharingOf(cur).Mode != deps.SharingNone || cur.Annotations[hub.AnnotationRootID] != a.ID {
				t.Errorf("a-portal's sharing %+v, root %s: want still exclusive to the chain's root %s", hub.SharingOf(cur), cur.Annotations[hub.AnnotationRootID], a.ID)
			}
			var spec map[string]any
			_ = json.Unmarshal(cur.Latest.Value, &spec)
			if spec["team"] != "other" {
				t.Errorf("a-portal's spec %v: want the patched team", spec)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a-portal after the patch: uses %v, other's flags %q, status %s", cur.Uses, f.ID, cur.Status)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The old flags are shared: kept, deletable now that nothing uses them.
	if err := h.DeleteInstance(ctx, old.ID, ""); err != nil {
		t.Errorf("deleting team kteam's flags nothing uses now: %v", err)
	}
}

// cairn plan says, per node, what cairn install then does: an existing
// root installed with the same inputs is skipped, one whose parameters
// changed is updated (the plan names the children that change), a new
// dependency is installed, an existing shared one reused.
func TestPlanSaysWhatInstallDoes(t *testing.T) {
	ctx, h := newHub(t)
	svc := &install.Service{Hub: h, Timeout: 30 * time.Second}
	steps := []struct {
		name     string
		params   map[string]any
		want     map[string]deps.Change
		children []string // of the root, in the plan
	}{
		{"new", map[string]any{"team": "web"}, map[string]deps.Change{"dev/web-portal": deps.ChangeInstall, "dev/flags-env-": deps.ChangeInstall}, nil},
		{"again", map[string]any{"team": "web"}, map[string]deps.Change{"dev/web-portal": deps.ChangeSkip, "dev/flags-env-": deps.ChangeReuse}, nil},
		{"title", map[string]any{"team": "web", "title": "Web"}, map[string]deps.Change{"dev/web-portal": deps.ChangeUpdate, "dev/flags-env-": deps.ChangeReuse},
			[]string{"update PortalSettings dev/web-portal-settings"}},
		{"team", map[string]any{"team": "data", "title": "Web"}, map[string]deps.Change{"dev/web-portal": deps.ChangeUpdate, "dev/flags-env-": deps.ChangeInstall}, nil},
	}
	for _, st := range steps {
		req := install.Request{Namespace: "dev", Name: "web-portal", Stack: "team-portal", Parameters: st.params}
		p, err := svc.Plan(ctx, req)
		if err != nil {
			t.Fatalf("%s: plan: %v", st.name, err)
		}
		planned := map[string]deps.Change{}
		for _, n := range p.Nodes {
			k := n.Key
			if strings.HasPrefix(k, "dev/flags-env-") {
				k = "dev/flags-env-"
			}
			planned[k] = n.Change
			if n.Key == p.Root && fmt.Sprint(n.Children) != fmt.Sprint(st.children) {
				t.Errorf("%s: the plan's children of the root %q, want %q", st.name, n.Children, st.children)
			}
		}
		if fmt.Sprint(planned) != fmt.Sprint(st.want) {
			t.Errorf("%s: plan %v, want %v", st.name, planned, st.want)
		}
		before := installations(t, ctx, h)
		_, res, err := svc.Install(ctx, req, nil)
		if err != nil {
			t.Fatalf("%s: install: %v", st.name, err)
		}
		did := map[string]deps.Change{}
		for _, n := range p.Nodes {
			k := n.Key
			if strings.HasPrefix(k, "dev/flags-env-") {
				k = "dev/flags-env-"
			}
			switch {
			case contains(res.Skipped, n.Key):
				did[k] = deps.ChangeSkip
			case contains(res.Reused, n.Key):
				did[k] = deps.ChangeReuse
			case contains(res.Installed, n.Key) && !contains(before, n.Key):
				did[k] = deps.ChangeInstall
			case contains(res.Installed, n.Key):
				did[k] = deps.ChangeUpdate
			}
		}
		if fmt.Sprint(did) != fmt.Sprint(planned) {
			t.Errorf("%s: the plan said %v, install did %v (%+v)", st.name, planned, did, res)
		}
	}
}

// A shared dependency installed again at a version outside the range of
// an installation that uses it (team-portal asks flags-env 0.x) is refused,
// in the plan and the install, naming the user: upgrading it for one user
// would break the other. Within every user's range it is updated.
func TestUpgradeOfASharedDependencyKeepsItsUsersInRange(t *testing.T) {
	ctx, h := newHub(t)
	addTestStacks(t, ctx, h, "testdata/flags-env-1")
	svc := &install.Service{Hub: h, Timeout: 30 * time.Second}
	for _, name := range []string{"p1", "p2"} {
		if _, _, err := svc.Install(ctx, install.Request{Namespace: "dev", Name: name, Stack: "team-portal@0.1.0", Parameters: map[string]any{"team": "web"}}, nil); err != nil {
			t.Fatalf("install %s: %v", name, err)
		}
	}
	p, err := svc.Plan(ctx, install.Request{Namespace: "dev", Name: "p1", Stack: "team-portal@0.1.0", Parameters: map[string]any{"team": "web"}})
	if err != nil {
		t.Fatal(err)
	}
	var shared string
	for _, n := range p.Nodes {
		if n.Key != p.Root {
			shared = n.Name
		}
	}
	up := install.Request{Namespace: "dev", Name: shared, Stack: "flags-env@1.0.0", Parameters: map[string]any{"team": "web"}}
	want := []string{"dev/" + shared + " cannot be installed at flags-env@1.0.0: it is used by", "dev/p1", "dev/p2", "team-portal@0.1.0", "flags", "0.x", "1.0.0"}
	for what, run := range map[string]func() error{
		"plan":    func() error { _, err := svc.Plan(ctx, up); return err },
		"install": func() error { _, _, err := svc.Install(ctx, up, nil); return err },
	} {
		err := run()
		if !cairn.HasCode(err, cairn.CodeInvalid) {
			t.Errorf("%s of flags-env@1.0.0 for a shared installation its users ask 0.x of: %v, want Invalid", what, err)
			continue
		}
		for _, w := range want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %v\nlacks %q", what, err, w)
			}
		}
	}
	// The same upgrade asked as a dependency's override, by p1's install:
	// p2 still asks 0.x of it.
	over := install.Request{Namespace: "dev", Name: "p1", Stack: "team-portal@0.1.0", Parameters: map[string]any{"team": "web"},
		Dependencies: []string{"flags=flags-env@1.0.0"}}
	want = []string{"dev/" + shared + " cannot be installed at flags-env@1.0.0: it is used by", "dev/p2", "team-portal@0.1.0", "flags", "0.x"}
	for what, run := range map[string]func() error{
		"plan":    func() error { _, err := svc.Plan(ctx, over); return err },
		"install": func() error { _, _, err := svc.Install(ctx, over, nil); return err },
	} {
		err := run()
		if !cairn.HasCode(err, cairn.CodeInvalid) {
			t.Errorf("%s of p1 with --dependency flags=flags-env@1.0.0, whose flags p2 shares asking 0.x: %v, want Invalid", what, err)
			continue
		}
		for _, w := range want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %v\nlacks %q", what, err, w)
			}
		}
	}
	cur, err := h.GetInstanceByName(ctx, cairn.PathForGroupKind("flags.stacks.cairn.dev", "FlagsEnv"), "dev", shared, false)
	if err != nil || cur.Annotations[hub.AnnotationStackVersion] != "0.1.0" {
		t.Fatalf("the shared flags after the refused upgrade: %v %v", err, cur.Annotations)
	}
}

// A shared installation that an install in progress has chosen to reuse
// cannot be deleted from under it: uninstalling its last other user and
// then the installation itself, while the install waits for another
// dependency, is refused (the install's root uses it from the moment it
// is chosen), and the install completes with it.
func TestReusedDependencyHeldDuringInstall(t *testing.T) {
	ctx, h := newHub(t)
	addTestStacks(t, ctx, h, "testdata/gated", "testdata/two")
	svc := &install.Service{Hub: h, Timeout: 30 * time.Second}
	if _, _, err := svc.Install(ctx, install.Request{Namespace: "dev", Name: "p0", Stack: "team-portal", Parameters: map[string]any{"team": "web"}}, nil); err != nil {
		t.Fatal(err)
	}
	p0, err := h.GetInstanceByName(ctx, cairn.PathForGroupKind("examples.stacks.cairn.dev", "TeamPortal"), "dev", "p0", false)
	if err != nil {
		t.Fatal(err)
	}
	req := install.Request{Namespace: "dev", Name: "w1", Stack: "two", Parameters: map[string]any{"team": "web", "gate": "g1"}}
	p, err := svc.Plan(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	flags, gate := nodeOf(p, "flags"), nodeOf(p, "gate")
	if flags.Action != deps.ActionReuse {
		t.Fatalf("the flags p0 made: %s, want reuse", flags.Action)
	}
	done := make(chan error, 1)
	go func() { _, _, err := svc.Install(ctx, req, nil); done <- err }()
	child := waitFor(t, "the gate's child", func() (cairn.Instance, error) {
		return h.GetInstanceByName(ctx, cairn.PathForGroupKind("test.cairn.dev", "Gate"), "dev", gate.Name+"-gate", false)
	})
	// p0 goes; its flags are now used only by the install in progress.
	if err := h.DeleteInstance(ctx, p0.ID, ""); err != nil {
		t.Fatal(err)
	}
	waitGone(t, ctx, h, p0.ID)
	if err := h.DeleteInstance(ctx, flags.InstallationID, ""); !cairn.HasCode(err, cairn.CodeUsedBy) {
		t.Errorf("deleting the flags the install in progress reuses: %v, want refused as used", err)
	}
	if _, err := h.UpdateStatus(ctx, child.ID, json.RawMessage(`{"conditions":[{"type":"Ready","status":"True"}]}`), 0); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("the install: %v", err)
	}
	w1, err := h.GetInstanceByName(ctx, cairn.PathForGroupKind("test.stacks.cairn.dev", "Two"), "dev", "w1", false)
	if err != nil || !contains(w1.Uses, flags.InstallationID) {
		t.Fatalf("w1 %v uses %v: want the reused flags %s", err, w1.Uses, flags.InstallationID)
	}
}

// A credential is a reference to an instance: one that is not
// NAMESPACE/NAME, names no instance, or an instance of another Type than
// the credential's is refused by plan and install, naming the credential,
// and nothing is installed.
func TestCredentialReferencesChecked(t *testing.T) {
	ctx, h := newHub(t)
	addTestStacks(t, ctx, h, repoPath("controller/install/testdata/withcred"))
	for _, path := range []string{"cap.type.test.token", "cap.type.test.other"} {
		if _, err := h.CreateType(ctx, cairn.Type{Path: path, Revision: "0.1.0", JSONSchema: json.RawMessage(`{"type":"object"}`)}); err != nil {
			t.Fatal(err)
		}
	}
	for name, path := range map[string]string{"tok": "cap.type.test.token", "other": "cap.type.test.other"} {
		if _, err := h.CreateInstances(ctx, hub.CreateRequest{Instances: []hub.NewInstance{{Namespace: "dev", Name: name,
			TypeRef: cairn.TypeRef{Path: path, Revision: "0.1.0"}, Value: json.RawMessage(`{}`)}}}); err != nil {
			t.Fatal(err)
		}
	}
	svc := &install.Service{Hub: h, Timeout: 30 * time.Second}
	for _, tc := range []struct {
		creds map[string]string
		want  string
	}{
		{map[string]string{"token": "tok"}, `credential token: "tok" is not a reference NAMESPACE/NAME to the instance holding it`},
		{map[string]string{"token": "dev/nope"}, "credential token: no instance dev/nope of Type cap.type.test.token"},
		{map[string]string{"token": "dev/other"}, "credential token: no instance dev/other of Type cap.type.test.token (dev/other is a cap.type.test.other)"},
		{map[string]string{"token": "dev/tok", "note": "dev/nope"}, "credential note: no instance dev/nope"},
	} {
		req := install.Request{Namespace: "dev", Name: "c1", Stack: "withcred", Credentials: tc.creds}
		if _, err := svc.Plan(ctx, req); !cairn.HasCode(err, cairn.CodeInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("plan with %v: %v, want an invalid error with %q", tc.creds, err, tc.want)
		}
		if _, _, err := svc.Install(ctx, req, nil); !cairn.HasCode(err, cairn.CodeInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("install with %v: %v, want an invalid error with %q", tc.creds, err, tc.want)
		}
		if got := installations(t, ctx, h); len(got) != 0 {
			t.Fatalf("installed %v", got)
		}
	}
	req := install.Request{Namespace: "dev", Name: "c1", Stack: "withcred", Credentials: map[string]string{"token": "dev/tok", "note": "dev/other"}}
	if _, _, err := svc.Install(ctx, req, nil); err != nil {
		t.Fatal(err)
	}
}

// Seed 002 "Unmapped Credentials/Parameters": a required input of a
// dependency that no mapping sets is presented to the user to specify.
// The plan lists it and cannot run; given as an answer for the
// dependency's path (cairn install --dependency-param flags.team=web),
// it is installed, and the answer is recorded on the root so that the
// stack controller's install after a spec change gives it again.
func TestUnmappedInputAnswered(t *testing.T) {
	ctx, h := newHub(t)
	addTestStacks(t, ctx, h, repoPath("controller/install/testdata/unmapped"))
	svc := &install.Service{Hub: h, Timeout: 30 * time.Second}
	req := install.Request{Namespace: "dev", Name: "u1", Stack: "unmapped"}
	if _, err := svc.Plan(ctx, req); err == nil || !strings.Contains(err.Error(), "flags parameter team of dev/u1-flags") {
		t.Fatalf("plan without the answer: %v", err)
	}
	req.Inputs = map[string]deps.Inputs{"flags": {Parameters: map[string]any{"team": "web"}}}
	if _, _, err := svc.Install(ctx, req, nil); err != nil {
		t.Fatal(err)
	}
	flags, err := h.GetInstanceByName(ctx, cairn.PathForGroupKind("flags.stacks.cairn.dev", "FlagsEnv"), "dev", "u1-flags", true)
	if err != nil {
		t.Fatal(err)
	}
	var spec map[string]any
	_ = json.Unmarshal(flags.Latest.Value, &spec)
	if spec["team"] != "web" {
		t.Fatalf("flags spec %s, want team web", flags.Latest.Value)
	}
	e, err := h.GetStack(ctx, "unmapped", "")
	if err != nil {
		t.Fatal(err)
	}
	root, err := h.GetInstanceByName(ctx, e.InstallationType.Path, "dev", "u1", false)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := root.Annotations[hub.AnnotationDependencyInputs], `{"flags":{"parameters":{"team":"web"}}}`; got != want {
		t.Fatalf("annotation %s = %q, want %q", hub.AnnotationDependencyInputs, got, want)
	}
	// An answer for a path the plan does not install is refused.
	req.Inputs = map[string]deps.Inputs{"flag": {Parameters: map[string]any{"team": "web"}}}
	if _, err := svc.Plan(ctx, req); !cairn.HasCode(err, cairn.CodeInvalid) || !strings.Contains(err.Error(), "answers for flag: the plan installs no dependency at that path") {
		t.Fatalf("plan with an answer for no path: %v", err)
	}
}

// TestCredentialReferencesOnlyReadable: a credential reference is checked
// for the caller: an instance it may not read (another namespace, or a
// Type marking secrets without reveal) is refused with the very answer a
// missing one gets, so planning does not tell the caller what exists
// where it cannot look, nor its Type; one it may read is accepted.
func TestCredentialReferencesOnlyReadable(t *testing.T) {
	ctx, h := newHub(t)
	addTestStacks(t, ctx, h, repoPath("controller/install/testdata/withcred"))
	if _, err := h.CreateType(ctx, cairn.Type{Path: "cap.type.test.token", Revision: "0.1.0", JSONSchema: json.RawMessage(`{"type":"object"}`)}); err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{"dev", "vault"} {
		if _, err := h.CreateInstances(ctx, hub.CreateRequest{Instances: []hub.NewInstance{{Namespace: ns, Name: "tok",
			TypeRef: cairn.TypeRef{Path: "cap.type.test.token", Revision: "0.1.0"}, Value: json.RawMessage(`{}`)}}}); err != nil {
			t.Fatal(err)
		}
	}
	// A planner: create plans (cluster-wide, as plans are), reads dev only.
	for _, o := range []hub.RBACObject{
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "planner"},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{rbac.HubGroup}, Resources: []string{"plans"}, Verbs: []string{"create"}}}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "planner"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "planner"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "pl"}}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "pl-views", Namespace: "dev"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: rbac.ViewerRole},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "pl"}}},
	} {
		if _, err := h.CreateRBAC(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	pl := cairn.WithUser(ctx, cairn.User{Name: "pl", Groups: []string{cairn.Authenticated}})
	svc := &install.Service{Hub: h, Timeout: 30 * time.Second}
	plan := func(ref string) error {
		_, err := svc.Plan(pl, install.Request{Namespace: "dev", Name: "c1", Stack: "withcred", Credentials: map[string]string{"token": ref}})
		return err
	}
	if err := plan("dev/tok"); err != nil {
		t.Errorf("a credential the planner reads: %v", err)
	}
	hidden, missing := plan("vault/tok"), plan("vault/nope")
	if !cairn.HasCode(hidden, cairn.CodeInvalid) || !strings.Contains(fmt.Sprint(hidden), "credential token: no instance vault/tok of Type cap.type.test.token") {
		t.Errorf("a credential in a namespace the planner cannot read: %v, want it answered as missing", hidden)
	}
	if strings.Replace(fmt.Sprint(hidden), "vault/tok", "vault/nope", 1) != fmt.Sprint(missing) {
		t.Errorf("an unreadable credential is answered %q, a missing one %q: the answer tells them apart", hidden, missing)
	}
}

// An install writes with its caller's rights: create installs is granted
// cluster-wide, so the installations it creates, updates and reuses are
// authorized in their own namespaces. An editor of dev may not install
// into prod (nothing is written, and the plan is refused too), may not
// update an installation of global it may only read, does not see one
// of global it may not read (a --dependency naming it is answered as one
// naming nothing), and installs into dev as before.
func TestInstallNeedsTheCallersRights(t *testing.T) {
	ctx, h := newHub(t)
	svc := &install.Service{Hub: h, Timeout: 30 * time.Second}
	if _, _, err := svc.Install(ctx, install.Request{Namespace: "global", Name: "shared", Stack: "flags-env", Parameters: map[string]any{"team": "data"}}, nil); err != nil {
		t.Fatal(err)
	}
	bind := func(name, ns, role, user string) hub.RBACObject {
		ref := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role}
		subj := []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}
		if ns == "" {
			return &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name}, RoleRef: ref, Subjects: subj}
		}
		return &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, RoleRef: ref, Subjects: subj}
	}
	for _, o := range []hub.RBACObject{
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "installer"},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{rbac.HubGroup}, Resources: []string{"plans", "installs"}, Verbs: []string{"create"}}}},
		bind("ed-installs", "", "installer", "ed"), bind("ed-edits-dev", "dev", rbac.EditorRole, "ed"),
		bind("vi-installs", "", "installer", "vi"), bind("vi-edits-dev", "dev", rbac.EditorRole, "vi"),
		bind("vi-views-global", "global", rbac.ViewerRole, "vi"),
	} {
		if _, err := h.CreateRBAC(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	ed := cairn.WithUser(ctx, cairn.User{Name: "ed", Groups: []string{cairn.Authenticated}})
	vi := cairn.WithUser(ctx, cairn.User{Name: "vi", Groups: []string{cairn.Authenticated}})
	before := installations(t, ctx, h)

	forbidden := func(what string, err error, want string) {
		t.Helper()
		if !cairn.HasCode(err, cairn.CodeForbidden) || !strings.Contains(fmt.Sprint(err), want) {
			t.Errorf("%s: %v, want forbidden: %s", what, err, want)
		}
	}
	portal := install.Request{Namespace: "prod", Name: "p", Stack: "team-portal", Parameters: map[string]any{"team": "data"}}
	_, _, err := svc.Install(ed, portal, nil)
	forbidden("ed installs into prod", err, `User "ed" cannot get resource "teamportals" in API group "examples.stacks.cairn.dev" in the namespace "prod"`)
	p, err := svc.Plan(ed, portal)
	forbidden("ed plans in prod", err, `in the namespace "prod"`)
	if p != nil {
		t.Errorf("a forbidden plan answered %v", p.Nodes)
	}
	_, _, err = svc.Install(vi, install.Request{Namespace: "global", Name: "shared", Stack: "flags-env", Parameters: map[string]any{"team": "web"}}, nil)
	forbidden("vi updates global/shared", err, `User "vi" cannot update resource "flagsenvs" in API group "flags.stacks.cairn.dev" in the namespace "global"`)
	if got := installations(t, ctx, h); fmt.Sprint(got) != fmt.Sprint(before) {
		t.Errorf("refused installs left %v, had %v", got, before)
	}
	shared, err := h.GetInstanceByName(ctx, cairn.PathForGroupKind("flags.stacks.cairn.dev", "FlagsEnv"), "global", "shared", true)
	if err != nil || !strings.Contains(string(shared.Latest.Value), `"data"`) {
		t.Errorf("global/shared after vi's refused update: %s, %v", shared.Latest.Value, err)
	}

	over := func(user context.Context, ref string) (*deps.Plan, error) {
		return svc.Plan(user, install.Request{Namespace: "dev", Name: "p", Stack: "team-portal", Parameters: map[string]any{"team": "data"},
			Dependencies: []string{"flags=" + ref}})
	}
	_, hidden := over(ed, "global/FlagsEnv/shared")
	_, missing := over(ed, "global/FlagsEnv/nope")
	if hidden == nil || strings.ReplaceAll(hidden.Error(), "shared", "nope") != missing.Error() {
		t.Errorf("--dependency naming an installation ed may not read: %v; one naming nothing: %v", hidden, missing)
	}
	if p, err := over(vi, "global/FlagsEnv/shared"); err != nil || nodeOf(p, "flags").Action != deps.ActionReuse {
		t.Errorf("vi, who reads global, reusing global/shared: %v", err)
	}

	if _, res, err := svc.Install(ed, install.Request{Namespace: "dev", Name: "p", Stack: "team-portal", Parameters: map[string]any{"team": "data"}}, nil); err != nil || len(res.Installed) != 2 {
		t.Fatalf("ed installs into dev: %+v, %v", res, err)
	}

	// The stack controller installs an installation's dependencies as
	// itself, from its annotations: ed, who may edit his own installation,
	// cannot annotate it with what he may not read (another team's
	// installation, a credential elsewhere), answered as if it did not
	// exist; vi, who reads global, may.
	mine, err := h.GetInstanceByName(ctx, cairn.PathForGroupKind("examples.stacks.cairn.dev", "TeamPortal"), "dev", "p", false)
	if err != nil {
		t.Fatal(err)
	}
	annotate := func(user context.Context, key, value string) error {
		a := maps.Clone(mine.Annotations)
		a[key] = value
		_, err := h.UpdateInstances(user, []hub.UpdateInstance{{ID: mine.ID, Annotations: a}})
		return err
	}
	for _, c := range []struct{ key, hidden, missing string }{
		{hub.AnnotationDependencyOverrides, `["flags=global/FlagsEnv/shared"]`, `["flags=global/FlagsEnv/nope"]`},
		{hub.AnnotationCredentials, `{"token":"global/shared"}`, `{"token":"global/nope"}`},
		{hub.AnnotationDependencyInputs, `{"flags":{"credentials":{"token":"global/shared"}}}`, `{"flags":{"credentials":{"token":"global/nope"}}}`},
	} {
		hidden, missing := annotate(ed, c.key, c.hidden), annotate(ed, c.key, c.missing)
		if !cairn.HasCode(hidden, cairn.CodeInvalid) || missing == nil || strings.ReplaceAll(hidden.Error(), "shared", "nope") != missing.Error() {
			t.Errorf("ed annotates %s naming global/shared: %v; naming nothing: %v; want the same refusal", c.key, hidden, missing)
		}
		if err := annotate(vi, c.key, c.hidden); err != nil {
			t.Errorf("vi, who reads global, annotates %s naming global/shared: %v", c.key, err)
		}
	}

	// A STACK@VERSION override names no instance, so ed may write one;
	// the dependency installer (no user: it runs as itself) acts on it.
	// It installs that version in the installation's own namespace,
	// where ed's install would, and never upgrades global/shared, which
	// ed may not update.
	if err := annotate(ed, hub.AnnotationDependencyOverrides, `["flags=flags-env@0.1.0"]`); err != nil {
		t.Fatalf("ed annotates a STACK@VERSION override: %v", err)
	}
	asInstaller := cairn.WithActor(context.Background(), "dependency-installer")
	byAnnotation := install.Request{Namespace: "dev", Name: "p", Stack: "team-portal@0.1.0", Parameters: map[string]any{"team": "data"},
		Dependencies: []string{"flags=flags-env@0.1.0"}}
	p, err = svc.Plan(asInstaller, byAnnotation)
	if err != nil {
		t.Fatal(err)
	}
	if n := nodeOf(p, "flags"); n == nil || n.Namespace != "dev" || n.Action != deps.ActionInstall {
		t.Fatalf("the override's node: %+v, want an install in dev", n)
	}
	if _, _, err := svc.Install(asInstaller, byAnnotation, nil); err != nil {
		t.Fatal(err)
	}
	after, err := h.GetInstanceByName(ctx, shared.TypeRef.Path, "global", "shared", true)
	if err != nil || after.Latest.ResourceVersion != shared.Latest.ResourceVersion || after.Annotations[hub.AnnotationStackVersion] != shared.Annotations[hub.AnnotationStackVersion] {
		t.Errorf("global/shared changed by an override on ed's installation: %+v, %v", after, err)
	}
}

// flagsEnvOf is the FlagsEnv installation of team in ns, the zero Instance
// when there is none.
func flagsEnvOf(t *testing.T, ctx context.Context, h *hub.Hub, ns, team string) cairn.Instance {
	t.Helper()
	all, err := h.ListInstances(ctx, store.InstanceFilter{TypePath: cairn.PathForGroupKind("flags.stacks.cairn.dev", "FlagsEnv"), Namespace: ns}, true)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range all {
		var spec map[string]any
		_ = json.Unmarshal(f.Latest.Value, &spec)
		if spec["team"] == team {
			return f
		}
	}
	return cairn.Instance{}
}

// serveREST serves h's REST API behind the access guard, where each user
// named authenticates with the bearer token "<user>-token"; it returns a
// function making one request as a user.
func serveREST(t *testing.T, h *hub.Hub, users ...string) func(user, method, path, contentType, body string) (int, string) {
	t.Helper()
	var csv strings.Builder
	for i, u := range users {
		fmt.Fprintf(&csv, "%s-token,%s,%d\n", u, u, i+1)
	}
	tf, err := authn.ParseTokenFile(strings.NewReader(csv.String()))
	if err != nil {
		t.Fatal(err)
	}
	g := access.New(access.Config{Authn: &authn.Chain{Tokens: []authn.TokenAuthenticator{tf}}, Authz: h})
	mux := http.NewServeMux()
	g.Handle(mux)
	mux.Handle("/", rest.New(rest.Config{Hub: h}))
	srv := httptest.NewServer(g.Wrap(mux))
	t.Cleanup(srv.Close)
	return func(user, method, path, contentType, body string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", contentType)
		req.Header.Set("Authorization", "Bearer "+user+"-token")
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
}

// A team whose Role grants its installation kind (teamportals) but not
// its dependency's (flagsenvs) in its namespace may edit its portal, and
// the stack controller then installs the portal's dependencies again, as
// itself. An override STACK@VERSION written on the portal through REST
// would have it upgrade the shared flags there, which the team may not
// update (cairn install refuses it): the controller refuses, saying so in
// the portal's Dependencies condition, and the flags stay at their
// version.
func TestControllerUpgradesNoSharedDependency(t *testing.T) {
	ctx, h := newHub(t)
	addTestStacks(t, ctx, h, "testdata/flags-env-1")
	svc := &install.Service{Hub: h, Timeout: 30 * time.Second}
	if _, _, err := svc.Install(ctx, install.Request{Namespace: "team-a", Name: "p", Stack: "team-portal@0.1.0", Parameters: map[string]any{"team": "web"}}, nil); err != nil {
		t.Fatal(err)
	}
	flags := flagsEnvOf(t, ctx, h, "team-a", "web")
	if flags.ID == "" || flags.Annotations[hub.AnnotationStackVersion] != "0.1.0" {
		t.Fatalf("the shared flags: %+v", flags)
	}
	for _, o := range []hub.RBACObject{
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "portals", Namespace: "team-a"},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{"examples.stacks.cairn.dev"}, Resources: []string{"teamportals"}, Verbs: []string{"*"}}}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "ed-portals", Namespace: "team-a"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "portals"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "ed"}}},
	} {
		if _, err := h.CreateRBAC(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	do := serveREST(t, h, "ed")
	const portal = "/apis/examples.stacks.cairn.dev/v1alpha1/namespaces/team-a/teamportals/p"
	if code, out := do("ed", "GET", "/apis/flags.stacks.cairn.dev/v1alpha1/namespaces/team-a/flagsenvs/"+flags.Name, "", ""); code != http.StatusForbidden {
		t.Fatalf("ed reads the flags: %d %s, want 403", code, out)
	}
	code, out := do("ed", "PATCH", portal, "application/merge-patch+json",
		`{"metadata":{"annotations":{"deps.cairn.dev/dependency-overrides":"[\"flags=flags-env@1.0.0\"]"}},"spec":{"title":"Ed's portal"}}`)
	if code != http.StatusOK {
		t.Fatalf("ed patches his portal: %d %s", code, out)
	}
	root, err := h.GetInstanceByName(ctx, cairn.PathForGroupKind("examples.stacks.cairn.dev", "TeamPortal"), "team-a", "p", false)
	if err != nil {
		t.Fatal(err)
	}
	const want = "upgrades no shared installation"
	deadline := time.Now().Add(20 * time.Second)
	for {
		inst, err := h.GetInstance(ctx, root.ID, false)
		if err != nil {
			t.Fatal(err)
		}
		var st stackctl.Status
		_ = json.Unmarshal(inst.Status, &st)
		msg := ""
		for _, c := range st.Conditions {
			if c.Type == "Dependencies" {
				msg = c.Message
			}
		}
		if strings.Contains(msg, want) {
			for _, w := range []string{"team-a/" + flags.Name, "flags-env@0.1.0", "flags-env@1.0.0", "cairn install"} {
				if !strings.Contains(msg, w) {
					t.Errorf("the condition %q does not name %q", msg, w)
				}
			}
			break
		}
		if cur := flagsEnvOf(t, ctx, h, "team-a", "web"); cur.Annotations[hub.AnnotationStackVersion] != "0.1.0" {
			t.Fatalf("the shared flags were upgraded for ed, who may not update them: %v (portal status %s)", cur.Annotations, inst.Status)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the portal's status %s, want a Dependencies condition saying %q", inst.Status, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if cur := flagsEnvOf(t, ctx, h, "team-a", "web"); cur.Annotations[hub.AnnotationStackVersion] != "0.1.0" || cur.Latest.ResourceVersion != flags.Latest.ResourceVersion {
		t.Errorf("the shared flags after the refusal: %v, resource version %d (was %d)", cur.Annotations, cur.Latest.ResourceVersion, flags.Latest.ResourceVersion)
	}
}

// Sharing is the user's to edit once an install created an installation
// (seed 002's "break glass"): the install that created a shared
// dependency keeps the user's sharing mode and group when it updates the
// dependency later (here: an upgrade through --dependency), as it keeps
// them on a root installed again.
func TestHandEditedSharingSurvivesItsCreatorsUpdate(t *testing.T) {
	ctx, h := newHub(t)
	addTestStacks(t, ctx, h, "testdata/flags-env-1")
	svc := &install.Service{Hub: h, Timeout: 30 * time.Second}
	p1 := install.Request{Namespace: "dev", Name: "p1", Stack: "team-portal@0.1.0", Parameters: map[string]any{"team": "web"}}
	if _, _, err := svc.Install(ctx, p1, nil); err != nil {
		t.Fatal(err)
	}
	flags := flagsEnvOf(t, ctx, h, "dev", "web")
	root, err := h.GetInstanceByName(ctx, cairn.PathForGroupKind("examples.stacks.cairn.dev", "TeamPortal"), "dev", "p1", false)
	if err != nil {
		t.Fatal(err)
	}
	edited := map[string]map[string]string{
		flags.ID: {hub.AnnotationSharingMode: "none", hub.AnnotationSharingGroup: "mine"},
		root.ID:  {hub.AnnotationSharingMode: "none", hub.AnnotationSharingGroup: "portals"},
	}
	for id, set := range edited {
		cur, err := h.GetInstance(ctx, id, false)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := h.UpdateInstances(ctx, []hub.UpdateInstance{{ID: id, IfSeq: cur.Seq, Annotations: hub.WithAnnotations(cur.Annotations, set)}}); err != nil {
			t.Fatal(err)
		}
	}
	p1.Dependencies = []string{"flags=flags-env@1.0.0"}
	if _, res, err := svc.Install(ctx, p1, nil); err != nil || !slices.Contains(res.Installed, "dev/"+flags.Name) {
		t.Fatalf("install p1 again, upgrading its flags: %+v, %v", res, err)
	}
	for id, want := range edited {
		cur, err := h.GetInstance(ctx, id, false)
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range want {
			if cur.Annotations[k] != v {
				t.Errorf("%s/%s after its creator's install: %s=%q, want the user's %q", cur.Namespace, cur.Name, k, cur.Annotations[k], v)
			}
		}
	}
	if cur := flagsEnvOf(t, ctx, h, "dev", "web"); cur.Annotations[hub.AnnotationStackVersion] != "1.0.0" {
		t.Errorf("the flags were not upgraded: %v", cur.Annotations)
	}
}

// An installation a team writes through REST has its dependencies
// installed by the stack controller for no user, and it reused what
// satisfied them in the global namespace too, which the team may not read:
// a reporting installation in team-a reused global/office-sql and showed
// its connection string in its own outputs, which cairn install refuses
// the team (the global installation is no candidate for a caller who may
// not read it). Installed for no user, a dependency is satisfied from the
// installation's own namespace, or from a global installation its
// deps.cairn.dev/dependency-overrides name (checked against the writer's
// rights when written).
func TestControllerReusesNothingGlobalForNoUser(t *testing.T) {
	ctx, h := newHub(t)
	e, err := h.GetStack(ctx, "shared-sql-server", "")
	if err != nil {
		t.Fatal(err)
	}
	const secret = "Server=closet;Database=reports;Password=hunter2"
	if _, err := h.CreateInstances(ctx, hub.CreateRequest{Instances: []hub.NewInstance{{Namespace: "global", Name: "office-sql", TypeRef: e.InstallationType,
		Value: json.RawMessage(`{"connectionString":"` + secret + `"}`)}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.CreateRBAC(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "ed-edits", Namespace: "team-a"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cairn-editor"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "ed"}}}); err != nil {
		t.Fatal(err)
	}
	do := serveREST(t, h, "ed")
	if code, out := do("ed", "GET", "/apis/examples.stacks.cairn.dev/v1alpha1/namespaces/global/sharedsqlservers/office-sql", "", ""); code != http.StatusForbidden {
		t.Fatalf("ed reads the global server: %d %s, want 403", code, out)
	}
	const reports = "/apis/examples.stacks.cairn.dev/v1alpha1/namespaces/team-a/reportings"
	if code, out := do("ed", "POST", reports, "application/json",
		`{"apiVersion":"examples.stacks.cairn.dev/v1alpha1","kind":"Reporting","metadata":{"name":"r"},"spec":{"team":"data"}}`); code != http.StatusCreated {
		t.Fatalf("ed creates his reporting: %d %s", code, out)
	}
	const want = "the stack controller looks in team-a alone"
	deadline := time.Now().Add(20 * time.Second)
	for {
		code, out := do("ed", "GET", reports+"/r", "", "")
		if code != http.StatusOK {
			t.Fatalf("ed reads his reporting: %d %s", code, out)
		}
		if strings.Contains(out, "hunter2") {
			t.Fatalf("ed's reporting shows the global server's connection string: %s", out)
		}
		if strings.Contains(out, want) {
			// What it searched, and how a kubectl user names another:
			// no --dependency flag, the annotation's JSON list.
			for _, w := range []string{"no installation in team-a satisfies", `deps.cairn.dev/dependency-overrides, a JSON list of --dependency values: '[\"sqlserver=global/KIND/NAME\"]'`} {
				if !strings.Contains(out, w) {
					t.Fatalf("the condition %s does not say %s", out, w)
				}
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("ed's reporting %s, want a condition saying %q", out, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
