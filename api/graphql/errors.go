package graphql

import (
	"errors"
	"fmt"
	"strings"

	"github.com/cairn-dev/cairn"
)

// operation names what a request did, since Local Hub words the same hub
// refusal differently per mutation.
type operation int

const (
	opRead operation = iota
	opCreateMany
	opCreateOne
	opUpdate
	opDelete
	opLock
	opUnlock
)

// message is the one mapping from a hub error to the GraphQL error text, in
// the words of Capact's Local Hub (its clients and tests match these texts).
// id is the instance a delete was about.
func message(op operation, id string, err error) string {
	switch op {
	case opCreateMany:
		items := messages(err, "")
		if r := refusedExternally(err); r != "" {
			// Local Hub checks a backend's rules again while it rolls back
			// what it stored, so every such refusal also fails its
			// rollback: it reports the first one twice. cairn checks before
			// storing anything and has nothing to roll back; the second
			// entry is Local Hub's wording, which clients match.
			items = append(items, "rollback externally stored values: "+r)
		}
		return "failed to create the TypeInstances: " + multierror(items)
	case opCreateOne:
		return "failed to create TypeInstance: " + message(opCreateMany, id, err)
	case opUpdate:
		const prefix = "failed to update TypeInstances: "
		// Local Hub checks existence before locks and reports only the first
		// refusal; the hub reports both, so keep the first.
		for _, code := range []cairn.Code{cairn.CodeNotFound, cairn.CodeLocked} {
			for _, e := range cairn.Errors(err) {
				if e.Code == code && len(e.IDs) > 0 && strings.HasPrefix(e.Msg, "TypeInstances with IDs ") {
					return prefix + multierror([]string{e.Msg})
				}
			}
		}
		return prefix + multierror(messages(err, prefix))
	case opDelete:
		return fmt.Sprintf("failed to delete TypeInstance with ID %q: %s", id, deleteReason(id, err))
	case opLock, opUnlock:
		prefix := "failed to lock TypeInstances: "
		if op == opUnlock {
			prefix = "failed to unlock TypeInstances: "
		}
		items := messages(err, prefix)
		if len(items) == 1 {
			return prefix + "1 error occurred: " + items[0]
		}
		return fmt.Sprintf("%s%d errors occurred: [%s]", prefix, len(items), strings.Join(items, ", "))
	default:
		return err.Error()
	}
}

// multierror renders messages as Local Hub aggregates JavaScript errors
// (Capact #698): a count ("error occurred" whatever the count), then one
// line per error, each starting with the Error object's "Error: ".
func multierror(items []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d error occurred:", len(items))
	for _, m := range items {
		b.WriteString("\n\t* Error: " + m)
	}
	return b.String()
}

// refusedExternally returns the message of the first refusal by an external
// backend's rules (cairn.ErrBackendRefused) in err, "" when there is none.
// The built-in backend's refusals do not count: Local Hub never rolls back
// values it keeps itself.
func refusedExternally(err error) string {
	for _, e := range cairn.Errors(err) {
		if errors.Is(e, cairn.ErrBackendRefused) && len(e.IDs) > 0 && e.IDs[0] != cairn.BuiltinBackendID {
			return e.Msg
		}
	}
	return ""
}

// deleteReason words a refused delete as Local Hub does.
func deleteReason(id string, err error) string {
	for _, e := range cairn.Errors(err) {
		mine := len(e.IDs) > 0 && e.IDs[0] == id
		switch {
		case e.Code == cairn.CodeNotFound && mine:
			return "TypeInstance was not found"
		case e.Code == cairn.CodeLocked && mine:
			return "TypeInstance is locked by different owner"
		case e.Code == cairn.CodeUsedBy:
			// Local Hub joins the ids with `", "` inside no outer quotes;
			// clients match that exact text.
			return "TypeInstance is used by other TypeInstances, you must first remove " + strings.Join(e.IDs, `", "`)
		}
	}
	return strings.Join(messages(err, ""), ", ")
}

// messages lists the bare message of every hub error in err (Msg, never the
// batch Subject: Local Hub's texts do not name the batch item), dropping a
// prefix the hub already put on a message. An error that is no *cairn.Error
// is one message.
func messages(err error, prefix string) []string {
	es := cairn.Errors(err)
	if len(es) == 0 {
		return []string{strings.TrimPrefix(err.Error(), prefix)}
	}
	out := make([]string, 0, len(es))
	for _, e := range es {
		m := e.Msg
		if m == "" && e.Err != nil {
			m = e.Err.Error()
		}
		if prefix != "" {
			m = strings.TrimPrefix(m, prefix)
		}
		out = append(out, m)
	}
	return out
}
