package git

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	gogit "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/index"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/plumbing/transport"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/backend/controller"
	"github.com/cairn-dev/cairn/backend/controller/template"
)

// Operations, as named in commit messages and the Cairn-Operation trailer.
const (
	opCreate         = "create"
	opUpdate         = "update"
	opDelete         = "delete"
	opDeleteRevision = "delete-revision"
)

// Trailers of the backend's commits: the index is rebuilt from them.
const (
	trInstance  = "Cairn-Instance"
	trVersion   = "Cairn-Resource-Version"
	trOperation = "Cairn-Operation"
	trResource  = "Cairn-Resource"
	trActor     = "Cairn-Actor"
	// trImpersonator names the authenticated user who acted as the actor
	// (Impersonate-User, kubectl --as); absent when the actor acted as
	// itself.
	trImpersonator = "Cairn-Impersonator"
	// trSource names the commit of a change made outside cairn that a
	// sync imported (sync.go): the resource version's file is there.
	trSource = "Cairn-Source"
)

// change is one write: preconditions checked against the index (again
// after every fetch) and the controller calls that make it.
type change struct {
	op    string
	id    string
	rv    int
	ident identity
	check func(e *entry) error
	apply func(ctx context.Context, root string) error
	// source, when set, is the outside commit a sync imports: the tree is
	// left alone and an empty commit records the change (sync.go).
	source plumbing.Hash
	// recordOnly makes the commit even though no file changed: its
	// trailers are the change (the undo of an import, sync.go).
	recordOnly bool
	// message, when set, is the commit message (an undo's revert commit).
	message string
	// messageFunc, when set, writes the commit message once the changes
	// are applied (rotate-keys counts the files it rewrote).
	messageFunc func(ctx context.Context, chs []change) string
	// touches are the resources whose files apply may change (through
	// the controller); nil when it may change others (a key rotation):
	// then the whole work tree is compared (commitLocked).
	touches []identity
	// actor, when set, is who asked for the change (a group commit's
	// members differ), with the authenticated user who impersonated them;
	// else the write's context says.
	actor, impersonator string
}

// who returns who asked for ch: the actor ("unknown" when nobody says) and
// the user who impersonated it ("" when the actor acted as itself).
func who(ctx context.Context, ch change) (actor, impersonator string) {
	actor, impersonator = ch.actor, ch.impersonator
	if actor == "" {
		actor, impersonator = cairn.Actor(ctx), cairn.Impersonator(ctx)
	}
	if actor == "" {
		actor = "unknown"
	}
	return oneLine(actor), oneLine(impersonator)
}

func (b *Backend) remoteRef() plumbing.ReferenceName {
	return plumbing.NewRemoteReferenceName("origin", b.cfg.Branch)
}

func (b *Backend) localRef() plumbing.ReferenceName {
	return plumbing.NewBranchReferenceName(b.cfg.Branch)
}

// openLocked opens the cache clone, making it (and fetching) on first use.
func (b *Backend) openLocked(ctx context.Context) error {
	if b.repo != nil {
		return nil
	}
	repo, err := gogit.PlainOpen(b.dir)
	if errors.Is(err, gogit.ErrRepositoryNotExists) {
		if err := os.MkdirAll(b.dir, 0o700); err != nil {
			return fmt.Errorf("git backend: cache directory: %w", err)
		}
		repo, err = gogit.PlainInit(b.dir, false)
		if err != nil {
			return fmt.Errorf("git backend: init the cache %s: %w", b.dir, err)
		}
		if _, err := repo.CreateRemote(&config.RemoteConfig{Name: "origin", URLs: []string{b.cfg.URL}}); err != nil {
			return fmt.Errorf("git backend: init the cache %s: %w", b.dir, err)
		}
		head := plumbing.NewSymbolicReference(plumbing.HEAD, b.localRef())
		if err := repo.Storer.SetReference(head); err != nil {
			return fmt.Errorf("git backend: init the cache %s: %w", b.dir, err)
		}
	} else if err != nil {
		return fmt.Errorf("git backend: open the cache %s: %w", b.dir, err)
	}
	b.repo = repo
	if err := b.fetchLocked(ctx); err != nil {
		b.repo = nil
		return err
	}
	return nil
}

