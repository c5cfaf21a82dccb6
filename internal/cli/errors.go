package cli

import (
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

// usageError is a command line that cannot be run as given.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

func usageErrorf(format string, args ...any) error {
	return &usageError{err: fmt.Errorf(format, args...)}
}

// usageArgs marks cobra's positional argument errors as usage errors.
func usageArgs(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := check(cmd, args); err != nil {
			return &usageError{err: fmt.Errorf("%w\nRun '%s --help' for usage.", err, cmd.CommandPath())}
		}
		return nil
	}
}

// printError writes "error: <message>" for every error of a batch (a batch
// can fail for several reasons at once), each followed by its validation
// causes on their own indented lines.
func printError(w io.Writer, err error) {
	for _, e := range branches(err) {
		for line := range strings.SplitSeq(e.Error(), "\n") {
			if strings.HasPrefix(line, "Run '") {
				fmt.Fprintln(w, line)
				continue
			}
			fmt.Fprintf(w, "error: %s\n", line)
		}
		for _, c := range cairn.Causes(e) {
			fmt.Fprintf(w, "  %s\n", c)
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
