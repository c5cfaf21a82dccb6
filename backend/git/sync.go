package git

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/backend/controller"
	"github.com/cairn-dev/cairn/backend/controller/template"
)

// What the driver offers Git sync (controller/gitsync; issue 8, part 4; seed 001 "react on events to create/delete
// instances"): changes people push to a Git backend's branch outside cairn
// become instance creations, new resource versions and deletions in the
// hub.
//
// How an outside change reaches the hub without being written back: the
// Syncer calls the hub (ApplyChanges with the creates and updates of one
// outside commit's files, DeleteInstances with its removed files' deletes,
// which the hub sends once its store committed: DefersDeletes) with a
// context marking the call as an import of that commit (WithImport). The
// hub validates the values against the Types' schemas and calls this
// backend as for any write; the backend then leaves the tree alone and
// pushes one empty commit whose trailers (Cairn-Instance,
// Cairn-Resource-Version, Cairn-Operation, Cairn-Resource for one file;
// a Cairn-Change per file for several, importBatch; Cairn-Actor and
// Cairn-Source: the outside commit) record the id → resource mapping, so
// every process and every restart rebuilds the same index, and the resource
// version's value is the file at the outside commit. Nothing is ever
// re-formatted: the person's file stays byte for byte.
//
// Where sync resumes: the last synced commit is the ref refs/cairn/synced
// in the backend's cache clone (CacheDir), which survives restarts like the
// clone itself. Not in the backend instance's annotations: writing them
// through the hub would give the backend instance a new resource version,
// which reopens the backend (and its cache) on every sync. Losing the cache
// is safe: a sync without the ref reconciles the files at the tip with the
// hub (each change is checked against the hub's state first, so nothing is
// imported twice), attributing each file to the newest commit that touched
// it; deletions are not inferred then.

// syncedRef remembers, in the cache clone, the last commit sync processed.
const syncedRef = plumbing.ReferenceName("refs/cairn/synced")

type importKey struct{}

type importMark struct {
	b      *Backend
	source plumbing.Hash
}

// WithImport marks backend calls made for ctx as b's import of source.
func WithImport(ctx context.Context, b *Backend, source plumbing.Hash) context.Context {
	return context.WithValue(ctx, importKey{}, importMark{b: b, source: source})
}

// importing returns the outside commit a write imports, if it is one.
func (b *Backend) importing(ctx context.Context) (plumbing.Hash, bool) {
	m, ok := ctx.Value(importKey{}).(importMark)
	if !ok || m.b != b || m.source.IsZero() {
		return plumbing.ZeroHash, false
	}
	return m.source, true
}

// proposing says whether a write goes to a proposal (propose mode) rather
// than the branch: an import never does, its change is on the branch already.
func (b *Backend) proposing(ctx context.Context) bool {
	_, imp := b.importing(ctx)
	return b.scm != nil && !imp
}

// ErrImported refuses an import of a change the branch shows imported
// already (Cairn-Source), by another process syncing with a cache of its
// own: two replicas that read the same outside commit before either
// imported it. It has CodeAlreadyExists; nothing was written.
var ErrImported = errors.New("imported already by another process")

// importChange makes ch record an outside change: no file is touched (the
// outside commit made the change) and the commit is made even though empty.
// It is refused (ErrImported) when the index, checked again after every
// fetch, already has a version of that resource from the same outside
// commit; imu is held when check runs. The changes of one import batch
// share seen, so the index is read once per state, not once per change.
func (b *Backend) importChange(ch change, source plumbing.Hash, seen *importedFrom) change {
	ch.source = source
	ch.apply = func(context.Context, string) error { return nil }
	ch.touches = []identity{}
	check := ch.check
	ch.check = func(e *entry) error {
		if id, ok := seen.lookup(b, source, ch.ident); ok {
			return &cairn.Error{Code: cairn.CodeAlreadyExists, IDs: []string{id}, Err: ErrImported,
				Msg: fmt.Sprintf("git backend: %s at commit %s: %v", ch.ident, source, ErrImported)}
		}
		if check == nil {
			return nil
		}
		return check(e)
	}
	return ch
}

