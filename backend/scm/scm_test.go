package scm_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/backend/scm"
	"github.com/cairn-dev/cairn/backend/scm/scmtest"
)

const secret = "s3cr3t-token-value"

func env(name string) func(string) string {
	return func(k string) string {
		if k == name {
			return secret
		}
		return ""
	}
}

func TestGitHub(t *testing.T) {
	ctx := context.Background()
	var merged []scmtest.Pull
	fake := scmtest.NewGitHub(t, "acme/flags", secret, func(p scmtest.Pull) error { merged = append(merged, p); return nil })
	p, err := scm.New(scm.Config{Provider: scm.GitHub, APIURL: fake.URL, Repository: "acme/flags", TokenEnv: "GH_TOKEN"},
		scm.Options{Getenv: env("GH_TOKEN")})
	if err != nil {
		t.Fatal(err)
	}
	pr, err := p.Open(ctx, scm.NewPullRequest{Title: "cairn: create Flag default/a", Body: "why", Head: "cairn/proposal/x1", Base: "main"})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if pr.Number != 1 || pr.State != scm.StateOpen || !strings.HasSuffix(pr.URL, "/acme/flags/pull/1") || pr.Head != "cairn/proposal/x1" || pr.Base != "main" {
		t.Errorf("Open = %+v", pr)
	}
	if got, _ := fake.Pull(1); got.Title != "cairn: create Flag default/a" || got.Body != "why" {
		t.Errorf("the fake holds %+v", got)
	}
	if err := p.Merge(ctx, 1); err != nil {
		t.Fatalf("Merge: %v", err)
	}
	if len(merged) != 1 || merged[0].Head != "cairn/proposal/x1" {
		t.Errorf("merged = %+v", merged)
	}
	if pr, err := p.Get(ctx, 1); err != nil || pr.State != scm.StateMerged {
		t.Errorf("Get after merge = %+v, %v; want merged", pr, err)
	}
	// A merged pull request cannot be merged again: 405, a Conflict.
	if err := p.Merge(ctx, 1); !cairn.HasCode(err, cairn.CodeConflict) {
		t.Errorf("second Merge = %v, want Conflict", err)
	}
	if _, err := p.Open(ctx, scm.NewPullRequest{Title: "t", Head: "cairn/proposal/x2", Base: "main"}); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(ctx, 2); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if pr, err := p.Get(ctx, 2); err != nil || pr.State != scm.StateClosed {
		t.Errorf("Get after close = %+v, %v; want closed", pr, err)
	}
	if _, err := p.Get(ctx, 99); !cairn.HasCode(err, cairn.CodeNotFound) {
		t.Errorf("Get 99 = %v, want NotFound", err)
	}
	if n := fake.Count("PATCH /repos/acme/flags/pulls/2"); n != 1 {
		t.Errorf("%d PATCH requests, want 1", n)
	}

	// A wrong token: the error says so and never quotes a token.
	bad, _ := scm.New(scm.Config{Provider: scm.GitHub, APIURL: fake.URL, Repository: "acme/flags", TokenEnv: "T"},
		scm.Options{Getenv: func(string) string { return "wrong-token-zzz" }})
	_, err = bad.Get(ctx, 1)
	if err == nil || strings.Contains(err.Error(), "wrong-token-zzz") || !strings.Contains(err.Error(), "Bad credentials") {
		t.Errorf("Get with a wrong token = %v", err)
	}
}

func TestTokenVariableRequired(t *testing.T) {
	_, err := scm.New(scm.Config{Provider: scm.GitHub, Repository: "a/b", TokenEnv: "NOPE"}, scm.Options{Getenv: func(string) string { return "" }})
	if !cairn.HasCode(err, cairn.CodeInvalid) || !strings.Contains(err.Error(), "NOPE") {
		t.Errorf("New with an unset token variable = %v", err)
	}
	for _, c := range []scm.Config{
		{Provider: "bitbucket", Repository: "a/b"},
		{Provider: scm.Gitea, Repository: "a/b"}, // no apiURL
		{Provider: scm.GitHub, Repository: "ab"},
		{Provider: scm.GitHub, Repository: "a/b", APIURL: "ftp://x"},
	} {
		if _, err := scm.New(c, scm.Options{}); !cairn.HasCode(err, cairn.CodeInvalid) {
			t.Errorf("New(%+v) = %v, want Invalid", c, err)
		}
	}
}

