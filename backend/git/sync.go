package git

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"path"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/backend/controller"
	"github.com/cairn-dev/cairn/backend/controller/template"
	"github.com/cairn-dev/cairn/hub"
	"github.com/cairn-dev/cairn/store"
)

// Sync (issue 8, part 4; seed 001 "react on events to create/delete
// instances"): changes people push to a Git backend's branch outside cairn
// become instance creations, new resource versions and deletions in the
// hub.
//
// How an outside change reaches the hub without being written back: the
// Syncer calls the hub (CreateInstances, UpdateInstances, DeleteInstance)
// with a context marking the call as an import of one outside commit
// (withImport). The hub validates the value against the Type's schema and
// calls this backend as for any write; the backend then leaves the tree
// alone and pushes an empty commit whose trailers (Cairn-Instance,
// Cairn-Resource-Version, Cairn-Operation, Cairn-Resource, Cairn-Actor and
// Cairn-Source: the outside commit) record the id → resource mapping, so
// every process and every restart rebuilds the same index, and the resource
// version's value is the file at the outside commit. Nothing is ever
// re-formatted: the person's file stays byte for byte.
//
// Where sync resumes: the last synced commit is the ref refs/cairn/synced
// in the backend's cache clone (CacheDir), which survives restarts like the
// clone itself. Not in the backend instance's annotations: writing them
// through the hub would give the backend instance a new resource version,
// which reopens the backend (and its cache) on every sync. Losing the cache
// is safe: a sync without the ref reconciles the files at the tip with the
// hub (each change is checked against the hub's state first, so nothing is
// imported twice), attributing each file to the newest commit that touched
// it; deletions are not inferred then.

// syncedRef remembers, in the cache clone, the last commit sync processed.
const syncedRef = plumbing.ReferenceName("refs/cairn/synced")

// DefaultMaxSyncEvents is how many events a Syncer keeps.
const DefaultMaxSyncEvents = 100

type importKey struct{}

type importMark struct {
	b      *Backend
	source plumbing.Hash
}

// withImport marks backend calls made for ctx as b's import of source.
func withImport(ctx context.Context, b *Backend, source plumbing.Hash) context.Context {
	return context.WithValue(ctx, importKey{}, importMark{b: b, source: source})
}

// importing returns the outside commit a write imports, if it is one.
func (b *Backend) importing(ctx context.Context) (plumbing.Hash, bool) {
	m, ok := ctx.Value(importKey{}).(importMark)
	if !ok || m.b != b || m.source.IsZero() {
		return plumbing.ZeroHash, false
	}
	return m.source, true
}

// proposing says whether a write goes to a proposal (propose mode) rather
// than the branch: an import never does, its change is on the branch already.
func (b *Backend) proposing(ctx context.Context) bool {
	_, imp := b.importing(ctx)
	return b.scm != nil && !imp
}

// importChange makes ch record an outside change: no file is touched (the
// outside commit made the change) and the commit is made even though empty.
func importChange(ch change, source plumbing.Hash) change {
	ch.source = source
	ch.apply = func(context.Context, string) error { return nil }
	return ch
}

// SyncEvent is one thing a sync did or refused, newest last in Events.
type SyncEvent struct {
	Time time.Time `json:"time"`
	// Type is "Created", "Updated", "Deleted" or "Skipped".
	Type       string `json:"type"`
	Commit     string `json:"commit"`
	Path       string `json:"path"`
	Author     string `json:"author,omitempty"`
	Resource   string `json:"resource,omitempty"`
	InstanceID string `json:"instanceId,omitempty"`
	// Reason says why a file was skipped.
	Reason string `json:"reason,omitempty"`
}

// SyncStats counts what a Syncer did since it started.
type SyncStats struct {
	Syncs      int64  `json:"syncs"`
	Failures   int64  `json:"failures"`
	Created    int64  `json:"created"`
	Updated    int64  `json:"updated"`
	Deleted    int64  `json:"deleted"`
	Skipped    int64  `json:"skipped"`
	LastCommit string `json:"lastCommit,omitempty"`
}

// SyncResult is what one Sync did.
type SyncResult struct {
	From    string `json:"from,omitempty"`
	To      string `json:"to,omitempty"`
	Created int    `json:"created"`
	Updated int    `json:"updated"`
	Deleted int    `json:"deleted"`
	Skipped int    `json:"skipped"`
}

