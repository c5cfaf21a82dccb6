package cli_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/store/postgres/pgtest"
)

// backupBinary is the real cairn binary with helpers to run it and to start
// cairn serve on a data directory.
type backupBinary struct {
	t   *testing.T
	bin string
	env []string
}

func newBackupBinary(t *testing.T) *backupBinary {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the binary and starts servers")
	}
	dir := t.TempDir()
	bin := cairnBinary(t)
	env := append(os.Environ(), "HOME="+dir, "CAIRN_SERVER=", "CAIRN_DATABASE=", "CAIRN_CONFIG="+filepath.Join(dir, "no-config.yaml"))
	return &backupBinary{t: t, bin: bin, env: env}
}

func (b *backupBinary) run(args ...string) (string, string, int) {
	b.t.Helper()
	cmd := exec.Command(b.bin, args...)
	cmd.Env = b.env
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		b.t.Fatal(err)
	}
	return out.String(), errOut.String(), code
}

func (b *backupBinary) must(args ...string) string {
	b.t.Helper()
	out, errOut, code := b.run(args...)
	if code != 0 {
		b.t.Fatalf("cairn %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errOut)
	}
	return out
}

// serve starts cairn serve on dataDir and returns its URL and a stop func.
func (b *backupBinary) serve(dataDir string, extra ...string) (string, func()) {
	b.t.Helper()
	srv, url := b.start(dataDir, extra...)
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		srv.Process.Signal(syscall.SIGTERM)
		srv.Wait()
	}
	b.t.Cleanup(stop)
	return url, stop
}

