package hub

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/auth/rbac"
	"github.com/cairn-dev/cairn/schema"
)

// checkReadBack refuses a value an external backend answered for inst that
// does not validate against the instance's Type. Secrets are redacted by the
// paths the schema marks, so a value of another shape (a secret moved under
// a field the schema does not mark, a scalar where a marked object belongs)
// would show them to a viewer: such a value is not served at all. The error
// names the instance, the backend and the first violation, never the value;
// a violation under a secret field is named by that field alone.
func (h *Hub) checkReadBack(ctx context.Context, backendID string, inst cairn.Instance, rv int, v json.RawMessage) error {
	if v == nil {
		return nil
	}
	kt, err := h.createType(ctx, inst.TypeRef)
	if err != nil {
		return err
	}
	if kt == nil || kt.s == nil {
		return nil // unregistered, or no schema: nothing is marked secret
	}
	causes := kt.s.Validate("spec/value", v)
	if len(causes) == 0 {
		return nil
	}
	// Refused by the Type as kept: confirm on the Type as stored (another
	// replica may have changed it), as checkKeptValue does.
	if kt, err = h.readCreateType(ctx, inst.TypeRef); err != nil {
		return err
	}
	if kt == nil || kt.s == nil {
		return nil
	}
	if causes = kt.s.Validate("spec/value", v); len(causes) == 0 {
		return nil
	}
	first := withinSecrets(kt.s, v, causes[0])
	first.Field = cairn.BoundText(first.Field, 256)
	first.Message = cairn.BoundText(first.Message, 256)
	more := ""
	if n := len(causes) - 1; n > 0 {
		more = fmt.Sprintf(" (and %d more)", n)
	}
	const why = "the value is not served (it could show secrets under fields the Type does not mark)"
	if !h.mayGetBackend(ctx, backendID) {
		ref := uuid.NewString()
		h.log.WarnContext(ctx, "a storage backend answered a value that does not match its Type",
			"ref", ref, "backend", backendID, "instance", inst.ID, "resourceVersion", rv, "field", first.Field, "violation", first.Message)
		return &cairn.Error{Code: cairn.CodeInternal, Causes: []cairn.Cause{first},
			Msg: fmt.Sprintf("the storage backend of TypeInstance %q answered a value for version %d that does not match its Type %s: %s%s; %s: an administrator finds the backend in the server log under reference %s",
				inst.ID, rv, inst.TypeRef, first, more, why, ref)}
	}
	return &cairn.Error{Code: cairn.CodeInternal, IDs: []string{backendID}, Causes: []cairn.Cause{first},
		Msg: fmt.Sprintf("External backend %q answered a value for TypeInstance %q version %d that does not match its Type %s: %s%s; %s: fix the value in the backend, or update the instance",
			backendID, inst.ID, rv, inst.TypeRef, first, more, why)}
}

// withinSecrets returns c, or, when c is about a part of v the schema marks
// secret, c naming that secret field alone: a path below it could spell
// out a secret's keys.
func withinSecrets(s *schema.Schema, v json.RawMessage, c cairn.Cause) cairn.Cause {
	_, secret := s.Redact("spec/value", v, SecretMarker)
	for _, f := range secret {
		if c.Field == f || strings.HasPrefix(c.Field, f+"/") {
			return cairn.Cause{Field: f, Message: "is secret and does not match its schema"}
		}
	}
	return c
}

// externalErr names the backend in an error from its client, keeping the
// client's code (not found, locked, ...) and defaulting to Unavailable.
// A caller who may not get the backend (REST's backends.hub.cairn.dev)
// gets none of the backend's own words, which may hold anything it chose
// (another tenant's data, its address): a message naming the operation and
// a reference, under which the server logs the full text.
func (h *Hub) externalErr(ctx context.Context, id, op string, err error) *cairn.Error {
	return h.withheld(ctx, externalErr(id, op, err), id, op)
}

// withheld returns e, or for a caller who may not get backend id, an error
// of the same code that tells nothing of the backend (withheldCause keeps
// errors.Is working for the hub's own sentinels), the full text logged
// under a reference the message gives.
func (h *Hub) withheld(ctx context.Context, e *cairn.Error, id, op string) *cairn.Error {
	if h.mayGetBackend(ctx, id) {
		return e
	}
	ref := uuid.NewString()
	h.log.WarnContext(ctx, "storage backend error withheld from a caller who may not get the backend",
		"ref", ref, "backend", id, "code", string(e.Code), "err", cairn.BoundText(e.Msg, 4096))
	return &cairn.Error{Code: e.Code, Err: withheldCause{e},
		Msg: fmt.Sprintf("the storage backend of this instance failed to %s (%s); what it answered is shown only to users who may get the backend: an administrator finds it in the server log under reference %s", op, e.Code, ref)}
}

// withheldCause stands for a backend's error in one withheld from the
// caller: errors.Is sees the sentinels it carries (cairn.ErrNoAnswer, ...),
// errors.As and the error's text nothing of it.
type withheldCause struct{ e error }

func (w withheldCause) Error() string        { return "withheld" }
func (w withheldCause) Is(target error) bool { return errors.Is(w.e, target) }

type withholdKey struct{}

// WithholdBackendWords marks ctx as a caller that keeps the errors it gets
// where others read them (a controller writing an installation's status,
// which whoever may get the installation reads): the hub answers it as a
// caller who may not get the backend, the backend's words and url logged
// under a reference the error gives, its code kept.
func WithholdBackendWords(ctx context.Context) context.Context {
	return context.WithValue(ctx, withholdKey{}, true)
}

// mayGetBackend reports whether the caller of ctx may get backend id, as
// REST serves backends.hub.cairn.dev: see its url, settings and its own
// words. In-process callers may.
func (h *Hub) mayGetBackend(ctx context.Context, id string) bool {
	if ctx.Value(withholdKey{}) != nil {
		return false
	}
	if _, ok := cairn.UserFrom(ctx); !ok {
		return true
	}
	return h.Authorize(ctx, rbac.Attributes{Verb: "get", ResourceRequest: true, APIGroup: rbac.HubGroup, Resource: "backends", Name: id}).Allowed
}
