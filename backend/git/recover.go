package git

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/cairn-dev/cairn"
)

// recoveryActor signs recovery's commits when no one asked for them.
const recoveryActor = "cairn recovery"

// RecoverBatch finishes the interrupted writes recovery found, the way
// they were made: the undone versions of one import (one commit of
// cairn's recording a sync's import) are taken back by one empty commit
// naming it (Cairn-Revert), the person's files left alone; those of one
// batch of cairn's own writes by one commit restoring its files, as
// UndoBatch does; and the committed deletes whose record never reached the
// branch by one commit recording them all, so git log and every process
// sharing the remote see them. A delete removes only a file that is still
// the deleted instance's: one that another instance holds now, or that was
// removed and added again since (a person re-adding a file at that path),
// is left alone and the delete only recorded.
func (b *Backend) RecoverBatch(ctx context.Context, writes []cairn.RecoveryWrite) error {
	if cairn.Actor(ctx) == "" {
		ctx = cairn.WithActor(ctx, recoveryActor)
	}
	// The branch as it is: another process may have finished some.
	if err := b.refresh(ctx); err != nil {
		return err
	}
	type undoGroup struct {
		imported bool
		inv      []inverseChange
		first    cairn.RecoveryWrite // the hub's request, for a group of one
	}
	undos := map[plumbing.Hash]*undoGroup{}
	var order []plumbing.Hash
	var dels []cairn.OnDeleteRequest
	// Propose mode: a version no import put on the branch is a proposal's,
	// and a delete is proposed; each is finished as the single call does
	// (closing the orphan pull request the intent's context cannot name).
	proposing := b.proposing(ctx)
	var singles []cairn.RecoveryWrite
	for _, w := range writes {
		var id string
		var rv int
		var inv inverseChange
		switch {
		case w.Delete != nil:
			switch {
			case proposing:
				singles = append(singles, w)
			case b.lookup(w.Delete.InstanceID) != nil:
				dels = append(dels, *w.Delete)
			case b.unrecorded(w.Delete.InstanceID, w.Delete.Context):
				singles = append(singles, w) // its file may be at the tip still
			}
			continue
		case w.UndoCreate != nil:
			id, rv = w.UndoCreate.InstanceID, 1
			inv = inverseChange{op: opDelete, id: id, undid: opCreate}
		case w.UndoUpdate != nil:
			id, rv = w.UndoUpdate.InstanceID, w.UndoUpdate.ResourceVersion
			inv = inverseChange{op: opDeleteRevision, id: id, rv: rv, undid: opUpdate}
		default:
			return errorf(cairn.CodeInvalid, "", "recovery write has no operation")
		}
		live, imported := false, false
		var made, by plumbing.Hash
		if e := b.lookup(id); e != nil {
			b.imu.RLock()
			made, live = e.versions[rv]
			by, imported = e.imports[rv]
			inv.ident = e.id
			b.imu.RUnlock()
		}
		if proposing && !(live && imported) {
			singles = append(singles, w)
			continue
		}
		if !live {
			continue // never on the branch, or taken back already
		}
		key := made
		if imported {
			key = by
		}
		g := undos[key]
		if g == nil {
			g = &undoGroup{imported: imported, first: w}
			undos[key] = g
			order = append(order, key)
		}
		g.inv = append(g.inv, inv)
	}
	for _, commit := range order {
		g := undos[commit]
		var err error
		switch {
		case len(g.inv) == 1:
			err = b.recoverOne(ctx, g.first) // one version: the form a single undo has
		case g.imported:
			err = b.undoImportCommit(ctx, commit, g.inv)
		default:
			err = b.undoCommit(ctx, commit, g.inv)
		}
		if err != nil {
			return err
		}
	}
	for _, w := range singles {
		if err := b.recoverOne(ctx, w); err != nil {
			return err
		}
	}
	if len(dels) > 0 {
		return b.recordDeletes(ctx, dels)
	}
	return nil
}