// importedFrom is which resources the index holds a version of from one
// outside commit (by resourceTrailer), with the instance holding it, as of
// the index after the fetch of commit at. A write holds mu throughout, and
// the index changes under it only with a fetch (scanned), so a set made
// for scanned stays right until the next fetch.
type importedFrom struct {
	at    plumbing.Hash
	valid bool
	ids   map[string]string
}

// lookup says whether the index holds ident from source; imu is held.
func (s *importedFrom) lookup(b *Backend, source plumbing.Hash, ident identity) (string, bool) {
	if !s.valid || s.at != b.scanned {
		s.ids = map[string]string{}
		for id, e := range b.idx {
			for _, c := range e.versions {
				if c == source {
					s.ids[resourceTrailer(e.id)] = id
					break
				}
			}
		}
		s.at, s.valid = b.scanned, true
	}
	id, ok := s.ids[resourceTrailer(ident)]
	return id, ok
}

// undoImport takes back resource version rv of instance id when a sync
// imported it (the hub's store did not commit the import): op is the
// inverse, opDelete for an imported create, opDeleteRevision for an
// imported update. The person's file is theirs, not a write of cairn's, so
// the tree is left alone: an empty commit records the inverse change and
// names the import it takes back (Cairn-Revert), so every process's index
// forgets the version and sync (importedIn) imports that change again.
// handled is false when rv is no import the branch holds: the caller
// undoes it as a write. The hub's rollbacks and recovery reach it through
// OnDelete and OnDeleteRevision (cairn.IsRollback), a live sync's through
// UndoBatch.
func (b *Backend) undoImport(ctx context.Context, id string, rv int, op string) (handled bool, err error) {
	e, err := b.entryFresh(ctx, id)
	if cairn.HasCode(err, cairn.CodeNotFound) {
		return false, nil // not on the branch: a proposal, or forgotten already
	}
	if err != nil {
		return false, err
	}
	b.imu.RLock()
	by, imported := e.imports[rv]
	source := e.versions[rv]
	ident := e.id
	b.imu.RUnlock()
	if !imported {
		return false, nil
	}
	ch := change{op: op, id: id, rv: rv, ident: ident, recordOnly: true, touches: []identity{},
		check: func(e *entry) error {
			if e == nil {
				return errorf(cairn.CodeNotFound, id, "TypeInstance %q not found", id)
			}
			if _, ok := e.versions[rv]; !ok {
				return errorf(cairn.CodeNotFound, id, "TypeInstance %q has no resource version %d", id, rv)
			}
			return nil
		},
		apply: func(context.Context, string) error { return nil },
	}
	actor, imp := who(ctx, ch)
	msg := message(ctx, ch)
	_, tr, _ := strings.Cut(msg, "\n\n")
	what := "create"
	if op == opDeleteRevision {
		what = "update"
	}
	ch.message = fmt.Sprintf("cairn: undo sync %s %s %s/%s (resource version %d) by %s\n\n"+
		"cairn could not store the import of commit %s in its own store, so it took the import back;\n"+
		"the file is left as that commit made it, and the next sync imports it again.\n\n%s%s: %s\n",
		what, ident.Kind.Kind, ident.Namespace, ident.Name, rv, byline(actor, imp), source.String()[:12], tr, trRevert, by)
	_, err = b.write(ctx, ch)
	if cairn.HasCode(err, cairn.CodeNotFound) {
		err = nil
	}
	if err != nil {
		return true, fmt.Errorf("git backend: undo the import of %s (resource version %d): %w", ident, rv, err)
	}
	return true, nil
}

// ImportedVersion returns the instance and resource version that the
// branch, as of the last fetch, holds as the import of resource
// ("apiVersion Kind namespace/name") from the outside commit source; ok is
// false when no live version is from it (never imported, taken back, or
// deleted since). The hub may not hold that version: the process that
// pushed the import has not stored it yet, or died first, leaving it to
// recovery to take back; sync must then wait rather than count the change
// imported.
func (b *Backend) ImportedVersion(source plumbing.Hash, resource string) (id string, rv int, ok bool) {
	b.imu.RLock()
	defer b.imu.RUnlock()
	for id, e := range b.idx {
		for v, c := range e.versions {
			if c == source && v > rv {
				rv, ok = v, true
			}
		}
		// The versions first: formatting every entry's resource would
		// cost a sync walking 1,000 imports a million of them.
		if ok && resourceTrailer(e.id) == resource {
			return id, rv, true
		}
		rv, ok = 0, false
	}
	return "", 0, false
}

