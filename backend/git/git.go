// Package git is the Git storage backend (issue 8, seed 003): each instance
// is a cup/Kubernetes-style resource file in a repository, each write a
// commit pushed to a branch.
//
// How an instance maps to a file: the instance's Type declares REST names
// (group, version, kind); the resource is {apiVersion, kind,
// metadata{namespace, name, labels}, spec: value}, placed by a controller
// (backend/controller; the template controller by default, cup's path
// templates). The hub passes the instance's identity with each write
// (cairn.ResourceMeta in the Go context), and the backend returns it, with
// the file's path and the commit that made the version, as the version's
// context, which the hub keeps.
//
// The repository holds only the resource files, as people would write them:
// the backend's bookkeeping (which instance id a file belongs to, which
// commit made which resource version) rides in trailers of its own commit
// messages (Cairn-Instance, Cairn-Resource-Version, Cairn-Operation,
// Cairn-Resource), readable in `git log`, from which every process sharing
// the remote rebuilds the same index. Locks are the hub's (its store is the
// authority); the backend keeps only an in-memory copy.
//
// Writes are optimistic: apply the change on the last known tip of the
// branch in a private work tree, commit, push; when the push fails because
// the branch moved, fetch, check the preconditions again (another process
// may have written the same resource version), re-apply and retry, a
// bounded number of times. A write that changes no file makes no commit,
// but only once the tip is known to be current, so it never hides a newer
// change.
package git

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"

	gogit "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/transport"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/backend/controller"
	"github.com/cairn-dev/cairn/backend/controller/template"
	"github.com/cairn-dev/cairn/backend/scm"
	"github.com/cairn-dev/cairn/backend/sops"
)

// DefaultMaxAttempts bounds the push attempts of one write.
const DefaultMaxAttempts = 20

// Options configure a Backend.
type Options struct {
	// Config is the backend instance's value (ParseConfig).
	Config Config
	// CacheDir holds the backend's local clone and private work tree. Each
	// backend needs its own; it is created if missing and reused across
	// restarts.
	CacheDir string
	// Controller places resources in the tree. Nil: the template
	// controller with Config.Paths.
	Controller controller.Controller
	// Logger receives operational logs; values and credentials never.
	Logger *slog.Logger
	// Getenv reads credentials' environment variables. Default os.Getenv.
	Getenv func(string) string
	// MaxAttempts bounds push attempts per write. Default DefaultMaxAttempts.
	MaxAttempts int
}

// locator is a controller that can say where a resource's file is without
// a checked-out tree (the template controller): reads at a commit then go
// straight to the object store.
type locator interface {
	Path(kind controller.Kind, namespace, name string, labels map[string]string) (string, error)
}

// Backend is the Git storage backend. It implements cairn.Backend and is
// safe for concurrent use.
type Backend struct {
	// codec encrypts and decrypts files (nil: plain files).
	codec       template.Codec
	getenv      func(string) string
	cfg         Config
	dir         string
	ctl         controller.Controller
	loc         locator // nil when ctl cannot locate files
	log         *slog.Logger
	auth        transport.AuthMethod
	maxAttempts int
	// scm opens pull requests in propose mode; nil in commit mode.
	scm scm.Provider

	// mu serialises everything touching the repository: the go-git
	// repository and work tree are not safe for concurrent use.
	mu   sync.Mutex
	repo *gogit.Repository // nil until first used
	tip  plumbing.Hash     // the remote branch as last fetched or pushed; zero: no branch yet
	// scanned is the newest commit whose trailers are in idx.
	scanned plumbing.Hash

	// wtAt is the commit whose tree the work tree holds, when wtKnown
	// (tree.go); pushable is what the last commit wrote, for pushNew.
	wtAt     plumbing.Hash
	wtKnown  bool
	pushable *pushable

	// imu guards idx, so reads served from the value cache never wait for
	// a write's network round trips.
	imu sync.RWMutex
	idx map[string]*entry
	// deleted are the instances whose delete a commit on the branch
	// records: unlike one no commit records (a rewritten branch), their
	// values are gone for good.
	deleted map[string]bool

	values valueCache

	// group gathers concurrent writes for group commit (group.go).
	group groupQueue
}