// recoverOne finishes one write as the hub does without RecoverBatch: an
// undo as a rollback, with the intent's context and the lock's owner; one
// the branch no longer has is done.
func (b *Backend) recoverOne(ctx context.Context, w cairn.RecoveryWrite) error {
	var err error
	switch {
	case w.UndoCreate != nil:
		err = b.OnDelete(cairn.WithRollback(ctx), *w.UndoCreate)
	case w.UndoUpdate != nil:
		err = b.OnDeleteRevision(cairn.WithRollback(ctx), *w.UndoUpdate)
	case w.Delete != nil:
		err = b.OnDelete(ctx, *w.Delete)
	}
	if cairn.HasCode(err, cairn.CodeNotFound) {
		return nil
	}
	return err
}

var _ cairn.BatchRecoverer = (*Backend)(nil)

// recordDeletes commits the deletes recovery finishes: one commit, made
// even when no file changes (the files were removed by the person whose
// removal the hub imported), listing every delete (Cairn-Change) so every
// process's index forgets those instances. A file is removed only while it
// is still the instance's (ownsFile).
func (b *Backend) recordDeletes(ctx context.Context, dels []cairn.OnDeleteRequest) error {
	kept := map[string]string{} // instance id → why its file stays
	chs := make([]change, 0, len(dels))
	for _, d := range dels {
		e := b.lookup(d.InstanceID)
		if e == nil {
			continue
		}
		b.imu.RLock()
		ident := e.id
		b.imu.RUnlock()
		id := d.InstanceID
		chs = append(chs, change{op: opDelete, id: id, ident: ident, touches: []identity{ident}, recordOnly: true,
			check: func(e *entry) error {
				if e != nil {
					return checkLock(e, id, d.OwnerID, "delete")
				}
				return nil // recorded meanwhile: recording it again is harmless
			},
			apply: func(ctx context.Context, root string) error {
				why, err := b.ownsFile(ctx, root, id)
				if err != nil || why != "" {
					kept[id] = why
					return err
				}
				err = b.ctl.Delete(ctx, root, ident.Kind, ident.Namespace, ident.Name)
				if cairn.HasCode(err, cairn.CodeNotFound) {
					kept[id] = "removed from the branch already"
					return nil
				}
				return err
			},
		})
	}
	if len(chs) == 0 {
		return nil
	}
	chs[0].messageFunc = func(ctx context.Context, chs []change) string {
		return recoverDeletesMessage(ctx, chs, kept)
	}
	commit, _, err := b.writeChanges(ctx, chs)
	if err != nil {
		return fmt.Errorf("git backend: record the deletes of %d instances: %w", len(chs), err)
	}
	b.log.InfoContext(ctx, "git backend: recovery recorded deletes", "commit", commit.String(), "deletes", len(chs), "filesKept", len(kept))
	return nil
}

// maxOwnerWalk bounds the commits ownsFile reads back from the tip.
const maxOwnerWalk = 1000

// ownsFile says why the file at instance id's path is not its own to
// remove ("" when it is, or when there is none): another instance the
// index holds is at that path now, or the file was removed since the
// instance's latest version and added again (by a person; a sync may not
// have imported it yet). Without the history at hand (a long one, or a
// controller that places files itself), a file whose value differs from
// the instance's latest version is kept. b.mu is held; the work tree is
// at the tip.
func (b *Backend) ownsFile(ctx context.Context, root, id string) (string, error) {
	b.imu.RLock()
	e := b.idx[id]
	if e == nil {
		b.imu.RUnlock()
		return "", nil
	}
	ident := e.id
	at := e.versions[e.latest()]
	other := b.heldByOtherLocked(id, ident)
	b.imu.RUnlock()
	if other != "" {
		return fmt.Sprintf("the file is TypeInstance %s's now", other), nil
	}
	cur, err := b.ctl.Get(ctx, root, ident.Kind, ident.Namespace, ident.Name)
	if cairn.HasCode(err, cairn.CodeNotFound) || (err == nil && cur == nil) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	if b.loc != nil && !at.IsZero() {
		// First parents from the tip back to the version's commit: a
		// commit without the file means it was removed and is back.
		h := b.tip
		for range maxOwnerWalk {
			if h == at {
				return "", nil
			}
			c, err := b.repo.CommitObject(h)
			if err != nil {
				break
			}
			if _, err := b.getAt(ctx, c, ident); cairn.HasCode(err, cairn.CodeNotFound) {
				return fmt.Sprintf("the file was removed at commit %s and added again since", c.Hash.String()[:12]), nil
			}
			if c.NumParents() == 0 {
				break
			}
			h = c.ParentHashes[0]
		}
	}
	if at.IsZero() {
		return "", nil
	}
	mine, err := b.readAt(ctx, at, ident)
	if err != nil {
		if cairn.HasCode(err, cairn.CodeNotFound) {
			return "the file is not the instance's latest version", nil
		}
		return "", err
	}
	if spec, serr := specOf(cur); serr != nil || !cairn.JSONEqual(spec, mine) {
		return "the file changed since the instance's latest version", nil
	}
	return "", nil
}

