package git

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/backend/sops"
)

// opRotate is the first change of a key rotation: it rewrites the files.
const opRotate = "rotate-keys"

// RotateKeys re-encrypts every SOPS-encrypted file on the branch to the
// recipients of to, in one commit. The files are decrypted with the
// backend's current identities (which must read them all), and the index
// is pointed at the new commit for each instance's latest resource version,
// so later reads of those versions read the re-encrypted files; older
// versions stay in history under the keys they were written with. It
// returns the new commit ("" when no file needed it) and the number of
// files rewritten. Propose mode is not supported yet: rotate on a backend
// in commit mode.
func (b *Backend) RotateKeys(ctx context.Context, to sops.Config) (string, int, error) {
	if b.codec == nil {
		return "", 0, cairn.Errorf(cairn.CodeInvalid, "git backend: rotate keys: the backend has no encryption.sops")
	}
	if b.cfg.Mode == ModePropose {
		return "", 0, cairn.Errorf(cairn.CodeInvalid, "git backend: rotate keys: not supported in propose mode yet; rotate with mode commit")
	}
	next, err := sops.New(to, b.getenv)
	if err != nil {
		return "", 0, cairn.Errorf(cairn.CodeInvalid, "git backend: rotate keys: %w", err)
	}
	// Encrypting needs no identity: files rotated to recipients whose
	// identities the backend lacks could not be read back by anyone here.
	if err := next.CheckReadable(); err != nil {
		return "", 0, cairn.Errorf(cairn.CodeInvalid, "git backend: rotate keys: %w; give the backend the identity of a new recipient first (nothing was changed)", err)
	}
	if err := b.refresh(ctx); err != nil {
		return "", 0, err
	}
	// One change per instance records the latest version's new commit.
	b.imu.RLock()
	var chs []change
	for id, e := range b.idx {
		if rv := e.latest(); rv > 0 {
			chs = append(chs, change{op: opUpdate, id: id, rv: rv, ident: e.id,
				check: func(*entry) error { return nil }, apply: func(context.Context, string) error { return nil }})
		}
	}
	b.imu.RUnlock()
	slices.SortFunc(chs, func(x, y change) int { return strings.Compare(x.id, y.id) })
	n := 0
	rotate := change{op: opRotate, ident: identity{},
		check: func(*entry) error { return nil },
		apply: func(ctx context.Context, root string) error {
			n = 0
			return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
				if err != nil {
					return err
				}
				if d.IsDir() {
					if d.Name() == ".git" {
						return filepath.SkipDir
					}
					return nil
				}
				rel, _ := filepath.Rel(root, p)
				name := filepath.ToSlash(rel)
				data, err := os.ReadFile(p)
				if err != nil {
					return fmt.Errorf("git backend: rotate keys: %w", err)
				}
				if !sops.IsEncrypted(name, data) {
					return nil
				}
				plain, err := b.codec.Decrypt(name, data)
				if err != nil {
					return cairn.Errorf(cairn.CodeUnavailable, "git backend: rotate keys: %w (the backend's identities must read every file)", err)
				}
				enc, err := next.Encrypt(name, plain)
				if err != nil {
					return fmt.Errorf("git backend: rotate keys: %w", err)
				}
				n++
				return os.WriteFile(p, enc, 0o644)
			})
		},
		messageFunc: func(ctx context.Context, all []change) string {
			actor := cairn.Actor(ctx)
			if actor == "" {
				actor = "unknown"
			}
			var sb strings.Builder
			fmt.Fprintf(&sb, "cairn: rotate SOPS keys of %d files by %s\n\nrecipients: %s\n\n", n, actor, strings.Join(append(slices.Clone(to.Age), to.PGP...), ", "))
			fmt.Fprintf(&sb, "%s: %s\n", trOperation, opRotate)
			for _, c := range all[1:] {
				fmt.Fprintf(&sb, "%s: %s %s %d %s\n", trChange, c.op, c.id, c.rv, resourceTrailer(c.ident))
			}
			fmt.Fprintf(&sb, "%s: %s\n", trActor, oneLine(actor))
			return sb.String()
		},
	}
	before := b.currentTip()
	commit, err := b.write(ctx, append([]change{rotate}, chs...)...)
	if err != nil {
		return "", 0, err
	}
	if commit == before {
		return "", 0, nil
	}
	// Later writes of this Backend still encrypt to the old recipients:
	// the caller records the new configuration, which opens a new Backend
	// (hub.RotateBackendKeys does).
	return commit.String(), n, nil
}

func (b *Backend) currentTip() plumbing.Hash {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.tip
}
