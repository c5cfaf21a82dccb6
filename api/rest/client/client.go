// Package client is a Go client of cairn's REST API: discovery, the
// resources of user Types and the hub's own resources (types,
// typeinstances, backends, lock requests). Status errors come back as
// *cairn.Error with the hub's codes, so callers handle a remote hub as they
// would a local one.
package client

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/api/rest"
)

// Client talks to one cairn server.
type Client struct {
	base  *url.URL
	hc    *http.Client
	actor string
	token string
}

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient sets the HTTP client (default: one with a 30s timeout for
// everything but watches).
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.hc = hc } }

// WithActor sends the caller's identity (Impersonate-User), which the hub
// records as createdBy.
func WithActor(actor string) Option { return func(c *Client) { c.actor = actor } }

// New returns a client of the server at serverURL (http://HOST:PORT).
func New(serverURL string, opts ...Option) (*Client, error) {
	u, err := url.Parse(serverURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, cairn.Errorf(cairn.CodeInvalid, "server %q: want a URL like http://127.0.0.1:8080", serverURL)
	}
	c := &Client{base: u, hc: &http.Client{}}
	for _, o := range opts {
		o(c)
	}
	return c, nil
}

// WithToken sends a bearer token (Authorization: Bearer) on every request.
func WithToken(token string) Option { return func(c *Client) { c.token = token } }

// Actor is the caller identity the client sends.
func (c *Client) Actor() string { return c.actor }

// Server returns the server URL.
func (c *Client) Server() string { return c.base.String() }

// Resource names a served resource.
type Resource struct {
	Group, Version, Plural string
	Kind                   string
	Namespaced             bool
	Verbs                  []string
	ShortNames             []string
	SingularName           string
}

// GroupVersion returns "group/version".
func (r Resource) GroupVersion() string { return r.Group + "/" + r.Version }

func (r Resource) path(namespace, name string) string {
	p := "/apis/" + r.Group + "/" + r.Version + "/"
	if r.Namespaced && namespace != "" {
		p += "namespaces/" + url.PathEscape(namespace) + "/"
	}
	p += r.Plural
	if name != "" {
		p += "/" + url.PathEscape(name)
	}
	return p
}

// Hub resources.
var (
	Types         = Resource{Group: rest.HubGroup, Version: rest.HubVersion, Plural: "types", Kind: "Type"}
	TypeInstances = Resource{Group: rest.HubGroup, Version: rest.HubVersion, Plural: "typeinstances", Kind: "TypeInstance"}
	Backends      = Resource{Group: rest.HubGroup, Version: rest.HubVersion, Plural: "backends", Kind: "Backend"}
	LockRequests  = Resource{Group: rest.HubGroup, Version: rest.HubVersion, Plural: "lockrequests", Kind: "LockRequest"}
)

// Resources lists every served resource (discovery).
func (c *Client) Resources(ctx context.Context) ([]Resource, error) {
	var groups struct {
		Groups []struct {
			Versions []struct {
				GroupVersion string `json:"groupVersion"`
			} `json:"versions"`
		} `json:"groups"`
	}
	if err := c.do(ctx, http.MethodGet, "/apis", nil, "", nil, &groups); err != nil {
		return nil, err
	}
	var out []Resource
	for _, g := range groups.Groups {
		for _, v := range g.Versions {
			var list struct {
				Resources []struct {
					Name         string   `json:"name"`
					SingularName string   `json:"singularName"`
					Namespaced   bool     `json:"namespaced"`
					Kind         string   `json:"kind"`
					Verbs        []string `json:"verbs"`
					ShortNames   []string `json:"shortNames"`
				} `json:"resources"`
			}
			if err := c.do(ctx, http.MethodGet, "/apis/"+v.GroupVersion, nil, "", nil, &list); err != nil {
				return nil, err
			}
			group, version, _ := strings.Cut(v.GroupVersion, "/")
			for _, r := range list.Resources {
				if strings.Contains(r.Name, "/") {
					continue // a subresource (status), as kubectl skips them
				}
				out = append(out, Resource{Group: group, Version: version, Plural: r.Name, Kind: r.Kind,
					Namespaced: r.Namespaced, Verbs: r.Verbs, ShortNames: r.ShortNames, SingularName: r.SingularName})
			}
		}
	}
	return out, nil
}

