// Package access guards the HTTP surface: it authenticates each request
// (authn.Chain), applies impersonation when the caller holds the impersonate
// verb, asks the hub's RBAC decision for resource and path requests, limits
// each user's request rate, and writes one audit event per request. It
// also serves SelfSubjectAccessReview and SubjectAccessReview, so
// `kubectl auth can-i` works. S3 clients pointed at cairn, which serves no
// S3 API, get an S3 error document saying so (s3.go).
package access

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"golang.org/x/time/rate"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/auth/audit"
	"github.com/cairn-dev/cairn/auth/authn"
	"github.com/cairn-dev/cairn/auth/rbac"
)

// Authorizer is the hub's decision point (hub.Hub implements it).
type Authorizer interface {
	Authorize(ctx context.Context, a rbac.Attributes) rbac.Decision
	AuthorizeUser(ctx context.Context, a rbac.Attributes) rbac.Decision
	// RulesFor returns the rules u holds in namespace.
	RulesFor(ctx context.Context, u cairn.User, namespace string) []rbacv1.PolicyRule
}

// Config configures a Guard.
type Config struct {
	Authn *authn.Chain
	Authz Authorizer
	// Audit receives one event per request; nil writes none.
	Audit      *audit.Writer
	AuditLevel audit.Level
	// RatePerUser is the sustained requests per second allowed to one user
	// (anonymous callers: to one source address), Burst the bucket size.
	// 0: no limit.
	RatePerUser float64
	Burst       int
	// Public are paths served without authorization because they check
	// credentials of their own (the Git webhooks' HMAC signature) or show
	// nothing of the hub (the web console's files), each optionally after
	// a method and a space ("POST /hooks/"): only requests of that method
	// are let through. As in ServeMux patterns, a path ending in "/" is a
	// prefix, "/{$}" is the root alone, and any other path matches only
	// itself.
	Public []string
	// GraphQLPath is where GraphQL is served: the path is authorized as a
	// whole (post /graphql), each field by the GraphQL handler. Its bodies
	// are not kept at audit level Request. Default /graphql.
	GraphQLPath string
	Logger      *slog.Logger
	// HostCheck refuses a request without credentials whose Host is not a
	// loopback name or address or one of ServerHosts (DNS rebinding: a web
	// page whose name resolves to 127.0.0.1 must not reach a server that
	// trusts local callers). Set it where callers without credentials get
	// rights for being local (peer authentication).
	HostCheck   bool
	ServerHosts []string
}

// Guard is the middleware.
type Guard struct {
	cfg Config
	log *slog.Logger

	codecs serializer.CodecFactory

	mu       sync.Mutex
	limiters map[string]*rate.Limiter
}

// New returns a Guard.
func New(cfg Config) *Guard {
	if cfg.Authn == nil {
		cfg.Authn = &authn.Chain{}
	}
	if cfg.GraphQLPath == "" {
		cfg.GraphQLPath = "/graphql"
	}
	if cfg.AuditLevel == "" {
		cfg.AuditLevel = audit.LevelMetadata
	}
	g := &Guard{cfg: cfg, log: cfg.Logger, limiters: map[string]*rate.Limiter{}, codecs: reviewCodecs()}
	if g.log == nil {
		g.log = slog.New(slog.DiscardHandler)
	}
	return g
}

// Wrap returns next behind the guard.
func (g *Guard) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g.serve(w, r, next)
	})
}

type recorder struct {
	http.ResponseWriter
	status int
	// reason and message of a Status the guard wrote itself, for the
	// audit event.
	reason, message string
	// keep, when set, gets the start of the body (a create's answer,
	// which names what was created; a refusal's Status).
	keep *capped
	// keepErrors: keep the body of an answer of 400 or more, whose Status
	// says why for the audit event.
	keepErrors bool
	// created, when set, is the event's Annotations of a create whose
	// path names no object: a successful answer is kept, to read the
	// name from, unless the handler has told it (audit.Created).
	created *audit.Annotations
}

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.begin(code)
	}
	r.ResponseWriter.WriteHeader(code)
}

