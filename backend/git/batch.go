package git

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/cairn-dev/cairn"
)

// trChange is the trailer of one change in a commit of several (a batch):
// "<operation> <instance> <resource version> <apiVersion> <Kind> <ns>/<name>".
// Such a commit also carries trInstance (its first change's), so whatever
// tells cairn's commits from others' by that trailer (sync) still does.
const trChange = "Cairn-Change"

// trRevert names the commit an undo commit takes back (UndoBatch).
const trRevert = "Cairn-Revert"

// OnBatch stores every write, creates, updates and deletes mixed, as one
// commit pushed once (commit mode), or as one branch and one pull request
// (propose mode): a stack reconcile that changes many children in this
// backend makes one commit or one pull request, not one per child. It is
// all or nothing: when any write's check fails, nothing is committed or
// proposed. The result's token names the commit (or the pull request) for
// UndoBatch. A sync's import of several files of one outside commit is
// one commit too, recording them all (importBatch).
func (b *Backend) OnBatch(ctx context.Context, writes []cairn.BatchWrite) (cairn.BatchResult, error) {
	out := cairn.BatchResult{Contexts: make([]json.RawMessage, len(writes))}
	if src, imp := b.importing(ctx); imp {
		if len(writes) > 1 {
			return b.importBatch(ctx, writes, src)
		}
		// One import: its own commit, the form a single write has.
		for i, w := range writes {
			wctx := writeContext(ctx, w)
			var err error
			switch {
			case w.Create != nil:
				out.Contexts[i], err = b.OnCreate(wctx, *w.Create)
			case w.Update != nil:
				out.Contexts[i], err = b.OnUpdate(wctx, *w.Update)
			case w.Delete != nil:
				err = b.OnDelete(wctx, *w.Delete)
			}
			if err != nil {
				return cairn.BatchResult{}, err
			}
		}
		return out, nil
	}
	chs := make([]change, 0, len(writes))
	at := make([]int, 0, len(writes)) // chs[j] is writes[at[j]]
	prevs := make([]json.RawMessage, 0, len(writes))
	for i, w := range writes {
		wctx := writeContext(ctx, w)
		var ch change
		var prev json.RawMessage
		var err error
		switch {
		case w.Create != nil:
			ch, err = b.createChange(wctx, *w.Create)
		case w.Update != nil:
			ch, err = b.updateChange(wctx, *w.Update)
			prev = w.Update.Context
		case w.Delete != nil:
			prev = w.Delete.Context
			ch, err = b.deleteChange(wctx, *w.Delete)
			if cairn.HasCode(err, cairn.CodeNotFound) {
				if b.scm == nil || proposalOf(prev) == nil {
					uch, ok := b.unrecordedDeleteChange(wctx, *w.Delete)
					if !ok {
						continue // gone already, as OnDelete's callers count it
					}
					ch, err = uch, nil
					break
				}
				// Created by a proposal not merged yet: on no branch, so
				// the proposal's tree says where its file is.
				ch, err = b.proposedDeleteChange(wctx, *w.Delete), nil
			}
		default:
			err = errorf(cairn.CodeInvalid, "", "batch write %d has no operation", i)
		}
		if err != nil {
			return cairn.BatchResult{}, err
		}
		chs = append(chs, ch)
		at = append(at, i)
		prevs = append(prevs, prev)
	}
	if len(chs) == 0 {
		return out, nil
	}
	if b.proposing(ctx) {
		return b.proposeBatch(ctx, chs, at, prevs, out)
	}
	var commit plumbing.Hash
	var made bool
	var err error
	if len(chs) == 1 {
		// One write (a REST or GraphQL create, update or delete of one
		// resource): with group commit, it shares a commit with the
		// writes queued alongside. UndoBatch takes back only its own
		// change of such a commit.
		commit, made, err = b.commitQueued(ctx, chs[0])
	} else {
		commit, made, err = b.writeChanges(ctx, chs)
	}
	if err != nil {
		return cairn.BatchResult{}, err
	}
	if made {
		out.Token = commit.String()
	}
	for j, c := range chs {
		if c.op != opDelete {
			out.Contexts[at[j]] = b.versionContext(c.ident, c.rv, commit)
		}
	}
	return out, nil
}