// SyncConfig configures a Syncer.
type SyncConfig struct {
	// Hub receives the changes. Required.
	Hub *hub.Hub
	// Opener opens the backend instance (the Opener the hub uses, so both
	// share one Backend and its cache). Required.
	Opener BackendOpener
	// BackendID is the Git backend instance's id. Required.
	BackendID string
	// Logger receives the log. Nil discards.
	Logger *slog.Logger
	// MaxEvents bounds Events. Default DefaultMaxSyncEvents.
	MaxEvents int
}

// Syncer imports outside changes of one Git backend instance into the hub.
// It is safe for concurrent use; syncs of one Syncer run one at a time.
type Syncer struct {
	cfg SyncConfig
	log *slog.Logger

	run sync.Mutex // one sync at a time

	emu    sync.Mutex
	events []SyncEvent
	last   string

	syncs, failures, created, updated, deleted, skipped atomic.Int64
}

// NewSyncer returns a Syncer.
func NewSyncer(cfg SyncConfig) (*Syncer, error) {
	if cfg.Hub == nil || cfg.Opener == nil || cfg.BackendID == "" {
		return nil, errors.New("git sync: Hub, Opener and BackendID are required")
	}
	if cfg.MaxEvents <= 0 {
		cfg.MaxEvents = DefaultMaxSyncEvents
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Syncer{cfg: cfg, log: log.With("backend", cfg.BackendID)}, nil
}

// BackendID is the backend instance this Syncer syncs.
func (s *Syncer) BackendID() string { return s.cfg.BackendID }

// Events returns the last events (creations, versions, deletions and
// skipped files), oldest first.
func (s *Syncer) Events() []SyncEvent {
	s.emu.Lock()
	defer s.emu.Unlock()
	return slices.Clone(s.events)
}

// Stats returns the counters.
func (s *Syncer) Stats() SyncStats {
	s.emu.Lock()
	last := s.last
	s.emu.Unlock()
	return SyncStats{Syncs: s.syncs.Load(), Failures: s.failures.Load(), Created: s.created.Load(),
		Updated: s.updated.Load(), Deleted: s.deleted.Load(), Skipped: s.skipped.Load(), LastCommit: last}
}

func (s *Syncer) record(ev SyncEvent) {
	ev.Time = time.Now().UTC()
	s.emu.Lock()
	defer s.emu.Unlock()
	s.events = append(s.events, ev)
	if n := len(s.events) - s.cfg.MaxEvents; n > 0 {
		s.events = slices.Delete(s.events, 0, n)
	}
}

// fileChange is one resource file's change in one commit.
type fileChange struct {
	commit plumbing.Hash
	author string
	path   string
	data   []byte // the new content; nil when the file was removed
	old    []byte // the previous content; nil when the file was added
}

// step is one commit to process: its changes, none when cairn made it.
type step struct {
	commit  plumbing.Hash
	changes []fileChange
}

// Sync fetches the branch and imports every change made outside cairn
// since the last sync. A file that does not parse, names no known Type or
// fails the Type's schema is reported (log, Stats().Skipped, Events) and
// skipped; each file's change is one hub call, so none is half imported.
// An error (the remote, the hub's store) stops the sync at the commit it
// was on; the next sync resumes there.
func (s *Syncer) Sync(ctx context.Context) (SyncResult, error) {
	s.run.Lock()
	defer s.run.Unlock()
	s.syncs.Add(1)
	res, err := s.sync(ctx)
	if err != nil {
		s.failures.Add(1)
		s.log.ErrorContext(ctx, "git sync failed", "err", err)
	}
	return res, err
}

func (s *Syncer) sync(ctx context.Context) (SyncResult, error) {
	var res SyncResult
	sb, err := s.cfg.Hub.StorageBackend(ctx, s.cfg.BackendID)
	if err != nil {
		return res, fmt.Errorf("git sync %s: %w", s.cfg.BackendID, err)
	}
	if !IsGit(sb) {
		return res, cairn.Errorf(cairn.CodeInvalid, "git sync: backend %q is a %s, not a Git backend", sb.ID, sb.TypeRef.Path)
	}
	c, err := s.cfg.Opener.OpenBackend(ctx, sb)
	if err != nil {
		return res, fmt.Errorf("git sync %s: %w", sb.ID, err)
	}
	b, ok := c.(*Backend)
	if !ok {
		return res, fmt.Errorf("git sync %s: the opener returned %T, not a Git backend", sb.ID, c)
	}
	steps, from, to, err := b.pending(ctx)
	if err != nil {
		return res, fmt.Errorf("git sync %s: %w", sb.ID, err)
	}
	res.From, res.To = hashString(from), hashString(to)
	for _, st := range steps {
		for _, fc := range st.changes {
			ev, err := s.apply(ctx, b, fc)
			if err != nil {
				return res, fmt.Errorf("git sync %s: %s at %s: %w", sb.ID, fc.path, fc.commit, err)
			}
			switch ev.Type {
			case "":
				continue // nothing to do: the hub holds this already
			case "Created":
				res.Created++
				s.created.Add(1)
			case "Updated":
				res.Updated++
				s.updated.Add(1)
			case "Deleted":
				res.Deleted++
				s.deleted.Add(1)
			case "Skipped":
				res.Skipped++
				s.skipped.Add(1)
				s.log.WarnContext(ctx, "git sync: file skipped", "path", ev.Path, "commit", ev.Commit, "author", ev.Author, "reason", ev.Reason)
			}
			if ev.Type != "Skipped" {
				s.log.InfoContext(ctx, "git sync: imported", "event", ev.Type, "path", ev.Path, "commit", ev.Commit,
					"author", ev.Author, "resource", ev.Resource, "instance", ev.InstanceID)
			}
			s.record(ev)
		}
		if err := b.setSynced(st.commit); err != nil {
			return res, fmt.Errorf("git sync %s: %w", sb.ID, err)
		}
	}
	if !to.IsZero() {
		if err := b.setSynced(to); err != nil {
			return res, fmt.Errorf("git sync %s: %w", sb.ID, err)
		}
		s.emu.Lock()
		s.last = to.String()
		s.emu.Unlock()
	}
	return res, nil
}

func hashString(h plumbing.Hash) string {
	if h.IsZero() {
		return ""
	}
	return h.String()
}

// isResourceFile says whether a path can hold a resource.
func isResourceFile(p string) bool {
	switch strings.ToLower(path.Ext(p)) {
	case ".json", ".yaml", ".yml":
		return true
	}
	return false
}

// pending fetches and returns the steps since the last synced commit,
// oldest first, with that commit and the tip.
func (b *Backend) pending(ctx context.Context) (steps []step, from, to plumbing.Hash, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.openLocked(ctx); err != nil {
		return nil, from, to, err
	}
	if err := b.fetchLocked(ctx); err != nil {
		return nil, from, to, err
	}
	to = b.tip
	if to.IsZero() {
		return nil, from, to, nil
	}
	if ref, err := b.repo.Reference(syncedRef, true); err == nil {
		from = ref.Hash()
	} else if !errors.Is(err, plumbing.ErrReferenceNotFound) {
		return nil, from, to, fmt.Errorf("read %s: %w", syncedRef, err)
	}
	if from == to {
		return nil, from, to, nil
	}
	// The commits reachable from the tip but not from the last synced one
	// (git rev-list from..to), parents before children: a side branch's
	// commits and the merge that brings them in are all seen, whichever
	// parent came first.
	exclude := map[plumbing.Hash]bool{}
	if !from.IsZero() {
		if fc, err := b.repo.CommitObject(from); err == nil {
			err := object.NewCommitPreorderIter(fc, nil, nil).ForEach(func(c *object.Commit) error {
				exclude[c.Hash] = true
				return nil
			})
			if err != nil {
				return nil, from, to, fmt.Errorf("read history: %w", err)
			}
		}
	}
	var chain []*object.Commit // parents first
	found := false
	seen := map[plumbing.Hash]bool{}
	var visit func(h plumbing.Hash) error
	visit = func(h plumbing.Hash) error {
		if seen[h] {
			return nil
		}
		seen[h] = true
		if h == from {
			found = true
			return nil
		}
		if exclude[h] {
			return nil
		}
		c, err := b.repo.CommitObject(h)
		if err != nil {
			return fmt.Errorf("read history: %w", err)
		}
		for _, p := range c.ParentHashes {
			if err := visit(p); err != nil {
				return err
			}
		}
		chain = append(chain, c)
		return nil
	}
	if err := visit(to); err != nil {
		return nil, from, to, err
	}
	if !found {
		// First sync of this cache, or the branch was rewritten: reconcile
		// the tip's files with the hub.
		slices.Reverse(chain)
		steps, err := b.snapshotLocked(chain)
		return steps, from, to, err
	}
	for _, c := range chain {
		st := step{commit: c.Hash}
		if trailers(c.Message)[trInstance] == "" {
			if st.changes, err = commitChanges(c); err != nil {
				return nil, from, to, err
			}
		}
		steps = append(steps, st)
	}
	return steps, from, to, nil
}

// authorOf names a commit's author as createdBy: "Name <email>".
func authorOf(c *object.Commit) string {
	if c.Author.Email == "" {
		return c.Author.Name
	}
	return fmt.Sprintf("%s <%s>", c.Author.Name, c.Author.Email)
}

// commitChanges lists c's changes to resource files against its first
// parent (the empty tree for a root commit).
func commitChanges(c *object.Commit) ([]fileChange, error) {
	tree, err := c.Tree()
	if err != nil {
		return nil, fmt.Errorf("tree of %s: %w", c.Hash, err)
	}
	var parent *object.Tree
	if c.NumParents() > 0 {
		p, err := c.Parent(0)
		if err != nil {
			return nil, fmt.Errorf("parent of %s: %w", c.Hash, err)
		}
		if parent, err = p.Tree(); err != nil {
			return nil, fmt.Errorf("tree of %s: %w", p.Hash, err)
		}
	}
	changes, err := object.DiffTree(parent, tree)
	if err != nil {
		return nil, fmt.Errorf("diff %s: %w", c.Hash, err)
	}
	var out []fileChange
	author := authorOf(c)
	for _, ch := range changes {
		from, to, err := ch.Files()
		if err != nil {
			return nil, fmt.Errorf("diff %s: %w", c.Hash, err)
		}
		// Change entries carry full paths (the files' names are base names).
		fromName, toName := ch.From.Name, ch.To.Name
		// A rename is the old file's removal and the new one's addition.
		if from != nil && (to == nil || fromName != toName) && isResourceFile(fromName) {
			old, err := contents(from)
			if err != nil {
				return nil, err
			}
			out = append(out, fileChange{commit: c.Hash, author: author, path: fromName, old: old})
		}
		if to != nil && isResourceFile(toName) {
			fc := fileChange{commit: c.Hash, author: author, path: toName}
			if fc.data, err = contents(to); err != nil {
				return nil, err
			}
			if from != nil && fromName == toName {
				if fc.old, err = contents(from); err != nil {
					return nil, err
				}
			}
			out = append(out, fc)
		}
	}
	return out, nil
}

func contents(f *object.File) ([]byte, error) {
	r, err := f.Reader()
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", f.Name, err)
	}
	defer r.Close()
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", f.Name, err)
	}
	if data == nil {
		data = []byte{}
	}
	return data, nil
}

