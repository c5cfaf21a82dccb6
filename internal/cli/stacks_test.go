package cli_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/api/rest"

	stackctl "github.com/cairn-dev/cairn/controller/stack"
	"github.com/cairn-dev/cairn/hub"
	"github.com/cairn-dev/cairn/store"
)

const dbStack = "../../controller/stack/testdata/db"

// TestStackCommandsLocal: cairn stack add|list|show and trace on the local
// store.
func TestStackCommandsLocal(t *testing.T) {
	e := newEnv(t)
	out := e.ok("stack", "add", dbStack)
	if !strings.Contains(out, "stack db@0.1.0 added") || !strings.Contains(out, "resource dbs") {
		t.Fatalf("stack add printed %q", out)
	}
	if out := e.ok("stack", "add", dbStack); !strings.Contains(out, "unchanged") {
		t.Errorf("adding again printed %q", out)
	}
	matchLines(t, e.ok("stack", "list"), `NAME +VERSION +KIND +APIVERSION +DIGEST +DESCRIPTION`, `db +0\.1\.0 +DB +db\.test\.cairn\.dev/v1 +[0-9a-f]{12} +<none>`)
	show := e.ok("stack", "show", "db@0.1.0")
	if !strings.Contains(show, "Kind:         DB") || !strings.Contains(show, "engine") {
		t.Errorf("stack show printed:\n%s", show)
	}
	var entry struct {
		Name, Version, Digest string
	}
	if err := json.Unmarshal([]byte(e.ok("stack", "show", "db", "-o", "json")), &entry); err != nil || entry.Version != "0.1.0" || !strings.HasPrefix(entry.Digest, "sha256:") {
		t.Errorf("stack show -o json: %+v %v", entry, err)
	}
	if r := e.run("", "stack", "show", "nope"); r.code == 0 || !strings.Contains(r.stderr, "not in the catalog") {
		t.Errorf("show of an unknown stack: exit %d %q", r.code, r.stderr)
	}
	if r := e.run("", "stack", "add", "no/such/dir"); r.code == 0 {
		t.Errorf("add of a missing package succeeded")
	}

	// An installation reconciled once, traced locally.
	h := e.hub()
	ctx := context.Background()
	stacks, err := h.ListStacks(ctx)
	if err != nil || len(stacks) != 1 {
		t.Fatal(stacks, err)
	}
	created, err := h.CreateInstances(ctx, hub.CreateRequest{Instances: []hub.NewInstance{{Name: "orders", TypeRef: stacks[0].InstallationType, Value: json.RawMessage(`{}`)}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stackctl.New(stackctl.Config{Hub: h}).Reconcile(ctx, created[0].ID); err != nil {
		t.Fatal(err)
	}
	matchLines(t, e.ok("trace", "db/orders"),
		`NAME +KIND +BACKEND +SYNCED +READY +REASON`,
		`orders +DB +\S+ +True +False +1 of 2 children not ready: Database orders-main: .*`,
		`├─ orders-backups +Bucket +cairn-builtin +True +True +<none>`,
		`└─ orders-main +Database +cairn-builtin +True +False +.*Ready.*`)
	var tr struct {
		Installation struct{ Synced, Ready string }
		Children     []struct{ Name, Backend, Ready, Reason string }
	}
	if err := json.Unmarshal([]byte(e.ok("trace", "dbs/orders", "-o", "json")), &tr); err != nil {
		t.Fatal(err)
	}
	if tr.Installation.Synced != "True" || len(tr.Children) != 2 || tr.Children[1].Ready != "False" || tr.Children[1].Reason == "" {
		t.Errorf("trace -o json = %+v", tr)
	}
	if r := e.run("", "trace", "orders"); r.code == 0 || !strings.Contains(r.stderr, "KIND/NAME") {
		t.Errorf("trace without a kind: exit %d %q", r.code, r.stderr)
	}
}

// TestStackCommandsClient: the same commands in client mode, through a
// server's REST API.
func TestStackCommandsClient(t *testing.T) {
	s := newServer(t)
	if out := s.ok("stack", "add", dbStack); !strings.Contains(out, "stack db@0.1.0 added") {
		t.Fatalf("stack add printed %q", out)
	}
	matchLines(t, s.ok("stack", "list"), `NAME +VERSION +KIND +APIVERSION +DIGEST +DESCRIPTION`, `db +0\.1\.0 +DB .*`)
	if out := s.ok("stack", "show", "db", "-o", "yaml"); !strings.Contains(out, "version: 0.1.0") {
		t.Errorf("stack show -o yaml:\n%s", out)
	}
	// The catalog is the server's.
	insts, err := s.h.ListInstances(context.Background(), store.InstanceFilter{TypePath: hub.StackTypeRef().Path}, false)
	if err != nil || len(insts) != 1 {
		t.Fatalf("catalog instances on the server: %d, %v", len(insts), err)
	}
	s.ok("create", "-f", writeFile(t, s.dir, "orders.yaml", "apiVersion: db.test.cairn.dev/v1\nkind: DB\nmetadata: {name: orders}\nspec: {}\n"))
	inst, err := s.h.GetInstanceByName(context.Background(), "dev.cairn.test.db.db", "default", "orders", false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stackctl.New(stackctl.Config{Hub: s.h}).Reconcile(context.Background(), inst.ID); err != nil {
		t.Fatal(err)
	}
	matchLines(t, s.ok("trace", "db/orders"),
		`NAME +KIND +BACKEND +SYNCED +READY +REASON`,
		`orders +DB +\S+ +True +False +.*`,
		`├─ orders-backups +Bucket +cairn-builtin +True +True +<none>`,
		`└─ orders-main +Database +cairn-builtin +True +False +.*`)
}

// TestTraceWaitingInstallation: an installation waiting for its
// dependencies has no Synced condition yet; trace gives its Ready reason
// rather than <none>.
func TestTraceWaitingInstallation(t *testing.T) {
	e := newEnv(t)
	e.ok("stack", "add", "../../examples/stacks/flags-env")
	e.ok("stack", "add", "../../examples/stacks/team-portal")
	h := e.hub()
	ctx := context.Background()
	entry, err := h.GetStack(ctx, "team-portal", "")
	if err != nil {
		t.Fatal(err)
	}
	created, err := h.CreateInstances(ctx, hub.CreateRequest{Instances: []hub.NewInstance{{Name: "p1", TypeRef: entry.InstallationType,
		Value: json.RawMessage(`{}`), Annotations: map[string]string{hub.AnnotationWaiting: "default/flags-env-0123456789"}}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stackctl.New(stackctl.Config{Hub: h}).Reconcile(ctx, created[0].ID); err != nil {
		t.Fatal(err)
	}
	matchLines(t, e.ok("trace", "teamportal/p1"),
		`NAME +KIND +BACKEND +SYNCED +READY +REASON`,
		`p1 +TeamPortal +\S+ +Unknown +False +waiting for the dependencies default/flags-env-0123456789`)
	// describe shows the status its controller reported (conditions,
	// outputs, events), as kubectl describe does, besides the hub's fields.
	d := e.ok("describe", "teamportal", "p1")
	if !strings.Contains(d, "\nStatus:\n  conditions:\n") || !strings.Contains(d, "reason: WaitingForDependencies") || strings.Contains(d, "typeRef:") {
		t.Errorf("describe of an installation:\n%s", d)
	}
}

// TestApplyInstallationLocal: in local mode no server's stack controller
// renders an installation, so cairn apply does it in process (as cairn
// install and cairn delete do): the children exist when it returns, a
// change of the spec reaches them, and an installation the controller
// cannot apply fails the command with the reason (the installation stays,
// as kubectl apply of it would leave it).
func TestApplyInstallationLocal(t *testing.T) {
	e := newEnv(t)
	e.ok("stack", "add", dbStack)
	doc := func(engine, annotations string) string {
		return "apiVersion: db.test.cairn.dev/v1\nkind: DB\nmetadata: {name: orders" + annotations + "}\nspec: {engine: " + engine + "}\n"
	}
	engine := func() string {
		t.Helper()
		var db struct{ Spec struct{ Engine string } }
		if err := json.Unmarshal([]byte(e.ok("get", "databases", "orders-main", "-o", "json")), &db); err != nil {
			t.Fatal(err)
		}
		return db.Spec.Engine
	}
	if r := e.run(doc("mysql", ""), "apply", "-f", "-"); r.code != 0 || !strings.Contains(r.stdout, "db.db.test.cairn.dev/orders created") {
		t.Fatalf("apply: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
	if got := engine(); got != "mysql" {
		t.Errorf("engine of the rendered Database = %q, want mysql", got)
	}
	matchLines(t, e.ok("trace", "db/orders"),
		`NAME +KIND +BACKEND +SYNCED +READY +REASON`,
		`orders +DB +\S+ +True +False +.*`,
		`├─ orders-backups +Bucket +cairn-builtin +True +True +<none>`,
		`└─ orders-main +Database +cairn-builtin +True +False +.*Ready.*`)

	if r := e.run(doc("postgres", ""), "apply", "-f", "-"); r.code != 0 || !strings.Contains(r.stdout, "configured") {
		t.Fatalf("apply of a new engine: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
	if got := engine(); got != "postgres" {
		t.Errorf("engine after the change = %q, want postgres", got)
	}

	r := e.run(doc("postgres", ", annotations: {stacks.cairn.dev/version: 9.9.9}"), "apply", "-f", "-")
	if r.code == 0 || !strings.Contains(r.stderr, "db.db.test.cairn.dev/orders") || !strings.Contains(r.stderr, "no stack version 9.9.9") {
		t.Errorf("apply pinning a missing stack version: exit %d %q %q, want a failure naming the installation and the version", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stdout, "configured") {
		t.Errorf("the annotation was not applied: %q", r.stdout)
	}
}

// TestApplyInstallationWithDependenciesLocal: an installation whose stack
// requires others, applied in local mode, gets its dependencies installed
// first, as cairn serve's controller does for one applied with kubectl.
func TestApplyInstallationWithDependenciesLocal(t *testing.T) {
	e := newEnv(t)
	e.ok("stack", "add", "../../examples/stacks/flags-env")
	e.ok("stack", "add", "../../examples/stacks/team-portal")
	doc := "apiVersion: examples.stacks.cairn.dev/v1alpha1\nkind: TeamPortal\nmetadata: {name: web}\nspec: {team: web}\n"
	if r := e.run(doc, "apply", "-f", "-"); r.code != 0 {
		t.Fatalf("apply: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
	if flags := strings.Fields(e.ok("get", "flagsenvs", "-o", "name")); len(flags) != 1 {
		t.Errorf("flags installations after apply: %q, want the portal's dependency", flags)
	}
	matchLines(t, e.ok("trace", "teamportal/web"),
		`NAME +KIND +BACKEND +SYNCED +READY +REASON`,
		`web +TeamPortal +\S+ +True +True +<none>`,
		`└─ web-settings +PortalSettings +cairn-builtin +True +True +<none>`)
}

// TestGetInstallationColumns: cairn get of stack installations prints what
// kubectl get prints for them, in both modes: NAME, READY, SYNCED, the
// stack's own columns, AGE; -o wide adds REVISION, BACKEND, LOCKED-BY; -A
// adds NAMESPACE for a namespaced kind and nothing for a cluster-scoped
// one. The header is the server's Table's column definitions, the one
// definition both print from.
func TestGetInstallationColumns(t *testing.T) {
	modes(t, func(t *testing.T, s *server) {
		ctx := context.Background()
		s.ok("stack", "add", dbStack)
		s.ok("stack", "add", "../../examples/stacks/platform-config")
		s.ok("create", "-f", s.file("orders.yaml", "apiVersion: db.test.cairn.dev/v1\nkind: DB\nmetadata: {name: orders}\nspec: {}\n"))
		s.ok("create", "-f", "../../examples/stacks/platform-config/prod.yaml")
		for _, typ := range []string{"dev.cairn.test.db.db", "dev.cairn.stacks.platform.platformconfig"} {
			insts, err := s.h.ListInstances(ctx, store.InstanceFilter{TypePath: typ}, false)
			if err != nil || len(insts) != 1 {
				t.Fatalf("%s: %d instances, %v", typ, len(insts), err)
			}
			// In server mode no controller runs beside the test's server.
			if _, err := stackctl.New(stackctl.Config{Hub: s.h}).Reconcile(ctx, insts[0].ID); err != nil {
				t.Fatal(err)
			}
		}
		for _, tt := range []struct {
			args []string
			want []string
		}{
			{[]string{"get", "dbs"}, []string{`NAME +READY +SYNCED +AGE`, `orders +False +True +\d+s`}},
			{[]string{"get", "db", "orders", "-o", "wide"}, []string{`NAME +READY +SYNCED +AGE +REVISION +BACKEND +LOCKED-BY`, `orders +False +True +\d+s +1 +cairn-builtin +<none>`}},
			{[]string{"get", "dbs", "-A"}, []string{`NAMESPACE +NAME +READY +SYNCED +AGE`, `default +orders +False +True +\d+s`}},
			{[]string{"get", "platformconfigs"}, []string{`NAME +READY +SYNCED +REGION +AGE`, `prod +True +True +us-west2 +\d+s`}},
			{[]string{"get", "platformconfigs", "-A"}, []string{`NAME +READY +SYNCED +REGION +AGE`, `prod +True +True +us-west2 +\d+s`}},
			// The catalog, as kubectl get stacks and cairn stack list show it.
			{[]string{"get", "stacks"}, []string{`NAME +VERSION +KIND +API-VERSION +AGE`, `db@0\.1\.0 +0\.1\.0 +DB +db\.test\.cairn\.dev/v1 +\d+s`,
				`platform-config@0\.1\.0 +0\.1\.0 +PlatformConfig +platform\.stacks\.cairn\.dev/v1alpha1 +\d+s`}},
		} {
			matchLines(t, s.ok(tt.args...), tt.want...)
		}
		// The header is the server's.
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("GET", "/apis/platform.stacks.cairn.dev/v1alpha1/platformconfigs", nil)
		req.Header.Set("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
		rest.New(rest.Config{Hub: s.h}).ServeHTTP(rec, req)
		var table rest.Table
		if err := json.Unmarshal(rec.Body.Bytes(), &table); err != nil {
			t.Fatalf("the server's table: %v: %s", err, rec.Body)
		}
		var names []string
		for _, c := range table.ColumnDefinitions {
			names = append(names, strings.ToUpper(c.Name))
		}
		header, _, _ := strings.Cut(s.ok("get", "platformconfigs", "-o", "wide"), "\n")
		if got := strings.Fields(header); !slices.Equal(got, names) {
			t.Errorf("cairn get -o wide header %v, the server's columns %v", got, names)
		}
	})
}
