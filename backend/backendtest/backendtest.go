// Package backendtest is the conformance suite every cairn.Backend
// implementation must pass: the built-in backend, and external backends
// through the gRPC adapter, whether they accept values or take only a
// context. It checks the protocol's semantics and error codes, as the hub
// relies on them to roll back and to report errors.
package backendtest

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"

	"github.com/cairn-dev/cairn"
)

// Harness describes the backend under test.
type Harness struct {
	// New returns the backend to test. It is called once per subtest; use
	// t.Cleanup to release what it opens.
	New func(t *testing.T) cairn.Backend
	// AcceptValue reports whether the backend stores the values it is given.
	// When false, values are not sent and value assertions are skipped, but
	// the context, lock and delete behaviour is checked all the same.
	AcceptValue bool
	// Context is a valid context for this backend, nil if it takes none.
	Context json.RawMessage
	// ContextValue is, for a backend that does not accept values, the value
	// it derives from Context: GetPreCreateValue and GetValue must return it.
	// Nil only checks that they return valid JSON.
	ContextValue json.RawMessage
}

// Run runs the conformance suite against h.
func Run(t *testing.T, h Harness) {
	t.Helper()
	if h.New == nil {
		t.Fatal("backendtest: Harness.New is nil")
	}
	t.Run("GetPreCreateValue", func(t *testing.T) { testGetPreCreateValue(t, h) })
	t.Run("Behaviour", func(t *testing.T) { testBehaviour(t, h) })
	t.Run("Errors", func(t *testing.T) { testErrors(t, h) })
	t.Run("Concurrency", func(t *testing.T) { testConcurrency(t, h) })
	t.Run("RoundTrip", func(t *testing.T) {
		if !h.AcceptValue {
			t.Skip("backend does not accept values")
		}
		testRoundTrip(t, h)
	})
}

// Owners of locks in the tests.
const (
	alice = "alice"
	bob   = "bob"
)

// Values used where their content does not matter.
var (
	value1 = json.RawMessage(`{"version":1,"url":"https://example.com"}`)
	value2 = json.RawMessage(`{"version":2,"url":"https://example.org","tags":["a","b"]}`)
	value3 = json.RawMessage(`{"version":3}`)
)

// fixture drives one instance of one backend, with a fresh id, and keeps the
// context of each resource version as the backend returned it.
type fixture struct {
	t           *testing.T
	ctx         context.Context
	b           cairn.Backend
	h           Harness
	id          string
	contexts    map[int]json.RawMessage // by resource version
	lastContext json.RawMessage
}

func newFixture(t *testing.T, h Harness) *fixture {
	t.Helper()
	b := h.New(t)
	if b == nil {
		t.Fatal("backendtest: Harness.New returned nil")
	}
	return &fixture{
		t:           t,
		ctx:         t.Context(),
		b:           b,
		h:           h,
		id:          uuid.NewString(),
		contexts:    map[int]json.RawMessage{},
		lastContext: h.Context,
	}
}

// value returns v for a backend that accepts values, nil otherwise.
func (f *fixture) value(v json.RawMessage) json.RawMessage {
	if !f.h.AcceptValue {
		return nil
	}
	return v
}

// remember records the context a write returned (the given one when it
// returned none) for rv.
func (f *fixture) remember(rv int, given, returned json.RawMessage) {
	f.t.Helper()
	c := given
	if returned != nil {
		if !json.Valid(returned) {
			f.t.Fatalf("resource version %d: returned context is not valid JSON: %q", rv, returned)
		}
		c = returned
	}
	f.contexts[rv] = c
	f.lastContext = c
}

// contextOf returns the context of rv, the latest one when unknown.
func (f *fixture) contextOf(rv int) json.RawMessage {
	if c, ok := f.contexts[rv]; ok {
		return c
	}
	return f.lastContext
}

func (f *fixture) create(v json.RawMessage) error {
	f.t.Helper()
	c := f.lastContext
	out, err := f.b.OnCreate(f.ctx, cairn.OnCreateRequest{InstanceID: f.id, Value: f.value(v), Context: c})
	if err == nil {
		f.remember(1, c, out)
	}
	return err
}

