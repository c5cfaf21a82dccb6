package git

// Propose mode (issue 8 item 3).
//
// With mode: propose, a write does not push to the target branch. The
// change is committed exactly as in commit mode (same file, same message
// and Cairn-* trailers) on top of the target branch's tip, pushed to a
// branch of its own, cairn/proposal/<id> (<id>: 12 random hex digits), and
// a pull request (merge request) from that branch into the target branch is
// opened through the backend's SCM provider.
//
// What the hub holds while a proposal is open. OnCreate and OnUpdate
// succeed once the branch is pushed and the pull request opened: the hub
// stores the new resource version as for any write, and the context the
// backend returns for it is the commit-mode context plus
//
//	proposal: {id, provider, number, url, branch, base}
//
// with commit naming the commit on the proposal branch. The version's
// value is the file at that commit (GetValue reads it from the proposal
// branch, fetching it when another process made it), so cairn shows the
// proposed value at once, marked by its context as proposed, not merged;
// the target branch is unchanged until someone merges the pull request.
// Merging upstream needs nothing more from cairn: the commit (and its
// trailers) becomes part of the target branch's history, where the index
// finds it on the next fetch, and the version's value stays the same
// commit's file. The REST API answers such a write 202 Accepted with the
// proposal; `cairn proposals` lists, shows, merges and closes them.
//
// A later write to an instance whose previous version's proposal is still
// open is stacked on it (its branch starts at that proposal's commit), so
// the newer pull request carries every change cairn shows and merging it
// merges both; once the previous proposal is merged or closed, a new one
// starts at the target branch's tip again.
//
// Limits, stated plainly: closing a pull request without merging does not
// roll the hub back; the instance keeps showing the proposed value until it
// is written again (or deleted: deleting an instance whose creation was
// never merged closes that pull request). A delete of an instance that is
// on the target branch opens a pull request removing its file, which is
// logged (the hub deletes the instance at once, so nothing records it).
// Locks (OnLock, GetLockedBy) work only once the instance is on the target
// branch. The target branch must exist before the first proposal.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	gogit "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/backend/controller"
	"github.com/cairn-dev/cairn/backend/scm"
)

// ProposalBranchPrefix starts every proposal branch's name.
const ProposalBranchPrefix = "cairn/proposal/"

// Proposal is a change waiting in a pull request, as a resource version's
// context carries it ("proposal").
type Proposal struct {
	ID       string `json:"id"`
	Provider string `json:"provider"`
	Number   int    `json:"number"`
	URL      string `json:"url"`
	Branch   string `json:"branch"`
	Base     string `json:"base,omitempty"`
}

// ProposalOf returns the proposal a resource version's context carries,
// nil when it carries none.
func ProposalOf(context json.RawMessage) *Proposal { return proposalOf(context) }

func proposalOf(raw json.RawMessage) *Proposal {
	var c struct {
		Proposal *Proposal `json:"proposal"`
	}
	if len(raw) == 0 || json.Unmarshal(raw, &c) != nil || c.Proposal == nil || c.Proposal.ID == "" {
		return nil
	}
	return c.Proposal
}

// Provider returns the SCM provider of a propose-mode backend; tokens are
// read with getenv.
func (c Config) Provider(getenv func(string) string) (scm.Provider, error) {
	if c.SCM == nil {
		return nil, cairn.Errorf(cairn.CodeInvalid, "git backend: no scm provider is configured (mode %q)", c.Mode)
	}
	return scm.New(*c.SCM, scm.Options{Getenv: getenv})
}

