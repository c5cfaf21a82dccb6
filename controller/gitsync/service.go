package gitsync

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/backend/git"
	"github.com/cairn-dev/cairn/hub"
	"github.com/cairn-dev/cairn/store"
)

// DefaultSyncInterval is how often `cairn serve` syncs every Git backend.
const DefaultSyncInterval = time.Minute

// webhookSyncTimeout bounds a sync a webhook triggers; it outlives the
// request, so a sender that hangs up does not cut an import short.
const webhookSyncTimeout = 5 * time.Minute

// DefaultWebhookWait is how long a webhook waits for its sync before it
// answers 202: under the providers' delivery timeouts (Gitea 5 s, GitHub
// and GitLab 10 s), which count a slower answer as a failed delivery.
const DefaultWebhookWait = 3 * time.Second

// SyncServiceConfig configures a SyncService.
type SyncServiceConfig struct {
	// Hub and Opener are as in SyncConfig. Required.
	Hub    *hub.Hub
	Opener git.BackendOpener
	// Interval between syncs of every Git backend in Run; 0 or less: Run
	// returns at once (webhooks still sync).
	Interval time.Duration
	// Logger receives the log. Nil discards.
	Logger *slog.Logger
	// WebhookSecret, when set, must sign every webhook: GitHub's and
	// Gitea's HMAC-SHA256 of the body (X-Hub-Signature-256: sha256=<hex>,
	// X-Gitea-Signature: <hex>) or GitLab's token (X-Gitlab-Token).
	// Unsigned or wrongly signed calls get 401 and sync nothing.
	WebhookSecret []byte
	// WebhookWait is how long a webhook waits for the sync it started
	// before answering 202 Accepted, the sync going on. Default
	// DefaultWebhookWait.
	WebhookWait time.Duration
}

// SyncService keeps one Syncer per Git backend instance: Run polls them
// all, Handler serves the webhook that syncs one at once. It is safe for
// concurrent use.
type SyncService struct {
	cfg SyncServiceConfig
	log *slog.Logger

	mu      sync.Mutex
	syncers map[string]*Syncer // by backend id
	// hooks are the webhooks' syncs of each backend, by backend id: the
	// one running and at most one queued behind it (trigger).
	hooks map[string]*hookSyncs

	// Syncs webhooks started: Close cancels and waits for them.
	bg   context.Context
	stop context.CancelFunc
	wg   sync.WaitGroup
}

// NewSyncService returns a SyncService.
func NewSyncService(cfg SyncServiceConfig) (*SyncService, error) {
	if cfg.Hub == nil || cfg.Opener == nil {
		return nil, errors.New("git sync: Hub and Opener are required")
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.WebhookWait <= 0 {
		cfg.WebhookWait = DefaultWebhookWait
	}
	bg, stop := context.WithCancel(context.Background())
	return &SyncService{cfg: cfg, log: log, syncers: map[string]*Syncer{}, hooks: map[string]*hookSyncs{}, bg: bg, stop: stop}, nil
}

// Close cancels the syncs webhooks started that are still running and
// waits for them.
func (s *SyncService) Close() {
	s.stop()
	s.wg.Wait()
}

// backends lists the Git backend instances.
func (s *SyncService) backends(ctx context.Context) ([]cairn.Instance, error) {
	list, err := s.cfg.Hub.ListInstances(ctx, store.InstanceFilter{TypePath: git.TypePath}, false)
	if err != nil {
		return nil, fmt.Errorf("git sync: list Git backends: %w", err)
	}
	return list, nil
}

func (s *SyncService) syncer(id string) (*Syncer, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sy, ok := s.syncers[id]; ok {
		return sy, nil
	}
	sy, err := NewSyncer(SyncConfig{Hub: s.cfg.Hub, Opener: s.cfg.Opener, BackendID: id, Logger: s.log})
	if err != nil {
		return nil, err
	}
	s.syncers[id] = sy
	return sy, nil
}

// Syncer returns the Syncer of the Git backend whose id, alias or name is
// ref; NotFound when there is none.
func (s *SyncService) Syncer(ctx context.Context, ref string) (*Syncer, error) {
	list, err := s.backends(ctx)
	if err != nil {
		return nil, err
	}
	for _, inst := range list {
		if inst.ID == ref || (inst.Alias != "" && inst.Alias == ref) || inst.Name == ref {
			return s.syncer(inst.ID)
		}
	}
	return nil, cairn.Errorf(cairn.CodeNotFound, "git sync: no Git backend has the id, alias or name %q", ref)
}

// Syncers returns the Syncers made so far, by backend id.
func (s *SyncService) Syncers() []*Syncer {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*Syncer, 0, len(s.syncers))
	for _, sy := range s.syncers {
		out = append(out, sy)
	}
	slices.SortFunc(out, func(a, b *Syncer) int { return strings.Compare(a.BackendID(), b.BackendID()) })
	return out
}

