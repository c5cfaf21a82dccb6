package cli

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/controller/gitsync"
	"github.com/cairn-dev/cairn/hub"
)

// EnvGitWebhookSecretFile is the environment variable for serve's
// --git-webhook-secret-file.
const EnvGitWebhookSecretFile = "CAIRN_GIT_WEBHOOK_SECRET_FILE"

// gitSyncOptions are serve's Git sync flags.
type gitSyncOptions struct {
	interval   time.Duration
	secretFile string
	secret     []byte // read from secretFile by load
}

// addGitSyncFlags adds serve's --git-sync-interval and --git-webhook-secret-file.
func (a *app) addGitSyncFlags(cmd *cobra.Command, o *gitSyncOptions) {
	cmd.Flags().DurationVar(&o.interval, "git-sync-interval", gitsync.DefaultSyncInterval,
		"how often to import changes pushed to Git backends' repositories outside cairn (0: only on POST /hooks/git/{backend})")
	cmd.Flags().StringVar(&o.secretFile, "git-webhook-secret-file", a.env.Getenv(EnvGitWebhookSecretFile),
		"file holding the secret push webhooks must be signed with (GitHub/Gitea HMAC, GitLab token); unset: webhooks are not checked [$"+EnvGitWebhookSecretFile+"]")
}

// load reads the webhook secret file, when one is configured, before the
// store is opened.
func (o *gitSyncOptions) load() (err error) {
	o.secret, err = readWebhookSecret(o.secretFile)
	return err
}

// readWebhookSecret reads the webhook secret file; nil when none is
// configured.
func readWebhookSecret(path string) ([]byte, error) {
	if path == "" {
		return nil, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, &cairn.Error{Code: cairn.CodeInvalid, Msg: fmt.Sprintf("--git-webhook-secret-file: %v", err), Err: err}
	}
	secret := bytes.TrimSpace(b)
	if len(secret) == 0 {
		return nil, cairn.Errorf(cairn.CodeInvalid, "--git-webhook-secret-file %s is empty", path)
	}
	return secret, nil
}

// gitSync imports changes made outside cairn in the repositories of Git
// backends: every interval (0 disables polling) and at once on
// POST /hooks/git/{backend id, alias or name} (push webhooks of GitHub,
// GitLab, Gitea, ...); GET on that path shows the counters and the last
// events. The counters are also metrics on reg. The returned
// function stops the polling and the syncs webhooks started, and waits
// for them.
func (a *app) gitSync(ctx context.Context, h *hub.Hub, opener hub.BackendOpener, o gitSyncOptions,
	mux *http.ServeMux, reg prometheus.Registerer, log *slog.Logger) (stop func(), err error) {
	secret := o.secret
	if secret == nil {
		log.Warn("Git push webhooks are not checked: set --git-webhook-secret-file to require signed ones")
	}
	svc, err := gitsync.NewSyncService(gitsync.SyncServiceConfig{Hub: h, Opener: opener, Interval: o.interval, Logger: log,
		WebhookSecret: secret})
	if err != nil {
		return nil, err
	}
	if err := reg.Register(newGitSyncCollector(svc)); err != nil {
		return nil, fmt.Errorf("register Git sync metrics: %w", err)
	}
	hooks := svc.Handler()
	mux.Handle(gitsync.WebhookPattern, hooks)
	mux.Handle(gitsync.StatusPattern, hooks)
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { svc.Run(ctx) })
	return func() { cancel(); wg.Wait(); svc.Close() }, nil
}

// gitSyncCollector reads the Syncers' counters at scrape time.
type gitSyncCollector struct {
	svc            *gitsync.SyncService
	changes, syncs *prometheus.Desc
}

func newGitSyncCollector(svc *gitsync.SyncService) gitSyncCollector {
	return gitSyncCollector{svc: svc,
		changes: prometheus.NewDesc("cairn_git_sync_changes_total",
			"Files changed outside cairn that Git sync imported (created, updated, deleted) or reported and skipped (skipped).",
			[]string{"backend", "result"}, nil),
		syncs: prometheus.NewDesc("cairn_git_sync_runs_total",
			"Syncs of a Git backend, by outcome (ok, failed).", []string{"backend", "outcome"}, nil),
	}
}

func (c gitSyncCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.changes
	ch <- c.syncs
}

func (c gitSyncCollector) Collect(ch chan<- prometheus.Metric) {
	for _, s := range c.svc.Syncers() {
		st, id := s.Stats(), s.BackendID()
		for result, n := range map[string]int64{"created": st.Created, "updated": st.Updated, "deleted": st.Deleted, "skipped": st.Skipped} {
			ch <- prometheus.MustNewConstMetric(c.changes, prometheus.CounterValue, float64(n), id, result)
		}
		ch <- prometheus.MustNewConstMetric(c.syncs, prometheus.CounterValue, float64(st.Syncs-st.Failures), id, "ok")
		ch <- prometheus.MustNewConstMetric(c.syncs, prometheus.CounterValue, float64(st.Failures), id, "failed")
	}
}
