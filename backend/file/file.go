// Package file is an example storage backend that keeps values and locks in
// files on disk, one file per instance and resource version:
//
//	DIR/<instance id>/1.json   resource version 1
//	DIR/<instance id>/2.json   resource version 2
//	DIR/<instance id>/lock     the lock owner; absent when unlocked
//
// Every write is atomic: a new file is written under a temporary name,
// synced and renamed into place, a new instance appears as a complete
// directory, and a deleted one is renamed away before it is removed. A
// request whose deadline passed is not written. Leftovers of a crash
// (.tmp-* and .trash-* entries) are removed at start.
//
// It runs in one of two modes. By default it stores the values it is given
// (acceptValue true): each revision file holds the value's JSON as the hub
// sent it. With Config.Source it is context-only (acceptValue false): the
// context {"file": "<path>"} names a file under Source, each revision file
// holds the context, and the value is the named file's current content (JSON
// as is, anything else as a JSON string), like a backend that projects a
// resource managed elsewhere.
//
// It is built on sdk/storagebackend and served by `cairn backend file`. One
// process serves a directory: locking is in memory.
package file

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/cairn-dev/cairn"
)

// ContextSchema is the context schema of the context-only mode: register
// the backend with it so the hub validates contexts before calling.
const ContextSchema = `{"type":"object","required":["file"],"properties":{"file":{"type":"string","minLength":1}},"additionalProperties":false}`

// Config configures a Backend.
type Config struct {
	// Dir is where revisions and locks are kept. It is created if missing.
	Dir string
	// Source, when set, makes the backend context-only: values are read
	// from the files under Source that contexts name.
	Source string
}

// Backend is the file backend. It implements cairn.Backend, and so both
// storagebackend.ValueBackend and storagebackend.ContextBackend.
type Backend struct {
	dir    string
	source *os.Root // nil in value mode
	// mu serialises writes so checks and the rename that commits are one
	// step; reads take it shared since every file is replaced atomically.
	mu sync.RWMutex
}

var _ cairn.Backend = (*Backend)(nil)

// New opens (creating it if missing) the backend's directory and removes
// what a crash left half-done.
func New(cfg Config) (*Backend, error) {
	if cfg.Dir == "" {
		return nil, errors.New("file backend: a directory is required")
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("file backend: create directory %s: %w", cfg.Dir, err)
	}
	b := &Backend{dir: cfg.Dir}
	if cfg.Source != "" {
		root, err := os.OpenRoot(cfg.Source)
		if err != nil {
			return nil, fmt.Errorf("file backend: open the source directory: %w", err)
		}
		b.source = root
	}
	if err := b.cleanLeftovers(); err != nil {
		return nil, err
	}
	return b, nil
}

// Close releases the source directory.
func (b *Backend) Close() error {
	if b.source != nil {
		return b.source.Close()
	}
	return nil
}

// AcceptValue reports the mode: true when the backend stores values.
func (b *Backend) AcceptValue() bool { return b.source == nil }

