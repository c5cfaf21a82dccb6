package cli_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/cairn-dev/cairn"
)

// TestBinary builds the real cairn binary and runs it as a user would.
func TestBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := cairnBinary(t)
	dataDir := t.TempDir()
	run := func(args ...string) ([]byte, []byte, int) {
		cmd := exec.Command(bin, args...)
		// Local mode whatever the environment of the test says.
		cmd.Env = append(os.Environ(), "CAIRN_DATA_DIR="+dataDir, "USER=binary-test", "CAIRN_SERVER=", "CAIRN_CONFIG="+filepath.Join(dataDir, "no-config.yaml"))
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return stdout.Bytes(), stderr.Bytes(), code
	}

	if out, errOut, code := run("apply", "-f", quickstart); code != 0 {
		t.Fatalf("apply: exit %d\n%s%s", code, out, errOut)
	}
	out, errOut, code := run("list", "-n", "default", "-o", "json")
	if code != 0 {
		t.Fatalf("list: exit %d\n%s", code, errOut)
	}
	var list []cairn.Instance
	if err := json.Unmarshal(out, &list); err != nil {
		t.Fatalf("list -o json: %v\n%s", err, out)
	}
	names := map[string]cairn.Instance{}
	for _, inst := range list {
		names[inst.Name] = inst
	}
	server, config := names["db-server"], names["db-config"]
	if len(list) != 2 || server.ID == "" || config.ID == "" {
		t.Fatalf("list = %+v, want db-server and db-config", list)
	}
	if config.Latest.CreatedBy != "binary-test" || len(config.Uses) != 2 {
		t.Errorf("db-config = %+v, want createdBy binary-test and 2 uses", config)
	}

	if _, errOut, code := run("get", "00000000-0000-0000-0000-000000000000"); code != 3 || !bytes.HasPrefix(errOut, []byte("error: ")) {
		t.Errorf("get of a missing id: exit %d, stderr %q; want 3 and an error line", code, errOut)
	}
}
