package access_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/api/access"
	"github.com/cairn-dev/cairn/auth/audit"
	"github.com/cairn-dev/cairn/auth/authn"
)

// TestRateLimitPerUser: over its burst a user gets the API server's 429
// Status with Retry-After, other users do not; whom a caller impersonates
// does not give it a new allowance; anonymous callers share one per source
// address; each 429 is in the audit log.
func TestRateLimitPerUser(t *testing.T) {
	h := sqliteHub(t)
	tf, err := authn.ParseTokenFile(strings.NewReader("ada-token,ada,1,cairn:admins\nvic-token,vic,2\n"))
	if err != nil {
		t.Fatal(err)
	}
	auditPath := filepath.Join(t.TempDir(), "audit.log")
	aw, err := audit.Open(auditPath, 1<<20, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { aw.Close() })
	// A bucket of 2 that refills once in about 17 minutes: no refill
	// during the test.
	g := access.New(access.Config{Authn: &authn.Chain{Tokens: []authn.TokenAuthenticator{tf}}, Authz: h,
		RatePerUser: 0.001, Burst: 2, Audit: aw})
	srv := httptest.NewServer(g.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })))
	t.Cleanup(srv.Close)
	get := func(token string, hdr ...string) (*http.Response, string) {
		req, _ := http.NewRequest("GET", srv.URL+"/healthz", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	for i, tc := range []struct {
		who, token string
		hdr        []string
		code       int
	}{
		{"vic", "vic-token", nil, 200},
		{"vic", "vic-token", nil, 200},
		{"vic", "vic-token", nil, 429},
		{"ada", "ada-token", nil, 200},
		{"ada as x1", "ada-token", []string{"Impersonate-User", "x1"}, 200},
		{"ada as x2", "ada-token", []string{"Impersonate-User", "x2"}, 429},
		{"anonymous", "", nil, 200},
		{"anonymous", "", nil, 200},
		{"anonymous", "", nil, 429},
	} {
		resp, body := get(tc.token, tc.hdr...)
		if resp.StatusCode != tc.code {
			t.Fatalf("request %d by %s: %d %s, want %d", i, tc.who, resp.StatusCode, body, tc.code)
		}
		if tc.code != 429 {
			continue
		}
		var st struct{ Kind, Reason, Message string }
		if err := json.Unmarshal([]byte(body), &st); err != nil || st.Kind != "Status" || st.Reason != "TooManyRequests" || !strings.Contains(st.Message, "too many requests from user") {
			t.Errorf("%s's 429: %s", tc.who, body)
		}
		if after, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || after < 1 {
			t.Errorf("%s's 429: Retry-After %q, want whole seconds", tc.who, resp.Header.Get("Retry-After"))
		}
	}
	if err := aw.Flush(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(auditPath)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), `"code":429,"status":"Failure","reason":"TooManyRequests"`); n != 3 {
		t.Errorf("the audit log records %d refusals for the rate, want 3:\n%s", n, b)
	}
}
