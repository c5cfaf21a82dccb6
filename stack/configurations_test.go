package stack

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn"
)

const sqlEnv = "../examples/stacks/sql-env"

// setsStack is a stack with two configuration sets, overlays of one base:
// large patches the base and adds a resource small does not have.
func setsStack() map[string]string {
	return map[string]string{
		"stack.yaml": `name: shop
version: 0.1.0
kind:
  group: shop.stacks.example.com
  version: v1
  names: {kind: Shop}
  parameters:
    type: object
    additionalProperties: false
    properties:
      domain: {type: string, default: example.com}
configurations:
  field: tier
  default: small
  description: How big the shop is
  sets:
  - {name: small, path: resources/small, description: One replica.}
  - {name: large}
vars:
- {name: TIER, fieldPath: spec.tier}
outputs:
- {name: settings, value: "${resources.ConfigMap.settings.metadata.name}"}
- {name: tier, value: "${parameters.tier}"}
readiness:
- {match: {kind: ConfigMap, name: cache}, type: None}
deletionPriorities:
- {match: {kind: ConfigMap, name: cache}, priority: 5}
`,
		"resources/base/kustomization.yaml":   "resources: [settings.yaml]\nconfigurations: [kustomizeconfig.yaml]\n",
		"resources/base/kustomizeconfig.yaml": "varReference:\n- {path: data/tier, kind: ConfigMap}\n",
		"resources/base/settings.yaml":        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata: {tier: $(TIER), replicas: \"1\"}\n",
		"resources/small/kustomization.yaml":  "resources: [../base]\n",
		"resources/large/kustomization.yaml": `resources: [../base, cache.yaml]
patches:
- target: {kind: ConfigMap, name: settings}
  patch: '[{"op": "replace", "path": "/data/replicas", "value": "3"}]'
`,
		"resources/large/cache.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cache}\ndata: {size: 1Gi}\n",
	}
}

func TestConfigurationSets(t *testing.T) {
	s := mustLoad(t, writeTree(t, setsStack()))
	c := s.Manifest.Configurations
	if c == nil || c.Field != "tier" || c.Default != "small" || len(c.Sets) != 2 || c.Sets[1].Path != "resources/large" {
		t.Fatalf("configurations = %+v, want field tier, default small, large at resources/large", c)
	}
	// The field is a parameter: an enum of the sets with the default.
	var sch struct {
		Properties map[string]map[string]any `json:"properties"`
	}
	if err := json.Unmarshal(s.Manifest.Kind.Parameters, &sch); err != nil {
		t.Fatal(err)
	}
	tier := sch.Properties["tier"]
	if tier["type"] != "string" || !reflect.DeepEqual(tier["enum"], []any{"small", "large"}) || tier["default"] != "small" ||
		tier["description"] != "How big the shop is. One of: small (One replica), large. Default: small." {
		t.Errorf("parameters.properties.tier = %v", tier)
	}
	// The catalog reloads a package from its archive: the field is added
	// once, the same way.
	b, err := s.Archive()
	if err != nil {
		t.Fatal(err)
	}
	again, err := FromArchive(b)
	if err != nil {
		t.Fatal(err)
	}
	if string(again.Manifest.Kind.Parameters) != string(s.Manifest.Kind.Parameters) {
		t.Errorf("from the archive the parameters are %s, want %s", again.Manifest.Kind.Parameters, s.Manifest.Kind.Parameters)
	}

	names := func(rs []Resource) []string {
		var out []string
		for _, r := range rs {
			out = append(out, r.Name())
		}
		return out
	}
	tests := []struct {
		name     string
		spec     map[string]any
		set      string
		want     []string
		replicas string
	}{
		{"default set", map[string]any{}, "small", []string{"s-settings"}, "1"},
		{"chosen set", map[string]any{"tier": "large"}, "large", []string{"s-cache", "s-settings"}, "3"},
		{"default chosen explicitly", map[string]any{"tier": "small"}, "small", []string{"s-settings"}, "1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inst := s.NewInstallation("default", "s", "", nil, tt.spec)
			if set, ok := s.ConfigurationSet(tt.spec); !ok || set.Name != tt.set {
				t.Errorf("ConfigurationSet = %+v, %v, want %s", set, ok, tt.set)
			}
			rs := mustRender(t, s, inst)
			if got := names(rs); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("rendered %v, want %v", got, tt.want)
			}
			settings := find(t, rs, "ConfigMap", "settings")
			if get(t, settings, "data.tier") != tt.set || get(t, settings, "data.replicas") != tt.replicas {
				t.Errorf("settings data = %v", settings.Object["data"])
			}
			outs, err := s.Outputs(inst, rs, nil)
			if err != nil || outs["tier"] != tt.set || outs["settings"] != "s-settings" {
				t.Errorf("outputs = %v, %v", outs, err)
			}
			if n := len(s.DeletionBands(rs)); n != len(tt.want) {
				t.Errorf("%d deletion bands, want %d", n, len(tt.want))
			}
		})
	}

	// A set that is not one of the stack's names the field and the sets.
	_, err = Renderer{}.Render(context.Background(), s, s.NewInstallation("default", "s", "", nil, map[string]any{"tier": "huge"}))
	if cairn.ErrorCode(err) != cairn.CodeInvalid || !strings.Contains(err.Error(), `spec/tier must be equal to one of the allowed values: "small", "large"`) {
		t.Errorf("render with tier huge: %v", err)
	}
	if _, ok := s.ConfigurationSet(map[string]any{"tier": "huge"}); ok {
		t.Error("ConfigurationSet(huge) found a set")
	}
	if _, ok := mustLoad(t, flagsEnv).ConfigurationSet(nil); ok {
		t.Error("a stack without sets has a configuration set")
	}
}