func (f *fixture) update(rv int, v json.RawMessage, owner string) error {
	f.t.Helper()
	c := f.lastContext
	out, err := f.b.OnUpdate(f.ctx, cairn.OnUpdateRequest{
		InstanceID: f.id, NewResourceVersion: rv, NewValue: f.value(v), Context: c, OwnerID: owner,
	})
	if err == nil {
		f.remember(rv, c, out)
	}
	return err
}

func (f *fixture) delete(owner string) error {
	return f.b.OnDelete(f.ctx, cairn.OnDeleteRequest{InstanceID: f.id, Context: f.lastContext, OwnerID: owner})
}

func (f *fixture) deleteRevision(rv int, owner string) error {
	return f.b.OnDeleteRevision(f.ctx, cairn.OnDeleteRevisionRequest{
		InstanceID: f.id, ResourceVersion: rv, Context: f.contextOf(rv), OwnerID: owner,
	})
}

func (f *fixture) get(rv int) (json.RawMessage, error) {
	return f.b.GetValue(f.ctx, cairn.GetValueRequest{InstanceID: f.id, ResourceVersion: rv, Context: f.contextOf(rv)})
}

func (f *fixture) lockedBy() (string, error) {
	return f.b.GetLockedBy(f.ctx, cairn.GetLockedByRequest{InstanceID: f.id, Context: f.lastContext})
}

func (f *fixture) lock(owner string) error {
	return f.b.OnLock(f.ctx, cairn.OnLockRequest{InstanceID: f.id, Context: f.lastContext, LockedBy: owner})
}

func (f *fixture) unlock() error {
	return f.b.OnUnlock(f.ctx, cairn.OnUnlockRequest{InstanceID: f.id, Context: f.lastContext})
}

// must fails the test when a step that sets up the case fails.
func (f *fixture) must(step string, err error) {
	f.t.Helper()
	if err != nil {
		f.t.Fatalf("%s: %v", step, err)
	}
}

// wantValue checks that rv holds want (compared as decoded JSON), or only
// that it can be read when the backend does not take values.
func (f *fixture) wantValue(rv int, want json.RawMessage) {
	f.t.Helper()
	got, err := f.get(rv)
	if err != nil {
		f.t.Fatalf("GetValue(rv %d): %v", rv, err)
	}
	switch {
	case f.h.AcceptValue:
		assertSameJSON(f.t, got, want)
	case f.h.ContextValue != nil:
		assertSameJSON(f.t, got, f.h.ContextValue)
	}
}

// wantCode checks that err carries code.
func (f *fixture) wantCode(op string, err error, code cairn.Code) {
	f.t.Helper()
	if got := cairn.ErrorCode(err); got != code {
		f.t.Errorf("%s: error %v has code %q, want %q", op, err, got, code)
	}
}

func (f *fixture) wantLockedBy(want string) {
	f.t.Helper()
	got, err := f.lockedBy()
	if err != nil {
		f.t.Fatalf("GetLockedBy: %v", err)
	}
	if got != want {
		f.t.Errorf("GetLockedBy = %q, want %q", got, want)
	}
}

func testGetPreCreateValue(t *testing.T, h Harness) {
	f := newFixture(t, h)
	v, err := f.b.GetPreCreateValue(f.ctx, cairn.GetPreCreateValueRequest{Context: h.Context})
	if err != nil {
		t.Fatalf("GetPreCreateValue: %v", err)
	}
	if v != nil && !json.Valid(v) {
		t.Errorf("GetPreCreateValue returned invalid JSON %q", v)
	}
	if !h.AcceptValue && h.ContextValue != nil {
		assertSameJSON(t, v, h.ContextValue)
	}
}

