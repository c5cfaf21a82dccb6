package web_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/web"
)

func TestHandler(t *testing.T) {
	mux := http.NewServeMux()
	mux.Handle(web.Prefix, web.Handler())
	mux.Handle("GET /{$}", web.Redirect())
	srv := httptest.NewServer(mux)
	defer srv.Close()
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

	tests := []struct {
		method, path string
		code         int
		contentType  string
		contains     string
	}{
		{"GET", "/", http.StatusFound, "", ""},
		{"GET", "/ui/", http.StatusOK, "text/html; charset=utf-8", `<script type="module" src="app.js">`},
		{"GET", "/ui/index.html", http.StatusOK, "text/html; charset=utf-8", "cairn console"},
		{"GET", "/ui/app.js", http.StatusOK, "text/javascript; charset=utf-8", "import"},
		{"GET", "/ui/style.css", http.StatusOK, "text/css; charset=utf-8", "prefers-color-scheme"},
		{"HEAD", "/ui/lib.js", http.StatusOK, "text/javascript; charset=utf-8", ""},
		{"GET", "/ui/missing.js", http.StatusNotFound, "", "missing.js"},
		{"GET", "/ui/static/app.js", http.StatusNotFound, "", ""},
		{"POST", "/ui/", http.StatusMethodNotAllowed, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			req, _ := http.NewRequest(tt.method, srv.URL+tt.path, nil)
			resp, err := noFollow.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tt.code {
				t.Fatalf("status %d, want %d (%s)", resp.StatusCode, tt.code, body)
			}
			if tt.code == http.StatusFound && resp.Header.Get("Location") != "/ui/" {
				t.Errorf("Location %q, want /ui/", resp.Header.Get("Location"))
			}
			if tt.contentType != "" && resp.Header.Get("Content-Type") != tt.contentType {
				t.Errorf("Content-Type %q, want %q", resp.Header.Get("Content-Type"), tt.contentType)
			}
			if !strings.Contains(string(body), tt.contains) {
				t.Errorf("body does not contain %q:\n%.300s", tt.contains, body)
			}
			if tt.code == http.StatusOK && !strings.Contains(resp.Header.Get("Content-Security-Policy"), "connect-src 'self'") {
				t.Errorf("no same-origin Content-Security-Policy: %q", resp.Header.Get("Content-Security-Policy"))
			}
		})
	}
}

// TestHandlerRevalidates: assets carry an ETag, and a matching
// If-None-Match gets 304 with no body.
func TestHandlerRevalidates(t *testing.T) {
	h := web.Handler()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/ui/app.js", nil))
	etag := rec.Header().Get("ETag")
	if rec.Code != http.StatusOK || etag == "" || rec.Header().Get("Cache-Control") != "no-cache" {
		t.Fatalf("first GET: %d, ETag %q, Cache-Control %q", rec.Code, etag, rec.Header().Get("Cache-Control"))
	}
	req := httptest.NewRequest("GET", "/ui/app.js", nil)
	req.Header.Set("If-None-Match", etag)
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusNotModified || rec.Body.Len() != 0 {
		t.Fatalf("revalidation: %d with %d bytes, want 304 and none", rec.Code, rec.Body.Len())
	}
}
