package stack

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// bigStack is a generated stack of n resources in groups of 10, each group
// a kustomize directory with its own kustomizeconfig.yaml: a network per
// group referenced by name (nameReference) from 9 instances whose region
// is a var, as minimal-gcp is written but 25 times larger.
func bigStack(n int) map[string]string {
	files := map[string]string{
		"stack.yaml": `name: big
version: 1.0.0
kind:
  group: big.stacks.example.com
  version: v1
  names: {kind: Big}
  parameters:
    type: object
    required: [region]
    properties:
      region: {type: string}
vars:
- {name: REGION, fieldPath: spec.region}
readiness:
- match: {kind: Instance}
  type: NonEmpty
  fieldPath: spec.region
`,
	}
	var groups []string
	for g := 0; g*10 < n; g++ {
		dir := fmt.Sprintf("resources/group%02d", g)
		groups = append(groups, fmt.Sprintf("group%02d", g))
		files[dir+"/kustomization.yaml"] = "resources:\n- network.yaml\n- instances.yaml\nconfigurations:\n- kustomizeconfig.yaml\n"
		files[dir+"/kustomizeconfig.yaml"] = `nameReference:
- kind: Network
  fieldSpecs:
  - {path: spec/networkRef/name, kind: Instance}
varReference:
- {path: spec/region, kind: Instance}
- {path: spec/region, kind: Network}
`
		files[dir+"/network.yaml"] = fmt.Sprintf("apiVersion: compute.example.com/v1\nkind: Network\nmetadata:\n  name: net-%02d\nspec:\n  region: $(REGION)\n  cidr: 10.%d.0.0/16\n", g, g)
		var b strings.Builder
		for i := 1; i < 10 && g*10+i < n; i++ {
			fmt.Fprintf(&b, "---\napiVersion: compute.example.com/v1\nkind: Instance\nmetadata:\n  name: vm-%02d-%d\n  labels: {tier: t%d}\nspec:\n  region: $(REGION)\n  machineType: e2-small\n  networkRef: {name: net-%02d}\n  disks:\n  - {size: 10, type: pd-ssd}\n", g, i, i%3, g)
		}
		files[dir+"/instances.yaml"] = b.String()
	}
	files["resources/kustomization.yaml"] = "resources:\n- " + strings.Join(groups, "\n- ") + "\n"
	return files
}

func TestBigStack(t *testing.T) {
	s := mustLoad(t, writeTree(t, bigStack(200)))
	rs := mustRender(t, s, s.NewInstallation("default", "b", "", nil, map[string]any{"region": "us-east1"}))
	if len(rs) != 200 {
		t.Fatalf("%d resources", len(rs))
	}
	vm := find(t, rs, "Instance", "vm-07-3")
	if get(t, vm, "spec.networkRef.name") != "b-net-07" || get(t, vm, "spec.region") != "us-east1" {
		t.Errorf("vm-07-3: %v", vm.Object["spec"])
	}
}

// BenchmarkRender200 renders a 200-resource stack in process and, in the
// same iterations, runs `kubectl kustomize` (kubectl bundles kustomize) on
// the same package and overlay written to disk: the requirement is cairn
// no slower. It also times kustomize alone in process on the same files,
// to show what cairn adds around it.
func BenchmarkRender200(b *testing.B) {
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		b.Skip("no kubectl")
	}
	s := mustLoad(b, writeTree(b, bigStack(200)))
	inst := s.NewInstallation("default", "bench", "0f0e", map[string]string{"team": "perf"}, map[string]any{"region": "us-east1"})
	_, _, overlay, err := Renderer{}.prepare(context.Background(), s, inst)
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	writeFilesToDisk(b, dir, s.Files)
	writeFilesToDisk(b, dir, overlay)
	target := filepath.Join(dir, overlayDir)
	disk := filesys.MakeFsOnDisk()

	var cairnT, kubectlT, kustT time.Duration
	b.ResetTimer()
	for b.Loop() {
		t0 := time.Now()
		rs, err := Renderer{}.Render(context.Background(), s, inst)
		if err != nil || len(rs) != 200 {
			b.Fatalf("render: %d resources, %v", len(rs), err)
		}
		t1 := time.Now()
		out, err := exec.Command(kubectl, "kustomize", target).Output()
		if err != nil || strings.Count(string(out), "\nkind: ")+1 < 200 {
			b.Fatalf("kubectl kustomize: %v", err)
		}
		t2 := time.Now()
		m, err := runKustomize(disk, target)
		if err != nil || m.Size() != 201 {
			b.Fatalf("kustomize in process: %v", err)
		}
		t3 := time.Now()
		cairnT += t1.Sub(t0)
		kubectlT += t2.Sub(t1)
		kustT += t3.Sub(t2)
	}
	n := float64(b.N)
	b.ReportMetric(float64(cairnT.Nanoseconds())/n, "cairn-ns/render")
	b.ReportMetric(float64(kubectlT.Nanoseconds())/n, "kubectl-ns/render")
	b.ReportMetric(float64(kustT.Nanoseconds())/n, "krusty-disk-ns/render")
	// Above 1: kubectl kustomize is slower than cairn's render.
	b.ReportMetric(float64(kubectlT)/float64(cairnT), "kubectl/cairn")
	// cairn's render over kustomize alone on disk (validation, overlay, conversion).
	b.ReportMetric(float64(cairnT)/float64(kustT), "cairn/krusty")
}
