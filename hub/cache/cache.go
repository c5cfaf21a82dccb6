// Package cache keeps instances, their latest resource versions and the
// values the built-in backend holds in memory, current through the store's
// change log, so that reads do not walk the store.
//
// A read is consistent the way the Kubernetes API server's watch cache is
// since KEP-2340: before answering, the cache asks the store for the
// position of its newest change (one cheap query) and applies the change
// log up to that position. Whatever was committed before the read began,
// through this process or another replica, is in the answer; a cache can
// never serve a stale consistent read. Applying a change re-reads the
// changed instance's current row, so applying one twice or late is
// harmless.
//
// The instances this process's own writes committed can be handed to the
// cache (Committed) with their change numbers: applying the change log,
// the cache takes them instead of reading those rows back, as long as
// every change of the instance it applies is one it was handed. It still
// reads the log itself, in order, so what other processes committed in
// between is never skipped, and a handed instance is seen no earlier than
// the change that made it.
//
// Relations are kept one way: an instance's Uses is read with it, and
// UsedBy is derived from the Uses of every cached instance when read, so a
// new user of an instance (which logs a change of the user only) is seen
// without re-reading the used one.
package cache

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/store"
)

// Source is what the cache reads: the store.
type Source interface {
	LastSeq(ctx context.Context) (int64, error)
	Changes(ctx context.Context, after int64, limit int) ([]store.Change, error)
	GetInstances(ctx context.Context, ids []string) ([]cairn.Instance, error)
	ListInstances(ctx context.Context, f store.InstanceFilter) ([]cairn.Instance, error)
	Values(ctx context.Context, keys []store.ValueKey) ([]json.RawMessage, error)
}

// changeReader is a Source that reads changes together with the instances
// they name, their values filled as fillValues fills them, in one request
// (store/postgres: one round trip instead of three after every commit).
type changeReader interface {
	ChangesWithInstances(ctx context.Context, after int64, limit int) ([]store.Change, []cairn.Instance, error)
}

// batch is how many changes are read from the log at once.
const batch = 500

// Cache is safe for concurrent use.
type Cache struct {
	src      Source
	position positionGate

	// applying serialises catching up with the log; mu guards the maps
	// and applied, and is held only while they change or are read.
	applying sync.Mutex
	mu       sync.RWMutex
	loaded   bool
	applied  int64
	objs     map[string]*entry
	byName   map[nameKey]*entry
	byType   map[string]*typeIndex
	usedBy   map[string]map[string]struct{}
	// ids holds the ids of objs sorted (store.ByID), re-sorted lazily
	// after an instance came or went (idsDirty).
	ids      []string
	idsDirty bool

	// recent holds the changes applied lately, oldest first: every change
	// after recentFrom up to applied, so that watches read them here
	// instead of each asking the store (ChangesAfter).
	recent     []store.Change
	recentFrom int64

	// own holds instances as this process's own commits left them, by
	// the change number each carries (Committed), until the cache has
	// applied those changes. ownMu guards it.
	ownMu sync.Mutex
	own   map[int64]cairn.Instance
	// created holds instances as this process's own creates left them,
	// complete (Created), by the change number of the create, until the
	// cache has applied it. ownMu guards it.
	created map[int64]cairn.Instance
	// fresh holds, by id, the newest instance own commits handed that the
	// cache has not applied yet, for Guess: an update guesses from what
	// this process committed last, not from the older entry. ownMu guards
	// it too.
	fresh map[string]cairn.Instance

	// unhanded counts this process's commits not handed to Committed
	// (Unhanded); synced is the count a consistent read (SyncPosition)
	// last brought the cache past. While they differ a Guess may miss a
	// relation such a commit changed, and answers nothing.
	unhanded, synced atomic.Int64
	// draining is set while a background SyncTo applies what own commits
	// handed (drainHanded).
	draining atomic.Bool
}

type nameKey struct{ path, namespace, name string }

// entry is one cached instance. inst.UsedBy is always nil (derived on
// read); inst.Latest.Value holds the value for the built-in backend.
type entry struct {
	inst   cairn.Instance
	revKey string // store.RevisionKey of the type revision, for sorting
}

// typeIndex holds the entries of one type path in the store's order
// (sorted) and in name order (named, store.ByName), each re-sorted lazily
// after a change, when a list first needs it.
type typeIndex struct {
	set        map[string]*entry
	sorted     []*entry
	dirty      bool
	named      []*entry
	namedDirty bool
}

// New returns an empty cache over src; it loads on first use.
func New(src Source) *Cache {
	return &Cache{src: src}
}

// Loaded reports whether the cache holds a full read of the store (its
// first load finished). Until then a read through it waits for that load.
func (c *Cache) Loaded() bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.loaded
}

// Len is the number of instances cached.
func (c *Cache) Len() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.objs)
}

// Applied is the change-log position the cache reflects.
func (c *Cache) Applied() int64 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.applied
}

// Sync brings the cache up to the store's current change-log position.
// Every read of this package calls it first.
func (c *Cache) Sync(ctx context.Context) error {
	_, err := c.SyncPosition(ctx)
	return err
}

// SyncPosition is Sync, returning the position the cache reached at least:
// a list answered after it shows every change up to it.
func (c *Cache) SyncPosition(ctx context.Context) (int64, error) {
	unhanded := c.unhanded.Load() // commits counted before the position is read
	target, err := c.position.read(ctx, c.src)
	if err != nil {
		return 0, fmt.Errorf("cache: read the change log position: %w", err)
	}
	if err := c.SyncTo(ctx, target); err != nil {
		return 0, err
	}
	for {
		synced := c.synced.Load()
		if synced >= unhanded || c.synced.CompareAndSwap(synced, unhanded) {
			return target, nil
		}
	}
}

