package scm

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/cairn-dev/cairn"
)

// github speaks the GitHub REST API (docs.github.com/rest/pulls/pulls).
type github struct {
	api, repo, token string
	client           *http.Client
}

func (g *github) Name() string { return GitHub }

func (g *github) header() http.Header {
	h := http.Header{}
	h.Set("Accept", "application/vnd.github+json")
	h.Set("X-GitHub-Api-Version", "2022-11-28")
	if g.token != "" {
		h.Set("Authorization", "Bearer "+g.token)
	}
	return h
}

// githubPull is the part of GitHub's (and Gitea's) pull request object
// cairn reads.
type githubPull struct {
	Number  int    `json:"number"`
	HTMLURL string `json:"html_url"`
	State   string `json:"state"` // open, closed
	Merged  bool   `json:"merged"`
	Title   string `json:"title"`
	Head    struct {
		Ref string `json:"ref"`
	} `json:"head"`
	Base struct {
		Ref string `json:"ref"`
	} `json:"base"`
}

func (p githubPull) pr() PullRequest {
	st := StateOpen
	switch {
	case p.Merged:
		st = StateMerged
	case p.State == "closed":
		st = StateClosed
	}
	return PullRequest{Number: p.Number, URL: p.HTMLURL, State: st, Head: p.Head.Ref, Base: p.Base.Ref, Title: p.Title}
}

func (g *github) pulls() string { return g.api + "/repos/" + g.repo + "/pulls" }

func (g *github) Open(ctx context.Context, pr NewPullRequest) (PullRequest, error) {
	var out githubPull
	err := call(ctx, g.client, GitHub, http.MethodPost, g.pulls(), g.header(),
		map[string]string{"title": pr.Title, "body": pr.Body, "head": pr.Head, "base": pr.Base}, &out)
	return out.pr(), err
}

func (g *github) Get(ctx context.Context, n int) (PullRequest, error) {
	var out githubPull
	err := call(ctx, g.client, GitHub, http.MethodGet, fmt.Sprintf("%s/%d", g.pulls(), n), g.header(), nil, &out)
	return out.pr(), err
}

func (g *github) Merge(ctx context.Context, n int) error {
	var out struct {
		Merged  bool   `json:"merged"`
		Message string `json:"message"`
	}
	err := call(ctx, g.client, GitHub, http.MethodPut, fmt.Sprintf("%s/%d/merge", g.pulls(), n), g.header(),
		map[string]string{"merge_method": "merge"}, &out)
	if err == nil && !out.Merged {
		return fmt.Errorf("scm: github: pull request %d was not merged: %s", n, cairn.BoundText(out.Message, cairn.MaxErrorText))
	}
	return err
}

func (g *github) Close(ctx context.Context, n int) error {
	return call(ctx, g.client, GitHub, http.MethodPatch, fmt.Sprintf("%s/%d", g.pulls(), n), g.header(),
		map[string]string{"state": "closed"}, nil)
}

// OpenFor lists the open pull requests whose head is owner:head (GitHub's
// filter needs the owner of the head's repository: the same repository
// here) and base is base.
func (g *github) OpenFor(ctx context.Context, head, base string) (PullRequest, bool, error) {
	owner, _, _ := strings.Cut(g.repo, "/")
	q := url.Values{"state": {"open"}, "head": {owner + ":" + head}, "base": {base}}
	var out []githubPull
	if err := call(ctx, g.client, GitHub, http.MethodGet, g.pulls()+"?"+q.Encode(), g.header(), nil, &out); err != nil {
		return PullRequest{}, false, err
	}
	return firstOpen(out, head, base)
}

// firstOpen is the first pull request of ps that is open from head into
// base (a provider's filter is not trusted to have applied).
func firstOpen(ps []githubPull, head, base string) (PullRequest, bool, error) {
	for _, p := range ps {
		if pr := p.pr(); pr.State == StateOpen && pr.Head == head && pr.Base == base {
			return pr, true, nil
		}
	}
	return PullRequest{}, false, nil
}

// gitlab speaks the GitLab REST API v4 (docs.gitlab.com/api/merge_requests).
type gitlab struct {
	api, project, token string // project: the URL-encoded path or id
	client              *http.Client
}

func (g *gitlab) Name() string { return GitLab }

func (g *gitlab) header() http.Header {
	h := http.Header{}
	h.Set("Accept", "application/json")
	if g.token != "" {
		h.Set("PRIVATE-TOKEN", g.token)
	}
	return h
}

type gitlabMR struct {
	IID          int    `json:"iid"`
	WebURL       string `json:"web_url"`
	State        string `json:"state"` // opened, closed, locked, merged
	Title        string `json:"title"`
	SourceBranch string `json:"source_branch"`
	TargetBranch string `json:"target_branch"`
}

func (m gitlabMR) pr() PullRequest {
	st := StateOpen
	switch m.State {
	case "merged":
		st = StateMerged
	case "closed":
		st = StateClosed
	}
	return PullRequest{Number: m.IID, URL: m.WebURL, State: st, Head: m.SourceBranch, Base: m.TargetBranch, Title: m.Title}
}

