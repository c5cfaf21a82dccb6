// Package controller is a small SDK for writing cairn WASM controllers: WASI
// (wasip1) modules that decide where and how the resources of a Git storage
// backend live in the repository tree (seed 003, cup's WASM/WASI process
// interface).
//
// An author implements Controller over the repository tree and calls Main
// from main():
//
//	func main() { controller.Main(myController{}) }
//
// and builds with GOOS=wasip1 GOARCH=wasm go build -o ctl.wasm. Main speaks
// the process protocol so the author does not have to:
//
//	get    <kind> <namespace> <name>        -> resource JSON on stdout
//	list   <kind> <namespace> [key=value..] -> JSON array of resources
//	put    <kind> <namespace> <name>        -> {} on stdout (resource JSON on stdin)
//	delete <kind> <namespace> <name>        -> {} on stdout
//
// put's namespace and name, which cup's runtime and cairn's pass, must be
// the resource's; the seed's `put <kind>` without them is taken too.
//
// Exit code 0 is success; 1 an error with {"message": "..."} on stdout
// (plus "code": "Invalid" for errors made with Invalid, a cairn extension);
// 2 not found, also with a message. The resource's group and version come
// from the environment variables CUP_GROUP and CUP_VERSION, because cup's
// argument list carries the kind only. The tree is mounted at "/": read-only
// for get and list, writable for put and delete.
//
// The package uses the standard library only, so that modules stay small
// and build for wasip1 without cgo or network access.
package controller

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// Kind identifies the resource type of a call: cup's kind argument plus
// group and version from the environment.
type Kind struct {
	Group   string
	Version string
	Kind    string
}

// Metadata is the identity of a resource, as read from its metadata.
type Metadata struct {
	Namespace string            `json:"namespace,omitempty"`
	Name      string            `json:"name"`
	Labels    map[string]string `json:"labels,omitempty"`
}

// Resource is a resource given to Put: its metadata parsed for convenience
// and its full JSON, which the controller should store as is.
type Resource struct {
	Metadata Metadata
	Raw      json.RawMessage
}

// Controller is what a module author implements. root is the repository
// tree mounted at "/"; an *os.Root refuses paths that escape it, so a
// namespace or name like "../x" cannot reach outside the tree.
type Controller interface {
	// Get returns the resource, or an error made with NotFound.
	Get(root *os.Root, kind Kind, namespace, name string) (json.RawMessage, error)
	// List returns the resources in namespace ("" for every namespace)
	// whose labels include every pair of labels; MatchLabels helps.
	List(root *os.Root, kind Kind, namespace string, labels map[string]string) ([]json.RawMessage, error)
	// Put creates or replaces the resource.
	Put(root *os.Root, kind Kind, resource Resource) error
	// Delete removes the resource, or returns an error made with NotFound.
	Delete(root *os.Root, kind Kind, namespace, name string) error
}

// Primer is implemented by a Controller that has work to do before its
// first call which every call would otherwise repeat: initialising the
// libraries it uses, filling caches kept per type (encoding/json's, say).
// A host that starts instances ahead of their calls (cairn does, each
// instance serving one call) lets Main run Prime while the instance waits
// for its call, so the call does not pay for it. Prime must not use the
// tree, stdin or stdout (the call has not come yet), should work on
// values of its own, like the ones the calls will carry, and is not run
// under hosts that start a module with its call's arguments (cup).
type Primer interface {
	Prime()
}

// Exit codes of the process protocol.
const (
	ExitOK       = 0
	ExitError    = 1
	ExitNotFound = 2
)

// Environment variables carrying the group and version of the kind.
const (
	EnvGroup   = "CUP_GROUP"
	EnvVersion = "CUP_VERSION"
)

// Error codes an error message may carry (the names of cairn's codes).
const (
	CodeNotFound = "NotFound"
	CodeInvalid  = "Invalid"
)

// Error is an error with a protocol code; NotFound and Invalid make one.
type Error struct {
	Code    string
	Message string
}

func (e *Error) Error() string { return e.Message }

// NotFound returns an error that makes the module exit with code 2.
func NotFound(format string, args ...any) error {
	return &Error{Code: CodeNotFound, Message: fmt.Sprintf(format, args...)}
}

// Invalid returns an error for a request the controller refuses (exit 1,
// reported to cairn's clients as invalid rather than as an internal error).
func Invalid(format string, args ...any) error {
	return &Error{Code: CodeInvalid, Message: fmt.Sprintf(format, args...)}
}

// IsNotFound reports whether err was made with NotFound.
func IsNotFound(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == CodeNotFound
}

