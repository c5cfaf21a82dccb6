package git

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/backend/controller"
	"github.com/cairn-dev/cairn/backend/sops"
)

// BackendOpener is the hub's opener contract (hub.BackendOpener), repeated
// here so this package does not import the hub.
type BackendOpener interface {
	OpenBackend(ctx context.Context, sb cairn.StorageBackend) (cairn.Backend, error)
}

// OpenerConfig configures an Opener.
type OpenerConfig struct {
	// CacheDir holds one clone per Git backend instance. Required.
	CacheDir string
	// Fallback opens every backend that is not a Git backend (the gRPC
	// adapter). Nil: those fail.
	Fallback BackendOpener
	// Controller returns the controller of a Git backend whose value names
	// one ("controller": {...}); nil, or a nil result, means the template
	// controller. Part B's WASM controllers plug in here.
	Controller func(ctx context.Context, sb cairn.StorageBackend) (controller.Controller, error)
	// Logger receives operational logs. Nil discards.
	Logger *slog.Logger
	// Getenv reads credentials' environment variables. Default os.Getenv.
	Getenv func(string) string
}

// Opener runs Git backends (instances of Type TypePath) in-process and
// hands every other backend to its fallback. It implements
// hub.BackendOpener, hub.HealthChecker and hub.ProposalChecker and is safe
// for concurrent use.
type Opener struct {
	cfg OpenerConfig

	mu       sync.Mutex
	backends map[string]*openedBackend // by backend id
}

type openedBackend struct {
	rv int
	b  *Backend
}

// NewOpener returns an Opener.
func NewOpener(cfg OpenerConfig) *Opener {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Opener{cfg: cfg, backends: map[string]*openedBackend{}}
}

// IsGit reports whether sb is a Git backend instance.
func IsGit(sb cairn.StorageBackend) bool { return sb.TypeRef.Path == TypePath }