// begin notes the answer's status and whether its body is to be kept.
func (r *recorder) begin(code int) {
	r.status = code
	switch {
	case r.keep != nil:
	case r.keepErrors && code >= 400 && r.reason == "": // the guard's own Status is known
		r.keep = &capped{max: 64 << 10}
	case r.created != nil && code >= 200 && code <= 299:
		if _, _, told := r.created.CreatedObject(); !told {
			r.keep = &capped{max: 64 << 10}
		}
	}
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.begin(http.StatusOK)
	}
	if r.keep != nil {
		r.keep.Write(b)
	}
	return r.ResponseWriter.Write(b)
}

func (r *recorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

func (g *Guard) serve(w http.ResponseWriter, r *http.Request, next http.Handler) {
	received := time.Now()
	rec := &recorder{ResponseWriter: w}
	var ev *audit.Event
	var ann *audit.Annotations
	if g.cfg.Audit != nil && g.cfg.AuditLevel != audit.LevelNone {
		ev = audit.NewEvent(g.cfg.AuditLevel, uuid.NewString(), received)
		ev.RequestURI = audit.RequestURI(r.URL)
		ev.UserAgent = r.UserAgent()
		if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
			ev.SourceIPs = []string{host}
		}
		w.Header().Set("Audit-Id", ev.AuditID)
		rec.keepErrors = true
		defer func() {
			code := rec.status
			if code == 0 {
				code = http.StatusOK
			}
			if rec.reason == "" && code >= 400 {
				// A refusal of the handler (the hub's: exists, invalid,
				// not allowed to grant...) says why, as the guard's do.
				rec.reason, rec.message = statusOf(rec)
			}
			ev.ResponseStatus = &audit.Status{Code: code, Reason: rec.reason, Message: rec.message}
			if rec.reason != "" || rec.message != "" {
				ev.ResponseStatus.Status = "Failure"
			}
			if ann != nil {
				for k, v := range ann.Map() {
					if ev.Annotations == nil {
						ev.Annotations = map[string]string{}
					}
					ev.Annotations[k] = v
				}
			}
			if err := g.cfg.Audit.Write(ev); err != nil {
				g.log.Error("audit", "err", err)
			}
		}()
	}
	attrs := requestAttributes(r)
	if ev != nil {
		ev.Verb = attrs.Verb
		if attrs.ResourceRequest {
			ev.ObjectRef = &audit.ObjectRef{Resource: attrs.Resource, Subresource: attrs.Subresource, Namespace: attrs.Namespace,
				Name: attrs.Name, APIGroup: attrs.APIGroup, APIVersion: apiVersionOf(r.URL.Path)}
		}
	}

	if s3Signed(r) {
		// Not a bad token: an S3 client at the wrong service. Answered
		// before authentication, with nothing of the hub in the answer.
		g.log.Info("S3 request refused: cairn serves no S3 API", "method", r.Method, "path", r.URL.Path)
		if ev != nil {
			ev.User = audit.UserInfo{Username: cairn.Anonymous}
		}
		rec.reason, rec.message = "NotImplemented", s3NotServed
		writeS3Refusal(rec, r)
		return
	}
	user, err := g.cfg.Authn.Authenticate(r)
	if err != nil {
		// The reason goes to the log without the credential; the client
		// learns only that it was refused, as from the API server.
		g.log.Info("authentication failed", "path", r.URL.Path, "reason", err.Error())
		if ev != nil {
			ev.User = audit.UserInfo{Username: cairn.Anonymous}
		}
		writeStatus(rec, http.StatusUnauthorized, "Unauthorized", "Unauthorized")
		return
	}
	if ev != nil {
		ev.User = userInfo(user)
	}
	if !authn.Presented(r) {
		if msg := g.browserRefusal(r); msg != "" {
			writeStatus(rec, http.StatusForbidden, "Forbidden", msg)
			return
		}
	}
	if user, err = g.impersonate(r, user); err != nil {
		var f *forbidden
		if errors.As(err, &f) {
			writeStatus(rec, http.StatusForbidden, "Forbidden", f.msg)
		} else {
			writeStatus(rec, http.StatusBadRequest, "BadRequest", err.Error())
		}
		return
	}
	if ev != nil && user.Impersonator != "" {
		ui := userInfo(user)
		ev.ImpersonatedUser = &ui
	}
	if !g.allow(rec, r, user) {
		return
	}
	ctx := cairn.WithUser(r.Context(), user)
	if ev != nil {
		// What handlers add about the request (GraphQL's per-field
		// denials) joins its event.
		ctx, ann = audit.WithAnnotations(ctx)
	}
	r = r.WithContext(ctx)

	if g.public(r) {
		next.ServeHTTP(rec, r)
		return
	}
	// GraphQL is a path here (post /graphql); its fields ask the same
	// decision for each object they read or write (api/graphql/authz.go).
	attrs.User = user
	d := g.cfg.Authz.Authorize(ctx, attrs)
	if d.Allowed && revealsSecrets(r, attrs) {
		// Secret values in a list or watch: whoever may reveal them on
		// each object read by name may read them all at once, and only
		// they (docs/secrets.md); list and watch alone show them redacted.
		reveal := attrs
		reveal.Verb = rbac.RevealVerb
		if dr := g.cfg.Authz.Authorize(ctx, reveal); !dr.Allowed {
			d, attrs = dr, reveal
		}
	}
	if d.Allowed && isCupPut(r, attrs) {
		create := attrs
		create.Verb = "create"
		if dc := g.cfg.Authz.Authorize(ctx, create); !dc.Allowed {
			d, attrs = dc, create
		}
	}
	if ev != nil {
		ev.Annotations = map[string]string{"authorization.k8s.io/decision": "allow", "authorization.k8s.io/reason": d.Reason}
	}
	if !d.Allowed {
		if ev != nil {
			ev.Annotations["authorization.k8s.io/decision"] = "forbid"
		}
		if user.Name == cairn.Anonymous && !g.cfg.Authn.Configured() {
			// Nothing but the admin token can authenticate: say so.
			writeStatus(rec, http.StatusUnauthorized, "Unauthorized", "Unauthorized: use the admin token (<data-dir>/admin.token) or the kubeconfig written beside it")
			return
		}
		if user.Name == cairn.Anonymous && g.cfg.Authn.Peer != nil {
			writeStatus(rec, http.StatusUnauthorized, "Unauthorized", "Unauthorized: without credentials this server serves only local processes of its own OS user (peer authentication); present the admin token (<data-dir>/admin.token) or use the kubeconfig written beside it")
			return
		}
		writeStatus(rec, http.StatusForbidden, "Forbidden", forbiddenMessage(user.Name, attrs))
		return
	}
	if ev != nil && ev.ObjectRef != nil && attrs.Verb == "create" && attrs.Name == "" {
		// The path of a create names no object: the answer does, as the
		// API server's events name what was created (generated names
		// and ids included). Deferred after the audit write: runs first.
		rec.created = ann
		defer func() {
			if ns, name, ok := ann.CreatedObject(); ok && rec.status >= 200 && rec.status <= 299 && name != "" {
				// The handler said what it created (audit.Created).
				setCreated(ev, ns, name)
				return
			}
			nameCreated(ev, rec)
		}()
	}
	if ev != nil && ev.Level == audit.LevelRequest && r.Body != nil && (r.Method == http.MethodPost || r.Method == http.MethodPut || r.Method == http.MethodPatch) && r.URL.Path != g.cfg.GraphQLPath {
		// Keep the first MiB for the event; the handler reads it all.
		cap := &capped{max: 1 << 20}
		r.Body = struct {
			io.Reader
			io.Closer
		}{io.TeeReader(r.Body, cap), r.Body}
		defer func() { ev.RequestObject = audit.RequestObject(cap.buf.Bytes()) }()
	}
	next.ServeHTTP(rec, r)
}

