package stack

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/yaml"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/schema"
)

func TestRenderGolden(t *testing.T) {
	gcp := mustLoad(t, minimalGCP)
	flags := mustLoad(t, flagsEnv)
	tests := []struct {
		name  string
		s     *Stack
		inst  Installation
		count int
	}{
		{"minimal-gcp", gcp, gcp.NewInstallation("default", "small-infra", "34646233-f58e-4c99-b0a8-0d766533b12c",
			map[string]string{"foo-key": "bar-value"},
			map[string]any{"region": "us-west2", "projectID": "foo-project"}), 8},
		{"minimal-gcp-keep-defaulting", gcp, gcp.NewInstallation("infra", "prod", "",
			nil, map[string]any{"region": "europe-west9", "projectID": "acme-prod", "keepDefaultingLabels": true,
				"credentialsSecretRef": map[string]any{"name": "gcp-sa", "namespace": "infra", "key": "key.json"}}), 8},
		{"flags-env", flags, flags.NewInstallation("default", "moonshots", "", map[string]string{"team": "moonshots"},
			map[string]any{"team": "moonshots", "newProject": true}), 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rs := mustRender(t, tt.s, tt.inst)
			if len(rs) != tt.count {
				t.Errorf("rendered %d resources, want %d", len(rs), tt.count)
			}
			got := encode(t, rs)
			golden(t, tt.name, got)
			// The same input gives the same bytes.
			if again := encode(t, mustRender(t, tt.s, tt.inst)); again != got {
				t.Error("a second render differs from the first")
			}
		})
	}
}

// TestRenderMinimalGCP checks seed 004's example resource field by field.
func TestRenderMinimalGCP(t *testing.T) {
	s := mustLoad(t, minimalGCP)
	inst := s.NewInstallation("default", "minimal-setup", "34646233-f58e-4c99-b0a8-0d766533b12c",
		map[string]string{"foo-key": "bar-value"}, map[string]any{"region": "us-west2", "projectID": "foo-project"})
	rs := mustRender(t, s, inst)
	sql := find(t, rs, "CloudSQLInstanceClass", "cloudsqlinstance-mysql")
	want := map[string]any{
		"metadata.name":                            "minimal-setup-cloudsqlinstance-mysql",
		"metadata.namespace":                       "default",
		"metadata.labels.foo-key":                  "bar-value",
		`metadata.labels["stacks.cairn.dev/name"]`: "minimal-setup",
		`metadata.labels["stacks.cairn.dev/uid"]`:  "34646233-f58e-4c99-b0a8-0d766533b12c",
		"specTemplate.forProvider.region":          "us-west2",
		"specTemplate.forProvider.settings.ipConfiguration.privateNetworkRef.name": "minimal-setup-network",
		"specTemplate.providerRef.name":                                            "minimal-setup-gcp-provider",
	}
	for p, w := range want {
		if got := get(t, sql, p); got != w {
			t.Errorf("CloudSQLInstanceClass %s = %v, want %v", p, got, w)
		}
	}
	// keepDefaultingLabels defaults to false: the defaulting mark is gone.
	if _, ok := sql.Object["metadata"].(map[string]any)["annotations"]; ok {
		t.Errorf("annotations kept with keepDefaultingLabels false: %v", sql.Annotations())
	}
	prov := find(t, rs, "Provider", "gcp-provider")
	if got := get(t, prov, "spec.credentialsSecretRef.name"); got != "gcp-credentials" {
		t.Errorf("credentials secret from the schema default = %v", got)
	}
	if got := get(t, prov, "spec.projectID"); got != "foo-project" {
		t.Errorf("projectID = %v", got)
	}
	conn := find(t, rs, "Connection", "connection")
	if got := get(t, conn, "spec.forProvider.reservedPeeringRangeRefs[0].name"); got != "minimal-setup-private-ip-range" {
		t.Errorf("nameReference into a list = %v", got)
	}
	gke := find(t, rs, "GKEClusterClass", "gkecluster")
	if got := get(t, gke, "specTemplate.forProvider.subnetworkRef.name"); got != "minimal-setup-subnetwork" {
		t.Errorf("subnetworkRef = %v", got)
	}
	for _, r := range rs {
		if strings.Contains(encode(t, []Resource{r}), "$(") {
			t.Errorf("%s keeps an unresolved var:\n%s", r.Key(), encode(t, []Resource{r}))
		}
		if r.Labels()[LabelName] != "minimal-setup" || r.Labels()["foo-key"] != "bar-value" {
			t.Errorf("%s labels %v", r.Key(), r.Labels())
		}
		if r.Kind() == "MinimalGCP" {
			t.Errorf("the installation object is in the output")
		}
	}
}