// FileChange is one resource file's change in one commit.
type FileChange struct {
	Commit plumbing.Hash
	Author string
	Path   string
	Data   []byte // the new content; nil when the file was removed
	Old    []byte // the previous content; nil when the file was added
}

// Step is one commit to process: its changes, none when cairn made it.
type Step struct {
	Commit  plumbing.Hash
	Changes []FileChange
	// Imported are the resources ("apiVersion Kind namespace/name") whose
	// change in this commit a later commit of cairn's (Cairn-Source) says
	// was imported already: by another process syncing with a cache of
	// its own (another replica), which the hub holds a newer state than.
	Imported map[string]bool
}

// isResourceFile says whether a path can hold a resource.
func isResourceFile(p string) bool {
	switch strings.ToLower(path.Ext(p)) {
	case ".json", ".yaml", ".yml":
		return true
	}
	return false
}

// Pending fetches and returns the steps since the last synced commit,
// oldest first, with that commit and the tip.
func (b *Backend) Pending(ctx context.Context) (steps []Step, from, to plumbing.Hash, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.openLocked(ctx); err != nil {
		return nil, from, to, err
	}
	if err := b.fetchLocked(ctx); err != nil {
		return nil, from, to, err
	}
	to = b.tip
	if to.IsZero() {
		return nil, from, to, nil
	}
	if ref, err := b.repo.Reference(syncedRef, true); err == nil {
		from = ref.Hash()
	} else if !errors.Is(err, plumbing.ErrReferenceNotFound) {
		return nil, from, to, fmt.Errorf("read %s: %w", syncedRef, err)
	}
	if from == to {
		return nil, from, to, nil
	}
	// The commits reachable from the tip but not from the last synced one
	// (git rev-list from..to), parents before children: a side branch's
	// commits and the merge that brings them in are all seen, whichever
	// parent came first.
	exclude := map[plumbing.Hash]bool{}
	if !from.IsZero() {
		if fc, err := b.repo.CommitObject(from); err == nil {
			err := object.NewCommitPreorderIter(fc, nil, nil).ForEach(func(c *object.Commit) error {
				exclude[c.Hash] = true
				return nil
			})
			if err != nil {
				return nil, from, to, fmt.Errorf("read history: %w", err)
			}
		}
	}
	var chain []*object.Commit // parents first
	found := false
	seen := map[plumbing.Hash]bool{}
	var visit func(h plumbing.Hash) error
	visit = func(h plumbing.Hash) error {
		if seen[h] {
			return nil
		}
		seen[h] = true
		if h == from {
			found = true
			return nil
		}
		if exclude[h] {
			return nil
		}
		c, err := b.repo.CommitObject(h)
		if err != nil {
			return fmt.Errorf("read history: %w", err)
		}
		for _, p := range c.ParentHashes {
			if err := visit(p); err != nil {
				return err
			}
		}
		chain = append(chain, c)
		return nil
	}
	if err := visit(to); err != nil {
		return nil, from, to, err
	}
	if !found {
		// First sync of this cache, or the branch was rewritten: reconcile
		// the tip's files with the hub.
		if !from.IsZero() {
			b.log.WarnContext(ctx, "git sync: branch rewritten (force-push): the last synced commit is not in its history; reconciling the files at the tip, no deletions inferred",
				"branch", b.cfg.Branch, "synced", from.String(), "tip", to.String())
		}
		slices.Reverse(chain)
		steps, err := b.snapshotLocked(chain)
		return steps, from, to, err
	}
	imported := importedIn(chain)
	for _, c := range chain {
		st := Step{Commit: c.Hash, Imported: imported[c.Hash]}
		if trailers(c.Message)[trInstance] == "" {
			if st.Changes, err = commitChanges(c); err != nil {
				return nil, from, to, err
			}
		}
		steps = append(steps, st)
	}
	return steps, from, to, nil
}