// fetchLocked brings the remote branch into the cache and indexes the new
// commits.
func (b *Backend) fetchLocked(ctx context.Context) error {
	spec := config.RefSpec("+" + b.localRef().String() + ":" + b.remoteRef().String())
	err := b.repo.FetchContext(ctx, &gogit.FetchOptions{
		RemoteName: "origin",
		RefSpecs:   []config.RefSpec{spec},
		Auth:       b.auth,
		Tags:       gogit.NoTags,
	})
	switch {
	case err == nil, errors.Is(err, gogit.NoErrAlreadyUpToDate):
	case errors.Is(err, transport.ErrEmptyRemoteRepository), errors.Is(err, gogit.NoMatchingRefSpecError{}):
		// No branch yet: the first commit creates it.
		b.tip = plumbing.ZeroHash
		return nil
	default:
		// The URL may carry a user name; credentials are never in it (they
		// are referenced from the environment or files), so it is safe.
		return cairn.Errorf(cairn.CodeUnavailable, "git backend: fetch %s from %s: %w", b.cfg.Branch, b.cfg.URL, cairn.BoundError(err, cairn.MaxErrorText))
	}
	ref, err := b.repo.Reference(b.remoteRef(), true)
	if errors.Is(err, plumbing.ErrReferenceNotFound) {
		b.tip = plumbing.ZeroHash
		return nil
	}
	if err != nil {
		return fmt.Errorf("git backend: %w", err)
	}
	b.tip = ref.Hash()
	return b.scanLocked()
}

// refresh fetches, under the repository lock.
func (b *Backend) refresh(ctx context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.openLocked(ctx); err != nil {
		return err
	}
	return b.fetchLocked(ctx)
}

// scanLocked reads the trailers of the commits between scanned and tip,
// oldest first, into the index.
func (b *Backend) scanLocked() error {
	if b.tip.IsZero() || b.tip == b.scanned {
		return nil
	}
	iter, err := b.repo.Log(&gogit.LogOptions{From: b.tip})
	if err != nil {
		return fmt.Errorf("git backend: read history: %w", err)
	}
	var commits []*object.Commit
	err = iter.ForEach(func(c *object.Commit) error {
		if c.Hash == b.scanned {
			return storer.ErrStop
		}
		commits = append(commits, c)
		return nil
	})
	if err != nil {
		return fmt.Errorf("git backend: read history: %w", err)
	}
	slices.Reverse(commits)
	b.imu.Lock()
	defer b.imu.Unlock()
	for _, c := range commits {
		b.indexCommit(c.Hash, c.Message)
	}
	b.scanned = b.tip
	return nil
}

// trailers parses "Key: value" lines of a commit message's last paragraph.
func trailers(msg string) map[string]string {
	paras := strings.Split(strings.TrimSpace(msg), "\n\n")
	out := map[string]string{}
	for line := range strings.SplitSeq(paras[len(paras)-1], "\n") {
		k, v, ok := strings.Cut(line, ": ")
		if ok && strings.HasPrefix(k, "Cairn-") {
			out[k] = strings.TrimSpace(v)
		}
	}
	return out
}