func (g *gitlab) mrs() string { return g.api + "/projects/" + g.project + "/merge_requests" }

func (g *gitlab) Open(ctx context.Context, pr NewPullRequest) (PullRequest, error) {
	var out gitlabMR
	err := call(ctx, g.client, GitLab, http.MethodPost, g.mrs(), g.header(),
		map[string]string{"source_branch": pr.Head, "target_branch": pr.Base, "title": pr.Title, "description": pr.Body}, &out)
	return out.pr(), err
}

func (g *gitlab) Get(ctx context.Context, n int) (PullRequest, error) {
	var out gitlabMR
	err := call(ctx, g.client, GitLab, http.MethodGet, fmt.Sprintf("%s/%d", g.mrs(), n), g.header(), nil, &out)
	return out.pr(), err
}

func (g *gitlab) Merge(ctx context.Context, n int) error {
	var out gitlabMR
	if err := call(ctx, g.client, GitLab, http.MethodPut, fmt.Sprintf("%s/%d/merge", g.mrs(), n), g.header(), nil, &out); err != nil {
		return err
	}
	if out.State != "merged" {
		// With a pipeline required, GitLab may answer 200 and merge later.
		return fmt.Errorf("scm: gitlab: merge request %d is %q, not merged yet", n, cairn.BoundText(out.State, 64))
	}
	return nil
}

func (g *gitlab) Close(ctx context.Context, n int) error {
	return call(ctx, g.client, GitLab, http.MethodPut, fmt.Sprintf("%s/%d", g.mrs(), n), g.header(),
		map[string]string{"state_event": "close"}, nil)
}

// OpenFor lists the opened merge requests from source branch head into
// target branch base.
func (g *gitlab) OpenFor(ctx context.Context, head, base string) (PullRequest, bool, error) {
	q := url.Values{"state": {"opened"}, "source_branch": {head}, "target_branch": {base}}
	var out []gitlabMR
	if err := call(ctx, g.client, GitLab, http.MethodGet, g.mrs()+"?"+q.Encode(), g.header(), nil, &out); err != nil {
		return PullRequest{}, false, err
	}
	for _, m := range out {
		if pr := m.pr(); pr.State == StateOpen && pr.Head == head && pr.Base == base {
			return pr, true, nil
		}
	}
	return PullRequest{}, false, nil
}

// gitea speaks the Gitea API v1 (/api/swagger on any Gitea server).
type gitea struct {
	api, repo, token string
	client           *http.Client
}

func (g *gitea) Name() string { return Gitea }

func (g *gitea) header() http.Header {
	h := http.Header{}
	h.Set("Accept", "application/json")
	if g.token != "" {
		h.Set("Authorization", "token "+g.token)
	}
	return h
}

func (g *gitea) pulls() string { return g.api + "/repos/" + g.repo + "/pulls" }

func (g *gitea) Open(ctx context.Context, pr NewPullRequest) (PullRequest, error) {
	var out githubPull
	err := call(ctx, g.client, Gitea, http.MethodPost, g.pulls(), g.header(),
		map[string]string{"title": pr.Title, "body": pr.Body, "head": pr.Head, "base": pr.Base}, &out)
	return out.pr(), err
}

func (g *gitea) Get(ctx context.Context, n int) (PullRequest, error) {
	var out githubPull
	err := call(ctx, g.client, Gitea, http.MethodGet, fmt.Sprintf("%s/%d", g.pulls(), n), g.header(), nil, &out)
	return out.pr(), err
}

// Merge posts MergePullRequestOption {"Do": "merge"}; Gitea answers 200
// with no body.
func (g *gitea) Merge(ctx context.Context, n int) error {
	return call(ctx, g.client, Gitea, http.MethodPost, fmt.Sprintf("%s/%d/merge", g.pulls(), n), g.header(),
		map[string]string{"Do": "merge"}, nil)
}

func (g *gitea) Close(ctx context.Context, n int) error {
	return call(ctx, g.client, Gitea, http.MethodPatch, fmt.Sprintf("%s/%d", g.pulls(), n), g.header(),
		map[string]string{"state": "closed"}, nil)
}

// giteaPages bounds how many pages of open pull requests OpenFor reads.
const giteaPages = 20

// OpenFor reads the open pull requests page by page (Gitea's list filters
// by state, not by head branch) and returns the one from head into base.
func (g *gitea) OpenFor(ctx context.Context, head, base string) (PullRequest, bool, error) {
	for page := 1; page <= giteaPages; page++ {
		q := url.Values{"state": {"open"}, "limit": {"50"}, "page": {fmt.Sprint(page)}}
		var out []githubPull
		if err := call(ctx, g.client, Gitea, http.MethodGet, g.pulls()+"?"+q.Encode(), g.header(), nil, &out); err != nil {
			return PullRequest{}, false, err
		}
		if pr, ok, _ := firstOpen(out, head, base); ok {
			return pr, true, nil
		}
		if len(out) == 0 {
			break
		}
	}
	return PullRequest{}, false, nil
}