var (
	_ cairn.Backend       = (*Backend)(nil)
	_ cairn.ResourceNamer = (*Backend)(nil)
)

// entry is what the backend knows of one instance.
type entry struct {
	id       identity
	versions map[int]plumbing.Hash // live resource versions
	dropped  map[int]bool          // versions deleted (rolled back)
	// imports are the versions a sync imported (their file is a person's
	// commit, versions[rv]), each with cairn's commit that recorded it:
	// taking one back must leave the person's file alone.
	imports  map[int]plumbing.Hash
	lockedBy string
}

// latest returns the highest live resource version, 0 when none.
func (e *entry) latest() int {
	n := 0
	for rv := range e.versions {
		n = max(n, rv)
	}
	return n
}

// New returns a Backend. It does no I/O: the clone is made or opened by
// the first call.
func New(opts Options) (*Backend, error) {
	if opts.CacheDir == "" {
		return nil, errors.New("git backend: a cache directory is required")
	}
	cfg := opts.Config
	if cfg.Branch == "" || cfg.Mode == "" || cfg.Author.Name == "" {
		raw, err := json.Marshal(cfg)
		if err != nil {
			return nil, err
		}
		if cfg, err = ParseConfig(raw); err != nil {
			return nil, err
		}
	}
	getenv := opts.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	auth, err := cfg.auth(getenv)
	if err != nil {
		return nil, err
	}
	var codec template.Codec
	if e := cfg.Encryption; e != nil && e.SOPS != nil {
		if opts.Controller != nil {
			return nil, cairn.Errorf(cairn.CodeInvalid, "git backend: encryption works with the template controller only")
		}
		c, err := sops.New(*e.SOPS, getenv)
		if err != nil {
			return nil, cairn.Errorf(cairn.CodeInvalid, "git backend: %w", err)
		}
		codec = &readableCodec{Codec: c}
	}
	ctl := opts.Controller
	if ctl == nil {
		t, err := template.NewWithCodec(cfg.Paths, codec)
		if err != nil {
			return nil, err
		}
		ctl = t
	}
	b := &Backend{
		getenv:      getenv,
		codec:       codec,
		cfg:         cfg,
		dir:         opts.CacheDir,
		ctl:         ctl,
		log:         opts.Logger,
		auth:        auth,
		maxAttempts: opts.MaxAttempts,
		idx:         map[string]*entry{},
		deleted:     map[string]bool{},
		values:      valueCache{m: map[string]json.RawMessage{}},
	}
	if cfg.Mode == ModePropose {
		if b.scm, err = scm.New(*cfg.SCM, scm.Options{Getenv: getenv}); err != nil {
			return nil, fmt.Errorf("git backend: %w", err)
		}
	}
	b.loc, _ = ctl.(locator)
	if b.log == nil {
		b.log = slog.New(slog.DiscardHandler)
	}
	if b.maxAttempts <= 0 {
		b.maxAttempts = DefaultMaxAttempts
	}
	return b, nil
}

// readableCodec refuses to encrypt while its identities read none of its
// recipients' files: encrypting needs only recipients, so a backend whose
// key file is missing or holds another identity would commit files that
// the hub, and every replica with the same keys, could not read back.
type readableCodec struct {
	*sops.Codec
	mu sync.Mutex
	ok bool // the identities were found to read the recipients' files
}

func (c *readableCodec) Encrypt(name string, plain []byte) ([]byte, error) {
	if err := c.readable(); err != nil {
		return nil, err
	}
	return c.Codec.Encrypt(name, plain)
}

// readable checks the identities once they pass; a failure is checked
// again, as a PGP keyring can gain the key meanwhile.
func (c *readableCodec) readable() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ok {
		return nil
	}
	if err := c.CheckReadable(); err != nil {
		return cairn.Errorf(cairn.CodeInvalid, "git backend: %w; nothing was written (give the backend an identity of a recipient)", err)
	}
	c.ok = true
	return nil
}