// indexCommit applies one commit's trailers; imu is held.
func (b *Backend) indexCommit(hash plumbing.Hash, msg string) {
	t := trailers(msg)
	if changes := batchTrailers(msg); len(changes) > 0 {
		// An import batch (Cairn-Source at the commit's level): every
		// version's file is in the outside commit, as for one import.
		src := plumbing.NewHash(t[trSource])
		for _, c := range changes {
			if src.IsZero() {
				b.applyIndex(c.id, c.op, c.rv, hash, c.ident)
				continue
			}
			b.applyIndex(c.id, c.op, c.rv, src, c.ident)
			if e := b.idx[c.id]; e != nil && (c.op == opCreate || c.op == opUpdate) {
				e.imports[c.rv] = hash
			}
		}
		return
	}
	id, op := t[trInstance], t[trOperation]
	if id == "" {
		return // not cairn's: sync's business
	}
	rv, _ := strconv.Atoi(t[trVersion])
	src := t[trSource]
	if src == "" {
		b.applyIndex(id, op, rv, hash, parseResource(t[trResource]))
		return
	}
	b.applyIndex(id, op, rv, plumbing.NewHash(src), parseResource(t[trResource]))
	if e := b.idx[id]; e != nil && (op == opCreate || op == opUpdate) {
		e.imports[rv] = hash
	}
}

// applyIndex records a write in the index; imu is held.
func (b *Backend) applyIndex(id, op string, rv int, commit plumbing.Hash, ident identity) {
	e := b.idx[id]
	switch op {
	case opCreate:
		delete(b.deleted, id)
		e = &entry{id: ident, versions: map[int]plumbing.Hash{}, dropped: map[int]bool{}, imports: map[int]plumbing.Hash{}}
		if old := b.idx[id]; old != nil {
			e.lockedBy = old.lockedBy
		}
		e.versions[rv] = commit
		b.idx[id] = e
	case opUpdate:
		if e == nil {
			if ident.Kind.Kind == "" {
				return
			}
			// The commit that created it is not on the branch (someone
			// rewrote the history and kept only later ones): the trailer
			// names the resource, so this version is readable as it is
			// in every process that reads this branch.
			e = &entry{id: ident, versions: map[int]plumbing.Hash{}, dropped: map[int]bool{}, imports: map[int]plumbing.Hash{}}
			b.idx[id] = e
		}
		if ident.Kind.Kind != "" {
			e.id = ident
		}
		e.versions[rv] = commit
		delete(e.imports, rv)
		delete(e.dropped, rv)
	case opDeleteRevision:
		if e == nil {
			return
		}
		delete(e.versions, rv)
		delete(e.imports, rv)
		e.dropped[rv] = true
	case opDelete:
		delete(b.idx, id)
		b.deleted[id] = true
	}
}

// resourceTrailer renders an identity as "apiVersion Kind namespace/name".
func resourceTrailer(i identity) string {
	return fmt.Sprintf("%s %s %s/%s", template.APIVersion(i.Kind), i.Kind.Kind, i.Namespace, i.Name)
}

func parseResource(s string) identity {
	f := strings.Fields(s)
	if len(f) != 3 {
		return identity{}
	}
	g, v := splitAPIVersion(f[0])
	ns, name, _ := strings.Cut(f[2], "/")
	return identity{Kind: controller.Kind{Group: g, Version: v, Kind: f[1]}, Namespace: ns, Name: name}
}

