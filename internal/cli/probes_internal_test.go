package cli

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// The probes answer as the Kubernetes API server's /readyz and /livez do
// (plain "ok", ?verbose, one check by path, ?exclude), with 503 naming the
// failing check.
func TestProbes(t *testing.T) {
	storeErr := errors.New("store unavailable: connection refused")
	mux := http.NewServeMux()
	probes(mux, "readyz", []probeCheck{
		{name: "ping"},
		{name: "store", check: func(context.Context) error { return storeErr }},
	})
	probes(mux, "livez", []probeCheck{{name: "ping"}})
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
		{"/readyz", 503, "[+]ping ok\n[-]store failed: store unavailable: connection refused\nreadyz check failed\n"},
		{"/readyz/ping", 200, "ok\n"},
		{"/readyz/store", 503, "[-]store failed: store unavailable: connection refused\nreadyz check failed\n"},
		{"/readyz?verbose&exclude=store", 200, "[+]ping ok\n[+]store excluded: ok\nreadyz check passed\n"},
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
}