// testConcurrency checks what the hub relies on when writers race: of
// several OnUpdate calls for the same new revision exactly one succeeds and
// the others get AlreadyExists, and the winner's value is the one kept.
func testConcurrency(t *testing.T, h Harness) {
	f := newFixture(t, h)
	f.must("OnCreate", f.create(value1))
	const writers = 8
	errs := make([]error, writers)
	values := make([]json.RawMessage, writers)
	var wg sync.WaitGroup
	for i := range writers {
		values[i] = json.RawMessage(fmt.Sprintf(`{"writer":%d}`, i))
		wg.Go(func() {
			_, errs[i] = f.b.OnUpdate(f.ctx, cairn.OnUpdateRequest{
				InstanceID: f.id, NewResourceVersion: 2, NewValue: f.value(values[i]), Context: f.lastContext,
			})
		})
	}
	wg.Wait()
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil && winner >= 0:
			t.Errorf("writers %d and %d both stored resource version 2", winner, i)
		case err == nil:
			winner = i
		default:
			f.wantCode(fmt.Sprintf("writer %d", i), err, cairn.CodeAlreadyExists)
		}
	}
	if winner < 0 {
		t.Fatalf("no writer stored resource version 2: %v", errs)
	}
	f.wantValue(2, values[winner])
}

func testBehaviour(t *testing.T, h Harness) {
	tests := []struct {
		name string
		test func(f *fixture)
	}{
		{"OnCreate then GetValue returns resource version 1", func(f *fixture) {
			f.must("OnCreate", f.create(value1))
			f.wantValue(1, value1)
		}},
		{"OnUpdate adds a revision and keeps the earlier ones", func(f *fixture) {
			f.must("OnCreate", f.create(value1))
			f.must("OnUpdate", f.update(2, value2, ""))
			f.wantValue(1, value1)
			f.wantValue(2, value2)
		}},
		{"OnDeleteRevision removes only that revision", func(f *fixture) {
			f.must("OnCreate", f.create(value1))
			f.must("OnUpdate rv 2", f.update(2, value2, ""))
			f.must("OnUpdate rv 3", f.update(3, value3, ""))
			f.must("OnDeleteRevision", f.deleteRevision(2, ""))
			_, err := f.get(2)
			f.wantCode("GetValue of the deleted revision", err, cairn.CodeNotFound)
			f.wantValue(1, value1)
			f.wantValue(3, value3)
		}},
		{"OnDeleteRevision of the latest allows storing it again", func(f *fixture) {
			// How the hub rolls back an update whose metadata failed to commit.
			f.must("OnCreate", f.create(value1))
			f.must("OnUpdate", f.update(2, value2, ""))
			f.must("OnDeleteRevision", f.deleteRevision(2, ""))
			f.must("OnUpdate again", f.update(2, value3, ""))
			f.wantValue(2, value3)
		}},
		{"OnDelete removes every revision", func(f *fixture) {
			f.must("OnCreate", f.create(value1))
			f.must("OnUpdate", f.update(2, value2, ""))
			f.must("OnDelete", f.delete(""))
			for rv := 1; rv <= 2; rv++ {
				_, err := f.get(rv)
				f.wantCode("GetValue after OnDelete", err, cairn.CodeNotFound)
			}
			_, err := f.lockedBy()
			f.wantCode("GetLockedBy after OnDelete", err, cairn.CodeNotFound)
		}},
		{"OnDelete allows creating the instance again", func(f *fixture) {
			f.must("OnCreate", f.create(value1))
			f.must("OnDelete", f.delete(""))
			f.must("OnCreate again", f.create(value2))
			f.wantValue(1, value2)
		}},
		{"OnDelete removes the lock", func(f *fixture) {
			f.must("OnCreate", f.create(value1))
			f.must("OnLock", f.lock(alice))
			f.must("OnDelete by the owner", f.delete(alice))
			f.must("OnCreate again", f.create(value1))
			f.wantLockedBy("")
		}},
		{"GetLockedBy of an unlocked instance is empty", func(f *fixture) {
			f.must("OnCreate", f.create(value1))
			f.wantLockedBy("")
		}},
		{"OnLock records the owner", func(f *fixture) {
			f.must("OnCreate", f.create(value1))
			f.must("OnLock", f.lock(alice))
			f.wantLockedBy(alice)
		}},
		{"OnLock by the same owner again succeeds", func(f *fixture) {
			f.must("OnCreate", f.create(value1))
			f.must("OnLock", f.lock(alice))
			f.must("OnLock again", f.lock(alice))
			f.wantLockedBy(alice)
		}},
		{"OnUpdate by the lock owner succeeds", func(f *fixture) {
			f.must("OnCreate", f.create(value1))
			f.must("OnLock", f.lock(alice))
			f.must("OnUpdate by the owner", f.update(2, value2, alice))
			f.wantValue(2, value2)
			f.wantLockedBy(alice)
		}},
		{"OnDeleteRevision by the lock owner succeeds", func(f *fixture) {
			f.must("OnCreate", f.create(value1))
			f.must("OnUpdate", f.update(2, value2, ""))
			f.must("OnLock", f.lock(alice))
			f.must("OnDeleteRevision by the owner", f.deleteRevision(2, alice))
			f.wantValue(1, value1)
		}},
		{"OnUnlock clears the lock", func(f *fixture) {
			f.must("OnCreate", f.create(value1))
			f.must("OnLock", f.lock(alice))
			f.must("OnUnlock", f.unlock())
			f.wantLockedBy("")
		}},
		{"OnUnlock of an unlocked instance succeeds", func(f *fixture) {
			f.must("OnCreate", f.create(value1))
			f.must("OnUnlock", f.unlock())
			f.wantLockedBy("")
		}},
		{"after OnUnlock anyone may update, lock and delete", func(f *fixture) {
			f.must("OnCreate", f.create(value1))
			f.must("OnLock", f.lock(alice))
			f.must("OnUnlock", f.unlock())
			f.must("OnUpdate without owner", f.update(2, value2, ""))
			f.must("OnUpdate by another", f.update(3, value3, bob))
			f.wantValue(3, value3)
			f.must("OnLock by another", f.lock(bob))
			f.wantLockedBy(bob)
			f.must("OnUnlock", f.unlock())
			f.must("OnDelete", f.delete(""))
		}},
		{"instances are independent", func(f *fixture) {
			other := *f
			other.id = uuid.NewString()
			other.contexts = map[int]json.RawMessage{}
			f.must("OnCreate", f.create(value1))
			f.must("OnCreate other", other.create(value2))
			f.must("OnLock other", other.lock(bob))
			f.must("OnUpdate", f.update(2, value3, ""))
			f.must("OnDelete other", other.delete(bob))
			f.wantValue(1, value1)
			f.wantValue(2, value3)
			f.wantLockedBy("")
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.test(newFixture(t, h)) })
	}
}

