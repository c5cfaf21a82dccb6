package cli_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
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
	srv := exec.Command(bin, "serve", "--allow-anonymous", "--addr", "127.0.0.1:0")
	srv.Env = env
	var srvErr syncBuffer
	srv.Stderr = &srvErr
	stdout, err := srv.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop := func() error {
		if stopped {
			return nil
		}
		stopped = true
		if err := srv.Process.Signal(syscall.SIGTERM); err != nil {
			return err
		}
		return srv.Wait()
	}
	t.Cleanup(func() { _ = stop() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	m := regexp.MustCompile(`^cairn serving on (http://\S+) `).FindStringSubmatch(line)
	if err != nil || m == nil {
		t.Fatalf("cairn serve printed %q (%v); stderr:\n%s", line, err, srvErr.String())
	}
	url := m[1]

	run := func(args ...string) (string, string, int) {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Env = append(env, "CAIRN_SERVER="+url)
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return out.String(), errOut.String(), code
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

	if err := stop(); err != nil {
		t.Errorf("cairn serve did not stop cleanly on SIGTERM: %v\n%s", err, srvErr.String())
	}
	if _, errOut, code = run("get", "flags"); code != 6 || !strings.HasPrefix(errOut, "error: cannot reach the cairn server at "+url) {
		t.Errorf("get with the server gone: exit %d, %q; want 6 and cannot reach", code, errOut)
	}
}