// NamesResources tells the hub to pass cairn.ResourceMeta.
func (b *Backend) NamesResources() bool { return true }

// identity is a resource's name in the repository.
type identity struct {
	Kind      controller.Kind
	Namespace string
	Name      string
	Labels    map[string]string
	// Path, when set, is where the version read is (its context's path):
	// the index does not keep labels, which a path template may use.
	Path string
}

func (i identity) String() string {
	return fmt.Sprintf("%s %s %s/%s", template.APIVersion(i.Kind), i.Kind.Kind, i.Namespace, i.Name)
}

// versionContext is what the backend returns as a resource version's
// context, and reads back.
type versionContext struct {
	APIVersion      string `json:"apiVersion,omitempty"`
	Kind            string `json:"kind,omitempty"`
	Namespace       string `json:"namespace,omitempty"`
	Name            string `json:"name,omitempty"`
	Path            string `json:"path,omitempty"`
	ResourceVersion int    `json:"resourceVersion,omitempty"`
	Commit          string `json:"commit,omitempty"`
}

func parseContext(raw json.RawMessage) versionContext {
	var c versionContext
	if len(raw) > 0 {
		_ = json.Unmarshal(raw, &c) // a foreign context is simply not ours
	}
	return c
}

func splitAPIVersion(apiVersion string) (group, version string) {
	if i := strings.LastIndex(apiVersion, "/"); i >= 0 {
		return apiVersion[:i], apiVersion[i+1:]
	}
	return "", apiVersion
}

// resolveIdentity works out the resource's identity: from the hub
// (ResourceMeta), else the context, else what the index knows; the name
// defaults to the instance id and the namespace to "default".
func resolveIdentity(ctx context.Context, id string, raw json.RawMessage, known *identity) (identity, error) {
	var out identity
	if known != nil {
		out = *known
	}
	if c := parseContext(raw); c.Kind != "" {
		g, v := splitAPIVersion(c.APIVersion)
		out.Kind = controller.Kind{Group: g, Version: v, Kind: c.Kind}
		out.Namespace, out.Name = c.Namespace, c.Name
	}
	if m, ok := cairn.ResourceMetaFrom(ctx); ok {
		if m.Kind != "" {
			out.Kind = controller.Kind{Group: m.Group, Version: m.Version, Kind: m.Kind}
		} else if out.Kind.Kind == "" {
			return out, errorf(cairn.CodeInvalid, id, "Type %s declares no REST names (group, version, names.kind): the Git backend stores instances as resources named by them", m.TypeRef)
		}
		if m.Namespace != "" {
			out.Namespace = m.Namespace
		}
		if m.Name != "" {
			out.Name = m.Name
		}
		out.Labels = m.Labels
	}
	if out.Kind.Kind == "" || out.Kind.Version == "" {
		return out, errorf(cairn.CodeInvalid, id, "the resource's kind and version are unknown: the hub passes them for Types with REST names; a context may give {apiVersion, kind}")
	}
	if out.Namespace == "" {
		out.Namespace = cairn.DefaultNamespace
	}
	if out.Name == "" {
		out.Name = id
	}
	return out, nil
}

// errorf returns a classified error naming the instance.
func errorf(code cairn.Code, id, format string, args ...any) error {
	e := cairn.Errorf(code, "git backend: "+format, args...)
	if id != "" {
		e.IDs = []string{id}
	}
	return e
}

// resourceDoc is the file content's JSON form.
func resourceDoc(ident identity, value json.RawMessage) (json.RawMessage, error) {
	r := template.Resource{
		APIVersion: template.APIVersion(ident.Kind),
		Kind:       ident.Kind.Kind,
		Metadata:   template.Metadata{Namespace: ident.Namespace, Name: ident.Name, Labels: ident.Labels},
		Spec:       value,
	}
	return json.Marshal(r)
}

