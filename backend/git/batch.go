package git

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/cairn-dev/cairn"
)

// trChange is the trailer of one change in a commit of several (a batch):
// "<operation> <instance> <resource version> <apiVersion> <Kind> <ns>/<name>".
// Such a commit also carries trInstance (its first change's), so whatever
// tells cairn's commits from others' by that trailer (sync) still does.
const trChange = "Cairn-Change"

// OnBatch commits every write as one commit (pushed once): a stack
// reconcile that changes many children in this backend makes one commit,
// not one per child. It is all or nothing: when any write's check fails,
// nothing is committed. In propose mode, or when a sync imports, the
// writes go one by one (one proposal each).
func (b *Backend) OnBatch(ctx context.Context, writes []cairn.BatchWrite) ([]json.RawMessage, error) {
	out := make([]json.RawMessage, len(writes))
	if _, imp := b.importing(ctx); imp || b.proposing(ctx) || len(writes) == 1 {
		for i, w := range writes {
			wctx := ctx
			if w.Meta != nil {
				wctx = cairn.WithResourceMeta(ctx, *w.Meta)
			}
			var err error
			switch {
			case w.Create != nil:
				out[i], err = b.OnCreate(wctx, *w.Create)
			case w.Update != nil:
				out[i], err = b.OnUpdate(wctx, *w.Update)
			case w.Delete != nil:
				err = b.OnDelete(wctx, *w.Delete)
			}
			if err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	chs := make([]change, 0, len(writes))
	at := make([]int, 0, len(writes)) // chs[j] is writes[at[j]]
	for i, w := range writes {
		wctx := ctx
		if w.Meta != nil {
			wctx = cairn.WithResourceMeta(ctx, *w.Meta)
		}
		var ch change
		var err error
		switch {
		case w.Create != nil:
			ch, err = b.createChange(wctx, *w.Create)
		case w.Update != nil:
			ch, err = b.updateChange(wctx, *w.Update)
		case w.Delete != nil:
			ch, err = b.deleteChange(wctx, *w.Delete)
			if cairn.HasCode(err, cairn.CodeNotFound) {
				continue // gone already, as OnDelete's callers count it
			}
		default:
			err = errorf(cairn.CodeInvalid, "", "batch write %d has no operation", i)
		}
		if err != nil {
			return nil, err
		}
		chs = append(chs, ch)
		at = append(at, i)
	}
	if len(chs) == 0 {
		return out, nil
	}
	commit, err := b.write(ctx, chs...)
	if err != nil {
		return nil, err
	}
	for j, c := range chs {
		if c.op != opDelete {
			out[at[j]] = b.versionContext(c.ident, c.rv, commit)
		}
	}
	return out, nil
}

// batchMessage is the commit message of several changes: a summary, one
// line per change, then the trailers (one trChange per change).
func batchMessage(ctx context.Context, chs []change) string {
	actor := cairn.Actor(ctx)
	if actor == "" {
		actor = "unknown"
	}
	counts := map[string]int{}
	for _, c := range chs {
		counts[c.op]++
	}
	var parts []string
	for _, op := range []string{opCreate, opUpdate, opDelete} {
		if counts[op] > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", op, counts[op]))
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "cairn: %s resources by %s\n\n", strings.Join(parts, ", "), actor)
	for _, c := range chs {
		fmt.Fprintf(&b, "- %s %s %s/%s", c.op, c.ident.Kind.Kind, c.ident.Namespace, c.ident.Name)
		if c.rv > 0 {
			fmt.Fprintf(&b, " (resource version %d)", c.rv)
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "\n%s: %s\n", trInstance, chs[0].id)
	for _, c := range chs {
		fmt.Fprintf(&b, "%s: %s %s %d %s\n", trChange, c.op, c.id, c.rv, resourceTrailer(c.ident))
	}
	fmt.Fprintf(&b, "%s: %s\n", trActor, oneLine(actor))
	return b.String()
}

// batchTrailers parses the trChange trailers of a commit message; nil for
// a commit of one change.
func batchTrailers(msg string) []change {
	paras := strings.Split(strings.TrimSpace(msg), "\n\n")
	var out []change
	for line := range strings.SplitSeq(paras[len(paras)-1], "\n") {
		v, ok := strings.CutPrefix(line, trChange+": ")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) != 6 {
			continue
		}
		rv, _ := strconv.Atoi(f[2])
		out = append(out, change{op: f[0], id: f[1], rv: rv, ident: parseResource(strings.Join(f[3:], " "))})
	}
	return out
}

var _ cairn.BatchWriter = (*Backend)(nil)
