package deps

import (
	"context"
	"encoding/json"
	"errors"
	"path"
	"slices"
	"strings"
	"testing"
)

// The stacks of seed 002's use cases.
func seedStacks(t testing.TB) []*Stack {
	t.Helper()
	docs := []string{
		// Shared: flux, several versions.
		`{name: flux, version: 1.0.0, outputs: [{name: endpoint}]}`,
		`{name: flux, version: 2.1.3, outputs: [{name: endpoint}]}`,
		`{name: flux, version: 2.2.0, outputs: [{name: endpoint}]}`,
		`{name: flux, version: 3.0.0, outputs: [{name: endpoint}]}`,
		`name: operator
version: 1.0.0
dependencies:
  requires:
  - name: flux
    bundle: {reference: "flux@2.1.3", version: 2.x}
`,
		// Unshared: dns per service, and redis with sharing none.
		`{name: dns, version: 1.2.3, parameters: {properties: {cname: {type: string}}, required: [cname]}, outputs: [{name: fqdn}]}`,
		`name: mysvc-a
version: 1.0.0
dependencies:
  requires:
  - {name: dns, bundle: "dns:v1.2.3", parameters: {cname: mysvc-a}}
`,
		`name: mysvc-b
version: 1.0.0
dependencies:
  requires:
  - {name: dns, bundle: "dns:v1.2.3", parameters: {cname: mysvc-b}}
`,
		`name: myapp
version: 1.0.0
dependencies:
  requires:
  - {name: a, bundle: {reference: mysvc-a@1.0.0}}
  - {name: b, bundle: {reference: mysvc-b@1.0.0}}
`,
		`{name: redis, version: 1.0.2, outputs: [{name: host}, {name: port}]}`,
		`name: cache-app
version: 1.0.0
dependencies:
  requires:
  - {name: redis, bundle: {reference: "getporter-redis@1.0.2"}, sharing: {mode: none}}
`,
		`{name: getporter-redis, version: 1.0.2, outputs: [{name: host}]}`,
		// Prefer local.
		`name: web
version: 1.0.0
dependencies:
  requires:
  - {name: redis, bundle: {reference: redis@1.0.2, version: 1.x}}
`,
		// Shared by a group, and per root installation.
		`{name: postgres, version: 2.3.4, parameters: {properties: {size: {type: integer, default: 1}}}, outputs: [{name: connstr}]}`,
		`{name: postgres, version: 2.4.0, parameters: {properties: {size: {type: integer, default: 1}}}, outputs: [{name: connstr}]}`,
		`name: svc
version: 1.0.0
dependencies:
  requires:
  - name: postgres
    bundle: {reference: postgres@2.3.4, version: 2.x}
    sharing: {mode: group, group: {name: my-application}}
`,
		`name: micro
version: 1.0.0
parameters: {properties: {db: {type: string}}}
dependencies:
  requires:
  - name: postgres
    bundle: {reference: postgres@2.3.4}
    sharing: {mode: group, group: {name: "${ installation.root.id }"}}
`,
		`name: micro-app
version: 1.0.0
dependencies:
  requires:
  - {name: users, bundle: micro@1.0.0, parameters: {db: users}, sharing: {mode: none}}
  - {name: orders, bundle: micro@1.0.0, parameters: {db: orders}, sharing: {mode: none}}
`,
		`{name: keyvault, version: 1.2.3, outputs: [{name: uri}]}`,
		`name: tenant-app
version: 1.0.0
dependencies:
  requires:
  - name: keyvault
    bundle: keyvault:v1.2.3
    sharing: {mode: group, group: {name: "${ installation.Namespace }"}}
`,
		// Unmanaged resource: records an existing server's outputs.
		`name: shared-dev-sql-server
version: 0.1.0
parameters: {properties: {connection-string: {type: string}}, required: [connection-string]}
outputs: [{name: connection-string, $id: azure-sql-server-connection-string}]
`,
		`{name: azure/sqlserver, version: 1.2.68, outputs: [{name: dbCon, $id: azure-sql-server-connection-string}]}`,
		`name: sql-app
version: 1.0.0
parameters: {properties: {dsn: {type: string}}}
dependencies:
  requires:
  - name: sqlserver
    bundle:
      reference: azure/sqlserver:v1.2.68
      interface:
        outputs: [{name: dbCon, $id: azure-sql-server-connection-string}]
  - name: app
    bundle: {reference: echo@1.0.0}
    parameters: {dsn: "${bundle.dependencies.sqlserver.outputs.dbCon}"}
`,
		`{name: echo, version: 1.0.0, parameters: {properties: {dsn: {type: string}}}, outputs: [{name: dsn}]}`,
		// Interface by $id, different output names.
		`{name: cloudsql, version: 5.7.0, outputs: [{name: conn, $id: mysql-5.7-connection-string}], dependencies: {provides: {interface: {id: "https://cairn.dev/interfaces#mysql"}}}}`,
		`name: mysql-app
version: 1.0.0
dependencies:
  requires:
  - name: mysql
    bundle:
      interface:
        outputs: [{name: dbCon, $id: mysql-5.7-connection-string}]
  - name: app
    bundle: echo@1.0.0
    parameters: {dsn: "jdbc:${bundle.dependencies.mysql.outputs.dbCon}?ssl=true"}
`,
		`name: mysql-id-app
version: 1.0.0
dependencies:
  requires:
  - name: mysql
    bundle:
      interface: {id: "https://cairn.dev/interfaces#mysql"}
`,
	}
	var out []*Stack
	for _, d := range docs {
		out = append(out, stackYAML(t, d))
	}
	return out
}

