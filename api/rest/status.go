package rest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/cairn-dev/cairn"
)

// Status is the Kubernetes Status object (meta/v1), the body of every error.
type Status struct {
	Kind       string         `json:"kind"`
	APIVersion string         `json:"apiVersion"`
	Metadata   map[string]any `json:"metadata"`
	Status     string         `json:"status"`
	Message    string         `json:"message,omitempty"`
	Reason     string         `json:"reason,omitempty"`
	Details    *StatusDetails `json:"details,omitempty"`
	Code       int            `json:"code"`
}

// StatusDetails names the object and the causes.
type StatusDetails struct {
	Name   string        `json:"name,omitempty"`
	Group  string        `json:"group,omitempty"`
	Kind   string        `json:"kind,omitempty"`
	UID    string        `json:"uid,omitempty"`
	Causes []StatusCause `json:"causes,omitempty"`
	// RetryAfterSeconds: when to try again (a resourceVersion not reached yet).
	RetryAfterSeconds int32 `json:"retryAfterSeconds,omitempty"`
}

// StatusCause is one reason of a failure, e.g. one schema violation.
type StatusCause struct {
	Type    string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
	Field   string `json:"field,omitempty"`
}

func newStatus(code int, reason, msg string) Status {
	return Status{Kind: "Status", APIVersion: "v1", Metadata: map[string]any{}, Status: "Failure",
		Code: code, Reason: reason, Message: msg}
}

func notFoundStatus(msg string) Status { return newStatus(http.StatusNotFound, "NotFound", msg) }

func badRequest(format string, args ...any) Status {
	return newStatus(http.StatusBadRequest, "BadRequest", fmt.Sprintf(format, args...))
}

func methodNotAllowed(method string) Status {
	return newStatus(http.StatusMethodNotAllowed, "MethodNotAllowed", fmt.Sprintf("the server does not allow this method on the requested resource: %s", method))
}

func writeStatus(w http.ResponseWriter, st Status) {
	if st.Code >= 500 {
		// The server's log line of the request says why it failed.
		if rec := findRecorder(w); rec != nil {
			rec.err = st.Message
		}
	}
	writeJSON(w, st.Code, st)
}

// findRecorder finds ServeHTTP's statusRecorder under w's wrappers.
func findRecorder(w http.ResponseWriter) *statusRecorder {
	for {
		switch x := w.(type) {
		case *statusRecorder:
			return x
		case interface{ Unwrap() http.ResponseWriter }:
			w = x.Unwrap()
		default:
			return nil
		}
	}
}

// target names the object an error is about, for Status.details.
type target struct {
	group, kind, name string
	// served is the plural of a kind a Type serves ("" for the hub's
	// own kinds, whose messages name instances by id as the CLI prints them).
	served string
}

// errorStatus maps a hub error to a Status, once for the whole façade:
// NotFound 404, AlreadyExists 409, Conflict 409, Locked and UsedBy 409
// Conflict (the object is held by a lock owner or by its users),
// Invalid 422 with one cause per violation, Gone 410, Unavailable 503;
// the request's deadline passed (?timeout=), 504.
func errorStatus(err error, t target) Status {
	if cairn.HasCode(err, cairn.CodeInternal) && errors.Is(err, context.DeadlineExceeded) {
		return timeoutStatus()
	}
	var code int
	var reason string
	switch cairn.ErrorCode(err) {
	case cairn.CodeNotFound:
		code, reason = http.StatusNotFound, "NotFound"
	case cairn.CodeAlreadyExists:
		code, reason = http.StatusConflict, "AlreadyExists"
	case cairn.CodeConflict, cairn.CodeLocked, cairn.CodeUsedBy:
		code, reason = http.StatusConflict, "Conflict"
	case cairn.CodeInvalid:
		code, reason = http.StatusUnprocessableEntity, "Invalid"
	case cairn.CodeGone:
		code, reason = http.StatusGone, "Expired"
	case cairn.CodeUnavailable:
		code, reason = http.StatusServiceUnavailable, "ServiceUnavailable"
	case cairn.CodeForbidden:
		code, reason = http.StatusForbidden, "Forbidden"
	default:
		code, reason = http.StatusInternalServerError, "InternalError"
	}
	st := newStatus(code, reason, err.Error())
	st.Details = &StatusDetails{Name: t.name, Group: t.group, Kind: t.kind}
	for _, e := range cairn.Errors(err) {
		switch e.Code {
		case cairn.CodeInvalid:
			for _, c := range e.Causes {
				st.Details.Causes = append(st.Details.Causes, StatusCause{Type: "FieldValueInvalid", Message: c.Message, Field: fieldPath(c.Field, t.served != "")})
			}
		case cairn.CodeLocked:
			st.Details.Causes = append(st.Details.Causes, StatusCause{Type: "Locked", Message: e.Msg})
		case cairn.CodeUsedBy:
			if len(e.IDs) == 0 {
				// Used by something other than named instances (a Type by
				// its instances): still a UsedBy for clients to map back.
				st.Details.Causes = append(st.Details.Causes, StatusCause{Type: "UsedBy", Message: e.Msg})
			}
			for _, id := range e.IDs {
				st.Details.Causes = append(st.Details.Causes, StatusCause{Type: "UsedBy", Message: "used by TypeInstance " + id, Field: "status.usedBy"})
			}
		}
	}
	if cairn.ErrorCode(err) == cairn.CodeLocked && t.served != "" && t.name != "" {
		// The hub's message names instances by id in Capact's words
		// ("TypeInstances with IDs ... are locked by different owner"); a
		// kubectl user wrote flags/NAME. The cause keeps the hub's message.
		st.Message = fmt.Sprintf("Operation cannot be fulfilled on %s.%s %q: it is locked by another owner; its owner writes with ?lockOwner=OWNER (cairn --lock-owner OWNER)",
			t.served, t.group, t.name)
	}
	if code == http.StatusUnprocessableEntity && t.kind != "" {
		st.Message = fmt.Sprintf("%s %q is invalid: %s", t.kind, t.name, invalidDetail(err, t))
	}
	return st
}