// statusOf returns the reason and message of the Kubernetes Status a
// handler answered with, if it did.
func statusOf(rec *recorder) (reason, message string) {
	if rec.keep == nil || !strings.HasPrefix(rec.Header().Get("Content-Type"), "application/json") {
		return "", ""
	}
	var st struct{ Kind, Reason, Message string }
	if json.Unmarshal(rec.keep.buf.Bytes(), &st) != nil || st.Kind != "Status" {
		return "", ""
	}
	return st.Reason, st.Message
}

// CreatedAnnotation lists the objects a create of several (a List body)
// made, at most maxCreated of them.
const CreatedAnnotation = "hub.cairn.dev/created"

const maxCreated = 10

// setCreated names the object a create made in ev's objectRef; the
// namespace only when the path gave none.
func setCreated(ev *audit.Event, namespace, name string) {
	ev.ObjectRef.Name = name
	if ev.ObjectRef.Namespace == "" {
		ev.ObjectRef.Namespace = namespace
	}
}

// nameCreated sets ev's objectRef name (and namespace, if the path gave
// none) from the JSON object a successful create answered with; a list of
// objects created is named in CreatedAnnotation.
func nameCreated(ev *audit.Event, rec *recorder) {
	if rec.status < 200 || rec.status > 299 || !strings.HasPrefix(rec.Header().Get("Content-Type"), "application/json") {
		return
	}
	type meta struct{ Name, Namespace string }
	dec := json.NewDecoder(bytes.NewReader(rec.keep.buf.Bytes()))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return
	}
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return
		}
		switch k {
		case "metadata":
			var m meta
			if dec.Decode(&m) == nil && m.Name != "" {
				setCreated(ev, m.Namespace, m.Name)
				return
			}
			continue
		case "items":
			if t, err := dec.Token(); err != nil || t != json.Delim('[') {
				return
			}
			var names []string
			for dec.More() {
				var it struct{ Metadata meta }
				if err := dec.Decode(&it); err != nil || len(names) == maxCreated {
					names = append(names, "...") // more than kept or shown
					break
				}
				n := it.Metadata.Name
				if it.Metadata.Namespace != "" {
					n = it.Metadata.Namespace + "/" + n
				}
				names = append(names, n)
			}
			if len(names) > 0 {
				if ev.Annotations == nil {
					ev.Annotations = map[string]string{}
				}
				ev.Annotations[CreatedAnnotation] = strings.Join(names, ", ")
			}
			return
		}
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			return
		}
	}
}

