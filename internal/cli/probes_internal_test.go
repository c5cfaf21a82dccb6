package cli

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// The probes answer as the Kubernetes API server's /readyz and /livez do
// (plain "ok", ?verbose, one check by path, ?exclude), with 503 naming the
// failing check. As there, the reason a store gives is withheld from the
// answer, which everyone may read, and logged: it names hosts, users and
// databases.
func TestProbes(t *testing.T) {
	storeErr := errors.New("store unavailable: failed to connect to `user=cairn database=cairn`: 10.0.0.5:5432 (db.internal): connection refused")
	var logs strings.Builder
	log := slog.New(slog.NewTextHandler(&logs, nil))
	mux := http.NewServeMux()
	probes(mux, log, "readyz", []probeCheck{
		{name: "ping"},
		{name: "started", check: func(context.Context) error { return nil }},
		{name: "store", check: func(context.Context) error { return storeErr }, summary: "store unavailable"},
	})
	probes(mux, log, "livez", []probeCheck{{name: "ping"}})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	for _, tc := range []struct {
		path string
		code int
		body string
	}{
		{"/livez", 200, "ok\n"},
		{"/livez?verbose", 200, "[+]ping ok\nlivez check passed\n"},
		{"/livez/ping", 200, "ok\n"},
		{"/readyz", 503, "[+]ping ok\n[+]started ok\n[-]store failed: store unavailable (reason withheld: see the server's log)\nreadyz check failed\n"},
		{"/readyz/ping", 200, "ok\n"},
		{"/readyz/store", 503, "[-]store failed: store unavailable (reason withheld: see the server's log)\nreadyz check failed\n"},
		{"/readyz?verbose&exclude=store", 200, "[+]ping ok\n[+]started ok\n[+]store excluded: ok\nreadyz check passed\n"},
		{"/readyz/nothing", 404, "404 page not found\n"},
	} {
		resp, err := http.Get(srv.URL + tc.path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.code || string(b) != tc.body {
			t.Errorf("GET %s: %d %q, want %d %q", tc.path, resp.StatusCode, b, tc.code, tc.body)
		}
	}
	if !strings.Contains(logs.String(), "10.0.0.5:5432") {
		t.Errorf("the withheld reason is not in the log:\n%s", logs.String())
	}
}
