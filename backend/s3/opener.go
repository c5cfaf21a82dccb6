package s3

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/cairn-dev/cairn"
)

// BackendOpener is the hub's opener contract (hub.BackendOpener), repeated
// here so this package does not import the hub.
type BackendOpener interface {
	OpenBackend(ctx context.Context, sb cairn.StorageBackend) (cairn.Backend, error)
}

// OpenerConfig configures an Opener.
type OpenerConfig struct {
	// Fallback opens every backend that is not an S3 backend. Nil: those fail.
	Fallback BackendOpener
	// Getenv reads credentials' environment variables. Default os.Getenv.
	Getenv func(string) string
}

// Opener runs S3 backends (instances of Type TypePath) in-process and hands
// every other backend to its fallback. It implements hub.BackendOpener and
// hub.HealthChecker and is safe for concurrent use.
type Opener struct {
	cfg OpenerConfig

	mu       sync.Mutex
	backends map[string]openedBackend // by backend id
}

type openedBackend struct {
	rv int
	b  *Backend
}

// NewOpener returns an Opener.
func NewOpener(cfg OpenerConfig) *Opener {
	return &Opener{cfg: cfg, backends: map[string]openedBackend{}}
}

// IsS3 reports whether sb is an S3 backend instance.
func IsS3(sb cairn.StorageBackend) bool { return sb.TypeRef.Path == TypePath }

// OpenBackend returns the S3 backend of an S3 backend instance (the same
// one until the instance gets a new resource version), else what the
// fallback opens.
func (o *Opener) OpenBackend(ctx context.Context, sb cairn.StorageBackend) (cairn.Backend, error) {
	if !IsS3(sb) {
		if o.cfg.Fallback == nil {
			return nil, cairn.Errorf(cairn.CodeUnavailable, "backend %q (%s): no client is configured for url %q", sb.ID, sb.TypeRef, sb.URL)
		}
		return o.cfg.Fallback.OpenBackend(ctx, sb)
	}
	return o.open(sb)
}

func (o *Opener) open(sb cairn.StorageBackend) (*Backend, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if ob, ok := o.backends[sb.ID]; ok && ob.rv == sb.ResourceVersion {
		return ob.b, nil
	}
	cfg, err := ParseConfig(sb.Value)
	if err != nil {
		return nil, err
	}
	b, err := New(Options{Config: cfg, Getenv: o.cfg.Getenv})
	if err != nil {
		return nil, err
	}
	o.backends[sb.ID] = openedBackend{rv: sb.ResourceVersion, b: b}
	return b, nil
}

// ProposalState asks the fallback about a proposal (S3 backends make
// none): a Git backend in propose mode behind it answers (hub.ProposalChecker).
func (o *Opener) ProposalState(ctx context.Context, sb cairn.StorageBackend, versionContext json.RawMessage) (string, error) {
	pc, ok := o.cfg.Fallback.(interface {
		ProposalState(context.Context, cairn.StorageBackend, json.RawMessage) (string, error)
	})
	if IsS3(sb) || !ok {
		return "", cairn.Errorf(cairn.CodeUnavailable, "backend %q makes no proposals this server can ask about", sb.ID)
	}
	return pc.ProposalState(ctx, sb, versionContext)
}

// CheckBackendConfig hands the settings check of a backend that is not an
// S3 backend to the fallback (hub.BackendConfigChecker), so a Git backend
// behind this opener is still checked when it is created.
func (o *Opener) CheckBackendConfig(ctx context.Context, sb cairn.StorageBackend) error {
	c, ok := o.cfg.Fallback.(interface {
		CheckBackendConfig(context.Context, cairn.StorageBackend) error
	})
	if IsS3(sb) || !ok {
		return nil
	}
	return c.CheckBackendConfig(ctx, sb)
}

// CheckBackend asks an S3 backend's endpoint whether its bucket exists
// (SERVING when it does) and the fallback about other backends.
func (o *Opener) CheckBackend(ctx context.Context, sb cairn.StorageBackend) (cairn.BackendHealth, error) {
	if !IsS3(sb) {
		hc, ok := o.cfg.Fallback.(interface {
			CheckBackend(context.Context, cairn.StorageBackend) (cairn.BackendHealth, error)
		})
		if !ok {
			return cairn.BackendHealth{}, cairn.Errorf(cairn.CodeUnavailable, "no health check is available for url %q", sb.URL)
		}
		return hc.CheckBackend(ctx, sb)
	}
	b, err := o.open(sb)
	if err != nil {
		return cairn.BackendHealth{}, err
	}
	start := time.Now()
	if err := b.Check(ctx); err != nil {
		return cairn.BackendHealth{Status: "NOT_SERVING"}, fmt.Errorf("s3 backend %q: %w", sb.ID, err)
	}
	connect := time.Since(start)
	start = time.Now()
	if err := b.Check(ctx); err != nil {
		return cairn.BackendHealth{Status: "NOT_SERVING"}, fmt.Errorf("s3 backend %q: %w", sb.ID, err)
	}
	return cairn.BackendHealth{Service: "s3", Status: "SERVING", Connect: connect, RoundTrip: time.Since(start), TLS: b.TLS()}, nil
}

// RotateKeys hands a key rotation to the fallback (the Git backend's
// encryption.sops); S3 backends encrypt with no recipients of cairn's.
func (o *Opener) RotateKeys(ctx context.Context, sb cairn.StorageBackend, addAge, removeAge []string) (json.RawMessage, string, int, error) {
	kr, ok := o.cfg.Fallback.(interface {
		RotateKeys(context.Context, cairn.StorageBackend, []string, []string) (json.RawMessage, string, int, error)
	})
	if IsS3(sb) || !ok {
		return nil, "", 0, cairn.Errorf(cairn.CodeInvalid, "backend %q (%s) does not encrypt with rotatable keys (only Git backends with encryption.sops do)", sb.ID, sb.TypeRef)
	}
	return kr.RotateKeys(ctx, sb, addAge, removeAge)
}