// specOf returns a resource document's spec, compacted; null when absent.
func specOf(doc json.RawMessage) (json.RawMessage, error) {
	var r template.Resource
	if err := json.Unmarshal(doc, &r); err != nil {
		return nil, err
	}
	if len(r.Spec) == 0 {
		return json.RawMessage("null"), nil
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, r.Spec); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// identityOf reads an entry's identity under the index lock (writers
// replace it while the index is updated from fetched commits); nil for a
// nil entry.
func (b *Backend) identityOf(e *entry) *identity {
	if e == nil {
		return nil
	}
	b.imu.RLock()
	defer b.imu.RUnlock()
	id := e.id
	return &id
}

// lookup returns a copy-free view of the index entry, nil when unknown;
// read its fields under imu (or through identityOf).
func (b *Backend) lookup(id string) *entry {
	b.imu.RLock()
	defer b.imu.RUnlock()
	return b.idx[id]
}

// entryFresh returns the instance's entry; when this process does not
// know it, it fetches first, since another process may have created it.
func (b *Backend) entryFresh(ctx context.Context, id string) (*entry, error) {
	if e := b.lookup(id); e != nil {
		return e, nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.openLocked(ctx); err != nil {
		return nil, err
	}
	if e := b.lookup(id); e != nil {
		return e, nil
	}
	if err := b.fetchLocked(ctx); err != nil {
		return nil, err
	}
	if e := b.lookup(id); e != nil {
		return e, nil
	}
	return nil, errorf(cairn.CodeNotFound, id, "TypeInstance %q not found: no commit on branch %s of %s records it (Cairn-Instance trailer)", id, b.cfg.Branch, b.cfg.URL)
}

func (b *Backend) versionContext(ident identity, rv int, commit plumbing.Hash) json.RawMessage {
	c := versionContext{
		APIVersion: template.APIVersion(ident.Kind), Kind: ident.Kind.Kind,
		Namespace: ident.Namespace, Name: ident.Name,
		ResourceVersion: rv, Commit: commit.String(),
	}
	if b.loc != nil {
		c.Path, _ = b.loc.Path(ident.Kind, ident.Namespace, ident.Name, ident.Labels)
	}
	raw, _ := json.Marshal(c) // plain strings and ints: cannot fail
	return raw
}

// GetPreCreateValue returns nil: the value is what the caller gives.
func (b *Backend) GetPreCreateValue(ctx context.Context, req cairn.GetPreCreateValueRequest) (json.RawMessage, error) {
	return nil, nil
}

// OnCreate commits resource version 1 as the resource's file.
func (b *Backend) OnCreate(ctx context.Context, req cairn.OnCreateRequest) (json.RawMessage, error) {
	ch, err := b.createChange(ctx, req)
	if err != nil {
		return nil, err
	}
	if b.proposing(ctx) {
		return b.propose(ctx, ch, nil)
	}
	commit, err := b.commitOne(ctx, ch)
	if err != nil {
		return nil, err
	}
	return b.versionContext(ch.ident, 1, commit), nil
}

// createChange is the change OnCreate commits.
func (b *Backend) createChange(ctx context.Context, req cairn.OnCreateRequest) (change, error) {
	id := req.InstanceID
	if id == "" {
		return change{}, errorf(cairn.CodeInvalid, "", "the TypeInstance id is empty")
	}
	ident, err := resolveIdentity(ctx, id, req.Context, nil)
	if err != nil {
		return change{}, err
	}
	doc, err := resourceDoc(ident, req.Value)
	if err != nil {
		return change{}, errorf(cairn.CodeInvalid, id, "value: %w", err)
	}
	return change{
		op: opCreate, id: id, rv: 1, ident: ident, touches: []identity{ident},
		check: func(e *entry) error {
			if e != nil {
				return errorf(cairn.CodeAlreadyExists, id, "TypeInstance %q already exists (%s)", id, e.id)
			}
			return nil
		},
		apply: func(ctx context.Context, root string) error {
			return b.ctl.Put(ctx, root, ident.Kind, doc)
		},
	}, nil
}

// OnUpdate commits a new resource version.
func (b *Backend) OnUpdate(ctx context.Context, req cairn.OnUpdateRequest) (json.RawMessage, error) {
	ch, err := b.updateChange(ctx, req)
	if err != nil {
		return nil, err
	}
	if b.proposing(ctx) {
		return b.propose(ctx, ch, req.Context)
	}
	commit, err := b.commitOne(ctx, ch)
	if err != nil {
		return nil, err
	}
	return b.versionContext(ch.ident, ch.rv, commit), nil
}

// updateChange is the change OnUpdate commits.
func (b *Backend) updateChange(ctx context.Context, req cairn.OnUpdateRequest) (change, error) {
	id, rv := req.InstanceID, req.NewResourceVersion
	if rv < 1 {
		return change{}, errorf(cairn.CodeInvalid, id, "TypeInstance %q: resource version %d: must be 1 or more", id, rv)
	}
	e, err := b.entryFresh(ctx, id)
	unrecorded := false
	switch {
	case b.scm != nil && cairn.HasCode(err, cairn.CodeNotFound) && proposalOf(req.Context) != nil:
		// an instance whose creation is still a proposal is on no branch yet
	case cairn.HasCode(err, cairn.CodeNotFound) && b.unrecorded(id, req.Context):
		// No commit records it (the branch was rewritten without cairn's
		// commits about it), but the hub does, with its context: this
		// version's commit records it again (its Cairn-Resource trailer),
		// and puts its file back if the rewrite dropped it.
		unrecorded = true
	case err != nil:
		return change{}, err
	}
	ident, err := resolveIdentity(ctx, id, req.Context, b.identityOf(e))
	if err != nil {
		return change{}, err
	}
	doc, err := resourceDoc(ident, req.NewValue)
	if err != nil {
		return change{}, errorf(cairn.CodeInvalid, id, "value: %w", err)
	}
	return change{
		op: opUpdate, id: id, rv: rv, ident: ident, touches: []identity{ident},
		check: func(e *entry) error {
			if e == nil && unrecorded {
				return nil
			}
			if e == nil {
				return errorf(cairn.CodeNotFound, id, "TypeInstance %q not found", id)
			}
			if _, ok := e.versions[rv]; ok {
				return errorf(cairn.CodeAlreadyExists, id, "TypeInstance %q already has resource version %d", id, rv)
			}
			return checkLock(e, id, req.OwnerID, "update")
		},
		apply: func(ctx context.Context, root string) error {
			return b.ctl.Put(ctx, root, ident.Kind, doc)
		},
	}, nil
}

func checkLock(e *entry, id, owner, op string) error {
	if e.lockedBy != "" && e.lockedBy != owner {
		return errorf(cairn.CodeLocked, id, "cannot %s TypeInstance %q: it is locked by %q", op, id, e.lockedBy)
	}
	return nil
}

// OnDelete removes the resource's file.
func (b *Backend) OnDelete(ctx context.Context, req cairn.OnDeleteRequest) error {
	if cairn.IsRollback(ctx) {
		// Taking back a create: an imported one leaves the file alone.
		if handled, err := b.undoImport(ctx, req.InstanceID, 1, opDelete); handled || err != nil {
			return err
		}
	}
	if b.proposing(ctx) {
		return b.proposeDelete(ctx, req)
	}
	ch, err := b.deleteChange(ctx, req)
	if cairn.HasCode(err, cairn.CodeNotFound) && !cairn.IsRollback(ctx) {
		if uch, ok := b.unrecordedDeleteChange(ctx, req); ok {
			ch, err = uch, nil
		}
	}
	if err != nil {
		return err
	}
	_, err = b.commitOne(ctx, ch)
	return err
}

// unrecordedDeleteChange is the delete of an instance no commit on the
// branch records (rewritten without cairn's commits about it) but whose
// context names its resource: its file, when still at the tip and no
// other instance's, is removed, so no sync imports it again as a new
// instance.
func (b *Backend) unrecordedDeleteChange(ctx context.Context, req cairn.OnDeleteRequest) (change, bool) {
	id := req.InstanceID
	if !b.unrecorded(id, req.Context) {
		return change{}, false
	}
	ident, err := resolveIdentity(ctx, id, req.Context, nil)
	if err != nil {
		return change{}, false
	}
	return change{
		op: opDelete, id: id, ident: ident, touches: []identity{ident},
		check: func(*entry) error { return nil },
		apply: func(ctx context.Context, root string) error {
			b.imu.RLock()
			other := b.heldByOtherLocked(id, ident)
			b.imu.RUnlock()
			if other != "" {
				return nil
			}
			err := b.ctl.Delete(ctx, root, ident.Kind, ident.Namespace, ident.Name)
			if cairn.HasCode(err, cairn.CodeNotFound) {
				return nil
			}
			return err
		},
	}, true
}

// deleteChange is the change OnDelete commits.
func (b *Backend) deleteChange(ctx context.Context, req cairn.OnDeleteRequest) (change, error) {
	id := req.InstanceID
	e, err := b.entryFresh(ctx, id)
	if err != nil {
		return change{}, err
	}
	ident := *b.identityOf(e)
	return change{
		op: opDelete, id: id, ident: ident, touches: []identity{ident},
		check: func(e *entry) error {
			if e == nil {
				return errorf(cairn.CodeNotFound, id, "TypeInstance %q not found", id)
			}
			return checkLock(e, id, req.OwnerID, "delete")
		},
		apply: func(ctx context.Context, root string) error {
			b.imu.RLock()
			other := b.heldByOtherLocked(id, ident)
			b.imu.RUnlock()
			if other != "" {
				return nil // its file is another instance's now: not ours to remove
			}
			err := b.ctl.Delete(ctx, root, ident.Kind, ident.Namespace, ident.Name)
			if cairn.HasCode(err, cairn.CodeNotFound) {
				return nil // removed outside cairn already: nothing to commit
			}
			return err
		},
	}, nil
}

// OnDeleteRevision removes one resource version. For the latest one (how
// the hub rolls back a failed update) the file goes back to the previous
// version's content, unless someone changed it since; then only the
// version is forgotten, so the rollback never undoes another's change.
func (b *Backend) OnDeleteRevision(ctx context.Context, req cairn.OnDeleteRevisionRequest) error {
	id, rv := req.InstanceID, req.ResourceVersion
	if cairn.IsRollback(ctx) {
		// Taking back an update: an imported one leaves the file alone.
		if handled, err := b.undoImport(ctx, id, rv, opDeleteRevision); handled || err != nil {
			return err
		}
	}
	if b.proposing(ctx) {
		return b.withdraw(ctx, req)
	}
	e, err := b.entryFresh(ctx, id)
	if err != nil {
		return err
	}
	b.imu.RLock()
	ident := e.id
	commit, live := e.versions[rv]
	prev, prevCommit := 0, plumbing.ZeroHash
	for v, c := range e.versions {
		if v < rv && v > prev {
			prev, prevCommit = v, c
		}
	}
	isLatest := live && e.latest() == rv
	b.imu.RUnlock()
	if !live {
		return errorf(cairn.CodeNotFound, id, "TypeInstance %q has no resource version %d", id, rv)
	}
	if err := checkLock(e, id, req.OwnerID, "delete a resource version of"); err != nil {
		return err
	}
	var mine, restore json.RawMessage
	if isLatest {
		if mine, err = b.readAt(ctx, commit, ident); err != nil && !cairn.HasCode(err, cairn.CodeNotFound) {
			return err
		}
		if prev > 0 {
			if restore, err = b.readAt(ctx, prevCommit, ident); err != nil && !cairn.HasCode(err, cairn.CodeNotFound) {
				return err
			}
		}
	}
	_, err = b.commitOne(ctx, change{
		// Recorded even when the file stays (changed since): every
		// process's index must forget the version, or it refuses the
		// hub's next write of that resource version.
		op: opDeleteRevision, id: id, rv: rv, ident: ident, touches: []identity{ident}, recordOnly: true,
		check: func(e *entry) error {
			if e == nil {
				return errorf(cairn.CodeNotFound, id, "TypeInstance %q not found", id)
			}
			if _, ok := e.versions[rv]; !ok {
				return errorf(cairn.CodeNotFound, id, "TypeInstance %q has no resource version %d", id, rv)
			}
			return nil
		},
		apply: func(ctx context.Context, root string) error {
			if !isLatest || mine == nil {
				return nil
			}
			cur, err := b.ctl.Get(ctx, root, ident.Kind, ident.Namespace, ident.Name)
			if err != nil && !cairn.HasCode(err, cairn.CodeNotFound) {
				return err
			}
			if spec, serr := specOf(cur); err != nil || serr != nil || !cairn.JSONEqual(spec, mine) {
				return nil // changed since: keep it
			}
			if restore == nil {
				return b.ctl.Delete(ctx, root, ident.Kind, ident.Namespace, ident.Name)
			}
			doc, err := resourceDoc(ident, restore)
			if err != nil {
				return err
			}
			return b.ctl.Put(ctx, root, ident.Kind, doc)
		},
	})
	return err
}

// GetValue returns the spec of the resource file at the commit that made
// the resource version.
func (b *Backend) GetValue(ctx context.Context, req cairn.GetValueRequest) (json.RawMessage, error) {
	id, rv := req.InstanceID, req.ResourceVersion
	if v, ok, err := b.proposalValue(ctx, req); ok {
		return v, err
	}
	e, err := b.entryFresh(ctx, id)
	if cairn.HasCode(err, cairn.CodeNotFound) {
		return b.unrecordedValue(ctx, req, err)
	}
	if err != nil {
		return nil, err
	}
	c := parseContext(req.Context)
	b.imu.RLock()
	commit, ok := e.versions[rv]
	ident := e.id
	if !ok && c.ResourceVersion == rv && c.Commit != "" && !e.dropped[rv] {
		// Versions this process did not write are in the index once
		// fetched; but a version that changed nothing made no commit, and
		// only its context (kept by the hub) says which commit holds it.
		commit, ok = plumbing.NewHash(c.Commit), true
	}
	b.imu.RUnlock()
	if !ok {
		if err := b.refresh(ctx); err != nil {
			return nil, err
		}
		b.imu.RLock()
		commit, ok = e.versions[rv]
		b.imu.RUnlock()
	}
	if !ok {
		return nil, errorf(cairn.CodeNotFound, id, "TypeInstance %q has no resource version %d", id, rv)
	}
	if c.Path != "" && c.ResourceVersion == rv {
		ident.Path = c.Path
	}
	return b.readAt(ctx, commit, ident)
}

// GetLockedBy returns the lock owner this process recorded.
func (b *Backend) GetLockedBy(ctx context.Context, req cairn.GetLockedByRequest) (string, error) {
	e, err := b.entryFresh(ctx, req.InstanceID)
	if err != nil {
		return "", err
	}
	b.imu.RLock()
	defer b.imu.RUnlock()
	return e.lockedBy, nil
}

// OnLock records the lock owner (in memory: the hub's store holds the lock).
func (b *Backend) OnLock(ctx context.Context, req cairn.OnLockRequest) error {
	id := req.InstanceID
	if req.LockedBy == "" {
		return errorf(cairn.CodeInvalid, id, "lock TypeInstance %q: the lock owner is empty", id)
	}
	e, err := b.entryFresh(ctx, id)
	if err != nil {
		return err
	}
	b.imu.Lock()
	defer b.imu.Unlock()
	if err := checkLock(e, id, req.LockedBy, "lock"); err != nil {
		return err
	}
	e.lockedBy = req.LockedBy
	return nil
}

// OnUnlock clears the lock.
func (b *Backend) OnUnlock(ctx context.Context, req cairn.OnUnlockRequest) error {
	e, err := b.entryFresh(ctx, req.InstanceID)
	if err != nil {
		return err
	}
	b.imu.Lock()
	defer b.imu.Unlock()
	e.lockedBy = ""
	return nil
}

// Dir is the backend's cache directory.
func (b *Backend) Dir() string { return filepath.Clean(b.dir) }

// decode parses a resource file of the repository, decrypting it first
// when the backend encrypts.
func (b *Backend) decode(name string, data []byte) (json.RawMessage, error) {
	if b.codec != nil {
		plain, err := b.codec.Decrypt(name, data)
		if err != nil {
			return nil, err
		}
		data = plain
	}
	return template.Decode(name, data)
}
