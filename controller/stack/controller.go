// Package stack is the stack controller: it keeps every installation (an
// instance of a Type a stack registered, seed 004's MinimalGCP) in line
// with its stack. It renders the installation's stack with its parameters,
// applies the rendered resources as instances the installation owns,
// deletes those no longer rendered, sets hand edits back (the installation
// is the source of truth), reports conditions, outputs and events in the
// installation's status, and deletes the children by deletion priority
// when the installation is deleted.
//
// It is a client of the hub like any façade and level-triggered in the
// manner of controller-runtime: Reconcile(ctx, id) reads the current state
// and converges it, whatever happened before; it runs on every change of
// an installation or of one of its children (the hub's change log) and
// periodically. With several replicas on one PostgreSQL, one lease in the
// store (hub.AcquireLease) makes exactly one of them reconcile at a time;
// another takes over when the holder stops renewing it.
package stack

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/deps"
	"github.com/cairn-dev/cairn/hub"
	pkg "github.com/cairn-dev/cairn/stack"
	"github.com/cairn-dev/cairn/store"
)

// LeaseName is the lease the stack controller's replicas share.
const LeaseName = "stack-controller"

// Config configures a Controller.
type Config struct {
	Hub    *hub.Hub
	Logger *slog.Logger
	// Identity names this replica as the lease holder and the writer of
	// what it changes (createdBy). Default: stack-controller@<host>-<random>.
	Identity string
	// Resync is how often every installation is reconciled even without a
	// change. Default 5 minutes.
	Resync time.Duration
	// LeaseDuration is how long the lease lasts without renewal; it is
	// renewed every third of it. A replica that cannot renew in time stops
	// reconciling before the lease expires. Default 15 s.
	LeaseDuration time.Duration
	// Workers reconcile different installations in parallel. Default 2.
	Workers int
	// Renderer renders the stacks; its zero value has the built-in
	// patchers.
	Renderer pkg.Renderer
	// Dependencies, if set, resolves and installs the dependencies of an
	// installation created without them (kubectl apply of an installation
	// whose stack requires others) before it is rendered.
	Dependencies Dependencies
}

// Dependencies installs an installation's dependencies in the
// background (controller/install.Runner): Ensure starts that when it is
// not under way and never blocks; done is true once the installation no
// longer waits for it, else msg says what it waits for.
type Dependencies interface {
	Ensure(ctx context.Context, inst cairn.Instance, stack hub.StackEntry) (msg string, done bool)
}

// Controller reconciles installations.
type Controller struct {
	hub      *hub.Hub
	log      *slog.Logger
	identity string
	resync   time.Duration
	leaseDur time.Duration
	workers  int
	renderer pkg.Renderer
	deps     Dependencies

	mu sync.Mutex
	// owners maps a child's id to its installation's id, so a change of a
	// child (a hand edit, a status written by whatever acts on it)
	// triggers its installation.
	owners map[string]string
	// sources maps an instance an installation reads through its parameter
	// sources (sources.go) to those installations, so its change triggers
	// them.
	sources map[string]map[string]bool
	// instTypes caches which Types are installation Types.
	instTypes map[cairn.TypeRef]bool
	// stacks caches parsed packages by digest.
	stacks map[string]*pkg.Stack
	// renders caches each installation's last render (reconcile.go).
	renders map[string]renderCache
	// catalog caches which catalog entry renders which Type (reconcile.go).
	catalog map[string]catalogEntry
	// catalogGen counts catalog changes, so a choice read before one is
	// not cached after it.
	catalogGen uint64
	// sharing caches status.sharing by stack digest.
	sharing map[string]*deps.SharingStatus
	// leader tells whether this replica held the lease at its last
	// renewal; tests and metrics read it.
	leader bool
}

// New returns a Controller; Run starts it.
func New(cfg Config) *Controller {
	c := &Controller{hub: cfg.Hub, log: cfg.Logger, identity: cfg.Identity, resync: cfg.Resync,
		leaseDur: cfg.LeaseDuration, workers: cfg.Workers, renderer: cfg.Renderer, deps: cfg.Dependencies,
		owners: map[string]string{}, sources: map[string]map[string]bool{}, instTypes: map[cairn.TypeRef]bool{}, stacks: map[string]*pkg.Stack{}, renders: map[string]renderCache{}, catalog: map[string]catalogEntry{}, sharing: map[string]*deps.SharingStatus{}}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	if c.identity == "" {
		host, _ := os.Hostname()
		c.identity = fmt.Sprintf("stack-controller@%s-%s", host, uuid.NewString()[:8])
	}
	if c.resync <= 0 {
		c.resync = 5 * time.Minute
	}
	if c.leaseDur <= 0 {
		c.leaseDur = 15 * time.Second
	}
	if c.workers <= 0 {
		c.workers = 2
	}
	return c
}