// message is the commit message: a summary naming the operation, the
// resource and who asked, then the trailers.
func message(ctx context.Context, ch change) string {
	actor, imp := who(ctx, ch)
	verb := "cairn:"
	if !ch.source.IsZero() {
		verb = "cairn: sync"
	}
	summary := fmt.Sprintf("%s %s %s %s/%s", verb, ch.op, ch.ident.Kind.Kind, ch.ident.Namespace, ch.ident.Name)
	if ch.rv > 0 {
		summary += fmt.Sprintf(" (resource version %d)", ch.rv)
	}
	summary += " by " + byline(actor, imp)
	var t strings.Builder
	fmt.Fprintf(&t, "%s: %s\n", trInstance, ch.id)
	if ch.rv > 0 {
		fmt.Fprintf(&t, "%s: %d\n", trVersion, ch.rv)
	}
	fmt.Fprintf(&t, "%s: %s\n%s: %s\n%s: %s\n", trOperation, ch.op, trResource, resourceTrailer(ch.ident), trActor, actor)
	if imp != "" {
		fmt.Fprintf(&t, "%s: %s\n", trImpersonator, imp)
	}
	if !ch.source.IsZero() {
		fmt.Fprintf(&t, "%s: %s\n", trSource, ch.source)
	}
	return summary + "\n\n" + t.String()
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// byline names the actor in a summary, and who impersonated it.
func byline(actor, impersonator string) string {
	if impersonator != "" {
		return actor + " (impersonated by " + impersonator + ")"
	}
	return actor
}

// write applies ch on the branch tip, commits and pushes, retrying on a
// moved branch. It returns the commit that holds the change: the new one,
// or the tip when the change altered no file.
func (b *Backend) write(ctx context.Context, chs ...change) (plumbing.Hash, error) {
	h, _, err := b.writeChanges(ctx, chs)
	return h, err
}

// writeChanges is write that also says whether it made a commit (false:
// no file changed, and the hash is the tip that already holds the changes).
func (b *Backend) writeChanges(ctx context.Context, chs []change) (made plumbing.Hash, committed bool, err error) {
	ch := chs[0]
	if src, ok := b.importing(ctx); ok && len(chs) == 1 && !ch.recordOnly {
		// A sync's import: the version's file is in the outside commit.
		ch = b.importChange(ch, src, &importedFrom{})
		chs = []change{ch}
		defer func() {
			if err == nil {
				made = src
			}
		}()
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.openLocked(ctx); err != nil {
		return plumbing.ZeroHash, false, err
	}
	fresh := false // whether tip was fetched during this write
	for attempt := 1; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return plumbing.ZeroHash, false, fmt.Errorf("git backend: %s %s: %w", ch.op, ch.ident, err)
		}
		b.imu.RLock()
		var err error
		for i, c := range chs {
			if err = c.check(b.idx[c.id]); err != nil {
				err = &changeError{i: i, err: err}
				break
			}
		}
		b.imu.RUnlock()
		if err != nil {
			return plumbing.ZeroHash, false, err
		}
		commit, changed, err := b.commitLocked(ctx, chs)
		if err != nil {
			return plumbing.ZeroHash, false, err
		}
		if !changed && !fresh {
			// Unchanged on what may be a stale tip: make sure before
			// saying so, or a newer remote change would be hidden.
			if err := b.fetchLocked(ctx); err != nil {
				return plumbing.ZeroHash, false, err
			}
			fresh = true
			continue
		}
		if !changed && ch.op == opRotate {
			return b.tip, false, nil // no file to re-encrypt: nothing to repoint
		}
		if !changed {
			b.imu.Lock()
			for _, c := range chs {
				b.applyIndex(c.id, c.op, c.rv, b.tip, c.ident)
			}
			b.imu.Unlock()
			b.log.DebugContext(ctx, "git backend: unchanged, no commit", "op", ch.op, "instance", ch.id, "resource", ch.ident.String())
			return b.tip, false, nil
		}
		pushErr := b.pushLocked(ctx)
		if pushErr == nil {
			b.tip = commit
			if err := b.repo.Storer.SetReference(plumbing.NewHashReference(b.remoteRef(), commit)); err != nil {
				return plumbing.ZeroHash, false, fmt.Errorf("git backend: %w", err)
			}
			if err := b.scanLocked(); err != nil {
				return plumbing.ZeroHash, false, err
			}
			b.log.InfoContext(ctx, "git backend: pushed", "op", ch.op, "instance", ch.id, "resource", ch.ident.String(), "changes", len(chs), "commit", commit.String(), "attempt", attempt)
			return commit, true, nil
		}
		old := b.tip
		if err := b.fetchLocked(ctx); err != nil {
			// The push may have landed with its answer lost: unanswered
			// (cairn.ErrNoAnswer), so the hub keeps the write's intent and
			// recovery takes it back if it did, rather than forget it.
			return plumbing.ZeroHash, false, errors.Join(fmt.Errorf("git backend: push failed (%w), then %w", pushErr, err), cairn.ErrNoAnswer)
		}
		fresh = true
		if b.tip == commit {
			// The push went through but its answer was lost.
			return commit, true, nil
		}
		if b.tip == old {
			return plumbing.ZeroHash, false, cairn.Errorf(cairn.CodeUnavailable, "git backend: push to %s of %s: %w", b.cfg.Branch, b.cfg.URL, pushErr)
		}
		if attempt >= b.maxAttempts {
			return plumbing.ZeroHash, false, cairn.Errorf(cairn.CodeUnavailable, "git backend: %s %s: the branch %s kept moving; gave up after %d attempts", ch.op, ch.ident, b.cfg.Branch, attempt)
		}
		b.log.DebugContext(ctx, "git backend: branch moved, re-applying", "op", ch.op, "instance", ch.id, "attempt", attempt)
		// A little jitter keeps two writers racing each other from
		// colliding in lockstep; it is back-off, not synchronisation.
		select {
		case <-time.After(time.Duration(rand.IntN(5*attempt)) * time.Millisecond):
		case <-ctx.Done():
		}
	}
}