func TestResolveUseCases(t *testing.T) {
	stacks := seedStacks(t)
	byRef := map[string]*Stack{}
	for _, s := range stacks {
		byRef[s.Ref().String()] = s
	}
	group := func(g string) InstallationSharing { return InstallationSharing{Mode: SharingGroupMode, Group: g} }
	tests := []struct {
		name     string
		existing []Installation
		req      Request
		want     []string          // nodeSummary patterns (path.Match)
		reasons  map[string]string // path -> substring of the node's reason
		rejected []string          // substrings of some not-chosen candidate's reason
	}{
		{
			name:     "shared: nothing exists, the highest version in range",
			req:      Request{Namespace: "dev", Name: "op", Stack: Reference{Name: "operator"}},
			want:     []string{"install dev/flux-* flux@2.2.0", "install dev/op operator@1.0.0"},
			reasons:  map[string]string{"flux": "highest version in range 2.x"},
			rejected: []string{`none in dev or global with sharing group ""`},
		},
		{
			name:     "shared: a global installation in range is reused",
			existing: []Installation{existing(byRef["flux@2.1.3"], "global", "flux", InstallationSharing{})},
			req:      Request{Namespace: "dev", Name: "op", Stack: Reference{Name: "operator"}},
			want:     []string{"reuse global/flux flux@2.1.3", "install dev/op operator@1.0.0"},
			reasons:  map[string]string{"flux": "in the global namespace global"},
		},
		{
			name: "shared: out of range locally, in range globally; another namespace never",
			existing: []Installation{
				existing(byRef["flux@1.0.0"], "dev", "old-flux", InstallationSharing{}),
				existing(byRef["flux@3.0.0"], "other", "flux", InstallationSharing{}),
				existing(byRef["flux@2.1.3"], "global", "flux", InstallationSharing{}),
			},
			req:      Request{Namespace: "dev", Name: "op", Stack: Reference{Name: "operator"}},
			want:     []string{"reuse global/flux flux@2.1.3", "install dev/op operator@1.0.0"},
			rejected: []string{"version 1.0.0 not in range 2.x"},
		},
		{
			name: "prefer local: the namespace's own installation before the global one",
			existing: []Installation{
				existing(byRef["redis@1.0.2"], "dev", "debug-redis", InstallationSharing{}),
				existing(byRef["redis@1.0.2"], "global", "redis", InstallationSharing{}),
			},
			req:     Request{Namespace: "dev", Name: "web", Stack: Reference{Name: "web"}},
			want:    []string{"reuse dev/debug-redis redis@1.0.2", "install dev/web web@1.0.0"},
			reasons: map[string]string{"redis": "in the same namespace"},
		},
		{
			name: "prefer local: a namespace without its own uses the global one",
			existing: []Installation{
				existing(byRef["redis@1.0.2"], "dev", "debug-redis", InstallationSharing{}),
				existing(byRef["redis@1.0.2"], "global", "redis", InstallationSharing{}),
			},
			req:  Request{Namespace: "prod", Name: "web", Stack: Reference{Name: "web"}},
			want: []string{"reuse global/redis redis@1.0.2", "install prod/web web@1.0.0"},
		},
		{
			name:     "unshared: sharing mode none never reuses",
			existing: []Installation{existing(byRef["getporter-redis@1.0.2"], "dev", "redis", InstallationSharing{})},
			req:      Request{Namespace: "dev", Name: "c1", Stack: Reference{Name: "cache-app"}},
			want:     []string{"install dev/c1-redis getporter-redis@1.0.2", "install dev/c1 cache-app@1.0.0"},
			rejected: []string{"not searched: sharing mode none"},
		},
		{
			name:     "unshared: an installation with sharing mode none satisfies nothing",
			existing: []Installation{existing(byRef["redis@1.0.2"], "dev", "private-redis", InstallationSharing{Mode: SharingNone})},
			req:      Request{Namespace: "dev", Name: "web", Stack: Reference{Name: "web"}},
			want:     []string{"install dev/redis-* redis@1.0.2", "install dev/web web@1.0.0"},
		},
		{
			name: "unshared: different parameters make separate installations",
			req:  Request{Namespace: "dev", Name: "myapp", Stack: Reference{Name: "myapp"}},
			want: []string{"install dev/dns-* dns@1.2.3", "install dev/dns-* dns@1.2.3", "install dev/mysvc-a-* mysvc-a@1.0.0", "install dev/mysvc-b-* mysvc-b@1.0.0", "install dev/myapp myapp@1.0.0"},
		},
		{
			name: "shared by a group: another group's installation is not reused",
			existing: []Installation{
				existing(byRef["postgres@2.4.0"], "dev", "pg-other", group("other-application")),
				existing(byRef["postgres@2.3.4"], "dev", "pg", group("my-application")),
			},
			req:     Request{Namespace: "dev", Name: "svc", Stack: Reference{Name: "svc"}},
			want:    []string{"reuse dev/pg postgres@2.3.4", "install dev/svc svc@1.0.0"},
			reasons: map[string]string{"postgres": `sharing group "my-application"`},
		},
		{
			name:     "shared by the root installation: one postgres for the graph",
			existing: []Installation{existing(byRef["postgres@2.3.4"], "dev", "pg-of-another-root", group("root-0"))},
			req:      Request{Namespace: "dev", Name: "shop", RootID: "root-1", Stack: Reference{Name: "micro-app"}},
			want:     []string{"install dev/postgres-* postgres@2.3.4", "install dev/shop-orders micro@1.0.0", "install dev/shop-users micro@1.0.0", "install dev/shop micro-app@1.0.0"},
		},
		{
			name:     "shared within a namespace: ${installation.namespace} as the group",
			existing: []Installation{existing(byRef["keyvault@1.2.3"], "dev", "vault", group("dev")), existing(byRef["keyvault@1.2.3"], "global", "vault", group("global"))},
			req:      Request{Namespace: "dev", Name: "t1", Stack: Reference{Name: "tenant-app"}},
			want:     []string{"reuse dev/vault keyvault@1.2.3", "install dev/t1 tenant-app@1.0.0"},
		},
		{
			name: "unmanaged resource: satisfies the interface by output $id",
			existing: []Installation{existing(stackYAML(t, `{name: shared-dev-sql-server, version: 0.1.0, outputs: [{name: connection-string, $id: azure-sql-server-connection-string}]}`),
				"dev", "office-sql", InstallationSharing{})},
			req:     Request{Namespace: "dev", Name: "sa", Stack: Reference{Name: "sql-app"}},
			want:    []string{"reuse dev/office-sql shared-dev-sql-server@0.1.0", "install dev/echo-* echo@1.0.0", "install dev/sa sql-app@1.0.0"},
			reasons: map[string]string{"sqlserver": "existing installation in the same namespace"},
		},
		{
			name:     "interface only: matched by $id with a different output name",
			existing: []Installation{existing(byRef["cloudsql@5.7.0"], "global", "cloud-mysql", InstallationSharing{})},
			req:      Request{Namespace: "dev", Name: "ma", Stack: Reference{Name: "mysql-app"}},
			want:     []string{"reuse global/cloud-mysql cloudsql@5.7.0", "install dev/echo-* echo@1.0.0", "install dev/ma mysql-app@1.0.0"},
		},
		{
			name: "stale status.sharing is verified against the stack definition",
			existing: []Installation{
				existing(stackYAML(t, `{name: cloudsql, version: 5.7.0, outputs: [{name: conn, $id: mysql-5.7-connection-string}]}`), "dev", "stale-mysql", InstallationSharing{}),
				existing(byRef["cloudsql@5.7.0"], "global", "cloud-mysql", InstallationSharing{}),
			},
			req:      Request{Namespace: "dev", Name: "ma", Stack: Reference{Name: "mysql-app"}},
			want:     []string{"reuse global/cloud-mysql cloudsql@5.7.0", "install dev/echo-* echo@1.0.0", "install dev/ma mysql-app@1.0.0"},
			rejected: []string{"status.sharing.interfaceDigest sha256:"},
		},
		{
			name:     "interface only: matched by the provided interface id",
			existing: []Installation{existing(byRef["cloudsql@5.7.0"], "dev", "cloud-mysql", InstallationSharing{})},
			req:      Request{Namespace: "dev", Name: "mi", Stack: Reference{Name: "mysql-id-app"}},
			want:     []string{"reuse dev/cloud-mysql cloudsql@5.7.0", "install dev/mi mysql-id-app@1.0.0"},
		},
		{
			name:     "user given: --dependency beats an existing installation",
			existing: []Installation{existing(byRef["flux@2.1.3"], "global", "flux", InstallationSharing{}), existing(byRef["flux@2.2.0"], "dev", "my-flux", InstallationSharing{Mode: SharingGroupMode, Group: "x"})},
			req:      Request{Namespace: "dev", Name: "op", Stack: Reference{Name: "operator"}, Overrides: []Override{{Path: "flux", Installation: &InstallationRef{Kind: "Flux", Name: "my-flux"}}}},
			want:     []string{"reuse dev/my-flux flux@2.2.0", "install dev/op operator@1.0.0"},
			reasons:  map[string]string{"flux": "given with --dependency"},
		},
		{
			name:     "user given: an installation of the global namespace",
			existing: []Installation{existing(byRef["flux@2.1.3"], "global", "flux", InstallationSharing{}), existing(byRef["flux@2.2.0"], "dev", "flux", InstallationSharing{})},
			req:      Request{Namespace: "dev", Name: "op", Stack: Reference{Name: "operator"}, Overrides: []Override{{Path: "flux", Installation: &InstallationRef{Kind: "Flux", Namespace: "global", Name: "flux"}}}},
			want:     []string{"reuse global/flux flux@2.1.3", "install dev/op operator@1.0.0"},
			reasons:  map[string]string{"flux": "given with --dependency"},
		},
		{
			name:     "user given: a stack version",
			existing: []Installation{existing(byRef["flux@2.1.3"], "global", "flux", InstallationSharing{})},
			req:      Request{Namespace: "dev", Name: "op", Stack: Reference{Name: "operator"}, Overrides: []Override{{Path: "flux", Stack: &Reference{Name: "flux", Version: "3.0.0"}}}},
			want:     []string{"install dev/flux-* flux@3.0.0", "install dev/op operator@1.0.0"},
		},
		{
			name:     "policy injection before existing installations",
			existing: []Installation{existing(byRef["flux@2.1.3"], "dev", "flux", InstallationSharing{})},
			req: Request{Namespace: "dev", Name: "op", Stack: Reference{Name: "operator"},
				Injected: []Installation{existing(byRef["flux@2.2.0"], "platform", "platform-flux", InstallationSharing{})}},
			want:    []string{"reuse platform/platform-flux flux@2.2.0", "install dev/op operator@1.0.0"},
			reasons: map[string]string{"flux": "injected by policy"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			idx := NewIndex()
			for _, in := range tc.existing {
				idx.Put(in)
			}
			if tc.req.RootID == "" {
				tc.req.RootID = "root-" + tc.req.Name
			}
			r := &Resolver{Catalog: catalog(t, stacks...), Installations: idx}
			p, err := r.Plan(context.Background(), tc.req)
			if err != nil {
				t.Fatal(err)
			}
			got := nodeSummary(p)
			if len(got) != len(tc.want) {
				t.Fatalf("nodes %q, want %q", got, tc.want)
			}
			for i := range got {
				if ok, _ := path.Match(tc.want[i], got[i]); !ok {
					t.Fatalf("nodes %q, want %q", got, tc.want)
				}
			}
			for pth, want := range tc.reasons {
				if n := nodeByPath(t, p, pth); !strings.Contains(n.Reason, want) {
					t.Errorf("%s: reason %q, want %q", pth, n.Reason, want)
				}
			}
			for _, want := range tc.rejected {
				found := false
				for _, n := range p.Nodes {
					for _, c := range n.Candidates {
						found = found || !c.Chosen && strings.Contains(c.Reason, want)
					}
				}
				if !found {
					var b strings.Builder
					p.WriteText(&b)
					t.Errorf("no rejected candidate %q in\n%s", want, b.String())
				}
			}
			if err := p.Ready(); err != nil {
				t.Errorf("ready: %v", err)
			}
			// Deterministic: the same inputs give the same JSON.
			p2, err := r.Plan(context.Background(), tc.req)
			if err != nil {
				t.Fatal(err)
			}
			j1, _ := json.Marshal(p)
			j2, _ := json.Marshal(p2)
			if string(j1) != string(j2) {
				t.Errorf("plan is not deterministic:\n%s\n%s", j1, j2)
			}
		})
	}
}