// SyncAll syncs every Git backend, one after another; a failing backend
// does not keep the others from syncing.
func (s *SyncService) SyncAll(ctx context.Context) error {
	list, err := s.backends(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, inst := range list {
		sy, err := s.syncer(inst.ID)
		if err == nil {
			_, err = sy.Sync(ctx)
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Run syncs every Git backend every Interval until ctx ends.
func (s *SyncService) Run(ctx context.Context) {
	if s.cfg.Interval <= 0 {
		return
	}
	t := time.NewTicker(s.cfg.Interval)
	defer t.Stop()
	for {
		if err := s.SyncAll(ctx); err != nil && ctx.Err() == nil {
			s.log.ErrorContext(ctx, "git sync", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// WebhookPattern and StatusPattern are where Handler is mounted.
const (
	WebhookPattern = "POST /hooks/git/{backend}"
	StatusPattern  = "GET /hooks/git/{backend}"
)

// Handler serves POST /hooks/git/{backend id, alias or name}: a push
// notification (GitHub, GitLab, Gitea or anything else; the payload is
// read and ignored, since the sync fetches the branch itself) syncs that
// backend at once and answers with what the sync did, or, when the sync
// takes longer than WebhookWait, 202 Accepted while it goes on (GET on the
// same path shows its outcome).
func (s *SyncService) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc(WebhookPattern, func(w http.ResponseWriter, r *http.Request) {
		// The signature is computed as the body streams in: the payload
		// is ignored, and a push that is not signed must not make the
		// server hold it (the path is public).
		if !s.signed(r.Header, io.LimitReader(r.Body, 25<<20)) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_ = json.NewEncoder(w).Encode(map[string]string{"error": "the webhook is not signed with the configured secret " +
				"(X-Hub-Signature-256, X-Gitea-Signature or X-Gitlab-Token)"})
			return
		}
		ref := r.PathValue("backend")
		w.Header().Set("Content-Type", "application/json")
		sy, err := s.Syncer(r.Context(), ref)
		var res SyncResult
		if err == nil {
			// The sync outlives the request (a sender that hangs up does
			// not cut an import short); the answer waits for it at most
			// WebhookWait, then says it goes on.
			run := s.trigger(sy)
			t := time.NewTimer(s.cfg.WebhookWait)
			defer t.Stop()
			select {
			case <-run.done:
				res, err = run.res, run.err
			case <-t.C:
				w.WriteHeader(http.StatusAccepted)
				_ = json.NewEncoder(w).Encode(map[string]any{"backend": sy.BackendID(), "running": true,
					"message": "the sync goes on; GET " + r.URL.Path + " shows what it did"})
				return
			}
		}
		if err != nil {
			code := http.StatusBadGateway
			if cairn.HasCode(err, cairn.CodeNotFound) {
				code = http.StatusNotFound
			}
			w.WriteHeader(code)
			_ = json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"backend": sy.BackendID(), "sync": res})
	})
	// GET shows what syncs did: the counters and the last events
	// (creations, versions, deletions, skipped files with the reason).
	mux.HandleFunc(StatusPattern, func(w http.ResponseWriter, r *http.Request) {
		sy, err := s.Syncer(r.Context(), r.PathValue("backend"))
		w.Header().Set("Content-Type", "application/json")
		if err != nil {
			code := http.StatusInternalServerError
			if cairn.HasCode(err, cairn.CodeNotFound) {
				code = http.StatusNotFound
			}
			w.WriteHeader(code)
			_ = json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"backend": sy.BackendID(), "stats": sy.Stats(), "events": sy.Events()})
	})
	return mux
}

// hookSyncs are the webhooks' syncs of one backend.
type hookSyncs struct {
	running, queued *hookSync
}

// hookSync is one sync webhooks asked for; done closes when it finished,
// with res and err set.
type hookSync struct {
	done chan struct{}
	res  SyncResult
	err  error
}

// trigger returns the sync that answers a webhook for sy's backend: a new
// one, started at once, when none runs; else the one queued to run after
// the running one, which every webhook arriving meanwhile shares. A push
// made during a sync may have come after its fetch, so one more sync must
// follow, but one is enough: it fetches every push made until it starts.
// So a burst of webhooks during a long import costs two syncs, not one
// each (the Syncer runs them one at a time anyway).
func (s *SyncService) trigger(sy *Syncer) *hookSync {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.hooks[sy.BackendID()]
	if h == nil {
		h = &hookSyncs{}
		s.hooks[sy.BackendID()] = h
	}
	if h.running != nil {
		if h.queued == nil {
			h.queued = &hookSync{done: make(chan struct{})}
		}
		return h.queued
	}
	run := &hookSync{done: make(chan struct{})}
	h.running = run
	s.wg.Go(func() {
		for run != nil {
			ctx, cancel := context.WithTimeout(s.bg, webhookSyncTimeout)
			run.res, run.err = sy.Sync(ctx)
			cancel()
			close(run.done)
			s.mu.Lock()
			run, h.queued = h.queued, nil
			h.running = run
			s.mu.Unlock()
		}
	})
	return run
}

// signed reports whether a webhook carries a valid signature of body, or
// no secret is configured. Comparisons take constant time.
func (s *SyncService) signed(h http.Header, body io.Reader) bool {
	secret := s.cfg.WebhookSecret
	if len(secret) == 0 {
		return true
	}
	mac := hmac.New(sha256.New, secret)
	if _, err := io.Copy(mac, body); err != nil {
		return false
	}
	want := hex.EncodeToString(mac.Sum(nil))
	if sig, ok := strings.CutPrefix(h.Get("X-Hub-Signature-256"), "sha256="); ok && hmac.Equal([]byte(sig), []byte(want)) {
		return true
	}
	if sig := h.Get("X-Gitea-Signature"); sig != "" && hmac.Equal([]byte(sig), []byte(want)) {
		return true
	}
	if tok := h.Get("X-Gitlab-Token"); tok != "" && subtle.ConstantTimeCompare([]byte(tok), secret) == 1 {
		return true
	}
	return false
}
