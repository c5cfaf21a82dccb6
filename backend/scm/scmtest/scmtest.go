// Package scmtest is a fake GitHub pull request API for tests: an
// httptest server that checks every request against GitHub's documented
// REST API (method, path, headers, JSON body), answers as GitHub does, and
// can perform a merge for real (OnMerge) so that "merged upstream" is
// true of the repository.
package scmtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// Pull is a pull request the fake holds.
type Pull struct {
	Number      int
	Title, Body string
	Head, Base  string
	State       string // open, closed
	Merged      bool
}

// GitHub is the fake. Its URL is the API root to configure (apiURL).
type GitHub struct {
	URL string

	t       testing.TB
	owner   string
	token   string
	onMerge func(p Pull) error

	mu        sync.Mutex
	pulls     map[int]*Pull
	requests  map[string]int
	failOpens int
}

// FailOpens makes the next n requests creating a pull request fail with
// 502, as GitHub does when it has a bad moment, creating nothing.
func (g *GitHub) FailOpens(n int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.failOpens = n
}

// Pulls returns a copy of every pull request.
func (g *GitHub) Pulls() []Pull {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]Pull, 0, len(g.pulls))
	for n := 1; n <= len(g.pulls); n++ {
		out = append(out, *g.pulls[n])
	}
	return out
}

// NewGitHub serves repository "owner/name", accepting token only.
// onMerge, when not nil, performs the merge (e.g. with real git); an error
// answers 405 as GitHub does for a pull request that cannot be merged.
func NewGitHub(t testing.TB, repo, token string, onMerge func(p Pull) error) *GitHub {
	g := &GitHub{t: t, owner: repo, token: token, onMerge: onMerge, pulls: map[int]*Pull{}, requests: map[string]int{}}
	srv := httptest.NewServer(http.HandlerFunc(g.serve))
	t.Cleanup(srv.Close)
	g.URL = srv.URL
	return g
}

// Pull returns a copy of pull request n.
func (g *GitHub) Pull(n int) (Pull, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	p, ok := g.pulls[n]
	if !ok {
		return Pull{}, false
	}
	return *p, true
}

// Count returns how many requests "METHOD path" the fake answered.
func (g *GitHub) Count(key string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.requests[key]
}