// resetLocked makes the work tree and index exactly the tip's tree.
func (b *Backend) resetLocked(wt *gogit.Worktree) error {
	if b.tip.IsZero() {
		if err := b.repo.Storer.RemoveReference(b.localRef()); err != nil {
			return err
		}
		if err := b.repo.Storer.SetIndex(&index.Index{Version: 2}); err != nil {
			return err
		}
		entries, err := os.ReadDir(b.dir)
		if err != nil {
			return err
		}
		for _, e := range entries {
			if e.Name() != ".git" {
				if err := os.RemoveAll(filepath.Join(b.dir, e.Name())); err != nil {
					return err
				}
			}
		}
		return nil
	}
	// HEAD names the local branch, which a fresh cache has not made yet
	// and a rejected attempt left on its own commit: point it at tip.
	if err := b.repo.Storer.SetReference(plumbing.NewHashReference(b.localRef(), b.tip)); err != nil {
		return err
	}
	if err := wt.Reset(&gogit.ResetOptions{Commit: b.tip, Mode: gogit.HardReset}); err != nil {
		return err
	}
	return wt.Clean(&gogit.CleanOptions{Dir: true})
}

// commitLocked applies chs on tip and commits; changed is false when no
// file changed. Changes that name the files they touch (locatedPaths) cost
// what they change, not the size of the tree (tree.go); others reset,
// stage and compare the whole work tree (commitScanLocked).
func (b *Backend) commitLocked(ctx context.Context, chs []change) (plumbing.Hash, bool, error) {
	ch := chs[0]
	b.pushable = nil
	paths, located := b.locatedPaths(chs)
	if !located {
		return b.commitScanLocked(ctx, chs)
	}
	if len(paths) == 0 {
		// A commit recording changes of no file (an import, its undo):
		// the work tree is left where it is; the next write brings it to
		// its base. An import of 1,000 new files then writes none of them.
		return b.commitPathsLocked(ctx, chs, nil)
	}
	if !b.wtKnown {
		// First write of this process (or after a failure left the work
		// tree unknown): one full reset.
		wt, err := b.repo.Worktree()
		if err != nil {
			return plumbing.ZeroHash, false, fmt.Errorf("git backend: %w", err)
		}
		if err := b.resetLocked(wt); err != nil {
			return plumbing.ZeroHash, false, fmt.Errorf("git backend: reset the work tree to %s: %w", b.tip, err)
		}
		b.wtAt, b.wtKnown = b.tip, true
	}
	if err := b.syncWorktreeLocked(b.tip, nil); err != nil {
		b.wtKnown = false
		return plumbing.ZeroHash, false, fmt.Errorf("git backend: bring the work tree to %s: %w", b.tip, err)
	}
	for i, c := range chs {
		if err := c.apply(ctx, b.dir); err != nil {
			// Put back what the changes before it wrote.
			if rerr := b.syncWorktreeLocked(b.tip, paths); rerr != nil {
				b.wtKnown = false
			}
			return plumbing.ZeroHash, false, &changeError{i: i, err: err}
		}
	}
	commit, changed, err := b.commitPathsLocked(ctx, chs, paths)
	if err != nil {
		b.wtKnown = false
		return plumbing.ZeroHash, false, err
	}
	if !changed && ch.source.IsZero() && !ch.recordOnly {
		return b.tip, false, nil
	}
	return commit, true, nil
}

