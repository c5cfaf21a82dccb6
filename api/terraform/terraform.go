// Package terraform serves the HTTP state backend protocol OpenTofu and
// Terraform speak (backend "http"), translating it to hub calls:
//
//	GET    /terraform/v1/namespaces/{ns}/states/{name}          the state (404 when none)
//	POST   /terraform/v1/namespaces/{ns}/states/{name}[?ID=..]  a new state (ID: the lock held)
//	DELETE /terraform/v1/namespaces/{ns}/states/{name}          delete it and its outputs
//	LOCK   /terraform/v1/namespaces/{ns}/states/{name}          lock (body: lock info); 423 + holder's info when held
//	UNLOCK /terraform/v1/namespaces/{ns}/states/{name}          unlock (body: lock info; empty: whatever lock holds it)
//
// and, for cairn's own clients:
//
//	GET /terraform/v1/namespaces/{ns}/states/{name}/history           the state's writes
//	GET /terraform/v1/namespaces/{ns}/states/{name}/diff?from=N&to=M  resources and outputs changed
//
// The rules (lineage and serial, the lock, outputs as instances) are the
// hub's (hub/terraform.go).
package terraform

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/hub"
	"github.com/cairn-dev/cairn/tfstate"
)

// Prefix is where the protocol is served.
const Prefix = "/terraform/v1/"

// Hub is what the façade needs of the hub.
type Hub interface {
	TerraformState(ctx context.Context, ns, name string) (json.RawMessage, cairn.Instance, error)
	PutTerraformState(ctx context.Context, ns, name, lockID string, doc json.RawMessage) (cairn.Instance, error)
	DeleteTerraformState(ctx context.Context, ns, name, lockID string) error
	LockTerraformState(ctx context.Context, ns, name string, info tfstate.LockInfo) error
	UnlockTerraformState(ctx context.Context, ns, name, lockID string) error
	TerraformStateHistory(ctx context.Context, ns, name string) ([]hub.TerraformStateVersion, error)
	TerraformStateDiff(ctx context.Context, ns, name string, from, to int) (tfstate.Diff, error)
}

// Config configures a Handler.
type Config struct {
	Hub Hub
	// Logger receives one line per request; state documents and lock info
	// are never logged (outputs may be sensitive).
	Logger *slog.Logger
	// MaxStateBytes bounds a posted state. Default 64 MiB.
	MaxStateBytes int64
}

// Handler serves Prefix.
type Handler struct {
	hub Hub
	log *slog.Logger
	max int64
}

// New returns the protocol's handler.
func New(cfg Config) *Handler {
	h := &Handler{hub: cfg.Hub, log: cfg.Logger, max: cfg.MaxStateBytes}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	if h.max <= 0 {
		h.max = 64 << 20
	}
	return h
}

// ServeHTTP routes a request of the protocol.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// Behind the access guard the authenticated user is the identity (its
	// password is a token). Unguarded, basic auth's user name is taken as
	// the caller's identity (createdBy of each state version).
	// (cairn.WithUser has set the actor, and the impersonator with it.)
	if _, guarded := cairn.UserFrom(r.Context()); !guarded {
		if user, _, ok := r.BasicAuth(); ok && user != "" {
			r = r.WithContext(cairn.WithActor(r.Context(), user))
		} else if u := r.Header.Get("Impersonate-User"); u != "" {
			r = r.WithContext(cairn.WithActor(r.Context(), u))
		}
	}
	// A mistyped address is 400, never 404: tofu takes a GET answered 404
	// as "no state yet" and would plan from an empty state.
	rest, ok := strings.CutPrefix(r.URL.Path, Prefix)
	seg := strings.Split(strings.Trim(rest, "/"), "/")
	if !ok || len(seg) < 4 || seg[0] != "namespaces" || seg[2] != "states" || seg[1] == "" || seg[3] == "" {
		writeError(w, http.StatusBadRequest, "not a state address: use "+Prefix+"namespaces/<namespace>/states/<name>")
		return
	}
	ns, name := seg[1], seg[3]
	if len(seg) > 5 || len(seg) == 5 && seg[4] != "history" && seg[4] != "diff" {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("%q is not a state name: a state name is one path segment (lowercase alphanumerics, '-' or '.', as %q); after it only /history and /diff are served",
			strings.Join(seg[3:], "/"), strings.Join(seg[3:], "-")))
		return
	}
	if len(seg) == 5 {
		if r.Method != http.MethodGet {
			writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("method %s is not allowed here: use GET", r.Method))
			return
		}
		if seg[4] == "history" {
			h.history(w, r, ns, name)
		} else {
			h.diff(w, r, ns, name)
		}
		return
	}
	rec := &recorder{ResponseWriter: w, status: http.StatusOK}
	status := h.serveState(rec, r, ns, name)
	level := slog.LevelInfo
	if status >= 500 {
		level = slog.LevelError
	}
	attrs := []any{"method", r.Method, "namespace", ns, "state", name, "status", status, "actor", cairn.Actor(r.Context())}
	if rec.msg != "" {
		// The hub's error text: names what failed, never a value.
		attrs = append(attrs, "err", rec.msg)
	}
	h.log.Log(r.Context(), level, "terraform state request", attrs...)
}

// recorder keeps the plain-text error message a response carried, for the log.
type recorder struct {
	http.ResponseWriter
	status int
	msg    string
}