// Identity is the lease holder name and actor of this replica.
func (c *Controller) Identity() string { return c.identity }

// Leader reports whether this replica holds the lease.
func (c *Controller) Leader() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.leader
}

// Run takes part in the lease until ctx ends; while this replica holds it,
// it watches and reconciles. It returns nil when ctx ends.
func (c *Controller) Run(ctx context.Context) error {
	ctx = cairn.WithActor(ctx, c.identity)
	renew := c.leaseDur / 3
	var (
		leading context.CancelFunc
		done    chan struct{}
		renewed time.Time
	)
	stop := func() {
		if leading != nil {
			leading()
			<-done
			leading = nil
		}
		c.setLeader(false)
	}
	defer func() {
		stop()
		// Hand the lease over at once rather than after it expires.
		_ = c.hub.ReleaseLease(context.WithoutCancel(ctx), LeaseName, c.identity)
	}()
	t := time.NewTicker(renew)
	defer t.Stop()
	for {
		// Until a stack is added there is nothing to reconcile: take no
		// part in the lease, so a hub without stacks writes nothing.
		if !c.anyStacks(ctx) {
			select {
			case <-ctx.Done():
				return nil
			case <-t.C:
				continue
			}
		}
		held, err := c.hub.AcquireLease(ctx, LeaseName, c.identity, c.leaseDur)
		if err != nil && ctx.Err() == nil {
			c.log.WarnContext(ctx, "stack controller: lease renewal failed", "err", err)
		}
		switch {
		case held:
			renewed = time.Now()
			if leading == nil {
				c.log.InfoContext(ctx, "stack controller: leading", "identity", c.identity)
				lctx, cancel := context.WithCancel(ctx)
				leading, done = cancel, make(chan struct{})
				c.setLeader(true)
				go func() {
					defer close(done)
					c.lead(lctx)
				}()
			}
		case leading != nil && (err == nil || time.Since(renewed) > c.leaseDur*2/3):
			// Lost the lease, or could not renew it for long enough that
			// another replica may take it soon: stop before it can.
			c.log.WarnContext(ctx, "stack controller: lease lost, stopping", "identity", c.identity)
			stop()
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// anyStacks reports whether some stack registered an installation Type;
// once true it stays true.
func (c *Controller) anyStacks(ctx context.Context) bool {
	c.mu.Lock()
	seen := slices.Contains(slices.Collect(maps.Values(c.instTypes)), true)
	c.mu.Unlock()
	if seen {
		return true
	}
	types, err := c.hub.ListTypes(ctx, store.TypeFilter{Parent: hub.InstallationParent})
	if err != nil || len(types) == 0 {
		return false
	}
	c.mu.Lock()
	for _, t := range types {
		c.instTypes[t.Ref()] = true
	}
	c.mu.Unlock()
	return true
}

func (c *Controller) setLeader(v bool) {
	c.mu.Lock()
	c.leader = v
	c.mu.Unlock()
}

// lead watches and reconciles until ctx ends.
func (c *Controller) lead(ctx context.Context) {
	q := newQueue()
	var wg sync.WaitGroup
	for range c.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.work(ctx, q)
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		c.watch(ctx, q)
	}()
	<-ctx.Done()
	q.close()
	wg.Wait()
}

func (c *Controller) work(ctx context.Context, q *queue) {
	for {
		id, ok := q.get()
		if !ok {
			return
		}
		again, err := c.Reconcile(ctx, id)
		switch {
		case ctx.Err() != nil:
		case err != nil:
			d := q.backoff(id)
			c.log.WarnContext(ctx, "stack controller: reconcile failed", "installation", id, "retry", d, "err", err)
			q.addAfter(ctx, id, d)
		default:
			q.forget(id)
			if again > 0 {
				q.addAfter(ctx, id, again)
			}
		}
		q.done(id)
	}
}

// watch queues every installation now and every resync, and each one whose
// installation or child changes.
func (c *Controller) watch(ctx context.Context, q *queue) {
	for ctx.Err() == nil {
		from, err := c.hub.LastSeq(ctx)
		if err == nil {
			err = c.enqueueAll(ctx, q)
		}
		if err == nil {
			wctx, cancel := context.WithCancel(ctx)
			go func() {
				// Periodic resync, for what no change reports (a child
				// whose readiness depends on time, a missed change).
				t := time.NewTicker(c.resync)
				defer t.Stop()
				for {
					select {
					case <-wctx.Done():
						return
					case <-t.C:
						if err := c.enqueueAll(wctx, q); err != nil && wctx.Err() == nil {
							c.log.WarnContext(wctx, "stack controller: resync", "err", err)
						}
					}
				}
			}()
			err = c.hub.Watch(wctx, from, func(ch store.Change) error {
				c.onChange(wctx, q, ch)
				return nil
			})
			cancel()
		}
		if ctx.Err() != nil {
			return
		}
		// CodeGone (the log was pruned past us) or a store failure: list
		// again from now, as a Kubernetes informer does on 410.
		c.log.WarnContext(ctx, "stack controller: watch restarts", "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

func (c *Controller) onChange(ctx context.Context, q *queue, ch store.Change) {
	c.mu.Lock()
	owner, isChild := c.owners[ch.InstanceID]
	c.mu.Unlock()
	if isChild {
		q.add(owner)
	}
	for _, inst := range c.readers(ch.InstanceID) {
		q.add(inst)
	}
	if c.isInstallationType(ctx, ch.TypeRef) {
		q.add(ch.InstanceID)
	}
	if ch.TypeRef.Path == hub.StackTypeRef().Path {
		// A stack version added to (or removed from) the catalog may
		// change which version renders an unpinned installation: every
		// installation is looked at now, not at the next resync, with
		// the cached choice of version forgotten.
		c.mu.Lock()
		clear(c.catalog)
		c.catalogGen++
		c.mu.Unlock()
		if err := c.enqueueAll(ctx, q); err != nil && ctx.Err() == nil {
			c.log.WarnContext(ctx, "stack controller: catalog changed", "err", err)
		}
	}
}

func (c *Controller) isInstallationType(ctx context.Context, ref cairn.TypeRef) bool {
	c.mu.Lock()
	v, ok := c.instTypes[ref]
	c.mu.Unlock()
	if ok {
		return v
	}
	v, err := c.hub.IsInstallationType(ctx, ref)
	if err != nil {
		return false
	}
	c.mu.Lock()
	c.instTypes[ref] = v
	c.mu.Unlock()
	return v
}

// enqueueAll queues every installation of every installation Type.
func (c *Controller) enqueueAll(ctx context.Context, q *queue) error {
	ids, err := c.Installations(ctx)
	for _, id := range ids {
		q.add(id)
	}
	return err
}

// Installations lists the ids of every installation.
func (c *Controller) Installations(ctx context.Context) ([]string, error) {
	types, err := c.hub.ListTypes(ctx, store.TypeFilter{Parent: hub.InstallationParent})
	if err != nil {
		return nil, err
	}
	var ids []string
	var errs []error
	for _, t := range types {
		c.mu.Lock()
		c.instTypes[t.Ref()] = true
		c.mu.Unlock()
		insts, err := c.hub.ListInstances(ctx, store.InstanceFilter{TypePath: t.Path, TypeRevision: t.Revision}, false)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, inst := range insts {
			ids = append(ids, inst.ID)
		}
	}
	return ids, errors.Join(errs...)
}

// stackOf returns the parsed package of a catalog entry, cached by digest.
func (c *Controller) stackOf(e hub.StackEntry) (*pkg.Stack, error) {
	c.mu.Lock()
	s, ok := c.stacks[e.Digest]
	c.mu.Unlock()
	if ok {
		return s, nil
	}
	s, err := e.Stack()
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.stacks[e.Digest] = s
	c.mu.Unlock()
	return s, nil
}

func (c *Controller) setOwners(owner string, children []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, id := range children {
		c.owners[id] = owner
	}
}

func (c *Controller) forgetOwner(owner string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.renders, owner)
	for src, insts := range c.sources {
		delete(insts, owner)
		if len(insts) == 0 {
			delete(c.sources, src)
		}
	}
	for k, v := range c.owners {
		if v == owner {
			delete(c.owners, k)
		}
	}
}