// recoverDeletesMessage is the message of recovery's commit recording
// deletes: what happened, each delete with what became of its file, then
// the trailers.
func recoverDeletesMessage(ctx context.Context, chs []change, kept map[string]string) string {
	actor, imp := who(ctx, change{})
	var s strings.Builder
	if len(chs) == 1 {
		c := chs[0]
		fmt.Fprintf(&s, "cairn: recover: delete %s %s/%s by %s\n\n", c.ident.Kind.Kind, c.ident.Namespace, c.ident.Name, byline(actor, imp))
	} else {
		fmt.Fprintf(&s, "cairn: recover: delete %d resources by %s\n\n", len(chs), byline(actor, imp))
	}
	s.WriteString("cairn deleted these TypeInstances, but the commit recording it never reached this branch\n" +
		"(the remote did not answer, or the process stopped); recovery records the deletes now:\n")
	for _, c := range chs {
		fmt.Fprintf(&s, "- delete %s %s/%s", c.ident.Kind.Kind, c.ident.Namespace, c.ident.Name)
		if why, ok := kept[c.id]; ok && why != "" {
			fmt.Fprintf(&s, " (file left alone: %s)", why)
		}
		s.WriteString("\n")
	}
	fmt.Fprintf(&s, "\n%s: %s\n", trInstance, chs[0].id)
	for _, c := range chs {
		fmt.Fprintf(&s, "%s: %s %s %d %s\n", trChange, c.op, c.id, c.rv, resourceTrailer(c.ident))
	}
	fmt.Fprintf(&s, "%s: %s\n", trActor, actor)
	if imp != "" {
		fmt.Fprintf(&s, "%s: %s\n", trImpersonator, imp)
	}
	return s.String()
}

// undoImportCommit takes back the versions inv of the import recorded by
// commit batch: one empty commit naming it (Cairn-Revert) with the inverse
// changes, the person's files left alone.
func (b *Backend) undoImportCommit(ctx context.Context, batch plumbing.Hash, inv []inverseChange) error {
	actor, imp := who(ctx, change{})
	var m strings.Builder
	chs := make([]change, len(inv))
	for i, ic := range inv {
		chs[i] = change{op: ic.undid}
	}
	fmt.Fprintf(&m, "cairn: undo sync %s\n\n", strings.TrimPrefix(batchSummary(chs, byline(actor, imp)), "cairn: "))
	fmt.Fprintf(&m, "cairn could not store the import recorded by commit %s in its own store, so it took the import back;\n"+
		"the files are left as the imported commit made them, and the next sync imports them again.\n\n", batch.String()[:12])
	writeUndoTrailers(&m, batch, inv, actor, imp)
	undo := change{op: "revert", id: inv[0].id, ident: inv[0].ident, recordOnly: true, touches: []identity{},
		check:   func(*entry) error { return nil },
		apply:   func(context.Context, string) error { return nil },
		message: m.String(),
	}
	if _, err := b.write(ctx, undo); err != nil {
		return fmt.Errorf("git backend: undo the import batch %s: %w", batch, err)
	}
	return nil
}