func (h *Handler) serveState(w http.ResponseWriter, r *http.Request, ns, name string) int {
	ctx := r.Context()
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		doc, _, err := h.hub.TerraformState(ctx, ns, name)
		if cairn.HasCode(err, cairn.CodeNotFound) {
			// The protocol's "no state yet": tofu starts from an empty one.
			w.WriteHeader(http.StatusNotFound)
			return http.StatusNotFound
		}
		if err != nil {
			return writeHubError(w, err)
		}
		sum := md5.Sum(doc)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-MD5", base64.StdEncoding.EncodeToString(sum[:]))
		w.Header().Set("Content-Length", strconv.Itoa(len(doc)))
		w.WriteHeader(http.StatusOK)
		if r.Method == http.MethodGet {
			_, _ = w.Write(doc)
		}
		return http.StatusOK
	case http.MethodPost, http.MethodPut:
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.max))
		if tooLarge := (*http.MaxBytesError)(nil); errors.As(err, &tooLarge) {
			return writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("state %q is larger than %d bytes, the most this server takes; nothing was written",
				ns+"/"+name, tooLarge.Limit))
		}
		if err != nil {
			return writeError(w, http.StatusBadRequest, fmt.Sprintf("read the state: %v", err))
		}
		if want := r.Header.Get("Content-MD5"); want != "" {
			sum := md5.Sum(body)
			if got := base64.StdEncoding.EncodeToString(sum[:]); got != want {
				return writeError(w, http.StatusBadRequest, fmt.Sprintf("the state's Content-MD5 is %s but the body's MD5 is %s: the upload was damaged", want, got))
			}
		}
		if _, err := h.hub.PutTerraformState(ctx, ns, name, r.URL.Query().Get("ID"), body); err != nil {
			return writeHubError(w, err)
		}
		w.WriteHeader(http.StatusOK)
		return http.StatusOK
	case http.MethodDelete:
		if err := h.hub.DeleteTerraformState(ctx, ns, name, r.URL.Query().Get("ID")); err != nil {
			return writeHubError(w, err)
		}
		w.WriteHeader(http.StatusOK)
		return http.StatusOK
	case "LOCK":
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			return writeError(w, http.StatusBadRequest, fmt.Sprintf("read the lock info: %v", err))
		}
		info, err := tfstate.ParseLockInfo(body)
		if err != nil {
			return writeError(w, http.StatusBadRequest, err.Error())
		}
		if err := h.hub.LockTerraformState(ctx, ns, name, info); err != nil {
			return writeHubError(w, err)
		}
		w.WriteHeader(http.StatusOK)
		return http.StatusOK
	case "UNLOCK":
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			return writeError(w, http.StatusBadRequest, fmt.Sprintf("read the lock info: %v", err))
		}
		id := ""
		if len(bytes.TrimSpace(body)) > 0 {
			if id, err = tfstate.ParseUnlockID(body); err != nil {
				return writeError(w, http.StatusBadRequest, err.Error())
			}
		}
		// No lock info releases whatever lock holds the state (curl -X
		// UNLOCK); tofu force-unlock sends the ID it was given, checked.
		if err := h.hub.UnlockTerraformState(ctx, ns, name, id); err != nil {
			return writeHubError(w, err)
		}
		w.WriteHeader(http.StatusOK)
		return http.StatusOK
	}
	w.Header().Set("Allow", "GET, HEAD, POST, PUT, DELETE, LOCK, UNLOCK")
	return writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("method %s is not part of the state protocol", r.Method))
}

func (h *Handler) history(w http.ResponseWriter, r *http.Request, ns, name string) {
	list, err := h.hub.TerraformStateHistory(r.Context(), ns, name)
	if err != nil {
		writeHubError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, list)
}

func (h *Handler) diff(w http.ResponseWriter, r *http.Request, ns, name string) {
	q := r.URL.Query()
	from, err1 := strconv.Atoi(q.Get("from"))
	to, err2 := strconv.Atoi(q.Get("to"))
	if err1 != nil || err2 != nil || from < 1 || to < 1 {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("diff needs from and to, resource versions of the state (positive integers); got from=%q to=%q", q.Get("from"), q.Get("to")))
		return
	}
	d, err := h.hub.TerraformStateDiff(r.Context(), ns, name, from, to)
	if err != nil {
		writeHubError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, d)
}

// writeHubError maps a hub error to the protocol: 423 Locked with the
// holder's lock info as the body (tofu prints who holds it), else a status
// code and a plain-text message, which tofu shows.
func writeHubError(w http.ResponseWriter, err error) int {
	if holder, ok := hub.IsTerraformLocked(err); ok {
		writeJSON(w, http.StatusLocked, holder)
		return http.StatusLocked
	}
	code := http.StatusInternalServerError
	switch cairn.ErrorCode(err) {
	case cairn.CodeNotFound:
		code = http.StatusNotFound
	case cairn.CodeConflict, cairn.CodeAlreadyExists, cairn.CodeUsedBy:
		code = http.StatusConflict
	case cairn.CodeLocked:
		code = http.StatusLocked
	case cairn.CodeInvalid:
		code = http.StatusBadRequest
	case cairn.CodeUnavailable:
		code = http.StatusServiceUnavailable
	}
	return writeError(w, code, err.Error())
}

func writeError(w http.ResponseWriter, code int, msg string) int {
	if rec, ok := w.(*recorder); ok {
		rec.msg = msg
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(code)
	_, _ = io.WriteString(w, msg+"\n")
	return code
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
