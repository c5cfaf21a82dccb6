package stack

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// varsStack is a stack with three vars of three types and the given
// resources (resources/res.yaml), kustomizeconfig and stack.yaml tail.
func varsStack(res, config, manifestTail string) map[string]string {
	files := map[string]string{
		"stack.yaml": `name: vars
version: 0.1.0
kind:
  group: vars.stacks.example.com
  version: v1
  names: {kind: Vars}
  parameters:
    type: object
    properties:
      domain: {type: string, default: a.example}
      port: {type: integer, default: 8080}
      on: {type: boolean, default: true}
vars:
- {name: DOMAIN, fieldPath: spec.domain}
- {name: PORT, fieldPath: spec.port}
- {name: ON, fieldPath: spec.on}
- {name: NAME, fieldPath: metadata.name}
` + manifestTail,
		"resources/kustomization.yaml":   "resources: [res.yaml]\nconfigurations: [kustomizeconfig.yaml]\n",
		"resources/kustomizeconfig.yaml": config,
		"resources/res.yaml":             res,
	}
	return files
}

// TestRenderVarsAsKustomize: cairn substitutes a stack's vars itself (so
// kustomize prints no deprecation warning), with kustomize's semantics in
// each respect below; every case is also built by the real `kubectl
// kustomize` with the vars in the overlay, and must give the same output.
func TestRenderVarsAsKustomize(t *testing.T) {
	flag := func(name, spec string) string {
		return "apiVersion: flipt.io/v1alpha1\nkind: Flag\nmetadata: {name: " + name + "}\nspec: " + spec + "\n---\n"
	}
	tests := []struct {
		name   string
		res    string
		config string
		tail   string // stack.yaml after vars
		kust   string // resources/kustomization.yaml, when not the default
		find   [2]string
		path   string
		want   any
	}{
		{name: "a field that is exactly $(NAME) takes an integer's type",
			res:  "apiVersion: v1\nkind: Service\nmetadata: {name: s}\nspec:\n  ports:\n  - port: $(PORT)\n",
			find: [2]string{"Service", "s"}, path: "spec.ports[0].port", want: json.Number("8080")},
		{name: "a field that is exactly $(NAME) takes a boolean's type",
			res: flag("f", "{enabled: $(ON)}"), config: "varReference:\n- {path: spec/enabled, kind: Flag}\n",
			find: [2]string{"Flag", "f"}, path: "spec.enabled", want: true},
		{name: "inside text every value is formatted",
			res: flag("f", "{url: \"https://$(DOMAIN):$(PORT)/?on=$(ON)\"}"), config: "varReference:\n- {path: spec/url, kind: Flag}\n",
			find: [2]string{"Flag", "f"}, path: "spec.url", want: "https://a.example:8080/?on=true"},
		{name: "$$( is a literal $( and is not reported as left over",
			res: flag("f", "{url: \"$$(DOMAIN) is $(DOMAIN)\"}"), config: "varReference:\n- {path: spec/url, kind: Flag}\n",
			find: [2]string{"Flag", "f"}, path: "spec.url", want: "$(DOMAIN) is a.example"},
		{name: "an unknown $(NAME) is left as written",
			res: flag("f", "{url: \"$(HOME) $(DOMAIN)\"}"), config: "varReference:\n- {path: spec/url, kind: Flag}\n",
			find: [2]string{"Flag", "f"}, path: "spec.url", want: "$(HOME) a.example"},
		{name: "built-in field: container args",
			res:  "apiVersion: batch/v1\nkind: Job\nmetadata: {name: j}\nspec:\n  template:\n    spec:\n      containers:\n      - {name: c, image: x, args: [\"--port=$(PORT)\", \"$(DOMAIN)\"]}\n",
			find: [2]string{"Job", "j"}, path: "spec.template.spec.containers[0].args", want: []any{"--port=8080", "a.example"}},
		{name: "built-in field: metadata/annotations of any kind",
			res:  flag("f", "{}") + "apiVersion: flipt.io/v1alpha1\nkind: Segment\nmetadata: {name: g, annotations: {url: $(DOMAIN)}}\n",
			find: [2]string{"Segment", "g"}, path: "metadata.annotations.url", want: "a.example"},
		{name: "after namePrefix: metadata.name is the installation's prefixed name",
			res: flag("f", "{owner: $(NAME)}"), config: "varReference:\n- {path: spec/owner, kind: Flag}\n",
			find: [2]string{"Flag", "f"}, path: "spec.owner", want: "v-v"},
		{name: "after nameReference: a name built by a var is not renamed",
			res:    "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm-a.example}\n---\n" + flag("f", "{configRef: {name: cm-$(DOMAIN)}}"),
			config: "varReference:\n- {path: spec/configRef/name, kind: Flag}\nnameReference:\n- kind: ConfigMap\n  fieldSpecs:\n  - {path: spec/configRef/name, kind: Flag}\n",
			find:   [2]string{"Flag", "f"}, path: "spec.configRef.name", want: "cm-a.example"},
		{name: "after replacements: a copied $(NAME) is substituted",
			res:    flag("src", "{note: \"https://$(DOMAIN)/\"}") + flag("dst", "{url: x}"),
			config: "varReference:\n- {path: spec/url, kind: Flag}\n- {path: spec/note, kind: Flag}\n",
			tail:   "replacements:\n- source: {kind: Flag, name: src, fieldPath: spec.note}\n  targets:\n  - select: {kind: Flag, name: dst}\n    fieldPaths: [spec.url]\n",
			find:   [2]string{"Flag", "dst"}, path: "spec.url", want: "https://a.example/"},
		{name: "after the hash suffix: a generated ConfigMap's hash is of its text before substitution",
			res: flag("f", "{}"), config: "varReference:\n- {path: data/url, kind: ConfigMap}\n",
			kust: "resources: [res.yaml]\nconfigurations: [kustomizeconfig.yaml]\nconfigMapGenerator:\n- {name: gen, literals: [\"url=$(DOMAIN)\"]}\n",
			find: [2]string{"ConfigMap", "gen-2mggbf5m67"}, path: "data.url", want: "a.example"},
		{name: "a spec another already selects is dropped: substituted once",
			res:    flag("f", "{url: \"$$(DOMAIN)\"}"),
			config: "varReference:\n- {path: spec/url}\n- {path: spec/url, kind: Flag}\n",
			find:   [2]string{"Flag", "f"}, path: "spec.url", want: "$(DOMAIN)"},
		{name: "specs that both select a field substitute twice, in kustomize's order",
			res:    "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingWebhookConfiguration\nmetadata: {name: w}\nspec: {url: \"$$(DOMAIN)\"}\n",
			config: "varReference:\n- {path: spec/url, kind: ValidatingWebhookConfiguration}\n- {path: spec/url}\n",
			find:   [2]string{"ValidatingWebhookConfiguration", "w"}, path: "spec.url", want: "a.example"},
		{name: "a varReference on a name: kustomize sorts after substituting",
			res: flag("b", "{}") + flag("$(DOMAIN)", "{}"), config: "varReference:\n- {path: metadata/name, kind: Flag}\n",
			find: [2]string{"Flag", "a.example"}, path: "metadata.name", want: "v-a.example"},
		{name: "the package's own vars: kustomize resolves them all",
			res:    "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\ndata: {zone: z1}\n---\n" + flag("f", "{url: \"$(ZONE).$(DOMAIN)\"}"),
			config: "varReference:\n- {path: spec/url, kind: Flag}\n",
			kust:   "resources: [res.yaml]\nconfigurations: [kustomizeconfig.yaml]\nvars:\n- {name: ZONE, objref: {kind: ConfigMap, name: cm, apiVersion: v1}, fieldref: {fieldpath: data.zone}}\n",
			find:   [2]string{"Flag", "f"}, path: "spec.url", want: "z1.a.example"},
	}
	kubectl, err := exec.LookPath("kubectl")
	if err != nil && os.Getenv("CI") == "true" {
		t.Fatal("kubectl is required under CI")
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel() // kubectl runs are most of the time
			files := varsStack(tt.res, tt.config, tt.tail)
			if tt.kust != "" {
				files["resources/kustomization.yaml"] = tt.kust
			}
			s := mustLoad(t, writeTree(t, files))
			inst := s.NewInstallation("", "v", "", nil, map[string]any{})
			ours := mustRender(t, s, inst)
			if got := get(t, find(t, ours, tt.find[0], tt.find[1]), tt.path); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("%s %s %s = %#v, want %#v", tt.find[0], tt.find[1], tt.path, got, tt.want)
			}
			if kubectl == "" {
				return
			}
			theirs, stderr := kubectlRender(t, kubectl, s, inst)
			if len(theirs) != len(ours) {
				t.Fatalf("kubectl kustomize gave %d resources, cairn %d", len(theirs), len(ours))
			}
			for i := range ours {
				var mine map[string]any
				if err := yaml.Unmarshal([]byte(encode(t, ours[i:i+1])), &mine); err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(mine, theirs[i]) {
					a, _ := yaml.Marshal(mine)
					b, _ := yaml.Marshal(theirs[i])
					t.Errorf("resource %d differs from kubectl kustomize:\ncairn:\n%s\nkubectl:\n%s", i, a, b)
				}
			}
			// kubectl has the vars in the overlay: it warns, as cairn
			// would have for every render.
			if !strings.Contains(stderr, "'vars' is deprecated") {
				t.Errorf("kubectl kustomize did not warn about vars: %q", stderr)
			}
		})
	}
}