func TestRenderVarsReplacementsNameReference(t *testing.T) {
	s := mustLoad(t, writeTree(t, webStack()))
	inst := s.NewInstallation("shop", "blue", "u-1", map[string]string{"env": "prod"},
		map[string]any{"image": "nginx:1.27", "domain": "shop.example.org"})
	rs := mustRender(t, s, inst)
	if len(rs) != 5 {
		t.Fatalf("rendered %d resources, want 5:\n%s", len(rs), encode(t, rs))
	}
	dep := find(t, rs, "Deployment", "web")
	checks := []struct {
		r    Resource
		path string
		want any
	}{
		// Replacements from the installation object, the schema default kept a number.
		{dep, "spec.replicas", json.Number("2")},
		{dep, "spec.template.spec.containers[0].image", "nginx:1.27"},
		// Built-in nameReference: a ConfigMap referenced from a pod template.
		{dep, "spec.template.spec.containers[0].envFrom[0].configMapRef.name", "blue-settings"},
		// labels without selectors: the selector and the pod template stay.
		{dep, "spec.selector.matchLabels", map[string]any{"app": "web"}},
		{dep, "spec.template.metadata.labels", map[string]any{"app": "web"}},
		{dep, "metadata.labels", map[string]any{"app": "web", "env": "prod", LabelName: "blue", LabelUID: "u-1"}},
		{find(t, rs, "Service", "web"), "spec.selector", map[string]any{"app": "web"}},
		// Vars in a built-in varReference field and in declared ones.
		{dep, "spec.template.spec.containers[0].env[0].value", "shop.example.org"},
		{find(t, rs, "ConfigMap", "settings"), "data.URL", "https://shop.example.org/"},
		{find(t, rs, "Certificate", "cert"), "spec.dnsName", "www.shop.example.org"},
		// A nested default (tls.issuer) reaches a var.
		{find(t, rs, "Certificate", "cert"), "spec.issuer", "letsencrypt"},
		// Declared nameReference, and the built-in one of Ingress.
		{find(t, rs, "Certificate", "cert"), "spec.serviceRef.name", "blue-web"},
		{find(t, rs, "Ingress", "web"), "spec.rules[0].http.paths[0].backend.service.name", "blue-web"},
		{find(t, rs, "Ingress", "web"), "metadata.namespace", "shop"},
	}
	for _, c := range checks {
		if got := get(t, c.r, c.path); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s %s = %#v, want %#v", c.r.Kind(), c.path, got, c.want)
		}
	}
	// A replacement keeps the parameter's type.
	inst.Spec["replicas"] = 5
	rs = mustRender(t, s, inst)
	if got := get(t, find(t, rs, "Deployment", "web"), "spec.replicas"); got != json.Number("5") {
		t.Errorf("replicas = %#v, want 5", got)
	}
	// The caller's spec is not changed by defaulting.
	if _, ok := inst.Spec["domain"]; !ok {
		t.Fatal("test setup: domain missing")
	}
	if _, ok := inst.Spec["tls"]; ok {
		t.Error("Render wrote the defaults into the caller's spec")
	}
}

// TestRenderGeneratorsAndInlineTransformers: the package's own generator
// files and inline transformer configurations are allowed.
func TestRenderGeneratorsAndInlineTransformers(t *testing.T) {
	files := webStack()
	files["resources/kustomization.yaml"] += `configMapGenerator:
- name: nginx
  files: [conf/nginx.conf]
transformers:
- |
  apiVersion: builtin
  kind: AnnotationsTransformer
  metadata: {name: owner}
  annotations: {owner: platform}
  fieldSpecs: [{path: metadata/annotations, create: true}]
`
	files["resources/conf/nginx.conf"] = "worker_processes 1;\n"
	s := mustLoad(t, writeTree(t, files))
	rs := mustRender(t, s, s.NewInstallation("default", "g", "", nil, map[string]any{"image": "x"}))
	var cm Resource
	for _, r := range rs {
		if r.Kind() == "ConfigMap" && strings.HasPrefix(r.OriginalName, "nginx-") {
			cm = r
		}
	}
	if cm.Object == nil {
		t.Fatalf("no generated ConfigMap:\n%s", encode(t, rs))
	}
	if get(t, cm, `data["nginx.conf"]`) != "worker_processes 1;\n" || cm.Annotations()["owner"] != "platform" {
		t.Errorf("generated ConfigMap %v", cm.Object)
	}
}