func testErrors(t *testing.T, h Harness) {
	create := func(f *fixture) { f.must("OnCreate", f.create(value1)) }
	createLocked := func(f *fixture) {
		create(f)
		f.must("OnLock", f.lock(alice))
	}
	tests := []struct {
		name  string
		setup func(f *fixture) // nil: the instance does not exist
		op    func(f *fixture) error
		want  cairn.Code
	}{
		{"OnCreate of an existing instance", create,
			func(f *fixture) error { return f.create(value2) }, cairn.CodeAlreadyExists},
		{"OnUpdate of an unknown instance", nil,
			func(f *fixture) error { return f.update(2, value2, "") }, cairn.CodeNotFound},
		{"OnUpdate to an existing revision", create,
			func(f *fixture) error { return f.update(1, value2, "") }, cairn.CodeAlreadyExists},
		{"OnUpdate locked by another owner", createLocked,
			func(f *fixture) error { return f.update(2, value2, bob) }, cairn.CodeLocked},
		{"OnUpdate locked, without owner", createLocked,
			func(f *fixture) error { return f.update(2, value2, "") }, cairn.CodeLocked},
		{"OnDelete of an unknown instance", nil,
			func(f *fixture) error { return f.delete("") }, cairn.CodeNotFound},
		{"OnDelete locked by another owner", createLocked,
			func(f *fixture) error { return f.delete(bob) }, cairn.CodeLocked},
		{"OnDeleteRevision of an unknown instance", nil,
			func(f *fixture) error { return f.deleteRevision(1, "") }, cairn.CodeNotFound},
		{"OnDeleteRevision of an unknown revision", create,
			func(f *fixture) error { return f.deleteRevision(2, "") }, cairn.CodeNotFound},
		{"GetValue of an unknown instance", nil,
			func(f *fixture) error { _, err := f.get(1); return err }, cairn.CodeNotFound},
		{"GetValue of an unknown revision", create,
			func(f *fixture) error { _, err := f.get(2); return err }, cairn.CodeNotFound},
		{"GetLockedBy of an unknown instance", nil,
			func(f *fixture) error { _, err := f.lockedBy(); return err }, cairn.CodeNotFound},
		{"OnLock of an unknown instance", nil,
			func(f *fixture) error { return f.lock(alice) }, cairn.CodeNotFound},
		{"OnLock locked by another owner", createLocked,
			func(f *fixture) error { return f.lock(bob) }, cairn.CodeLocked},
		{"OnUnlock of an unknown instance", nil,
			func(f *fixture) error { return f.unlock() }, cairn.CodeNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, h)
			if tt.setup != nil {
				tt.setup(f)
			}
			err := tt.op(f)
			f.wantCode(tt.name, err, tt.want)
			if err != nil {
				assertNamesInstance(t, err, f.id)
			}
		})
	}

	// A refused write must change nothing.
	t.Run("refused writes leave the instance unchanged", func(t *testing.T) {
		f := newFixture(t, h)
		createLocked(f)
		f.wantCode("OnUpdate by another", f.update(2, value2, bob), cairn.CodeLocked)
		f.wantCode("OnDelete by another", f.delete(bob), cairn.CodeLocked)
		f.wantCode("OnLock by another", f.lock(bob), cairn.CodeLocked)
		f.wantCode("OnCreate again", f.create(value3), cairn.CodeAlreadyExists)
		f.wantValue(1, value1)
		_, err := f.get(2)
		f.wantCode("GetValue of the refused revision", err, cairn.CodeNotFound)
		f.wantLockedBy(alice)
	})
}