// start starts cairn serve on dataDir and returns the process, which the
// caller ends (a cleanup kills it if it is still running), and its URL.
func (b *backupBinary) start(dataDir string, extra ...string) (*exec.Cmd, string) {
	b.t.Helper()
	srv := exec.Command(b.bin, append([]string{"--data-dir", dataDir, "serve", "--allow-anonymous", "--addr", "127.0.0.1:0"}, extra...)...)
	srv.Env = b.env
	var srvErr syncBuffer
	srv.Stderr = &srvErr
	stdout, err := srv.StdoutPipe()
	if err != nil {
		b.t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		b.t.Fatal(err)
	}
	b.t.Cleanup(func() {
		if srv.ProcessState == nil {
			srv.Process.Kill()
			srv.Wait()
		}
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	m := regexp.MustCompile(`^cairn serving on (http://\S+) `).FindStringSubmatch(line)
	if err != nil || m == nil {
		b.t.Fatalf("cairn serve printed %q (%v); stderr:\n%s", line, err, srvErr.String())
	}
	return srv, m[1]
}

// instances lists the typeinstances of a store as name -> value.
func (b *backupBinary) instances(args ...string) map[string]string {
	b.t.Helper()
	out := b.must(append(args, "get", "typeinstances", "-o", "json")...)
	var list struct {
		Items []struct {
			Metadata struct{ Name string }
			Spec     struct{ Value json.RawMessage }
		}
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		b.t.Fatalf("get typeinstances -o json: %v\n%s", err, out)
	}
	m := map[string]string{}
	for _, it := range list.Items {
		m[it.Metadata.Name] = string(it.Spec.Value)
	}
	return m
}

// builtinType is the Type path of the store's built-in backend instance.
func (b *backupBinary) builtinType(args ...string) string {
	b.t.Helper()
	out := b.must(append(args, "get", "typeinstance", cairn.BuiltinBackendID, "-o", "json")...)
	var inst struct {
		Spec struct{ TypeRef struct{ Path string } }
	}
	if err := json.Unmarshal([]byte(out), &inst); err != nil {
		b.t.Fatalf("get typeinstance %s -o json: %v\n%s", cairn.BuiltinBackendID, err, out)
	}
	return inst.Spec.TypeRef.Path
}

func listRV(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url + "/apis/hub.cairn.dev/v1/typeinstances")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list struct {
		Metadata struct{ ResourceVersion string }
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil || list.Metadata.ResourceVersion == "" {
		t.Fatalf("list: %v, resourceVersion %q", err, list.Metadata.ResourceVersion)
	}
	return list.Metadata.ResourceVersion
}

// TestBackupRestoreBinary takes a backup of a data directory while cairn
// serve runs on it, restores it into a new one, and checks what a user
// sees: the same instances and values, a watch resumed with a
// resourceVersion from before the restore answered 410 Gone, refusals of a
// non-empty target and of a damaged file that change nothing.
func TestBackupRestoreBinary(t *testing.T) {
	b := newBackupBinary(t)
	dir := t.TempDir()
	a, c := filepath.Join(dir, "a"), filepath.Join(dir, "c")
	file := filepath.Join(dir, "cairn.bak")

	url, stop := b.serve(a)
	b.must("--server", url, "apply", "-f", "../../examples/quickstart")
	before := listRV(t, url)
	want := b.instances("--server", url)
	if len(want) < 4 {
		t.Fatalf("quickstart gave %d instances", len(want))
	}

	// Online: the server keeps its store open and serving.
	out := b.must("--data-dir", a, "backup", "--to", file)
	if !strings.Contains(out, "backed up") || !strings.Contains(out, "to "+file) {
		t.Errorf("backup printed %q", out)
	}
	if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("backup file: %v, mode %v; want 0600", err, fi.Mode())
	}
	// A change after the backup, which the restore will not have.
	extra := filepath.Join(dir, "extra.yaml")
	if err := os.WriteFile(extra, []byte(`apiVersion: hub.cairn.dev/v1
kind: TypeInstance
metadata: {name: after-backup}
spec: {typeRef: {path: cap.type.test.note, revision: 0.1.0}, value: {n: 1}}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	b.must("--server", url, "apply", "-f", extra)
	after := listRV(t, url)
	if after == before {
		t.Fatalf("the change after the backup did not move the resourceVersion (%s)", after)
	}
	// A restore under a running server is refused, --force or not: the
	// server's caches would go on serving (and writing over) what the
	// restore replaced. Nothing changes.
	pre := b.instances("--server", url)
	if _, errOut, code := b.run("--data-dir", a, "restore", "--force", "--from", file); code != 4 || !strings.Contains(errOut, "a cairn server is serving this store") || !strings.Contains(errOut, "stop") {
		t.Errorf("restore under a running server: exit %d %q; want 4 saying a server serves the store", code, errOut)
	}
	if got := b.instances("--server", url); !equalMaps(got, pre) {
		t.Errorf("a refused restore changed the store:\n got %v\nwant %v", got, pre)
	}
	stop()

	out = b.must("--data-dir", c, "restore", "--from", file)
	if !strings.Contains(out, "410 Gone") {
		t.Errorf("restore printed %q", out)
	}
	if got := b.instances("--data-dir", c); !equalMaps(got, want) {
		t.Fatalf("restored instances differ:\n got %v\nwant %v", got, want)
	}

	url, stop = b.serve(c)
	for _, rv := range []string{before, after} {
		resp, err := http.Get(url + "/apis/hub.cairn.dev/v1/typeinstances?watch=true&resourceVersion=" + rv)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusGone || !strings.Contains(string(body), `"reason":"Expired"`) {
			t.Errorf("watch from resourceVersion %s after the restore: %d %s; want 410 Expired", rv, resp.StatusCode, body)
		}
	}
	// A relist gives a position that watches from.
	rv := listRV(t, url)
	resp, err := http.Get(url + "/apis/hub.cairn.dev/v1/typeinstances?watch=true&timeoutSeconds=1&resourceVersion=" + rv)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("watch from the relisted resourceVersion %s: %d", rv, resp.StatusCode)
	}
	stop()
	// What the server left (it may record state of its own, a lease).
	want = b.instances("--data-dir", c)

	// A non-empty target is refused, and so is a damaged file: exit codes
	// of AlreadyExists and Invalid, nothing changed.
	if _, errOut, code := b.run("--data-dir", c, "restore", "--from", file); code != 4 || !strings.Contains(errOut, "--force") {
		t.Errorf("restore into a non-empty store: exit %d %q", code, errOut)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.bak")
	if err := os.WriteFile(bad, data[:len(data)/2], 0o600); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := b.run("--data-dir", c, "restore", "--force", "--from", bad); code != 2 || !strings.Contains(errOut, "nothing was restored") {
		t.Errorf("restore of a cut file: exit %d %q", code, errOut)
	}
	if _, err := os.Stat(filepath.Join(dir, "d")); err != nil {
		if _, _, code := b.run("--data-dir", filepath.Join(dir, "d"), "restore", "--from", bad); code != 2 {
			t.Errorf("restore of a cut file into a new directory: exit %d", code)
		}
		if _, err := os.Stat(filepath.Join(dir, "d", "cairn.db")); err == nil {
			t.Error("a refused restore created a store")
		}
	}
	if got := b.instances("--data-dir", c); !equalMaps(got, want) {
		t.Fatalf("refused restores changed the store:\n got %v\nwant %v", got, want)
	}
	if out := b.must("--data-dir", c, "restore", "--force", "--from", file); !strings.Contains(out, "restored") {
		t.Errorf("restore --force printed %q", out)
	}
}

// TestBackupRestoreBinaryPostgres restores a SQLite backup into PostgreSQL
// and backs that up again, through the CLI's --database.
func TestBackupRestoreBinaryPostgres(t *testing.T) {
	b := newBackupBinary(t)
	schema := pgtest.NewSchema(t)
	db := schema.DSN
	if strings.Contains(db, "?") {
		db += "&search_path=" + schema.Name
	} else {
		db += "?search_path=" + schema.Name
	}
	dir := t.TempDir()
	a := filepath.Join(dir, "a")
	b.must("--data-dir", a, "apply", "-f", "../../examples/quickstart")
	want := b.instances("--data-dir", a)
	file := filepath.Join(dir, "a.bak")
	b.must("--data-dir", a, "backup", "--to", file)

	if out := b.must("--database", db, "restore", "--from", file); !strings.Contains(out, "postgresql store") {
		t.Errorf("restore printed %q", out)
	}
	if got := b.instances("--database", db); !equalMaps(got, want) {
		t.Fatalf("instances restored into PostgreSQL differ:\n got %v\nwant %v", got, want)
	}
	if got := b.builtinType("--database", db); got != "cap.core.type.hub.storage.postgresql" {
		t.Errorf("the built-in backend restored into PostgreSQL is of Type %s", got)
	}
	// And back: a backup of PostgreSQL restores into SQLite.
	file2 := filepath.Join(dir, "pg.bak")
	b.must("--database", db, "backup", "--to", file2)
	e := filepath.Join(dir, "e")
	b.must("--data-dir", e, "restore", "--from", file2)
	if got := b.instances("--data-dir", e); !equalMaps(got, want) {
		t.Fatalf("instances back in SQLite differ:\n got %v\nwant %v", got, want)
	}
	if got := b.builtinType("--data-dir", e); got != "cap.core.type.hub.storage.sqlite" {
		t.Errorf("the built-in backend restored back into SQLite is of Type %s", got)
	}
	if _, errOut, code := b.run("--database", db, "restore", "--from", file); code != 4 || !strings.Contains(errOut, "not empty") {
		t.Errorf("restore into a non-empty database: exit %d %q", code, errOut)
	}
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}
