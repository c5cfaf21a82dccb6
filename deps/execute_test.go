package deps

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

func planFor(t *testing.T, r *Resolver, req Request) *Plan {
	t.Helper()
	p, err := r.Plan(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Outputs flow through wiring templates: an unmanaged installation's
// output, matched by $id under another name, reaches a parameter, and a
// concatenating template renders.
func TestExecuteWiring(t *testing.T) {
	cat := catalog(t, seedStacks(t)...)
	idx := NewIndex()
	unmanaged := stackYAML(t, `{name: shared-dev-sql-server, version: 0.1.0, outputs: [{name: connection-string, $id: azure-sql-server-connection-string}]}`)
	idx.Put(existing(unmanaged, "dev", "office-sql", InstallationSharing{}))
	cloudsql, err := cat.Stack(context.Background(), Reference{Name: "cloudsql", Version: "5.7.0"})
	if err != nil {
		t.Fatal(err)
	}
	idx.Put(existing(cloudsql, "dev", "cloud-mysql", InstallationSharing{}))
	inst := newMemInstaller(cat, idx)
	inst.installs["dev/office-sql"] = &Installed{ID: "id-office", Stack: unmanaged.Ref(), Ready: true, Outputs: map[string]any{"connection-string": "Server=closet;Database=app"}}
	inst.installs["dev/cloud-mysql"] = &Installed{ID: "id-cloud", Stack: Reference{Name: "cloudsql", Version: "5.7.0"}, Ready: true, Outputs: map[string]any{"conn": "mysql://cloud:3306/db"}}
	r := &Resolver{Catalog: cat, Installations: idx}
	ex := &Executor{Installer: inst}

	p := planFor(t, r, Request{Namespace: "dev", Name: "sa", RootID: "r1", Stack: Reference{Name: "sql-app"}})
	res, err := ex.Run(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	app := nodeByPath(t, p, "app")
	if got := inst.requests[app.Key].Parameters["dsn"]; got != "Server=closet;Database=app" {
		t.Fatalf("dsn %v", got)
	}
	if !slices.Equal(res.Reused, []string{"dev/office-sql"}) || len(res.Installed) != 2 {
		t.Fatalf("result %+v", res)
	}
	// The root's uses edges name its dependencies.
	if got := inst.requests["dev/sa"].Uses; !slices.Equal(got, []string{app.Key, "dev/office-sql"}) {
		t.Fatalf("uses %v", got)
	}

	p = planFor(t, r, Request{Namespace: "dev", Name: "ma", RootID: "r2", Stack: Reference{Name: "mysql-app"}})
	if _, err := ex.Run(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	// Its app maps other parameters than sql-app's, so sql-app's echo
	// installation is not reused for it.
	if n := nodeByPath(t, p, "app"); n.Action != ActionInstall || !slices.ContainsFunc(n.Candidates, func(c Candidate) bool {
		return !c.Chosen && strings.Contains(c.Reason, "reuses only an installation made from the same definition")
	}) {
		t.Fatalf("app: %s %+v", n.Action, n.Candidates)
	}
	if got := inst.requests[nodeByPath(t, p, "app").Key].Parameters["dsn"]; got != "jdbc:mysql://cloud:3306/db?ssl=true" {
		t.Fatalf("dsn %v", got)
	}
	wiring := slices.IndexFunc(p.Edges, func(e Edge) bool {
		return e.Kind == "wiring" && e.From == "dev/cloud-mysql" && slices.Equal(e.Via, []string{"parameters.dsn"})
	})
	if wiring < 0 {
		t.Fatalf("no wiring edge in %+v", p.Edges)
	}
}

// The seed's example: outputs wired into credentials and parameters of a
// sibling, and promoted to the parent's outputs with concatenation.
func TestExecutePromotedOutputsAndCredentials(t *testing.T) {
	stacks := []*Stack{
		stackYAML(t, `{name: myinfra, version: 0.1.0, parameters: {properties: {database: {type: string}, logLevel: {type: string}}}, credentials: [{name: token}], outputs: [{name: mysql-connstr}, {name: ip}]}`),
		stackYAML(t, `{name: myapp, version: 1.2.3, parameters: {properties: {logLevel: {type: string}}}, credentials: [{name: db-connstr}], outputs: [{name: port}]}`),
		stackYAML(t, `name: env
version: 1.0.0
parameters: {properties: {logLevel: {type: string}}}
credentials: [{name: token}]
dependencies:
  requires:
  - name: infra
    bundle: {reference: "myinfra:v0.1.0"}
    sharing: {mode: group, group: {name: myapp}}
    credentials: {token: "${bundle.credentials.token}"}
    parameters: {database: myenvdb, logLevel: "${bundle.parameters.logLevel}"}
  - name: app
    bundle: {reference: "myapp:v1.2.3"}
    sharing: {mode: group, group: {name: myapp}}
    credentials: {db-connstr: "${bundle.dependencies.infra.outputs.mysql-connstr}"}
    parameters: {logLevel: "${bundle.parameters.logLevel}"}
    outputs: {endpoint: "https://${bundle.dependencies.infra.outputs.ip}:${outputs.port}/myapp"}
`),
	}
	cat := catalog(t, stacks...)
	idx := NewIndex()
	inst := newMemInstaller(cat, idx)
	const secret = "mysql://root:hunter2@db"
	// The infra's connection string output is a secret: it must reach the
	// app's credential and nothing else.
	inst.beforeAdd = nil
	var events []Event
	var emu sync.Mutex
	ex := &Executor{Installer: secretOutputs{inst, map[string]any{"mysql-connstr": secret, "ip": "10.0.0.7"}}, Progress: func(e Event) {
		emu.Lock()
		events = append(events, e)
		emu.Unlock()
	}}
	r := &Resolver{Catalog: cat, Installations: idx}
	p := planFor(t, r, Request{Namespace: "dev", Name: "env", RootID: "r", Stack: Reference{Name: "env"},
		Parameters: map[string]any{"logLevel": "debug"}, Credentials: map[string]string{"token": "dev/api-token"}})
	res, err := ex.Run(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	infra, app := nodeByPath(t, p, "infra"), nodeByPath(t, p, "app")
	if !slices.Equal(p.Levels[0], []string{infra.Key}) || !slices.Equal(p.Levels[1], []string{app.Key}) {
		t.Fatalf("levels %v", p.Levels)
	}
	ir := inst.requests[infra.Key]
	if ir.Parameters["logLevel"] != "debug" || ir.Parameters["database"] != "myenvdb" || ir.Credentials["token"].Ref != "dev/api-token" {
		t.Fatalf("infra request %+v", ir)
	}
	ar := inst.requests[app.Key]
	if ar.Credentials["db-connstr"].Value != secret {
		t.Fatalf("app credential not wired")
	}
	if got := inst.requests["dev/env"].Outputs["endpoint"]; got != "https://10.0.0.7:port@"+app.Name+"/myapp" {
		t.Fatalf("endpoint %v", got)
	}
	var text strings.Builder
	if err := p.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	pj, _ := json.Marshal(p)
	py, err := yaml.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	ej, _ := json.Marshal(events)
	rj, _ := json.Marshal(res)
	reqj, _ := json.Marshal(ar)
	shown := fmt.Sprintf("%v %+v %#v", ar.Credentials, ar.Credentials, ar.Credentials["db-connstr"])
	for what, s := range map[string]string{"plan text": text.String(), "plan JSON": string(pj), "plan YAML": string(py), "events": string(ej), "result": string(rj), "request JSON": string(reqj), "formatted": shown} {
		if strings.Contains(s, "hunter2") {
			t.Errorf("%s shows the credential: %s", what, s)
		}
	}
	for _, want := range []string{"credential token <- credential instance dev/api-token", "credential db-connstr <- ${bundle.dependencies.infra.outputs.mysql-connstr} (at run time)", "Wiring:", "why: "} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("plan text lacks %q:\n%s", want, text.String())
		}
	}
}

// secretOutputs gives installations of myinfra fixed outputs.
type secretOutputs struct {
	*memInstaller
	outs map[string]any
}

func (s secretOutputs) Install(ctx context.Context, req InstallRequest) (*Installed, error) {
	in, err := s.memInstaller.Install(ctx, req)
	if err == nil && req.Stack.Name == "myinfra" {
		s.mu.Lock()
		for k, v := range s.outs {
			s.installs[req.Namespace+"/"+req.Name].Outputs[k] = v
			in.Outputs[k] = v
		}
		s.mu.Unlock()
	}
	return in, err
}

func fanStacks(t testing.TB, n int) []*Stack {
	leaf := stackYAML(t, `{name: leaf, version: 1.0.0, parameters: {properties: {i: {type: integer}}}, outputs: [{name: i}]}`)
	var b strings.Builder
	b.WriteString("name: fan\nversion: 1.0.0\ndependencies:\n  requires:\n")
	for i := range n {
		fmt.Fprintf(&b, "  - {name: d%02d, bundle: leaf@1.0.0, parameters: {i: %d}, sharing: {mode: none}}\n", i, i)
	}
	return []*Stack{leaf, stackYAML(t, b.String())}
}

// A failure stops the run and names the node; a second run resumes,
// skipping what completed.
func TestExecuteFailureAndResume(t *testing.T) {
	cat := catalog(t, fanStacks(t, 6)...)
	idx := NewIndex()
	inst := newMemInstaller(cat, idx)
	inst.fail["f-d03"] = errors.New("quota exceeded")
	var mu sync.Mutex
	phases := map[string]Phase{}
	ex := &Executor{Installer: inst, Parallelism: 1, Progress: func(e Event) {
		mu.Lock()
		phases[e.Node] = e.Phase
		mu.Unlock()
	}}
	r := &Resolver{Catalog: cat, Installations: idx}
	req := Request{Namespace: "dev", Name: "f", RootID: "root-f", Stack: Reference{Name: "fan"}}
	_, err := ex.Run(context.Background(), planFor(t, r, req))
	var ne *NodeError
	if !errors.As(err, &ne) || ne.Node != "dev/f-d03" || ne.Path != "d03" || !strings.Contains(err.Error(), "quota exceeded") {
		t.Fatalf("error %v", err)
	}
	// Parallelism 1 runs in key order: d00..d02 done, d03 failed, the rest
	// and the root never started.
	if got := inst.keys(); !slices.Equal(got, []string{"dev/f-d00", "dev/f-d01", "dev/f-d02"}) {
		t.Fatalf("installed %v", got)
	}
	if phases["dev/f-d03"] != PhaseFailed || phases["dev/f-d04"] != PhaseCanceled || phases["dev/f"] != PhaseCanceled {
		t.Fatalf("phases %v", phases)
	}
	delete(inst.fail, "f-d03")
	res, err := ex.Run(context.Background(), planFor(t, r, req))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Skipped, []string{"dev/f-d00", "dev/f-d01", "dev/f-d02"}) || len(res.Installed) != 4 {
		t.Fatalf("resume: %+v", res)
	}
	if phases["dev/f-d00"] != PhaseSkipped {
		t.Fatalf("phases %v", phases)
	}
	if len(inst.keys()) != 7 {
		t.Fatalf("installed %v", inst.keys())
	}
}

// Independent nodes run in parallel, within the bound.
func TestExecuteParallel(t *testing.T) {
	cat := catalog(t, fanStacks(t, 12)...)
	inst := newMemInstaller(cat, nil)
	inst.delay = 20 * time.Millisecond
	r := &Resolver{Catalog: cat, Installations: NewIndex()}
	p := planFor(t, r, Request{Namespace: "dev", Name: "f", RootID: "root", Stack: Reference{Name: "fan"}})
	if len(p.Levels) != 2 || len(p.Levels[0]) != 12 {
		t.Fatalf("levels %v", p.Levels)
	}
	if _, err := (&Executor{Installer: inst, Parallelism: 5}).Run(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	if got := inst.maxPar.Load(); got < 2 || got > 5 {
		t.Fatalf("at most %d ran at once, want 2..5", got)
	}
	if inst.order[len(inst.order)-1] != "dev/f" {
		t.Fatalf("root not last: %v", inst.order)
	}
}

// Two installs racing to create the same shared dependency create it once
// and both use it.
func TestExecuteRaceOnSharedDependency(t *testing.T) {
	stacks := append(seedStacks(t), stackYAML(t, `name: op2
version: 1.0.0
dependencies:
  requires:
  - name: flux
    bundle: {reference: "flux@2.1.3", version: 2.x}
`))
	cat := catalog(t, stacks...)
	idx := NewIndex()
	inst := newMemInstaller(cat, idx)
	// Both reach Install of the shared flux before either commits.
	var arrived sync.WaitGroup
	arrived.Add(2)
	inst.beforeAdd = func(req InstallRequest) {
		if req.Stack.Name == "flux" {
			arrived.Done()
			arrived.Wait()
		}
	}
	r := &Resolver{Catalog: cat, Installations: idx}
	p1 := planFor(t, r, Request{Namespace: "dev", Name: "op", RootID: "r1", Stack: Reference{Name: "operator"}})
	p2 := planFor(t, r, Request{Namespace: "dev", Name: "op2", RootID: "r2", Stack: Reference{Name: "op2"}})
	f1, f2 := nodeByPath(t, p1, "flux"), nodeByPath(t, p2, "flux")
	if f1.Key != f2.Key || f1.Action != ActionInstall {
		t.Fatalf("the two plans name the shared flux differently: %s %s", f1.Key, f2.Key)
	}
	var wg sync.WaitGroup
	results := make([]*Result, 2)
	errs := make([]error, 2)
	for i, p := range []*Plan{p1, p2} {
		wg.Go(func() { results[i], errs[i] = (&Executor{Installer: inst}).Run(context.Background(), p) })
	}
	wg.Wait()
	if errs[0] != nil || errs[1] != nil {
		t.Fatal(errs)
	}
	installed := len(results[0].Installed) + len(results[1].Installed)
	reused := len(results[0].Reused) + len(results[1].Reused)
	if installed != 3 || reused != 1 {
		t.Fatalf("installed %d reused %d: %+v %+v", installed, reused, results[0], results[1])
	}
	if got := inst.keys(); !slices.Equal(got, []string{f1.Key, "dev/op", "dev/op2"}) {
		t.Fatalf("installations %v", got)
	}
	for _, root := range []string{"dev/op", "dev/op2"} {
		if !slices.Contains(inst.requests[root].Uses, f1.Key) {
			t.Fatalf("%s does not use %s", root, f1.Key)
		}
	}
}

// A credential written literally in stack.yaml reaches the installation
// and is not shown in the plan.
func TestLiteralCredentialHidden(t *testing.T) {
	cat := catalog(t,
		stackYAML(t, `{name: api, version: 1.0.0, credentials: [{name: key}]}`),
		stackYAML(t, `{name: front, version: 1.0.0, dependencies: {requires: [{name: api, bundle: api@1.0.0, credentials: {key: "literal-Zq9"}}]}}`))
	inst := newMemInstaller(cat, nil)
	p := planFor(t, &Resolver{Catalog: cat, Installations: NewIndex()}, Request{Namespace: "dev", Name: "front", RootID: "r", Stack: Reference{Name: "front"}})
	if _, err := (&Executor{Installer: inst}).Run(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	if got := inst.requests[nodeByPath(t, p, "api").Key].Credentials["key"].Value; got != "literal-Zq9" {
		t.Fatalf("key %v", got)
	}
	var text strings.Builder
	_ = p.WriteText(&text)
	j, _ := json.Marshal(p)
	if strings.Contains(text.String()+string(j), "Zq9") {
		t.Fatalf("plan shows the credential:\n%s\n%s", text.String(), j)
	}
}

// An installation that appears under a shared node's name between the
// plan and the run stands for it only if it is in range.
func TestExecuteSharedNameTakenOutOfRange(t *testing.T) {
	cat := catalog(t, seedStacks(t)...)
	inst := newMemInstaller(cat, nil)
	p := planFor(t, &Resolver{Catalog: cat, Installations: NewIndex()}, Request{Namespace: "dev", Name: "op", RootID: "r1", Stack: Reference{Name: "operator"}})
	flux := nodeByPath(t, p, "flux")
	inst.installs[flux.Key] = &Installed{ID: "x", Stack: Reference{Name: "flux", Version: "3.0.0"}, RootID: "someone-else", Ready: true}
	_, err := (&Executor{Installer: inst}).Run(context.Background(), p)
	if err == nil || !strings.Contains(err.Error(), "exists at flux@3.0.0, outside the range 2.x of dependency flux") {
		t.Fatalf("error %v", err)
	}
	if _, ok := inst.requests["dev/op"]; ok {
		t.Fatal("the root was installed")
	}
	// In range, it is shared.
	inst.installs[flux.Key].Stack.Version = "2.1.3"
	res, err := (&Executor{Installer: inst}).Run(context.Background(), p)
	if err != nil || !slices.Equal(res.Reused, []string{flux.Key}) {
		t.Fatalf("%+v %v", res, err)
	}
}

// Seed 002 "Installation Resource": an installation whose sharing mode the
// user set to none ("break glass") satisfies no other installation's
// dependency, even under the name a new shared installation of the same
// definition would get. The install that created it keeps it.
func TestExecuteSharedNameTakenBySharingModeNone(t *testing.T) {
	cat := catalog(t, seedStacks(t)...)
	inst := newMemInstaller(cat, nil)
	r := &Resolver{Catalog: cat, Installations: NewIndex()}
	first := planFor(t, r, Request{Namespace: "dev", Name: "op", RootID: "r0", Stack: Reference{Name: "operator"}})
	if _, err := (&Executor{Installer: inst}).Run(context.Background(), first); err != nil {
		t.Fatal(err)
	}
	flux := nodeByPath(t, first, "flux")
	inst.installs[flux.Key].Sharing = InstallationSharing{Mode: SharingNone} // edited by hand
	// Skipped as installed already, or reused as another install's.
	for _, ready := range []bool{true, false} {
		inst.installs[flux.Key].Ready = ready
		p := planFor(t, r, Request{Namespace: "dev", Name: "op2", RootID: "r1", Stack: Reference{Name: "operator"}})
		if err := (&Executor{Installer: inst}).Preview(context.Background(), p); err != nil {
			t.Fatal(err)
		}
		n := nodeByPath(t, p, "flux")
		want := "installation " + flux.Key + " exists with sharing mode none"
		if n.Key != flux.Key || n.Change != ChangeFail || !strings.Contains(n.ChangeReason, want) {
			t.Fatalf("ready %v: preview of %s: %s %q, want fail %q", ready, n.Key, n.Change, n.ChangeReason, want)
		}
		_, err := (&Executor{Installer: inst}).Run(context.Background(), p)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "--dependency flux=") {
			t.Fatalf("ready %v: run: %v, want %q", ready, err, want)
		}
		if _, ok := inst.requests["dev/op2"]; ok {
			t.Fatal("the root was installed")
		}
	}
	// The install that created it still has it.
	inst.installs[flux.Key].Ready = true
	res, err := (&Executor{Installer: inst}).Run(context.Background(), first)
	if err != nil || !slices.Contains(res.Skipped, flux.Key) {
		t.Fatalf("%+v %v", res, err)
	}
}