type capped struct {
	buf bytes.Buffer
	max int
}

func (c *capped) Write(p []byte) (int, error) {
	if room := c.max - c.buf.Len(); room > 0 {
		c.buf.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}

func (g *Guard) public(r *http.Request) bool {
	for _, p := range g.cfg.Public {
		method, prefix, ok := strings.Cut(p, " ")
		if !ok {
			method, prefix = "", p
		}
		if method != "" && method != r.Method {
			continue
		}
		switch {
		case prefix == "/{$}":
			if r.URL.Path == "/" {
				return true
			}
		case strings.HasSuffix(prefix, "/"):
			if strings.HasPrefix(r.URL.Path, prefix) {
				return true
			}
		case r.URL.Path == prefix:
			return true
		}
	}
	return false
}

// allow applies the per-user rate limit; false means 429 was written.
func (g *Guard) allow(w http.ResponseWriter, r *http.Request, u cairn.User) bool {
	if g.cfg.RatePerUser <= 0 {
		return true
	}
	// The user who authenticated is counted, not whom they act as: names
	// to impersonate are the caller's to choose.
	name := u.Name
	if u.Impersonator != "" {
		name = u.Impersonator
	}
	key := "user:" + name
	if name == cairn.Anonymous {
		host, _, _ := net.SplitHostPort(r.RemoteAddr)
		key = "addr:" + host
	}
	g.mu.Lock()
	lim, ok := g.limiters[key]
	if !ok {
		if len(g.limiters) >= 100_000 { // bound memory; buckets refill anyway
			clear(g.limiters)
		}
		lim = rate.NewLimiter(rate.Limit(g.cfg.RatePerUser), max(g.cfg.Burst, 1))
		g.limiters[key] = lim
	}
	g.mu.Unlock()
	now := time.Now()
	res := lim.ReserveN(now, 1)
	if d := res.DelayFrom(now); d > 0 {
		res.CancelAt(now)
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(d.Seconds()))))
		writeStatus(w, http.StatusTooManyRequests, "TooManyRequests", "too many requests from user \""+name+"\": retry after "+strconv.Itoa(int(math.Ceil(d.Seconds())))+"s")
		return false
	}
	return true
}

type forbidden struct{ msg string }

func (f *forbidden) Error() string { return f.msg }