// importBatch records the import of several files of the outside commit
// src as one commit of cairn's: empty, like one import's, its message
// listing every change (trChange) with the commit's Cairn-Source, so every
// process's index points those versions at src and sync (importedIn) knows
// them imported. The writes are creates and updates (before the hub's
// store commits; UndoBatch takes them back) or deletes of removed files
// (after it: DefersDeletes), never both. It is all or nothing: a change
// whose check fails (imported already by another process, a version
// someone else took) fails the batch and nothing is committed; a delete
// of an instance the branch no longer has (another process imported that
// removal) is left out, and nothing is committed when none is left. The
// result's token names the commit for UndoBatch.
func (b *Backend) importBatch(ctx context.Context, writes []cairn.BatchWrite, src plumbing.Hash) (cairn.BatchResult, error) {
	out := cairn.BatchResult{Contexts: make([]json.RawMessage, len(writes))}
	chs := make([]change, 0, len(writes))
	at := make([]int, 0, len(writes)) // chs[j] is writes[at[j]]
	seen := &importedFrom{}
	for i, w := range writes {
		wctx := writeContext(ctx, w)
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
				continue // its removal imported already
			}
			check := ch.check
			ch.check = func(e *entry) error {
				if e == nil {
					return nil // imported meanwhile: recording it again is harmless
				}
				return check(e)
			}
		default:
			err = errorf(cairn.CodeInvalid, "", "batch write %d has no operation", i)
		}
		if err != nil {
			return cairn.BatchResult{}, err
		}
		chs = append(chs, b.importChange(ch, src, seen))
		at = append(at, i)
	}
	if len(chs) == 0 {
		return out, nil
	}
	commit, _, err := b.writeChanges(ctx, chs)
	if err != nil {
		return cairn.BatchResult{}, err
	}
	out.Token = commit.String()
	for j, c := range chs {
		if c.op != opDelete {
			out.Contexts[at[j]] = b.versionContext(c.ident, c.rv, src)
		}
	}
	return out, nil
}

// DefersDeletes says the hub must send the deletes of an import (a sync's
// removals) only once its store committed: the person removed the files,
// so an imported delete is never taken back.
func (b *Backend) DefersDeletes(ctx context.Context) bool {
	_, imp := b.importing(ctx)
	return imp
}

var _ cairn.DeleteDeferrer = (*Backend)(nil)

// undoImportBatch takes back an import batch (importBatch) whose commit is
// batch: one empty commit, as the undo of one import, recording the
// inverse changes (trChange) and naming the batch (trRevert), so every
// process forgets those versions and sync imports the changes again. The
// person's files are theirs: the tree is left alone.
func (b *Backend) undoImportBatch(ctx context.Context, writes []cairn.BatchWrite, batch plumbing.Hash) error {
	inv, err := b.inverse(ctx, writes)
	if err != nil {
		return err
	}
	if inv, err = b.inBatch(ctx, batch, inv); err != nil || len(inv) == 0 {
		return err
	}
	return b.undoImportCommit(ctx, batch, inv)
}

// writeContext is ctx with the write's ResourceMeta.
func writeContext(ctx context.Context, w cairn.BatchWrite) context.Context {
	if w.Meta != nil {
		return cairn.WithResourceMeta(ctx, *w.Meta)
	}
	return ctx
}