// Unhanded tells the cache that this process committed a write whose
// instances it did not hand to Committed (a create, a delete, a change of
// relations): Guess answers nothing until a consistent read has brought
// the cache past it.
func (c *Cache) Unhanded() {
	c.unhanded.Add(1)
}

// Position reads the store's current change-log position, sharing the
// query with the consistent reads waiting at the same moment (the rule of
// positionGate: the answer was read after the call began).
func (c *Cache) Position(ctx context.Context) (int64, error) {
	seq, err := c.position.read(ctx, c.src)
	if err != nil {
		return 0, fmt.Errorf("cache: read the change log position: %w", err)
	}
	return seq, nil
}

// SyncTo brings the cache up to change-log position target at least.
func (c *Cache) SyncTo(ctx context.Context, target int64) error {
	c.mu.RLock()
	done := c.loaded && c.applied >= target
	c.mu.RUnlock()
	if done {
		return nil
	}
	c.applying.Lock()
	defer c.applying.Unlock()
	c.mu.RLock()
	loaded, from := c.loaded, c.applied
	c.mu.RUnlock()
	if !loaded {
		if err := c.load(ctx); err != nil {
			return err
		}
		c.mu.RLock()
		from = c.applied
		c.mu.RUnlock()
	}
	for from < target {
		var (
			cs    []store.Change
			found []cairn.Instance
			err   error
		)
		cr, combined := c.src.(changeReader)
		if combined {
			cs, found, err = cr.ChangesWithInstances(ctx, from, batch)
		} else {
			cs, err = c.src.Changes(ctx, from, batch)
		}
		if cairn.HasCode(err, cairn.CodeGone) {
			// Fell behind a prune: start over from a fresh list.
			if err := c.load(ctx); err != nil {
				return err
			}
			c.mu.RLock()
			from = c.applied
			c.mu.RUnlock()
			continue
		}
		if err != nil {
			return fmt.Errorf("cache: read the change log after %d: %w", from, err)
		}
		if len(cs) == 0 {
			break // the target was a pruned point with nothing after it
		}
		var mine, made []cairn.Instance
		if !combined {
			var rest []store.Change
			mine, made, rest = c.takeOwn(cs)
			if found, err = c.read(ctx, rest); err != nil {
				return err
			}
		}
		c.apply(cs, found, mine, made)
		from = cs[len(cs)-1].Seq
	}
	return nil
}

// load replaces the cache's contents with a full read of the store. The
// position is read first: changes made during the list are applied again
// afterwards, which re-reads rows that are already current.
func (c *Cache) load(ctx context.Context) error {
	seq, err := c.src.LastSeq(ctx)
	if err != nil {
		return fmt.Errorf("cache: read the change log position: %w", err)
	}
	all, err := c.src.ListInstances(ctx, store.InstanceFilter{})
	if err != nil {
		return fmt.Errorf("cache: list instances: %w", err)
	}
	if err := c.fillValues(ctx, all); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.objs = make(map[string]*entry, len(all))
	c.byName = make(map[nameKey]*entry, len(all))
	c.byType = map[string]*typeIndex{}
	c.usedBy = map[string]map[string]struct{}{}
	c.ids, c.idsDirty = nil, true
	for _, inst := range all {
		c.put(inst)
	}
	c.applied = seq
	c.loaded = true
	c.recent, c.recentFrom = nil, seq
	return nil
}

// maxOwn bounds the instances kept from own commits while the cache does
// not apply the log (nothing reads): past it, further ones are read back
// from the store as other processes' are.
const maxOwn = 1024

// Committed hands the cache instances as a write of this process left
// them when it committed: each as of the change its Seq names, with its
// value filled when the built-in backend holds it, and with relations the
// write did not change (Uses and UsedBy are ignored). The cache takes
// them when it applies those changes, instead of reading the rows back.
func (c *Cache) Committed(insts []cairn.Instance) {
	c.mu.RLock()
	loaded, applied := c.loaded, c.applied
	c.mu.RUnlock()
	if !loaded {
		return // the load reads everything anyway
	}
	_, combined := c.src.(changeReader) // its log brings the rows in the same round trip
	c.ownMu.Lock()
	defer c.ownMu.Unlock()
	for _, inst := range insts {
		if inst.ID == "" || inst.Seq <= applied {
			continue
		}
		inst.Labels = maps.Clone(inst.Labels)
		inst.Annotations = maps.Clone(inst.Annotations)
		inst.Uses, inst.UsedBy = nil, nil
		c.keepFresh(inst)
		if combined {
			continue
		}
		if c.own == nil {
			c.own = map[int64]cairn.Instance{}
		}
		if len(c.own) >= maxOwn {
			continue
		}
		c.own[inst.Seq] = inst
	}
	c.drainHanded(insts)
}

// Created hands the cache instances a create of this process committed,
// complete: each as of the change its Seq names (the create's), with its
// value filled when the built-in backend holds it, and with every instance
// it uses (Uses, in the store's order; UsedBy is ignored, the cache derives
// it). Unlike those handed by Committed, they are taken when the cache does
// not hold them yet, which a new instance never is.
func (c *Cache) Created(insts []cairn.Instance) {
	if _, combined := c.src.(changeReader); combined {
		return // its log brings the rows in the same round trip
	}
	c.mu.RLock()
	loaded, applied := c.loaded, c.applied
	c.mu.RUnlock()
	if !loaded {
		return // the load reads everything anyway
	}
	c.ownMu.Lock()
	defer c.ownMu.Unlock()
	for _, inst := range insts {
		if inst.ID == "" || inst.Seq <= applied {
			continue
		}
		if c.created == nil {
			c.created = map[int64]cairn.Instance{}
		}
		if len(c.own)+len(c.created) >= maxOwn {
			break
		}
		inst.Labels = maps.Clone(inst.Labels)
		inst.Annotations = maps.Clone(inst.Annotations)
		inst.Uses, inst.UsedBy = slices.Clone(inst.Uses), nil
		c.created[inst.Seq] = inst
	}
	c.drainHanded(insts)
}

