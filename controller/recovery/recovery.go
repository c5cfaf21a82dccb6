// Package recovery is the controller that finishes writes a dead process
// left half done: at start and then periodically it asks the hub to
// recover the intent journal (hub.Recover), one replica at a time under a
// lease in the store, and reports what it could not finish (logs, and the
// figures Status returns for metrics).
package recovery

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/cairn-dev/cairn/hub"
)

// LeaseName is the lease the recovering replica holds.
const LeaseName = "cairn-recovery"

// Config configures a Controller.
type Config struct {
	Hub *hub.Hub
	// Interval between passes; default 30s.
	Interval time.Duration
	// Grace is how old an intent must be before it counts as left by a
	// dead process; it must exceed the longest write (backend timeout
	// included). Default 1m.
	Grace time.Duration
	// LeaseDuration; default 3 × Interval.
	LeaseDuration time.Duration
	// Identity is the lease holder; default recovery@HOST-RANDOM.
	Identity string
	Logger   *slog.Logger
}

// Controller runs recovery passes.
type Controller struct {
	cfg Config
	log *slog.Logger

	mu   sync.Mutex
	last Status
}

// Status is the outcome of the last pass.
type Status struct {
	At time.Time
	hub.RecoveryResult
	Err error
}

// New returns a Controller.
func New(cfg Config) *Controller {
	if cfg.Interval <= 0 {
		cfg.Interval = 30 * time.Second
	}
	if cfg.Grace <= 0 {
		cfg.Grace = time.Minute
	}
	if cfg.LeaseDuration <= 0 {
		cfg.LeaseDuration = 3 * cfg.Interval
	}
	if cfg.Identity == "" {
		host, _ := os.Hostname()
		var b [4]byte
		_, _ = rand.Read(b[:])
		cfg.Identity = "recovery@" + host + "-" + hex.EncodeToString(b[:])
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Controller{cfg: cfg, log: log}
}

// Status returns the last pass's outcome.
func (c *Controller) Status() Status {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.last
}

// Run passes at once and then every Interval until ctx ends, releasing the
// lease on the way out. While another replica holds the lease, it watches
// the lease and passes again as soon as it changes, so that when the
// holder stops (and releases it) this replica takes it over at once rather
// than at its next tick: a restore tells a served store by the lease, and
// would otherwise see none held for up to an Interval while this replica
// still serves.
func (c *Controller) Run(ctx context.Context) error {
	defer func() {
		_ = c.cfg.Hub.ReleaseLease(context.WithoutCancel(ctx), LeaseName, c.cfg.Identity)
	}()
	t := time.NewTicker(c.cfg.Interval)
	defer t.Stop()
	changed := make(chan struct{}, 1)
	var stopWatch func()
	defer func() {
		if stopWatch != nil {
			stopWatch()
		}
	}()
	for {
		held := c.pass(ctx)
		switch {
		case !held && stopWatch == nil && ctx.Err() == nil:
			stopWatch = c.watchLease(ctx, changed)
		case held && stopWatch != nil:
			stopWatch()
			stopWatch = nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		case <-changed:
		}
	}
}

// watchLease signals changed at every change of the lease until the
// returned func is called, watching again after a failure.
func (c *Controller) watchLease(ctx context.Context, changed chan<- struct{}) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			err := c.cfg.Hub.WatchLease(ctx, LeaseName, func() {
				select {
				case changed <- struct{}{}:
				default:
				}
			})
			if ctx.Err() != nil {
				return
			}
			c.log.Warn("recovery: watch the lease; taking it over waits for the next pass until the watch works again", "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

// Pass runs one recovery pass if this replica holds (or takes) the lease.
func (c *Controller) Pass(ctx context.Context) { c.pass(ctx) }

// pass is Pass, reporting whether this replica holds the lease.
func (c *Controller) pass(ctx context.Context) (held bool) {
	held, err := c.cfg.Hub.AcquireLease(ctx, LeaseName, c.cfg.Identity, c.cfg.LeaseDuration)
	if err != nil {
		if ctx.Err() == nil {
			c.log.Warn("recovery: take the lease", "err", err)
		}
		return false
	}
	if !held {
		return false
	}
	res, err := c.cfg.Hub.Recover(ctx, c.cfg.Grace)
	c.mu.Lock()
	c.last = Status{At: time.Now(), RecoveryResult: res, Err: err}
	c.mu.Unlock()
	switch {
	case err != nil && ctx.Err() == nil:
		c.log.Error("recovery pass failed", "err", err)
	case res.Undone > 0 || res.Committed > 0 || res.Deleted > 0 || res.Restored > 0 || len(res.Failed) > 0:
		c.log.Info("recovery pass", "undone", res.Undone, "committed", res.Committed, "deleted", res.Deleted,
			"restored", res.Restored, "failed", len(res.Failed), "waiting", res.Waiting)
	}
	return true
}