// The example's two sets: dev renders the base, prod patches the primary
// and adds a replica whose reference to it is renamed.
func TestSQLEnvExample(t *testing.T) {
	s := mustLoad(t, sqlEnv)
	dev := mustRender(t, s, s.NewInstallation("default", "orders", "", nil, map[string]any{"region": "us-west2"}))
	prod := mustRender(t, s, s.NewInstallation("default", "orders", "", nil, map[string]any{"region": "us-west2", "tier": "prod"}))
	if len(dev) != 2 || len(prod) != 3 {
		t.Fatalf("dev renders %d resources, prod %d; want 2 and 3", len(dev), len(prod))
	}
	if v := get(t, find(t, dev, "CloudSQLInstance", "main"), "spec.forProvider.settings.tier"); v != "db-f1-micro" {
		t.Errorf("dev main tier %v", v)
	}
	main := find(t, prod, "CloudSQLInstance", "main")
	if get(t, main, "spec.forProvider.settings.tier") != "db-n1-standard-4" || get(t, main, "spec.forProvider.settings.availabilityType") != "REGIONAL" {
		t.Errorf("prod main settings %v", get(t, main, "spec.forProvider.settings"))
	}
	replica := find(t, prod, "CloudSQLInstance", "replica")
	if get(t, replica, "spec.forProvider.masterInstanceName") != "orders-main" || get(t, replica, "spec.forProvider.region") != "us-west2" ||
		get(t, replica, "spec.forProvider.settings.ipConfiguration.privateNetworkRef.name") != "orders-network" {
		t.Errorf("prod replica %v", replica.Object["spec"])
	}
}