// undoCommit takes back the changes inv of cairn's batch commit batch: one
// commit restoring their files to their content before it (a file changed
// since is left alone), recording the inverse changes.
func (b *Backend) undoCommit(ctx context.Context, batch plumbing.Hash, inv []inverseChange) error {
	inv, err := b.inBatch(ctx, batch, inv)
	if err != nil || len(inv) == 0 {
		return err
	}
	touches := make([]identity, len(inv))
	for i, ic := range inv {
		touches[i] = ic.ident
	}
	// recordOnly: made even when every file changed since, so that every
	// process's index forgets the batch's versions.
	undo := change{op: "revert", ident: inv[0].ident, touches: touches, recordOnly: true,
		check:   func(*entry) error { return nil },
		message: revertMessage(ctx, batch, inv),
		apply: func(ctx context.Context, root string) error {
			return b.restoreFiles(ctx, root, batch, inv)
		},
	}
	commit, err := b.write(ctx, undo)
	if err != nil {
		return fmt.Errorf("git backend: undo commit %s: %w", batch, err)
	}
	b.log.InfoContext(ctx, "git backend: batch undone", "batch", batch.String(), "commit", commit.String(), "changes", len(inv))
	return nil
}

// heldByOtherLocked returns another instance the index holds at ident's
// resource ("" when none): a delete of id whose record never reached the
// branch while a new instance took the name (a file removed, then added
// again and imported). imu is held.
func (b *Backend) heldByOtherLocked(id string, ident identity) string {
	for oid, o := range b.idx {
		if oid != id && o.id.Kind == ident.Kind && o.id.Namespace == ident.Namespace && o.id.Name == ident.Name {
			return oid
		}
	}
	return ""
}

// unrecordedValue reads the value of an instance that no commit on the
// branch records (notFound: entryFresh's answer) from what the hub knows,
// its version's context: the branch was rewritten (a force-push) without
// cairn's commits about it. The commit the context names, when this cache
// still has it (it predates the rewrite), holds the version exactly; else
// the file at the context's path at the tip is the value (the rewrite kept
// the file, in a commit of someone else's; the next sync records it again,
// gitsync). Without either, it says what happened and what to do.
func (b *Backend) unrecordedValue(ctx context.Context, req cairn.GetValueRequest, notFound error) (json.RawMessage, error) {
	id, rv := req.InstanceID, req.ResourceVersion
	c := parseContext(req.Context)
	if !b.unrecorded(id, req.Context) || c.ResourceVersion != rv {
		return nil, notFound
	}
	ident, err := resolveIdentity(ctx, id, req.Context, nil)
	if err != nil {
		return nil, notFound
	}
	ident.Path = c.Path
	if c.Commit != "" {
		if v, err := b.readAt(ctx, plumbing.NewHash(c.Commit), ident); err == nil {
			return v, nil
		}
	}
	b.mu.Lock()
	tip := b.tip
	b.mu.Unlock()
	where := ident.String()
	if ident.Path != "" {
		where = ident.Path
	}
	if !tip.IsZero() {
		v, err := b.readAt(ctx, tip, ident)
		if err == nil {
			b.log.DebugContext(ctx, "git backend: read an instance no commit records from its file at the tip", "instance", id, "resource", ident.String(), "tip", tip.String())
			return v, nil
		}
		if !cairn.HasCode(err, cairn.CodeNotFound) {
			return nil, err
		}
	}
	return nil, errorf(cairn.CodeNotFound, id, "TypeInstance %q (%s, resource version %d) is gone from branch %s of %s: no commit records it (Cairn-Instance trailer) "+
		"and its file %s is not at the tip, so the branch was rewritten without it; push its file again at that path (cairn reads it from there, and its next update records it again), or delete the TypeInstance",
		id, ident, rv, b.cfg.Branch, b.cfg.URL, where)
}

// unrecorded says whether instance id, which the index does not hold, is
// one no commit on the branch records any more, rather than one never
// written here or deleted: raw is a version context this backend made
// (naming the resource, the version and its commit), and no commit on the
// branch records its delete.
func (b *Backend) unrecorded(id string, raw json.RawMessage) bool {
	c := parseContext(raw)
	if c.Kind == "" || c.Commit == "" || c.ResourceVersion < 1 {
		return false
	}
	b.imu.RLock()
	defer b.imu.RUnlock()
	return b.idx[id] == nil && !b.deleted[id]
}
