package cli

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"

	"github.com/cairn-dev/cairn/controller/recovery"
	"github.com/cairn-dev/cairn/hub"
)

// recoveryOptions are serve's flags for the recovery controller.
type recoveryOptions struct {
	interval time.Duration
	grace    time.Duration
}

func (a *app) addRecoveryFlags(cmd *cobra.Command, o *recoveryOptions) {
	cmd.Flags().DurationVar(&o.interval, "recovery-interval", 30*time.Second, "how often the intent journal is checked for writes a dead process left half done (one replica at a time)")
	cmd.Flags().DurationVar(&o.grace, "recovery-grace", time.Minute, "how old an unfinished write must be before recovery finishes it; longer than any write takes, backend timeout included")
}

// startRecovery runs the recovery controller until ctx ends and exports
// what its last pass found; the returned function waits for it to stop.
func startRecovery(ctx context.Context, h *hub.Hub, o recoveryOptions, reg prometheus.Registerer, log *slog.Logger) (func(), error) {
	c := recovery.New(recovery.Config{Hub: h, Interval: o.interval, Grace: o.grace, Logger: log})
	for _, m := range []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "cairn_recovery_failed_intents",
			Help: "Interrupted writes the last recovery pass could not finish (their backend is down or refuses); retried with backoff."},
			func() float64 { return float64(len(c.Status().Failed)) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "cairn_recovery_waiting_intents",
			Help: "Writes on their way (younger than --recovery-grace) at the last recovery pass."},
			func() float64 { return float64(c.Status().Waiting) }),
	} {
		if err := reg.Register(m); err != nil {
			return nil, err
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = c.Run(ctx)
	}()
	return func() {
		cancel()
		<-done
	}, nil
}
