package stack

import (
	"bytes"
	"context"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/expr"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the current output")

const (
	minimalGCP = "../examples/stacks/minimal-gcp"
	flagsEnv   = "../examples/stacks/flags-env"
)

// webStack is a small stack exercising vars, replacements, nameReference
// (built in and declared) and labels on ordinary Kubernetes kinds.
func webStack() map[string]string {
	return map[string]string{
		"stack.yaml": `name: web
version: 1.2.3
description: A web application behind an ingress.
kind:
  group: web.stacks.example.com
  version: v1
  names: {kind: WebApp}
  parameters:
    type: object
    required: [image]
    properties:
      image: {type: string}
      replicas: {type: integer, minimum: 1, default: 2}
      domain: {type: string, default: example.com}
      tls:
        type: object
        default: {}
        additionalProperties: false
        properties:
          issuer: {type: string, default: letsencrypt}
vars:
- {name: DOMAIN, fieldPath: spec.domain}
- {name: ISSUER, fieldPath: spec.tls.issuer}
replacements:
- source: {kind: WebApp, fieldPath: spec.replicas}
  targets:
  - select: {kind: Deployment, name: web}
    fieldPaths: [spec.replicas]
- source: {kind: WebApp, fieldPath: spec.image}
  targets:
  - select: {kind: Deployment}
    fieldPaths: ["spec.template.spec.containers.[name=web].image"]
outputs:
- {name: url, value: "https://${parameters.domain}/"}
- {name: service, value: "${resources.Service.web.metadata.name}"}
- {name: replicas, value: "${parameters.replicas}"}
- {name: available, value: "${resources.Deployment.web.status.availableReplicas}"}
readiness:
- match: {kind: Deployment}
  type: MatchCondition
  matchCondition: {type: Available}
- match: {kind: Service, name: web}
  type: NonEmpty
  fieldPath: spec.ports
deletionPriorities:
- {match: {kind: Ingress}, priority: 10}
- {match: {kind: ConfigMap}, priority: -1}
- {match: {kind: ConfigMap, name: settings}, priority: -5}
`,
		"resources/kustomization.yaml": `resources:
- app.yaml
- certificate.yaml
configurations:
- kustomizeconfig.yaml
`,
		"resources/kustomizeconfig.yaml": `nameReference:
- kind: Service
  fieldSpecs:
  - {path: spec/serviceRef/name, kind: Certificate}
varReference:
- {path: spec/issuer, kind: Certificate}
- {path: spec/dnsName, kind: Certificate}
- {path: data/URL, kind: ConfigMap}
`,
		"resources/app.yaml": `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels: {app: web}
spec:
  replicas: 1
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: web
        image: placeholder
        env:
        - {name: PUBLIC_HOST, value: $(DOMAIN)}
        envFrom:
        - configMapRef: {name: settings}
---
apiVersion: v1
kind: Service
metadata:
  name: web
spec:
  selector: {app: web}
  ports:
  - port: 80
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
data:
  URL: https://$(DOMAIN)/
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: web
spec:
  rules:
  - host: www.example.com
    http:
      paths:
      - path: /
        pathType: Prefix
        backend:
          service:
            name: web
            port: {number: 80}
`,
		"resources/certificate.yaml": `apiVersion: certs.example.com/v1
kind: Certificate
metadata:
  name: cert
spec:
  dnsName: www.$(DOMAIN)
  issuer: $(ISSUER)
  serviceRef: {name: web}
`,
	}
}

// writeTree writes files under a new temporary directory and returns it.
func writeTree(t testing.TB, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for p, c := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func mustLoad(t testing.TB, src string) *Stack {
	t.Helper()
	s, err := Load(context.Background(), src)
	if err != nil {
		t.Fatalf("Load(%s): %v", src, err)
	}
	return s
}

func mustRender(t testing.TB, s *Stack, inst Installation) []Resource {
	t.Helper()
	rs, err := Renderer{}.Render(context.Background(), s, inst)
	if err != nil {
		t.Fatalf("Render: %v", err)
	}
	return rs
}

func encode(t testing.TB, rs []Resource) string {
	t.Helper()
	var b bytes.Buffer
	if err := EncodeYAML(&b, rs); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// find returns the rendered resource of kind with the original name.
func find(t testing.TB, rs []Resource, kind, name string) Resource {
	t.Helper()
	for _, r := range rs {
		if r.Kind() == kind && r.OriginalName == name {
			return r
		}
	}
	t.Fatalf("no %s %s rendered", kind, name)
	return Resource{}
}

func get(t testing.TB, r Resource, path string) any {
	t.Helper()
	v, ok := expr.Get(r.Object, path)
	if !ok {
		t.Fatalf("%s has no %s", r.Key(), path)
	}
	return v
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./stack -run %s -update to create it)", err, t.Name())
	}
	if got != string(want) {
		t.Errorf("render differs from %s (go test ./stack -update rewrites it):\n%s", path, lineDiff(string(want), got))
	}
}

// lineDiff shows the first differing lines.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < len(w) || i < len(g); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			return "line " + strconv.Itoa(i+1) + ":\n  want: " + wl + "\n  got:  " + gl
		}
	}
	return "(same lines)"
}

// gitRun runs the git binary in dir.
func gitRun(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com",
		"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_SYSTEM=/dev/null")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}