// snapshotLocked returns the tip's resource files as additions, each by
// the newest commit of chain (tip first, children before parents) that
// touched it.
func (b *Backend) snapshotLocked(chain []*object.Commit) ([]step, error) {
	if len(chain) == 0 {
		return nil, nil
	}
	tip := chain[0]
	tree, err := tip.Tree()
	if err != nil {
		return nil, fmt.Errorf("tree of %s: %w", tip.Hash, err)
	}
	files := map[string][]byte{}
	err = tree.Files().ForEach(func(f *object.File) error {
		if !isResourceFile(f.Name) {
			return nil
		}
		data, err := contents(f)
		files[f.Name] = data
		return err
	})
	if err != nil {
		return nil, err
	}
	who := map[string]*object.Commit{}
	for _, c := range chain {
		if len(who) == len(files) {
			break
		}
		changes, err := commitChanges(c)
		if err != nil {
			return nil, err
		}
		for _, fc := range changes {
			if _, ok := files[fc.path]; ok && who[fc.path] == nil {
				who[fc.path] = c
			}
		}
	}
	st := step{commit: tip.Hash}
	for _, p := range slices.Sorted(maps.Keys(files)) {
		c := who[p]
		if c == nil {
			c = tip // older than the walked history
		}
		st.changes = append(st.changes, fileChange{commit: c.Hash, author: authorOf(c), path: p, data: files[p]})
	}
	return []step{st}, nil
}

