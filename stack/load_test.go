package stack

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn"
)

func TestLoadManifest(t *testing.T) {
	s := mustLoad(t, minimalGCP)
	m := s.Manifest
	if m.Name != "minimal-gcp" || m.Version != "0.1.0" || m.Kind.APIVersion() != "gcp.stacks.cairn.dev/v1alpha1" {
		t.Errorf("manifest %s %s %s", m.Name, m.Version, m.Kind.APIVersion())
	}
	if m.Kind.Names.Plural != "minimalgcps" || m.Kind.Scope != Namespaced {
		t.Errorf("names %+v scope %q", m.Kind.Names, m.Kind.Scope)
	}
	if len(m.Vars) != 5 || len(m.Outputs) != 4 || len(m.Readiness) != 5 || len(m.DeletionPriorities) != 5 {
		t.Errorf("vars %d outputs %d readiness %d deletion %d", len(m.Vars), len(m.Outputs), len(m.Readiness), len(m.DeletionPriorities))
	}
	if !strings.HasPrefix(s.Digest, "sha256:") || len(s.Digest) != 71 {
		t.Errorf("digest %q", s.Digest)
	}
	if _, ok := s.Files["resources/gcp/compute/kustomizeconfig.yaml"]; !ok {
		t.Error("Files lacks resources/")
	}

	// Defaults: singular from the kind, Namespaced scope. A plural left
	// out stays out: the hub derives it, or keeps the one the kind is
	// registered under (hub's TestStackKindPlural).
	w := mustLoad(t, writeTree(t, webStack()))
	if n := w.Manifest.Kind.Names; n.Singular != "webapp" || n.Plural != "" || w.Manifest.Kind.Scope != Namespaced {
		t.Errorf("defaulted names %+v scope %q", n, w.Manifest.Kind.Scope)
	}
}