func TestResolveGroupsAcrossRoots(t *testing.T) {
	stacks := seedStacks(t)
	cat := catalog(t, stacks...)
	idx := NewIndex()
	inst := newMemInstaller(cat, idx)
	r := &Resolver{Catalog: cat, Installations: idx}
	ctx := context.Background()
	install := func(name, stack, root string) *Plan {
		t.Helper()
		p, err := r.Plan(ctx, Request{Namespace: "dev", Name: name, RootID: root, Stack: Reference{Name: stack}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := (&Executor{Installer: inst}).Run(ctx, p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// ${installation.root.id}: each root gets its own postgres, shared by
	// both micro-services inside it.
	p1 := install("shop1", "micro-app", "root-1")
	p2 := install("shop2", "micro-app", "root-2")
	pg1, pg2 := nodeByPath(t, p1, "users.postgres"), nodeByPath(t, p2, "users.postgres")
	if pg1.Key == pg2.Key || pg1.Action != ActionInstall || pg2.Action != ActionInstall {
		t.Fatalf("roots share postgres: %s %s", pg1.Key, pg2.Key)
	}
	if !slices.Equal(pg1.Paths, []string{"orders.postgres", "users.postgres"}) {
		t.Fatalf("one postgres per graph: %v", pg1.Paths)
	}
	// A group name: the second service reuses the first one's postgres.
	install("svc1", "svc", "root-3")
	p4 := install("svc2", "svc", "root-4")
	if n := nodeByPath(t, p4, "postgres"); n.Action != ActionReuse || n.Stack.Version != "2.4.0" {
		t.Fatalf("svc2's postgres: %s %s %s", n.Action, n.Key, n.Stack)
	}
	// Unshared: each cache-app has its own redis, even after the first.
	install("c1", "cache-app", "root-5")
	p6 := install("c2", "cache-app", "root-6")
	if n := nodeByPath(t, p6, "redis"); n.Action != ActionInstall || n.Key != "dev/c2-redis" {
		t.Fatalf("c2's redis: %s %s", n.Action, n.Key)
	}
	want := []string{"dev/c1", "dev/c1-redis", "dev/c2", "dev/c2-redis", pg1.Key, pg2.Key, "dev/shop1", "dev/shop1-orders", "dev/shop1-users",
		"dev/shop2", "dev/shop2-orders", "dev/shop2-users", nodeByPath(t, p4, "postgres").Key, "dev/svc1", "dev/svc2"}
	slices.Sort(want)
	if got := inst.keys(); !slices.Equal(got, want) {
		t.Fatalf("installed %v\nwant %v", got, want)
	}
}

// A plan for a root that does not exist yet (RootIDPending) says so when
// something reads ${installation.root.id}: the names and groups it shows
// from a stand-in id are not those the install, which knows the root's id,
// creates. A plan that reads no root id is exact and says nothing.
func TestPlanWithPendingRootID(t *testing.T) {
	cat := catalog(t, seedStacks(t)...)
	r := &Resolver{Catalog: cat, Installations: NewIndex()}
	ctx := context.Background()
	for _, c := range []struct {
		stack   string
		pending bool
	}{{"micro-app", true}, {"cache-app", false}} {
		p, err := r.Plan(ctx, Request{Namespace: "dev", Name: "shop", RootID: "stand-in", RootIDPending: true, Stack: Reference{Name: c.stack}})
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		if err := p.WriteText(&b); err != nil {
			t.Fatal(err)
		}
		text := b.String()
		if p.RootIDPending != c.pending || strings.Contains(text, "not assigned yet") != c.pending || strings.Contains(text, "(root id stand-in)") == c.pending {
			t.Errorf("%s: RootIDPending %v, text:\n%s", c.stack, p.RootIDPending, text)
		}
		if c.pending && !strings.Contains(text, "${installation.root.id}") {
			t.Errorf("%s: the note does not say what differs:\n%s", c.stack, text)
		}
	}
}

// Every failure of issue item 8 fails the plan (or Ready) before anything
// runs, naming what is wrong, and leaves nothing installed.
func TestResolveFailures(t *testing.T) {
	base := seedStacks(t)
	tests := []struct {
		name   string
		stacks []string
		req    Request
		want   string
		as     any
	}{
		{
			name: "cycle",
			stacks: []string{`name: cyc
version: 1.0.0
dependencies:
  requires:
  - {name: a, bundle: echo@1.0.0, parameters: {dsn: "${bundle.dependencies.b.outputs.dsn}"}}
  - {name: b, bundle: echo@1.0.0, parameters: {dsn: "${bundle.dependencies.c.outputs.dsn}"}}
  - {name: c, bundle: echo@1.0.0, parameters: {dsn: "${bundle.dependencies.a.outputs.dsn}"}}
`},
			req:  Request{Stack: Reference{Name: "cyc"}},
			want: "dependency cycle: a -> b -> c -> a",
		},
		{
			name: "stack cycle",
			stacks: []string{
				`{name: ping, version: 1.0.0, dependencies: {requires: [{name: pong, bundle: pong@1.0.0}]}}`,
				`{name: pong, version: 1.0.0, dependencies: {requires: [{name: ping, bundle: ping@1.0.0}]}}`,
			},
			req:  Request{Stack: Reference{Name: "ping"}},
			want: "dependency cycle: ping@1.0.0 -> pong@1.0.0 -> ping@1.0.0",
			as:   new(*CycleError),
		},
		{
			name: "dangling wiring: an output the dependency lacks",
			stacks: []string{`name: dangle
version: 1.0.0
dependencies:
  requires:
  - {name: infra, bundle: redis@1.0.2}
  - {name: app, bundle: echo@1.0.0, parameters: {dsn: "https://${bundle.dependencies.infra.outputs.ip}:${bundle.dependencies.infra.outputs.port}"}}
`},
			req:  Request{Stack: Reference{Name: "dangle"}},
			want: "dependency infra: stack redis@1.0.2 does not satisfy the dependency (its interface and the outputs its wiring reads): no output ip",
			as:   new(*DanglingError),
		},
		{
			name: "dangling wiring: an unknown dependency",
			stacks: []string{`name: dangle2
version: 1.0.0
dependencies:
  requires:
  - {name: app, bundle: echo@1.0.0, parameters: {dsn: "${bundle.dependencies.infra.outputs.ip}"}}
`},
			req:  Request{Stack: Reference{Name: "dangle2"}},
			want: `dependencies.requires[0].parameters.dsn: ${bundle.dependencies.infra.outputs.ip}: unknown dependency "infra" (known: app)`,
		},
		{
			name:   "no candidate for an interface-only dependency",
			stacks: nil,
			req:    Request{Stack: Reference{Name: "mysql-app"}},
			want:   "dependency mysql: no installation in dev or global satisfies the interface (output $id mysql-5.7-connection-string) and the dependency names no stack to install; give one with --dependency mysql=KIND/NAME",
			as:     new(*NoCandidateError),
		},
		{
			name: "a version range with no match",
			stacks: []string{`name: futuristic
version: 1.0.0
dependencies:
  requires:
  - {name: flux, bundle: {reference: flux@2.1.3, version: ">=9.0.0"}}
`},
			req:  Request{Stack: Reference{Name: "futuristic"}},
			want: "dependency flux: no version of stack flux in range >=9.0.0 (the catalog has 1.0.0, 2.1.3, 2.2.0, 3.0.0)",
		},
		{
			name: "an unknown parameter in a template",
			stacks: []string{`name: badparam
version: 1.0.0
parameters: {properties: {level: {type: string}}}
dependencies:
  requires:
  - {name: app, bundle: echo@1.0.0, parameters: {dsn: "${bundle.parameters.lvl}"}}
`},
			req:  Request{Stack: Reference{Name: "badparam"}},
			want: `dependencies.requires[0].parameters.dsn: ${bundle.parameters.lvl}: stack badparam has no parameter "lvl" (known: level)`,
		},
		{
			name: "a credential spliced into text",
			stacks: []string{`name: badcred
version: 1.0.0
credentials: [{name: token}]
dependencies:
  requires:
  - {name: app, bundle: echo@1.0.0, credentials: {token: "Bearer ${bundle.credentials.token}"}}
`},
			req:  Request{Stack: Reference{Name: "badcred"}},
			want: "${bundle.credentials.token} must be the whole value",
		},
		{
			name: "a credential in a parameter",
			stacks: []string{`name: credparam
version: 1.0.0
credentials: [{name: token}]
dependencies:
  requires:
  - {name: app, bundle: echo@1.0.0, parameters: {dsn: "${bundle.credentials.token}"}}
`},
			req:  Request{Stack: Reference{Name: "credparam"}},
			want: "${bundle.credentials.token} cannot be used in a parameter",
		},
		{
			name: "a promoted output the stack declares too",
			stacks: []string{`name: twice
version: 1.0.0
outputs: [{name: url}]
dependencies:
  requires:
  - {name: app, bundle: echo@1.0.0, outputs: {url: "${outputs.dsn}"}}
`},
			req:  Request{Stack: Reference{Name: "twice"}},
			want: `dependencies.requires[0].outputs.url: the stack's outputs already declare "url"`,
		},
		{
			name: "an interface parameter of another type",
			stacks: []string{`name: typed
version: 1.0.0
dependencies:
  requires:
  - name: dns
    bundle: {reference: dns@1.2.3, interface: {parameters: [{name: cname, type: integer}]}}
    parameters: {cname: 3}
`},
			req:  Request{Stack: Reference{Name: "typed"}},
			want: "dependency dns: stack dns@1.2.3 does not satisfy the dependency (its interface and the outputs its wiring reads): parameter cname is of type string, not integer",
		},
		{
			name: "an unknown root parameter",
			req:  Request{Stack: Reference{Name: "operator"}, Parameters: map[string]any{"nope": 1}},
			want: "parameter nope: stack operator@1.0.0 has no such parameter (it declares none)",
		},
		{
			name: "answers for a path that installs nothing",
			req:  Request{Stack: Reference{Name: "operator"}, Inputs: map[string]Inputs{"fluxx": {Parameters: map[string]any{"a": 1}}}},
			want: "answers for fluxx: the plan installs no dependency at that path",
		},
		{
			name: "an unknown --dependency path",
			req:  Request{Stack: Reference{Name: "operator"}, Overrides: []Override{{Path: "flx", Stack: &Reference{Name: "flux", Version: "2.1.3"}}}},
			want: "--dependency flx: the graph has no dependency at that path",
		},
		{
			name: "a --dependency installation with sharing mode none",
			req:  Request{Stack: Reference{Name: "operator"}, Overrides: []Override{{Path: "flux", Installation: &InstallationRef{Kind: "Flux", Name: "private"}}}},
			want: "--dependency flux=Flux/private: the installation's sharing mode is none",
		},
		{
			name: "a --dependency installation of another namespace",
			req:  Request{Stack: Reference{Name: "operator"}, Overrides: []Override{{Path: "flux", Installation: &InstallationRef{Kind: "Flux", Namespace: "other", Name: "flux"}}}},
			want: "--dependency flux=other/Flux/flux: installation other/Flux/flux is in namespace other: a dependency of dev/root is satisfied from namespace dev or global only",
		},
		{
			name: "a --dependency that does not satisfy the interface",
			req:  Request{Stack: Reference{Name: "sql-app"}, Overrides: []Override{{Path: "sqlserver", Stack: &Reference{Name: "redis", Version: "1.0.2"}}}},
			want: "--dependency sqlserver=redis@1.0.2: the stack does not satisfy the dependency's interface: no output with $id azure-sql-server-connection-string",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			stacks := slices.Clone(base)
			for _, d := range tc.stacks {
				stacks = append(stacks, stackYAML(t, d))
			}
			cat := &MemCatalog{stacks: map[Reference]*Stack{}, versions: map[string][]string{}}
			for _, s := range stacks {
				// Bypass Add's validation: the resolver must catch these too.
				cat.stacks[s.Ref()] = s
				cat.versions[s.Name] = append(cat.versions[s.Name], s.Version)
			}
			idx := NewIndex()
			idx.Put(existing(stacks[1], "dev", "private", InstallationSharing{Mode: SharingNone}))
			inst := newMemInstaller(cat, idx)
			tc.req.Namespace, tc.req.Name, tc.req.RootID = "dev", "root", "root-id"
			p, err := (&Resolver{Catalog: cat, Installations: idx}).Plan(context.Background(), tc.req)
			if err == nil {
				_, err = (&Executor{Installer: inst}).Run(context.Background(), p)
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v\nwant it to contain %q", err, tc.want)
			}
			if tc.as != nil {
				switch target := tc.as.(type) {
				case **CycleError:
					if !errors.As(err, target) {
						t.Errorf("not a *CycleError: %T", err)
					}
				case **DanglingError:
					if !errors.As(err, target) {
						t.Errorf("not a *DanglingError: %T", err)
					}
				case **NoCandidateError:
					if !errors.As(err, target) {
						t.Errorf("not a *NoCandidateError: %T", err)
					}
				}
			}
			if got := inst.keys(); len(got) != 0 {
				t.Fatalf("installed %v", got)
			}
			// The catalog's own check refuses the bad definitions that a
			// stack can be judged on alone.
			for _, d := range tc.stacks {
				s := stackYAML(t, d)
				_, err := NewMemCatalog(s)
				if strings.HasPrefix(tc.want, "dependencies.") && (err == nil || !strings.Contains(err.Error(), tc.want)) {
					t.Errorf("catalog accepted %s: %v", s.Ref(), err)
				}
			}
		})
	}
}

func TestUnmappedInputs(t *testing.T) {
	stacks := append(seedStacks(t),
		stackYAML(t, `{name: cluster, version: 1.0.0, credentials: [{name: admin-kubeconfig, $id: "https://getporter.org/interfaces#kubernetes.config.cluster-admin", type: cap.type.kubeconfig}, {name: token, description: "API token"}], outputs: [{name: api}]}`),
		stackYAML(t, `name: platform
version: 1.0.0
parameters: {properties: {region: {type: string}}, required: [region]}
credentials: [{name: kubeconfig}]
dependencies:
  requires:
  - name: cluster
    bundle:
      reference: cluster@1.0.0
      interface:
        credentials: [{name: kubeconfig, $id: "https://getporter.org/interfaces#kubernetes.config.cluster-admin"}]
    credentials: {kubeconfig: "${bundle.credentials.kubeconfig}"}
  - {name: dns, bundle: dns@1.2.3}
`))
	cat := catalog(t, stacks...)
	r := &Resolver{Catalog: cat, Installations: NewIndex()}
	req := Request{Namespace: "dev", Name: "plat", RootID: "r", Stack: Reference{Name: "platform"}, Credentials: map[string]string{"kubeconfig": "dev/admin-kubeconfig"}}
	p, err := r.Plan(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	// The kubeconfig reaches admin-kubeconfig through the interface's $id.
	if v := nodeByPath(t, p, "cluster").Credentials["admin-kubeconfig"]; v.Credential != "dev/admin-kubeconfig" {
		t.Fatalf("admin-kubeconfig: %+v", v)
	}
	var got []string
	for _, u := range p.Unmapped {
		got = append(got, u.String())
	}
	want := []string{
		"cluster credential token of " + nodeByPath(t, p, "cluster").Key,
		"dns parameter cname of " + nodeByPath(t, p, "dns").Key + " (string)",
		"(root) parameter region of dev/plat (string)",
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("unmapped %q\nwant %q", got, want)
	}
	err = p.Ready()
	if !errors.Is(err, ErrUnmapped) {
		t.Fatalf("ready: %v", err)
	}
	inst := newMemInstaller(cat, nil)
	if _, err := (&Executor{Installer: inst}).Run(context.Background(), p); !errors.Is(err, ErrUnmapped) || len(inst.keys()) != 0 {
		t.Fatalf("run: %v, installed %v", err, inst.keys())
	}
	// Answers complete it.
	req.Parameters = map[string]any{"region": "eu"}
	req.Inputs = map[string]Inputs{"cluster": {Credentials: map[string]string{"token": "dev/token"}}, "dns": {Parameters: map[string]any{"cname": "plat"}}}
	if p, err = r.Plan(context.Background(), req); err != nil || p.Ready() != nil {
		t.Fatalf("%v %v", err, p.Ready())
	}
	// A missing credential of the root, passed on to a dependency.
	req.Credentials = nil
	if p, err = r.Plan(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if err := p.Ready(); err == nil || !strings.Contains(err.Error(), "cluster credential admin-kubeconfig of dev/cluster-") || !strings.Contains(err.Error(), "(root) credential kubeconfig of dev/plat") {
		t.Fatalf("ready: %v", err)
	}
}

// The text form names every candidate it weighed; one with no installation
// name (none found) reads "installation: none ..." without an empty name.
func TestPlanTextCandidateWithoutName(t *testing.T) {
	cat := catalog(t, seedStacks(t)...)
	r := &Resolver{Catalog: cat, Installations: NewIndex()}
	p, err := r.Plan(context.Background(), Request{Namespace: "dev", Name: "svc1", RootID: "root-1", Stack: Reference{Name: "svc"}})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := p.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	text := b.String()
	if !strings.Contains(text, "- installation: none in dev or global") || strings.Contains(text, "installation :") {
		t.Errorf("plan text:\n%s", text)
	}
}