// impersonate applies Impersonate-User, -Group and -Uid when the caller may
// impersonate each of them (verb impersonate on users, groups, uids, as in
// the API server); both identities are kept.
func (g *Guard) impersonate(r *http.Request, real cairn.User) (cairn.User, error) {
	name := r.Header.Get("Impersonate-User")
	groups := r.Header.Values("Impersonate-Group")
	uid := r.Header.Get("Impersonate-Uid")
	// Impersonate-Extra-<key> (kubectl --as-user-extra): never ignored, or
	// a caller who asks to act with less would act with all it holds.
	var extras []string
	for h := range r.Header {
		if strings.HasPrefix(h, extraPrefix) {
			extras = append(extras, h)
		}
	}
	if name == "" {
		if len(extras) > 0 {
			slices.Sort(extras)
			return real, errors.New(extras[0] + " needs Impersonate-User")
		}
		if len(groups) > 0 || uid != "" {
			return real, errors.New("Impersonate-Group and Impersonate-Uid need Impersonate-User")
		}
		return real, nil
	}
	check := func(group, resource, value string) error {
		a := rbac.Attributes{User: real, Verb: "impersonate", ResourceRequest: true, APIGroup: group, Resource: resource, Name: value}
		if !g.cfg.Authz.AuthorizeUser(r.Context(), a).Allowed {
			return &forbidden{forbiddenMessage(real.Name, a)}
		}
		return nil
	}
	if err := check("", "users", name); err != nil {
		return real, err
	}
	for _, gr := range groups {
		if err := check("", "groups", gr); err != nil {
			return real, err
		}
	}
	if uid != "" {
		if err := check("authentication.k8s.io", "uids", uid); err != nil {
			return real, err
		}
	}
	for _, h := range extras {
		// As the API server: verb impersonate on userextras/<key> for each
		// value. cairn keeps no extras, so granted ones change nothing else.
		key := strings.ToLower(h[len(extraPrefix):])
		if k, err := url.PathUnescape(key); err == nil {
			key = k
		}
		for _, v := range r.Header.Values(h) {
			a := rbac.Attributes{User: real, Verb: "impersonate", ResourceRequest: true, APIGroup: "authentication.k8s.io",
				Resource: "userextras", Subresource: key, Name: v}
			if !g.cfg.Authz.AuthorizeUser(r.Context(), a).Allowed {
				return real, &forbidden{forbiddenMessage(real.Name, a)}
			}
		}
	}
	u := cairn.User{Name: name, UID: uid, Groups: slices.Clone(groups), Impersonator: real.Name}
	switch {
	case slices.Contains(real.Groups, cairn.Unauthenticated):
		// A name claimed without credentials (allowed only when anonymous
		// callers may impersonate, --allow-anonymous) stays unauthenticated.
		u.Groups = append(u.Groups, cairn.Unauthenticated)
	case name != cairn.Anonymous && !slices.Contains(u.Groups, cairn.Authenticated):
		u.Groups = append(u.Groups, cairn.Authenticated)
	}
	return u, nil
}

// extraPrefix starts the headers of impersonated extras, canonicalized.
const extraPrefix = "Impersonate-Extra-"

func userInfo(u cairn.User) audit.UserInfo {
	return audit.UserInfo{Username: u.Name, UID: u.UID, Groups: u.Groups}
}

func apiVersionOf(path string) string {
	// The segments are cut off one by one, as Split would find them, with
	// no slice made: this runs for every request audited.
	rest := strings.Trim(apisPath(path), "/")
	first, rest, _ := strings.Cut(rest, "/")
	skip := 0
	switch first {
	case "api":
	case "apis":
		skip = 1 // the group
	default:
		return ""
	}
	for range skip {
		var ok bool
		if _, rest, ok = strings.Cut(rest, "/"); !ok {
			return ""
		}
	}
	v, _, _ := strings.Cut(rest, "/")
	return v
}

// writeStatus answers with a Kubernetes Status object.
func writeStatus(w http.ResponseWriter, code int, reason, msg string) {
	if rec, ok := w.(*recorder); ok {
		rec.reason, rec.message = reason, msg
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(map[string]any{"kind": "Status", "apiVersion": "v1", "metadata": map[string]any{},
		"status": "Failure", "message": msg, "reason": reason, "code": code})
}

// revealsSecrets reports whether a list or watch asks for secret values in
// the clear (?values=true).
func revealsSecrets(r *http.Request, a rbac.Attributes) bool {
	return a.ResourceRequest && (a.Verb == "list" || a.Verb == "watch") && strings.Contains(r.URL.RawQuery, "values") &&
		r.URL.Query().Get("values") == "true"
}