// importedIn maps each outside commit that a commit of chain (Cairn-Source)
// imported to the resources imported from it, leaving out an import that a
// later commit takes back (Cairn-Revert, or a delete of its resource
// version: the hub rolling back an import its store did not commit).
func importedIn(chain []*object.Commit) map[plumbing.Hash]map[string]bool {
	type version struct {
		id string
		rv string
	}
	type source struct {
		commit   plumbing.Hash
		resource string
		by       plumbing.Hash // cairn's commit recording the import
	}
	imports := map[version]source{}
	for _, c := range chain {
		t := trailers(c.Message)
		v := version{t[trInstance], t[trVersion]}
		batch := batchTrailers(c.Message)
		if r := t[trRevert]; r != "" {
			// An undo: of an import (undoImport: one instance), of an
			// import batch (every change it lists) or of a batch. An
			// import batch's imports are taken back one by one when
			// recovery undoes them, so only the instances named go.
			undone := map[string]bool{t[trInstance]: true}
			for _, ch := range batch {
				undone[ch.id] = true
			}
			for k, s := range imports {
				if s.by.String() == r && undone[k.id] {
					delete(imports, k)
				}
			}
		}
		if len(batch) > 0 {
			// An import batch: one outside commit's changes, recorded by
			// one commit of cairn's.
			if src := plumbing.NewHash(t[trSource]); !src.IsZero() && t[trRevert] == "" {
				for _, ch := range batch {
					rv := ""
					if ch.rv > 0 {
						rv = strconv.Itoa(ch.rv)
					}
					imports[version{ch.id, rv}] = source{src, resourceTrailer(ch.ident), c.Hash}
				}
			}
			continue
		}
		if t[trOperation] == opDeleteRevision {
			delete(imports, v)
			continue
		}
		if src := plumbing.NewHash(t[trSource]); !src.IsZero() && t[trResource] != "" {
			imports[v] = source{src, t[trResource], c.Hash}
		}
	}
	out := map[plumbing.Hash]map[string]bool{}
	for _, s := range imports {
		if out[s.commit] == nil {
			out[s.commit] = map[string]bool{}
		}
		out[s.commit][s.resource] = true
	}
	return out
}

// authorOf names a commit's author as createdBy: "Name <email>".
func authorOf(c *object.Commit) string {
	if c.Author.Email == "" {
		return c.Author.Name
	}
	return fmt.Sprintf("%s <%s>", c.Author.Name, c.Author.Email)
}

// commitChanges lists c's changes to resource files against its first
// parent (the empty tree for a root commit).
func commitChanges(c *object.Commit) ([]FileChange, error) {
	tree, err := c.Tree()
	if err != nil {
		return nil, fmt.Errorf("tree of %s: %w", c.Hash, err)
	}
	var parent *object.Tree
	if c.NumParents() > 0 {
		p, err := c.Parent(0)
		if err != nil {
			return nil, fmt.Errorf("parent of %s: %w", c.Hash, err)
		}
		if parent, err = p.Tree(); err != nil {
			return nil, fmt.Errorf("tree of %s: %w", p.Hash, err)
		}
	}
	changes, err := object.DiffTree(parent, tree)
	if err != nil {
		return nil, fmt.Errorf("diff %s: %w", c.Hash, err)
	}
	var out []FileChange
	author := authorOf(c)
	for _, ch := range changes {
		from, to, err := ch.Files()
		if err != nil {
			return nil, fmt.Errorf("diff %s: %w", c.Hash, err)
		}
		// Change entries carry full paths (the files' names are base names).
		fromName, toName := ch.From.Name, ch.To.Name
		// A rename is the old file's removal and the new one's addition.
		if from != nil && (to == nil || fromName != toName) && isResourceFile(fromName) {
			old, err := contents(from)
			if err != nil {
				return nil, err
			}
			out = append(out, FileChange{Commit: c.Hash, Author: author, Path: fromName, Old: old})
		}
		if to != nil && isResourceFile(toName) {
			fc := FileChange{Commit: c.Hash, Author: author, Path: toName}
			if fc.Data, err = contents(to); err != nil {
				return nil, err
			}
			if from != nil && fromName == toName {
				if fc.Old, err = contents(from); err != nil {
					return nil, err
				}
			}
			out = append(out, fc)
		}
	}
	return out, nil
}

