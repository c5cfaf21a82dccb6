package cli

import (
	"context"
	"log/slog"
	"time"

	"github.com/spf13/cobra"

	"github.com/cairn-dev/cairn/controller/install"
	stackctl "github.com/cairn-dev/cairn/controller/stack"
	"github.com/cairn-dev/cairn/hub"
)

// stackControllerOptions are serve's flags for the stack controller.
type stackControllerOptions struct {
	enabled  bool
	resync   time.Duration
	lease    time.Duration
	identity string
}

func (a *app) addStackControllerFlags(cmd *cobra.Command, o *stackControllerOptions) {
	cmd.Flags().BoolVar(&o.enabled, "stack-controller", true, "reconcile stack installations (one replica at a time, by a lease in the store)")
	cmd.Flags().DurationVar(&o.resync, "stack-resync", time.Minute, "how often every installation is reconciled without a change")
	cmd.Flags().DurationVar(&o.lease, "stack-lease-duration", 15*time.Second, "how long the stack controller's lease lasts without renewal; another replica takes over after it")
	cmd.Flags().StringVar(&o.identity, "stack-controller-identity", "", "this replica's name as the stack controller's lease holder and writer (default stack-controller@HOST-RANDOM)")
	_ = cmd.Flags().MarkHidden("stack-controller-identity")
}

// startStackController runs the stack controller until ctx ends; the
// returned function waits for it to stop (and release its lease).
func startStackController(ctx context.Context, h *hub.Hub, o stackControllerOptions, log *slog.Logger) func() {
	if !o.enabled {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	// Installations applied with kubectl whose stack requires others get
	// their dependencies installed first (controller/install.Runner).
	runner := install.NewRunner(ctx, &install.Service{Hub: h, Log: log})
	c := stackctl.New(stackctl.Config{Hub: h, Logger: log, Resync: o.resync, LeaseDuration: o.lease, Identity: o.identity, Dependencies: runner})
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = c.Run(ctx)
	}()
	log.Info("stack controller started", "identity", c.Identity())
	return func() {
		cancel()
		<-done
	}
}