// commitPathsLocked commits the work tree's files at paths on tip: the
// tip's tree with those entries replaced. It records the objects it wrote
// (pushable) and, when it read files of the work tree, that the work tree
// holds the new commit.
func (b *Backend) commitPathsLocked(ctx context.Context, chs []change, paths []string) (plumbing.Hash, bool, error) {
	ch := chs[0]
	base, err := b.treeOf(b.tip)
	if err != nil {
		return plumbing.ZeroHash, false, fmt.Errorf("git backend: tree of %s: %w", b.tip, err)
	}
	var written []plumbing.Hash
	edits, err := b.editsLocked(base, paths, &written)
	if err != nil {
		return plumbing.ZeroHash, false, fmt.Errorf("git backend: stage: %w", err)
	}
	if len(edits) == 0 && ch.source.IsZero() && !ch.recordOnly {
		return b.tip, false, nil
	}
	var tree plumbing.Hash
	if base != nil && len(edits) == 0 {
		tree = base.Hash
	} else if tree, err = b.buildTree(base, edits, true, &written); err != nil {
		return plumbing.ZeroHash, false, fmt.Errorf("git backend: build the tree: %w", err)
	}
	sig := object.Signature{Name: b.cfg.Author.Name, Email: b.cfg.Author.Email, When: time.Now()}
	c := &object.Commit{Author: sig, Committer: sig, Message: b.commitMessage(ctx, chs), TreeHash: tree}
	if !b.tip.IsZero() {
		c.ParentHashes = []plumbing.Hash{b.tip}
	}
	commit, err := b.storeCommit(c)
	if err != nil {
		return plumbing.ZeroHash, false, fmt.Errorf("git backend: commit: %w", err)
	}
	if err := b.repo.Storer.SetReference(plumbing.NewHashReference(b.localRef(), commit)); err != nil {
		return plumbing.ZeroHash, false, fmt.Errorf("git backend: commit: %w", err)
	}
	if len(paths) > 0 {
		b.wtAt = commit
	}
	b.pushable = &pushable{commit: commit, parent: b.tip, objects: append(written, commit)}
	return commit, true, nil
}

// commitMessage is the commit message of chs.
func (b *Backend) commitMessage(ctx context.Context, chs []change) string {
	ch := chs[0]
	msg := message(ctx, ch)
	switch {
	case ch.message != "":
		msg = ch.message
	case len(chs) > 1:
		msg = batchMessage(ctx, chs)
	}
	if ch.messageFunc != nil {
		msg = ch.messageFunc(ctx, chs)
	}
	return msg
}

