package git

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	gogit "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp/capability"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/plumbing/transport/client"
)

// Writes whose files the controller can locate (the template controller:
// every single write, batch and group commit) do not reset, stage and
// status the whole work tree, which costs a read and a hash of every file
// and made a write on a tree of 1,000 files ten times slower than on a
// tree of 10. The work tree is kept at a known commit (wtAt): a write
// brings it to the base commit by the difference of the two trees (nothing
// when the base is what the last write left), lets the controller change
// its files, reads back only the files of the resources it wrote and
// builds the new tree from the base's by replacing those entries, writing
// only the new blobs and the trees on their paths. The objects written are
// what the push sends (pushNew).

// treeEdit is a file's new state: its blob, or removed when hash is zero.
type treeEdit struct {
	hash plumbing.Hash
	mode filemode.FileMode
}

// locatedPaths returns the files the changes may touch, or ok false when
// some change may touch files no controller call names (a key rotation, a
// WASM controller): then the whole work tree is compared.
func (b *Backend) locatedPaths(chs []change) (paths []string, ok bool) {
	if b.loc == nil {
		return nil, false
	}
	seen := map[string]bool{}
	for _, c := range chs {
		if c.touches == nil {
			return nil, false
		}
		for _, id := range c.touches {
			// Put places a file by its labels, Get and Delete without:
			// both, when a path template reads labels.
			for _, labels := range []map[string]string{id.Labels, nil} {
				p, err := b.loc.Path(id.Kind, id.Namespace, id.Name, labels)
				if err != nil {
					return nil, false
				}
				if !seen[p] {
					seen[p] = true
					paths = append(paths, p)
				}
			}
		}
	}
	return paths, true
}

// treeOf returns commit's root tree, nil for the zero commit (no branch).
func (b *Backend) treeOf(commit plumbing.Hash) (*object.Tree, error) {
	if commit.IsZero() {
		return nil, nil
	}
	c, err := b.repo.CommitObject(commit)
	if err != nil {
		return nil, err
	}
	return c.Tree()
}

// syncWorktreeLocked makes the work tree hold to's tree, starting from the
// commit it holds (wtAt): only the files that differ are written or
// removed. extra names files changed since wtAt that its tree does not
// show (a write that was not committed); they are put back as to has them.
func (b *Backend) syncWorktreeLocked(to plumbing.Hash, extra []string) error {
	fromTree, err := b.treeOf(b.wtAt)
	if err != nil {
		return err
	}
	toTree, err := b.treeOf(to)
	if err != nil {
		return err
	}
	paths := slices.Clone(extra)
	if b.wtAt != to {
		changes, err := object.DiffTree(fromTree, toTree)
		if err != nil {
			return err
		}
		for _, c := range changes {
			for _, n := range []string{c.From.Name, c.To.Name} {
				if n != "" {
					paths = append(paths, n)
				}
			}
		}
	}
	for _, p := range paths {
		if err := b.checkoutPath(toTree, p); err != nil {
			return err
		}
	}
	b.wtAt = to
	return nil
}

// checkoutPath writes the file p as tree holds it, or removes it (and the
// directories it leaves empty) when tree has no such file.
func (b *Backend) checkoutPath(tree *object.Tree, p string) error {
	full := filepath.Join(b.dir, filepath.FromSlash(p))
	var f *object.File
	if tree != nil {
		var err error
		f, err = tree.File(p)
		if err != nil && !errors.Is(err, object.ErrFileNotFound) {
			return fmt.Errorf("%s: %w", p, err)
		}
	}
	if f == nil {
		if err := os.Remove(full); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		for dir := path.Dir(p); dir != "."; dir = path.Dir(dir) {
			if os.Remove(filepath.Join(b.dir, filepath.FromSlash(dir))) != nil {
				break // not empty, or gone
			}
		}
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		return err
	}
	r, err := f.Reader()
	if err != nil {
		return err
	}
	defer r.Close()
	data, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	if f.Mode == filemode.Symlink {
		_ = os.Remove(full)
		return os.Symlink(string(data), full)
	}
	perm := os.FileMode(0o644)
	if f.Mode == filemode.Executable {
		perm = 0o755
	}
	if err := os.Remove(full); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return os.WriteFile(full, data, perm)
}

