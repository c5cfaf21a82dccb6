package rest_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/api/rest"
	"github.com/cairn-dev/cairn/hub"
	"github.com/cairn-dev/cairn/store/sqlite"
)

// TestServerErrorIsLogged: a request that fails on the server's side
// (here: its store is gone) is logged with the error the client got, so
// an operator reading the server's log sees why, not only a bare status.
func TestServerErrorIsLogged(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "cairn.db"))
	if err != nil {
		t.Fatal(err)
	}
	h, err := hub.New(ctx, hub.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	var logs lockedBuffer
	srv := httptest.NewServer(rest.New(rest.Config{Hub: h, Logger: slog.New(slog.NewJSONHandler(&logs, nil))}))
	t.Cleanup(srv.Close)
	e := &restEnv{t: t, ctx: ctx, h: h, url: srv.URL, client: srv.Client()}
	e.mustDo("POST", hubGV+"/types", "application/json", flagsRD, http.StatusCreated)
	e.mustDo("POST", flagsIn("default"), "application/json", flag("a", nil, `{"key":"x"}`), http.StatusCreated)
	if strings.Contains(logs.String(), `"request"`) {
		t.Fatalf("a request that succeeded was logged at info:\n%s", logs.String())
	}

	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	r := e.do("POST", flagsIn("default"), "application/json", flag("b", nil, `{"key":"x"}`))
	if r.code < 500 {
		t.Fatalf("create on a closed store: %s; want a 5xx", r)
	}
	var status rest.Status
	if err := json.Unmarshal(r.body, &status); err != nil || status.Message == "" {
		t.Fatalf("answer %s: %v", r, err)
	}
	var line map[string]any
	for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		if strings.Contains(l, `"msg":"request"`) {
			if err := json.Unmarshal([]byte(l), &line); err != nil {
				t.Fatal(err)
			}
		}
	}
	if line == nil {
		t.Fatalf("no request logged:\n%s", logs.String())
	}
	if line["level"] != "ERROR" || line["status"] != float64(r.code) || line["err"] != status.Message {
		t.Errorf("logged %v; want level ERROR, status %d and err %q", line, r.code, status.Message)
	}
}

// TestRefusedValuesAreNotLogged: a value the field manager cannot read as
// its Type says (an object where the schema has a string) is refused, and
// neither the server's log nor the answer quotes it back, as a secret it
// may well be; the field and what was expected are named.
func TestRefusedValuesAreNotLogged(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "cairn.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	h, err := hub.New(ctx, hub.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	var logs lockedBuffer
	srv := httptest.NewServer(rest.New(rest.Config{Hub: h, Logger: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}))
	t.Cleanup(srv.Close)
	e := &restEnv{t: t, ctx: ctx, h: h, url: srv.URL, client: srv.Client()}
	e.mustDo("POST", hubGV+"/types", "application/json", flagsRD, http.StatusCreated)
	const secret = "hunter2-in-the-wrong-place"
	for _, tc := range []struct{ method, path, ct, body string }{
		{"POST", flagsIn("default"), "application/json", mustMarshal(t, flag("a", nil, `{"key":{"pw":"`+secret+`"}}`))},
		{"PATCH", flagsIn("default") + "/b?fieldManager=t", "application/apply-patch+yaml", mustMarshal(t, flag("b", nil, `{"key":{"pw":"`+secret+`"}}`))},
	} {
		r := e.do(tc.method, tc.path, tc.ct, tc.body)
		if r.code < 400 || strings.Contains(string(r.body), secret) {
			t.Errorf("%s %s: %s; want a refusal that does not quote the value", tc.method, tc.path, r)
		}
		if !strings.Contains(string(r.body), "key") {
			t.Errorf("%s %s: %s; want the field named", tc.method, tc.path, r)
		}
	}
	if strings.Contains(logs.String(), secret) {
		t.Errorf("the server's log quotes the refused value:\n%s", logs.String())
	}
}

func mustMarshal(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