// drainHanded applies the log in the background once half of maxOwn
// instances wait in own and created (c.ownMu held). A burst of writes
// with no read would otherwise fill them, and the first read after it
// would read back every instance written since: seconds, during which
// every consistent read waits (a 10 s burst of REST creates: the first
// round of updates after it ran at half the rate of the second).
func (c *Cache) drainHanded(insts []cairn.Instance) {
	if len(c.own)+len(c.created) < maxOwn/2 || !c.draining.CompareAndSwap(false, true) {
		return
	}
	var target int64
	for _, inst := range insts {
		target = max(target, inst.Seq)
	}
	go func() {
		defer c.draining.Store(false)
		_ = c.SyncTo(context.Background(), target) // a failure is the next read's to report
	}()
}

// keepFresh keeps inst for Guess when it is newer than what is kept for
// its id. Past maxOwn ids nothing new is kept until the cache applies the
// log (a guess then is the older entry, which its update's transaction
// refuses). c.ownMu is held.
func (c *Cache) keepFresh(inst cairn.Instance) {
	if old, ok := c.fresh[inst.ID]; ok {
		if old.Seq < inst.Seq {
			c.fresh[inst.ID] = inst
		}
		return
	}
	if c.fresh == nil {
		c.fresh = map[string]cairn.Instance{}
	}
	if len(c.fresh) < maxOwn {
		c.fresh[inst.ID] = inst
	}
}

// dropFresh forgets the fresh instances of cs the cache now holds as of
// their change or later.
func (c *Cache) dropFresh(cs []store.Change, applied int64) {
	c.ownMu.Lock()
	defer c.ownMu.Unlock()
	if len(c.fresh) == 0 {
		return
	}
	for _, ch := range cs {
		if f, ok := c.fresh[ch.InstanceID]; ok && f.Seq <= applied {
			delete(c.fresh, ch.InstanceID)
		}
	}
}

// takeOwn splits what applying cs needs: the instances handed by own
// commits that stand for every change cs holds of them, and the changes
// of the others, whose rows are read. An instance is taken only when every
// change of it in cs was handed, and either the cache holds it already
// (its relations are those the commits kept: mine) or its create is among
// them (its relations are those the create handed: made). A change by
// another process, a delete among them, has its row read. The handed
// instances of cs are forgotten. c.applying is held.
func (c *Cache) takeOwn(cs []store.Change) (mine, made []cairn.Instance, rest []store.Change) {
	c.ownMu.Lock()
	if len(c.own) == 0 && len(c.created) == 0 {
		c.ownMu.Unlock()
		return nil, nil, cs
	}
	// The latest handed instance of each id, found by index: a batch of
	// the log is up to 500 changes, mostly handed ones under a burst of
	// creates, and an Instance is large (a map of them copied each one
	// several times over as it grew).
	type handed struct {
		uses  []string // the create's relations, when cs holds its create
		isNew bool     // cs holds its create
		taken bool
	}
	var (
		insts = make([]cairn.Instance, 0, len(cs))
		hs    = make([]handed, 0, len(cs)) // beside insts
		at    = make(map[string]int, len(cs))
		other map[string]bool // ids with a change not handed; made by the first
	)
	for _, ch := range cs {
		inst, ok := c.own[ch.Seq]
		isNew := false
		if ok {
			delete(c.own, ch.Seq)
		} else if inst, ok = c.created[ch.Seq]; ok {
			delete(c.created, ch.Seq)
			ok = ch.Kind == store.Added && inst.ID == ch.InstanceID
			isNew = ok
		}
		if !ok || inst.ID != ch.InstanceID || ch.Kind == store.Deleted {
			if other == nil {
				other = map[string]bool{}
			}
			other[ch.InstanceID] = true
			continue
		}
		i, seen := at[ch.InstanceID]
		if !seen {
			i = len(insts)
			at[ch.InstanceID] = i
			insts, hs = append(insts, cairn.Instance{}), append(hs, handed{})
		}
		insts[i] = inst // cs is in change order
		if isNew {
			hs[i].uses, hs[i].isNew = inst.Uses, true
		}
	}
	last := cs[len(cs)-1].Seq
	for seq := range c.own {
		if seq <= last { // not in the log (a change of another instance): never applied
			delete(c.own, seq)
		}
	}
	for seq := range c.created {
		if seq <= last {
			delete(c.created, seq)
		}
	}
	c.ownMu.Unlock()
	if len(insts) == 0 {
		return nil, nil, cs
	}
	news := 0
	for i := range hs {
		if hs[i].isNew && !other[insts[i].ID] {
			hs[i].taken = true
			insts[i].Uses = hs[i].uses // a later own commit of it kept the create's relations
			news++
		}
	}
	if news == len(insts) {
		// All of them creates (a burst of them): made is insts itself.
		made = insts
	} else {
		made = make([]cairn.Instance, 0, news)
		c.mu.RLock()
		for i := range hs {
			h := &hs[i]
			_, cached := c.objs[insts[i].ID]
			switch {
			case h.taken:
				made = append(made, insts[i])
			case other[insts[i].ID]:
			case cached:
				h.taken = true
				mine = append(mine, insts[i])
			}
		}
		c.mu.RUnlock()
	}
	if len(mine)+len(made) == 0 {
		return nil, nil, cs
	}
	rest = make([]store.Change, 0, len(cs)-len(mine)-len(made))
	for _, ch := range cs {
		if i, ok := at[ch.InstanceID]; !ok || !hs[i].taken {
			rest = append(rest, ch)
		}
	}
	return mine, made, rest
}