// MatchLabels reports whether have includes every pair in want.
func MatchLabels(have, want map[string]string) bool {
	for k, v := range want {
		if got, ok := have[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// ParseMetadata reads the metadata of a resource's JSON.
func ParseMetadata(raw []byte) (Metadata, error) {
	var doc struct {
		Metadata *Metadata `json:"metadata"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		return Metadata{}, Invalid("resource is not a JSON object: %v", err)
	}
	if doc.Metadata == nil {
		return Metadata{}, Invalid("resource has no metadata")
	}
	return *doc.Metadata, nil
}

// Main runs impl against the process's arguments, stdin and stdout with the
// tree at "/", and exits with the protocol's exit code.
func Main(impl Controller) {
	if startedAhead() {
		prime(impl)
	}
	callArgs()
	root, err := os.OpenRoot("/")
	if err != nil {
		writeMessage(os.Stdout, &Error{Message: fmt.Sprintf("open the tree at /: %v", err)})
		os.Exit(ExitError)
	}
	code := Run(impl, root, os.Args, os.Getenv, os.Stdin, os.Stdout)
	root.Close()
	os.Exit(code)
}

// prime does, before the call, what every call does the first time it
// runs in a fresh instance: encoding/json works out how to encode and
// decode each type on its first use, which costs a WASM module more than
// the call's own work. A panic is dropped: priming is an optimisation.
func prime(impl Controller) {
	defer func() { _ = recover() }()
	raw := json.RawMessage(`{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"a","namespace":"b","labels":{"k":"v"}},"spec":{"n":1,"on":true,"list":["x",null]}}`)
	_ = json.Valid(raw)
	_, _ = ParseMetadata(raw)
	_ = succeed(io.Discard, raw)
	_ = succeed(io.Discard, []json.RawMessage{raw})
	_ = succeed(io.Discard, struct{}{})
	_ = fail(io.Discard, Invalid("primed"))
	_ = os.Getenv(EnvGroup) // the first use copies the environment into a map
	if p, ok := impl.(Primer); ok {
		p.Prime()
	}
}

// Run is Main without the process: it serves one call given args (args[0]
// is the program name), getenv, stdin and stdout, and returns the exit code.
// It is exported so that controllers can be tested without a WASM runtime.
func Run(impl Controller, root *os.Root, args []string, getenv func(string) string, stdin io.Reader, stdout io.Writer) (code int) {
	// A panic in the author's code becomes exit 1 with a message: the Go
	// runtime would otherwise exit 2, which the protocol reads as not found.
	defer func() {
		if r := recover(); r != nil {
			code = fail(stdout, fmt.Errorf("controller panicked: %v", r))
		}
	}()
	if len(args) < 3 {
		return fail(stdout, Invalid("usage: %s get|list|put|delete <kind> ...", progName(args)))
	}
	op, kind := args[1], Kind{Group: getenv(EnvGroup), Version: getenv(EnvVersion), Kind: args[2]}
	rest := args[3:]
	switch op {
	case "get":
		if len(rest) != 2 {
			return fail(stdout, Invalid("usage: get <kind> <namespace> <name>"))
		}
		res, err := impl.Get(root, kind, rest[0], rest[1])
		if err != nil {
			return fail(stdout, err)
		}
		return succeed(stdout, res)
	case "list":
		if len(rest) < 1 {
			return fail(stdout, Invalid("usage: list <kind> <namespace> [key=value ...]"))
		}
		labels := map[string]string{}
		for _, pair := range rest[1:] {
			k, v, ok := strings.Cut(pair, "=")
			if !ok || k == "" {
				return fail(stdout, Invalid("label %q is not key=value", pair))
			}
			labels[k] = v
		}
		items, err := impl.List(root, kind, rest[0], labels)
		if err != nil {
			return fail(stdout, err)
		}
		if items == nil {
			items = []json.RawMessage{} // an empty list is [], not null
		}
		return succeed(stdout, items)
	case "put":
		// The seed's protocol passes the kind alone; cup's runtime, and
		// cairn's, the resource's namespace and name too.
		if len(rest) != 0 && len(rest) != 2 {
			return fail(stdout, Invalid("usage: put <kind> [<namespace> <name>] (resource JSON on stdin)"))
		}
		raw, err := io.ReadAll(stdin)
		if err != nil {
			return fail(stdout, fmt.Errorf("read the resource from stdin: %w", err))
		}
		if !json.Valid(raw) {
			return fail(stdout, Invalid("resource on stdin is not valid JSON"))
		}
		md, err := ParseMetadata(raw)
		if err != nil {
			return fail(stdout, err)
		}
		if md.Name == "" {
			return fail(stdout, Invalid("resource has no metadata.name"))
		}
		if len(rest) == 2 && (rest[0] != md.Namespace || rest[1] != md.Name) {
			return fail(stdout, Invalid("put of %s/%s, but the resource on stdin is %s/%s", rest[0], rest[1], md.Namespace, md.Name))
		}
		if err := impl.Put(root, kind, Resource{Metadata: md, Raw: raw}); err != nil {
			return fail(stdout, err)
		}
		return succeed(stdout, struct{}{})
	case "delete":
		if len(rest) != 2 {
			return fail(stdout, Invalid("usage: delete <kind> <namespace> <name>"))
		}
		if err := impl.Delete(root, kind, rest[0], rest[1]); err != nil {
			return fail(stdout, err)
		}
		return succeed(stdout, struct{}{})
	default:
		return fail(stdout, Invalid("unknown operation %q (want get, list, put or delete)", op))
	}
}

func progName(args []string) string {
	if len(args) == 0 {
		return "controller"
	}
	return args[0]
}

func succeed(stdout io.Writer, v any) int {
	if err := json.NewEncoder(stdout).Encode(v); err != nil {
		// Nothing useful can be written if stdout itself fails.
		return ExitError
	}
	return ExitOK
}

func fail(stdout io.Writer, err error) int {
	var e *Error
	if !errors.As(err, &e) {
		e = &Error{Message: err.Error()}
	} else if e.Message != err.Error() {
		// Keep the context a wrapping error added.
		e = &Error{Code: e.Code, Message: err.Error()}
	}
	writeMessage(stdout, e)
	if e.Code == CodeNotFound {
		return ExitNotFound
	}
	return ExitError
}

func writeMessage(stdout io.Writer, e *Error) {
	_ = json.NewEncoder(stdout).Encode(struct {
		Message string `json:"message"`
		Code    string `json:"code,omitempty"`
	}{e.Message, e.Code})
}