// commitScanLocked resets the work tree to tip, applies chs and commits
// whatever changed in the whole tree.
func (b *Backend) commitScanLocked(ctx context.Context, chs []change) (plumbing.Hash, bool, error) {
	ch := chs[0]
	b.wtKnown = false
	wt, err := b.repo.Worktree()
	if err != nil {
		return plumbing.ZeroHash, false, fmt.Errorf("git backend: %w", err)
	}
	if err := b.resetLocked(wt); err != nil {
		return plumbing.ZeroHash, false, fmt.Errorf("git backend: reset the work tree to %s: %w", b.tip, err)
	}
	for i, c := range chs {
		if err := c.apply(ctx, b.dir); err != nil {
			return plumbing.ZeroHash, false, &changeError{i: i, err: err}
		}
	}
	if err := wt.AddWithOptions(&gogit.AddOptions{All: true}); err != nil {
		return plumbing.ZeroHash, false, fmt.Errorf("git backend: stage: %w", err)
	}
	st, err := wt.Status()
	if err != nil {
		return plumbing.ZeroHash, false, fmt.Errorf("git backend: status: %w", err)
	}
	if st.IsClean() && ch.source.IsZero() && !ch.recordOnly {
		b.wtAt, b.wtKnown = b.tip, true
		return b.tip, false, nil
	}
	sig := &object.Signature{Name: b.cfg.Author.Name, Email: b.cfg.Author.Email, When: time.Now()}
	var parents []plumbing.Hash
	if !b.tip.IsZero() {
		parents = []plumbing.Hash{b.tip}
	}
	commit, err := wt.Commit(b.commitMessage(ctx, chs), &gogit.CommitOptions{Author: sig, Committer: sig, Parents: parents, AllowEmptyCommits: !ch.source.IsZero() || ch.recordOnly})
	if err != nil {
		return plumbing.ZeroHash, false, fmt.Errorf("git backend: commit: %w", err)
	}
	b.wtAt, b.wtKnown = commit, true
	return commit, true, nil
}

func (b *Backend) pushLocked(ctx context.Context) error {
	if p := b.pushable; p != nil && p.parent == b.tip {
		return b.pushNewLocked(ctx, p)
	}
	return b.push(ctx, config.RefSpec(b.localRef().String()+":"+b.localRef().String()))
}

// push pushes spec to origin; a failure says what the remote said.
func (b *Backend) push(ctx context.Context, spec config.RefSpec) error {
	var said remoteMessages
	err := b.repo.PushContext(ctx, &gogit.PushOptions{RemoteName: "origin", RefSpecs: []config.RefSpec{spec}, Auth: b.auth, Progress: &said})
	return said.explain(err)
}

// remoteMessages collects what the remote says while it receives a push
// (its side band: the hooks' output). A refusing hook gives its reason
// there (a protected branch, a policy), and git itself reports only
// "pre-receive hook declined". Without it asked for, the hooks' output of a
// file:// push would go to this process's standard error instead.
type remoteMessages struct {
	buf []byte
}

// maxRemoteMessages bounds what is kept of the remote's messages.
const maxRemoteMessages = 4 << 10