func newProposalID() (string, error) {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("git backend: proposal id: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// proposalContext is a version's context with its proposal.
func (b *Backend) proposalContext(ident identity, rv int, commit plumbing.Hash, p *Proposal) json.RawMessage {
	raw := b.versionContext(ident, rv, commit)
	if p == nil {
		return raw
	}
	var m map[string]any
	_ = json.Unmarshal(raw, &m) // our own JSON object
	m["proposal"] = p
	out, _ := json.Marshal(m)
	return out
}

// propose commits ch on a proposal branch and opens a pull request for it.
// prev is the previous version's context: when it carries a proposal that
// is still open, the new one is stacked on it.
func (b *Backend) propose(ctx context.Context, ch change, prev json.RawMessage) (json.RawMessage, error) {
	prevProp := proposalOf(prev)
	stack := plumbing.ZeroHash
	if prevProp != nil && prevProp.Number > 0 {
		pr, err := b.scm.Get(ctx, prevProp.Number)
		if err != nil {
			return nil, fmt.Errorf("git backend: state of proposal %s: %w", prevProp.ID, err)
		}
		if pr.State == scm.StateOpen {
			if c := parseContext(prev).Commit; c != "" {
				stack = plumbing.NewHash(c)
			}
		}
	}

	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.openLocked(ctx); err != nil {
		return nil, err
	}
	if err := b.fetchLocked(ctx); err != nil {
		return nil, err
	}
	if b.tip.IsZero() {
		return nil, errorf(cairn.CodeInvalid, ch.id, "propose mode: branch %s does not exist on %s yet; a pull request needs a branch to merge into", b.cfg.Branch, b.cfg.URL)
	}
	b.imu.RLock()
	e := b.idx[ch.id]
	b.imu.RUnlock()
	switch {
	case e != nil || ch.op == opCreate:
		if err := ch.check(e); err != nil {
			return nil, err
		}
	case stack.IsZero() && prevProp == nil:
		return nil, errorf(cairn.CodeNotFound, ch.id, "TypeInstance %q not found", ch.id)
	}
	base, carried := b.tip, (*Proposal)(nil)
	if !stack.IsZero() {
		if err := b.haveCommitLocked(ctx, stack, prevProp.Branch); err != nil {
			return nil, err
		}
		carried = prevProp
		base = stack
	}
	if e == nil && base == b.tip && ch.op == opUpdate {
		// Not on the branch (its creation was closed unmerged): this
		// proposal creates it, and says so in its trailers.
		ch.op = opCreate
	}

	// commitLocked works on b.tip; point it at the base for this commit
	// (the lock is held, and tip is restored before anything reads it).
	tip := b.tip
	b.tip = base
	commit, changed, err := b.commitLocked(ctx, []change{ch})
	b.tip = tip
	if err != nil {
		return nil, err
	}
	if !changed {
		// Nothing to propose: the version is the base's file. On the
		// branch's tip, record it as commit mode does for an unchanged
		// write, so reads find the instance.
		if carried == nil {
			b.imu.Lock()
			b.applyIndex(ch.id, ch.op, ch.rv, base, ch.ident)
			b.imu.Unlock()
		}
		return b.proposalContext(ch.ident, ch.rv, base, carried), nil
	}
	pid, err := newProposalID()
	if err != nil {
		return nil, err
	}
	branch := plumbing.NewBranchReferenceName(ProposalBranchPrefix + pid)
	if err := b.repo.Storer.SetReference(plumbing.NewHashReference(branch, commit)); err != nil {
		return nil, fmt.Errorf("git backend: %w", err)
	}
	// The local branch serves the push alone: none is left behind.
	defer b.dropLocalRef(ctx, branch)
	spec := config.RefSpec(branch.String() + ":" + branch.String())
	if err := b.push(ctx, spec); err != nil {
		return nil, cairn.Errorf(cairn.CodeUnavailable, "git backend: push %s to %s: %w", branch.Short(), b.cfg.URL, err)
	}
	msg := message(ctx, ch)
	title, trailerText, _ := strings.Cut(msg, "\n\n")
	body := fmt.Sprintf("Proposed through cairn: %s.\n\nMerging this pull request applies the change to `%s`; until then cairn shows the proposed value as resource version %d of TypeInstance `%s`.\n\n```\n%s```\n",
		title, b.cfg.Branch, ch.rv, ch.id, trailerText)
	pr, err := b.scm.Open(ctx, scm.NewPullRequest{Title: title, Body: body, Head: branch.Short(), Base: b.cfg.Branch})
	if err != nil {
		// Leave no orphan branch behind when possible.
		b.deleteBranchLocked(context.WithoutCancel(ctx), branch)
		return nil, fmt.Errorf("git backend: open a pull request for %s: %w", branch.Short(), err)
	}
	p := &Proposal{ID: pid, Provider: b.scm.Name(), Number: pr.Number, URL: pr.URL, Branch: branch.Short(), Base: b.cfg.Branch}
	b.log.InfoContext(ctx, "git backend: proposed", "op", ch.op, "instance", ch.id, "resource", ch.ident.String(),
		"commit", commit.String(), "branch", p.Branch, "url", p.URL)
	return b.proposalContext(ch.ident, ch.rv, commit, p), nil
}

// haveCommitLocked makes sure commit is in the cache, fetching the
// proposal branch (another process may have made it), else the target
// branch (the proposal may be merged and its branch deleted).
func (b *Backend) haveCommitLocked(ctx context.Context, commit plumbing.Hash, branch string) error {
	if _, err := b.repo.CommitObject(commit); err == nil {
		return nil
	} else if !errors.Is(err, plumbing.ErrObjectNotFound) {
		return fmt.Errorf("git backend: commit %s: %w", commit, err)
	}
	if branch != "" {
		ref := plumbing.NewBranchReferenceName(branch)
		spec := config.RefSpec("+" + ref.String() + ":" + plumbing.NewRemoteReferenceName("origin", branch).String())
		err := b.repo.FetchContext(ctx, &gogit.FetchOptions{RemoteName: "origin", RefSpecs: []config.RefSpec{spec}, Auth: b.auth, Tags: gogit.NoTags})
		if err != nil && !errors.Is(err, gogit.NoErrAlreadyUpToDate) {
			b.log.DebugContext(ctx, "git backend: fetch proposal branch", "branch", branch, "error", err)
		}
		if _, err := b.repo.CommitObject(commit); err == nil {
			return nil
		}
	}
	if err := b.fetchLocked(ctx); err != nil {
		return err
	}
	if _, err := b.repo.CommitObject(commit); err != nil {
		return cairn.Errorf(cairn.CodeNotFound, "git backend: commit %s (proposal branch %s) is neither on that branch nor on %s: %w", commit, branch, b.cfg.Branch, err)
	}
	return nil
}

// proposalValue reads a version whose context carries a proposal: the file
// at the context's commit. ok is false for other versions.
func (b *Backend) proposalValue(ctx context.Context, req cairn.GetValueRequest) (json.RawMessage, bool, error) {
	p := proposalOf(req.Context)
	c := parseContext(req.Context)
	if p == nil || c.ResourceVersion != req.ResourceVersion || c.Commit == "" || c.Kind == "" {
		return nil, false, nil
	}
	g, v := splitAPIVersion(c.APIVersion)
	ident := identity{Kind: controller.Kind{Group: g, Version: v, Kind: c.Kind}, Namespace: c.Namespace, Name: c.Name}
	commit := plumbing.NewHash(c.Commit)
	b.mu.Lock()
	err := b.openLocked(ctx)
	if err == nil {
		err = b.haveCommitLocked(ctx, commit, p.Branch)
	}
	b.mu.Unlock()
	if err != nil {
		return nil, true, err
	}
	val, err := b.readAt(ctx, commit, ident)
	return val, true, err
}

// proposeDelete: an instance on the target branch gets a pull request
// removing its file (logged); one whose creation is still a proposal has
// that proposal closed.
func (b *Backend) proposeDelete(ctx context.Context, req cairn.OnDeleteRequest) error {
	id := req.InstanceID
	p := proposalOf(req.Context)
	e, err := b.entryFresh(ctx, id)
	if cairn.HasCode(err, cairn.CodeNotFound) && p != nil {
		return b.closeProposal(ctx, p)
	}
	if cairn.HasCode(err, cairn.CodeNotFound) && cairn.IsRollback(ctx) {
		// Recovery taking back a create that never committed: the
		// context it has is the one sent, without the proposal a dead
		// process opened for it.
		if cerr := b.closeOrphans(ctx, id, func(op string, rv int) bool { return op != opDelete && rv == 1 }); cerr != nil {
			return cerr
		}
	}
	if err != nil {
		return err
	}
	ident := *b.identityOf(e)
	raw, err := b.propose(ctx, change{
		op: opDelete, id: id, ident: ident, touches: []identity{ident},
		check: func(e *entry) error {
			if e == nil {
				return errorf(cairn.CodeNotFound, id, "TypeInstance %q not found", id)
			}
			return checkLock(e, id, req.OwnerID, "delete")
		},
		apply: func(ctx context.Context, root string) error {
			err := b.ctl.Delete(ctx, root, ident.Kind, ident.Namespace, ident.Name)
			if cairn.HasCode(err, cairn.CodeNotFound) {
				return nil
			}
			return err
		},
	}, req.Context)
	if err != nil {
		return err
	}
	if dp := proposalOf(raw); dp != nil {
		b.log.InfoContext(ctx, "git backend: deletion proposed; the hub deletes the instance now", "instance", id, "url", dp.URL, "branch", dp.Branch)
	}
	return nil
}

// withdraw is OnDeleteRevision in propose mode (the hub rolling back a
// failed update): the version's pull request is closed.
func (b *Backend) withdraw(ctx context.Context, req cairn.OnDeleteRevisionRequest) error {
	p := proposalOf(req.Context)
	if p == nil || parseContext(req.Context).ResourceVersion != req.ResourceVersion {
		if cairn.IsRollback(ctx) {
			// Recovery, with the context sent (the previous version's):
			// a proposal this version made, if any, is found by its
			// commit.
			return b.closeOrphans(ctx, req.InstanceID, func(op string, rv int) bool { return op != opDelete && rv == req.ResourceVersion })
		}
		return nil // the version made no proposal of its own
	}
	return b.closeProposal(ctx, p)
}

// dropLocalRef removes a proposal's local branch, which only its push
// needed (reads fetch proposal branches into remote-tracking refs).
func (b *Backend) dropLocalRef(ctx context.Context, branch plumbing.ReferenceName) {
	if err := b.repo.Storer.RemoveReference(branch); err != nil {
		b.log.WarnContext(ctx, "git backend: remove the local proposal branch", "branch", branch.Short(), "error", err)
	}
}

// closeOrphans closes the open pull request of, and deletes, every
// proposal branch whose commit records a change of instance id that match
// accepts (its operation and resource version). A process that died after
// it opened a pull request and before the hub's store committed the write
// (or recorded the pull request) left it: recovery, which has only the
// context the write was sent with, finds it by the Cairn-* trailers of
// the branch's tip commit. Merging it would apply a change the hub does
// not have.
func (b *Backend) closeOrphans(ctx context.Context, id string, match func(op string, rv int) bool) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.openLocked(ctx); err != nil {
		return err
	}
	rem, err := b.repo.Remote("origin")
	if err != nil {
		return fmt.Errorf("git backend: %w", err)
	}
	refs, err := rem.ListContext(ctx, &gogit.ListOptions{Auth: b.auth})
	if err != nil {
		return cairn.Errorf(cairn.CodeUnavailable, "git backend: list the branches of %s: %w", b.cfg.URL, err)
	}
	var branches []*plumbing.Reference
	for _, r := range refs {
		if r.Name().IsBranch() && strings.HasPrefix(r.Name().Short(), ProposalBranchPrefix) {
			branches = append(branches, r)
		}
	}
	if len(branches) == 0 {
		return nil
	}
	spec := config.RefSpec("+" + plumbing.NewBranchReferenceName(ProposalBranchPrefix).String() + "*:" +
		plumbing.NewRemoteReferenceName("origin", ProposalBranchPrefix).String() + "*")
	err = b.repo.FetchContext(ctx, &gogit.FetchOptions{RemoteName: "origin", RefSpecs: []config.RefSpec{spec}, Auth: b.auth, Tags: gogit.NoTags})
	if err != nil && !errors.Is(err, gogit.NoErrAlreadyUpToDate) {
		return cairn.Errorf(cairn.CodeUnavailable, "git backend: fetch the proposal branches of %s: %w", b.cfg.URL, err)
	}
	for _, r := range branches {
		c, err := b.repo.CommitObject(r.Hash())
		if err != nil || !recordsChange(c.Message, id, match) {
			continue
		}
		branch := r.Name().Short()
		pr, open, err := b.scm.OpenFor(ctx, branch, b.cfg.Branch)
		if err != nil {
			return fmt.Errorf("git backend: find the pull request of %s: %w", branch, err)
		}
		if open {
			if err := b.scm.Close(ctx, pr.Number); err != nil {
				return fmt.Errorf("git backend: close the pull request %s of %s: %w", pr.URL, branch, err)
			}
		}
		b.deleteBranchLocked(ctx, r.Name())
		_ = b.repo.Storer.RemoveReference(plumbing.NewRemoteReferenceName("origin", branch))
		b.log.InfoContext(ctx, "git backend: closed the proposal of a write that never committed", "instance", id, "branch", branch, "url", pr.URL)
	}
	return nil
}

// recordsChange reports whether a commit message records a change of
// instance id that match accepts, in a single write's trailers or a
// batch's Cairn-Change lines.
func recordsChange(msg, id string, match func(op string, rv int) bool) bool {
	if changes := batchTrailers(msg); len(changes) > 0 {
		for _, c := range changes {
			if c.id == id && match(c.op, c.rv) {
				return true
			}
		}
		return false
	}
	t := trailers(msg)
	rv, _ := strconv.Atoi(t[trVersion])
	return t[trInstance] == id && match(t[trOperation], rv)
}

// closeProposal closes p unless it is no longer open.
func (b *Backend) closeProposal(ctx context.Context, p *Proposal) error {
	pr, err := b.scm.Get(ctx, p.Number)
	if err != nil {
		return fmt.Errorf("git backend: proposal %s: %w", p.ID, err)
	}
	if pr.State != scm.StateOpen {
		return nil
	}
	if err := b.scm.Close(ctx, p.Number); err != nil {
		return fmt.Errorf("git backend: close proposal %s: %w", p.ID, err)
	}
	b.log.InfoContext(ctx, "git backend: proposal closed", "proposal", p.ID, "url", p.URL)
	return nil
}

// proposedDeleteChange deletes, in propose mode, an instance that is on no
// branch yet because the proposal creating it is not merged: on a proposal
// stacked on that one its file goes; on the target branch there is
// nothing to delete.
func (b *Backend) proposedDeleteChange(ctx context.Context, req cairn.OnDeleteRequest) change {
	id := req.InstanceID
	ident, err := resolveIdentity(ctx, id, req.Context, nil)
	return change{
		op: opDelete, id: id, ident: ident, touches: []identity{ident},
		check: func(e *entry) error {
			if err != nil {
				return err
			}
			if e != nil {
				return checkLock(e, id, req.OwnerID, "delete")
			}
			return nil
		},
		apply: func(ctx context.Context, root string) error {
			err := b.ctl.Delete(ctx, root, ident.Kind, ident.Namespace, ident.Name)
			if cairn.HasCode(err, cairn.CodeNotFound) {
				return nil
			}
			return err
		},
	}
}

// proposeBatch commits every change as one commit on one proposal branch
// and opens one pull request for it (OnBatch in propose mode). The commit
// starts at the target branch's tip, or, when writes of the batch follow
// versions still in open proposals, at the newest of those proposals'
// commits that contains all the others (a stack reconcile's next change
// while its previous pull request is open), so that merging the new pull
// request merges everything cairn shows. Proposals that are not on one
// line cannot all be carried; the batch then starts at the tip.
func (b *Backend) proposeBatch(ctx context.Context, chs []change, at []int, prevs []json.RawMessage, out cairn.BatchResult) (cairn.BatchResult, error) {
	var opens []openProposal
	seen := map[int]bool{}
	for _, prev := range prevs {
		p := proposalOf(prev)
		if p == nil || p.Number <= 0 || seen[p.Number] {
			continue
		}
		seen[p.Number] = true
		pr, err := b.scm.Get(ctx, p.Number)
		if err != nil {
			return cairn.BatchResult{}, fmt.Errorf("git backend: state of proposal %s: %w", p.ID, err)
		}
		if c := parseContext(prev).Commit; pr.State == scm.StateOpen && c != "" {
			opens = append(opens, openProposal{p: p, commit: plumbing.NewHash(c)})
		}
	}

	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.openLocked(ctx); err != nil {
		return cairn.BatchResult{}, err
	}
	if err := b.fetchLocked(ctx); err != nil {
		return cairn.BatchResult{}, err
	}
	if b.tip.IsZero() {
		return cairn.BatchResult{}, errorf(cairn.CodeInvalid, chs[0].id, "propose mode: branch %s does not exist on %s yet; a pull request needs a branch to merge into", b.cfg.Branch, b.cfg.URL)
	}
	base := b.tip
	var carried *Proposal
	for _, o := range opens {
		if err := b.haveCommitLocked(ctx, o.commit, o.p.Branch); err != nil {
			return cairn.BatchResult{}, err
		}
	}
	for _, o := range opens {
		if b.containsAll(o.commit, opens) {
			base, carried = o.commit, o.p
			break
		}
	}
	b.imu.RLock()
	for j := range chs {
		ch := &chs[j]
		e := b.idx[ch.id]
		var err error
		switch {
		case e != nil || ch.op == opCreate:
			err = ch.check(e)
		case ch.op == opUpdate && proposalOf(prevs[j]) == nil:
			err = errorf(cairn.CodeNotFound, ch.id, "TypeInstance %q not found", ch.id)
		case ch.op == opDelete:
			err = ch.check(nil)
		}
		if err != nil {
			b.imu.RUnlock()
			return cairn.BatchResult{}, err
		}
		if e == nil && carried == nil && ch.op == opUpdate {
			// Not on the branch (its creation was closed unmerged): this
			// proposal creates it, and says so in its trailers.
			ch.op = opCreate
		}
	}
	b.imu.RUnlock()

	tip := b.tip
	b.tip = base
	commit, changed, err := b.commitLocked(ctx, chs)
	b.tip = tip
	if err != nil {
		return cairn.BatchResult{}, err
	}
	if !changed {
		if carried == nil {
			b.imu.Lock()
			for _, ch := range chs {
				b.applyIndex(ch.id, ch.op, ch.rv, base, ch.ident)
			}
			b.imu.Unlock()
		}
		for j, ch := range chs {
			if ch.op != opDelete {
				out.Contexts[at[j]] = b.proposalContext(ch.ident, ch.rv, base, carried)
			}
		}
		return out, nil
	}
	pid, err := newProposalID()
	if err != nil {
		return cairn.BatchResult{}, err
	}
	branch := plumbing.NewBranchReferenceName(ProposalBranchPrefix + pid)
	if err := b.repo.Storer.SetReference(plumbing.NewHashReference(branch, commit)); err != nil {
		return cairn.BatchResult{}, fmt.Errorf("git backend: %w", err)
	}
	defer b.dropLocalRef(ctx, branch)
	spec := config.RefSpec(branch.String() + ":" + branch.String())
	if err := b.push(ctx, spec); err != nil {
		return cairn.BatchResult{}, cairn.Errorf(cairn.CodeUnavailable, "git backend: push %s to %s: %w", branch.Short(), b.cfg.URL, err)
	}
	msg := message(ctx, chs[0])
	if len(chs) > 1 {
		msg = batchMessage(ctx, chs)
	}
	title, rest, _ := strings.Cut(msg, "\n\n")
	body := fmt.Sprintf("Proposed through cairn: %s.\n\nMerging this pull request applies the change%s to `%s`; until then cairn shows the proposed values as the TypeInstances' latest resource versions.\n\n```\n%s```\n",
		title, plural(len(chs)), b.cfg.Branch, rest)
	if carried != nil {
		body += fmt.Sprintf("\nIt carries the open pull request %s (%s), on which it is stacked; merging this one merges both.\n", carried.URL, carried.Branch)
	}
	pr, err := b.scm.Open(ctx, scm.NewPullRequest{Title: title, Body: body, Head: branch.Short(), Base: b.cfg.Branch})
	if err != nil {
		b.deleteBranchLocked(context.WithoutCancel(ctx), branch)
		return cairn.BatchResult{}, fmt.Errorf("git backend: open a pull request for %s: %w", branch.Short(), err)
	}
	p := &Proposal{ID: pid, Provider: b.scm.Name(), Number: pr.Number, URL: pr.URL, Branch: branch.Short(), Base: b.cfg.Branch}
	b.log.InfoContext(ctx, "git backend: proposed a batch", "changes", len(chs), "commit", commit.String(), "branch", p.Branch, "url", p.URL)
	for j, ch := range chs {
		if ch.op != opDelete {
			out.Contexts[at[j]] = b.proposalContext(ch.ident, ch.rv, commit, p)
		}
	}
	out.Token = fmt.Sprintf("%d %s", pr.Number, p.Branch)
	return out, nil
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// openProposal is an open pull request a batch's writes follow.
type openProposal struct {
	p      *Proposal
	commit plumbing.Hash
}

// containsAll reports whether every open proposal's commit is c or one of
// its ancestors.
func (b *Backend) containsAll(c plumbing.Hash, opens []openProposal) bool {
	head, err := b.repo.CommitObject(c)
	if err != nil {
		return false
	}
	for _, o := range opens {
		if o.commit == c {
			continue
		}
		other, err := b.repo.CommitObject(o.commit)
		if err != nil {
			return false
		}
		if ok, err := other.IsAncestor(head); err != nil || !ok {
			return false
		}
	}
	return true
}

// deleteBranch deletes a proposal branch on the remote (an undone batch's);
// a failure is logged, not returned: the pull request is closed already.
func (b *Backend) deleteBranch(ctx context.Context, branch string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.openLocked(ctx); err != nil {
		b.log.WarnContext(ctx, "git backend: could not delete the proposal branch", "branch", branch, "error", err)
		return
	}
	b.deleteBranchLocked(ctx, plumbing.NewBranchReferenceName(branch))
}

func (b *Backend) deleteBranchLocked(ctx context.Context, branch plumbing.ReferenceName) {
	del := config.RefSpec(":" + branch.String())
	if err := b.push(ctx, del); err != nil {
		b.log.WarnContext(ctx, "git backend: could not delete the proposal branch", "branch", branch.Short(), "error", err)
	}
}