// setSynced records commit as synced in the cache clone.
func (b *Backend) setSynced(commit plumbing.Hash) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.repo == nil {
		return errors.New("the cache is not open")
	}
	if err := b.repo.Storer.SetReference(plumbing.NewHashReference(syncedRef, commit)); err != nil {
		return fmt.Errorf("record the synced commit: %w", err)
	}
	return nil
}

// parsed is a resource file's content.
type parsed struct {
	res  template.Resource
	kind controller.Kind
	spec json.RawMessage
}

// parseResource decodes a resource file and checks it is where the
// controller would put it.
func (b *Backend) parseFile(p string, data []byte) (parsed, error) {
	var out parsed
	doc, err := template.Decode(p, data)
	if err != nil {
		return out, fmt.Errorf("does not parse: %w", err)
	}
	if err := json.Unmarshal(doc, &out.res); err != nil {
		return out, fmt.Errorf("is not a resource {apiVersion, kind, metadata, spec}: %w", err)
	}
	r := &out.res
	if r.APIVersion == "" || r.Kind == "" || r.Metadata.Name == "" {
		return out, errors.New("is not a resource: apiVersion, kind and metadata.name are required")
	}
	if r.Metadata.Namespace == "" {
		r.Metadata.Namespace = cairn.DefaultNamespace
	}
	g, v := splitAPIVersion(r.APIVersion)
	out.kind = controller.Kind{Group: g, Version: v, Kind: r.Kind}
	if out.spec, err = specOf(doc); err != nil {
		return out, fmt.Errorf("spec: %w", err)
	}
	if b.loc != nil {
		want, err := b.loc.Path(out.kind, r.Metadata.Namespace, r.Metadata.Name, r.Metadata.Labels)
		if err != nil {
			return out, fmt.Errorf("no path for %s %s/%s: %w", r.Kind, r.Metadata.Namespace, r.Metadata.Name, err)
		}
		if want != p {
			return out, fmt.Errorf("holds %s %s/%s, whose file is %s by the backend's path template", r.Kind, r.Metadata.Namespace, r.Metadata.Name, want)
		}
	}
	return out, nil
}