// exchange is one expected request and the provider's answer.
type exchange struct {
	method, path string
	header       map[string]string
	body         map[string]any // nil: no body
	status       int
	answer       string
}

// script serves exchanges in order, checking each request.
func script(t *testing.T, want []exchange) *httptest.Server {
	t.Helper()
	i := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if i >= len(want) {
			t.Errorf("unexpected request %s %s", r.Method, r.URL.EscapedPath())
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		x := want[i]
		i++
		if r.Method != x.method || r.URL.EscapedPath() != x.path {
			t.Errorf("request %d = %s %s, want %s %s", i, r.Method, r.URL.EscapedPath(), x.method, x.path)
		}
		for k, v := range x.header {
			if got := r.Header.Get(k); got != v {
				t.Errorf("%s %s: header %s = %q, want %q", x.method, x.path, k, got, v)
			}
		}
		data, _ := io.ReadAll(r.Body)
		if x.body == nil {
			if len(strings.TrimSpace(string(data))) > 0 {
				t.Errorf("%s %s: body %s, want none", x.method, x.path, data)
			}
		} else {
			if ct := r.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("%s %s: Content-Type %q", x.method, x.path, ct)
			}
			var got map[string]any
			if err := json.Unmarshal(data, &got); err != nil {
				t.Errorf("%s %s: body %s: %v", x.method, x.path, data, err)
			}
			wb, _ := json.Marshal(x.body)
			gb, _ := json.Marshal(got)
			if string(wb) != string(gb) {
				t.Errorf("%s %s: body %s, want %s", x.method, x.path, gb, wb)
			}
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(x.status)
		io.WriteString(w, x.answer)
	}))
	t.Cleanup(func() {
		srv.Close()
		if i != len(want) {
			t.Errorf("%d of %d expected requests were made", i, len(want))
		}
	})
	return srv
}