// cleanLeftovers removes temporary files and directories, inside the
// backend's directory and inside each instance's.
func (b *Backend) cleanLeftovers() error {
	entries, err := os.ReadDir(b.dir)
	if err != nil {
		return fmt.Errorf("file backend: read %s: %w", b.dir, err)
	}
	var errs []error
	for _, e := range entries {
		p := filepath.Join(b.dir, e.Name())
		if isLeftover(e.Name()) {
			errs = append(errs, os.RemoveAll(p))
			continue
		}
		if !e.IsDir() {
			continue
		}
		inner, err := os.ReadDir(p)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, f := range inner {
			if isLeftover(f.Name()) {
				errs = append(errs, os.RemoveAll(filepath.Join(p, f.Name())))
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("file backend: remove leftovers of an interrupted write: %w", err)
	}
	return nil
}

func isLeftover(name string) bool {
	return strings.HasPrefix(name, ".tmp-") || strings.HasPrefix(name, ".trash-")
}

// errorf returns a classified error naming the instance.
func errorf(code cairn.Code, id, format string, args ...any) error {
	e := cairn.Errorf(code, "file backend: "+format, args...)
	if id != "" {
		e.IDs = []string{id}
	}
	return e
}

// checkID refuses ids that are not safe as a file name: the hub's are UUIDs.
func checkID(id string) error {
	if id == "" {
		return errorf(cairn.CodeInvalid, "", "the TypeInstance id is empty")
	}
	for _, r := range id {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.'
		if !ok {
			return errorf(cairn.CodeInvalid, id, "TypeInstance id %q: only letters, digits, '-', '_' and '.' are allowed", id)
		}
	}
	if strings.HasPrefix(id, ".") {
		return errorf(cairn.CodeInvalid, id, "TypeInstance id %q must not start with '.'", id)
	}
	return nil
}

func checkRevision(id string, rv int) error {
	if rv < 1 {
		return errorf(cairn.CodeInvalid, id, "TypeInstance %q: resource version %d: must be 1 or more", id, rv)
	}
	return nil
}

func (b *Backend) instanceDir(id string) string { return filepath.Join(b.dir, id) }

func (b *Backend) revisionPath(id string, rv int) string {
	return filepath.Join(b.dir, id, strconv.Itoa(rv)+".json")
}

func (b *Backend) lockPath(id string) string { return filepath.Join(b.dir, id, "lock") }

// exists returns NotFound unless the instance's directory exists.
func (b *Backend) exists(id string) error {
	fi, err := os.Stat(b.instanceDir(id))
	if errors.Is(err, fs.ErrNotExist) {
		return errorf(cairn.CodeNotFound, id, "TypeInstance %q not found", id)
	}
	if err != nil {
		return fmt.Errorf("file backend: TypeInstance %q: %w", id, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("file backend: TypeInstance %q: %s is not a directory", id, b.instanceDir(id))
	}
	return nil
}

func (b *Backend) lockedBy(id string) (string, error) {
	data, err := os.ReadFile(b.lockPath(id))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("file backend: read the lock of TypeInstance %q: %w", id, err)
	}
	return string(data), nil
}

// checkUnlocked returns NotFound for an unknown instance and Locked when
// another owner holds the lock.
func (b *Backend) checkUnlocked(id, owner, op string) error {
	if err := b.exists(id); err != nil {
		return err
	}
	by, err := b.lockedBy(id)
	if err != nil {
		return err
	}
	if by != "" && by != owner {
		return errorf(cairn.CodeLocked, id, "cannot %s TypeInstance %q: it is locked by %q", op, id, by)
	}
	return nil
}

func randomSuffix() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// writeFile writes data to path atomically: a synced temporary file in the
// same directory renamed over path, then the directory synced so the rename
// survives a crash.
func writeFile(path string, data []byte) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // no-op once renamed
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	return syncDir(dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// content is what a revision file holds: the value in value mode, the
// context in context mode.
func (b *Backend) content(id string, value, ctxDoc json.RawMessage) ([]byte, error) {
	if b.source == nil {
		if value == nil {
			return []byte("null"), nil
		}
		if !json.Valid(value) {
			return nil, errorf(cairn.CodeInvalid, id, "TypeInstance %q: the value is not valid JSON", id)
		}
		return value, nil
	}
	name, err := b.sourceFile(id, ctxDoc)
	if err != nil {
		return nil, err
	}
	// Refuse a context naming a file that is not there now rather than
	// fail every later read.
	if _, err := b.readSource(id, name); err != nil {
		return nil, err
	}
	return ctxDoc, nil
}

// GetPreCreateValue returns the content of the file a context names in
// context mode, nil in value mode.
func (b *Backend) GetPreCreateValue(ctx context.Context, req cairn.GetPreCreateValueRequest) (json.RawMessage, error) {
	if b.source == nil {
		return nil, nil
	}
	name, err := b.sourceFile("", req.Context)
	if err != nil {
		return nil, err
	}
	return b.readSource("", name)
}

// OnCreate stores resource version 1, creating the instance's directory
// complete or not at all.
func (b *Backend) OnCreate(ctx context.Context, req cairn.OnCreateRequest) (json.RawMessage, error) {
	id := req.InstanceID
	if err := checkID(id); err != nil {
		return nil, err
	}
	data, err := b.content(id, req.Value, req.Context)
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.exists(id); err == nil {
		return nil, errorf(cairn.CodeAlreadyExists, id, "TypeInstance %q already exists", id)
	} else if !cairn.HasCode(err, cairn.CodeNotFound) {
		return nil, err
	}
	tmp, err := os.MkdirTemp(b.dir, ".tmp-")
	if err != nil {
		return nil, fmt.Errorf("file backend: create TypeInstance %q: %w", id, err)
	}
	defer os.RemoveAll(tmp) // no-op once renamed
	if err := writeFile(filepath.Join(tmp, "1.json"), data); err != nil {
		return nil, fmt.Errorf("file backend: create TypeInstance %q: %w", id, err)
	}
	// The caller may have given up (deadline): then do not commit, or the
	// hub's rollback would already have run and the value be orphaned.
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("file backend: create TypeInstance %q: %w", id, err)
	}
	if err := os.Rename(tmp, b.instanceDir(id)); err != nil {
		return nil, fmt.Errorf("file backend: create TypeInstance %q: %w", id, err)
	}
	if err := syncDir(b.dir); err != nil {
		return nil, fmt.Errorf("file backend: create TypeInstance %q: %w", id, err)
	}
	return nil, nil
}

// OnUpdate stores a new resource version.
func (b *Backend) OnUpdate(ctx context.Context, req cairn.OnUpdateRequest) (json.RawMessage, error) {
	id, rv := req.InstanceID, req.NewResourceVersion
	if err := checkID(id); err != nil {
		return nil, err
	}
	if err := checkRevision(id, rv); err != nil {
		return nil, err
	}
	data, err := b.content(id, req.NewValue, req.Context)
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.checkUnlocked(id, req.OwnerID, "update"); err != nil {
		return nil, err
	}
	path := b.revisionPath(id, rv)
	if _, err := os.Stat(path); err == nil {
		return nil, errorf(cairn.CodeAlreadyExists, id, "TypeInstance %q already has resource version %d", id, rv)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("file backend: update TypeInstance %q: %w", id, err)
	}
	if err := writeFile(path, data); err != nil {
		return nil, fmt.Errorf("file backend: update TypeInstance %q to resource version %d: %w", id, rv, err)
	}
	return nil, nil
}

// OnDelete removes the instance with every revision and its lock: the
// directory is renamed away first, so it vanishes at once.
func (b *Backend) OnDelete(ctx context.Context, req cairn.OnDeleteRequest) error {
	id := req.InstanceID
	if err := checkID(id); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.checkUnlocked(id, req.OwnerID, "delete"); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("file backend: delete TypeInstance %q: %w", id, err)
	}
	trash := filepath.Join(b.dir, ".trash-"+randomSuffix())
	if err := os.Rename(b.instanceDir(id), trash); err != nil {
		return fmt.Errorf("file backend: delete TypeInstance %q: %w", id, err)
	}
	if err := syncDir(b.dir); err != nil {
		return fmt.Errorf("file backend: delete TypeInstance %q: %w", id, err)
	}
	// Gone already; a failure here leaves only a .trash- leftover that the
	// next start removes.
	_ = os.RemoveAll(trash)
	return nil
}

// OnDeleteRevision removes one revision.
func (b *Backend) OnDeleteRevision(ctx context.Context, req cairn.OnDeleteRevisionRequest) error {
	id, rv := req.InstanceID, req.ResourceVersion
	if err := checkID(id); err != nil {
		return err
	}
	if err := checkRevision(id, rv); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.checkUnlocked(id, req.OwnerID, "delete a resource version of"); err != nil {
		return err
	}
	err := os.Remove(b.revisionPath(id, rv))
	if errors.Is(err, fs.ErrNotExist) {
		return errorf(cairn.CodeNotFound, id, "TypeInstance %q has no resource version %d", id, rv)
	}
	if err != nil {
		return fmt.Errorf("file backend: delete resource version %d of TypeInstance %q: %w", rv, id, err)
	}
	return syncDir(b.instanceDir(id))
}

// GetValue returns one revision's value.
func (b *Backend) GetValue(ctx context.Context, req cairn.GetValueRequest) (json.RawMessage, error) {
	id, rv := req.InstanceID, req.ResourceVersion
	if err := checkID(id); err != nil {
		return nil, err
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	if err := b.exists(id); err != nil {
		return nil, err
	}
	data, err := os.ReadFile(b.revisionPath(id, rv))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, errorf(cairn.CodeNotFound, id, "TypeInstance %q has no resource version %d", id, rv)
	}
	if err != nil {
		return nil, fmt.Errorf("file backend: read resource version %d of TypeInstance %q: %w", rv, id, err)
	}
	if b.source == nil {
		return data, nil
	}
	name, err := b.sourceFile(id, data)
	if err != nil {
		return nil, err
	}
	return b.readSource(id, name)
}

// GetLockedBy returns the lock owner, "" when unlocked.
func (b *Backend) GetLockedBy(ctx context.Context, req cairn.GetLockedByRequest) (string, error) {
	if err := checkID(req.InstanceID); err != nil {
		return "", err
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	if err := b.exists(req.InstanceID); err != nil {
		return "", err
	}
	return b.lockedBy(req.InstanceID)
}

// OnLock records the lock owner; the same owner may lock again.
func (b *Backend) OnLock(ctx context.Context, req cairn.OnLockRequest) error {
	id := req.InstanceID
	if err := checkID(id); err != nil {
		return err
	}
	if req.LockedBy == "" {
		return errorf(cairn.CodeInvalid, id, "lock TypeInstance %q: the lock owner is empty", id)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.checkUnlocked(id, req.LockedBy, "lock"); err != nil {
		return err
	}
	if err := writeFile(b.lockPath(id), []byte(req.LockedBy)); err != nil {
		return fmt.Errorf("file backend: lock TypeInstance %q: %w", id, err)
	}
	return nil
}

// OnUnlock removes the lock, whoever holds it: the hub checked the caller.
func (b *Backend) OnUnlock(ctx context.Context, req cairn.OnUnlockRequest) error {
	id := req.InstanceID
	if err := checkID(id); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.exists(id); err != nil {
		return err
	}
	err := os.Remove(b.lockPath(id))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("file backend: unlock TypeInstance %q: %w", id, err)
	}
	return syncDir(b.instanceDir(id))
}

// sourceFile reads the file name a context gives (context mode).
func (b *Backend) sourceFile(id string, ctxDoc json.RawMessage) (string, error) {
	var c struct {
		File string `json:"file"`
	}
	if len(ctxDoc) == 0 {
		return "", errorf(cairn.CodeInvalid, id, "a context {\"file\": \"<path under the source directory>\"} is required")
	}
	if err := json.Unmarshal(ctxDoc, &c); err != nil || c.File == "" {
		return "", errorf(cairn.CodeInvalid, id, "context: want {\"file\": \"<path under the source directory>\"}")
	}
	if !filepath.IsLocal(c.File) {
		return "", errorf(cairn.CodeInvalid, id, "context file %q: must be a relative path inside the source directory", c.File)
	}
	return c.File, nil
}

// readSource returns a source file's content as a JSON document.
func (b *Backend) readSource(id, name string) (json.RawMessage, error) {
	data, err := b.source.ReadFile(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, errorf(cairn.CodeInvalid, id, "context file %q does not exist in the source directory", name)
	}
	if err != nil {
		return nil, fmt.Errorf("file backend: read context file %q: %w", name, err)
	}
	if json.Valid(data) {
		return data, nil
	}
	s, err := json.Marshal(string(data))
	if err != nil {
		return nil, fmt.Errorf("file backend: context file %q: %w", name, err)
	}
	return s, nil
}