func (p parsed) String() string {
	return fmt.Sprintf("%s %s %s/%s", p.res.APIVersion, p.res.Kind, p.res.Metadata.Namespace, p.res.Metadata.Name)
}

// typeFor finds the Type serving kind over REST: the highest revision.
func (s *Syncer) typeFor(ctx context.Context, kind controller.Kind) (cairn.Type, error) {
	types, err := s.cfg.Hub.ListTypes(ctx, store.TypeFilter{Group: kind.Group, Version: kind.Version})
	if err != nil {
		return cairn.Type{}, fmt.Errorf("list Types: %w", err)
	}
	var best *cairn.Type
	for i := range types {
		t := &types[i]
		if t.Names == nil || t.Names.Kind != kind.Kind {
			continue
		}
		if best != nil && best.Path != t.Path {
			return cairn.Type{}, cairn.Errorf(cairn.CodeInvalid, "both %s and %s serve %s", best.Path, t.Path, template.APIVersion(kind)+" "+kind.Kind)
		}
		if best == nil || store.RevisionKey(t.Revision) > store.RevisionKey(best.Revision) {
			best = t
		}
	}
	if best == nil {
		return cairn.Type{}, cairn.Errorf(cairn.CodeNotFound, "no Type serves %s %s", template.APIVersion(kind), kind.Kind)
	}
	return *best, nil
}

// refused says whether the hub refused a change for a reason in the
// change itself (reported and skipped), rather than failing (retried).
func refused(err error) bool {
	switch cairn.ErrorCode(err) {
	case cairn.CodeInvalid, cairn.CodeNotFound, cairn.CodeAlreadyExists, cairn.CodeConflict, cairn.CodeLocked, cairn.CodeUsedBy:
		return true
	}
	return false
}