// editsLocked reads the files at paths in the work tree and returns those
// that differ from base's tree, storing the new blobs (listed in written).
func (b *Backend) editsLocked(base *object.Tree, paths []string, written *[]plumbing.Hash) (map[string]treeEdit, error) {
	edits := map[string]treeEdit{}
	for _, p := range paths {
		var old *object.TreeEntry
		if base != nil {
			e, err := base.FindEntry(p)
			switch {
			case err == nil:
				old = e
			case errors.Is(err, object.ErrEntryNotFound), errors.Is(err, object.ErrDirectoryNotFound):
			default:
				return nil, fmt.Errorf("%s: %w", p, err)
			}
		}
		full := filepath.Join(b.dir, filepath.FromSlash(p))
		info, err := os.Lstat(full)
		if errors.Is(err, fs.ErrNotExist) || (err == nil && info.IsDir()) {
			if old != nil && old.Mode != filemode.Dir {
				edits[p] = treeEdit{}
			}
			continue
		}
		if err != nil {
			return nil, err
		}
		var data []byte
		if info.Mode()&fs.ModeSymlink != 0 {
			target, err := os.Readlink(full)
			if err != nil {
				return nil, err
			}
			data = []byte(target)
		} else if data, err = os.ReadFile(full); err != nil {
			return nil, err
		}
		mode, err := filemode.NewFromOSFileMode(info.Mode())
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		h := plumbing.ComputeHash(plumbing.BlobObject, data)
		if old != nil && old.Hash == h && old.Mode == mode {
			continue
		}
		if b.repo.Storer.HasEncodedObject(h) != nil {
			obj := b.repo.Storer.NewEncodedObject()
			obj.SetType(plumbing.BlobObject)
			w, err := obj.Writer()
			if err != nil {
				return nil, err
			}
			if _, err := w.Write(data); err != nil {
				return nil, err
			}
			if err := w.Close(); err != nil {
				return nil, err
			}
			if _, err := b.repo.Storer.SetEncodedObject(obj); err != nil {
				return nil, err
			}
		}
		*written = append(*written, h)
		edits[p] = treeEdit{hash: h, mode: mode}
	}
	return edits, nil
}

// buildTree returns the hash of base (nil: empty) with edits applied,
// storing the trees on the edited paths (listed in written); edits are
// keyed by their path relative to base. The root tree is stored even when
// empty (a commit removing every file); a subtree left empty is dropped.
func (b *Backend) buildTree(base *object.Tree, edits map[string]treeEdit, root bool, written *[]plumbing.Hash) (plumbing.Hash, error) {
	var entries []object.TreeEntry
	if base != nil {
		entries = slices.Clone(base.Entries)
	}
	// Group the edits by their first path element.
	files := map[string]treeEdit{}
	dirs := map[string]map[string]treeEdit{}
	for p, e := range edits {
		first, rest, nested := strings.Cut(p, "/")
		if !nested {
			files[first] = e
			continue
		}
		if dirs[first] == nil {
			dirs[first] = map[string]treeEdit{}
		}
		dirs[first][rest] = e
	}
	byName := map[string]int{}
	for i, e := range entries {
		byName[e.Name] = i
	}
	drop := map[string]bool{}
	for name, e := range files {
		i, ok := byName[name]
		switch {
		case e.hash.IsZero():
			if ok {
				drop[name] = true
			}
		case ok:
			entries[i] = object.TreeEntry{Name: name, Mode: e.mode, Hash: e.hash}
		default:
			byName[name] = len(entries)
			entries = append(entries, object.TreeEntry{Name: name, Mode: e.mode, Hash: e.hash})
		}
	}
	for name, sub := range dirs {
		var subBase *object.Tree
		i, ok := byName[name]
		if ok && entries[i].Mode == filemode.Dir {
			t, err := b.repo.TreeObject(entries[i].Hash)
			if err != nil {
				return plumbing.ZeroHash, err
			}
			subBase = t
		}
		h, err := b.buildTree(subBase, sub, false, written)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		switch {
		case h.IsZero():
			if ok {
				drop[name] = true
			}
		case ok:
			entries[i] = object.TreeEntry{Name: name, Mode: filemode.Dir, Hash: h}
		default:
			byName[name] = len(entries)
			entries = append(entries, object.TreeEntry{Name: name, Mode: filemode.Dir, Hash: h})
		}
	}
	entries = slices.DeleteFunc(entries, func(e object.TreeEntry) bool { return drop[e.Name] })
	if len(entries) == 0 && !root {
		return plumbing.ZeroHash, nil // git keeps no empty directories
	}
	// Git's order: a directory sorts as if its name ended in "/".
	sortName := func(e object.TreeEntry) string {
		if e.Mode == filemode.Dir {
			return e.Name + "/"
		}
		return e.Name
	}
	slices.SortFunc(entries, func(x, y object.TreeEntry) int { return strings.Compare(sortName(x), sortName(y)) })
	t := &object.Tree{Entries: entries}
	obj := b.repo.Storer.NewEncodedObject()
	if err := t.Encode(obj); err != nil {
		return plumbing.ZeroHash, err
	}
	h := obj.Hash()
	// Listed even when stored already: it may be from an attempt the
	// remote never received.
	*written = append(*written, h)
	if b.repo.Storer.HasEncodedObject(h) == nil {
		return h, nil
	}
	return b.repo.Storer.SetEncodedObject(obj)
}

