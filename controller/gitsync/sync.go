// Package gitsync is the controller that imports changes people push to a
// Git backend's branch outside cairn into the hub: creations, new resource
// versions and deletions. It acts through the hub like any other client; the
// Git driver (backend/git) only offers what the sync reads (the commits
// since the last synced one, the parsed files) and marks imports so the
// driver records them without writing the tree again.
package gitsync

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/backend/controller"
	"github.com/cairn-dev/cairn/backend/controller/template"
	"github.com/cairn-dev/cairn/backend/git"
	"github.com/cairn-dev/cairn/hub"
	"github.com/cairn-dev/cairn/store"
)

// DefaultMaxSyncEvents is how many events a Syncer keeps.
const DefaultMaxSyncEvents = 100

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
	Opener git.BackendOpener
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

// Sync fetches the branch and imports every change made outside cairn
// since the last sync. A file that does not parse, names no known Type or
// fails the Type's schema is reported (log, Stats().Skipped, Events) and
// skipped; the added and changed files of one commit are one hub call
// (step), so none is half imported.
// An error (the remote, the hub's store) stops the sync at the commit it
// was on; the next sync resumes there.
func (s *Syncer) Sync(ctx context.Context) (SyncResult, error) {
	s.run.Lock()
	defer s.run.Unlock()
	return s.syncLocked(ctx)
}

// syncAfter is Sync for a sync that waited for the one running: started
// is called once the sync holds the run lock (what is pushed from then on
// needs another sync), and timeout counts from there, not from the wait.
func (s *Syncer) syncAfter(ctx context.Context, timeout time.Duration, started func()) (SyncResult, error) {
	s.run.Lock()
	defer s.run.Unlock()
	started()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return s.syncLocked(ctx)
}

// syncLocked is Sync once the run lock is held.
func (s *Syncer) syncLocked(ctx context.Context) (SyncResult, error) {
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
	if !git.IsGit(sb) {
		return res, cairn.Errorf(cairn.CodeInvalid, "git sync: backend %q is a %s, not a Git backend", sb.ID, sb.TypeRef.Path)
	}
	c, err := s.cfg.Opener.OpenBackend(ctx, sb)
	if err != nil {
		return res, fmt.Errorf("git sync %s: %w", sb.ID, err)
	}
	b, ok := c.(*git.Backend)
	if !ok {
		return res, fmt.Errorf("git sync %s: the opener returned %T, not a Git backend", sb.ID, c)
	}
	steps, from, to, err := b.Pending(ctx)
	if err != nil {
		return res, fmt.Errorf("git sync %s: %w", sb.ID, err)
	}
	res.From, res.To = hashString(from), hashString(to)
	for _, st := range steps {
		if err := s.step(ctx, b, st, &res); err != nil {
			return res, fmt.Errorf("git sync %s: %w", sb.ID, err)
		}
		if err := b.SetSynced(st.Commit); err != nil {
			return res, fmt.Errorf("git sync %s: %w", sb.ID, err)
		}
	}
	if !to.IsZero() {
		if err := b.SetSynced(to); err != nil {
			return res, fmt.Errorf("git sync %s: %w", sb.ID, err)
		}
		s.emu.Lock()
		s.last = to.String()
		s.emu.Unlock()
	}
	return res, nil
}

