package access_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/api/access"
	"github.com/cairn-dev/cairn/auth/authn"
	"github.com/cairn-dev/cairn/hub"
	"github.com/cairn-dev/cairn/store/sqlite"
)

// FuzzGuardHeaders sends arbitrary Authorization and Impersonate-* headers
// through the guard, in front of a handler that answers 200. Whatever
// they hold: no 5xx and no panic; the handler is reached only by vic's
// exact token, which grants no impersonation, so never with an
// Impersonate-* header; and no answer quotes the token.
func FuzzGuardHeaders(f *testing.F) {
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
	tf, err := authn.ParseTokenFile(strings.NewReader("vic-s3cret,vic,1\n"))
	if err != nil {
		f.Fatal(err)
	}
	reached := "reached the handler"
	g := access.New(access.Config{Authn: &authn.Chain{Tokens: []authn.TokenAuthenticator{tf}}, Authz: h}).
		Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, reached) }))
	for _, s := range [][4]string{
		{"Bearer vic-s3cret", "", "", ""},
		{"Bearer vic-s3cret", "jane", "", ""},
		{"Bearer vic-s3cret", "", "ops", ""},
		{"Bearer vic-s3cret", "jane", "system:masters", "1"},
		{"Basic dTp2aWMtczNjcmV0", "", "", ""},
		{"Bearer vic-s3cret ", "", "", ""},
		{"bearer   vic-s3cret", "", "", ""},
		{"Bearer", "", "", ""},
		{"", "system:anonymous", "", ""},
		{"Bearer \x00\xff", "\n", "", ""},
	} {
		f.Add(s[0], s[1], s[2], s[3])
	}
	f.Fuzz(func(t *testing.T, authz, user, group, uid string) {
		// /healthz: every caller may get it, so only authentication and
		// impersonation decide.
		req := httptest.NewRequest("GET", "/healthz", nil)
		set := func(k, v string) {
			if v != "" {
				req.Header[k] = []string{v}
			}
		}
		set("Authorization", authz)
		set("Impersonate-User", user)
		set("Impersonate-Group", group)
		set("Impersonate-Uid", uid)
		w := httptest.NewRecorder()
		g.ServeHTTP(w, req)
		body := w.Body.String()
		if w.Code >= 500 {
			t.Fatalf("%d %s", w.Code, body)
		}
		if strings.Contains(body, "s3cret") {
			t.Fatalf("the answer quotes the token: %s", body)
		}
		if body == reached && (user != "" || group != "" || uid != "") {
			t.Fatalf("impersonation headers %q %q %q were let through for %q", user, group, uid, authz)
		}
	})
}
