package access_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/api/access"
	"github.com/cairn-dev/cairn/auth/audit"
	"github.com/cairn-dev/cairn/auth/authn"
)

// createdAnswer is a created Flag as the REST API answers it.
const createdAnswer = `{"apiVersion":"flipt.io/v1","kind":"Flag","metadata":{"name":"from-answer","namespace":"a","resourceVersion":"7"},"spec":{"enabled":true}}`

// TestCreatedNameInTheEvent: the event of a create whose path names no
// object names what was created: as the handler told it (audit.Created,
// the answer not decoded), or else read from the answer; a refused
// create names nothing.
func TestCreatedNameInTheEvent(t *testing.T) {
	h := sqliteHub(t)
	tf, err := authn.ParseTokenFile(strings.NewReader("ada-token,ada,1,cairn:admins\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name           string
		told           bool // the handler calls audit.Created("a", "told")
		code           int
		body           string
		wantName, want string // the event's objectRef name and namespace
	}{
		// The answer names another object, so the test tells which was read.
		{"told", true, 201, createdAnswer, "told", "a"},
		{"told, answer without metadata", true, 201, `{"kind":"Flag"}`, "told", "a"},
		{"not told: read from the answer", false, 201, createdAnswer, "from-answer", "a"},
		{"told, refused", true, 409, `{"kind":"Status","reason":"AlreadyExists","message":"exists"}`, "", "a"},
		{"not told, refused", false, 422, `{"kind":"Status","reason":"Invalid","message":"bad"}`, "", "a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			auditPath := filepath.Join(t.TempDir(), "audit.log")
			aw, err := audit.Open(auditPath, 1<<20, 1)
			if err != nil {
				t.Fatal(err)
			}
			defer aw.Close()
			g := access.New(access.Config{Authn: &authn.Chain{Tokens: []authn.TokenAuthenticator{tf}}, Authz: h,
				Audit: aw, AuditLevel: audit.LevelMetadata})
			srv := httptest.NewServer(g.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.Copy(io.Discard, r.Body)
				if tc.told {
					audit.Created(r.Context(), "a", "told")
				}
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(tc.code)
				io.WriteString(w, tc.body)
			})))
			defer srv.Close()
			req, _ := http.NewRequest("POST", srv.URL+"/apis/flipt.io/v1/namespaces/a/flags", strings.NewReader(`{}`))
			req.Header.Set("Authorization", "Bearer ada-token")
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.code {
				t.Fatalf("POST: %d, want %d", resp.StatusCode, tc.code)
			}
			if err := aw.Flush(); err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(auditPath)
			if err != nil {
				t.Fatal(err)
			}
			var ev audit.Event
			if err := json.Unmarshal(b, &ev); err != nil {
				t.Fatalf("audit log %s: %v", b, err)
			}
			if ev.ObjectRef == nil || ev.ObjectRef.Name != tc.wantName || ev.ObjectRef.Namespace != tc.want {
				t.Errorf("event's objectRef %+v, want name %q in namespace %q", ev.ObjectRef, tc.wantName, tc.want)
			}
			if ev.Verb != "create" || ev.ResponseStatus == nil || ev.ResponseStatus.Code != tc.code {
				t.Errorf("event %s", b)
			}
		})
	}
}
