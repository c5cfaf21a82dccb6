package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestServeSecureCLI: a server started without --allow-anonymous refuses
// the anonymous CLI, and accepts it with the data directory's generated
// kubeconfig, with --kubeconfig and after cairn login --token.
func TestServeSecureCLI(t *testing.T) {
	data, other := t.TempDir(), t.TempDir()
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	vars := map[string]string{"CAIRN_DATA_DIR": data, "CAIRN_CONFIG": cfg}
	url := startServeSecure(t, vars)
	for _, f := range []string{"admin.token", "kubeconfig", "tls/serving.key"} {
		st, err := os.Stat(filepath.Join(data, f))
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v %v, want mode 0600", f, st, err)
		}
	}
	otherVars := map[string]string{"CAIRN_DATA_DIR": other, "CAIRN_CONFIG": cfg}
	if r := runVars(t, otherVars, "--server", url, "get", "typeinstances"); r.code == 0 || !strings.Contains(r.stderr, "forbidden") {
		t.Fatalf("anonymous CLI: %+v", r)
	}
	// The same data directory: the kubeconfig serve wrote is used.
	if r := runVars(t, vars, "--server", url, "apply", "-f", "../../examples/flags/flags.json", "-f", "../../examples/flags/new-project.yaml"); r.code != 0 {
		t.Fatalf("apply with the data directory's credentials: %+v", r)
	}
	if r := runVars(t, otherVars, "--kubeconfig", filepath.Join(data, "kubeconfig"), "get", "flags", "-o", "json"); r.code != 0 || !strings.Contains(r.stdout, `"createdBy": "admin"`) {
		t.Fatalf("--kubeconfig: %+v", r)
	}
	tok, _ := os.ReadFile(filepath.Join(data, "admin.token"))
	if r := runVars(t, otherVars, "login", "--server", url, "--token", "bad token"); r.code == 0 {
		t.Fatalf("login took a token with a space: %+v", r)
	}
	if r := runVars(t, otherVars, "login", "--server", url, "--token", strings.TrimSpace(string(tok))); r.code != 0 {
		t.Fatalf("login: %+v", r)
	}
	if st, err := os.Stat(cfg); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("config after login: %v %v", st, err)
	}
	if r := runVars(t, otherVars, "get", "flags"); r.code != 0 || !strings.Contains(r.stdout, "new-project") {
		t.Fatalf("after login: %+v", r)
	}
	// --as needs the impersonate verb; the admin has it, and the record is the impersonated user's.
	if r := runVars(t, otherVars, "--as", "jane", "get", "flags"); r.code == 0 {
		t.Fatalf("jane (impersonated, without rights) listed flags: %+v", r)
	}
}