// read reads the instances cs name, as they are now, with their values.
func (c *Cache) read(ctx context.Context, cs []store.Change) ([]cairn.Instance, error) {
	if len(cs) == 0 {
		return nil, nil
	}
	ids := make([]string, 0, len(cs))
	seen := make(map[string]bool, len(cs))
	for _, ch := range cs {
		if !seen[ch.InstanceID] {
			seen[ch.InstanceID] = true
			ids = append(ids, ch.InstanceID)
		}
	}
	found, err := c.src.GetInstances(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("cache: read %d changed instances: %w", len(ids), err)
	}
	if err := c.fillValues(ctx, found); err != nil {
		return nil, err
	}
	return found, nil
}

// apply stores found, the instances cs name as read after them, and
// mine and made, those that own commits (made: own creates among them)
// handed for every change of them in cs; those of cs in none were deleted.
func (c *Cache) apply(cs []store.Change, found, mine, made []cairn.Instance) {
	seen := make(map[string]bool, len(cs))
	for _, ch := range cs {
		seen[ch.InstanceID] = true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, inst := range found {
		delete(seen, inst.ID)
		c.put(inst)
	}
	for _, inst := range mine {
		delete(seen, inst.ID)
		c.putOwn(inst)
	}
	for _, inst := range made {
		delete(seen, inst.ID)
		c.putMade(inst)
	}
	for id := range seen { // changed and no longer there: deleted
		c.remove(id)
	}
	c.applied = max(c.applied, cs[len(cs)-1].Seq)
	c.keepRecent(cs)
	c.dropFresh(cs, c.applied)
}

// maxRecent bounds the changes kept for watches; a watch further behind
// reads the store's change log.
const maxRecent = 4096

func (c *Cache) keepRecent(cs []store.Change) {
	if n := len(c.recent); n > 0 && cs[0].Seq <= c.recent[n-1].Seq {
		// Applied again (a read raced a load): keep only what is new.
		i, _ := slices.BinarySearchFunc(cs, c.recent[n-1].Seq, func(ch store.Change, seq int64) int { return cmp.Compare(ch.Seq, seq+1) })
		cs = cs[i:]
	}
	c.recent = append(c.recent, cs...)
	if len(c.recent) > maxRecent {
		drop := len(c.recent) - maxRecent/2
		c.recentFrom = c.recent[drop-1].Seq
		// Room for the changes until the next trim, appended in place
		// (readers take copies): grown step by step, the slice was
		// copied several times per trim, 3.7% of a create's allocations
		// under the bench's load.
		kept := make([]store.Change, len(c.recent)-drop, maxRecent+batch)
		copy(kept, c.recent[drop:])
		c.recent = kept
	}
}

// Forget drops the kept changes through position through, as pruning the
// store's change log through it does: a watch from before it is then sent
// to the store, which answers Gone. (A prune through another replica is
// not seen here: the changes kept still answer, as a Kubernetes watch
// cache answers from its own window.)
func (c *Cache) Forget(through int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if through <= c.recentFrom {
		return
	}
	i, _ := slices.BinarySearchFunc(c.recent, through+1, func(ch store.Change, seq int64) int { return cmp.Compare(ch.Seq, seq) })
	c.recent = slices.Clone(c.recent[i:])
	c.recentFrom = through
}

// ChangesAfter returns up to limit changes after position after, oldest
// first, as the store's Changes does, from the changes the cache applied
// lately; it syncs first, so the answer is as current as the store's.
// ok is false when after is older than the changes kept (or not a
// position the cache passed): the caller reads the store then. All the
// watches of a process thus share one read of the change log per commit.
func (c *Cache) ChangesAfter(ctx context.Context, after int64, limit int) (cs []store.Change, ok bool, err error) {
	if err := c.Sync(ctx); err != nil {
		return nil, false, err
	}
	cs, _, ok = c.Kept(after, limit)
	return cs, ok, nil
}

// ChangesAfterTo is ChangesAfter for a caller that knows the log reaches
// position target: the cache applies it up to there at least, without
// asking the store for its position (a watch woken by a notification that
// named the commit's position).
func (c *Cache) ChangesAfterTo(ctx context.Context, after, target int64, limit int) (cs []store.Change, ok bool, err error) {
	if err := c.SyncTo(ctx, target); err != nil {
		return nil, false, err
	}
	cs, _, ok = c.Kept(after, limit)
	return cs, ok, nil
}

// Kept returns up to limit of the changes the cache applied after
// position after, oldest first, without reading the store or syncing, and
// the position they reach: the cache's applied position when they are all
// there are. ok is false when the cache does not keep every change after
// after (it is older than the changes kept, or past what was applied).
func (c *Cache) Kept(after int64, limit int) (cs []store.Change, through int64, ok bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if !c.loaded || after < c.recentFrom || after > c.applied {
		return nil, 0, false
	}
	i, _ := slices.BinarySearchFunc(c.recent, after+1, func(ch store.Change, seq int64) int { return cmp.Compare(ch.Seq, seq) })
	end := min(len(c.recent), i+limit)
	cs = slices.Clone(c.recent[i:end])
	if end < len(c.recent) {
		return cs, cs[len(cs)-1].Seq, true
	}
	return cs, c.applied, true
}

// fillValues reads the latest values kept by the built-in backend.
func (c *Cache) fillValues(ctx context.Context, list []cairn.Instance) error {
	var keys []store.ValueKey
	var at []int
	for i := range list {
		if list[i].Backend.Abstract {
			keys = append(keys, store.ValueKey{InstanceID: list[i].ID, ResourceVersion: list[i].Latest.ResourceVersion})
			at = append(at, i)
		}
	}
	if len(keys) == 0 {
		return nil
	}
	vs, err := c.src.Values(ctx, keys)
	if cairn.HasCode(err, cairn.CodeNotFound) {
		// A value is missing: leave them all to be read (and that one to
		// fail) per instance, as without the cache.
		return nil
	}
	if err != nil {
		return fmt.Errorf("cache: read %d values: %w", len(keys), err)
	}
	for j, i := range at {
		list[i].Latest.Value = vs[j]
	}
	return nil
}

// put stores inst, replacing what was cached for its id. c.mu is held.
func (c *Cache) put(inst cairn.Instance) {
	if old, ok := c.objs[inst.ID]; ok {
		c.unindex(old)
	}
	storeUsers := inst.UsedBy
	inst.UsedBy = nil
	c.index(&entry{inst: inst, revKey: store.RevisionKey(inst.TypeRef.Revision)})
	c.syncUsers(inst.ID, storeUsers)
}

// index adds e to the maps, and its edges to the instances it uses. c.mu
// is held.
func (c *Cache) index(e *entry) {
	inst := &e.inst
	if _, ok := c.objs[inst.ID]; !ok {
		c.idsDirty = true // a new id (a replaced entry keeps its id)
	}
	c.objs[inst.ID] = e
	c.byName[nameKey{inst.TypeRef.Path, inst.Namespace, inst.Name}] = e
	ti := c.byType[inst.TypeRef.Path]
	if ti == nil {
		ti = &typeIndex{set: map[string]*entry{}}
		c.byType[inst.TypeRef.Path] = ti
	}
	ti.set[inst.ID] = e
	ti.dirty, ti.namedDirty = true, true
	for _, to := range inst.Uses {
		users := c.usedBy[to]
		if users == nil {
			users = map[string]struct{}{}
			c.usedBy[to] = users
		}
		users[inst.ID] = struct{}{}
	}
}

// putOwn stores inst, handed by an own commit, keeping the relations
// cached for it: the commit did not change them. A cached instance read
// after a later change (a row read is as of the read) is kept. c.mu is
// held.
func (c *Cache) putOwn(inst cairn.Instance) {
	old, ok := c.objs[inst.ID]
	if !ok || old.inst.Seq >= inst.Seq {
		return
	}
	inst.Uses = old.inst.Uses
	inst.UsedBy = nil
	o := &old.inst
	if inst.TypeRef == o.TypeRef && inst.Namespace == o.Namespace && inst.Name == o.Name && inst.CreatedAt.Equal(o.CreatedAt) {
		// Where it sorts and what it uses are unchanged (an update): the
		// entry is replaced in place and the type's order stays sorted.
		old.inst = inst
		return
	}
	c.unindex(old)
	c.index(&entry{inst: inst, revKey: store.RevisionKey(inst.TypeRef.Revision)})
}

// putMade stores inst, handed complete by an own create (and the own
// commits after it), with the relations it was handed. Its users are not
// synced from it as a row read's are: they are the instances whose Uses
// name it, cached with their own changes. c.mu is held.
func (c *Cache) putMade(inst cairn.Instance) {
	if old, ok := c.objs[inst.ID]; ok {
		if old.inst.Seq >= inst.Seq {
			return // read after a later change
		}
		c.unindex(old)
	}
	inst.UsedBy = nil
	c.index(&entry{inst: inst, revKey: store.RevisionKey(inst.TypeRef.Revision)})
}

// syncUsers makes the cached users of id those the store named: an edge
// to id can be added or dropped in a transaction that logs a change of id
// only (a stack adding or dropping a child it uses). c.mu is held.
func (c *Cache) syncUsers(id string, users []string) {
	want := make(map[string]bool, len(users))
	for _, u := range users {
		want[u] = true
	}
	for u := range c.usedBy[id] {
		if !want[u] {
			if e, ok := c.objs[u]; ok {
				e.inst.Uses = slices.DeleteFunc(slices.Clone(e.inst.Uses), func(s string) bool { return s == id })
			}
			delete(c.usedBy[id], u)
		}
	}
	for _, u := range users {
		e, ok := c.objs[u]
		if !ok || slices.Contains(e.inst.Uses, id) {
			continue // not cached yet: it comes with its own Uses
		}
		uses := append(slices.Clone(e.inst.Uses), id)
		slices.SortStableFunc(uses, func(a, b string) int {
			ea, oka := c.objs[a]
			eb, okb := c.objs[b]
			switch {
			case oka && okb:
				return compare(ea, eb)
			case oka:
				return -1
			case okb:
				return 1
			}
			return 0
		})
		e.inst.Uses = uses
		if c.usedBy[id] == nil {
			c.usedBy[id] = map[string]struct{}{}
		}
		c.usedBy[id][u] = struct{}{}
	}
}

// remove forgets id, and the edges other instances had to it: the store
// refuses to delete a used instance, so whoever used it dropped the edge
// in the same transaction. c.mu is held.
func (c *Cache) remove(id string) {
	old, ok := c.objs[id]
	if !ok {
		return
	}
	c.unindex(old)
	delete(c.objs, id)
	c.idsDirty = true
	for from := range c.usedBy[id] {
		if u, ok := c.objs[from]; ok {
			u.inst.Uses = slices.DeleteFunc(slices.Clone(u.inst.Uses), func(s string) bool { return s == id })
		}
	}
	delete(c.usedBy, id)
}

func (c *Cache) unindex(e *entry) {
	k := nameKey{e.inst.TypeRef.Path, e.inst.Namespace, e.inst.Name}
	if c.byName[k] == e {
		delete(c.byName, k)
	}
	if ti := c.byType[e.inst.TypeRef.Path]; ti != nil {
		delete(ti.set, e.inst.ID)
		ti.dirty, ti.namedDirty = true, true
		if len(ti.set) == 0 {
			delete(c.byType, e.inst.TypeRef.Path)
		}
	}
	for _, to := range e.inst.Uses {
		if users := c.usedBy[to]; users != nil {
			delete(users, e.inst.ID)
			if len(users) == 0 {
				delete(c.usedBy, to)
			}
		}
	}
}

// out returns a copy of e's instance for a caller, with UsedBy derived and
// the value only when asked for. Labels and Annotations are the cache's
// own maps unless clone. Every read clones them today: sharing them with
// lists was measurably faster, but one caller writing to a shared map
// would corrupt the cache for every reader, and the hub's callers
// (controllers included) are many. c.mu is held for reading.
func (c *Cache) out(e *entry, withValue, clone bool) cairn.Instance {
	inst := e.inst
	inst.Uses = slices.Clone(inst.Uses)
	if inst.Uses == nil {
		inst.Uses = []string{}
	}
	inst.UsedBy = c.usersOf(inst.ID)
	if clone {
		inst.Labels = maps.Clone(inst.Labels)
		inst.Annotations = maps.Clone(inst.Annotations)
	}
	if !withValue {
		inst.Latest.Value = nil
	}
	return inst
}

func (c *Cache) usersOf(id string) []string {
	users := c.usedBy[id]
	if len(users) == 0 {
		return []string{}
	}
	es := make([]*entry, 0, len(users))
	for from := range users {
		if e, ok := c.objs[from]; ok {
			es = append(es, e)
		}
	}
	slices.SortFunc(es, compare)
	ids := make([]string, len(es))
	for i, e := range es {
		ids[i] = e.inst.ID
	}
	return ids
}

// Get returns the instance with id, consistently; ok is false when there
// is none. With withValue the value is filled for the built-in backend.
func (c *Cache) Get(ctx context.Context, id string, withValue bool) (inst cairn.Instance, ok bool, err error) {
	if err := c.Sync(ctx); err != nil {
		return cairn.Instance{}, false, err
	}
	inst, ok = c.lookup(id, withValue)
	return inst, ok, nil
}

// GetNotOlderThan returns the instance with id as of position min or
// later: the cache first applies the log up to min, without asking the
// store for its position (a watch reading the instance of a change it was
// given knows the position already).
func (c *Cache) GetNotOlderThan(ctx context.Context, id string, min int64, withValue bool) (inst cairn.Instance, ok bool, err error) {
	if err := c.SyncTo(ctx, min); err != nil {
		return cairn.Instance{}, false, err
	}
	inst, ok = c.lookup(id, withValue)
	return inst, ok, nil
}

// lookup returns the applied instance with id.
func (c *Cache) lookup(id string, withValue bool) (cairn.Instance, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	e, ok := c.objs[id]
	if !ok {
		return cairn.Instance{}, false
	}
	return c.out(e, withValue, true), true
}

// GetByName returns the instance of a type path by namespace and name.
func (c *Cache) GetByName(ctx context.Context, typePath, namespace, name string, withValue bool) (inst cairn.Instance, ok bool, err error) {
	if err := c.Sync(ctx); err != nil {
		return cairn.Instance{}, false, err
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	e, ok := c.byName[nameKey{typePath, namespace, name}]
	if !ok {
		return cairn.Instance{}, false, nil
	}
	return c.out(e, withValue, true), true, nil
}

// Guess returns the instance of a type path by namespace and name as the
// cache holds it now, or as this process's last update of it committed
// (Committed) when that is newer, without asking the store for its
// position: it may be behind what other processes (replicas) committed.
// What this process committed is in it: ok is false until the cache has
// loaded, while a commit of this process not handed to Committed is not
// applied yet (Unhanded), and when it holds no such instance.
//
// A guess is only for what its use checks where it counts: an update
// conditional on the guess's Seq, whose transaction refuses it when the
// instance changed since (Kubernetes' GuaranteedUpdate takes its watch
// cache's object as a first guess the same way).
func (c *Cache) Guess(typePath, namespace, name string, withValue bool) (cairn.Instance, bool) {
	if c.synced.Load() < c.unhanded.Load() {
		return cairn.Instance{}, false
	}
	c.mu.RLock()
	if !c.loaded {
		c.mu.RUnlock()
		return cairn.Instance{}, false
	}
	e, ok := c.byName[nameKey{typePath, namespace, name}]
	var inst cairn.Instance
	if ok {
		inst = c.out(e, withValue, true)
	}
	c.mu.RUnlock()
	if !ok {
		return cairn.Instance{}, false
	}
	c.ownMu.Lock()
	f, fresh := c.fresh[inst.ID]
	c.ownMu.Unlock()
	if fresh && f.Seq > inst.Seq {
		// Relations are the entry's: an update does not change them.
		uses, usedBy := inst.Uses, inst.UsedBy
		inst = f
		inst.Uses, inst.UsedBy = uses, usedBy
		inst.Labels = maps.Clone(f.Labels)
		inst.Annotations = maps.Clone(f.Annotations)
		if !withValue {
			inst.Latest.Value = nil
		}
	}
	return inst, true
}

// Serves reports whether List can answer f; filters on attributes are
// left to the store.
func Serves(f store.InstanceFilter) bool {
	return len(f.Attributes) == 0
}

// List returns the instances matching f in f.Order, as
// store.Reader.ListInstances does. f must satisfy Serves.
func (c *Cache) List(ctx context.Context, f store.InstanceFilter, withValues bool) ([]cairn.Instance, error) {
	list, _, err := c.ListAt(ctx, f, withValues)
	return list, err
}

// ListAt is List, also returning a change-log position the list is
// current with: every change up to it is in the list.
func (c *Cache) ListAt(ctx context.Context, f store.InstanceFilter, withValues bool) ([]cairn.Instance, int64, error) {
	if !Serves(f) {
		return nil, 0, fmt.Errorf("cache: cannot filter on attributes")
	}
	seq, err := c.SyncPosition(ctx)
	if err != nil {
		return nil, 0, err
	}
	list, _ := c.list(f, withValues)
	return list, seq, nil
}

// ListNotOlderThan is List without reading the store's position: the
// cache as it is once it has applied the change log up to min (0: as it
// is now, loading it first if it never was), as the Kubernetes API server
// answers a list with resourceVersion "0" (any) or "N" (not older than
// N). The position returned is the one the cache reflects; below min when
// the store has not reached min.
func (c *Cache) ListNotOlderThan(ctx context.Context, f store.InstanceFilter, withValues bool, min int64) ([]cairn.Instance, int64, error) {
	if !Serves(f) {
		return nil, 0, fmt.Errorf("cache: cannot filter on attributes")
	}
	if err := c.SyncTo(ctx, min); err != nil {
		return nil, 0, err
	}
	list, seq := c.list(f, withValues)
	return list, seq, nil
}

// list answers f from the cache as it is, with the position it reflects.
func (c *Cache) list(f store.InstanceFilter, withValues bool) ([]cairn.Instance, int64) {
	var after *entry
	if f.After != nil {
		after = &entry{inst: *f.After, revKey: store.RevisionKey(f.After.TypeRef.Revision)}
	}
	c.mu.RLock()
	for !c.ready(f) {
		// Sorting an index writes it: sort under the write lock, then
		// read under the read lock with the indexes f reads clean.
		c.mu.RUnlock()
		c.mu.Lock()
		c.prepare(f)
		c.mu.Unlock()
		c.mu.RLock()
	}
	defer c.mu.RUnlock()
	seq := c.applied
	paths := c.paths(f.TypePath)
	var es []*entry
	switch {
	case len(paths) == 0:
	case f.Order == store.ByName && len(paths) == 1:
		es = c.byType[paths[0]].named
		if after != nil {
			i, found := slices.BinarySearchFunc(es, after, compareName)
			if found {
				i++
			}
			es = es[i:]
		}
	case f.Order == store.ByName:
		// Several type paths (no REST list asks for them): their entries
		// after after, sorted.
		for _, path := range paths {
			for _, e := range c.byType[path].set {
				if after == nil || compareName(e, after) > 0 {
					es = append(es, e)
				}
			}
		}
		slices.SortFunc(es, compareName)
	case f.Order == store.ByID:
		return c.listByID(f, paths, withValues), seq
	default:
		return c.listByType(f, paths, after, withValues), seq
	}
	n := len(es)
	if f.Limit > 0 {
		n = min(n, f.Limit)
	}
	out := make([]cairn.Instance, 0, n)
	for _, e := range es {
		if !matches(e, f) {
			continue
		}
		out = append(out, c.out(e, withValues, true))
		if f.Limit > 0 && len(out) == f.Limit {
			break
		}
	}
	return out, seq
}

// paths returns the type paths of the cached instances f.TypePath
// matches, sorted. c.mu is held.
func (c *Cache) paths(typePath string) []string {
	var paths []string
	if p, ok := strings.CutSuffix(typePath, ".*"); ok || typePath == "" {
		for path := range c.byType {
			if typePath == "" || strings.HasPrefix(path, p+".") {
				paths = append(paths, path)
			}
		}
		slices.Sort(paths)
	} else if _, ok := c.byType[typePath]; ok {
		paths = []string{typePath}
	}
	return paths
}

// ready reports whether the indexes a list of f reads are sorted. c.mu
// is held.
func (c *Cache) ready(f store.InstanceFilter) bool {
	switch f.Order {
	case store.ByID:
		return !c.idsDirty
	case store.ByName:
		if paths := c.paths(f.TypePath); len(paths) == 1 {
			return !c.byType[paths[0]].namedDirty
		}
		return true // not one type path: list sorts what it gathers
	}
	p, prefix := strings.CutSuffix(f.TypePath, ".*")
	if !prefix && f.TypePath != "" {
		ti := c.byType[f.TypePath]
		return ti == nil || !ti.dirty
	}
	for path, ti := range c.byType {
		if ti.dirty && (f.TypePath == "" || strings.HasPrefix(path, p+".")) {
			return false
		}
	}
	return true
}

// prepare sorts the indexes a list of f reads. c.mu is held for writing.
func (c *Cache) prepare(f store.InstanceFilter) {
	switch f.Order {
	case store.ByID:
		if c.idsDirty {
			c.ids = slices.AppendSeq(c.ids[:0], maps.Keys(c.objs))
			slices.Sort(c.ids)
			c.idsDirty = false
		}
	case store.ByName:
		if paths := c.paths(f.TypePath); len(paths) == 1 && c.byType[paths[0]].namedDirty {
			ti := c.byType[paths[0]]
			ti.named = slices.AppendSeq(ti.named[:0], maps.Values(ti.set))
			slices.SortFunc(ti.named, compareName)
			ti.namedDirty = false
		}
	default:
		for _, path := range c.paths(f.TypePath) {
			c.byType[path].sort()
		}
	}
}

// listByType lists in the store's order: the paths in order, each in its
// sorted order. c.mu is held for reading.
func (c *Cache) listByType(f store.InstanceFilter, paths []string, after *entry, withValues bool) []cairn.Instance {
	n := 0
	for _, path := range paths {
		n += len(c.byType[path].sorted)
	}
	if f.Limit > 0 {
		n = min(n, f.Limit)
	}
	out := make([]cairn.Instance, 0, n)
	for _, path := range paths {
		for _, e := range c.byType[path].sorted {
			if after != nil && compare(e, after) <= 0 {
				continue
			}
			if !matches(e, f) {
				continue
			}
			out = append(out, c.out(e, withValues, true))
			if f.Limit > 0 && len(out) == f.Limit {
				return out
			}
		}
	}
	return out
}

// listByID lists in id order, over every cached id after f.After's. c.mu
// is held for reading.
func (c *Cache) listByID(f store.InstanceFilter, paths []string, withValues bool) []cairn.Instance {
	ids := c.ids
	if f.After != nil {
		i, found := slices.BinarySearch(ids, f.After.ID)
		if found {
			i++
		}
		ids = ids[i:]
	}
	if f.ID != "" {
		// One id: a look-up, not a walk over every id.
		i, found := slices.BinarySearch(ids, f.ID)
		if !found {
			return []cairn.Instance{}
		}
		ids = ids[i : i+1]
	}
	one := len(paths) == 1 && paths[0] == f.TypePath
	n := 0
	for _, path := range paths {
		n += len(c.byType[path].set)
	}
	if f.Limit > 0 {
		n = min(n, f.Limit)
	}
	out := make([]cairn.Instance, 0, n)
	for _, id := range ids {
		e := c.objs[id]
		if one && e.inst.TypeRef.Path != f.TypePath || !one && !slices.Contains(paths, e.inst.TypeRef.Path) || !matches(e, f) {
			continue
		}
		out = append(out, c.out(e, withValues, true))
		if f.Limit > 0 && len(out) == f.Limit {
			break
		}
	}
	return out
}

func (ti *typeIndex) sort() {
	if ti.dirty {
		ti.sorted = ti.sorted[:0]
		for _, e := range ti.set {
			ti.sorted = append(ti.sorted, e)
		}
		slices.SortFunc(ti.sorted, compare)
		ti.dirty = false
	}
}

func matches(e *entry, f store.InstanceFilter) bool {
	in := &e.inst
	switch {
	case f.TypeRevision != "" && in.TypeRef.Revision != f.TypeRevision,
		f.Namespace != "" && in.Namespace != f.Namespace,
		f.Name != "" && in.Name != f.Name,
		f.ID != "" && in.ID != f.ID,
		f.CreatedBy != "" && in.Latest.CreatedBy != f.CreatedBy,
		f.BackendID != "" && in.Backend.ID != f.BackendID:
		return false
	}
	for _, r := range f.Labels {
		if !r.Matches(in.Labels) {
			return false
		}
	}
	return true
}

// compare is the store's list order: type path ascending, revision
// descending (by its sort key, then its text), createdAt descending, id
// ascending.
func compare(a, b *entry) int {
	if c := strings.Compare(a.inst.TypeRef.Path, b.inst.TypeRef.Path); c != 0 {
		return c
	}
	if c := strings.Compare(b.revKey, a.revKey); c != 0 {
		return c
	}
	if c := strings.Compare(b.inst.TypeRef.Revision, a.inst.TypeRef.Revision); c != 0 {
		return c
	}
	if c := b.inst.CreatedAt.Compare(a.inst.CreatedAt); c != 0 {
		return c
	}
	return strings.Compare(a.inst.ID, b.inst.ID)
}

// compareName is store.ByName: namespace, name, then type path.
func compareName(a, b *entry) int {
	return cmp.Or(strings.Compare(a.inst.Namespace, b.inst.Namespace), strings.Compare(a.inst.Name, b.inst.Name),
		strings.Compare(a.inst.TypeRef.Path, b.inst.TypeRef.Path))
}

// positionGate shares one change-log position query among the consistent
// reads waiting for it. A read joins only a query that has not started
// yet, so the position it gets was read after the read began, which is
// all consistency asks; under load one query serves many reads.
type positionGate struct {
	mu      sync.Mutex
	running bool
	next    *positionRound // the round that starts when the running one ends
}

type positionRound struct {
	done chan struct{}
	seq  int64
	err  error
}

func (g *positionGate) read(ctx context.Context, src Source) (int64, error) {
	g.mu.Lock()
	if !g.running {
		// No query under way (so no round gathering either): this read
		// queries for itself, with no round to share, then runs the
		// rounds that gathered meanwhile, as a leader does.
		g.running = true
		g.mu.Unlock()
		seq, err := src.LastSeq(ctx) // its own: its context rules
		g.mu.Lock()
		r := g.next
		g.next = nil
		if r == nil {
			g.running = false
		}
		g.mu.Unlock()
		if r != nil {
			g.run(context.WithoutCancel(ctx), src, r, leaderRounds-1)
		}
		return seq, err
	}
	r := g.next
	if r == nil {
		r = &positionRound{done: make(chan struct{})}
		g.next = r
	}
	g.mu.Unlock()
	select {
	case <-r.done:
		return r.seq, r.err
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// leaderRounds bounds the rounds a read runs for others before it hands
// the rest to a goroutine of their own, so its own latency stays bounded.
const leaderRounds = 3

// run queries for r, then for the round that gathered meanwhile, until
// none did; after n rounds (n > 0) it goes on in a new goroutine.
func (g *positionGate) run(ctx context.Context, src Source, r *positionRound, n int) {
	for i := 1; r != nil; i++ {
		r.seq, r.err = src.LastSeq(ctx)
		close(r.done)
		g.mu.Lock()
		r = g.next
		g.next = nil
		if r == nil {
			g.running = false
		}
		g.mu.Unlock()
		if r != nil && i == n {
			go g.run(ctx, src, r, 0)
			return
		}
	}
}