// OpenBackend returns the Git backend for a Git backend instance (the same
// one until the instance gets a new resource version), else what the
// fallback opens.
func (o *Opener) OpenBackend(ctx context.Context, sb cairn.StorageBackend) (cairn.Backend, error) {
	if !IsGit(sb) {
		if o.cfg.Fallback == nil {
			return nil, cairn.Errorf(cairn.CodeUnavailable, "backend %q (%s): no client is configured for url %q", sb.ID, sb.TypeRef, sb.URL)
		}
		return o.cfg.Fallback.OpenBackend(ctx, sb)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if ob, ok := o.backends[sb.ID]; ok && ob.rv == sb.ResourceVersion {
		return ob.b, nil
	}
	if o.cfg.CacheDir == "" {
		return nil, cairn.Errorf(cairn.CodeUnavailable, "git backend %q: no cache directory is configured", sb.ID)
	}
	cfg, err := ParseConfig(sb.Value)
	if err != nil {
		return nil, err
	}
	var ctl controller.Controller
	if o.cfg.Controller != nil {
		if ctl, err = o.cfg.Controller(ctx, sb); err != nil {
			return nil, err
		}
	}
	// One clone per backend and remote: a backend pointed at another
	// repository or branch starts a fresh cache rather than mixing two.
	sum := sha256.Sum256([]byte(cfg.URL + "\x00" + cfg.Branch))
	dir := filepath.Join(o.cfg.CacheDir, sb.ID+"-"+hex.EncodeToString(sum[:6]))
	b, err := New(Options{Config: cfg, CacheDir: dir, Controller: ctl,
		Logger: o.cfg.Logger.With("backend", sb.ID), Getenv: o.cfg.Getenv})
	if err != nil {
		return nil, err
	}
	o.backends[sb.ID] = &openedBackend{rv: sb.ResourceVersion, b: b}
	return b, nil
}

// CheckBackendConfig checks a Git backend instance's settings as opening
// it would (ParseConfig), without connecting (hub.BackendConfigChecker);
// other backends are the fallback's to check, when it can.
func (o *Opener) CheckBackendConfig(ctx context.Context, sb cairn.StorageBackend) error {
	if !IsGit(sb) {
		if c, ok := o.cfg.Fallback.(interface {
			CheckBackendConfig(context.Context, cairn.StorageBackend) error
		}); ok {
			return c.CheckBackendConfig(ctx, sb)
		}
		return nil
	}
	cfg, err := ParseConfig(sb.Value)
	if err != nil {
		return err
	}
	// A SOPS backend whose identities cannot read what it encrypts would
	// write files nobody here could read back.
	if e := cfg.Encryption; e != nil && e.SOPS != nil {
		c, err := sops.New(*e.SOPS, o.cfg.Getenv)
		if err != nil {
			return cairn.Errorf(cairn.CodeInvalid, "git backend: %w", err)
		}
		if err := c.CheckReadable(); err != nil {
			return cairn.Errorf(cairn.CodeInvalid, "git backend: %w", err)
		}
	}
	return nil
}

// CheckBackend fetches a Git backend's branch (SERVING when the remote
// answers) and asks the fallback about other backends.
func (o *Opener) CheckBackend(ctx context.Context, sb cairn.StorageBackend) (cairn.BackendHealth, error) {
	if !IsGit(sb) {
		hc, ok := o.cfg.Fallback.(interface {
			CheckBackend(context.Context, cairn.StorageBackend) (cairn.BackendHealth, error)
		})
		if !ok {
			return cairn.BackendHealth{}, cairn.Errorf(cairn.CodeUnavailable, "no health check is available for url %q", sb.URL)
		}
		return hc.CheckBackend(ctx, sb)
	}
	c, err := o.OpenBackend(ctx, sb)
	if err != nil {
		return cairn.BackendHealth{}, err
	}
	b := c.(*Backend)
	start := time.Now()
	if err := b.refresh(ctx); err != nil {
		return cairn.BackendHealth{Status: "NOT_SERVING"}, fmt.Errorf("git backend %q: %w", sb.ID, err)
	}
	connect := time.Since(start)
	start = time.Now()
	if err := b.refresh(ctx); err != nil {
		return cairn.BackendHealth{Status: "NOT_SERVING"}, fmt.Errorf("git backend %q: %w", sb.ID, err)
	}
	return cairn.BackendHealth{Service: "git", Status: "SERVING", Connect: connect, RoundTrip: time.Since(start),
		TLS: strings.HasPrefix(b.cfg.URL, "https://") || strings.HasPrefix(b.cfg.URL, "ssh://")}, nil
}

// ProposalState asks the SCM provider of a Git backend in propose mode for
// the state (open, merged, closed) of the pull request a version's context
// records. It implements hub.ProposalChecker; other backends are asked
// through the fallback when it can.
func (o *Opener) ProposalState(ctx context.Context, sb cairn.StorageBackend, versionContext json.RawMessage) (string, error) {
	if !IsGit(sb) {
		pc, ok := o.cfg.Fallback.(interface {
			ProposalState(context.Context, cairn.StorageBackend, json.RawMessage) (string, error)
		})
		if !ok {
			return "", cairn.Errorf(cairn.CodeUnavailable, "backend %q makes no proposals this server can ask about", sb.ID)
		}
		return pc.ProposalState(ctx, sb, versionContext)
	}
	p := proposalOf(versionContext)
	if p == nil || p.Number <= 0 {
		return "", cairn.Errorf(cairn.CodeInvalid, "git backend %q: the context records no pull request", sb.ID)
	}
	c, err := o.OpenBackend(ctx, sb)
	if err != nil {
		return "", err
	}
	b := c.(*Backend)
	if b.scm == nil {
		return "", cairn.Errorf(cairn.CodeUnavailable, "git backend %q: no scm provider is configured to ask about pull request #%d", sb.ID, p.Number)
	}
	pr, err := b.scm.Get(ctx, p.Number)
	if err != nil {
		return "", fmt.Errorf("git backend %q: pull request #%d: %w", sb.ID, p.Number, err)
	}
	return pr.State, nil
}

// RotateKeys re-encrypts the files of a SOPS-encrypted Git backend to its
// age recipients plus addAge minus removeAge, in one commit (Backend.
// RotateKeys), and returns the backend instance's new value naming the new
// recipients, for the hub to record as its next resource version.
func (o *Opener) RotateKeys(ctx context.Context, sb cairn.StorageBackend, addAge, removeAge []string) (value json.RawMessage, commit string, files int, err error) {
	if !IsGit(sb) {
		return nil, "", 0, cairn.Errorf(cairn.CodeInvalid, "backend %q is not a Git backend: only Git backends with encryption.sops rotate keys", sb.ID)
	}
	cfg, err := ParseConfig(sb.Value)
	if err != nil {
		return nil, "", 0, err
	}
	if cfg.Encryption == nil || cfg.Encryption.SOPS == nil {
		return nil, "", 0, cairn.Errorf(cairn.CodeInvalid, "Git backend %q has no encryption.sops: nothing to rotate", sb.ID)
	}
	to := *cfg.Encryption.SOPS
	to.Age = slices.Clone(to.Age)
	for _, r := range removeAge {
		i := slices.Index(to.Age, r)
		if i < 0 {
			return nil, "", 0, cairn.Errorf(cairn.CodeInvalid, "--remove-age %s: not a recipient of Git backend %q (it has %s)", r, sb.ID, strings.Join(cfg.Encryption.SOPS.Age, ", "))
		}
		to.Age = slices.Delete(to.Age, i, i+1)
	}
	for _, r := range addAge {
		if !slices.Contains(to.Age, r) {
			to.Age = append(to.Age, r)
		}
	}
	if err := to.Check(); err != nil {
		return nil, "", 0, cairn.Errorf(cairn.CodeInvalid, "rotate keys of Git backend %q: %w", sb.ID, err)
	}
	c, err := o.OpenBackend(ctx, sb)
	if err != nil {
		return nil, "", 0, err
	}
	commit, files, err = c.(*Backend).RotateKeys(ctx, to)
	if err != nil {
		return nil, "", 0, err
	}
	// The new value: the instance's own, with encryption.sops.age replaced.
	var doc map[string]any
	if err := json.Unmarshal(sb.Value, &doc); err != nil {
		return nil, "", 0, fmt.Errorf("git backend %q: value: %w", sb.ID, err)
	}
	enc, _ := doc["encryption"].(map[string]any)
	s, _ := enc["sops"].(map[string]any)
	s["age"] = to.Age
	value, err = json.Marshal(doc)
	if err != nil {
		return nil, "", 0, err
	}
	return value, commit, files, nil
}
