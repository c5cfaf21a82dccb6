package deps

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// bigGraph: a root needing 10 stacks that each need 100 leaf stacks with
// their own parameters and ten shared ones (1,021 nodes); every tenth leaf reads the previous
// one's output. The index holds installations of the leaves in 100
// namespaces and the global one.
func bigGraph(b *testing.B, installations int) (*MemCatalog, *Index, Request) {
	var stacks []*Stack
	for j := range 100 {
		for _, v := range []string{"1.0.0", "1.1.0"} {
			stacks = append(stacks, stackYAML(b, fmt.Sprintf(`{name: leaf-%d, version: %s, parameters: {properties: {i: {type: integer}, prev: {type: string}}}, outputs: [{name: out}]}`, j, v)))
		}
	}
	var root strings.Builder
	root.WriteString("name: big\nversion: 1.0.0\ndependencies:\n  requires:\n")
	for i := range 10 {
		var mid strings.Builder
		fmt.Fprintf(&mid, "name: mid-%d\nversion: 1.0.0\ndependencies:\n  requires:\n", i)
		for j := range 100 {
			fmt.Fprintf(&mid, "  - {name: d%d, bundle: {reference: leaf-%d@1.0.0, version: 1.x}, parameters: {i: %d", j, j, i)
			if j%10 == 9 {
				fmt.Fprintf(&mid, `, prev: "${bundle.dependencies.d%d.outputs.out}"`, j-1)
			}
			mid.WriteString("}}\n")
		}
		// Ten more without mappings: each reuses an existing installation,
		// found by the stack query.
		for j := range 10 {
			fmt.Fprintf(&mid, "  - {name: shared%d, bundle: {reference: leaf-%d@1.0.0, version: 1.x}}\n", j, j)
		}
		stacks = append(stacks, stackYAML(b, mid.String()))
		fmt.Fprintf(&root, "  - {name: m%d, bundle: mid-%d@1.0.0}\n", i, i)
	}
	stacks = append(stacks, stackYAML(b, root.String()))
	cat := catalog(b, stacks...)
	idx := NewIndex()
	for n := range installations {
		s := stacks[(n%100)*2]
		ns := fmt.Sprintf("ns-%d", n%101)
		if n%101 == 100 {
			ns = DefaultGlobalNamespace
		}
		idx.Put(existing(s, ns, fmt.Sprintf("inst-%d", n), InstallationSharing{}))
	}
	return cat, idx, Request{Namespace: "ns-0", Name: "big", RootID: "root", Stack: Reference{Name: "big"}}
}

// scanInstallations is the baseline: the same query answered by reading
// every installation.
type scanInstallations struct{ all []Installation }

func (s scanInstallations) Candidates(_ context.Context, q Query) ([]Installation, error) {
	var out []Installation
	for _, in := range s.all {
		if in.Namespace != q.Namespace || in.Sharing.Group != q.Group || !in.Sharing.Shareable() || q.Name != "" && in.Name != q.Name {
			continue
		}
		if q.Stack != "" && in.Stack.Name != q.Stack || q.InterfaceID != "" && in.provides() != q.InterfaceID {
			continue
		}
		if hasOutputs(in.Status.Outputs, q.OutputIDs, q.OutputNames) {
			out = append(out, in)
		}
	}
	return out, nil
}

func (s scanInstallations) Installation(context.Context, InstallationRef) (*Installation, error) {
	return nil, ErrNotFound
}