// GitLab's merge requests API: docs.gitlab.com/api/merge_requests.
func TestGitLab(t *testing.T) {
	ctx := context.Background()
	h := map[string]string{"PRIVATE-TOKEN": secret}
	mr := func(state string) string {
		return `{"id":901,"iid":7,"project_id":3,"title":"cairn: update Flag default/a","state":"` + state +
			`","web_url":"https://gitlab.example/acme/infra/flags/-/merge_requests/7","source_branch":"cairn/proposal/x1","target_branch":"main"}`
	}
	srv := script(t, []exchange{
		{"POST", "/api/v4/projects/acme%2Finfra%2Fflags/merge_requests", h,
			map[string]any{"source_branch": "cairn/proposal/x1", "target_branch": "main", "title": "cairn: update Flag default/a", "description": "body"},
			201, mr("opened")},
		{"GET", "/api/v4/projects/acme%2Finfra%2Fflags/merge_requests/7", h, nil, 200, mr("opened")},
		{"PUT", "/api/v4/projects/acme%2Finfra%2Fflags/merge_requests/7/merge", h, nil, 200, mr("merged")},
		{"GET", "/api/v4/projects/acme%2Finfra%2Fflags/merge_requests/7", h, nil, 200, mr("merged")},
		{"PUT", "/api/v4/projects/acme%2Finfra%2Fflags/merge_requests/8", h, map[string]any{"state_event": "close"}, 200, strings.ReplaceAll(mr("closed"), `"iid":7`, `"iid":8`)},
		{"PUT", "/api/v4/projects/acme%2Finfra%2Fflags/merge_requests/9/merge", h, nil, 405, `{"message":"405 Method Not Allowed"}`},
		{"GET", "/api/v4/projects/acme%2Finfra%2Fflags/merge_requests", h, nil, 200, "[" + mr("opened") + "]"},
		{"GET", "/api/v4/projects/acme%2Finfra%2Fflags/merge_requests", h, nil, 200, "[]"},
	})
	p, err := scm.New(scm.Config{Provider: scm.GitLab, APIURL: srv.URL + "/api/v4", Repository: "acme/infra/flags", TokenEnv: "GL"}, scm.Options{Getenv: env("GL")})
	if err != nil {
		t.Fatal(err)
	}
	pr, err := p.Open(ctx, scm.NewPullRequest{Title: "cairn: update Flag default/a", Body: "body", Head: "cairn/proposal/x1", Base: "main"})
	if err != nil || pr.Number != 7 || pr.State != scm.StateOpen || pr.URL != "https://gitlab.example/acme/infra/flags/-/merge_requests/7" {
		t.Fatalf("Open = %+v, %v", pr, err)
	}
	if pr, err := p.Get(ctx, 7); err != nil || pr.State != scm.StateOpen || pr.Head != "cairn/proposal/x1" {
		t.Errorf("Get = %+v, %v", pr, err)
	}
	if err := p.Merge(ctx, 7); err != nil {
		t.Errorf("Merge: %v", err)
	}
	if pr, err := p.Get(ctx, 7); err != nil || pr.State != scm.StateMerged {
		t.Errorf("Get after merge = %+v, %v", pr, err)
	}
	if err := p.Close(ctx, 8); err != nil {
		t.Errorf("Close: %v", err)
	}
	if err := p.Merge(ctx, 9); !cairn.HasCode(err, cairn.CodeConflict) {
		t.Errorf("Merge of an unmergeable request = %v, want Conflict", err)
	}
	if pr, ok, err := p.OpenFor(ctx, "cairn/proposal/x1", "main"); err != nil || !ok || pr.Number != 7 {
		t.Errorf("OpenFor = %+v, %v, %v; want merge request 7", pr, ok, err)
	}
	if pr, ok, err := p.OpenFor(ctx, "cairn/proposal/x2", "main"); err != nil || ok {
		t.Errorf("OpenFor of a branch without one = %+v, %v, %v; want none", pr, ok, err)
	}
}