func TestRenderLabels(t *testing.T) {
	s := mustLoad(t, writeTree(t, webStack()))
	inst := s.NewInstallation("default", "green", "", map[string]string{
		"team": "web", LabelName: "forged", "app.kubernetes.io/part-of": "shop"}, map[string]any{"image": "x"})
	for _, r := range mustRender(t, s, inst) {
		l := r.Labels()
		if l[LabelName] != "green" {
			t.Errorf("%s: %s = %q, an installation label must not override it", r.Key(), LabelName, l[LabelName])
		}
		if _, ok := l[LabelUID]; ok {
			t.Errorf("%s: uid label without a uid", r.Key())
		}
		if l["team"] != "web" || l["app.kubernetes.io/part-of"] != "shop" {
			t.Errorf("%s: labels %v", r.Key(), l)
		}
	}
}

func TestKeepDefaultingLabels(t *testing.T) {
	files := webStack()
	files["resources/app.yaml"] = strings.Replace(files["resources/app.yaml"], "kind: ConfigMap\nmetadata:\n  name: settings\n",
		"kind: ConfigMap\nmetadata:\n  name: settings\n  labels: {"+DefaultingKey+": \"true\", keep: me}\n  annotations: {"+DefaultingKey+": \"true\"}\n", 1)
	s := mustLoad(t, writeTree(t, files))
	for _, tt := range []struct {
		spec map[string]any
		keep bool
	}{
		{map[string]any{"image": "x"}, false},
		{map[string]any{"image": "x", "keepDefaultingLabels": false}, false},
		{map[string]any{"image": "x", "keepDefaultingLabels": true}, true},
		{map[string]any{"image": "x", "keepDefaultingAnnotations": true}, true},
	} {
		cm := find(t, mustRender(t, s, s.NewInstallation("default", "a", "", nil, tt.spec)), "ConfigMap", "settings")
		_, inLabels := cm.Labels()[DefaultingKey]
		_, inAnn := cm.Annotations()[DefaultingKey]
		if inLabels != tt.keep || inAnn != tt.keep {
			t.Errorf("spec %v: defaulting label %v annotation %v, want %v", tt.spec, inLabels, inAnn, tt.keep)
		}
		if cm.Labels()["keep"] != "me" {
			t.Errorf("spec %v: other labels removed: %v", tt.spec, cm.Labels())
		}
	}
}

// TestRenderPatchers shows both patcher interfaces at work, after the
// built-ins.
func TestRenderPatchers(t *testing.T) {
	s := mustLoad(t, writeTree(t, webStack()))
	r := Renderer{
		KustomizationPatchers: []KustomizationPatcher{KustomizationPatcherFunc(func(_ context.Context, inst Installation, k *types.Kustomization) error {
			k.NameSuffix = "-" + inst.Namespace
			k.CommonAnnotations = map[string]string{"owner": inst.Name}
			return nil
		})},
		ChildPatchers: []ChildResourcePatcher{ChildResourcePatcherFunc(func(_ context.Context, inst Installation, rs []Resource) ([]Resource, error) {
			return slices.DeleteFunc(rs, func(r Resource) bool { return r.Kind() == "Ingress" }), nil
		})},
	}
	rs, err := r.Render(context.Background(), s, s.NewInstallation("prod", "blue", "", nil, map[string]any{"image": "x"}))
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 4 {
		t.Fatalf("the child patcher's removal: %d resources", len(rs))
	}
	svc := find(t, rs, "Service", "web")
	if svc.Name() != "blue-web-prod" || svc.Annotations()["owner"] != "blue" {
		t.Errorf("service %s annotations %v", svc.Name(), svc.Annotations())
	}
	if got := get(t, find(t, rs, "Certificate", "cert"), "spec.serviceRef.name"); got != "blue-web-prod" {
		t.Errorf("nameReference after a patcher's suffix = %v", got)
	}

	failing := Renderer{ChildPatchers: []ChildResourcePatcher{ChildResourcePatcherFunc(func(context.Context, Installation, []Resource) ([]Resource, error) {
		return nil, errors.New("quota exceeded")
	})}}
	if _, err := failing.Render(context.Background(), s, s.NewInstallation("prod", "blue", "", nil, map[string]any{"image": "x"})); err == nil || !strings.Contains(err.Error(), "quota exceeded") {
		t.Errorf("a failing patcher: %v", err)
	}
}