// BenchmarkResolvePlan resolves and plans a 1,021-node graph against
// 100,000 existing installations through the index (target: under 100 ms),
// and through a scan of every installation. Each reports its CPU time per
// plan and a ratio to a baseline planned in the same iterations (timer
// stopped): the index against no installations at all (what 100,000 cost),
// the scan against the index (what the index saves).
func BenchmarkResolvePlan(b *testing.B) {
	cat, idx, req := bigGraph(b, 100000)
	_, empty, _ := bigGraph(b, 0)
	var all []Installation
	for _, in := range idx.byKey {
		all = append(all, *in)
	}
	for _, tc := range []struct {
		name        string
		insts, base Installations
		ratio       string
	}{
		{"installations=100000/index", idx, empty, "x-no-installations"},
		{"installations=100000/scan", scanInstallations{all}, idx, "x-index"},
	} {
		b.Run(tc.name, func(b *testing.B) {
			r := &Resolver{Catalog: cat, Installations: tc.insts}
			base := &Resolver{Catalog: cat, Installations: tc.base}
			plan := func(r *Resolver) time.Duration {
				start := cpuTime()
				p, err := r.Plan(context.Background(), req)
				if err != nil {
					b.Fatal(err)
				}
				// With no installations, the ten dependencies without
				// mappings share the new leaves of the mapped ones.
				if r.Installations == idx && len(p.Nodes) != 1021 {
					b.Fatalf("%d nodes", len(p.Nodes))
				}
				// The machine is shared: CPU time does not depend on what
				// else runs.
				return cpuTime() - start
			}
			b.ReportAllocs()
			var cpu, baseCPU time.Duration
			for b.Loop() {
				cpu += plan(r)
				b.StopTimer()
				baseCPU += plan(base)
				b.StartTimer()
			}
			b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "cpu-ms/plan")
			b.ReportMetric(float64(cpu)/float64(baseCPU), tc.ratio)
		})
	}
}

// BenchmarkExecute50 runs a 50-node graph (7 independent branches of 7
// wired nodes, and the root) whose installs take 2 ms each, and reports the
// wall time against the sum of node times: the parallelism gained.
func BenchmarkExecute50(b *testing.B) {
	leaf := stackYAML(b, `{name: step, version: 1.0.0, parameters: {properties: {prev: {type: string}, id: {type: string}}}, outputs: [{name: out}]}`)
	var root strings.Builder
	root.WriteString("name: branches\nversion: 1.0.0\ndependencies:\n  requires:\n")
	for br := range 7 {
		for k := range 7 {
			fmt.Fprintf(&root, "  - {name: b%dk%d, bundle: step@1.0.0, sharing: {mode: none}, parameters: {id: b%dk%d", br, k, br, k)
			if k > 0 {
				fmt.Fprintf(&root, `, prev: "${bundle.dependencies.b%dk%d.outputs.out}"`, br, k-1)
			}
			root.WriteString("}}\n")
		}
	}
	cat := catalog(b, leaf, stackYAML(b, root.String()))
	const nodeTime = 2 * time.Millisecond
	var sum, wall time.Duration
	for i := 0; b.Loop(); i++ {
		inst := &timedInstaller{memInstaller: newMemInstaller(cat, nil), d: nodeTime}
		r := &Resolver{Catalog: cat, Installations: NewIndex()}
		p, err := r.Plan(context.Background(), Request{Namespace: "dev", Name: fmt.Sprintf("run-%d", i), RootID: "r", Stack: Reference{Name: "branches"}})
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		if _, err := (&Executor{Installer: inst, Parallelism: 8}).Run(context.Background(), p); err != nil {
			b.Fatal(err)
		}
		wall += time.Since(start)
		sum += time.Duration(inst.total.Load())
		if len(p.Nodes) != 50 || len(p.Levels) != 8 {
			b.Fatalf("%d nodes in %d levels", len(p.Nodes), len(p.Levels))
		}
	}
	b.ReportMetric(float64(wall.Microseconds())/1000/float64(b.N), "wall-ms/run")
	b.ReportMetric(float64(sum.Microseconds())/1000/float64(b.N), "sum-ms/run")
	b.ReportMetric(float64(sum)/float64(wall), "speedup")
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

type timedInstaller struct {
	*memInstaller
	d     time.Duration
	total atomic.Int64
}

func (t *timedInstaller) Install(ctx context.Context, req InstallRequest) (*Installed, error) {
	start := time.Now()
	time.Sleep(t.d)
	in, err := t.memInstaller.Install(ctx, req)
	t.total.Add(int64(time.Since(start)))
	return in, err
}