// assertNamesInstance checks that an error message names the instance, so a
// user reading it knows which one failed.
func assertNamesInstance(t *testing.T, err error, id string) {
	t.Helper()
	if msg := err.Error(); !strings.Contains(msg, id) {
		t.Errorf("error %q does not name instance %q", msg, id)
	}
}

func testRoundTrip(t *testing.T, h Harness) {
	values := []struct {
		name  string
		value string
	}{
		{"object", `{"host":"db.local","port":5432,"tls":true,"opts":{"pool":{"max":10}}}`},
		{"empty object", `{}`},
		{"array", `[1,"two",3.5,null,true,{"x":[]},[[]]]`},
		{"empty array", `[]`},
		{"string", `"hello"`},
		{"empty string", `""`},
		{"escapes", `"line\nbreak \"quoted\" back\\slash \t tab \u00e9"`},
		{"html", `{"html":"<a href=\"x\">&amp;</a>"}`},
		{"integer", `42`},
		{"negative fraction", `-0.5`},
		{"exponent", `1.5e-7`},
		{"large integer", `9007199254740991`},
		{"true", `true`},
		{"false", `false`},
		{"null", `null`},
		{"unicode", `{"名前":"日本語","ключ":"значение","emoji":"🎉","accent":"é"}`},
		{"whitespace", "{\n  \"a\" : [ 1 , 2 ]\n}"},
	}
	for _, tt := range values {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, h)
			v := json.RawMessage(tt.value)
			f.must("OnCreate", f.create(v))
			f.wantValue(1, v)
			f.must("OnUpdate", f.update(2, v, ""))
			f.wantValue(2, v)
		})
	}
}

// assertSameJSON compares two documents as decoded JSON, so that a backend
// may reformat what it stores.
func assertSameJSON(t *testing.T, got, want json.RawMessage) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("value %q is not valid JSON: %v", got, err)
	}
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatalf("expected value %q is not valid JSON: %v", want, err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("value = %s, want %s", got, want)
	}
}