// FindResource resolves what a user typed (plural, singular, short name or
// kind, optionally "name.group") against discovery.
func (c *Client) FindResource(ctx context.Context, name string) (Resource, error) {
	all, err := c.Resources(ctx)
	if err != nil {
		return Resource{}, err
	}
	n, group, _ := strings.Cut(strings.ToLower(name), ".")
	var found []Resource
	for _, r := range all {
		if group != "" && r.Group != group {
			continue
		}
		if n == r.Plural || n == r.SingularName || n == strings.ToLower(r.Kind) || contains(r.ShortNames, n) {
			found = append(found, r)
		}
	}
	switch len(found) {
	case 0:
		return Resource{}, cairn.Errorf(cairn.CodeNotFound, "the server doesn't have a resource type %q", name)
	case 1:
		return found[0], nil
	}
	// Several versions of one group: take the first, discovery lists the
	// preferred version first.
	for _, r := range found[1:] {
		if r.Group != found[0].Group {
			return Resource{}, cairn.Errorf(cairn.CodeInvalid, "resource type %q is ambiguous: %s and %s; qualify it as %s.%s",
				name, found[0].GroupVersion(), r.GroupVersion(), n, found[0].Group)
		}
	}
	return found[0], nil
}

func contains(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}

// ListOptions are the query parameters of a list or watch.
type ListOptions struct {
	LabelSelector   string
	FieldSelector   string
	Limit           int
	Continue        string
	ResourceVersion string
	// Extra holds further query parameters, such as the typeinstances
	// filters (typePath, createdBy, attribute, ...).
	Extra url.Values
}

func (o ListOptions) query() url.Values {
	q := url.Values{}
	for k, vs := range o.Extra {
		q[k] = append([]string(nil), vs...)
	}
	if o.LabelSelector != "" {
		q.Set("labelSelector", o.LabelSelector)
	}
	if o.FieldSelector != "" {
		q.Set("fieldSelector", o.FieldSelector)
	}
	if o.Limit > 0 {
		q.Set("limit", strconv.Itoa(o.Limit))
	}
	if o.Continue != "" {
		q.Set("continue", o.Continue)
	}
	if o.ResourceVersion != "" {
		q.Set("resourceVersion", o.ResourceVersion)
	}
	return q
}

// List is a page of raw objects.
type List struct {
	Metadata rest.ListMeta     `json:"metadata"`
	Items    []json.RawMessage `json:"items"`
}

// Get reads one object as raw JSON.
func (c *Client) Get(ctx context.Context, r Resource, namespace, name string) (json.RawMessage, error) {
	var out json.RawMessage
	err := c.do(ctx, http.MethodGet, r.path(namespace, name), nil, "", nil, &out)
	return out, err
}

// List reads one page; namespace "" lists every namespace.
func (c *Client) List(ctx context.Context, r Resource, namespace string, o ListOptions) (List, error) {
	var out List
	err := c.do(ctx, http.MethodGet, r.path(namespace, ""), o.query(), "", nil, &out)
	return out, err
}

// ListAll follows continue tokens to the end.
func (c *Client) ListAll(ctx context.Context, r Resource, namespace string, o ListOptions) (List, error) {
	var all List
	for {
		page, err := c.List(ctx, r, namespace, o)
		if err != nil {
			return List{}, err
		}
		all.Items = append(all.Items, page.Items...)
		if all.Metadata.ResourceVersion == "" {
			all.Metadata.ResourceVersion = page.Metadata.ResourceVersion
		}
		if page.Metadata.Continue == "" {
			return all, nil
		}
		o.Continue = page.Metadata.Continue
	}
}

// tableAccept asks for the server's Table, as kubectl get does.
const tableAccept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"