func TestBadConfigurations(t *testing.T) {
	edit := func(path, old, new string) func(map[string]string) {
		return func(f map[string]string) {
			if !strings.Contains(f[path], old) {
				panic("test setup: " + path + " lacks " + old)
			}
			f[path] = strings.Replace(f[path], old, new, 1)
		}
	}
	tests := []struct {
		name   string
		change func(map[string]string)
		want   []string
	}{
		{"set folder missing", edit("stack.yaml", "  - {name: large}", "  - {name: large, path: resources/xl}"),
			[]string{`stack.yaml:18: configurations.sets[1].path: "resources/xl" (set large): no such directory in the stack package`}},
		{"default set folder missing", func(f map[string]string) {
			delete(f, "resources/large/kustomization.yaml")
			delete(f, "resources/large/cache.yaml")
		}, []string{`stack.yaml:18: configurations.sets[1].path: "resources/large" (set large): no such directory in the stack package`}},
		{"set folder without kustomization", func(f map[string]string) { delete(f, "resources/large/kustomization.yaml") },
			[]string{`configurations.sets[1].path: "resources/large" (set large) has no kustomization.yaml`}},
		{"set folder outside resources", edit("stack.yaml", "path: resources/small", "path: small"),
			[]string{`stack.yaml:17: configurations.sets[0].path: "small": a set's directory must be resources/ or a directory under it (e.g. resources/small)`}},
		{"set folder outside the package", edit("stack.yaml", "path: resources/small", "path: resources/../../small"),
			[]string{"configurations.sets[0].path", "paths must be relative and stay inside the package"}},
		{"unknown default", edit("stack.yaml", "default: small", "default: medium"),
			[]string{`stack.yaml:14: configurations.default: "medium" is not one of the sets (small, large)`}},
		{"duplicate set", edit("stack.yaml", "{name: large}", "{name: small, path: resources/large}"),
			[]string{`configurations.sets[1].name: "small" is declared twice`}},
		{"bad set name", edit("stack.yaml", "{name: large}", "{name: Large, path: resources/large}"),
			[]string{`configurations.sets[1].name: "Large" must be lower case letters`}},
		{"no field", edit("stack.yaml", "  field: tier\n", ""),
			[]string{"configurations.field: is required"}},
		{"bad field", edit("stack.yaml", "field: tier", "field: spec.tier"),
			[]string{`configurations.field: "spec.tier" must be a property name`}},
		{"no sets", func(f map[string]string) {
			f["stack.yaml"] = strings.Replace(f["stack.yaml"], "  sets:\n  - {name: small, path: resources/small, description: One replica.}\n  - {name: large}\n", "  sets: []\n", 1)
		}, []string{"configurations.sets: at least one set is required"}},
		{"field declared as a parameter", edit("stack.yaml", "      domain:", "      tier: {type: string}\n      domain:"),
			[]string{"kind.parameters.properties.tier: is the configurations field: cairn declares it (a string, one of small, large, default small); remove it here"}},
		{"output of a resource one set lacks", edit("stack.yaml", "resources.ConfigMap.settings.metadata.name", "resources.ConfigMap.cache.metadata.name"),
			[]string{`outputs[0].value: reference "resources.ConfigMap.cache.metadata.name": configuration set small renders no ConfigMap named "cache" (it has ConfigMap/settings); an output reads a resource every set renders`}},
		{"readiness matching no set", edit("stack.yaml", "{kind: ConfigMap, name: cache}, type: None", "{kind: ConfigMap, name: cahce}, type: None"),
			[]string{"readiness[0].match", "kind ConfigMap, name cahce matches no resource in resources/ (it has ConfigMap/settings, ConfigMap/cache)"}},
		{"a set kustomize refuses", edit("resources/large/kustomization.yaml", "resources: [../base, cache.yaml]", "resources: [../base, cache.yaml, cache.yaml]"),
			[]string{"resources/large: kustomize:", "cache.yaml"}},
		{"a bad path in a set", edit("resources/large/kustomization.yaml", "cache.yaml]", "caches.yaml]"),
			[]string{`resources/large/kustomization.yaml:1: resources[1]: "caches.yaml": no such file or directory`}},
		{"a set including resources/", func(f map[string]string) {
			f["stack.yaml"] = strings.Replace(f["stack.yaml"], "path: resources/small", "path: resources", 1)
			f["resources/kustomization.yaml"] = "resources: [base]\n"
			f["resources/large/kustomization.yaml"] = strings.Replace(f["resources/large/kustomization.yaml"], "../base", "..", 1)
		}, []string{`resources/large/kustomization.yaml:1: resources[0]: ".." is resources, which contains this kustomization: kustomize refuses a directory that contains the one including it; put what is shared in a directory beside it (e.g. resources/base)`}},
		{"namespace in a set", edit("resources/large/cache.yaml", "{name: cache}", "{name: cache, namespace: ops}"),
			[]string{`resources/large/cache.yaml:3: metadata.namespace: ConfigMap cache is put in namespace "ops"`}},
	}
	// A missing set is one error, not also every match only it satisfies.
	notIn := map[string][]string{"default set folder missing": {"readiness[0]", "deletionPriorities[0]"}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			files := setsStack()
			tt.change(files)
			_, err := Load(context.Background(), writeTree(t, files))
			if err == nil {
				t.Fatal("loaded")
			}
			if cairn.ErrorCode(err) != cairn.CodeInvalid {
				t.Errorf("code %s, want Invalid: %v", cairn.ErrorCode(err), err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\nlacks %q", err, w)
				}
			}
			for _, w := range notIn[tt.name] {
				if strings.Contains(err.Error(), w) {
					t.Errorf("error %q\nhas %q", err, w)
				}
			}
		})
	}
	// Sets need no resources/kustomization.yaml; a stack without them does.
	if _, ok := setsStack()["resources/kustomization.yaml"]; ok {
		t.Fatal("test setup: setsStack has a resources/kustomization.yaml")
	}
	// resources/ itself may be a set (a stack that had none keeps its
	// behaviour as the default set) beside sets under it.
	files := setsStack()
	files["stack.yaml"] = strings.Replace(files["stack.yaml"], "path: resources/small", "path: resources", 1)
	files["resources/kustomization.yaml"] = "resources: [base]\n"
	s := mustLoad(t, writeTree(t, files))
	if rs := mustRender(t, s, s.NewInstallation("default", "s", "", nil, nil)); len(rs) != 1 || rs[0].Name() != "s-settings" {
		t.Errorf("the resources/ set renders %v", rs)
	}
}
