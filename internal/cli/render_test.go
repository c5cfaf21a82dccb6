package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/internal/cli"
	"github.com/cairn-dev/cairn/stack"
)

const minimalGCPStack = "../../examples/stacks/minimal-gcp"

// renderCLI runs cairn with args in-process, with no data directory in the
// environment: render must not need one.
func renderCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	home := t.TempDir()
	code = cli.Main(context.Background(), args, cli.Env{
		Stdout: &out, Stderr: &errOut,
		Getenv: func(k string) string {
			if k == "HOME" {
				return home
			}
			return ""
		},
	})
	if entries, _ := os.ReadDir(home); len(entries) > 0 {
		t.Errorf("cairn %s wrote into HOME: %v", strings.Join(args, " "), entries)
	}
	return code, out.String(), errOut.String()
}

func TestRenderCommand(t *testing.T) {
	code, out, stderr := renderCLI(t, "render", minimalGCPStack, "-p", "region=us-west1", "-p", "projectID=bars-project",
		"-p", "keepDefaultingLabels=true", "-p", "credentialsSecretRef.name=gcp-sa", "--name", "bars", "--label", "team=bars", "--uid", "u-1")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	// The same as the stack package renders it, byte for byte.
	s, err := stack.Load(context.Background(), minimalGCPStack)
	if err != nil {
		t.Fatal(err)
	}
	inst := s.NewInstallation("default", "bars", "u-1", map[string]string{"team": "bars"}, map[string]any{
		"region": "us-west1", "projectID": "bars-project", "keepDefaultingLabels": true,
		"credentialsSecretRef": map[string]any{"name": "gcp-sa", "namespace": "crossplane-system", "key": "credentials"}})
	rs, err := stack.Renderer{}.Render(context.Background(), s, inst)
	if err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	if err := stack.EncodeYAML(&want, rs); err != nil {
		t.Fatal(err)
	}
	if out != want.String() {
		t.Errorf("cairn render output differs from stack.Render:\n%s", out)
	}
	// The boolean -p value was typed (the schema would refuse "true"), and kept the marks.
	if !strings.Contains(out, "resourceclass.crossplane.io/is-default-class") || !strings.Contains(out, "name: gcp-sa") {
		t.Errorf("typed or dotted -p values not applied:\n%s", out)
	}
	if n := strings.Count(out, "\nkind: "); n != 8 {
		t.Errorf("%d resources", n)
	}

	// -o json: one List of the same objects.
	code, js, stderr := renderCLI(t, "render", minimalGCPStack, "-o", "json", "-p", "region=us-west1", "-p", "projectID=bars-project",
		"-p", "keepDefaultingLabels=true", "-p", "credentialsSecretRef.name=gcp-sa", "--name", "bars", "--label", "team=bars", "--uid", "u-1")
	var list struct {
		Kind  string
		Items []map[string]any
	}
	if err := json.Unmarshal([]byte(js), &list); code != 0 || err != nil || list.Kind != "List" || len(list.Items) != len(rs) {
		t.Fatalf("-o json: exit %d, %v, %s", code, err, stderr)
	}
	for i, r := range rs {
		want, _ := json.Marshal(r.Object)
		got, _ := json.Marshal(list.Items[i])
		if string(got) != string(want) {
			t.Errorf("-o json item %d = %s, want %s", i, got, want)
		}
	}

	// Client mode: still offline, the same bytes.
	code, out2, stderr := renderCLI(t, "--server", "http://127.0.0.1:1", "render", minimalGCPStack, "-p", "region=us-west1", "-p", "projectID=bars-project",
		"-p", "keepDefaultingLabels=true", "-p", "credentialsSecretRef.name=gcp-sa", "--name", "bars", "--label", "team=bars", "--uid", "u-1")
	if code != 0 || out2 != out {
		t.Errorf("client mode: exit %d, same output %v: %s", code, out2 == out, stderr)
	}
}