// storeCommit writes a commit object and returns its hash.
func (b *Backend) storeCommit(c *object.Commit) (plumbing.Hash, error) {
	obj := b.repo.Storer.NewEncodedObject()
	if err := c.Encode(obj); err != nil {
		return plumbing.ZeroHash, err
	}
	return b.repo.Storer.SetEncodedObject(obj)
}

// pushable is a commit made on parent and the objects it added (its
// blobs, trees and itself): all a remote at parent lacks.
type pushable struct {
	commit, parent plumbing.Hash
	objects        []plumbing.Hash
}

// pushNewLocked pushes p.commit as the branch's next commit, sending only
// the objects the commit added. go-git's push works out what to send by
// walking every object reachable from the remote's refs, the whole history
// with every tree, on each push: a cost that grows with the repository.
// When the remote's branch is no longer at p.parent nothing is sent and
// the push fails, as a push that is not a fast-forward does; the caller
// fetches and retries.
func (b *Backend) pushNewLocked(ctx context.Context, p *pushable) error {
	ep, err := transport.NewEndpoint(b.cfg.URL)
	if err != nil {
		return err
	}
	cl, err := client.NewClient(ep)
	if err != nil {
		return err
	}
	sess, err := cl.NewReceivePackSession(ep, b.auth)
	if err != nil {
		return err
	}
	defer sess.Close()
	ar, err := sess.AdvertisedReferencesContext(ctx)
	if err != nil {
		return err
	}
	refs, err := ar.AllReferences()
	if err != nil {
		return err
	}
	at := plumbing.ZeroHash
	if r, err := refs.Reference(b.localRef()); err == nil {
		at = r.Hash()
	}
	if at != p.parent {
		return fmt.Errorf("%w: %s is at %s on the remote, not %s", gogit.ErrNonFastForwardUpdate, b.cfg.Branch, at, p.parent)
	}
	req := packp.NewReferenceUpdateRequestFromCapabilities(ar.Capabilities)
	var said remoteMessages
	req.Progress = &said
	if ar.Capabilities.Supports(capability.Sideband64k) {
		_ = req.Capabilities.Set(capability.Sideband64k)
	} else if ar.Capabilities.Supports(capability.Sideband) {
		_ = req.Capabilities.Set(capability.Sideband)
	}
	req.Commands = []*packp.Command{{Name: b.localRef(), Old: p.parent, New: p.commit}}
	rd, wr := io.Pipe()
	req.Packfile = rd
	encoded := make(chan error, 1)
	go func() {
		enc := packfile.NewEncoder(wr, b.repo.Storer, !ar.Capabilities.Supports(capability.OFSDelta))
		_, err := enc.Encode(p.objects, 10)
		_ = wr.CloseWithError(err)
		encoded <- err
	}()
	rs, err := sess.ReceivePack(ctx, req)
	if err != nil {
		_ = rd.Close() // unblocks the encoder
		<-encoded
		return said.explain(err)
	}
	if err := <-encoded; err != nil {
		return fmt.Errorf("pack the commit: %w", err)
	}
	if rs != nil {
		if err := rs.Error(); err != nil {
			return said.explain(err)
		}
	}
	return nil
}