// TestRenderMatchesKubectlKustomize runs the real kubectl (which bundles
// kustomize) on the same files: cairn's in-process render is kustomize's.
func TestRenderMatchesKubectlKustomize(t *testing.T) {
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("kubectl is required under CI")
		}
		t.Skip("no kubectl")
	}
	for _, src := range []string{minimalGCP, flagsEnv, writeTree(t, webStack())} {
		s := mustLoad(t, src)
		spec := map[string]any{"region": "us-west1", "projectID": "bars-project", "team": "bars", "image": "nginx",
			"keepDefaultingLabels": true}
		maps.DeleteFunc(spec, func(k string, _ any) bool {
			return !strings.Contains(string(s.Manifest.Kind.Parameters), `"`+k+`"`)
		})
		// No namespace and kept defaulting marks: no built-in child patcher changes anything.
		inst := s.NewInstallation("", "bars", "uid-1", map[string]string{"team": "bars"}, spec)
		ours := mustRender(t, s, inst)

		_, _, overlay, err := Renderer{}.prepare(context.Background(), s, inst)
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		writeFilesToDisk(t, dir, s.Files)
		writeFilesToDisk(t, dir, overlay)
		out, err := exec.Command(kubectl, "kustomize", filepath.Join(dir, overlayDir)).Output()
		if err != nil {
			t.Fatalf("kubectl kustomize: %v", err)
		}
		var theirs []map[string]any
		for doc := range strings.SplitSeq(string(out), "\n---\n") {
			var m map[string]any
			if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
				t.Fatal(err)
			}
			if m["kind"] == s.Manifest.Kind.Names.Kind {
				continue
			}
			theirs = append(theirs, m)
		}
		if len(theirs) != len(ours) {
			t.Fatalf("%s: kubectl kustomize gave %d resources, cairn %d", s.Manifest.Name, len(theirs), len(ours))
		}
		for i := range ours {
			var mine map[string]any
			if err := yaml.Unmarshal([]byte(encode(t, ours[i:i+1])), &mine); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(mine, theirs[i]) {
				a, _ := yaml.Marshal(mine)
				b, _ := yaml.Marshal(theirs[i])
				t.Errorf("%s resource %d differs from kubectl kustomize:\ncairn:\n%s\nkubectl:\n%s", s.Manifest.Name, i, a, b)
			}
		}
	}
}