// apply makes one file change in the hub, when the hub does not already
// hold it. The returned event's Type is empty when there was nothing to do;
// an error means the sync must stop (and be retried).
func (s *Syncer) apply(ctx context.Context, b *Backend, fc fileChange) (SyncEvent, error) {
	ev := SyncEvent{Commit: fc.commit.String(), Path: fc.path, Author: fc.author}
	skip := func(format string, args ...any) (SyncEvent, error) {
		ev.Type, ev.Reason = "Skipped", fmt.Sprintf(format, args...)
		return ev, nil
	}
	ctx = withImport(cairn.WithActor(ctx, fc.author), b, fc.commit)
	if fc.data == nil {
		return s.applyDelete(ctx, b, fc, ev)
	}
	p, err := b.parseFile(fc.path, fc.data)
	if err != nil {
		return skip("%s: %v", fc.path, err)
	}
	ev.Resource = p.String()
	typ, err := s.typeFor(ctx, p.kind)
	if refused(err) {
		return skip("%v", err)
	}
	if err != nil {
		return ev, err
	}
	md := p.res.Metadata
	lbls := md.Labels
	if lbls == nil {
		lbls = map[string]string{}
	}
	cur, err := s.cfg.Hub.GetInstanceByName(ctx, typ.Path, md.Namespace, md.Name, true)
	switch {
	case cairn.HasCode(err, cairn.CodeNotFound):
		created, err := s.cfg.Hub.CreateInstances(ctx, hub.CreateRequest{Instances: []hub.NewInstance{{
			Namespace: md.Namespace, Name: md.Name, TypeRef: typ.Ref(), Labels: md.Labels,
			Value: p.spec, Backend: &hub.BackendInput{ID: s.cfg.BackendID}, CreatedBy: fc.author,
		}}})
		if refused(err) {
			return skip("create %s: %v", p, err)
		}
		if err != nil {
			return ev, err
		}
		ev.Type, ev.InstanceID = "Created", created[0].ID
		return ev, nil
	case err != nil:
		return ev, err
	}
	ev.InstanceID = cur.ID
	if cur.Backend.ID != s.cfg.BackendID {
		return skip("%s is already an instance (%s) in backend %q, not this one", p, cur.ID, cur.Backend.ID)
	}
	if hub.JSONEqual(cur.Latest.Value, p.spec) && maps.Equal(cur.Labels, md.Labels) {
		return ev, nil // the hub holds this already (cairn's own write, or synced before)
	}
	_, err = s.cfg.Hub.UpdateInstances(ctx, []hub.UpdateInstance{{ID: cur.ID, CreatedBy: fc.author, Value: p.spec, Labels: lbls}})
	if refused(err) {
		return skip("update %s: %v", p, err)
	}
	if err != nil {
		return ev, err
	}
	ev.Type = "Updated"
	return ev, nil
}

func (s *Syncer) applyDelete(ctx context.Context, b *Backend, fc fileChange, ev SyncEvent) (SyncEvent, error) {
	p, err := b.parseFile(fc.path, fc.old)
	if err != nil {
		return ev, nil // never a resource this backend imported
	}
	ev.Resource = p.String()
	typ, err := s.typeFor(ctx, p.kind)
	if refused(err) {
		return ev, nil
	}
	if err != nil {
		return ev, err
	}
	md := p.res.Metadata
	cur, err := s.cfg.Hub.GetInstanceByName(ctx, typ.Path, md.Namespace, md.Name, false)
	if cairn.HasCode(err, cairn.CodeNotFound) {
		return ev, nil // gone already
	}
	if err != nil {
		return ev, err
	}
	ev.InstanceID = cur.ID
	if cur.Backend.ID != s.cfg.BackendID {
		return ev, nil // another backend's instance of that name
	}
	if err := s.cfg.Hub.DeleteInstance(ctx, cur.ID, ""); err != nil {
		if refused(err) {
			ev.Type, ev.Reason = "Skipped", fmt.Sprintf("delete %s: %v", p, err)
			return ev, nil
		}
		return ev, err
	}
	ev.Type = "Deleted"
	return ev, nil
}
