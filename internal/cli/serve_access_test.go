package cli_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestServeGuardsMetricsGraphQLAndWebhooks: with an authenticator
// configured, /metrics needs get on the path (cairn-admin has it) unless
// --metrics-anonymous; push webhooks are let through on their HMAC
// signature alone, while the sync status beside them needs RBAC; /graphql
// is open to authenticated users and authorizes each field.
func TestServeGuardsMetricsGraphQLAndWebhooks(t *testing.T) {
	dir := t.TempDir()
	tokens, secret := filepath.Join(dir, "tokens.csv"), filepath.Join(dir, "hook.secret")
	os.WriteFile(tokens, []byte("vic-token,vic,1\n"), 0o600)
	os.WriteFile(secret, []byte("s3cret\n"), 0o600)
	data := t.TempDir()
	url := startServeSecure(t, map[string]string{"CAIRN_DATA_DIR": data}, "--token-auth-file", tokens, "--git-webhook-secret-file", secret)
	admin, err := os.ReadFile(filepath.Join(data, "admin.token"))
	if err != nil {
		t.Fatal(err)
	}
	do := func(method, path, token, body string, hdr ...string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, url+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(token))
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
		return resp.StatusCode, string(b)
	}
	sign := func(body string) string {
		m := hmac.New(sha256.New, []byte("s3cret"))
		m.Write([]byte(body))
		return "sha256=" + hex.EncodeToString(m.Sum(nil))
	}
	for _, tc := range []struct {
		name, method, path, token, body string
		hdr                             []string
		code                            int
		want                            string
	}{
		{"metrics, anonymous", "GET", "/metrics", "", "", nil, 403, `cannot get path \"/metrics\"`},
		{"metrics, an authenticated user without the permission", "GET", "/metrics", "vic-token", "", nil, 403, `User \"vic\" cannot get path \"/metrics\"`},
		{"metrics, admin", "GET", "/metrics", string(admin), "", nil, 200, "# TYPE go_goroutines gauge"},
		{"webhook without a signature", "POST", "/hooks/git/nope", "", "{}", nil, 401, "not signed with the configured secret"},
		{"webhook signed, no credentials", "POST", "/hooks/git/nope", "", "{}", []string{"X-Hub-Signature-256", sign("{}")}, 404, "nope"},
		{"sync status, anonymous", "GET", "/hooks/git/nope", "", "", nil, 403, `cannot get path \"/hooks/git/nope\"`},
		{"graphql, anonymous", "POST", "/graphql", "", `{"query":"{ typeInstances { id } }"}`, nil, 403, `cannot post path \"/graphql\"`},
		{"graphql list, a user without bindings", "POST", "/graphql", "vic-token", `{"query":"{ typeInstances { id } }"}`, nil, 200, `{"data":{"typeInstances":[]}}`},
		{"graphql types, a user without bindings", "POST", "/graphql", "vic-token", `{"query":"{ types { path } }"}`, nil, 200, `User \"vic\" cannot list resource \"types\" in API group \"hub.cairn.dev\" at the cluster scope`},
		{"graphql list, admin", "POST", "/graphql", string(admin), `{"query":"{ typeInstances { id } }"}`, nil, 200, `"id"`},
		{"the web console", "GET", "/ui/", "", "", nil, 200, "<"},
		{"the server's address, redirected to the console", "GET", "/", "", "", nil, 200, "<"},
		{"the console without its slash", "GET", "/ui", "", "", nil, 200, "<"},
		{"a write to the root", "POST", "/", "", "{}", nil, 403, `cannot post path \"/\"`},
		{"a path beside the console", "GET", "/uix", "", "", nil, 403, `cannot get path \"/uix\"`},
		{"the console's who-am-I", "POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", "vic-token",
			`{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}`, nil, 201, `"username":"vic"`},
		{"a health check", "GET", "/readyz", "", "", nil, 200, "ok"},
		// Kubernetes' liveness endpoint, which the default roles let
		// everyone read and probes copied from a Kubernetes setup ask for.
		{"a liveness check", "GET", "/livez", "", "", nil, 200, "ok"},
	} {
		code, body := do(tc.method, tc.path, tc.token, tc.body, tc.hdr...)
		if code != tc.code || !strings.Contains(body, tc.want) {
			t.Errorf("%s: %d %.300s; want %d with %s", tc.name, code, body, tc.code, tc.want)
		}
	}

	// Every request above is in the audit log, on whatever surface,
	// without the token or the webhook secret; the GraphQL field refused
	// inside a 200 answer is in its event.
	var log string
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, _ := os.ReadFile(filepath.Join(data, "audit.log"))
		log = string(b)
		if strings.Count(log, `"auditID"`) >= 20 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	// 20: the two redirects are two requests each.
	if n := strings.Count(log, `"auditID"`); n != 20 {
		t.Errorf("the audit log has %d events, want 20:\n%s", n, log)
	}
	for _, uri := range []string{`"requestURI":"/metrics"`, `"requestURI":"/hooks/git/nope"`, `"requestURI":"/graphql"`, `"requestURI":"/ui/"`,
		`"requestURI":"/apis/authentication.k8s.io/v1/selfsubjectreviews"`, `"requestURI":"/readyz"`, `"requestURI":"/livez"`,
		`"graphql.cairn.dev/forbidden":"types.hub.cairn.dev is forbidden: User \"vic\" cannot list resource \"types\"`} {
		if !strings.Contains(log, uri) {
			t.Errorf("the audit log has no %s", uri)
		}
	}
	for _, secret := range []string{"s3cret", "vic-token", strings.TrimSpace(string(admin))} {
		if strings.Contains(log, secret) {
			t.Errorf("the audit log holds a secret (%.3s...)", secret)
		}
	}

	open := startServeSecure(t, map[string]string{"CAIRN_DATA_DIR": t.TempDir()}, "--token-auth-file", tokens, "--metrics-anonymous")
	resp, err := http.Get(open + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("--metrics-anonymous: /metrics answered %d", resp.StatusCode)
	}
}