// invalidDetail is what follows `Kind "name" is invalid: `. A request on
// one named object gets the hub's messages without the subject and the
// operation they are wrapped in ("failed to update TypeInstances:
// TypeInstance "<id>": ..."), which would name the object a second time,
// and with the causes' fields spelled as in Status.details.causes.
func invalidDetail(err error, t target) string {
	errs := cairn.Errors(err)
	if t.name == "" || len(errs) == 0 {
		return err.Error()
	}
	parts := make([]string, 0, len(errs))
	for _, e := range errs {
		if e.Code != cairn.CodeInvalid {
			parts = append(parts, e.Error())
			continue
		}
		msg := e.Msg
		if msg == "" && e.Err != nil {
			msg = e.Err.Error()
		}
		if len(e.Causes) > 0 {
			hubs := make([]string, len(e.Causes))
			ours := make([]string, len(e.Causes))
			for i, c := range e.Causes {
				hubs[i] = c.String()
				ours[i] = cairn.Cause{Field: fieldPath(c.Field, t.served != ""), Message: c.Message}.String()
			}
			if list := strings.Join(hubs, ", "); strings.HasSuffix(msg, list) {
				msg = strings.TrimSuffix(msg, list) + strings.Join(ours, ", ")
			}
		}
		parts = append(parts, msg)
	}
	return strings.Join(parts, "; ")
}

// timeoutStatus is the answer to a request whose deadline (?timeout=)
// passed before it was done: the API server's 504, word for word.
func timeoutStatus() Status {
	st := newStatus(http.StatusGatewayTimeout, "Timeout", "Timeout: request did not complete within requested timeout - "+context.DeadlineExceeded.Error())
	st.Details = &StatusDetails{}
	return st
}

// withTimeout gives r the deadline its ?timeout= asks for (a Go duration;
// 0 or none: no deadline), as the Kubernetes API server does for every
// request but a watch (whose own is timeoutSeconds). A value that is not
// a duration is refused.
func withTimeout(r *http.Request) (*http.Request, context.CancelFunc, *Status) {
	if !strings.Contains(r.URL.RawQuery, "timeout=") || isWatch(r) {
		return r, func() {}, nil
	}
	v := query(r).Get("timeout")
	if v == "" {
		return r, func() {}, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		st := badRequest("invalid timeout specified in the request URL - %s", err.Error())
		return r, func() {}, &st
	}
	if d <= 0 {
		return r, func() {}, nil
	}
	ctx, cancel := context.WithTimeout(r.Context(), d)
	return r.WithContext(ctx), cancel, nil
}

// fieldPath turns the hub's slash paths ("spec/value/port") into the dotted
// paths Kubernetes clients show: "spec.port" for an object of a served kind,
// whose spec is the value (valueIsSpec), and "spec.value.port" for a
// TypeInstance, whose value is spec.value.
func fieldPath(p string, valueIsSpec bool) string {
	if valueIsSpec {
		p = strings.Replace(p, "spec/value", "spec", 1)
	}
	return cairn.DottedPath(p)
}

// errStatus wraps a Status as an error so handlers can return one.
type errStatus struct{ st Status }

func (e errStatus) Error() string { return e.st.Message }

func statusOf(err error, t target) Status {
	var es errStatus
	if errors.As(err, &es) {
		return es.st
	}
	return errorStatus(err, t)
}