func TestRenderCommandFiles(t *testing.T) {
	dir := t.TempDir()
	params := filepath.Join(dir, "params.yaml")
	if err := os.WriteFile(params, []byte("region: asia-east1\nprojectID: file-project\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, stderr := renderCLI(t, "render", minimalGCPStack, "-f", params, "-p", "projectID=flag-project")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(out, "region: asia-east1") || !strings.Contains(out, "projectID: flag-project") || strings.Contains(out, "file-project") {
		t.Errorf("-f then -p:\n%s", out)
	}
	if !strings.Contains(out, "name: minimal-gcp-network") || !strings.Contains(out, "namespace: default") {
		t.Errorf("default name and namespace:\n%s", out)
	}

	// An installation manifest: its name, namespace, labels and spec.
	manifest := filepath.Join(dir, "inst.yaml")
	if err := os.WriteFile(manifest, []byte(`apiVersion: gcp.stacks.cairn.dev/v1alpha1
kind: MinimalGCP
metadata: {name: small-infra, namespace: infra, labels: {foo-key: bar-value}}
spec: {region: us-west2, projectID: foo-project}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, stderr = renderCLI(t, "render", minimalGCPStack, "-f", manifest)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, w := range []string{"name: small-infra-network", "namespace: infra", "foo-key: bar-value", "stacks.cairn.dev/name: small-infra", "region: us-west2"} {
		if !strings.Contains(out, w) {
			t.Errorf("installation manifest: output lacks %q", w)
		}
	}
}

func TestRenderCommandErrors(t *testing.T) {
	tests := []struct {
		args []string
		code int
		want []string
	}{
		{[]string{"render", minimalGCPStack, "-p", "region=US", "-p", "projectID=x"}, cli.ExitInvalid,
			[]string{"invalid parameters of MinimalGCP", "spec.region must match pattern", "spec.projectID must match pattern"}},
		{[]string{"render", minimalGCPStack, "-p", "region=us-west1"}, cli.ExitInvalid,
			[]string{"spec must have required property 'projectID'"}},
		{[]string{"render", minimalGCPStack, "-p", "region=us-west1", "-p", "projectID=bars-project", "-p", "zone=a"}, cli.ExitInvalid,
			[]string{"spec must NOT have additional properties: zone (known: credentialsSecretRef, keepDefaultingLabels, projectID, region)"}},
		{[]string{"render", minimalGCPStack, "-p", "region"}, cli.ExitInvalid, []string{`-p "region": want KEY=VALUE`}},
		{[]string{"render", minimalGCPStack, "-p", "region=a", "-p", "region.x=1"}, cli.ExitInvalid, []string{"-p region.x: region is not a mapping"}},
		{[]string{"render", "no/such/stack"}, cli.ExitNotFound, []string{"stack package no/such/stack"}},
		{[]string{"render"}, cli.ExitInvalid, []string{"accepts 1 arg(s)"}},
		{[]string{"render", "../../examples/flags"}, cli.ExitInvalid, []string{"has no stack.yaml at its root"}},
		{[]string{"render", minimalGCPStack, "-f", "../../examples/flags/new-project.yaml"}, cli.ExitInvalid,
			[]string{"-f ../../examples/flags/new-project.yaml: an installation of stack minimal-gcp is apiVersion gcp.stacks.cairn.dev/v1alpha1, kind MinimalGCP, not flipt.io/v1alpha1 Flag"}},
	}
	for _, tt := range tests {
		code, out, stderr := renderCLI(t, tt.args...)
		if code != tt.code || out != "" {
			t.Errorf("cairn %s: exit %d (want %d), stdout %q", strings.Join(tt.args, " "), code, tt.code, out)
		}
		for _, w := range tt.want {
			if !strings.Contains(stderr, w) {
				t.Errorf("cairn %s: stderr %q lacks %q", strings.Join(tt.args, " "), stderr, w)
			}
		}
	}
}