// Table reads what the server prints for a list (name "") or for one
// object: a meta.k8s.io Table, the column definitions and a row per object
// with its metadata (includeObject=Metadata), following continue tokens. The
// server's warnings come with it (a value it could not read, shown as
// <unknown>), for the caller to show as kubectl does.
func (c *Client) Table(ctx context.Context, r Resource, namespace, name string, o ListOptions) (rest.Table, []string, error) {
	var all rest.Table
	var warnings []string
	for {
		resp, err := c.sendAccept(ctx, http.MethodGet, r.path(namespace, name), o.query(), "", tableAccept, nil)
		if err != nil {
			return rest.Table{}, nil, err
		}
		var page rest.Table
		err = func() error {
			defer resp.Body.Close()
			if resp.StatusCode >= 300 {
				return decodeError(resp)
			}
			warnings = append(warnings, warningsOf(resp.Header)...)
			if err := json.NewDecoder(resp.Body).Decode(&page); err != nil {
				return fmt.Errorf("GET %s: decode the table: %w", r.path(namespace, name), err)
			}
			if page.Kind != "Table" {
				return fmt.Errorf("GET %s: the server answered a %s, not a Table", r.path(namespace, name), cmp.Or(page.Kind, "document without a kind"))
			}
			return nil
		}()
		if err != nil {
			return rest.Table{}, nil, err
		}
		if all.ColumnDefinitions == nil {
			all = page
		} else {
			all.Rows = append(all.Rows, page.Rows...)
		}
		if page.Metadata.Continue == "" || name != "" {
			all.Metadata.Continue = ""
			return all, warnings, nil
		}
		o.Continue = page.Metadata.Continue
	}
}

// warningsOf are the texts of the Warning headers of an answer (RFC 7234:
// 299 - "text"), as kubectl prints them.
func warningsOf(h http.Header) []string {
	var out []string
	for _, w := range h.Values("Warning") {
		_, text, ok := strings.Cut(w, " - ")
		if !ok {
			continue
		}
		if u, err := strconv.Unquote(strings.TrimSpace(text)); err == nil {
			text = u
		}
		out = append(out, text)
	}
	return out
}

// Create posts an object and returns the created one.
func (c *Client) Create(ctx context.Context, r Resource, namespace string, obj any) (json.RawMessage, error) {
	var out json.RawMessage
	err := c.do(ctx, http.MethodPost, r.path(namespace, ""), nil, "application/json", obj, &out)
	return out, err
}

// WriteOptions qualify a write.
type WriteOptions struct {
	// LockOwner must be the lock owner to write a locked instance.
	LockOwner string
}

func (o WriteOptions) query() url.Values {
	q := url.Values{}
	if o.LockOwner != "" {
		q.Set("lockOwner", o.LockOwner)
	}
	return q
}

// Replace puts an object (PUT); a metadata.resourceVersion in obj makes it
// conditional.
func (c *Client) Replace(ctx context.Context, r Resource, namespace, name string, obj any, o WriteOptions) (json.RawMessage, error) {
	var out json.RawMessage
	err := c.do(ctx, http.MethodPut, r.path(namespace, name), o.query(), "application/json", obj, &out)
	return out, err
}

// Patch types.
const (
	MergePatch = "application/merge-patch+json"
	JSONPatch  = "application/json-patch+json"
)

// Patch applies a merge or JSON patch.
func (c *Client) Patch(ctx context.Context, r Resource, namespace, name, patchType string, patch []byte, o WriteOptions) (json.RawMessage, error) {
	var out json.RawMessage
	err := c.do(ctx, http.MethodPatch, r.path(namespace, name), o.query(), patchType, json.RawMessage(patch), &out)
	return out, err
}

// Delete removes an object.
func (c *Client) Delete(ctx context.Context, r Resource, namespace, name string, o WriteOptions) error {
	return c.do(ctx, http.MethodDelete, r.path(namespace, name), o.query(), "", nil, nil)
}

// Lock locks ids for owner, all or nothing.
func (c *Client) Lock(ctx context.Context, ids []string, owner string) error {
	return c.lockRequest(ctx, "Lock", ids, owner)
}

