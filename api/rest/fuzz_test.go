package rest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/api/rest"
	"github.com/cairn-dev/cairn/hub"
	"github.com/cairn-dev/cairn/store/sqlite"
)

// FuzzRequests sends arbitrary bodies, patches and selectors to the REST
// handler over a real hub and SQLite file: every answer is a well-formed
// JSON document with a status below 500, within its deadline.
func FuzzRequests(f *testing.F) {
	seeds := []struct {
		op   uint8
		body string
		q    string
	}{
		{0, `{"apiVersion":"flipt.io/v1alpha1","kind":"Flag","metadata":{"name":"a","labels":{"env":"prod"}},"spec":{"key":"k"}}`, ""},
		{0, `{"apiVersion":"flipt.io/v1alpha1","kind":"Flag","metadata":{"name":"Bad Name"},"spec":{"key":""}}`, ""},
		{1, `{"apiVersion":"flipt.io/v1alpha1","kind":"Flag","metadata":{"name":"a","resourceVersion":"1"},"spec":{"key":"k2"}}`, ""},
		{2, `{"spec":{"enabled":true},"metadata":{"labels":{"x":null}}}`, ""},
		{3, `[{"op":"replace","path":"/spec/key","value":"z"},{"op":"test","path":"/spec/port","value":1}]`, ""},
		{3, `[{"op":"move","from":"/spec","path":"/spec/x"}]`, ""},
		{4, "", "env in (prod),!tier"},
		{5, "", "metadata.name=a,metadata.namespace!=x"},
		{6, flagsRD, ""},
		{0, `{"metadata":{"name":"a"},"spec":` + strings.Repeat("[", 10000) + `}`, ""},
		{2, `null`, ""}, {3, `{}`, ""}, {0, "\xff", ""}, {4, "", "a in ("}, {5, "", "spec.key=x"},
	}
	for _, s := range seeds {
		f.Add(s.op, []byte(s.body), s.q)
	}
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(f.TempDir(), "cairn.db"))
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { st.Close() })
	h, err := hub.New(ctx, hub.Config{Store: st})
	if err != nil {
		f.Fatal(err)
	}
	handler := rest.New(rest.Config{Hub: h})
	serve := func(t testing.TB, method, path, ct string, body []byte) *httptest.ResponseRecorder {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		req := httptest.NewRequestWithContext(rctx, method, path, bytes.NewReader(body))
		if ct != "" {
			req.Header.Set("Content-Type", ct)
		}
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, req)
		if rctx.Err() != nil {
			t.Fatalf("%s %s hung past its deadline", method, path)
		}
		return rec
	}
	if rec := serve(f, "POST", hubGV+"/types", "application/json", []byte(flagsRD)); rec.Code != http.StatusCreated {
		f.Fatalf("register the flags Type: %d %s", rec.Code, rec.Body)
	}
	f.Fuzz(func(t *testing.T, op uint8, body []byte, q string) {
		var rec *httptest.ResponseRecorder
		switch op % 7 {
		case 0:
			rec = serve(t, "POST", flagsIn("default"), "application/json", body)
		case 1:
			rec = serve(t, "PUT", flagPath("default", "a"), "application/json", body)
		case 2:
			rec = serve(t, "PATCH", flagPath("default", "a"), "application/merge-patch+json", body)
		case 3:
			rec = serve(t, "PATCH", flagPath("default", "a"), "application/json-patch+json", body)
		case 4:
			rec = serve(t, "GET", flagsIn("default")+"?labelSelector="+url.QueryEscape(q), "", nil)
		case 5:
			rec = serve(t, "GET", flagsGV+"/flags?fieldSelector="+url.QueryEscape(q), "", nil)
		case 6:
			rec = serve(t, "POST", hubGV+"/types", "application/yaml", body)
		}
		if rec.Code >= 500 {
			t.Fatalf("op %d: status %d: %s", op%7, rec.Code, rec.Body)
		}
		if !json.Valid(rec.Body.Bytes()) {
			t.Fatalf("op %d: status %d with a body that is not JSON: %q", op%7, rec.Code, rec.Body)
		}
		// Keep the store small: the fuzzer's creations are not the point.
		if rec.Code == http.StatusCreated && op%7 == 0 {
			serve(t, "DELETE", flagsIn("default")+"/"+nameOf(rec.Body.Bytes()), "", nil)
		}
	})
}

func nameOf(obj []byte) string {
	var o struct {
		Metadata struct{ Name string } `json:"metadata"`
	}
	_ = json.Unmarshal(obj, &o)
	return o.Metadata.Name
}