// UndoBatch takes back a batch OnBatch stored. In commit mode it pushes
// one commit restoring every file the batch changed to its content before
// the batch (a file someone changed since is left alone) and recording the
// inverse changes in its trailers (a create becomes a delete, an update a
// delete-revision, a delete a create of the latest resource version), so
// every process sharing the remote forgets what the batch did; the batch's
// commit stays in the history, with the undo commit naming it (trRevert).
// In propose mode it closes the batch's pull request and deletes its
// branch.
func (b *Backend) UndoBatch(ctx context.Context, writes []cairn.BatchWrite, stored cairn.BatchResult) error {
	if _, imp := b.importing(ctx); imp {
		if stored.Token != "" {
			return b.undoImportBatch(ctx, writes, plumbing.NewHash(stored.Token))
		}
		return b.undoEach(ctx, writes, stored)
	}
	if b.scm != nil && stored.Token != "" {
		num, branch, _ := strings.Cut(stored.Token, " ")
		n, err := strconv.Atoi(num)
		if err != nil {
			return errorf(cairn.CodeInvalid, "", "undo: %q is not a proposal of this backend", stored.Token)
		}
		if err := b.closeProposal(ctx, &Proposal{ID: branch, Number: n, Branch: branch}); err != nil {
			return err
		}
		b.deleteBranch(ctx, branch)
		return nil
	}
	inv, err := b.inverse(ctx, writes)
	if err != nil {
		return err
	}
	if len(inv) == 0 {
		return nil
	}
	if stored.Token == "" || b.scm != nil {
		// The batch changed no file: it is only in this process's index.
		b.applyInMemory(inv)
		return nil
	}
	return b.undoCommit(ctx, plumbing.NewHash(stored.Token), inv)
}

// RestoreDeleted puts back the file of an instance whose delete this
// backend committed (with a batch) but the hub never did: the process
// stopped between the two, and recovery found the delete's intent. The
// file comes back as it was at the commit req.Context names (the deleted
// version's), in a commit of its own; the index then holds that version.
// When the instance is still here (the batch never got this far, or it
// was a proposal, which leaves the branch as it was) nothing is done.
func (b *Backend) RestoreDeleted(ctx context.Context, req cairn.OnDeleteRequest) error {
	id := req.InstanceID
	c := parseContext(req.Context)
	if c.Commit == "" {
		return errorf(cairn.CodeInvalid, id, "restore TypeInstance %q: its context names no commit to restore it from", id)
	}
	if b.proposing(ctx) {
		// The batch proposed the delete: the branch has the file, and
		// the pull request removing it must not be merged.
		if err := b.closeOrphans(ctx, id, func(op string, _ int) bool { return op == opDelete }); err != nil {
			return err
		}
	}
	// The branch as it is: this process's index may still hold the
	// instance, when the batch's push went through unanswered.
	if err := b.refresh(ctx); err != nil {
		return err
	}
	if b.lookup(id) != nil {
		return nil
	}
	ident, err := resolveIdentity(ctx, id, req.Context, nil)
	if err != nil {
		return err
	}
	from := plumbing.NewHash(c.Commit)
	ch := change{op: opCreate, id: id, rv: max(c.ResourceVersion, 1), ident: ident, touches: []identity{ident},
		check: func(e *entry) error {
			if e != nil {
				return errRestored // back meanwhile (a sync, a retry)
			}
			return nil
		},
		apply: func(ctx context.Context, root string) error {
			cur, err := b.ctl.Get(ctx, root, ident.Kind, ident.Namespace, ident.Name)
			switch {
			case err == nil && cur != nil:
				return nil // put back (or made again) outside cairn: keep it
			case err != nil && !cairn.HasCode(err, cairn.CodeNotFound):
				return err
			}
			at, err := b.repo.CommitObject(from)
			if err != nil {
				return errorf(cairn.CodeNotFound, id, "restore TypeInstance %q: commit %s: %w", id, from, err)
			}
			doc, err := b.getAt(ctx, at, ident)
			if err != nil {
				return err
			}
			return b.ctl.Put(ctx, root, ident.Kind, doc)
		},
	}
	ch.message = restoreMessage(ctx, ch, from)
	commit, made, err := b.writeChanges(ctx, []change{ch})
	if errors.Is(err, errRestored) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("git backend: restore %s: %w", ident, err)
	}
	if made {
		b.log.InfoContext(ctx, "git backend: restored a file whose delete never committed in cairn", "instance", id, "resource", ident.String(), "from", from.String(), "commit", commit.String())
	}
	return nil
}

