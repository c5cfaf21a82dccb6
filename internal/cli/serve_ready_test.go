package cli_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/internal/cli"
	"github.com/cairn-dev/cairn/store/postgres/pgtest"
)

// TestServeProbesFollowPostgres: what docs/operations.md says of the
// probes while PostgreSQL is away. /readyz answers 503 naming the store
// (so a load balancer takes the replica out), /healthz stays ok (so a
// liveness probe does not restart a replica that would only find the
// database gone again), and /readyz is ok again once the database is
// back, without a restart. A server of the test's own is stopped, never
// the shared one.
func TestServeProbesFollowPostgres(t *testing.T) {
	srv := pgtest.StartServer(t)
	base := startServe(t, map[string]string{cli.EnvDataDir: t.TempDir()}, "--database", srv.DSN)
	probe := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := probe("/readyz"); code != http.StatusOK {
		t.Fatalf("/readyz before the outage: %d %s", code, body)
	}

	srv.Stop("fast")
	if code, body := probe("/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "store unavailable") {
		t.Errorf("/readyz with PostgreSQL stopped: %d %s; want 503 store unavailable", code, body)
	}
	if code, body := probe("/healthz"); code != http.StatusOK {
		t.Errorf("/healthz with PostgreSQL stopped: %d %s; want 200", code, body)
	}

	srv.Start()
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, body := probe("/readyz")
		if code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz 30s after PostgreSQL came back: %d %s", code, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestServeWaitsForPostgres: a replica started before its database is up
// (both restarted, a compose file or a pod starting first) does not exit:
// it listens, /livez says it lives, /healthz and /readyz that it is not ready,
// API requests answer 503, and it serves once PostgreSQL is up, without a
// restart, as the Kubernetes API server waits for etcd. A database that
// answers no (a wrong password) is a configuration error no wait cures:
// serve exits at once, saying so.
func TestServeWaitsForPostgres(t *testing.T) {
	t.Run("a wrong password", func(t *testing.T) {
		u, err := url.Parse(pgtest.DSN(t))
		if err != nil {
			t.Fatal(err)
		}
		u.User = url.UserPassword(u.User.Username(), "not-the-password")
		r := runVars(t, map[string]string{cli.EnvDataDir: t.TempDir()}, "serve", "--addr", "127.0.0.1:0", "--database", u.String())
		if r.code != cli.ExitUnavailable || !strings.Contains(r.stderr, "password authentication failed") || strings.Contains(r.stderr, "not-the-password") {
			t.Errorf("serve with a wrong password: exit %d, stderr %q; want %d naming the failed authentication, without the password", r.code, r.stderr, cli.ExitUnavailable)
		}
	})

	srv := pgtest.StartServer(t)
	srv.Stop("fast")
	ctx, cancel := context.WithCancel(context.Background())
	var out, errOut syncBuffer
	done := make(chan int, 1)
	dir := t.TempDir()
	go func() {
		done <- cli.Main(ctx, []string{"serve", "--addr", "127.0.0.1:0", "--allow-anonymous", "--database", srv.DSN}, cli.Env{
			Stdout: &out, Stderr: &errOut, Getenv: func(k string) string { return map[string]string{cli.EnvDataDir: dir}[k] },
		})
	}()
	t.Cleanup(func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("serve exited %d: %s", code, errOut.String())
		}
	})
	// The address comes from the log line that says serve waits.
	var addr string
	for deadline := time.Now().Add(20 * time.Second); addr == ""; {
		select {
		case code := <-done:
			done <- code
			t.Fatalf("serve exited %d while PostgreSQL was down; want it to wait. stderr:\n%s", code, errOut.String())
		default:
		}
		for line := range strings.Lines(errOut.String()) {
			var l struct{ Msg, Addr, Err string }
			if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "waiting for the store" {
				addr = l.Addr
				if !strings.Contains(l.Err, "connect") || strings.Contains(line, "cairn:cairn@") {
					t.Errorf("the log line says %q; want the reason, without the password", line)
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no 'waiting for the store' log line; stderr:\n%s", errOut.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/livez"); code != http.StatusOK {
		t.Errorf("/livez while waiting: %d %s; want 200", code, body)
	}
	// Scripts wait on /healthz before their first request: not before it
	// can be answered.
	if code, body := get("/healthz"); code != http.StatusServiceUnavailable {
		t.Errorf("/healthz while waiting: %d %s; want 503 until start-up is over", code, body)
	}
	if code, body := get("/readyz?verbose"); code != http.StatusServiceUnavailable || !strings.Contains(body, "[-]store failed: store unavailable (reason withheld") || strings.Contains(body, "connect") || !strings.Contains(body, "[-]started failed") {
		t.Errorf("/readyz while waiting: %d %s; want 503 saying it waits for the store", code, body)
	}
	if code, body := get("/apis/hub.cairn.dev/v1/typeinstances"); code != http.StatusServiceUnavailable || !strings.Contains(body, `"reason":"ServiceUnavailable"`) {
		t.Errorf("a list while waiting: %d %s; want a 503 Status", code, body)
	}
	// Without Retry-After, which kubectl would retry for close to a minute
	// before saying anything.
	if resp, err := http.Get("http://" + addr + "/apis"); err != nil || resp.Header.Get("Retry-After") != "" {
		t.Errorf("/apis while waiting: %v; want no Retry-After", err)
	} else {
		resp.Body.Close()
	}
	if strings.Contains(out.String(), "cairn serving on") {
		t.Errorf("serve printed its banner before the store was open: %s", out.String())
	}

	srv.Start()
	for deadline := time.Now().Add(30 * time.Second); ; {
		code, body := get("/readyz")
		if code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz 30s after PostgreSQL came up: %d %s", code, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if code, body := get("/apis/hub.cairn.dev/v1/typeinstances"); code != http.StatusOK {
		t.Errorf("a list once PostgreSQL is up: %d %s", code, body)
	}
	if !strings.Contains(out.String(), "cairn serving on http://"+addr) {
		t.Errorf("serve's banner: %q", out.String())
	}
}

// TestServeMetricsOfThePostgresPool: /metrics shows the replica's
// PostgreSQL connection pool, what an operator alerts on before requests
// queue: its size (pool_max_conns), the connections in use and idle, and
// the acquires that had to wait for a connection.
func TestServeMetricsOfThePostgresPool(t *testing.T) {
	sc := pgtest.NewSchema(t)
	base := startServe(t, map[string]string{cli.EnvDataDir: t.TempDir()}, "--database", schemaURL(t, sc)+"&pool_max_conns=3")
	getJSON(t, base+"/apis/hub.cairn.dev/v1/typeinstances", nil)
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	metrics := string(b)
	for _, want := range []string{
		"\ncairn_postgres_pool_max_connections 3\n",
		"\ncairn_postgres_pool_connections{state=\"acquired\"} ",
		"\ncairn_postgres_pool_connections{state=\"idle\"} ",
		"\ncairn_postgres_pool_acquires_total ",
		"\ncairn_postgres_pool_acquire_waits_total ",
		"\ncairn_postgres_pool_acquire_wait_seconds_total ",
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q", strings.TrimSpace(want))
		}
	}
	if strings.Contains(metrics, "\ncairn_postgres_pool_acquires_total 0\n") {
		t.Errorf("/metrics counts no acquire after a list")
	}
}