func writeFilesToDisk(t testing.TB, dir string, files map[string][]byte) {
	t.Helper()
	for p, b := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestFlagsEnvChildrenAreFlags: flags-env's children are valid instances
// of the cup Flag Type of examples/flags, so the hub accepts them wherever
// the policy stores Flags (a Git backend).
func TestFlagsEnvChildrenAreFlags(t *testing.T) {
	b, err := os.ReadFile("../examples/flags/flags.json")
	if err != nil {
		t.Fatal(err)
	}
	var rd struct {
		Names struct{ Kind string }
		Spec  struct {
			Group    string
			Versions map[string]json.RawMessage
		}
	}
	if err := json.Unmarshal(b, &rd); err != nil {
		t.Fatal(err)
	}
	sch, err := schema.Compile(rd.Spec.Versions["v1alpha1"])
	if err != nil {
		t.Fatal(err)
	}
	s := mustLoad(t, flagsEnv)
	for _, spec := range []map[string]any{{"team": "moonshots"}, {"team": "a", "newProject": true, "darkMode": false}} {
		rs := mustRender(t, s, s.NewInstallation("default", "env", "", nil, spec))
		for _, r := range rs {
			if r.APIVersion() != rd.Spec.Group+"/v1alpha1" || r.Kind() != rd.Names.Kind {
				t.Errorf("%s is not a Flag", r.Key())
			}
			v, _ := json.Marshal(r.Object["spec"])
			if causes := sch.Validate("spec", v); len(causes) > 0 {
				t.Errorf("%s: not a valid Flag: %v", r.Key(), causes)
			}
		}
		if got := get(t, find(t, rs, "Flag", "new-project"), "spec.enabled"); got != spec["newProject"] && !(got == false && spec["newProject"] == nil) {
			t.Errorf("spec %v: new-project enabled = %v", spec, got)
		}
	}
}

// An installation's children live in its own namespace: a namespaced
// owner cannot own objects of another namespace (Kubernetes refuses such an
// owner reference), and the stack controller writes children with its own
// identity, so a child rendered into another namespace would let whoever
// may create an installation in one namespace have objects created in
// another. The render fails naming the child, its namespace and the rule,
// however the namespace got there; a package already in a catalog that
// hard-codes one still loads (FromArchive) but renders only in that
// namespace.
func TestRenderKeepsChildrenInTheInstallationsNamespace(t *testing.T) {
	flag := "apiVersion: flipt.io/v1alpha1\nkind: Flag\nmetadata: {name: f}\nspec: {enabled: true}\n"
	manifest := `name: ns
version: 0.1.0
kind:
  group: ns.stacks.example.com
  version: v1
  names: {kind: Ns}
  parameters:
    type: object
    properties:
      target: {type: string, default: team-b}
`
	fromParameter := manifest + `replacements:
- source: {kind: Ns, fieldPath: spec.target}
  targets:
  - select: {kind: Flag}
    fieldPaths: [metadata.namespace]
    options: {create: true}
`
	moveTo := func(ns string) ChildResourcePatcher {
		return ChildResourcePatcherFunc(func(_ context.Context, _ Installation, rs []Resource) ([]Resource, error) {
			for _, r := range rs {
				r.Object["metadata"].(map[string]any)["namespace"] = ns
			}
			return rs, nil
		})
	}
	tests := []struct {
		name     string
		files    map[string]string
		patchers []ChildResourcePatcher
		inst     string // the installation's namespace
		want     string // "" renders
	}{
		{"hard-coded in the resource", map[string]string{"stack.yaml": manifest,
			"resources/kustomization.yaml": "resources: [flag.yaml]\n",
			"resources/flag.yaml":          strings.Replace(flag, "{name: f}", "{name: f, namespace: team-b}", 1)},
			nil, "team-a", `Flag f (ns-f) is rendered into namespace "team-b": an installation's children live in its own namespace ("team-a")`},
		{"kustomization namespace", map[string]string{"stack.yaml": manifest,
			"resources/kustomization.yaml": "namespace: team-b\nresources: [flag.yaml]\n",
			"resources/flag.yaml":          flag},
			nil, "team-a", `Flag f (ns-f) is rendered into namespace "team-b"`},
		{"from a parameter", map[string]string{"stack.yaml": fromParameter,
			"resources/kustomization.yaml": "resources: [flag.yaml]\n",
			"resources/flag.yaml":          flag},
			nil, "team-a", `Flag f (ns-f) is rendered into namespace "team-b"`},
		{"by a child patcher", map[string]string{"stack.yaml": manifest,
			"resources/kustomization.yaml": "resources: [flag.yaml]\n",
			"resources/flag.yaml":          flag},
			[]ChildResourcePatcher{moveTo("team-b")}, "team-a", `Flag f (ns-f) is rendered into namespace "team-b"`},
		{"hard-coded to the installation's own", map[string]string{"stack.yaml": manifest,
			"resources/kustomization.yaml": "resources: [flag.yaml]\n",
			"resources/flag.yaml":          strings.Replace(flag, "{name: f}", "{name: f, namespace: team-b}", 1)},
			nil, "team-b", ""},
		{"a parameter naming the installation's own", map[string]string{"stack.yaml": fromParameter,
			"resources/kustomization.yaml": "resources: [flag.yaml]\n",
			"resources/flag.yaml":          flag},
			nil, "team-b", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			files := map[string][]byte{}
			for p, c := range tt.files {
				files[p] = []byte(c)
			}
			b, err := archive(files)
			if err != nil {
				t.Fatal(err)
			}
			s, err := FromArchive(b)
			if err != nil {
				t.Fatal(err)
			}
			rs, err := Renderer{ChildPatchers: tt.patchers}.Render(context.Background(), s, s.NewInstallation(tt.inst, "ns", "", nil, map[string]any{}))
			if tt.want == "" {
				if err != nil || len(rs) != 1 || rs[0].Namespace() != tt.inst {
					t.Fatalf("Render = %v, %v", rs, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) || cairn.ErrorCode(err) != cairn.CodeInvalid {
				t.Fatalf("Render = %v, %v\nwant Invalid containing %q", rs, err, tt.want)
			}
		})
	}
}

// A cluster-scoped installation (kind.scope: Cluster) has no namespace of
// its own: its children go to the namespaces its package names (a
// resource's metadata.namespace, a kustomization's namespace:), which
// whoever published the stack chose, or none (a cluster-scoped child; the
// stack controller refuses a namespaced child without one). A namespace
// from anywhere else (a parameter, a patcher) would let whoever may create
// the installation choose where the controller writes: the render fails.
func TestRenderClusterInstallationNamespaces(t *testing.T) {
	flag := "apiVersion: flipt.io/v1alpha1\nkind: Flag\nmetadata: {name: f}\nspec: {enabled: true}\n"
	manifest := `name: cl
version: 0.1.0
kind:
  group: cl.stacks.example.com
  version: v1
  names: {kind: Cl}
  scope: Cluster
  parameters:
    type: object
    properties:
      target: {type: string, default: team-c}
`
	fromParameter := manifest + `replacements:
- source: {kind: Cl, fieldPath: spec.target}
  targets:
  - select: {kind: Flag}
    fieldPaths: [metadata.namespace]
    options: {create: true}
`
	moveTo := ChildResourcePatcherFunc(func(_ context.Context, _ Installation, rs []Resource) ([]Resource, error) {
		for _, r := range rs {
			r.Object["metadata"].(map[string]any)["namespace"] = "team-c"
		}
		return rs, nil
	})
	for _, tt := range []struct {
		name     string
		files    map[string]string
		patchers []ChildResourcePatcher
		want     string // the child's namespace, or "error: ..."
	}{
		{"hard-coded in the resource", map[string]string{"stack.yaml": manifest,
			"resources/kustomization.yaml": "resources: [flag.yaml]\n",
			"resources/flag.yaml":          strings.Replace(flag, "{name: f}", "{name: f, namespace: team-b}", 1)},
			nil, "team-b"},
		{"kustomization namespace", map[string]string{"stack.yaml": manifest,
			"resources/kustomization.yaml": "namespace: team-b\nresources: [flag.yaml]\n",
			"resources/flag.yaml":          flag},
			nil, "team-b"},
		{"none", map[string]string{"stack.yaml": manifest,
			"resources/kustomization.yaml": "resources: [flag.yaml]\n",
			"resources/flag.yaml":          flag},
			nil, ""},
		{"from a parameter", map[string]string{"stack.yaml": fromParameter,
			"resources/kustomization.yaml": "namespace: team-b\nresources: [flag.yaml]\n",
			"resources/flag.yaml":          flag},
			nil, `error: Flag f (cl-f) is rendered into namespace "team-c", which the stack's resources do not name: a cluster-scoped installation's children go to the namespaces its package names (team-b)`},
		{"by a child patcher", map[string]string{"stack.yaml": manifest,
			"resources/kustomization.yaml": "resources: [flag.yaml]\n",
			"resources/flag.yaml":          flag},
			[]ChildResourcePatcher{moveTo}, `error: Flag f (cl-f) is rendered into namespace "team-c", which the stack's resources do not name: a cluster-scoped installation's children go to the namespaces its package names (none)`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			// Load, not FromArchive: the strict checks of cairn stack add
			// accept a Cluster stack that names namespaces.
			s := mustLoad(t, writeTree(t, tt.files))
			rs, err := Renderer{ChildPatchers: tt.patchers}.Render(context.Background(), s, s.NewInstallation("", "cl", "", nil, map[string]any{}))
			if want, ok := strings.CutPrefix(tt.want, "error: "); ok {
				if err == nil || !strings.Contains(err.Error(), want) || cairn.ErrorCode(err) != cairn.CodeInvalid {
					t.Fatalf("Render = %v, %v\nwant Invalid containing %q", rs, err, want)
				}
				return
			}
			if err != nil || len(rs) != 1 || rs[0].Namespace() != tt.want {
				t.Fatalf("Render = %v, %v; want the child in namespace %q", rs, err, tt.want)
			}
		})
	}
}
