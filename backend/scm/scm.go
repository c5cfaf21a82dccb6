// Package scm opens, reads, merges and closes pull requests (merge requests
// on GitLab) through the REST APIs of GitHub, GitLab and Gitea. The Git
// storage backend's propose mode uses it: a change becomes a branch and a
// pull request for review instead of a commit on the target branch.
//
// Tokens come from an environment variable named in the configuration; a
// Provider sends them only in its Authorization (or PRIVATE-TOKEN) header
// and never puts them in an error or a log.
package scm

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/cairn-dev/cairn"
)

// Providers.
const (
	GitHub = "github"
	GitLab = "gitlab"
	Gitea  = "gitea"
)

// States of a pull request, the same for every provider.
const (
	StateOpen   = "open"
	StateMerged = "merged"
	StateClosed = "closed" // closed without merging
)

// Config names a repository on a provider. It is part of a Git backend
// instance's value ("scm").
type Config struct {
	// Provider is github, gitlab or gitea.
	Provider string `json:"provider"`
	// APIURL is the REST API's root: https://api.github.com (default for
	// github; GitHub Enterprise: https://HOST/api/v3), https://gitlab.com/api/v4
	// (default for gitlab), https://HOST/api/v1 for gitea (required).
	APIURL string `json:"apiURL,omitempty"`
	// Repository is "owner/name" (GitLab: the project's full path, or its
	// numeric id).
	Repository string `json:"repository"`
	// TokenEnv names the environment variable holding the API token.
	TokenEnv string `json:"tokenEnv,omitempty"`
}

// Check validates the configuration without reading the token.
func (c Config) Check() error {
	switch c.Provider {
	case GitHub, GitLab:
	case Gitea:
		if c.APIURL == "" {
			return cairn.Errorf(cairn.CodeInvalid, "scm: gitea needs apiURL (https://HOST/api/v1)")
		}
	default:
		return cairn.Errorf(cairn.CodeInvalid, "scm: provider %q: want %q, %q or %q", c.Provider, GitHub, GitLab, Gitea)
	}
	if c.Repository == "" || (c.Provider != GitLab && strings.Count(c.Repository, "/") != 1) {
		return cairn.Errorf(cairn.CodeInvalid, "scm: repository %q: want owner/name", c.Repository)
	}
	if c.APIURL != "" {
		if u, err := url.Parse(c.APIURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return cairn.Errorf(cairn.CodeInvalid, "scm: apiURL %q: want an http(s) URL", c.APIURL)
		}
	}
	return nil
}

// NewPullRequest is what Open proposes: merge Head into Base.
type NewPullRequest struct {
	Title string
	Body  string
	Head  string // the branch with the change
	Base  string // the branch to merge into
}

// PullRequest is a pull request as the provider reports it.
type PullRequest struct {
	// Number is the pull request's number in its repository (GitLab: the
	// merge request's iid).
	Number int    `json:"number"`
	URL    string `json:"url"`
	State  string `json:"state"` // StateOpen, StateMerged or StateClosed
	Head   string `json:"head,omitempty"`
	Base   string `json:"base,omitempty"`
	Title  string `json:"title,omitempty"`
}

// Provider is one repository on one SCM provider.
type Provider interface {
	// Name is github, gitlab or gitea.
	Name() string
	Open(ctx context.Context, pr NewPullRequest) (PullRequest, error)
	Get(ctx context.Context, number int) (PullRequest, error)
	// Merge merges an open pull request (a merge commit, the providers'
	// default method).
	Merge(ctx context.Context, number int) error
	// Close closes it without merging.
	Close(ctx context.Context, number int) error
	// OpenFor finds the open pull request from branch head into base; ok
	// is false when there is none. Recovery uses it to close a pull
	// request whose number a process that died never recorded.
	OpenFor(ctx context.Context, head, base string) (pr PullRequest, ok bool, err error)
}

// Options are what New needs beside the Config.
type Options struct {
	// Getenv reads the token's variable. Default: no token.
	Getenv func(string) string
	// Client sends the requests. Default: a client with a 30 s timeout.
	Client *http.Client
}

// New returns the Provider for c.
func New(c Config, opts Options) (Provider, error) {
	if err := c.Check(); err != nil {
		return nil, err
	}
	token := ""
	if c.TokenEnv != "" {
		if opts.Getenv != nil {
			token = opts.Getenv(c.TokenEnv)
		}
		if token == "" {
			return nil, cairn.Errorf(cairn.CodeInvalid, "scm: %s token: environment variable %s is empty or unset", c.Provider, c.TokenEnv)
		}
	}
	client := opts.Client
	if client == nil {
		client = &http.Client{Timeout: 30 * time.Second}
	}
	api := strings.TrimRight(c.APIURL, "/")
	switch c.Provider {
	case GitHub:
		if api == "" {
			api = "https://api.github.com"
		}
		return &github{api: api, repo: c.Repository, token: token, client: client}, nil
	case GitLab:
		if api == "" {
			api = "https://gitlab.com/api/v4"
		}
		return &gitlab{api: api, project: url.PathEscape(c.Repository), token: token, client: client}, nil
	default:
		return &gitea{api: api, repo: c.Repository, token: token, client: client}, nil
	}
}

// call sends one JSON request and decodes a 2xx answer into out (when not
// nil). Other answers become classified errors quoting the provider's
// message, never the request's headers.
func call(ctx context.Context, client *http.Client, provider, method, u string, header http.Header, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("scm: %s: %w", provider, err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return fmt.Errorf("scm: %s: %w", provider, err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := client.Do(req)
	if err != nil {
		return cairn.Errorf(cairn.CodeUnavailable, "scm: %s: %s %s: %w", provider, method, redact(u), err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return cairn.Errorf(cairn.CodeUnavailable, "scm: %s: %s %s: %w", provider, method, redact(u), err)
	}
	if resp.StatusCode/100 != 2 {
		var msg struct {
			Message json.RawMessage `json:"message"`
			Error   string          `json:"error"`
		}
		_ = json.Unmarshal(data, &msg)
		var text string
		if json.Unmarshal(msg.Message, &text) != nil {
			text = string(msg.Message) // not a string: as the forge wrote it
		}
		if text == "" {
			text = msg.Error
		}
		if text == "" {
			text = http.StatusText(resp.StatusCode)
		}
		// The forge chose it: bounded, printable.
		text = cairn.BoundText(text, cairn.MaxErrorText)
		code := cairn.CodeInternal
		switch resp.StatusCode {
		case http.StatusNotFound:
			code = cairn.CodeNotFound
		case http.StatusUnauthorized, http.StatusForbidden:
			code = cairn.CodeInvalid // a token without access: fix the configuration
		case http.StatusMethodNotAllowed, http.StatusNotAcceptable, http.StatusConflict, http.StatusUnprocessableEntity:
			code = cairn.CodeConflict // not mergeable, already exists, head moved
		case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
			code = cairn.CodeUnavailable
		}
		return cairn.Errorf(code, "scm: %s: %s %s: %d: %s", provider, method, redact(u), resp.StatusCode, text)
	}
	if out != nil && len(bytes.TrimSpace(data)) > 0 {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("scm: %s: %s %s: the answer is not the expected JSON: %w", provider, method, redact(u), err)
		}
	}
	return nil
}

// redact drops a URL's query and user info from messages.
func redact(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "(url)"
	}
	p.User, p.RawQuery = nil, ""
	return p.String()
}
