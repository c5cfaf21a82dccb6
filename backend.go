package cairn

import (
	"context"
	"encoding/json"
)

// Backend is where instance values (and a copy of their lock) live. It mirrors
// the storage-backend gRPC protocol (Capact's storage_backend services) one
// method per RPC, so the built-in backend, the gRPC adapter and any future
// driver are interchangeable and pass the same conformance suite
// (backend/backendtest).
//
// Values and contexts cross it as JSON documents; nil means "not given".
// Implementations report errors with this package's codes: CodeNotFound for an
// unknown instance or revision, CodeAlreadyExists when a revision already
// exists, CodeLocked when the instance is locked by another owner.
type Backend interface {
	// GetPreCreateValue lets a context-only backend produce the initial value
	// from a context before the instance exists. It may return nil.
	GetPreCreateValue(ctx context.Context, req GetPreCreateValueRequest) (json.RawMessage, error)
	// OnCreate stores resource version 1 and may return a new context.
	OnCreate(ctx context.Context, req OnCreateRequest) (json.RawMessage, error)
	// OnUpdate stores a new resource version and may return a new context.
	OnUpdate(ctx context.Context, req OnUpdateRequest) (json.RawMessage, error)
	// OnDelete removes every resource version of an instance.
	OnDelete(ctx context.Context, req OnDeleteRequest) error
	// OnDeleteRevision removes one resource version (used to roll back an update).
	OnDeleteRevision(ctx context.Context, req OnDeleteRevisionRequest) error
	// GetValue returns the value of one resource version.
	GetValue(ctx context.Context, req GetValueRequest) (json.RawMessage, error)
	// GetLockedBy returns the lock owner, "" when unlocked.
	GetLockedBy(ctx context.Context, req GetLockedByRequest) (string, error)
	// OnLock records a lock owner.
	OnLock(ctx context.Context, req OnLockRequest) error
	// OnUnlock clears the lock.
	OnUnlock(ctx context.Context, req OnUnlockRequest) error
}

// GetPreCreateValueRequest asks a context-only backend for an initial value.
type GetPreCreateValueRequest struct {
	Context json.RawMessage
}

// OnCreateRequest carries resource version 1. Value is nil for backends that
// do not accept values.
type OnCreateRequest struct {
	InstanceID string
	Value      json.RawMessage
	Context    json.RawMessage
}

// OnUpdateRequest carries a new resource version. OwnerID is the lock owner
// the caller presented, "" if none.
type OnUpdateRequest struct {
	InstanceID         string
	NewResourceVersion int
	NewValue           json.RawMessage
	Context            json.RawMessage
	OwnerID            string
}

// OnDeleteRequest removes an instance from the backend.
type OnDeleteRequest struct {
	InstanceID string
	Context    json.RawMessage
	OwnerID    string
}

// OnDeleteRevisionRequest removes one resource version.
type OnDeleteRevisionRequest struct {
	InstanceID      string
	ResourceVersion int
	Context         json.RawMessage
	OwnerID         string
}

// GetValueRequest reads one resource version's value.
type GetValueRequest struct {
	InstanceID      string
	ResourceVersion int
	Context         json.RawMessage
}

// GetLockedByRequest reads the lock owner.
type GetLockedByRequest struct {
	InstanceID string
	Context    json.RawMessage
}

// OnLockRequest records that LockedBy holds the lock.
type OnLockRequest struct {
	InstanceID string
	Context    json.RawMessage
	LockedBy   string
}

// OnUnlockRequest clears the lock.
type OnUnlockRequest struct {
	InstanceID string
	Context    json.RawMessage
}

type rollbackKey struct{}

// WithRollback marks the backend calls made with ctx as taking back a
// write the hub never committed: its rollback after a failed transaction,
// or recovery undoing an interrupted write. OnDelete then undoes a create
// and OnDeleteRevision an update, rather than deleting what the hub holds.
// A backend recording values it did not write (a Git backend importing a
// file someone pushed) takes back only its own record of them.
func WithRollback(ctx context.Context) context.Context {
	return context.WithValue(ctx, rollbackKey{}, true)
}

// IsRollback says whether ctx is a rollback's (WithRollback).
func IsRollback(ctx context.Context) bool {
	v, _ := ctx.Value(rollbackKey{}).(bool)
	return v
}

type actorKey struct{}

// actor is who a request acts as and, when that identity was impersonated,
// who authenticated.
type actor struct{ name, impersonator string }

// WithActor returns a context that carries the caller's identity from a
// façade to the hub, which records it (createdBy, lock owner, the Cairn-Actor
// trailer of a Git commit). It replaces an impersonator ctx carried: the
// actor now acts as itself (a controller, a sync).
func WithActor(ctx context.Context, name string) context.Context {
	return context.WithValue(ctx, actorKey{}, &actor{name: name})
}

// actorFrom returns the actor ctx carries (as *actor: WithActor's and
// WithUser's), the zero actor when none.
func actorFrom(ctx context.Context) actor {
	if a, ok := ctx.Value(actorKey{}).(*actor); ok {
		return *a
	}
	return actor{}
}

// Actor returns the caller's identity carried by ctx, "" when unknown.
func Actor(ctx context.Context) string {
	return actorFrom(ctx).name
}

// Impersonator returns the authenticated user who acts as Actor(ctx)
// (Impersonate-User, kubectl --as), "" when the actor acts as itself.
// Backends that record who changed what record both (the Git backend's
// Cairn-Impersonator trailer).
func Impersonator(ctx context.Context) string {
	return actorFrom(ctx).impersonator
}