// kubectlRender builds inst's overlay, with the stack's vars as kustomize
// vars, with `kubectl kustomize`, without the installation object.
func kubectlRender(t *testing.T, kubectl string, s *Stack, inst Installation) ([]map[string]any, string) {
	t.Helper()
	_, _, overlay, err := Renderer{}.prepare(context.Background(), s, inst)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	writeFilesToDisk(t, dir, s.Files)
	writeFilesToDisk(t, dir, overlay)
	cmd := exec.Command(kubectl, "kustomize", filepath.Join(dir, overlayDir))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kubectl kustomize: %v\n%s", err, stderr.String())
	}
	var theirs []map[string]any
	for doc := range strings.SplitSeq(string(out), "\n---\n") {
		var m map[string]any
		if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
			t.Fatal(err)
		}
		if m["kind"] != s.Manifest.Kind.Names.Kind {
			theirs = append(theirs, m)
		}
	}
	return theirs, stderr.String()
}

// TestRenderVarsWriteNothingToStderr renders stacks with vars in a child
// process (kustomize writes its warning to os.Stderr itself, so only the
// process's real standard error shows it) and expects its standard error
// to be empty.
func TestRenderVarsWriteNothingToStderr(t *testing.T) {
	if os.Getenv("CAIRN_TEST_RENDER_CHILD") == "1" {
		for _, src := range []string{minimalGCP, flagsEnv, writeTree(t, webStack())} {
			s := mustLoad(t, src)
			if len(s.usedVars()) == 0 {
				t.Fatalf("%s: the test needs a stack with vars", src)
			}
			spec := map[string]any{"region": "us-west1", "projectID": "bars-project", "team": "t", "image": "nginx"}
			for k := range spec {
				if !strings.Contains(string(s.Manifest.Kind.Parameters), `"`+k+`"`) {
					delete(spec, k)
				}
			}
			mustRender(t, s, s.NewInstallation("default", "quiet", "", nil, spec))
		}
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestRenderVarsWriteNothingToStderr$", "-test.count=1")
	cmd.Env = append(os.Environ(), "CAIRN_TEST_RENDER_CHILD=1")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("child: %v\n%s%s", err, out, stderr.String())
	}
	if stderr.Len() > 0 {
		t.Errorf("rendering stacks with vars wrote to standard error:\n%s", stderr.String())
	}
}

// TestBuiltinVarReferenceIsKustomizes: builtinVarReference is the copy of
// kustomize's internal built-in varReference config; this compares it with
// the source of the kustomize module cairn builds with, so an upgrade that
// changes it fails here.
func TestBuiltinVarReferenceIsKustomizes(t *testing.T) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/kustomize/api").Output()
	if err != nil {
		t.Fatalf("go list -m sigs.k8s.io/kustomize/api: %v", err)
	}
	src, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(out)), "internal", "konfig", "builtinpluginconsts", "varreference.go"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)varReferenceFieldSpecs = `(.*?)`").FindSubmatch(src)
	if m == nil {
		t.Fatal("no varReferenceFieldSpecs in kustomize's builtinpluginconsts")
	}
	if string(m[1]) != builtinVarReference {
		t.Errorf("kustomize's built-in varReference changed; copy it into builtinVarReference:\n%s", m[1])
	}
}
