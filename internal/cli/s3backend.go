package cli

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/cairn-dev/cairn"
	s3backend "github.com/cairn-dev/cairn/backend/s3"
	"github.com/cairn-dev/cairn/hub"
)

// withBackends puts the in-process S3 and Git backends in front of the
// external backend opener.
func (a *app) withBackends(next hub.BackendOpener, log *slog.Logger) hub.BackendOpener {
	return s3backend.NewOpener(s3backend.OpenerConfig{Fallback: a.withGit(next, log), Getenv: a.env.Getenv})
}

// registerHubTypes registers the Types of the in-process backends and of
// Terraform state (a read once they exist).
func registerHubTypes(ctx context.Context, h *hub.Hub) error {
	if err := registerGitType(ctx, h); err != nil {
		return err
	}
	if err := h.RegisterTerraformTypes(ctx); err != nil {
		return err
	}
	return registerType(ctx, h, s3backend.StorageType())
}

func registerType(ctx context.Context, h *hub.Hub, t cairn.Type) error {
	if _, err := h.GetType(ctx, t.Ref()); err == nil {
		return nil
	}
	if _, _, err := h.ApplyType(ctx, t); err != nil {
		return fmt.Errorf("register the Type %s: %w", t.Ref(), err)
	}
	return nil
}
