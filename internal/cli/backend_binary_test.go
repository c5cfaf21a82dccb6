package cli_test

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// syncBuffer collects a subprocess's stderr while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestExternalBackendWalkthrough is the README's "External storage backends"
// walkthrough, as a new user runs it: the real binary, the file backend as
// a separate process on a free port, the CLI commands, and the files on
// disk after each step.
func TestExternalBackendWalkthrough(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs processes")
	}
	tmp := t.TempDir()
	bin := cairnBinary(t)
	dataDir, values := filepath.Join(tmp, "data"), filepath.Join(tmp, "values")
	// Local mode whatever the environment of the test says.
	env := append(os.Environ(), "CAIRN_DATA_DIR="+dataDir, "USER=walkthrough", "CAIRN_SERVER=", "CAIRN_CONFIG="+filepath.Join(dataDir, "no-config.yaml"))

	// 1. Start the file backend on a free port.
	backend := exec.Command(bin, "backend", "file", "--dir", values, "--listen", "127.0.0.1:0")
	backend.Env = env
	var backendErr syncBuffer
	backend.Stderr = &backendErr
	stdout, err := backend.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := backend.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	var waitErr error
	t.Cleanup(func() {
		select {
		case <-exited:
		default:
			backend.Process.Kill()
			<-exited
		}
	})
	lines := make(chan string, 4)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		waitErr = backend.Wait()
		close(exited)
	}()
	var url string
	select {
	case line := <-lines:
		// "file backend serving DIR at grpc://127.0.0.1:PORT"
		_, url, _ = strings.Cut(line, " at ")
		if !strings.HasPrefix(url, "grpc://127.0.0.1:") {
			t.Fatalf("backend said %q", line)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("the backend did not start; stderr:\n%s", backendErr.String())
	}

	run := func(wantCode int, args ...string) string {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Env = env
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if code != wantCode {
			t.Fatalf("cairn %s: exit %d, want %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, wantCode, out.String(), errOut.String())
		}
		return out.String() + errOut.String()
	}
	files := func(id string) []string {
		t.Helper()
		entries, err := os.ReadDir(filepath.Join(values, id))
		if os.IsNotExist(err) {
			return nil
		}
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		return names
	}
	wantFiles := func(step, id string, want ...string) {
		t.Helper()
		if got := files(id); !slices.Equal(got, want) {
			t.Fatalf("%s: files of %s = %v, want %v", step, id, got, want)
		}
	}
	read := func(id, name string) string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(values, id, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}

	// 2. Register it and check it.
	if out := run(0, "backends", "register", "--url", url, "--accept-value", "--alias", "files"); !strings.Contains(out, "registered: "+url) {
		t.Errorf("register: %s", out)
	}
	if out := run(0, "backends", "check", "files"); !strings.Contains(out, "SERVING") {
		t.Errorf("check: %s", out)
	}

	// 3. Create an instance stored in it.
	dir := t.TempDir()
	manifest := filepath.Join(dir, "db.yaml")
	if err := os.WriteFile(manifest, []byte(`apiVersion: hub.cairn.dev/v1
kind: TypeInstance
metadata:
  name: db-credentials
spec:
  typeRef: {path: cap.type.database.credentials, revision: 0.1.0}
  backend: {id: files}
  value: {username: billing, password: change-me}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	run(0, "apply", "-f", manifest)
	inst := instanceOf(t, run(0, "get", "cap.type.database.credentials", "db-credentials", "-o", "json"))
	id := inst.ID
	wantFiles("create", id, "1.json")
	if got := read(id, "1.json"); got != `{"password":"change-me","username":"billing"}` {
		t.Errorf("1.json = %s", got)
	}

	// 4. Read it back through the hub.
	if out := run(0, "get", id, "-o", "json"); !strings.Contains(out, `"password": "change-me"`) {
		t.Errorf("get: %s", out)
	}
	if out := run(0, "describe", id); !regexp.MustCompile(`Alias:\s+files`).MatchString(out) {
		t.Errorf("describe: %s", out)
	}

	// 5. Update it: a second file.
	v2 := filepath.Join(dir, "v2.json")
	if err := os.WriteFile(v2, []byte(`{"username":"billing","password":"rotated"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	run(0, "update", id, "--value-file", v2)
	wantFiles("update", id, "1.json", "2.json")
	if got := read(id, "2.json"); got != `{"password":"rotated","username":"billing"}` {
		t.Errorf("2.json = %s", got)
	}

	// 6. Lock it: a lock file; an update by someone else is refused (exit 5).
	run(0, "lock", id, "--owner", "deploy-42")
	wantFiles("lock", id, "1.json", "2.json", "lock")
	if got := read(id, "lock"); got != "deploy-42" {
		t.Errorf("lock = %q", got)
	}
	// (A change: an update to the value it has changes nothing and is
	// answered as the REST API answers a no-op PUT, in both modes.)
	v3 := filepath.Join(dir, "v3.json")
	if err := os.WriteFile(v3, []byte(`{"username":"billing","password":"stolen"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	run(5, "update", id, "--value-file", v3)
	wantFiles("refused update", id, "1.json", "2.json", "lock")

	// 7. Unlock it: the lock file goes.
	run(0, "unlock", id, "--owner", "deploy-42")
	wantFiles("unlock", id, "1.json", "2.json")

	// 8. Delete it: the directory goes.
	run(0, "delete", id)
	wantFiles("delete", id)
	run(3, "get", id)

	// 9. SIGTERM stops the backend gracefully.
	if err := backend.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
		if waitErr != nil {
			t.Errorf("backend exited with %v after SIGTERM; stderr:\n%s", waitErr, backendErr.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("backend did not stop on SIGTERM")
	}
	if log := backendErr.String(); !strings.Contains(log, "storage backend stopped") || strings.Contains(log, "change-me") || strings.Contains(log, "rotated") {
		t.Errorf("backend log (must show the shutdown and no value):\n%s", log)
	}
	// With the backend gone the hub says so (exit 6).
	run(6, "backends", "check", "files")
}