// Unlock unlocks ids, all or nothing.
func (c *Client) Unlock(ctx context.Context, ids []string, owner string) error {
	return c.lockRequest(ctx, "Unlock", ids, owner)
}

func (c *Client) lockRequest(ctx context.Context, action string, ids []string, owner string) error {
	req := rest.LockRequest{APIVersion: rest.HubGroup + "/" + rest.HubVersion, Kind: "LockRequest",
		Spec: rest.LockRequestSpec{Action: action, IDs: ids, Owner: owner}}
	return c.do(ctx, http.MethodPost, LockRequests.path("", ""), nil, "application/json", req, nil)
}

// Event is one watch event.
type Event struct {
	Type   string
	Object json.RawMessage
}

// Watch streams events until ctx ends or the server closes the stream;
// the returned channel is closed then. An ERROR event carries a Status.
func (c *Client) Watch(ctx context.Context, r Resource, namespace string, o ListOptions) (<-chan Event, error) {
	return c.watch(ctx, r, namespace, o, "application/json")
}

// WatchTable is Watch with each event's object a Table of the changed
// object's row (the first event's with the column definitions), as kubectl
// get -w asks for it.
func (c *Client) WatchTable(ctx context.Context, r Resource, namespace string, o ListOptions) (<-chan Event, error) {
	return c.watch(ctx, r, namespace, o, tableAccept)
}

func (c *Client) watch(ctx context.Context, r Resource, namespace string, o ListOptions, accept string) (<-chan Event, error) {
	q := o.query()
	q.Set("watch", "true")
	resp, err := c.sendAccept(ctx, http.MethodGet, r.path(namespace, ""), q, "", accept, nil)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		return nil, decodeError(resp)
	}
	ch := make(chan Event)
	go func() {
		defer close(ch)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		for sc.Scan() {
			var ev struct {
				Type   string          `json:"type"`
				Object json.RawMessage `json:"object"`
			}
			if json.Unmarshal(sc.Bytes(), &ev) != nil {
				continue
			}
			select {
			case ch <- Event{Type: ev.Type, Object: ev.Object}:
			case <-ctx.Done():
				return
			}
		}
	}()
	return ch, nil
}

// Healthy checks /readyz.
func (c *Client) Healthy(ctx context.Context) error {
	resp, err := c.send(ctx, http.MethodGet, "/readyz", nil, "", nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return cairn.Errorf(cairn.CodeUnavailable, "server %s is not ready: %s", c.base, strings.TrimSpace(string(b)))
	}
	return nil
}

func (c *Client) send(ctx context.Context, method, path string, q url.Values, contentType string, body any) (*http.Response, error) {
	return c.sendAccept(ctx, method, path, q, contentType, "application/json", body)
}

