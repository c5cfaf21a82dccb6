package cli_test

import (
	"io"
	"net/http"
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