// restoreMessage is the message of RestoreDeleted's commit: what it puts
// back and why, then the trailers of a create of the restored version.
func restoreMessage(ctx context.Context, ch change, from plumbing.Hash) string {
	msg := message(ctx, ch)
	_, tr, _ := strings.Cut(msg, "\n\n")
	actor, imp := who(ctx, ch)
	return fmt.Sprintf("cairn: restore %s %s/%s (resource version %d) by %s\n\n"+
		"A request deleted it in this repository, but cairn stopped before it committed the delete in\n"+
		"its own store, so the TypeInstance still exists: its file is back as it was at commit %s.\n\n%s",
		ch.ident.Kind.Kind, ch.ident.Namespace, ch.ident.Name, ch.rv, byline(actor, imp), from.String()[:12], tr)
}

// errRestored stops RestoreDeleted's commit when the instance is back.
var errRestored = errors.New("the instance is back")

var _ cairn.DeleteRestorer = (*Backend)(nil)

// inverseChange is one change of a batch taken back: its operation is
// the inverse one, as applyIndex records it.
type inverseChange struct {
	op    string
	id    string
	rv    int
	ident identity
	// commit holds the version a taken-back delete restores (from its
	// context): the index points the version there when no undo commit
	// is made.
	commit plumbing.Hash
	// undid is the batch's own operation.
	undid string
}

func (b *Backend) inverse(ctx context.Context, writes []cairn.BatchWrite) ([]inverseChange, error) {
	var out []inverseChange
	for _, w := range writes {
		wctx := writeContext(ctx, w)
		switch {
		case w.Create != nil:
			ident, err := resolveIdentity(wctx, w.Create.InstanceID, w.Create.Context, nil)
			if err != nil {
				return nil, err
			}
			out = append(out, inverseChange{op: opDelete, id: w.Create.InstanceID, ident: ident, undid: opCreate})
		case w.Update != nil:
			ident, err := resolveIdentity(wctx, w.Update.InstanceID, w.Update.Context, b.identityOf(b.lookup(w.Update.InstanceID)))
			if err != nil {
				return nil, err
			}
			out = append(out, inverseChange{op: opDeleteRevision, id: w.Update.InstanceID, rv: w.Update.NewResourceVersion, ident: ident, undid: opUpdate})
		case w.Delete != nil:
			c := parseContext(w.Delete.Context)
			ident, err := resolveIdentity(wctx, w.Delete.InstanceID, w.Delete.Context, b.identityOf(b.lookup(w.Delete.InstanceID)))
			if err != nil {
				return nil, err
			}
			ic := inverseChange{op: opCreate, id: w.Delete.InstanceID, rv: max(c.ResourceVersion, 1), ident: ident, undid: opDelete}
			if c.Commit != "" {
				ic.commit = plumbing.NewHash(c.Commit)
			}
			out = append(out, ic)
		}
	}
	return out, nil
}

// inBatch keeps the inverse changes of what the batch commit recorded (a
// delete of what was gone already is not in it).
func (b *Backend) inBatch(ctx context.Context, batch plumbing.Hash, inv []inverseChange) ([]inverseChange, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.openLocked(ctx); err != nil {
		return nil, err
	}
	c, err := b.repo.CommitObject(batch)
	if err != nil {
		return nil, fmt.Errorf("git backend: undo: commit %s: %w", batch, err)
	}
	in := map[string]bool{}
	if chs := batchTrailers(c.Message); len(chs) > 0 {
		for _, ch := range chs {
			in[ch.id] = true
		}
	} else {
		in[trailers(c.Message)[trInstance]] = true
	}
	out := inv[:0]
	for _, ic := range inv {
		if in[ic.id] {
			out = append(out, ic)
		}
	}
	return out, nil
}

