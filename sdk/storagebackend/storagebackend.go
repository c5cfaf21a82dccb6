// Package storagebackend is a small framework for writing cairn storage
// backends in Go. Implement ValueBackend (the backend stores the values it is
// given) or ContextBackend (it derives values from a context, like a Helm
// release backend), and get a gRPC server that speaks the storage_backend
// protocol (proto/storage_backend.proto, Capact-compatible), with
// grpc.health.v1 health checking, graceful shutdown and structured logging.
//
// Methods take the same request types as cairn.Backend, so anything that
// implements cairn.Backend can be served as it is. Report errors with
// cairn's codes (cairn.Errorf(cairn.CodeNotFound, ...)); the server turns
// them into the gRPC codes the protocol prescribes: NotFound, AlreadyExists,
// FailedPrecondition (locked) and InvalidArgument.
//
// The server logs every call's method, instance, resource version, outcome
// and duration, never a value or a context: they may hold secrets.
package storagebackend

import (
	"context"
	"encoding/json"

	"github.com/cairn-dev/cairn"
)

// ValueBackend is a backend that stores the values it is given: it serves
// the ValueAndContextStorageBackend service and is registered with
// acceptValue true. Contexts are optional for it.
type ValueBackend interface {
	// GetValue returns the value of one resource version; nil if it has none.
	GetValue(ctx context.Context, req cairn.GetValueRequest) (json.RawMessage, error)
	// OnCreate stores resource version 1 and may return a new context (nil
	// keeps the one given).
	OnCreate(ctx context.Context, req cairn.OnCreateRequest) (json.RawMessage, error)
	// OnUpdate stores a new resource version and may return a new context.
	// It must refuse (cairn.CodeAlreadyExists) a revision that exists, and
	// (cairn.CodeLocked) an instance locked by someone other than OwnerID.
	OnUpdate(ctx context.Context, req cairn.OnUpdateRequest) (json.RawMessage, error)
	// OnDelete removes every resource version and the lock.
	OnDelete(ctx context.Context, req cairn.OnDeleteRequest) error
	// OnDeleteRevision removes one resource version; the hub calls it to
	// roll back an update whose metadata did not commit.
	OnDeleteRevision(ctx context.Context, req cairn.OnDeleteRevisionRequest) error
	// GetLockedBy returns the lock owner, "" when unlocked.
	GetLockedBy(ctx context.Context, req cairn.GetLockedByRequest) (string, error)
	// OnLock records the lock owner; locking again by the same owner succeeds.
	OnLock(ctx context.Context, req cairn.OnLockRequest) error
	// OnUnlock clears the lock.
	OnUnlock(ctx context.Context, req cairn.OnUnlockRequest) error
}

// ContextBackend is a backend that takes only a context and derives the
// value from it: it serves the ContextStorageBackend service and is
// registered with acceptValue false and a context schema. Value fields of
// its requests are always nil.
type ContextBackend interface {
	ValueBackend
	// GetPreCreateValue returns the value an instance created with this
	// context would have (nil for none), before the instance exists.
	GetPreCreateValue(ctx context.Context, req cairn.GetPreCreateValueRequest) (json.RawMessage, error)
}
