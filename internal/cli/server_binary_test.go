package cli_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/api/rest"
)

// TestClientBinary runs the real binary in client mode against a real
// cairn serve process, as a user would.
func TestClientBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and starts a server")
	}
	dir := t.TempDir()
	bin := cairnBinary(t)
	// Nothing of the machine's configuration counts. The CLI shares the
	// server's data directory, so it uses the admin kubeconfig serve wrote:
	// createdBy is "admin", the authenticated user, not $USER.
	env := append(os.Environ(), "USER=binary-client", "CAIRN_SERVER=", "CAIRN_CONFIG="+filepath.Join(dir, "no-config.yaml"),
		"CAIRN_DATA_DIR="+filepath.Join(dir, "data"))

	// Port 0: the server picks a free port and prints it.
	srv := serveBinary(t, bin, env, "serve", "--allow-anonymous", "--addr", "127.0.0.1:0")
	url := srv.URL

	run := func(args ...string) (string, string, int) {
		t.Helper()
		return runBinary(t, bin, append(env, "CAIRN_SERVER="+url), args...)
	}

	out, errOut, code := run("apply", "-f", "../../examples/flags/flags.json", "-f", "../../examples/flags/new-project.yaml")
	if code != 0 {
		t.Fatalf("apply: exit %d\n%s", code, errOut)
	}
	matchLines(t, out, `type\.hub\.cairn\.dev/io\.flipt\.flag:1\.0\.0-alpha\.1 created`, `flag\.flipt\.io/new-project created`)

	out, errOut, code = run("get", "flags", "-l", "team=moonshots", "-o", "json")
	var list struct {
		Kind  string        `json:"kind"`
		Items []rest.Object `json:"items"`
	}
	if err := json.Unmarshal([]byte(out), &list); code != 0 || err != nil {
		t.Fatalf("get -o json: exit %d, %v\n%s%s", code, err, out, errOut)
	}
	var spec struct{ Enabled bool }
	if list.Kind != "List" || len(list.Items) != 1 || list.Items[0].Metadata.Name != "new-project" ||
		list.Items[0].Status == nil || list.Items[0].Status.CreatedBy != "admin" ||
		json.Unmarshal(list.Items[0].Spec, &spec) != nil || !spec.Enabled {
		t.Errorf("get -o json = %s", out)
	}

	if out, errOut, code = run("delete", "flag", "new-project"); code != 0 || out != "flag.flipt.io \"new-project\" deleted\n" {
		t.Errorf("delete: exit %d, %q %q", code, out, errOut)
	}
	if _, errOut, code = run("get", "flag", "new-project"); code != 3 || errOut != "error: flags.flipt.io \"new-project\" not found\n" {
		t.Errorf("get after delete: exit %d, %q; want 3 and the server's NotFound", code, errOut)
	}

	if err := srv.Stop(); err != nil {
		t.Errorf("cairn serve did not stop cleanly on SIGTERM: %v\n%s", err, srv.Stderr.String())
	}
	if _, errOut, code = run("get", "flags"); code != 6 || !strings.HasPrefix(errOut, "error: cannot reach the cairn server at "+url) {
		t.Errorf("get with the server gone: exit %d, %q; want 6 and cannot reach", code, errOut)
	}
}