func contents(f *object.File) ([]byte, error) {
	r, err := f.Reader()
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", f.Name, err)
	}
	defer r.Close()
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", f.Name, err)
	}
	if data == nil {
		data = []byte{}
	}
	return data, nil
}

// snapshotLocked returns the tip's resource files as additions, each by
// the newest commit of chain (tip first, children before parents) that
// touched it.
func (b *Backend) snapshotLocked(chain []*object.Commit) ([]Step, error) {
	if len(chain) == 0 {
		return nil, nil
	}
	tip := chain[0]
	tree, err := tip.Tree()
	if err != nil {
		return nil, fmt.Errorf("tree of %s: %w", tip.Hash, err)
	}
	files := map[string][]byte{}
	err = tree.Files().ForEach(func(f *object.File) error {
		if !isResourceFile(f.Name) {
			return nil
		}
		data, err := contents(f)
		files[f.Name] = data
		return err
	})
	if err != nil {
		return nil, err
	}
	who := map[string]*object.Commit{}
	for _, c := range chain {
		if len(who) == len(files) {
			break
		}
		changes, err := commitChanges(c)
		if err != nil {
			return nil, err
		}
		for _, fc := range changes {
			if _, ok := files[fc.Path]; ok && who[fc.Path] == nil {
				who[fc.Path] = c
			}
		}
	}
	st := Step{Commit: tip.Hash}
	for _, p := range slices.Sorted(maps.Keys(files)) {
		c := who[p]
		if c == nil {
			c = tip // older than the walked history
		}
		st.Changes = append(st.Changes, FileChange{Commit: c.Hash, Author: authorOf(c), Path: p, Data: files[p]})
	}
	return []Step{st}, nil
}

// SetSynced records commit as synced in the cache clone.
func (b *Backend) SetSynced(commit plumbing.Hash) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.repo == nil {
		return errors.New("the cache is not open")
	}
	if err := b.repo.Storer.SetReference(plumbing.NewHashReference(syncedRef, commit)); err != nil {
		return fmt.Errorf("record the synced commit: %w", err)
	}
	return nil
}

// Parsed is a resource file's content.
type Parsed struct {
	Res  template.Resource
	Kind controller.Kind
	Spec json.RawMessage
}

// ParseFile decodes a resource file and checks it is where the
// controller would put it.
func (b *Backend) ParseFile(p string, data []byte) (Parsed, error) {
	var out Parsed
	doc, err := b.decode(p, data)
	if de, ok := errors.AsType[*template.DecodeError](err); ok {
		// The caller names the file: say where in it only.
		return out, fmt.Errorf("does not parse: %s", de.Detail())
	}
	if err != nil {
		return out, fmt.Errorf("does not parse: %w", err)
	}
	if err := json.Unmarshal(doc, &out.Res); err != nil {
		return out, fmt.Errorf("is not a resource {apiVersion, kind, metadata, spec}: %w", err)
	}
	r := &out.Res
	if r.APIVersion == "" || r.Kind == "" || r.Metadata.Name == "" {
		return out, errors.New("is not a resource: apiVersion, kind and metadata.name are required")
	}
	if r.Metadata.Namespace == "" {
		r.Metadata.Namespace = cairn.DefaultNamespace
	}
	g, v := splitAPIVersion(r.APIVersion)
	out.Kind = controller.Kind{Group: g, Version: v, Kind: r.Kind}
	if out.Spec, err = specOf(doc); err != nil {
		return out, fmt.Errorf("spec: %w", err)
	}
	if b.loc != nil {
		want, err := b.loc.Path(out.Kind, r.Metadata.Namespace, r.Metadata.Name, r.Metadata.Labels)
		if err != nil {
			return out, fmt.Errorf("no path for %s %s/%s: %w", r.Kind, r.Metadata.Namespace, r.Metadata.Name, err)
		}
		if want != p {
			return out, fmt.Errorf("holds %s %s/%s, whose file is %s by the backend's path template", r.Kind, r.Metadata.Namespace, r.Metadata.Name, want)
		}
	}
	return out, nil
}

func (p Parsed) String() string {
	return fmt.Sprintf("%s %s %s/%s", p.Res.APIVersion, p.Res.Kind, p.Res.Metadata.Namespace, p.Res.Metadata.Name)
}
