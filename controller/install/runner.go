package install

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/deps"
	"github.com/cairn-dev/cairn/hub"
)

// Runner installs the dependencies of installations created without
// them (kubectl apply of an installation whose stack requires others):
// the stack controller calls Ensure, which starts the install of the
// installation in the background, as cairn install would with the
// installation's spec as parameters, and reports its progress. The
// installation is the root: once the install has its dependencies ready,
// it marks the root (deps.cairn.dev/root-id) and the controller renders
// it. A failed install is tried again after RetryAfter.
type Runner struct {
	Service    *Service
	RetryAfter time.Duration
	ctx        context.Context

	mu   sync.Mutex
	runs map[string]*runState
}

type runState struct {
	running bool
	msg     string
	failed  time.Time
}

// NewRunner returns a Runner whose installs last as long as ctx.
func NewRunner(ctx context.Context, s *Service) *Runner {
	return &Runner{Service: s, RetryAfter: 10 * time.Second, ctx: ctx, runs: map[string]*runState{}}
}

// Ensure implements the stack controller's Dependencies.
func (r *Runner) Ensure(_ context.Context, inst cairn.Instance, e hub.StackEntry) (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := r.runs[inst.ID]
	switch {
	case st != nil && st.running:
		return st.msg, false
	case st != nil && !st.failed.IsZero() && time.Since(st.failed) < r.RetryAfter:
		return st.msg, false
	}
	spec := specOf(inst)
	// The same install as the one that made it, if one did: its
	// credentials, --dependency overrides and answers are on it.
	req := Request{Namespace: inst.Namespace, Name: inst.Name, Stack: e.Name + "@" + e.Version, Parameters: spec, Unattended: true}
	if c := inst.Annotations[hub.AnnotationCredentials]; c != "" {
		_ = json.Unmarshal([]byte(c), &req.Credentials)
	}
	if o := inst.Annotations[hub.AnnotationDependencyOverrides]; o != "" {
		_ = json.Unmarshal([]byte(o), &req.Dependencies)
	}
	if a := inst.Annotations[hub.AnnotationDependencyInputs]; a != "" {
		_ = json.Unmarshal([]byte(a), &req.Inputs)
	}
	if s, err := e.Stack(); err == nil {
		req.IfParametersDigest, _ = hub.ParametersDigest(s, spec)
	}
	msg := "resolving and installing the dependencies"
	if inst.Annotations[hub.AnnotationRootID] != "" {
		msg = "the parameters changed: resolving and installing the dependencies again"
	}
	st = &runState{running: true, msg: msg}
	r.runs[inst.ID] = st
	// Its failure goes into the installation's status (Dependencies),
	// which whoever may get the installation reads: without a backend's
	// words.
	ctx := hub.WithholdBackendWords(cairn.WithActor(r.ctx, "dependency-installer"))
	go func() {
		_, _, err := r.Service.Install(ctx, req, func(ev deps.Event) {
			if ev.Node == deps.Key(inst.Namespace, inst.Name) {
				return
			}
			r.mu.Lock()
			st.msg = fmt.Sprintf("installing the dependencies: %s %s", ev.Node, ev.Phase)
			r.mu.Unlock()
		})
		r.mu.Lock()
		defer r.mu.Unlock()
		st.running = false
		if errors.Is(err, ErrSpecChanged) {
			// Changed again while it ran: the next reconcile starts
			// the install for the spec as it is now, at once.
			delete(r.runs, inst.ID)
			return
		}
		if err != nil {
			st.failed = time.Now()
			st.msg = "installing the dependencies failed (retried): " + err.Error()
			r.Service.log().WarnContext(ctx, "dependencies of an applied installation", "installation", deps.Key(req.Namespace, req.Name), "err", err)
			return
		}
		delete(r.runs, inst.ID)
	}()
	return st.msg, false
}