// Gitea's API: /api/swagger (CreatePullRequestOption, MergePullRequestOption,
// EditPullRequestOption).
func TestGitea(t *testing.T) {
	ctx := context.Background()
	h := map[string]string{"Authorization": "token " + secret}
	pull := func(state string, merged bool) string {
		m := "false"
		if merged {
			m = "true"
		}
		return `{"id":55,"number":4,"title":"t","state":"` + state + `","merged":` + m +
			`,"html_url":"https://gitea.example/acme/flags/pulls/4","head":{"ref":"cairn/proposal/x1"},"base":{"ref":"main"}}`
	}
	srv := script(t, []exchange{
		{"POST", "/api/v1/repos/acme/flags/pulls", h, map[string]any{"title": "t", "body": "b", "head": "cairn/proposal/x1", "base": "main"}, 201, pull("open", false)},
		{"POST", "/api/v1/repos/acme/flags/pulls/4/merge", h, map[string]any{"Do": "merge"}, 200, ``},
		{"GET", "/api/v1/repos/acme/flags/pulls/4", h, nil, 200, pull("closed", true)},
		{"PATCH", "/api/v1/repos/acme/flags/pulls/5", h, map[string]any{"state": "closed"}, 201, strings.ReplaceAll(pull("closed", false), `"number":4`, `"number":5`)},
		{"GET", "/api/v1/repos/acme/flags/pulls/5", h, nil, 200, strings.ReplaceAll(pull("closed", false), `"number":4`, `"number":5`)},
		{"GET", "/api/v1/repos/acme/flags/pulls/6", h, nil, 404, `{"message":"The target couldn't be found."}`},
		{"GET", "/api/v1/repos/acme/flags/pulls", h, nil, 200, "[" + strings.ReplaceAll(pull("open", false), `"number":4`, `"number":8`) + "]"},
		{"GET", "/api/v1/repos/acme/flags/pulls", h, nil, 200, "[" + strings.ReplaceAll(pull("open", false), `"number":4`, `"number":8`) + "]"},
		{"GET", "/api/v1/repos/acme/flags/pulls", h, nil, 200, "[]"},
	})
	p, err := scm.New(scm.Config{Provider: scm.Gitea, APIURL: srv.URL + "/api/v1", Repository: "acme/flags", TokenEnv: "GT"}, scm.Options{Getenv: env("GT")})
	if err != nil {
		t.Fatal(err)
	}
	pr, err := p.Open(ctx, scm.NewPullRequest{Title: "t", Body: "b", Head: "cairn/proposal/x1", Base: "main"})
	if err != nil || pr.Number != 4 || pr.State != scm.StateOpen || pr.URL != "https://gitea.example/acme/flags/pulls/4" {
		t.Fatalf("Open = %+v, %v", pr, err)
	}
	if err := p.Merge(ctx, 4); err != nil {
		t.Errorf("Merge: %v", err)
	}
	if pr, err := p.Get(ctx, 4); err != nil || pr.State != scm.StateMerged {
		t.Errorf("Get after merge = %+v, %v", pr, err)
	}
	if err := p.Close(ctx, 5); err != nil {
		t.Errorf("Close: %v", err)
	}
	if pr, err := p.Get(ctx, 5); err != nil || pr.State != scm.StateClosed {
		t.Errorf("Get after close = %+v, %v", pr, err)
	}
	_, err = p.Get(ctx, 6)
	if !cairn.HasCode(err, cairn.CodeNotFound) || strings.Contains(err.Error(), secret) {
		t.Errorf("Get 6 = %v, want NotFound without the token", err)
	}
	// Gitea lists by state only: OpenFor reads pages until it finds the
	// head, or a page is empty.
	if pr, ok, err := p.OpenFor(ctx, "cairn/proposal/x1", "main"); err != nil || !ok || pr.Number != 8 {
		t.Errorf("OpenFor = %+v, %v, %v; want pull request 8", pr, ok, err)
	}
	if pr, ok, err := p.OpenFor(ctx, "cairn/proposal/x2", "main"); err != nil || ok {
		t.Errorf("OpenFor of a branch without one = %+v, %v, %v; want none", pr, ok, err)
	}
}

// TestProviderTextBounded: a forge's error message is its own choice
// (megabytes, controls that rewrite a terminal or a log line, as JSON
// escapes or raw): cairn's error carries it bounded and printable.
func TestProviderTextBounded(t *testing.T) {
	ctx := context.Background()
	long := strings.Repeat("x", 100_000)
	srv := script(t, []exchange{
		{"GET", "/repos/acme/flags/pulls/1", nil, nil, 403, `{"message":"tenant-b \u001b[2J\u202e` + long + `"}`},
		{"PUT", "/repos/acme/flags/pulls/3/merge", nil, map[string]any{"merge_method": "merge"}, 200, `{"merged":false,"message":"tenant-b \u001b[2J\u202e` + long + `"}`},
	})
	p, err := scm.New(scm.Config{Provider: scm.GitHub, APIURL: srv.URL, Repository: "acme/flags", TokenEnv: "GH_TOKEN"},
		scm.Options{Getenv: env("GH_TOKEN")})
	if err != nil {
		t.Fatal(err)
	}
	_, err1 := p.Get(ctx, 1)
	err2 := p.Merge(ctx, 3)
	for i, err := range []error{err1, err2} {
		if err == nil {
			t.Fatalf("call %d: no error", i+1)
		}
		msg := err.Error()
		if len(msg) > 2048 || strings.ContainsAny(msg, "\x1b\u202e") || strings.Contains(msg, `\u001b`) || !strings.Contains(msg, "tenant-b") || !strings.Contains(msg, "more bytes") {
			t.Errorf("call %d: the error is %d bytes, has control characters, lost the forge's words or does not say they were cut: %q", i+1, len(msg), msg[:min(len(msg), 300)])
		}
	}
}