// count records what one file's change did (nothing, when ev.Type is
// empty).
func (s *Syncer) count(ctx context.Context, res *SyncResult, ev SyncEvent) {
	switch ev.Type {
	case "":
		return // nothing to do: the hub holds this already
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

// commitGroup is the planned changes of one outside commit, imported
// together.
type commitGroup struct {
	commit plumbing.Hash
	items  []planned
}

// addToGroup adds p to the group of commit, which it starts when there is
// none yet, keeping the commits in the order they were met.
func addToGroup(groups []*commitGroup, commit plumbing.Hash, p planned) []*commitGroup {
	i := slices.IndexFunc(groups, func(g *commitGroup) bool { return g.commit == commit })
	if i < 0 {
		groups = append(groups, &commitGroup{commit: commit})
		i = len(groups) - 1
	}
	groups[i].items = append(groups[i].items, p)
	return groups
}

// step imports one commit's changes (one step of Pending). Removed files
// go first, one hub call (deleteAll: the hub tells the backend once its
// own store committed, so an imported delete is never taken back). Then
// the added and changed files of each outside commit (a step of a
// snapshot holds several) go as one hub call, ApplyChanges: one store
// transaction and one commit of cairn's recording them all, however many
// they are. A file the hub refuses (its Type's schema, a lock) is found by
// a dry run of each file alone, reported and skipped, and the others are
// imported without it, as when each file was its own call; when no dry
// run says which (another replica imported the commit meanwhile, a race),
// the files go one by one.
func (s *Syncer) step(ctx context.Context, b *git.Backend, st git.Step, res *SyncResult) error {
	var groups, dels []*commitGroup
	for _, fc := range st.Changes {
		if fc.Data != nil {
			continue
		}
		p, err := s.planDelete(ctx, b, fc, st.Imported)
		if err != nil {
			return fmt.Errorf("%s at %s: %w", fc.Path, fc.Commit, err)
		}
		if p.del == "" {
			s.count(ctx, res, p.ev)
			continue
		}
		dels = addToGroup(dels, fc.Commit, p)
	}
	for _, g := range dels {
		if err := s.deleteAll(ctx, b, g.items, st.Imported, res); err != nil {
			return err
		}
	}
	var plans []planned
	files := map[string][]string{} // the added and changed files of each resource
	for _, fc := range st.Changes {
		if fc.Data == nil {
			continue
		}
		p, err := s.plan(ctx, b, fc, st.Imported)
		if err != nil {
			return fmt.Errorf("%s at %s: %w", fc.Path, fc.Commit, err)
		}
		if p.ev.Type != "Skipped" && p.ev.Resource != "" {
			files[p.ev.Resource] = append(files[p.ev.Resource], fc.Path)
		}
		plans = append(plans, p)
	}
	for _, p := range plans {
		if paths := files[p.ev.Resource]; p.ev.Type != "Skipped" && len(paths) > 1 {
			// Possible with a path template using labels: which file
			// is meant is not for the sync to guess.
			p.ev.Type, p.ev.Reason = "Skipped", fmt.Sprintf("%s is in %d files, %s: keep it in one", p.ev.Resource, len(paths), strings.Join(paths, " and "))
			p.create, p.update = nil, nil
		}
		if p.create == nil && p.update == nil {
			s.count(ctx, res, p.ev)
			continue
		}
		groups = addToGroup(groups, p.fc.Commit, p)
	}
	for _, g := range groups {
		if err := s.importAll(ctx, b, g.items, st.Imported, res); err != nil {
			return err
		}
	}
	return nil
}

// deleteAll deletes the instances of one outside commit's removed files in
// one hub call (DeleteInstances): one store transaction, then, once it
// committed, one commit of cairn's recording the removals (the backend
// defers an import's deletes, DefersDeletes, so none is ever taken back).
// That call is all or none: when the hub refuses it, a dry run of each
// delete alone finds the ones it refuses (a locked instance, one another
// instance uses), reported and skipped, and the call goes again without
// them; when no dry run says which (a race), the files go one hub call
// each.
func (s *Syncer) deleteAll(ctx context.Context, b *git.Backend, items []planned, imported map[string]bool, res *SyncResult) error {
	for len(items) > 0 {
		fc := items[0].fc
		ictx := git.WithImport(cairn.WithActor(ctx, fc.Author), b, fc.Commit)
		ids := make([]string, len(items))
		for i, p := range items {
			ids[i] = p.del
		}
		err := s.cfg.Hub.DeleteInstances(ictx, ids, "")
		if err == nil {
			for _, p := range items {
				ev := p.ev
				ev.Type = "Deleted"
				s.count(ctx, res, ev)
			}
			return nil
		}
		if !refused(err) && !errors.Is(err, git.ErrImported) {
			return fmt.Errorf("delete the %d instances of files %s removed: %w", len(items), fc.Commit, err)
		}
		if len(items) == 1 || errors.Is(err, git.ErrImported) {
			return s.applyEach(ctx, b, items, imported, res)
		}
		var kept []planned
		dry := cairn.WithDryRun(ictx)
		for _, p := range items {
			switch err := s.cfg.Hub.DeleteInstances(dry, []string{p.del}, ""); {
			case err == nil:
				kept = append(kept, p)
			case cairn.HasCode(err, cairn.CodeNotFound):
				// deleted meanwhile (another replica): nothing to do
			case refused(err):
				ev := p.ev
				ev.Type, ev.Reason = "Skipped", fmt.Sprintf("delete %s: %v", ev.Resource, err)
				s.count(ctx, res, ev)
			default:
				return fmt.Errorf("%s at %s: %w", p.fc.Path, p.fc.Commit, err)
			}
		}
		if len(kept) == len(items) {
			return s.applyEach(ctx, b, items, imported, res)
		}
		items = kept
	}
	return nil
}

// importAll makes the creates and updates of one outside commit's files in
// one hub call; see step.
func (s *Syncer) importAll(ctx context.Context, b *git.Backend, items []planned, imported map[string]bool, res *SyncResult) error {
	for len(items) > 0 {
		fc := items[0].fc
		ictx := git.WithImport(cairn.WithActor(ctx, fc.Author), b, fc.Commit)
		var ch hub.ChildChanges
		for _, p := range items {
			if p.create != nil {
				ch.Create = append(ch.Create, *p.create)
			} else {
				ch.Update = append(ch.Update, *p.update)
			}
		}
		out, err := s.cfg.Hub.ApplyChanges(ictx, ch)
		if err == nil {
			c := 0
			for _, p := range items {
				ev := p.ev
				if p.create != nil {
					ev.Type, ev.InstanceID = "Created", out.Created[c].ID
					c++
				} else {
					ev.Type = "Updated"
				}
				s.count(ctx, res, ev)
			}
			return nil
		}
		if !refused(err) && !errors.Is(err, git.ErrImported) {
			return fmt.Errorf("import %d files of %s: %w", len(items), fc.Commit, err)
		}
		if len(items) == 1 || errors.Is(err, git.ErrImported) {
			return s.applyEach(ctx, b, items, imported, res)
		}
		// Which file is refused: each alone, as a dry run (no backend
		// is called, nothing is stored).
		var kept, raced []planned
		dry := cairn.WithDryRun(ictx)
		for _, p := range items {
			var one hub.ChildChanges
			what := "update"
			if p.create != nil {
				one.Create, what = []hub.NewInstance{*p.create}, "create"
			} else {
				one.Update = []hub.UpdateInstance{*p.update}
			}
			_, err := s.cfg.Hub.ApplyChanges(dry, one)
			switch {
			case err == nil:
				kept = append(kept, p)
			case cairn.HasCode(err, cairn.CodeAlreadyExists), cairn.HasCode(err, cairn.CodeConflict):
				// Made or changed since the plan, which found no other
				// backend's instance of that name: another replica
				// importing this commit, or a writer. Planned again below.
				raced = append(raced, p)
			case refused(err):
				ev := p.ev
				ev.Type, ev.Reason = "Skipped", fmt.Sprintf("%s %s: %v", what, ev.Resource, err)
				s.count(ctx, res, ev)
			default:
				return fmt.Errorf("%s at %s: %w", p.fc.Path, p.fc.Commit, err)
			}
		}
		if len(kept) == len(items) {
			// Refused only together (a race): one hub call per file.
			return s.applyEach(ctx, b, items, imported, res)
		}
		if err := s.applyEach(ctx, b, raced, imported, res); err != nil {
			return err
		}
		items = kept
	}
	return nil
}

// applyEach imports files one hub call each, planned against the hub
// again.
func (s *Syncer) applyEach(ctx context.Context, b *git.Backend, items []planned, imported map[string]bool, res *SyncResult) error {
	for _, p := range items {
		ev, err := s.apply(ctx, b, p.fc, imported)
		if err != nil {
			return fmt.Errorf("%s at %s: %w", p.fc.Path, p.fc.Commit, err)
		}
		s.count(ctx, res, ev)
	}
	return nil
}

func hashString(h plumbing.Hash) string {
	if h.IsZero() {
		return ""
	}
	return h.String()
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

// stored checks that the hub holds the version the branch records as the
// import of resource from commit (by another process, or by this one
// before it restarted). When it does not and the intent journal still has
// that write, the import is on its way (the process that pushed it has
// not stored it yet) or was left halfway (the process died, or the hub
// could not store it and could not push the undo either) and recovery
// will take it back: counting the change imported would move the sync
// past it for good, so the sync stops here (CodeUnavailable) and a later
// one resumes at this commit. Without the intent, the hub stored it and
// deleted it since (a removal whose record never reached the branch), or
// its own process took it back and imports it again: nothing to wait for.
func (s *Syncer) stored(ctx context.Context, b *git.Backend, commit plumbing.Hash, resource string) error {
	id, rv, ok := b.ImportedVersion(commit, resource)
	if !ok {
		return nil // taken back or deleted since: nothing the hub must hold
	}
	inst, err := s.cfg.Hub.GetInstance(ctx, id, false)
	if err != nil && !cairn.HasCode(err, cairn.CodeNotFound) {
		return err
	}
	if err == nil && inst.Latest.ResourceVersion >= rv {
		return nil
	}
	pending, err := s.cfg.Hub.PendingIntents(ctx)
	if err != nil {
		return err
	}
	if !slices.ContainsFunc(pending, func(in store.Intent) bool {
		return in.InstanceID == id && (in.Op == store.IntentCreate || in.Op == store.IntentUpdate)
	}) {
		return nil
	}
	return cairn.Errorf(cairn.CodeUnavailable, "the import of %s (TypeInstance %q, resource version %d) is on the branch but not in the hub: "+
		"the process that imported it is still storing it, or stopped halfway and recovery will take it back; the sync resumes at this commit", resource, id, rv)
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

// planned is what one added or changed file asks of the hub: a create or
// an update, or neither (ev says why: nothing to do, or skipped).
type planned struct {
	fc     git.FileChange
	ev     SyncEvent
	create *hub.NewInstance
	update *hub.UpdateInstance
	del    string // the instance a removed file's resource is
}

// plan works out what the added or changed file fc asks of the hub, when
// the hub does not already hold it; an error means the sync must stop (and
// be retried).
//
// imported names the resources whose change in fc's commit a process
// syncing with another cache (another replica) imported already: the hub
// holds that change or a newer one, and importing it again would put an
// older value back for a while.
func (s *Syncer) plan(ctx context.Context, b *git.Backend, fc git.FileChange, imported map[string]bool) (planned, error) {
	out := planned{fc: fc, ev: SyncEvent{Commit: fc.Commit.String(), Path: fc.Path, Author: fc.Author}}
	skip := func(format string, args ...any) (planned, error) {
		out.ev.Type, out.ev.Reason = "Skipped", fmt.Sprintf(format, args...)
		return out, nil
	}
	p, err := b.ParseFile(fc.Path, fc.Data)
	if err != nil {
		return skip("%s: %v", fc.Path, err)
	}
	out.ev.Resource = p.String()
	if imported[out.ev.Resource] {
		return out, s.stored(ctx, b, fc.Commit, out.ev.Resource)
	}
	typ, err := s.typeFor(ctx, p.Kind)
	if refused(err) {
		return skip("%v", err)
	}
	if err != nil {
		return out, err
	}
	md := p.Res.Metadata
	lbls := md.Labels
	if lbls == nil {
		lbls = map[string]string{}
	}
	cur, err := s.cfg.Hub.GetInstanceByName(ctx, typ.Path, md.Namespace, md.Name, true)
	switch {
	case cairn.HasCode(err, cairn.CodeNotFound):
		out.create = &hub.NewInstance{
			Namespace: md.Namespace, Name: md.Name, TypeRef: typ.Ref(), Labels: md.Labels,
			Value: p.Spec, Backend: &hub.BackendInput{ID: s.cfg.BackendID}, CreatedBy: fc.Author,
		}
		return out, nil
	case err != nil:
		return out, err
	}
	out.ev.InstanceID = cur.ID
	if cur.Backend.ID != s.cfg.BackendID {
		return skip("%s is already an instance (%s) in backend %q, not this one", p, cur.ID, cur.Backend.ID)
	}
	if cairn.JSONEqual(cur.Latest.Value, p.Spec) && maps.Equal(cur.Labels, md.Labels) {
		return out, nil // the hub holds this already (cairn's own write, or synced before)
	}
	out.update = &hub.UpdateInstance{ID: cur.ID, CreatedBy: fc.Author, Value: p.Spec, Labels: lbls}
	return out, nil
}

// apply makes one file change in the hub with a hub call of its own, when
// the hub does not already hold it. The returned event's Type is empty
// when there was nothing to do; an error means the sync must stop (and be
// retried). imported is as in plan.
func (s *Syncer) apply(ctx context.Context, b *git.Backend, fc git.FileChange, imported map[string]bool) (SyncEvent, error) {
	ev := SyncEvent{Commit: fc.Commit.String(), Path: fc.Path, Author: fc.Author}
	ictx := git.WithImport(cairn.WithActor(ctx, fc.Author), b, fc.Commit)
	if fc.Data == nil {
		return s.applyDelete(ictx, b, fc, ev, imported)
	}
	p, err := s.plan(ctx, b, fc, imported)
	if err != nil || (p.create == nil && p.update == nil) {
		return p.ev, err
	}
	ev = p.ev
	if p.create != nil {
		created, err := s.cfg.Hub.CreateInstances(ictx, hub.CreateRequest{Instances: []hub.NewInstance{*p.create}})
		if errors.Is(err, git.ErrImported) {
			return ev, s.stored(ctx, b, fc.Commit, ev.Resource) // another replica was first
		}
		if refused(err) {
			ev.Type, ev.Reason = "Skipped", fmt.Sprintf("create %s: %v", ev.Resource, err)
			return ev, nil
		}
		if err != nil {
			return ev, err
		}
		ev.Type, ev.InstanceID = "Created", created[0].ID
		return ev, nil
	}
	_, err = s.cfg.Hub.UpdateInstances(ictx, []hub.UpdateInstance{*p.update})
	if errors.Is(err, git.ErrImported) {
		return ev, s.stored(ctx, b, fc.Commit, ev.Resource) // another replica was first
	}
	if refused(err) {
		ev.Type, ev.Reason = "Skipped", fmt.Sprintf("update %s: %v", ev.Resource, err)
		return ev, nil
	}
	if err != nil {
		return ev, err
	}
	ev.Type = "Updated"
	return ev, nil
}

// planDelete works out which instance the removed file fc was, when the
// hub still has it in this backend (out.del); an error means the sync must
// stop. imported is as in plan.
func (s *Syncer) planDelete(ctx context.Context, b *git.Backend, fc git.FileChange, imported map[string]bool) (planned, error) {
	out := planned{fc: fc, ev: SyncEvent{Commit: fc.Commit.String(), Path: fc.Path, Author: fc.Author}}
	p, err := b.ParseFile(fc.Path, fc.Old)
	if err != nil {
		return out, nil // never a resource this backend imported
	}
	out.ev.Resource = p.String()
	if imported[out.ev.Resource] {
		return out, nil
	}
	typ, err := s.typeFor(ctx, p.Kind)
	if refused(err) {
		return out, nil
	}
	if err != nil {
		return out, err
	}
	md := p.Res.Metadata
	cur, err := s.cfg.Hub.GetInstanceByName(ctx, typ.Path, md.Namespace, md.Name, false)
	if cairn.HasCode(err, cairn.CodeNotFound) {
		return out, nil // gone already
	}
	if err != nil {
		return out, err
	}
	out.ev.InstanceID = cur.ID
	if cur.Backend.ID != s.cfg.BackendID {
		return out, nil // another backend's instance of that name
	}
	out.del = cur.ID
	return out, nil
}

func (s *Syncer) applyDelete(ctx context.Context, b *git.Backend, fc git.FileChange, ev SyncEvent, imported map[string]bool) (SyncEvent, error) {
	p, err := s.planDelete(ctx, b, fc, imported)
	if err != nil || p.del == "" {
		return p.ev, err
	}
	ev = p.ev
	if err := s.cfg.Hub.DeleteInstance(ctx, p.del, ""); err != nil {
		if errors.Is(err, git.ErrImported) || cairn.HasCode(err, cairn.CodeNotFound) {
			return ev, nil // another replica was first
		}
		if cairn.HasCode(err, cairn.CodeConflict) || cairn.HasCode(err, cairn.CodeAlreadyExists) {
			// Another write of the instance is on its way (its intent
			// taken: AlreadyExists; its store commit first: Conflict):
			// another replica deleting it too, or someone updating it. Skipping
			// would leave the instance of a removed file for good.
			if _, gerr := s.cfg.Hub.GetInstance(ctx, p.del, false); cairn.HasCode(gerr, cairn.CodeNotFound) {
				return ev, nil // deleted meanwhile
			}
			return ev, fmt.Errorf("delete %s: %w; the sync resumes at this commit", ev.Resource, err)
		}
		if refused(err) {
			ev.Type, ev.Reason = "Skipped", fmt.Sprintf("delete %s: %v", ev.Resource, err)
			return ev, nil
		}
		return ev, err
	}
	ev.Type = "Deleted"
	return ev, nil
}
