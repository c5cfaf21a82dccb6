package cairn

import (
	"errors"
	"fmt"
	"strings"
)

// Code classifies an error in the one vocabulary every façade maps once:
// HTTP Status reasons, GraphQL error texts, CLI exit codes.
type Code string

const (
	CodeNotFound      Code = "NotFound"
	CodeAlreadyExists Code = "AlreadyExists"
	CodeConflict      Code = "Conflict"
	CodeLocked        Code = "Locked"
	CodeUsedBy        Code = "UsedBy"
	CodeInvalid       Code = "Invalid"
	CodeUnavailable   Code = "Unavailable"
	// CodeForbidden: the caller may not do this (an authorization refusal
	// the hub itself makes, such as granting rights the caller lacks).
	CodeForbidden Code = "Forbidden"
	// CodeGone: a change-log position older than what the store retains.
	CodeGone     Code = "Gone"
	CodeInternal Code = "Internal"
)

// Cause is one reason an input is invalid: a slash-separated field path
// rooted at what was checked (e.g. "spec/value/url", "context") and a message.
type Cause struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// String renders the cause as "<field> <message>", the form clients match.
func (c Cause) String() string {
	if c.Field == "" {
		return c.Message
	}
	return c.Field + " " + c.Message
}

// DottedPath spells a cause's field as the Kubernetes API does
// (spec.value.ports[0].name) where the hub's validator writes a JSON
// pointer path (spec/value/ports/0/name); a dotted path is returned as it
// is. The REST API and the CLI print every field this way, whichever wrote
// it.
func DottedPath(p string) string {
	if !strings.Contains(p, "/") {
		return p
	}
	var b strings.Builder
	for s := range strings.SplitSeq(p, "/") {
		switch {
		case s == "":
		case isIndex(s):
			b.WriteString("[" + s + "]")
		default:
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(s)
		}
	}
	return b.String()
}

func isIndex(s string) bool {
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return s != ""
}

// Error is a classified error. IDs names the instances concerned (missing,
// locked, or users blocking a delete); Causes lists validation failures.
type Error struct {
	Code Code
	// Subject names what the error is about within a batch (e.g.
	// `TypeInstance "db-config"`); Msg stays the bare message clients match.
	Subject string
	Msg     string
	IDs     []string
	Causes  []Cause
	Err     error
}

func (e *Error) Error() string {
	msg := e.Msg
	if msg == "" && e.Err != nil {
		msg = e.Err.Error()
	}
	if e.Subject != "" {
		return e.Subject + ": " + msg
	}
	return msg
}

// Unwrap returns the wrapped error: a cause whose text is already part of
// Msg, or a marker such as ErrBackendRefused.
func (e *Error) Unwrap() error { return e.Err }

// Errorf returns an *Error with the given code and formatted message. A %w
// verb wraps as fmt.Errorf does, so errors.Is and errors.As see through it.
func Errorf(code Code, format string, args ...any) *Error {
	err := fmt.Errorf(format, args...)
	return &Error{Code: code, Msg: err.Error(), Err: errors.Unwrap(err)}
}

// ErrBackendRefused is the Err of an *Error by which a storage backend's rules
// refuse a write before the backend is called: a value it does not accept, a
// context it does not allow or that breaks its context schema, or a backend
// whose own value breaks the storage schema. Nothing was stored. Façades
// test for it (errors.Is) to word such refusals as the hub they stand in
// for does.
var ErrBackendRefused = errors.New("refused by the storage backend's rules")

// ErrNoAnswer marks a call to a storage backend that failed without an
// answer from it (a timeout, a lost or refused connection): what it asked
// may or may not have happened. Drivers wrap it (errors.Is) so that the
// hub keeps such a write in its intent journal for recovery instead of
// taking it as not done.
var ErrNoAnswer = errors.New("no answer from the storage backend")

// ErrorCode returns the code of the first *Error in err's chain (or in any
// branch of an errors.Join), CodeInternal when there is none, "" for nil.
func ErrorCode(err error) Code {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeInternal
}

// HasCode reports whether err is classified with code.
func HasCode(err error, code Code) bool { return ErrorCode(err) == code }

// Causes collects the causes of every *Error in err's tree, in order.
func Causes(err error) []Cause {
	var out []Cause
	walk(err, func(e *Error) { out = append(out, e.Causes...) })
	return out
}

// Errors lists every *Error in err's tree, depth first, so a façade can
// render each one (a batch may fail for several reasons at once).
func Errors(err error) []*Error {
	var out []*Error
	walk(err, func(e *Error) { out = append(out, e) })
	return out
}

func walk(err error, fn func(*Error)) {
	if err == nil {
		return
	}
	if e, ok := err.(*Error); ok {
		fn(e)
		return
	}
	switch u := err.(type) {
	case interface{ Unwrap() []error }:
		for _, x := range u.Unwrap() {
			walk(x, fn)
		}
	case interface{ Unwrap() error }:
		walk(u.Unwrap(), fn)
	}
}

// QuoteIDs renders ids as "a", "b" — the form the hub's messages use.
func QuoteIDs(ids []string) string {
	q := make([]string, len(ids))
	for i, id := range ids {
		q[i] = `"` + id + `"`
	}
	return strings.Join(q, ", ")
}
