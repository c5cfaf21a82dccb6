package hub_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/hub"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/postgres/pgtest"
)

// typeChange is a Type deleted, and registered again with another schema
// or not, between a hub's check of a value against it (which the hub keeps)
// and its next check: the cases of TestCreateChecksTheCurrentType and
// TestUpdateChecksTheCurrentType.
type typeChange struct {
	name         string
	strict       bool
	otherWriter  bool // the Type is changed through another hub on the store
	from, to     string
	value        json.RawMessage // checked after the change
	wantRejected bool
}

// The schemas and values of the cases: smallValue passes both schemas,
// bigValue only anyN.
const (
	anyN       = `{"type":"object","properties":{"n":{"type":"integer"}}}`
	smallN     = `{"type":"object","properties":{"n":{"type":"integer","maximum":5}}}`
	smallValue = `{"n":3}`
	bigValue   = `{"n":9}`
)

func typeChanges() []typeChange {
	big := json.RawMessage(bigValue)
	return []typeChange{
		{name: "stricter, same hub", from: anyN, to: smallN, value: big, wantRejected: true},
		{name: "stricter, other hub", otherWriter: true, from: anyN, to: smallN, value: big, wantRejected: true},
		{name: "looser, same hub", from: smallN, to: anyN, value: big},
		{name: "looser, other hub", otherWriter: true, from: smallN, to: anyN, value: big},
		{name: "deleted, other hub", otherWriter: true, from: smallN, value: big},
		{name: "deleted, other hub, strict", strict: true, otherWriter: true, from: anyN, value: json.RawMessage(smallValue), wantRejected: true},
	}
}

// typeMatching is how a store's transactions pin Types: as SQLite's and
// PostgreSQL's do (store.TypeMatcher), not at all (a store without it), or
// through a wrapper that cannot tell (package atrest's over such a store).
// A hub's verdicts are the same over all of them.
type typeMatching struct {
	name string
	open func(testing.TB) store.Store  // nil: the env's SQLite store
	wrap func(store.Store) store.Store // nil: the store as it is
}

func typeMatchings() []typeMatching {
	return []typeMatching{
		{name: "TypeMatcher"},
		{name: "TypeMatcher, PostgreSQL", open: func(tb testing.TB) store.Store { return pgtest.Open(tb) }},
		{name: "no TypeMatcher", wrap: func(s store.Store) store.Store { return noMatchStore{s} }},
		{name: "TypeMatcher unsupported", wrap: func(s store.Store) store.Store { return unsupportedMatchStore{s} }},
	}
}

// noMatchStore is a store whose transactions do not match Types: values
// are checked against the Type as read.
type noMatchStore struct{ store.Store }

type noMatchTx struct{ store.Tx }

func (s noMatchStore) Update(ctx context.Context, fn func(ctx context.Context, tx store.Tx) error) error {
	return s.Store.Update(ctx, func(ctx context.Context, tx store.Tx) error { return fn(ctx, noMatchTx{tx}) })
}

// unsupportedMatchStore is a store whose transactions are TypeMatchers that
// cannot tell (errors.ErrUnsupported), as package atrest's over a store
// without TypeMatcher.
type unsupportedMatchStore struct{ store.Store }

type unsupportedMatchTx struct{ store.Tx }

func (unsupportedMatchTx) TypeMatches(context.Context, cairn.TypeRef, json.RawMessage, bool) (bool, error) {
	return false, errors.ErrUnsupported
}

func (s unsupportedMatchStore) Update(ctx context.Context, fn func(ctx context.Context, tx store.Tx) error) error {
	return s.Store.Update(ctx, func(ctx context.Context, tx store.Tx) error { return fn(ctx, unsupportedMatchTx{tx}) })
}

// newTypeChangeEnv returns an env whose hub is strict as tc says, on the
// store m wraps, with Type ref registered with tc.from; and the hub that
// changes the Type: the env's own, or another one on the store (not
// strict, so it can create an instance of an unregistered Type).
func newTypeChangeEnv(t *testing.T, tc typeChange, m typeMatching, ref cairn.TypeRef) (*env, *hub.Hub) {
	t.Helper()
	var base store.Store // the store under the wrapper, for the other hub
	e := newEnv(t, func(c *hub.Config) {
		c.Strict = tc.strict
		if m.open != nil {
			c.Store = m.open(t)
		}
		base = c.Store
		if m.wrap != nil {
			c.Store = m.wrap(c.Store)
		}
	})
	e.st = base // for the hubs a test adds
	writer := e.h
	if tc.otherWriter {
		other, err := hub.New(e.ctx, hub.Config{Store: base, Backends: e.opener})
		if err != nil {
			t.Fatalf("second hub: %v", err)
		}
		writer = other
	}
	if _, _, err := e.h.ApplyType(e.ctx, cairn.Type{Path: ref.Path, Revision: ref.Revision, JSONSchema: json.RawMessage(tc.from)}); err != nil {
		t.Fatal(err)
	}
	return e, writer
}

// changeType deletes Type ref through h and, unless tc.to is empty,
// registers it again with tc.to.
func changeType(t *testing.T, e *env, h *hub.Hub, tc typeChange, ref cairn.TypeRef) {
	t.Helper()
	if err := h.DeleteType(e.ctx, ref); err != nil {
		t.Fatal(err)
	}
	if tc.to != "" {
		if _, _, err := h.ApplyType(e.ctx, cairn.Type{Path: ref.Path, Revision: ref.Revision, JSONSchema: json.RawMessage(tc.to)}); err != nil {
			t.Fatal(err)
		}
	}
}
