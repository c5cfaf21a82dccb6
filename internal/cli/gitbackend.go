package cli

import (
	"log/slog"
	"path/filepath"

	gitbackend "github.com/cairn-dev/cairn/backend/git"
	"github.com/cairn-dev/cairn/hub"
)

// withGit puts the in-process Git backend in front of the external backend
// opener: backend instances of Type cap.core.type.hub.storage.git run in
// this process, with their clones under the data directory; every other
// backend goes to next.
func (a *app) withGit(next hub.BackendOpener, log *slog.Logger) hub.BackendOpener {
	return gitbackend.NewOpener(gitbackend.OpenerConfig{
		CacheDir: filepath.Join(a.dataDir, "git-cache"),
		Fallback: next,
		Logger:   log,
		Getenv:   a.env.Getenv,
	})
}
