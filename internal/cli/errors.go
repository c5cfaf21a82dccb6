package cli

import (
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cairn-dev/cairn"
)

// Exit codes. The hub's error vocabulary is mapped to them here and nowhere
// else.
const (
	ExitOK          = 0
	ExitInternal    = 1
	ExitInvalid     = 2 // invalid input, and usage errors
	ExitNotFound    = 3
	ExitConflict    = 4 // already exists, conflict
	ExitLocked      = 5 // locked, used by
	ExitUnavailable = 6
	ExitForbidden   = 7 // not authenticated, or not allowed
)

// ExitCode maps an error to the process exit code.
func ExitCode(err error) int {
	if err == nil {
		return ExitOK
	}
	if _, ok := errors.AsType[*usageError](err); ok {
		return ExitInvalid
	}
	switch cairn.ErrorCode(err) {
	case cairn.CodeInvalid:
		return ExitInvalid
	case cairn.CodeNotFound:
		return ExitNotFound
	case cairn.CodeAlreadyExists, cairn.CodeConflict:
		return ExitConflict
	case cairn.CodeLocked, cairn.CodeUsedBy:
		return ExitLocked
	case cairn.CodeUnavailable:
		return ExitUnavailable
	case cairn.CodeForbidden:
		return ExitForbidden
	default:
		return ExitInternal
	}
}

// usageError is a command line that cannot be run as given; hint, printed
// as it is after the error, says what to run instead.
type usageError struct {
	err  error
	hint string
}

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

func usageErrorf(format string, args ...any) error {
	return &usageError{err: fmt.Errorf(format, args...)}
}

// hintedError is an error with what to do about it, printed after it.
type hintedError struct {
	error
	hint string
}

func (e *hintedError) Unwrap() error { return e.error }

// hint adds what to do to an error whose fix is not in its message: a
// server certificate signed by a CA the CLI was not given.
func (a *app) hint(err error) error {
	if _, ok := errors.AsType[x509.UnknownAuthorityError](err); ok && a.target.url != "" {
		return &hintedError{err, fmt.Sprintf("To trust the server's CA: cairn config set-context NAME --server %s --certificate-authority FILE\n"+
			"(or --kubeconfig FILE; a cairn serve without --tls-cert writes one, with its CA, into its data directory)", a.target.url)}
	}
	return err
}

// usageArgs marks cobra's positional argument errors as usage errors. An
// unknown subcommand gets kubectl's "Did you mean this?" with the commands
// it is close to.
func usageArgs(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		err := check(cmd, args)
		if err == nil {
			return nil
		}
		var hint strings.Builder
		if !cmd.HasAvailableSubCommands() {
			// A command of its own: say what it takes (cobra says
			// "accepts 1 arg(s)", and calls a stray argument an unknown
			// command, though there are none to choose from).
			if len(args) > 0 && strings.HasPrefix(err.Error(), "unknown command ") {
				err = fmt.Errorf("%s takes no arguments, got %q", cmd.CommandPath(), args[0])
			}
			fmt.Fprintf(&hint, "Usage: %s\n", strings.TrimSuffix(cmd.UseLine(), " [flags]"))
		}
		if len(args) > 0 && cmd.HasAvailableSubCommands() {
			if cmd.SuggestionsMinimumDistance <= 0 {
				cmd.SuggestionsMinimumDistance = 2 // cobra's default, set only by its own Find
			}
			if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
				hint.WriteString("\nDid you mean this?\n")
				for _, name := range s {
					fmt.Fprintf(&hint, "\t%s\n", name)
				}
			}
		}
		fmt.Fprintf(&hint, "Run '%s --help' for usage.", cmd.CommandPath())
		return &usageError{err: err, hint: hint.String()}
	}
}

// printError writes "error: <message>" for every error of a batch (a batch
// can fail for several reasons at once), each followed by its validation
// causes on their own indented lines, their fields dotted.
func printError(w io.Writer, err error) {
	for _, e := range branches(err) {
		causes := cairn.Causes(e)
		for line := range strings.SplitSeq(summary(e.Error(), causes), "\n") {
			fmt.Fprintf(w, "error: %s\n", line)
		}
		for _, c := range causes {
			// One spelling of a field whichever mode answered: the hub's
			// validator writes spec/value/port, the REST API spec.value.port.
			c.Field = cairn.DottedPath(c.Field)
			fmt.Fprintf(w, "  %s\n", c)
		}
		if u, ok := errors.AsType[*usageError](e); ok && u.hint != "" {
			fmt.Fprintln(w, u.hint)
		}
		if h, ok := errors.AsType[*hintedError](e); ok {
			fmt.Fprintln(w, h.hint)
		}
	}
}

// branches flattens the top-level errors.Join of err.
func branches(err error) []error {
	j, ok := err.(interface{ Unwrap() []error })
	if !ok {
		return []error{err}
	}
	var out []error
	for _, e := range j.Unwrap() {
		out = append(out, branches(e)...)
	}
	return out
}

// summary is msg without the list of causes it ends with ("value does not
// match Type T: spec/value/port must be integer, ..." is "value does not
// match Type T:"), since printError puts each cause on its own line after
// it. The list is recognised by the causes' messages, in order, each after
// a field path (which may be spelled differently from the cause's: the REST
// API's spec.port for the hub's spec/value/port); a message that does not
// end with them is returned whole.
func summary(msg string, causes []cairn.Cause) string {
	if len(causes) == 0 {
		return msg
	}
	rest := msg
	for i := len(causes) - 1; i >= 0; i-- {
		m := causes[i].Message
		if m == "" || !strings.HasSuffix(rest, m) {
			return msg
		}
		rest = strings.TrimSuffix(rest, m)
		seps := []string{"; ", ", ", "\n"} // between causes
		if i == 0 {
			seps = []string{": "} // between the summary and the first cause
		}
		cut := -1
		for _, sep := range seps {
			j := strings.LastIndex(rest, sep)
			if j < 0 {
				continue
			}
			// What lies between the separator and the message is the
			// cause's field: one word and a space, or nothing.
			field := rest[j+len(sep):]
			if field == "" || (strings.HasSuffix(field, " ") && !strings.ContainsAny(strings.TrimSuffix(field, " "), " \n")) {
				cut = max(cut, j)
			}
		}
		if cut < 0 {
			return msg
		}
		rest = rest[:cut]
	}
	if rest == "" {
		return msg
	}
	return rest + ":"
}
