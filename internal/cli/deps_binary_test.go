package cli_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestDependenciesBinary: plan and install of stacks with dependencies
// with the real binary in client mode against a real cairn serve (SQLite),
// as a new user would: an interface-only dependency fails naming the
// interface and installs nothing, then an unmanaged SQL Server satisfies
// it; a shared dependency is created by the first install, reused by the
// second, and kept when the first is uninstalled.
func TestDependenciesBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and starts a server")
	}
	dir := t.TempDir()
	bin := cairnBinary(t)
	env := append(os.Environ(), "USER=deps-client", "CAIRN_SERVER=", "CAIRN_CONFIG="+filepath.Join(dir, "no-config.yaml"),
		"CAIRN_DATA_DIR="+filepath.Join(dir, "data"))
	srv := serveBinary(t, bin, env, "serve", "--addr", "127.0.0.1:0")
	url := srv.URL
	run := func(args ...string) (string, string, int) {
		t.Helper()
		return runBinary(t, bin, append(env, "CAIRN_SERVER="+url), args...)
	}
	must := func(args ...string) string {
		t.Helper()
		out, errOut, code := run(args...)
		if code != 0 {
			t.Fatalf("cairn %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errOut)
		}
		return out
	}
	names := func(kind string) []string {
		t.Helper()
		var l struct {
			Items []struct {
				Metadata struct{ Name string } `json:"metadata"`
			} `json:"items"`
		}
		if err := json.Unmarshal([]byte(must("get", kind, "-o", "json")), &l); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, it := range l.Items {
			out = append(out, it.Metadata.Name)
		}
		return out
	}
	for _, d := range []string{"stacks/flags-env", "stacks/team-portal", "dependencies/shared-sql-server"} {
		must("stack", "add", "../../examples/"+d)
	}

	// The interface-only dependency with no SQL Server: plan and install
	// fail naming the interface; nothing is installed. (reporting is added
	// to the catalog by giving its path.)
	const iface = "satisfies the interface (output $id https://cairn.dev/interfaces#sql-server.connection-string)"
	if _, errOut, code := run("plan", "../../examples/dependencies/reporting", "-p", "team=data"); code == 0 || !strings.Contains(errOut, iface) {
		t.Fatalf("plan without a SQL Server: exit %d, %s", code, errOut)
	}
	if out, errOut, code := run("install", "reporting", "-p", "team=data", "--name", "reports"); code == 0 || !strings.Contains(errOut, iface) {
		t.Fatalf("install without a SQL Server: exit %d, %s%s", code, out, errOut)
	}
	if got := names("reportings"); len(got) != 0 {
		t.Fatalf("a failed install left reportings %v", got)
	}
	if got := names("flagsenvs"); len(got) != 0 {
		t.Fatalf("a failed install left flagsenvs %v", got)
	}

	// Register the existing server (the unmanaged-resource pattern), then
	// the interface-only dependency reuses it.
	sql := filepath.Join(dir, "office-sql.json")
	if err := os.WriteFile(sql, []byte(`{"apiVersion":"examples.stacks.cairn.dev/v1alpha1","kind":"SharedSQLServer","metadata":{"name":"office-sql"},"spec":{"connectionString":"Server=closet;Database=reports"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	must("apply", "-f", sql)
	waitOutputs := time.Now().Add(20 * time.Second)
	for !strings.Contains(must("get", "sharedsqlserver", "office-sql", "-o", "json"), `"sharing"`) {
		if time.Now().After(waitOutputs) {
			t.Fatal("office-sql never got status.sharing")
		}
		time.Sleep(100 * time.Millisecond)
	}
	out := must("install", "reporting", "-p", "team=data", "--name", "reports")
	if !strings.Contains(out, "reused    reuse    default/office-sql") || !strings.Contains(out, "installed install  default/reports") {
		t.Fatalf("install of reports:\n%s", out)
	}

	// team-portal: the first install creates the team's flags, the second
	// reuses them (the reporting install above created the data team's
	// flags already, so use another team).
	out = must("install", "team-portal", "-p", "team=web", "--name", "p1")
	if !strings.Contains(out, "installed install  default/flags-env-") {
		t.Fatalf("install of p1:\n%s", out)
	}
	var plan struct {
		Nodes []struct {
			Key    string   `json:"key"`
			Action string   `json:"action"`
			Paths  []string `json:"paths"`
		} `json:"nodes"`
	}
	if err := json.Unmarshal([]byte(must("plan", "team-portal", "-p", "team=web", "--name", "p2", "-o", "json")), &plan); err != nil {
		t.Fatal(err)
	}
	flags := ""
	for _, n := range plan.Nodes {
		if len(n.Paths) > 0 && n.Paths[0] == "flags" {
			if n.Action != "reuse" {
				t.Fatalf("p2's flags: %+v, want reuse", n)
			}
			flags = strings.TrimPrefix(n.Key, "default/")
		}
	}
	if flags == "" {
		t.Fatalf("no flags node in %+v", plan)
	}
	if out := must("install", "team-portal", "-p", "team=web", "--name", "p2"); !strings.Contains(out, "reused    reuse    default/"+flags) {
		t.Fatalf("install of p2:\n%s", out)
	}

	// Uninstall p1: the shared flags stay, and cannot be deleted while p2
	// uses them.
	must("delete", "teamportal", "p1")
	gone := time.Now().Add(20 * time.Second)
	for {
		_, _, code := run("get", "teamportal", "p1")
		if code == 3 {
			break
		}
		if time.Now().After(gone) {
			t.Fatal("p1 not deleted")
		}
		time.Sleep(100 * time.Millisecond)
	}
	must("get", "flagsenv", flags)
	if _, errOut, code := run("delete", "flagsenv", flags); code == 0 {
		t.Fatalf("deleting the flags p2 uses succeeded: %s", errOut)
	}
}