func (m *remoteMessages) Write(p []byte) (int, error) {
	if room := maxRemoteMessages - len(m.buf); room > 0 {
		m.buf = append(m.buf, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

// explain adds the remote's messages to err, a failed push, as git prints
// them ("remote: ..."), leaving out progress lines; nil stays nil.
func (m *remoteMessages) explain(err error) error {
	if err == nil {
		return nil
	}
	// go-git's error may quote the server too (a report's reason, an HTTP
	// status line); the remote chose all of it: bounded, printable.
	err = cairn.BoundError(err, cairn.MaxErrorText)
	var lines []string
	for _, l := range strings.FieldsFunc(string(m.buf), func(r rune) bool { return r == '\n' || r == '\r' }) {
		l = strings.TrimSpace(l)
		if l == "" || progressLine.MatchString(l) {
			continue
		}
		lines = append(lines, "remote: "+l)
	}
	if len(lines) == 0 {
		return err
	}
	return fmt.Errorf("%w (%s)", err, cairn.BoundText(strings.Join(lines, "; "), cairn.MaxErrorText))
}

// progressLine is a line of git's progress output ("Resolving deltas:
// 100% (3/3), done."), which says nothing about why a push failed.
var progressLine = regexp.MustCompile(`^[A-Z][a-z]+( [a-z]+)*: +\d+% \(\d+/\d+\)`)

// readAt returns the resource's spec in commit's tree, from the value
// cache when it was read before: a commit never changes.
func (b *Backend) readAt(ctx context.Context, commit plumbing.Hash, ident identity) (json.RawMessage, error) {
	key := commit.String() + "\x00" + resourceTrailer(ident)
	if v, ok := b.values.get(key); ok {
		return v, nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.openLocked(ctx); err != nil {
		return nil, err
	}
	c, err := b.repo.CommitObject(commit)
	if errors.Is(err, plumbing.ErrObjectNotFound) {
		// Made by another process: fetch it.
		if err := b.fetchLocked(ctx); err != nil {
			return nil, err
		}
		c, err = b.repo.CommitObject(commit)
	}
	if err != nil {
		return nil, fmt.Errorf("git backend: commit %s of %s: %w", commit, ident, err)
	}
	doc, err := b.getAt(ctx, c, ident)
	if err != nil {
		return nil, err
	}
	spec, err := specOf(doc)
	if err != nil {
		return nil, fmt.Errorf("git backend: %s at %s: %w", ident, commit, err)
	}
	b.values.put(key, spec)
	return spec, nil
}

// getAt reads the resource document in c's tree: straight from the object
// store when the controller can locate the file, else through the
// controller on a checkout of the tree.
func (b *Backend) getAt(ctx context.Context, c *object.Commit, ident identity) (json.RawMessage, error) {
	notFound := cairn.Errorf(cairn.CodeNotFound, "git backend: %s not found at commit %s", ident, c.Hash)
	tree, err := c.Tree()
	if err != nil {
		return nil, fmt.Errorf("git backend: %w", err)
	}
	if b.loc != nil {
		p := ident.Path
		if p == "" {
			if p, err = b.loc.Path(ident.Kind, ident.Namespace, ident.Name, ident.Labels); err != nil {
				return nil, err
			}
		}
		f, err := tree.File(p)
		if errors.Is(err, object.ErrFileNotFound) {
			return nil, notFound
		}
		if err != nil {
			return nil, fmt.Errorf("git backend: %s: %w", p, err)
		}
		data, err := f.Contents()
		if err != nil {
			return nil, fmt.Errorf("git backend: %s: %w", p, err)
		}
		return b.decode(p, []byte(data))
	}
	root, err := os.MkdirTemp("", "cairn-git-read-")
	if err != nil {
		return nil, fmt.Errorf("git backend: %w", err)
	}
	defer os.RemoveAll(root)
	if err := checkout(tree, root); err != nil {
		return nil, fmt.Errorf("git backend: check out %s: %w", c.Hash, err)
	}
	return b.ctl.Get(ctx, root, ident.Kind, ident.Namespace, ident.Name)
}

// checkout writes tree's files under dir.
func checkout(tree *object.Tree, dir string) error {
	return tree.Files().ForEach(func(f *object.File) error {
		p := filepath.Join(dir, filepath.FromSlash(f.Name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		r, err := f.Reader()
		if err != nil {
			return err
		}
		defer r.Close()
		out, err := os.Create(p)
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, r); err != nil {
			out.Close()
			return err
		}
		return out.Close()
	})
}

// valueCache keeps specs by (commit, resource): immutable, so never stale.
// It is emptied when full rather than tracking recency: cheap, and a warm
// working set refills it at once.
type valueCache struct {
	mu sync.RWMutex
	m  map[string]json.RawMessage
}

const maxCachedValues = 4096

func (c *valueCache) get(k string) (json.RawMessage, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	v, ok := c.m[k]
	return v, ok
}

func (c *valueCache) put(k string, v json.RawMessage) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= maxCachedValues {
		clear(c.m)
	}
	c.m[k] = v
}
