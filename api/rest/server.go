// Package rest serves the hub over HTTP following the Kubernetes API
// conventions closely enough that kubectl and client-go work against it:
// discovery, typed resources under /apis/<group>/<version>, lists with label
// and field selectors and paging, optimistic concurrency, merge and JSON
// patches, watch, Status errors and OpenAPI v3.
//
// It translates wire formats to hub calls and hub errors to Status objects;
// every rule lives in the hub.
package rest

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/controller/install"
	"github.com/cairn-dev/cairn/hub"
)

// Version is what /version reports; set by main from build information.
type Version struct {
	Major      string `json:"major"`
	Minor      string `json:"minor"`
	GitVersion string `json:"gitVersion"`
	GoVersion  string `json:"goVersion"`
	Platform   string `json:"platform"`
}

// Config configures a Server.
type Config struct {
	Hub     *hub.Hub
	Logger  *slog.Logger
	Version Version
	// Metrics records request counts and latencies; nil records nothing.
	Metrics Metrics
	// MaxBodyBytes caps request bodies. Default 8 MiB.
	MaxBodyBytes int64
	// Installs serves plans and installs; default an install.Service on
	// Hub.
	Installs Installs
	// AccessReviews says that the access guard in front of this server
	// answers the access reviews (access.Guard.Handle): discovery lists
	// them, create-only, in authorization.k8s.io/v1 and
	// authentication.k8s.io/v1, so kubectl maps their kinds.
	AccessReviews bool
}

// Metrics receives one observation per request.
type Metrics interface {
	Observe(route, method string, status int, d time.Duration)
}

// Server is the REST façade, an http.Handler.
type Server struct {
	hub     *hub.Hub
	log     *slog.Logger
	version Version
	metrics Metrics
	maxBody int64
	cache   resourceCache
	// installs serves plans and installs (installs.go).
	installs Installs
	// encoded caches objects' JSON; lists and gets keep whole bodies of
	// lists and of single objects by the store's position (encoded.go).
	encoded encodedCache
	// events keeps watch events' encoded lines for the watches of a
	// collection to share (watchevents.go).
	events watchEvents
	lists  listCache
	gets   listCache
	// rows keeps Table rows (tablerows.go).
	rows tableRows
	// patching queues the PATCHes of one object (patchqueue.go).
	patching patchQueue
	// reviews: list the access reviews in discovery (Config.AccessReviews).
	reviews bool

	stopOnce sync.Once
	stopping chan struct{}
}

// StopWatches ends every watch stream, now and from now on; in-flight
// requests of other kinds are not affected. Call it when shutting down
// (http.Server.RegisterOnShutdown), since a watch never ends by itself.
func (s *Server) StopWatches() {
	s.stopOnce.Do(func() { close(s.stopping) })
}

// New returns a Server.
func New(cfg Config) *Server {
	s := &Server{hub: cfg.Hub, log: cfg.Logger, version: cfg.Version, metrics: cfg.Metrics, maxBody: cfg.MaxBodyBytes,
		reviews: cfg.AccessReviews, stopping: make(chan struct{}), gets: listCache{maxBodies: 16384, maxBytes: 32 << 20}}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.maxBody <= 0 {
		s.maxBody = 8 << 20
	}
	s.installs = cfg.Installs
	if s.installs == nil {
		s.installs = &install.Service{Hub: cfg.Hub, Log: s.log}
	}
	return s
}

// ServeHTTP routes a request. Routing is by path segments rather than
// http.ServeMux patterns because resource paths are only known from the
// registered Types.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
	route := s.route(rec, r)
	if s.metrics != nil {
		s.metrics.Observe(route, r.Method, rec.status, time.Since(start))
	}
	// The audit log records every request; the server log has the
	// failures, and every request at debug level. A line per request at
	// info cost a tenth of a read's time under load.
	level := slog.LevelDebug
	if rec.status >= 500 {
		level = slog.LevelError
	}
	if s.log.Enabled(r.Context(), level) {
		// Asked first: the attributes cost allocations even when dropped.
		attrs := []any{"method", r.Method, "path", r.URL.Path, "route", route, "status", rec.status, "duration", time.Since(start)}
		if rec.err != "" {
			attrs = append(attrs, "err", rec.err)
		}
		s.log.Log(r.Context(), level, "request", attrs...)
	}
}