func TestLoadSources(t *testing.T) {
	ctx := context.Background()
	dir := mustLoad(t, minimalGCP)

	// The canonical archive, as a file.
	arch, err := dir.Archive()
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	tgz := filepath.Join(tmp, "minimal-gcp.tgz")
	if err := os.WriteFile(tgz, arch, 0o644); err != nil {
		t.Fatal(err)
	}
	// An archive made with tar, holding the package under a top directory.
	topTar := filepath.Join(tmp, "top.tar.gz")
	if out, err := exec.Command("tar", "-czf", topTar, "-C", filepath.Dir(minimalGCP), filepath.Base(minimalGCP)).CombinedOutput(); err != nil {
		t.Fatalf("tar: %v %s", err, out)
	}

	// A Git repository with the package in a subdirectory, tagged, then
	// changed on main after the tag.
	repo := filepath.Join(tmp, "repo")
	writeFilesToDisk(t, filepath.Join(repo, "stacks", "minimal-gcp"), dir.Files)
	if err := os.WriteFile(filepath.Join(repo, "README.md"), []byte("stacks\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gitRun(t, repo, "init", "-q", "-b", "main")
	gitRun(t, repo, "add", ".")
	gitRun(t, repo, "commit", "-q", "-m", "minimal-gcp 0.1.0")
	gitRun(t, repo, "tag", "v0.1.0")
	tagged := gitRun(t, repo, "rev-parse", "HEAD")
	gitRun(t, repo, "checkout", "-q", "-b", "feature/bump")
	m := filepath.Join(repo, "stacks", "minimal-gcp", "stack.yaml")
	b, _ := os.ReadFile(m)
	if err := os.WriteFile(m, bytes.Replace(b, []byte("version: 0.1.0"), []byte("version: 0.2.0"), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	gitRun(t, repo, "commit", "-q", "-am", "0.2.0")
	gitRun(t, repo, "checkout", "-q", "main")
	url := "file://" + repo

	for _, src := range []string{tgz, topTar, url + "@v0.1.0//stacks/minimal-gcp", url + "@main//stacks/minimal-gcp/", url + "@" + tagged + "//stacks/minimal-gcp", url + "//stacks/minimal-gcp"} {
		s, err := Load(ctx, src)
		if err != nil {
			t.Errorf("Load(%s): %v", src, err)
			continue
		}
		if s.Digest != dir.Digest || !reflect.DeepEqual(s.Files, dir.Files) {
			t.Errorf("Load(%s): digest %s, want %s (the same files as the directory)", src, s.Digest, dir.Digest)
		}
		if s.Manifest.Version != "0.1.0" {
			t.Errorf("Load(%s): version %s", src, s.Manifest.Version)
		}
	}
	s, err := Load(ctx, url+"@feature/bump//stacks/minimal-gcp")
	if err != nil {
		t.Fatal(err)
	}
	if s.Manifest.Version != "0.2.0" || !strings.Contains(s.Source, "@"+gitRun(t, repo, "rev-parse", "feature/bump")) {
		t.Errorf("branch with a slash: version %s source %s", s.Manifest.Version, s.Source)
	}

	for _, tt := range []struct{ src, want string }{
		{url + "@v9.9.9//stacks/minimal-gcp", `ref "v9.9.9" is not a branch, tag or commit`},
		{url + "@v0.1.0//stacks/nope", "no directory stacks/nope"},
		{url + "@v0.1.0", "has no stack.yaml at its root (found: README.md, stacks)"},
		{"file://" + filepath.Join(tmp, "missing") + "@main", "clone"},
		{filepath.Join(tmp, "nothing-here"), "no such file"},
		{m, "not a gzipped tar archive"},
	} {
		_, err := Load(ctx, tt.src)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Load(%s) = %v, want an error containing %q", tt.src, err, tt.want)
		}
	}
}

func TestParseGitSource(t *testing.T) {
	tests := []struct {
		in   string
		want gitSource
		ok   bool
	}{
		{"file:///srv/git/stacks.git@v1.0.0//minimal-gcp", gitSource{"file:///srv/git/stacks.git", "v1.0.0", "minimal-gcp"}, true},
		{"https://github.com/acme/stacks.git@main", gitSource{"https://github.com/acme/stacks.git", "main", ""}, true},
		{"ssh://git@git.example.com/acme/stacks.git@feature/x//a/b", gitSource{"ssh://git@git.example.com/acme/stacks.git", "feature/x", "a/b"}, true},
		{"ssh://git@git.example.com/acme/stacks.git", gitSource{"ssh://git@git.example.com/acme/stacks.git", "", ""}, true},
		{"git@github.com:acme/stacks.git@v2//x", gitSource{"git@github.com:acme/stacks.git", "v2", "x"}, true},
		{"https://user@host.example.com/r.git@abc123", gitSource{"https://user@host.example.com/r.git", "abc123", ""}, true},
		{"examples/stacks/minimal-gcp", gitSource{}, false},
		{"./stack@v1", gitSource{}, false},
		{"/tmp/x.tgz", gitSource{}, false},
	}
	for _, tt := range tests {
		got, ok := parseGitSource(tt.in)
		if ok != tt.ok || got != tt.want {
			t.Errorf("parseGitSource(%q) = %+v %v, want %+v %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

func TestArchiveRoundTrip(t *testing.T) {
	s := mustLoad(t, minimalGCP)
	a1, err := s.Archive()
	if err != nil {
		t.Fatal(err)
	}
	a2, _ := s.Archive()
	if !bytes.Equal(a1, a2) {
		t.Fatal("Archive is not deterministic")
	}
	back, err := FromArchive(a1)
	if err != nil {
		t.Fatal(err)
	}
	if back.Digest != s.Digest || !reflect.DeepEqual(back.Files, s.Files) || !reflect.DeepEqual(back.Manifest, s.Manifest) {
		t.Error("FromArchive(Archive()) differs from the package")
	}
	a3, _ := back.Archive()
	if !bytes.Equal(a1, a3) {
		t.Error("the archive of a package read from an archive differs")
	}
	// A changed file changes the digest.
	files := map[string]string{}
	for p, b := range s.Files {
		files[p] = string(b)
	}
	files["resources/gcp/compute/network.yaml"] += "# note\n"
	if other := mustLoad(t, writeTree(t, files)); other.Digest == s.Digest {
		t.Error("a changed file kept the digest")
	}
	if _, err := FromArchive([]byte("not gzip")); err == nil || cairn.ErrorCode(err) != cairn.CodeInvalid {
		t.Errorf("FromArchive(garbage) = %v", err)
	}
}

// TestBadPackages: every mistake is refused with an error naming the file,
// the line where one applies, and the field.
func TestBadPackages(t *testing.T) {
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
		{"missing stack.yaml", func(f map[string]string) { delete(f, "stack.yaml") },
			[]string{"has no stack.yaml at its root (found: resources)"}},
		{"bad semver", edit("stack.yaml", "version: 1.2.3", "version: 1.2"),
			[]string{"stack.yaml:2: version", `"1.2" is not a semantic version`}},
		{"parameters not an object", edit("stack.yaml", "    type: object\n    required: [image]", "    type: string\n    required: [image]"),
			[]string{"stack.yaml:9: kind.parameters.type", `not of type "string"`}},
		{"parameters not a schema", edit("stack.yaml", "      image: {type: string}", "      image: {type: strung}"),
			[]string{"stack.yaml:9: kind.parameters", "invalid JSON Schema: properties/image/type must be"}},
		{"unknown field", edit("stack.yaml", "description:", "descripton:"),
			[]string{"stack.yaml:3: descripton", "unknown field (known: "}},
		{"unknown nested field", edit("stack.yaml", "  names: {kind: WebApp}", "  names: {kind: WebApp, plurall: webapps}"),
			[]string{"stack.yaml:7: kind.names.plurall", "unknown field"}},
		{"wrong type", edit("stack.yaml", "priority: 10", "priority: high"),
			[]string{"stack.yaml:", "deletionPriorities.priority", "must be an integer"}},
		{"bad kind", edit("stack.yaml", "{kind: WebApp}", "{kind: web-app}"),
			[]string{"stack.yaml:7: kind.names.kind", "CamelCase"}},
		{"bad api version", edit("stack.yaml", "  version: v1\n", "  version: 1.0\n"),
			[]string{"stack.yaml:6: kind.version"}},
		{"unknown var field path", edit("stack.yaml", "fieldPath: spec.domain}", "fieldPath: spec.domian}"),
			[]string{"stack.yaml:22: vars[0].fieldPath", `declares no property "domian" (declared: domain, image, replicas, tls)`}},
		{"var outside the installation", edit("stack.yaml", "fieldPath: spec.domain}", "fieldPath: status.x}"),
			[]string{"vars[0].fieldPath", `"status.x": read spec.PARAMETER or metadata of the installation`}},
		{"replacement of an unknown parameter", edit("stack.yaml", "fieldPath: spec.replicas}", "fieldPath: spec.replicaz}"),
			[]string{"stack.yaml:25: replacements[0].source.fieldPath", `declares no property "replicaz"`}},
		{"bad output template", edit("stack.yaml", `"https://${parameters.domain}/"`, `"https://${parameters.domain/"`),
			[]string{"stack.yaml:34: outputs[0].value", "unterminated ${"}},
		{"output of an unknown resource", edit("stack.yaml", "resources.Service.web.metadata.name", "resources.Service.webb.metadata.name"),
			[]string{"outputs[1].value", `no Service named "webb" in resources/ (it has ConfigMap/settings, Service/web, Deployment/web, Certificate/cert, Ingress/web)`}},
		{"output of an unknown parameter", edit("stack.yaml", "${parameters.replicas}", "${parameters.replica}"),
			[]string{"outputs[2].value", `declares no property "replica"`}},
		{"readiness matching nothing", edit("stack.yaml", "match: {kind: Service, name: web}", "match: {kind: Service, name: wbe}"),
			[]string{"stack.yaml:42: readiness[1].match", "kind Service, name wbe matches no resource in resources/"}},
		{"default of the wrong type", edit("stack.yaml", "{type: integer, minimum: 1, default: 2}", "{type: integer, minimum: 1, default: two}"),
			[]string{"stack.yaml:13: kind.parameters.properties.replicas.default", `"two" is not valid for its own schema: must be integer`}},
		{"default below the minimum", edit("stack.yaml", "{type: integer, minimum: 1, default: 2}", "{type: integer, minimum: 1, default: 0}"),
			[]string{"kind.parameters.properties.replicas.default", "0 is not valid for its own schema: must be >= 1"}},
		{"nested default of the wrong type", edit("stack.yaml", "issuer: {type: string, default: letsencrypt}", "issuer: {type: string, default: [letsencrypt]}"),
			[]string{"stack.yaml:20: kind.parameters.properties.tls.properties.issuer.default", "must be string"}},
		{"object default refused by its schema", edit("stack.yaml", "        default: {}\n", "        default: {isuer: x}\n"),
			[]string{"kind.parameters.properties.tls.default", "must NOT have additional properties"}},
		{"replacement target matching nothing", edit("stack.yaml", "  - select: {kind: Deployment, name: web}", "  - select: {kind: Deploymnet, name: web}"),
			[]string{"stack.yaml:27: replacements[0].targets[0].select", "kind Deploymnet, name web matches no resource in resources/"}},
		{"readiness without field path", edit("stack.yaml", "  fieldPath: spec.ports\n", ""),
			[]string{"readiness[1].fieldPath", "is required by a NonEmpty check"}},
		{"readiness type", edit("stack.yaml", "type: NonEmpty", "type: Present"),
			[]string{"readiness[1].type", `"Present": want one of`}},
		{"no kustomization", func(f map[string]string) { delete(f, "resources/kustomization.yaml") },
			[]string{"resources/kustomization.yaml", "is missing"}},
		{"resource file missing", edit("resources/kustomization.yaml", "- certificate.yaml", "- certificates.yaml"),
			[]string{"resources/kustomization.yaml:3: resources[1]", `"certificates.yaml": no such file or directory`}},
		{"remote resource", edit("resources/kustomization.yaml", "- certificate.yaml", "- https://github.com/acme/stacks//base?ref=v1"),
			[]string{"resources/kustomization.yaml:3: resources[1]", "not a path inside the stack package"}},
		{"remote patch", func(f map[string]string) {
			f["resources/kustomization.yaml"] += "patches:\n- path: https://example.com/patch.yaml\n"
		}, []string{"resources/kustomization.yaml:7: patches[0].path", `"https://example.com/patch.yaml" is not a path inside the stack package`}},
		{"remote generator file", func(f map[string]string) {
			f["resources/kustomization.yaml"] += "configMapGenerator:\n- name: x\n  files: [conf=https://example.com/x.conf]\n"
		}, []string{"resources/kustomization.yaml:8: configMapGenerator[0].files[0]", "not a path inside the stack package"}},
		{"remote transformer", func(f map[string]string) {
			f["resources/kustomization.yaml"] += "transformers:\n- github.com/acme/transformers/prefix?ref=v1\n"
		}, []string{"resources/kustomization.yaml:7: transformers[0]", `"github.com/acme/transformers/prefix?ref=v1": no such file or directory`}},
		{"missing configuration", edit("resources/kustomization.yaml", "- kustomizeconfig.yaml", "- kustomize-config.yaml"),
			[]string{"resources/kustomization.yaml:5: configurations[0]", "no such file"}},
		{"resource outside the package", edit("resources/kustomization.yaml", "- certificate.yaml", "- ../../etc"),
			[]string{"resources[1]", "not a path inside the stack package"}},
		{"resource without kind", edit("resources/app.yaml", "kind: Service\n", ""),
			[]string{"resources/app.yaml:22: document 2 has no kind"}},
		{"resource without name", edit("resources/certificate.yaml", "  name: cert\n", ""),
			[]string{"resources/certificate.yaml:1", "document 1 has no metadata.name"}},
		{"kustomization kustomize refuses", func(f map[string]string) {
			f["resources/kustomization.yaml"] = strings.Replace(f["resources/kustomization.yaml"], "- certificate.yaml\n", "- certificate.yaml\n- dup.yaml\n", 1)
			f["resources/dup.yaml"] = "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\n"
		}, []string{"resources: kustomize:", "dup.yaml", "already registered id"}},
		{"unknown field in a kustomizeconfig", edit("resources/kustomizeconfig.yaml", "varReference:", "varReferenc:"),
			[]string{"resources/kustomizeconfig.yaml:5: varReferenc: unknown field (known: ", "nameReference", "varReference"}},
		{"bad replacement field path in a nested kustomization", func(f map[string]string) {
			f["resources/kustomization.yaml"] = strings.Replace(f["resources/kustomization.yaml"], "- certificate.yaml\n", "- certificate.yaml\n- extra\n", 1)
			f["resources/extra/kustomization.yaml"] = "resources: [cm.yaml]\nreplacements:\n- source: {kind: ConfigMap, name: extra, fieldPath: data.a}\n  targets:\n  - select: {kind: ConfigMap, name: extra}\n    fieldPaths: [data.b.deep]\n"
			f["resources/extra/cm.yaml"] = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: extra}\ndata: {a: x, b: y}\n"
		}, []string{"resources/extra: kustomize: ", `unable to find field "data.b.deep" in replacement target`, "(the node there is: y)"}},
		{"kustomization not yaml", edit("resources/kustomization.yaml", "resources:", "resources: [\n"),
			[]string{"resources/kustomization.yaml", "not a valid kustomization"}},
		{"reserved directory", func(f map[string]string) { f[overlayDir+"/x"] = "" },
			[]string{overlayDir + "/x", "reserved"}},
		// An installation's children live in its namespace, which cairn
		// sets: a package that fixes one renders only there.
		{"resource in a namespace", edit("resources/certificate.yaml", "  name: cert\n", "  name: cert\n  namespace: team-b\n"),
			[]string{`resources/certificate.yaml:5: metadata.namespace: Certificate cert is put in namespace "team-b"`,
				"an installation's children live in the installation's own namespace"}},
		{"kustomization namespace", edit("resources/kustomization.yaml", "resources:\n", "namespace: team-b\nresources:\n"),
			[]string{`resources/kustomization.yaml:1: namespace: ConfigMap settings, Service web, Deployment web, Certificate cert and Ingress web are put in namespace "team-b"`}},
		{"namespace from a nested kustomization", func(f map[string]string) {
			f["resources/kustomization.yaml"] = strings.Replace(f["resources/kustomization.yaml"], "- certificate.yaml\n", "- certificate.yaml\n- extra\n", 1)
			f["resources/extra/kustomization.yaml"] = "resources: [cm.yaml]\nnamespace: ops\n"
			f["resources/extra/cm.yaml"] = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: extra}\n"
		}, []string{`resources/extra/kustomization.yaml:2: namespace: ConfigMap extra is put in namespace "ops"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			files := webStack()
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
			// kustomize's own texts come out as one message, without its
			// misleading accumulation chain.
			for _, c := range cairn.Causes(err) {
				if strings.Contains(c.String(), "\n") || strings.Contains(c.String(), "accumulation err") {
					t.Errorf("cause %q: want one clear line", c)
				}
			}
		})
	}
}

// A replacement of stack.yaml whose target fieldPath does not fit the
// resource fails when rendered (its select matches, so loading passes);
// the error names the replacement in stack.yaml and is one line.
func TestRenderBadReplacementFieldPath(t *testing.T) {
	files := webStack()
	files["stack.yaml"] = strings.Replace(files["stack.yaml"], "    fieldPaths: [spec.replicas]", "    fieldPaths: [spec.replicas.count]", 1)
	s := mustLoad(t, writeTree(t, files))
	_, err := Renderer{}.Render(context.Background(), s, s.NewInstallation("default", "x", "", nil, map[string]any{"image": "x"}))
	want := `stack.yaml:28: replacements[0].targets[0].fieldPaths[0]: "spec.replicas.count": unable to find field "spec.replicas.count" in replacement target: wrong node kind: expected MappingNode but got ScalarNode (the node there is: 1)`
	if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
		t.Errorf("render: %v\nwant it to contain %q, on one line", err, want)
	}
	if cairn.ErrorCode(err) != cairn.CodeInvalid {
		t.Errorf("code %s", cairn.ErrorCode(err))
	}
}

// The checks that came after packages were already in catalogs (a default
// its own schema refuses, a replacement selecting nothing) refuse a new
// package, from a directory or as an archive being added, while the same
// archive read back from a catalog still loads.
func TestAuthoringChecksOnlyForNewPackages(t *testing.T) {
	files := webStack()
	files["stack.yaml"] = strings.Replace(files["stack.yaml"], "default: 2}", "default: two}", 1)
	files["stack.yaml"] = strings.Replace(files["stack.yaml"], "select: {kind: Deployment, name: web}", "select: {kind: Deploymnet, name: web}", 1)
	var tarred bytes.Buffer
	gz := gzip.NewWriter(&tarred)
	tw := tar.NewWriter(gz)
	for _, name := range slices.Sorted(maps.Keys(files)) {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(files[name]))}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(files[name])); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(context.Background(), writeTree(t, files)); err == nil || !strings.Contains(err.Error(), "default") {
		t.Errorf("Load = %v", err)
	}
	_, err := FromNewArchive(tarred.Bytes())
	if err == nil || !strings.Contains(err.Error(), `"two" is not valid for its own schema`) || !strings.Contains(err.Error(), "matches no resource") {
		t.Errorf("FromNewArchive = %v", err)
	}
	if _, err := FromArchive(tarred.Bytes()); err != nil {
		t.Errorf("FromArchive of a package already in a catalog: %v", err)
	}
}

// TestBadParameters: an installation the schema refuses renders nothing
// and the error names the field.
func TestBadParameters(t *testing.T) {
	s := mustLoad(t, writeTree(t, webStack()))
	tests := []struct {
		spec map[string]any
		want []string
	}{
		{map[string]any{}, []string{"spec must have required property 'image'"}},
		{map[string]any{"image": "x", "replicas": 0}, []string{"spec/replicas must be >= 1"}},
		{map[string]any{"image": "x", "replicas": "two"}, []string{"spec/replicas must be integer"}},
		{map[string]any{"image": 3, "domain": true}, []string{"spec/domain must be string", "spec/image must be string"}},
		{map[string]any{"image": "x", "tls": map[string]any{"issuer": "a", "ca": "b", "key": "c"}},
			[]string{"spec/tls must NOT have additional properties: ca, key (known: issuer)"}},
	}
	for _, tt := range tests {
		rs, err := Renderer{}.Render(context.Background(), s, s.NewInstallation("default", "x", "", nil, tt.spec))
		if err == nil || rs != nil {
			t.Errorf("spec %v rendered", tt.spec)
			continue
		}
		if cairn.ErrorCode(err) != cairn.CodeInvalid || !strings.Contains(err.Error(), "invalid parameters of WebApp") {
			t.Errorf("spec %v: %v", tt.spec, err)
		}
		for _, w := range tt.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("spec %v: error %q lacks %q", tt.spec, err, w)
			}
		}
		if len(cairn.Causes(err)) != len(tt.want) {
			t.Errorf("spec %v: causes %v", tt.spec, cairn.Causes(err))
		}
	}
	if err := s.ValidateParameters(map[string]any{"image": "x"}); err != nil {
		t.Errorf("ValidateParameters of a valid spec: %v", err)
	}

	// An enum names its allowed values on this path (the schema package's
	// own message stays AJV's, which Capact's clients compare).
	files := webStack()
	files["stack.yaml"] = strings.Replace(files["stack.yaml"], "      domain: {type: string, default: example.com}",
		"      domain: {type: string, default: example.com}\n      tier: {type: string, enum: [small, large]}\n      zones: {type: array, items: {enum: [a, 1, true]}}", 1)
	s = mustLoad(t, writeTree(t, files))
	for _, tt := range []struct {
		spec map[string]any
		want string
	}{
		{map[string]any{"image": "x", "tier": "huge"}, `spec/tier must be equal to one of the allowed values: "small", "large"`},
		{map[string]any{"image": "x", "zones": []any{"a", "b"}}, `spec/zones/1 must be equal to one of the allowed values: "a", 1, true`},
	} {
		err := s.ValidateParameters(tt.spec)
		if err == nil || !strings.Contains(err.Error(), tt.want) || len(cairn.Causes(err)) != 1 || cairn.Causes(err)[0].String() != tt.want {
			t.Errorf("spec %v: %v (causes %v): want %q", tt.spec, err, cairn.Causes(err), tt.want)
		}
	}

	// A var whose optional parameter has no value is named.
	files = webStack()
	files["stack.yaml"] = strings.Replace(files["stack.yaml"], "      domain: {type: string, default: example.com}", "      domain: {type: string}", 1)
	s = mustLoad(t, writeTree(t, files))
	_, err := Renderer{}.Render(context.Background(), s, s.NewInstallation("default", "x", "", nil, map[string]any{"image": "x"}))
	if err == nil || !strings.Contains(err.Error(), "var DOMAIN: the installation has no value at spec.domain") {
		t.Errorf("missing var value: %v", err)
	}
	// The same for a replacement reading an optional parameter.
	files = webStack()
	files["stack.yaml"] = strings.Replace(files["stack.yaml"], "      replicas: {type: integer, minimum: 1, default: 2}", "      replicas: {type: integer, minimum: 1}", 1)
	s = mustLoad(t, writeTree(t, files))
	_, err = Renderer{}.Render(context.Background(), s, s.NewInstallation("default", "x", "", nil, map[string]any{"image": "x"}))
	if err == nil || !strings.Contains(err.Error(), "replacements[0]: the installation has no value at spec.replicas") {
		t.Errorf("missing replacement value: %v", err)
	}
	_, err = Renderer{}.Render(context.Background(), s, s.NewInstallation("default", "", "", nil, map[string]any{"image": "x"}))
	if err == nil || !strings.Contains(err.Error(), "no name") {
		t.Errorf("installation without a name: %v", err)
	}
	// A var in a field no varReference declares: kustomize leaves the
	// $(NAME) in place (and only logs it), so the render fails naming the
	// resource, the field and what to declare, rather than write the
	// literal into a child.
	files = webStack()
	files["resources/certificate.yaml"] = strings.Replace(files["resources/certificate.yaml"], "  serviceRef: {name: web}\n", "  serviceRef: {name: web}\n  comment: [\"for $(DOMAIN)\"]\n", 1)
	s = mustLoad(t, writeTree(t, files))
	_, err = Renderer{}.Render(context.Background(), s, s.NewInstallation("default", "x", "", nil, map[string]any{"image": "x"}))
	want := `Certificate cert: spec.comment[0]: "for $(DOMAIN)": var DOMAIN is not substituted in this field: declare it under varReference (path: spec/comment, kind: Certificate) in a kustomizeconfig.yaml listed under configurations`
	if err == nil || !strings.Contains(err.Error(), want) || !cairn.HasCode(err, cairn.CodeInvalid) {
		t.Errorf("var in an undeclared field: %v\nwant it to contain %s", err, want)
	}
	// A value that itself reads $(DOMAIN) is the user's, not a leftover.
	files = webStack()
	s = mustLoad(t, writeTree(t, files))
	if _, err := (Renderer{}).Render(context.Background(), s, s.NewInstallation("default", "x", "", nil, map[string]any{"image": "x", "domain": "$(DOMAIN).example.com"})); err != nil {
		t.Errorf("a parameter holding $(DOMAIN): %v", err)
	}
}

// TestHostileArchives: entries that would escape the package, links and
// devices are refused before anything is read as a stack.
func TestHostileArchives(t *testing.T) {
	mk := func(hdrs ...*tar.Header) []byte {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		tw := tar.NewWriter(zw)
		for _, h := range hdrs {
			if err := tw.WriteHeader(h); err != nil {
				t.Fatal(err)
			}
			if h.Typeflag == tar.TypeReg {
				if _, err := tw.Write(make([]byte, h.Size)); err != nil {
					t.Fatal(err)
				}
			}
		}
		tw.Close()
		zw.Close()
		return buf.Bytes()
	}
	tests := []struct {
		hdr  *tar.Header
		want string
	}{
		{&tar.Header{Name: "../evil.yaml", Typeflag: tar.TypeReg, Size: 1, Mode: 0o644}, `entry "../evil.yaml": paths must be relative and stay inside the package`},
		{&tar.Header{Name: "/etc/passwd", Typeflag: tar.TypeReg, Size: 1, Mode: 0o644}, "paths must be relative"},
		{&tar.Header{Name: "a/../../b", Typeflag: tar.TypeReg, Size: 1, Mode: 0o644}, "paths must be relative"},
		{&tar.Header{Name: "resources/link.yaml", Typeflag: tar.TypeSymlink, Linkname: "/etc/passwd"}, `"resources/link.yaml" is not a regular file`},
		{&tar.Header{Name: "dev", Typeflag: tar.TypeChar}, "is not a regular file"},
	}
	for _, tt := range tests {
		_, err := FromArchive(mk(tt.hdr))
		if err == nil || !strings.Contains(err.Error(), tt.want) || cairn.ErrorCode(err) != cairn.CodeInvalid {
			t.Errorf("archive with %q: %v, want %q", tt.hdr.Name, err, tt.want)
		}
	}

	// A symbolic link in a directory is refused too.
	dir := writeTree(t, webStack())
	if err := os.Symlink("/etc/passwd", filepath.Join(dir, "resources", "passwd.yaml")); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(context.Background(), dir); err == nil || !strings.Contains(err.Error(), "resources/passwd.yaml is not a regular file") {
		t.Errorf("directory with a symlink: %v", err)
	}
}
