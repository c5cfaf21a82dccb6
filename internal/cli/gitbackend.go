package cli

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/backend/controller"
	gitbackend "github.com/cairn-dev/cairn/backend/git"
	"github.com/cairn-dev/cairn/backend/wasm"
	"github.com/cairn-dev/cairn/hub"
)

// withGit puts the in-process Git backend in front of the external backend
// opener: backend instances of Type cap.core.type.hub.storage.git run in
// this process, with their clones under the data directory; every other
// backend goes to next.
func (a *app) withGit(next hub.BackendOpener, log *slog.Logger) hub.BackendOpener {
	w := &wasmControllers{cacheDir: filepath.Join(a.dataDir, "wasm-cache"), baseDir: a.dataDir}
	return gitbackend.NewOpener(gitbackend.OpenerConfig{
		CacheDir:   filepath.Join(a.dataDir, "git-cache"),
		Fallback:   next,
		Controller: w.controller,
		Logger:     log,
		Getenv:     a.env.Getenv,
	})
}

// wasmControllers loads the WASM controllers Git backends name
// ("controller": {"wasm": {"module": PATH, "sha256": HEX}}), on one wazero
// runtime started on first use; compiled code is cached on disk.
type wasmControllers struct {
	cacheDir string
	baseDir  string // relative module paths are under the data directory

	once sync.Once
	rt   *wasm.Runtime
	err  error
}

func (w *wasmControllers) controller(ctx context.Context, sb cairn.StorageBackend) (controller.Controller, error) {
	cfg, err := gitbackend.ParseConfig(sb.Value)
	if err != nil {
		return nil, err
	}
	if cfg.Controller == nil || cfg.Controller.WASM == nil {
		return nil, nil // the template controller
	}
	w.once.Do(func() {
		w.rt, w.err = wasm.NewRuntime(context.WithoutCancel(ctx), wasm.Options{CacheDir: w.cacheDir})
	})
	if w.err != nil {
		return nil, w.err
	}
	path := cfg.Controller.WASM.Module
	if !filepath.IsAbs(path) {
		path = filepath.Join(w.baseDir, path)
	}
	c, err := w.rt.LoadFile(ctx, path, cfg.Controller.WASM.SHA256)
	if err != nil {
		return nil, err // not a typed nil in the interface
	}
	return c, nil
}

// registerGitType registers the Git backend's storage Type in a hub that
// runs Git backends, so that they pass strict mode and their values are
// validated; an existing identical Type is left alone.
func registerGitType(ctx context.Context, h *hub.Hub) error {
	t := gitbackend.StorageType()
	if _, err := h.GetType(ctx, t.Ref()); err == nil {
		return nil // registered on an earlier start: a read, no write
	}
	if _, _, err := h.ApplyType(ctx, t); err != nil {
		return fmt.Errorf("register the Git backend Type: %w", err)
	}
	return nil
}