// sendAccept is send asking for the media type accept.
func (c *Client) sendAccept(ctx context.Context, method, path string, q url.Values, contentType, accept string, body any) (*http.Response, error) {
	u := *c.base
	u.Path = strings.TrimSuffix(u.Path, "/") + path
	if cairn.IsDryRun(ctx) && method != http.MethodGet && method != http.MethodHead {
		// A dry run is the server's to make (the hub's checks live there).
		q = maps.Clone(q)
		if q == nil {
			q = url.Values{}
		}
		q.Set("dryRun", "All")
	}
	u.RawQuery = q.Encode()
	var rd io.Reader
	if body != nil {
		var b []byte
		switch v := body.(type) {
		case json.RawMessage:
			b = v
		case []byte:
			b = v
		default:
			var err error
			if b, err = json.Marshal(v); err != nil {
				return nil, fmt.Errorf("encode the request body: %w", err)
			}
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	req.Header.Set("Accept", accept)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if c.actor != "" {
		req.Header.Set("Impersonate-User", c.actor)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, &cairn.Error{Code: cairn.CodeUnavailable, Err: err,
			Msg: fmt.Sprintf("cannot reach the cairn server at %s: %v", c.base, err)}
	}
	return resp, nil
}

func (c *Client) do(ctx context.Context, method, path string, q url.Values, contentType string, body, out any) error {
	resp, err := c.send(ctx, method, path, q, contentType, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		return decodeError(resp)
	}
	if out == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("%s %s: decode the answer: %w", method, path, err)
	}
	return nil
}

// decodeError maps a Status back to the hub's error vocabulary.
func decodeError(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	var st rest.Status
	if json.Unmarshal(b, &st) != nil || st.Kind != "Status" {
		return &cairn.Error{Code: codeForHTTP(resp.StatusCode, ""), Msg: notAStatus(resp, b)}
	}
	return statusError(st)
}

// notAStatus describes an answer that is no Status, which cairn never
// sends: from another service, a proxy, or a URL that is not a cairn
// server's. One line: a short plain-text body is quoted, a page is not.
func notAStatus(resp *http.Response, body []byte) string {
	where := resp.Status
	if resp.Request != nil {
		where = resp.Request.Method + " " + resp.Request.URL.Redacted()
	}
	msg := fmt.Sprintf("%s: the server answered %s", where, resp.Status)
	text := strings.TrimSpace(string(body))
	media, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch {
	case text == "":
	case (media == "" || media == "text/plain") && len(text) <= 200 && !strings.Contains(text, "\n"):
		return msg + ": " + text
	default:
		msg += " with " + cmp.Or(media, "a body") + ", not a Kubernetes Status"
	}
	if resp.StatusCode == http.StatusNotFound && resp.Request != nil {
		base := *resp.Request.URL
		base.Path, base.RawPath, base.RawQuery = "", "", ""
		msg += ": is " + base.Redacted() + " a cairn server?"
	}
	return msg
}

// statusError is the error a Status stands for.
func statusError(st rest.Status) error {
	e := &cairn.Error{Code: codeForHTTP(st.Code, st.Reason), Msg: st.Message}
	if st.Details != nil {
		for _, c := range st.Details.Causes {
			switch c.Type {
			case "Locked":
				e.Code = cairn.CodeLocked
			case "UsedBy":
				e.Code = cairn.CodeUsedBy
				if id, ok := strings.CutPrefix(c.Message, "used by TypeInstance "); ok {
					e.IDs = append(e.IDs, id)
				}
			case "FieldValueInvalid", "FieldValueRequired":
				e.Causes = append(e.Causes, cairn.Cause{Field: c.Field, Message: c.Message})
			}
		}
	}
	return e
}

func codeForHTTP(code int, reason string) cairn.Code {
	switch {
	case reason == "AlreadyExists":
		return cairn.CodeAlreadyExists
	case code == http.StatusNotFound:
		return cairn.CodeNotFound
	case code == http.StatusConflict:
		return cairn.CodeConflict
	case code == http.StatusUnprocessableEntity, code == http.StatusBadRequest:
		return cairn.CodeInvalid
	case code == http.StatusGone:
		return cairn.CodeGone
	case code == http.StatusForbidden, code == http.StatusUnauthorized:
		// Unauthenticated or not allowed: either way the caller may not.
		return cairn.CodeForbidden
	case code == http.StatusServiceUnavailable, code == http.StatusGatewayTimeout, code == http.StatusBadGateway:
		return cairn.CodeUnavailable
	}
	return cairn.CodeInternal
}

// Value returns the latest value of the TypeInstance id (the Capact view,
// hub.cairn.dev/v1 typeinstances). The hub reads it from the instance's own
// backend, so a projection of a projection renders through. With it a
// Client is the Source of a gotemplate backend that runs out of process
// (cairn backend gotemplate) and reads the hub over REST.
func (c *Client) Value(ctx context.Context, id string) (json.RawMessage, error) {
	raw, err := c.Get(ctx, TypeInstances, "", id)
	if err != nil {
		return nil, fmt.Errorf("get TypeInstance %q from %s: %w", id, c.Server(), err)
	}
	var obj rest.TypeInstanceObject
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, fmt.Errorf("decode TypeInstance %q from %s: %w", id, c.Server(), err)
	}
	return obj.Spec.Value, nil
}