func (g *GitHub) fail(w http.ResponseWriter, code int, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	g.t.Errorf("fake GitHub: %s", msg)
	writeJSON(w, code, map[string]string{"message": msg, "documentation_url": "https://docs.github.com/rest"})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func (g *GitHub) json(p *Pull) map[string]any {
	state := p.State
	return map[string]any{
		"url":      g.URL + "/repos/" + g.owner + "/pulls/" + strconv.Itoa(p.Number),
		"html_url": "https://github.example/" + g.owner + "/pull/" + strconv.Itoa(p.Number),
		"number":   p.Number, "state": state, "title": p.Title, "body": p.Body,
		"merged": p.Merged,
		"head":   map[string]any{"ref": p.Head}, "base": map[string]any{"ref": p.Base},
	}
}

func (g *GitHub) serve(w http.ResponseWriter, r *http.Request) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.requests[r.Method+" "+r.URL.Path]++
	if got := r.Header.Get("Accept"); got != "application/vnd.github+json" {
		g.fail(w, http.StatusBadRequest, "Accept = %q, want application/vnd.github+json", got)
		return
	}
	// GitHub answers 400 for an API version it does not serve and falls
	// back to 2022-11-28 (the version this fake implements) without the
	// header; cairn documents that it sends it.
	if got := r.Header.Get("X-GitHub-Api-Version"); got != "2022-11-28" {
		g.fail(w, http.StatusBadRequest, "X-GitHub-Api-Version = %q, want 2022-11-28", got)
		return
	}
	if got := r.Header.Get("Authorization"); got != "Bearer "+g.token {
		writeJSON(w, http.StatusUnauthorized, map[string]string{"message": "Bad credentials"})
		return
	}
	prefix := "/repos/" + g.owner + "/pulls"
	rest, ok := strings.CutPrefix(r.URL.Path, prefix)
	if !ok {
		writeJSON(w, http.StatusNotFound, map[string]string{"message": "Not Found"})
		return
	}
	var body map[string]any
	if r.Method == http.MethodPost || r.Method == http.MethodPut || r.Method == http.MethodPatch {
		if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
			g.fail(w, http.StatusUnsupportedMediaType, "Content-Type = %q", ct)
			return
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			g.fail(w, http.StatusBadRequest, "body: %v", err)
			return
		}
	}
	if rest == "" && r.Method == http.MethodGet {
		g.list(w, r)
		return
	}
	if rest == "" {
		if r.Method != http.MethodPost {
			g.fail(w, http.StatusMethodNotAllowed, "%s %s", r.Method, r.URL.Path)
			return
		}
		if g.failOpens > 0 {
			g.failOpens--
			writeJSON(w, http.StatusBadGateway, map[string]string{"message": "Server Error"})
			return
		}
		title, _ := body["title"].(string)
		head, _ := body["head"].(string)
		base, _ := body["base"].(string)
		text, _ := body["body"].(string)
		if title == "" || head == "" || base == "" {
			writeJSON(w, http.StatusUnprocessableEntity, map[string]string{"message": "Validation Failed"})
			g.t.Errorf("fake GitHub: create pull request without title, head or base: %v", body)
			return
		}
		for _, p := range g.pulls {
			if p.Head == head && p.State == "open" {
				writeJSON(w, http.StatusUnprocessableEntity, map[string]string{"message": "Validation Failed: A pull request already exists for " + head})
				return
			}
		}
		p := &Pull{Number: len(g.pulls) + 1, Title: title, Body: text, Head: head, Base: base, State: "open"}
		g.pulls[p.Number] = p
		writeJSON(w, http.StatusCreated, g.json(p))
		return
	}
	parts := strings.Split(strings.TrimPrefix(rest, "/"), "/")
	n, err := strconv.Atoi(parts[0])
	p := g.pulls[n]
	if err != nil || p == nil || len(parts) > 2 || (len(parts) == 2 && parts[1] != "merge") {
		writeJSON(w, http.StatusNotFound, map[string]string{"message": "Not Found"})
		return
	}
	switch {
	case len(parts) == 1 && r.Method == http.MethodGet:
		writeJSON(w, http.StatusOK, g.json(p))
	case len(parts) == 1 && r.Method == http.MethodPatch:
		if st, ok := body["state"]; ok {
			if st != "closed" && st != "open" {
				writeJSON(w, http.StatusUnprocessableEntity, map[string]string{"message": "Validation Failed"})
				return
			}
			if !p.Merged {
				p.State = st.(string)
			}
		}
		writeJSON(w, http.StatusOK, g.json(p))
	case len(parts) == 2 && r.Method == http.MethodPut:
		if m, ok := body["merge_method"]; ok && m != "merge" && m != "squash" && m != "rebase" {
			writeJSON(w, http.StatusUnprocessableEntity, map[string]string{"message": "Validation Failed"})
			return
		}
		if p.State != "open" {
			writeJSON(w, http.StatusMethodNotAllowed, map[string]string{"message": "Pull Request is not mergeable"})
			return
		}
		if g.onMerge != nil {
			if err := g.onMerge(*p); err != nil {
				writeJSON(w, http.StatusMethodNotAllowed, map[string]string{"message": "Pull Request is not mergeable: " + err.Error()})
				return
			}
		}
		p.State, p.Merged = "closed", true
		writeJSON(w, http.StatusOK, map[string]any{"sha": "", "merged": true, "message": "Pull Request successfully merged"})
	default:
		g.fail(w, http.StatusMethodNotAllowed, "%s %s", r.Method, r.URL.Path)
	}
}

// list is "List pull requests" (GET /repos/{owner}/{repo}/pulls): state is
// open, closed or all (default open); head filters by "user:ref-name" or
// "organization:ref-name" (a value without the owner is a request GitHub
// does not document: the fake refuses it); base by branch name.
func (g *GitHub) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	state := q.Get("state")
	switch state {
	case "":
		state = "open"
	case "open", "closed", "all":
	default:
		writeJSON(w, http.StatusUnprocessableEntity, map[string]string{"message": "Validation Failed"})
		return
	}
	head := q.Get("head")
	if head != "" {
		owner, ref, ok := strings.Cut(head, ":")
		if !ok || owner == "" || ref == "" {
			g.fail(w, http.StatusUnprocessableEntity, "head %q: want user:ref-name", head)
			return
		}
		repoOwner, _, _ := strings.Cut(g.owner, "/")
		if owner != repoOwner {
			writeJSON(w, http.StatusOK, []any{}) // a fork's branch: none here
			return
		}
		head = ref
	}
	base := q.Get("base")
	out := []any{}
	for n := 1; n <= len(g.pulls); n++ {
		p := g.pulls[n]
		if (state != "all" && p.State != state) || (head != "" && p.Head != head) || (base != "" && p.Base != base) {
			continue
		}
		out = append(out, g.json(p))
	}
	writeJSON(w, http.StatusOK, out)
}
