package grpc_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/cairn-dev/cairn"
	grpcbackend "github.com/cairn-dev/cairn/backend/grpc"
	"github.com/cairn-dev/cairn/sdk/storagebackend"
)

// answering is a backend whose every answer is the bytes it is given: the
// fuzzer plays a backend that answers anything at all.
type answering struct {
	mu     sync.Mutex
	answer []byte
}

func (a *answering) get() json.RawMessage {
	a.mu.Lock()
	defer a.mu.Unlock()
	return json.RawMessage(a.answer)
}

func (a *answering) GetValue(context.Context, cairn.GetValueRequest) (json.RawMessage, error) {
	return a.get(), nil
}
func (a *answering) OnCreate(context.Context, cairn.OnCreateRequest) (json.RawMessage, error) {
	return a.get(), nil
}
func (a *answering) OnUpdate(context.Context, cairn.OnUpdateRequest) (json.RawMessage, error) {
	return a.get(), nil
}
func (a *answering) OnDelete(context.Context, cairn.OnDeleteRequest) error { return nil }
func (a *answering) OnDeleteRevision(context.Context, cairn.OnDeleteRevisionRequest) error {
	return nil
}
func (a *answering) GetLockedBy(context.Context, cairn.GetLockedByRequest) (string, error) {
	return string(a.get()), nil
}
func (a *answering) OnLock(context.Context, cairn.OnLockRequest) error     { return nil }
func (a *answering) OnUnlock(context.Context, cairn.OnUnlockRequest) error { return nil }

// FuzzBackendAnswers serves arbitrary answers over real gRPC on loopback:
// the adapter must return either an error or a JSON document, never bytes
// a REST or GraphQL encoder would choke on, and never hang.
func FuzzBackendAnswers(f *testing.F) {
	for _, s := range []string{`{"a":1}`, `null`, `"s"`, ``, `{`, "\xff", `[1,2`, `{"a":1} x`, `1e999`, ` {} `} {
		f.Add([]byte(s))
	}
	a := &answering{}
	s := serve(f, a, true, storagebackend.Options{})
	b := open(f, opener(f, grpcbackend.Config{Timeout: 5 * time.Second, ReadAttempts: 1}), storage("grpc://"+s.addr, true))
	id := "00000000-0000-4000-8000-000000000001"
	f.Fuzz(func(t *testing.T, answer []byte) {
		a.mu.Lock()
		a.answer = answer
		a.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		check := func(op string, doc json.RawMessage, err error) {
			if err != nil {
				if ctx.Err() != nil {
					t.Fatalf("%s hung: %v", op, err)
				}
				if !cairn.HasCode(err, cairn.CodeInternal) {
					t.Errorf("%s: error %v, want code Internal", op, err)
				}
				return
			}
			if doc != nil && !json.Valid(doc) {
				t.Errorf("%s returned %q, not JSON", op, doc)
			}
		}
		v, err := b.GetValue(ctx, cairn.GetValueRequest{InstanceID: id, ResourceVersion: 1})
		check("GetValue", v, err)
		c, err := b.OnCreate(ctx, cairn.OnCreateRequest{InstanceID: id, Value: json.RawMessage(`{}`)})
		check("OnCreate", c, err)
		u, err := b.OnUpdate(ctx, cairn.OnUpdateRequest{InstanceID: id, NewResourceVersion: 2, NewValue: json.RawMessage(`{}`)})
		check("OnUpdate", u, err)
	})
}
