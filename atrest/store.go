package atrest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/store"
)

// Wrap returns st with the built-in backend's values encrypted at rest
// according to c: PutValue seals, Value and Values open. Everything else
// passes through unchanged. A nil c encrypts nothing but still refuses to
// pass sealed values on as if they were plaintext.
func Wrap(st store.Store, c *Config) store.Store {
	if c == nil {
		c = &Config{}
	}
	es := &encStore{Store: st, c: c}
	l, listens := st.(changeListener)
	r, reads := st.(changeReader)
	switch {
	case listens && reads:
		return &encFeedStore{encListenStore: encListenStore{encStore: es, l: l}, r: r}
	case listens:
		// Keep what the hub looks for beside store.Store: a store that
		// tells of other replicas' commits (PostgreSQL's LISTEN/NOTIFY).
		return &encListenStore{encStore: es, l: l}
	}
	return es
}

// changeReader is the watch cache's optional store interface (hub/cache)
// for the change log read with the instances it names and their values in
// one request; the wrapper opens the values it returns.
type changeReader interface {
	ChangesWithInstances(ctx context.Context, after int64, limit int) ([]store.Change, []cairn.Instance, error)
}

// encFeedStore is a PostgreSQL store wrapped: it listens and reads changes
// with their instances.
type encFeedStore struct {
	encListenStore
	r changeReader
}

func (s *encFeedStore) ChangesWithInstances(ctx context.Context, after int64, limit int) ([]store.Change, []cairn.Instance, error) {
	cs, found, err := s.r.ChangesWithInstances(ctx, after, limit)
	if err != nil {
		return nil, nil, err
	}
	for i := range found {
		in := &found[i]
		if in.Latest.Value == nil {
			continue
		}
		if in.Latest.Value, err = s.c.Open(in.ID, in.Latest.ResourceVersion, in.Latest.Value); err != nil {
			return nil, nil, err
		}
	}
	return cs, found, nil
}

// changeListener is the hub's optional store interface for commits heard
// of as they happen (hub/listen.go); the wrapper must not hide it.
type changeListener interface {
	ListenChanges(ctx context.Context, ready func(), changed func(seq int64)) error
}

type encListenStore struct {
	*encStore
	l changeListener
}

func (s *encListenStore) ListenChanges(ctx context.Context, ready func(), changed func(seq int64)) error {
	return s.l.ListenChanges(ctx, ready, changed)
}

type encStore struct {
	store.Store
	c *Config
}

func (s *encStore) Value(ctx context.Context, id string, rv int) (json.RawMessage, error) {
	return openValue(ctx, s.c, s.Store, id, rv)
}

func (s *encStore) Values(ctx context.Context, keys []store.ValueKey) ([]json.RawMessage, error) {
	return openValues(ctx, s.c, s.Store, keys)
}

func (s *encStore) Update(ctx context.Context, fn func(ctx context.Context, tx store.Tx) error) error {
	return s.Store.Update(ctx, func(ctx context.Context, tx store.Tx) error {
		return fn(ctx, &encTx{Tx: tx, c: s.c})
	})
}

type encTx struct {
	store.Tx
	c *Config
	// paths remembers the Type path of instances created in this
	// transaction, which the hub creates just before storing their value.
	paths map[string]string
}

// AfterCommit passes fn on to a Tx that runs functions after its commit
// (store.AfterCommitter).
func (t *encTx) AfterCommit(fn func()) bool {
	a, ok := t.Tx.(store.AfterCommitter)
	return ok && a.AfterCommit(fn)
}

// TypeMatches passes on to a Tx that checks Types (store.TypeMatcher);
// over one that does not it fails with errors.ErrUnsupported (the caller
// reads the Type instead).
func (t *encTx) TypeMatches(ctx context.Context, ref cairn.TypeRef, jsonSchema json.RawMessage, named bool) (bool, error) {
	if m, ok := t.Tx.(store.TypeMatcher); ok {
		return m.TypeMatches(ctx, ref, jsonSchema, named)
	}
	return false, fmt.Errorf("check Type %s: %w", ref, errors.ErrUnsupported)
}

func (t *encTx) Value(ctx context.Context, id string, rv int) (json.RawMessage, error) {
	return openValue(ctx, t.c, t.Tx, id, rv)
}

func (t *encTx) Values(ctx context.Context, keys []store.ValueKey) ([]json.RawMessage, error) {
	return openValues(ctx, t.c, t.Tx, keys)
}

func (t *encTx) CreateInstance(ctx context.Context, inst cairn.Instance) error {
	if err := t.Tx.CreateInstance(ctx, inst); err != nil {
		return err
	}
	if t.paths == nil {
		t.paths = map[string]string{}
	}
	t.paths[inst.ID] = inst.TypeRef.Path
	return nil
}

func (t *encTx) PutValue(ctx context.Context, id string, rv int, value json.RawMessage) error {
	if t.c.sealsNothing() {
		// No key for any Type: stored as it is, without looking up the
		// instance's Type (a read per write otherwise).
		return t.Tx.PutValue(ctx, id, rv, value)
	}
	typePath, err := t.typePath(ctx, id)
	if err != nil {
		return err
	}
	sealed, err := t.c.Seal(typePath, id, rv, value)
	if err != nil {
		return err
	}
	return t.Tx.PutValue(ctx, id, rv, sealed)
}

// typePath returns the Type path of an instance, "" when the instance does
// not exist (the built-in backend driver stores values of ids the hub has
// not recorded; only a "*" entry matches those).
// GetInstancesBrief passes through, remembering the Type paths it read: the
// hub reads the instances it updates in the transaction before storing
// their values, and an instance's Type never changes.
func (t *encTx) GetInstancesBrief(ctx context.Context, ids []string) ([]cairn.Instance, error) {
	found, err := t.Tx.GetInstancesBrief(ctx, ids)
	if err != nil {
		return nil, err
	}
	if t.paths == nil {
		t.paths = make(map[string]string, len(found))
	}
	for _, in := range found {
		t.paths[in.ID] = in.TypeRef.Path
	}
	return found, nil
}

func (t *encTx) typePath(ctx context.Context, id string) (string, error) {
	if p, ok := t.paths[id]; ok {
		return p, nil
	}
	found, err := t.Tx.GetInstancesBrief(ctx, []string{id})
	if err != nil {
		return "", fmt.Errorf("look up the Type of %q to choose its encryption key: %w", id, err)
	}
	if len(found) == 0 {
		return "", nil
	}
	return found[0].TypeRef.Path, nil
}

func openValue(ctx context.Context, c *Config, r store.Reader, id string, rv int) (json.RawMessage, error) {
	v, err := r.Value(ctx, id, rv)
	if err != nil {
		return nil, err
	}
	return c.Open(id, rv, v)
}

func openValues(ctx context.Context, c *Config, r store.Reader, keys []store.ValueKey) ([]json.RawMessage, error) {
	vs, err := r.Values(ctx, keys)
	if err != nil {
		return nil, err
	}
	for i, k := range keys {
		if vs[i], err = c.Open(k.InstanceID, k.ResourceVersion, vs[i]); err != nil {
			return nil, err
		}
	}
	return vs, nil
}