// applyInMemory records inverse changes in this process's index only.
func (b *Backend) applyInMemory(inv []inverseChange) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.imu.Lock()
	defer b.imu.Unlock()
	for _, c := range inv {
		if c.op == opCreate && b.idx[c.id] != nil {
			continue // the delete made no change: the entry is still there
		}
		commit := c.commit
		if commit.IsZero() {
			commit = b.tip
		}
		b.applyIndex(c.id, c.op, c.rv, commit, c.ident)
	}
}

// restoreFiles puts every resource the batch commit changed back to its
// content in the batch's parent, unless it differs now from what the batch
// left (someone changed it since).
func (b *Backend) restoreFiles(ctx context.Context, root string, batch plumbing.Hash, inv []inverseChange) error {
	c, err := b.repo.CommitObject(batch)
	if err != nil {
		return fmt.Errorf("commit %s: %w", batch, err)
	}
	var parent json.RawMessage
	for _, ic := range inv {
		mine, err := b.getAt(ctx, c, ic.ident)
		if err != nil && !cairn.HasCode(err, cairn.CodeNotFound) {
			return err
		}
		parent = nil
		if c.NumParents() > 0 {
			p, err := c.Parent(0)
			if err != nil {
				return fmt.Errorf("parent of %s: %w", batch, err)
			}
			if parent, err = b.getAt(ctx, p, ic.ident); err != nil && !cairn.HasCode(err, cairn.CodeNotFound) {
				return err
			}
		}
		cur, err := b.ctl.Get(ctx, root, ic.ident.Kind, ic.ident.Namespace, ic.ident.Name)
		if err != nil && !cairn.HasCode(err, cairn.CodeNotFound) {
			return err
		}
		if (cur == nil) != (mine == nil) || (cur != nil && !cairn.JSONEqual(cur, mine)) {
			continue // changed since: keep it
		}
		switch {
		case parent == nil && cur != nil:
			err = b.ctl.Delete(ctx, root, ic.ident.Kind, ic.ident.Namespace, ic.ident.Name)
		case parent != nil:
			err = b.ctl.Put(ctx, root, ic.ident.Kind, parent)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// revertMessage is the undo commit's message: what it takes back, then the
// trailers (one trChange per inverse change, trRevert, trActor).
func revertMessage(ctx context.Context, batch plumbing.Hash, inv []inverseChange) string {
	actor, imp := who(ctx, change{})
	var s strings.Builder
	fmt.Fprintf(&s, "cairn: undo %s (%d changes) by %s\n\n", batch.String()[:12], len(inv), byline(actor, imp))
	s.WriteString("The request that made it failed after the commit, so cairn took it back:\n")
	for _, c := range inv {
		fmt.Fprintf(&s, "- undo %s %s %s/%s\n", c.undid, c.ident.Kind.Kind, c.ident.Namespace, c.ident.Name)
	}
	s.WriteString("\n")
	writeUndoTrailers(&s, batch, inv, actor, imp)
	return s.String()
}

// writeUndoTrailers writes the trailers of a commit taking back batch: the
// inverse changes, the reverted commit and who took it back.
func writeUndoTrailers(b *strings.Builder, batch plumbing.Hash, inv []inverseChange, actor, imp string) {
	fmt.Fprintf(b, "%s: %s\n", trInstance, inv[0].id)
	for _, c := range inv {
		fmt.Fprintf(b, "%s: %s %s %d %s\n", trChange, c.op, c.id, c.rv, resourceTrailer(c.ident))
	}
	fmt.Fprintf(b, "%s: %s\n%s: %s\n", trRevert, batch, trActor, actor)
	if imp != "" {
		fmt.Fprintf(b, "%s: %s\n", trImpersonator, imp)
	}
}

// undoEach takes back a batch that went write by write (an import): each
// imported version with a commit that leaves the person's file alone
// (undoImport). A delete needs nothing: the hub sends an instance's
// delete after its own commit.
func (b *Backend) undoEach(ctx context.Context, writes []cairn.BatchWrite, stored cairn.BatchResult) error {
	for i, w := range writes {
		wctx := writeContext(ctx, w)
		var err error
		handled := false
		switch {
		case w.Create != nil:
			handled, err = b.undoImport(wctx, w.Create.InstanceID, 1, opDelete)
		case w.Update != nil:
			handled, err = b.undoImport(wctx, w.Update.InstanceID, w.Update.NewResourceVersion, opDeleteRevision)
		}
		if err != nil {
			return err
		}
		if handled {
			continue
		}
		switch {
		case w.Create != nil:
			c := w.Create.Context
			if i < len(stored.Contexts) && stored.Contexts[i] != nil {
				c = stored.Contexts[i]
			}
			err = b.OnDelete(wctx, cairn.OnDeleteRequest{InstanceID: w.Create.InstanceID, Context: c})
		case w.Update != nil:
			err = b.OnDeleteRevision(wctx, cairn.OnDeleteRevisionRequest{InstanceID: w.Update.InstanceID, ResourceVersion: w.Update.NewResourceVersion, OwnerID: w.Update.OwnerID})
		}
		if err != nil && !cairn.HasCode(err, cairn.CodeNotFound) {
			return err
		}
	}
	return nil
}

// batchMessage is the commit message of several changes: a summary, one
// line per change, then the trailers (one trChange per change).
func batchMessage(ctx context.Context, chs []change) string {
	// Who asked: one actor for a request's batch, one per member of a
	// group commit; each with whoever impersonated them.
	var bylines, actors, imps []string
	for _, c := range chs {
		a, imp := who(ctx, c)
		if by := byline(a, imp); !slices.Contains(bylines, by) {
			bylines = append(bylines, by)
		}
		if !slices.Contains(actors, a) {
			actors = append(actors, a)
		}
		if imp != "" && !slices.Contains(imps, imp) {
			imps = append(imps, imp)
		}
	}
	var b strings.Builder
	summary := batchSummary(chs, strings.Join(bylines, ", "))
	src := chs[0].source
	if !src.IsZero() {
		summary = "cairn: sync " + strings.TrimPrefix(summary, "cairn: ")
	}
	fmt.Fprintf(&b, "%s\n\n", summary)
	if !src.IsZero() {
		fmt.Fprintf(&b, "Imports the changes of commit %s, made outside cairn; the files are as that commit made them.\n\n", src.String()[:12])
	}
	for _, c := range chs {
		fmt.Fprintf(&b, "- %s %s %s/%s", c.op, c.ident.Kind.Kind, c.ident.Namespace, c.ident.Name)
		if c.rv > 0 {
			fmt.Fprintf(&b, " (resource version %d)", c.rv)
		}
		if len(bylines) > 1 {
			fmt.Fprintf(&b, " by %s", byline(who(ctx, c)))
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "\n%s: %s\n", trInstance, chs[0].id)
	for _, c := range chs {
		fmt.Fprintf(&b, "%s: %s %s %d %s\n", trChange, c.op, c.id, c.rv, resourceTrailer(c.ident))
	}
	for _, a := range actors {
		fmt.Fprintf(&b, "%s: %s\n", trActor, a)
	}
	for _, imp := range imps {
		fmt.Fprintf(&b, "%s: %s\n", trImpersonator, imp)
	}
	if !src.IsZero() {
		fmt.Fprintf(&b, "%s: %s\n", trSource, src)
	}
	return b.String()
}

// batchSummary is a batch commit's first line: "cairn: create 2, update 3
// resources by <actor>".
func batchSummary(chs []change, actor string) string {
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
	return fmt.Sprintf("cairn: %s resources by %s", strings.Join(parts, ", "), actor)
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