// route dispatches and returns the route template for metrics.
func (s *Server) route(w http.ResponseWriter, r *http.Request) string {
	if _, guarded := cairn.UserFrom(r.Context()); !guarded {
		// Behind the guard the context already names the actor, and the
		// impersonator with it (cairn.WithUser).
		r = r.WithContext(cairn.WithActor(r.Context(), actorOf(r)))
	}
	r, cancel, bad := withTimeout(r)
	defer cancel()
	if bad != nil {
		writeStatus(w, *bad)
		return "invalid"
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		dry, err := dryRun(r)
		if err != nil {
			writeStatus(w, err.st)
			return "invalid"
		}
		if dry {
			r = r.WithContext(cairn.WithDryRun(r.Context()))
		}
		r = r.WithContext(withAnswerHeader(r.Context(), w.Header()))
	}
	path := strings.Trim(r.URL.Path, "/")
	seg := strings.Split(path, "/")
	if path == "" {
		seg = nil
	}
	if i := slices.Index(seg, ""); i >= 0 {
		writeStatus(w, emptySegment(r.URL.Path, seg, i))
		return "invalid"
	}
	switch {
	case path == "version":
		s.onlyGET(w, r, func() { writeJSON(w, http.StatusOK, s.version) })
		return "/version"
	case len(seg) >= 1 && seg[0] == "api":
		return s.routeCore(w, r, seg[1:])
	case path == "openapi/v2":
		s.onlyGET(w, r, func() { s.openAPIV2(w, r) })
		return "/openapi/v2"
	case path == "openapi/v3":
		s.onlyGET(w, r, func() { s.openAPIIndex(w, r) })
		return "/openapi/v3"
	case len(seg) >= 3 && seg[0] == "openapi" && seg[1] == "v3" && seg[2] == "apis":
		s.onlyGET(w, r, func() { s.openAPIGroupVersion(w, r, seg[3:]) })
		return "/openapi/v3/apis/{group}/{version}"
	case len(seg) >= 1 && seg[0] == "apis":
		return s.routeAPIs(w, r, seg[1:])
	case len(seg) >= 1 && "/"+seg[0] == CupPrefix:
		return s.routeCup(w, r, seg[1:])
	}
	writeStatus(w, notFoundStatus("the server could not find the requested resource"))
	return "unknown"
}

// emptySegment refuses a path with an empty segment (seg[i]), such as a
// namespace left empty by a client that joined an unset variable into it.
// Read as it stands, /namespaces//flags would list every namespace, and
// cleaned (ServeMux redirects to the cleaned path) it names another
// resource; neither is what was asked.
func emptySegment(path string, seg []string, i int) Status {
	if i > 0 && seg[i-1] == "namespaces" {
		return badRequest("the namespace is empty in the path %q: name one (namespaces/default/...), or leave namespaces/ out to list across namespaces", path)
	}
	return badRequest("the path %q has an empty segment (//): every segment of an API path must be named", path)
}

// query returns the request's query parameters, or nil (every lookup
// empty) when it has none: most writes have none, and r.URL.Query builds
// a map at every call, of which a create made three. Read only.
func query(r *http.Request) url.Values {
	if r.URL.RawQuery == "" {
		return nil
	}
	return r.URL.Query()
}

// dryRun reads the dryRun query parameter of a write: "All" (repeatable)
// makes the hub run the write without changing anything, as Kubernetes
// does; any other value is refused as the API server refuses it.
func dryRun(r *http.Request) (bool, *errStatus) {
	vals, ok := query(r)["dryRun"]
	if !ok {
		return false, nil
	}
	for _, v := range vals {
		if v != "All" {
			st := newStatus(http.StatusUnprocessableEntity, "Invalid",
				fmt.Sprintf("the request options are invalid: dryRun: Unsupported value: %q: supported values: \"All\"", v))
			st.Details = &StatusDetails{Causes: []StatusCause{{Type: "FieldValueNotSupported", Field: "dryRun",
				Message: fmt.Sprintf("Unsupported value: %q: supported values: \"All\"", v)}}}
			return false, &errStatus{st}
		}
	}
	return len(vals) > 0, nil
}

func (s *Server) onlyGET(w http.ResponseWriter, r *http.Request, fn func()) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		writeStatus(w, methodNotAllowed(r.Method))
		return
	}
	fn()
}

// actorOf returns the caller's identity: the authenticated user when the
// request passed the access guard (which has applied impersonation, if the
// caller may), else what an unguarded in-process server was told by
// Impersonate-User (kubectl --as).
func actorOf(r *http.Request) string {
	if u, ok := cairn.UserFrom(r.Context()); ok {
		return u.Name
	}
	return r.Header.Get("Impersonate-User")
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	_ = enc.Encode(v)
}

// statusRecorder remembers the status code for logs and metrics, and
// passes Flush through for watch streams.
type statusRecorder struct {
	http.ResponseWriter
	status  int
	written bool
	err     string // the message of a 5xx answer, for the log
}

func (r *statusRecorder) WriteHeader(code int) {
	if !r.written {
		r.status, r.written = code, true
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	r.written = true
	return r.ResponseWriter.Write(b)
}

func (r *statusRecorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }
