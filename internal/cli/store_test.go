package cli_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/internal/cli"
	"github.com/cairn-dev/cairn/store/postgres"
	"github.com/cairn-dev/cairn/store/postgres/pgtest"
	"github.com/cairn-dev/cairn/store/sqlite"
)

// runVars runs the CLI in-process with exactly the environment vars.
func runVars(t *testing.T, vars map[string]string, args ...string) result {
	t.Helper()
	var out, errOut bytes.Buffer
	code := cli.Main(context.Background(), args, cli.Env{
		Stdout: &out,
		Stderr: &errOut,
		Getenv: func(k string) string { return vars[k] },
	})
	return result{code: code, stdout: out.String(), stderr: errOut.String()}
}

func TestMigrateSQLite(t *testing.T) {
	dir := t.TempDir()
	vars := map[string]string{cli.EnvDataDir: dir}
	for range 2 { // the second run finds nothing to do
		r := runVars(t, vars, "migrate")
		want := fmt.Sprintf("sqlite store %s/cairn.db: schema version %d\n", dir, sqlite.SchemaVersion())
		if r.code != 0 || r.stdout != want {
			t.Fatalf("migrate: exit %d, stdout %q, stderr %q; want %q", r.code, r.stdout, r.stderr, want)
		}
	}
	r := runVars(t, vars, "migrate", "-o", "json")
	var got struct {
		Store         string
		SchemaVersion int
	}
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil || got.Store != "sqlite" || got.SchemaVersion != sqlite.SchemaVersion() {
		t.Fatalf("migrate -o json = %s (%v)", r.stdout, err)
	}
}

func TestDatabaseFlagWantsPostgresURL(t *testing.T) {
	for _, vars := range []map[string]string{
		{cli.EnvDataDir: t.TempDir()},
		{cli.EnvDataDir: t.TempDir(), cli.EnvDatabase: "mysql://root@localhost/cairn"},
	} {
		args := []string{"migrate"}
		if vars[cli.EnvDatabase] == "" {
			args = append(args, "--database", "file:/tmp/cairn.db")
		}
		r := runVars(t, vars, args...)
		if r.code != 2 || !strings.Contains(r.stderr, "postgres://") {
			t.Fatalf("migrate %v with %v: exit %d, stderr %q; want a usage error naming postgres://", args, vars, r.code, r.stderr)
		}
	}
}

// schemaURL is the test database's URL with the schema as search_path, a
// connection parameter pgx passes on to the server.
func schemaURL(t *testing.T, sc pgtest.Schema) string {
	t.Helper()
	u, err := url.Parse(sc.DSN)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		t.Skipf("%s is not a postgres:// URL: %v", pgtest.EnvDSN, err)
	}
	q := u.Query()
	q.Set("search_path", sc.Name)
	u.RawQuery = q.Encode()
	return u.String()
}

// TestCommandsOnPostgres: --database and CAIRN_DATABASE put every command on
// PostgreSQL; migrate reports the version without the password.
func TestCommandsOnPostgres(t *testing.T) {
	sc := pgtest.NewSchema(t)
	dbURL := schemaURL(t, sc)
	vars := map[string]string{cli.EnvDataDir: t.TempDir(), "USER": "tester"}

	r := runVars(t, vars, "migrate", "--database", dbURL)
	if r.code != 0 || !strings.HasPrefix(r.stdout, "postgresql store postgresql://") ||
		!strings.HasSuffix(r.stdout, fmt.Sprintf("schema version %d\n", postgres.SchemaVersion())) {
		t.Fatalf("migrate: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if u, _ := url.Parse(dbURL); u.User != nil {
		if pw, ok := u.User.Password(); ok && strings.Contains(r.stdout, ":"+pw+"@") {
			t.Fatalf("migrate prints the password: %q", r.stdout)
		}
	}

	vars[cli.EnvDatabase] = dbURL
	if r := runVars(t, vars, "apply", "-f", quickstart); r.code != 0 {
		t.Fatalf("apply: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = runVars(t, vars, "list", "-n", "default", "-o", "json")
	var list []cairn.Instance
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil || len(list) != 2 {
		t.Fatalf("list on PostgreSQL = %s (%v, stderr %s), want the two quickstart instances", r.stdout, err, r.stderr)
	}
	// They are in PostgreSQL, not in the SQLite file of the data directory.
	st := sc.Open(t)
	got, err := st.GetInstances(t.Context(), []string{list[0].ID, cairn.BuiltinBackendID})
	if err != nil || len(got) != 2 {
		t.Fatalf("instances in the PostgreSQL schema = %v, %v", got, err)
	}
	if got[1].TypeRef.Path != "cap.core.type.hub.storage.postgresql" {
		t.Fatalf("built-in backend type = %s, want cap.core.type.hub.storage.postgresql", got[1].TypeRef)
	}
	delete(vars, cli.EnvDatabase)
	if r := runVars(t, vars, "list", "-n", "default", "-o", "json"); strings.TrimSpace(r.stdout) != "[]" {
		t.Fatalf("list on SQLite = %s, want nothing", r.stdout)
	}
}

// startServe runs `cairn serve` in-process until the test ends and returns
// its base URL.
func startServe(t *testing.T, vars map[string]string, args ...string) string {
	t.Helper()
	return startServeSecure(t, vars, append([]string{"--allow-anonymous"}, args...)...)
}

// startServeSecure is startServe without --allow-anonymous.
func startServeSecure(t *testing.T, vars map[string]string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	var errOut bytes.Buffer
	done := make(chan int, 1)
	go func() {
		done <- cli.Main(ctx, append([]string{"serve", "--addr", "127.0.0.1:0"}, args...), cli.Env{
			Stdout: pw, Stderr: &errOut, Getenv: func(k string) string { return vars[k] },
		})
		pw.Close()
	}()
	t.Cleanup(func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("serve exited %d: %s", code, errOut.String())
		}
	})
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatalf("serve: %v (stderr %s)", err, errOut.String())
	}
	go io.Copy(io.Discard, pr)
	// "cairn serving on http://127.0.0.1:PORT (store ...)"
	f := strings.Fields(line)
	if len(f) < 4 || !strings.HasPrefix(f[3], "http://") && !strings.HasPrefix(f[3], "https://") {
		t.Fatalf("serve printed %q", line)
	}
	return f[3]
}

func getJSON(t *testing.T, u string, v any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s %s", u, resp.Status, body)
	}
	if v != nil {
		if err := json.Unmarshal(body, v); err != nil {
			t.Fatalf("GET %s: %v\n%s", u, err, body)
		}
	}
}

// TestServeTwoReplicasOnPostgres: two `cairn serve` on one database (the
// second by CAIRN_DATABASE) both start, migrate once, and serve what the
// other side wrote. The multi-replica workload test comes with the REST
// client.
func TestServeTwoReplicasOnPostgres(t *testing.T) {
	sc := pgtest.NewSchema(t)
	dbURL := schemaURL(t, sc)
	a := startServe(t, map[string]string{cli.EnvDataDir: t.TempDir()}, "--database", dbURL)
	b := startServe(t, map[string]string{cli.EnvDataDir: t.TempDir(), cli.EnvDatabase: dbURL})
	for _, base := range []string{a, b} {
		getJSON(t, base+"/readyz", nil)
	}
	vars := map[string]string{cli.EnvDataDir: t.TempDir(), cli.EnvDatabase: dbURL, "USER": "tester"}
	if r := runVars(t, vars, "apply", "-f", quickstart); r.code != 0 {
		t.Fatalf("apply: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	var list struct {
		Items []struct {
			Metadata struct{ Name string }
			Spec     struct {
				TypeRef   cairn.TypeRef
				Namespace string
			}
		}
	}
	for _, base := range []string{a, b} {
		getJSON(t, base+"/apis/hub.cairn.dev/v1/typeinstances", &list)
		var builtin, others int
		for _, it := range list.Items {
			if it.Metadata.Name == cairn.BuiltinBackendID {
				builtin++
				if it.Spec.TypeRef.Path != "cap.core.type.hub.storage.postgresql" {
					t.Errorf("%s: built-in backend type %s", base, it.Spec.TypeRef)
				}
			} else if it.Spec.Namespace != "cairn-system" {
				others++ // the hub's own instances (other backends, the policy) aside
			}
		}
		if builtin != 1 || others != 2 {
			t.Fatalf("%s serves %d built-in backends and %d other instances, want 1 and the 2 applied", base, builtin, others)
		}
	}
}

// cairn backup reads the store as it is: a mistyped --data-dir or an
// unmigrated database is refused (not created and backed up empty), and a
// store an older cairn serves is not migrated under it by the backup.
func TestBackupDoesNotCreateOrMigrate(t *testing.T) {
	dir := t.TempDir()
	missing := dir + "/no-such-dir"
	r := runVars(t, map[string]string{cli.EnvDataDir: missing}, "backup", "--to", dir+"/a.bak")
	if r.code != cli.ExitNotFound || !strings.Contains(r.stderr, missing+"/cairn.db") || !strings.Contains(r.stderr, "no cairn store there") {
		t.Errorf("backup of a missing data directory: exit %d, stderr %q", r.code, r.stderr)
	}
	if _, err := os.Stat(missing); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("backup created %s: %v", missing, err)
	}

	sc := pgtest.NewSchema(t)
	db := schemaURL(t, sc)
	vars := map[string]string{cli.EnvDataDir: dir, cli.EnvDatabase: db}
	r = runVars(t, vars, "backup", "--to", dir+"/b.bak")
	if r.code != cli.ExitNotFound || !strings.Contains(r.stderr, "holds no cairn tables") {
		t.Errorf("backup of an empty schema: exit %d, stderr %q", r.code, r.stderr)
	}
	if r := runVars(t, vars, "migrate"); r.code != 0 {
		t.Fatalf("migrate: exit %d, stderr %q", r.code, r.stderr)
	}
	sc.Exec(t, `DELETE FROM schema_migrations WHERE version = $1`, postgres.SchemaVersion())
	r = runVars(t, vars, "backup", "--to", dir+"/c.bak")
	if r.code != cli.ExitUnavailable || !strings.Contains(r.stderr, "is older than this cairn binary's") {
		t.Errorf("backup of an older schema: exit %d, stderr %q", r.code, r.stderr)
	}
	for _, f := range []string{"a.bak", "b.bak", "c.bak"} {
		if _, err := os.Stat(dir + "/" + f); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("a refused backup wrote %s: %v", f, err)
		}
	}
}
