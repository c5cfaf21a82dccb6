package cairn

import (
	"context"
	"encoding/json"
)

// ResourceMeta is an instance's identity beyond its id: its Type, the Type's
// REST names and the instance's namespace, name and labels. The hub passes
// it in the Go context of OnCreate and OnUpdate to backends that implement
// ResourceNamer, so a backend that stores each instance as a named resource
// (the Git backend writes one file per resource, seed 003) learns what to
// call it without keeping an id→name map of its own. It stays in the
// process: the storage-backend gRPC protocol has no field for it.
type ResourceMeta struct {
	TypeRef TypeRef
	// Group, Version and Kind are empty when the Type is not registered or
	// declares no REST names.
	Group     string
	Version   string
	Kind      string
	Namespace string
	Name      string
	Labels    map[string]string
}

// ResourceNamer is implemented by backends that name what they store after
// the instance (ResourceMeta). The hub reads the instance's Type for them
// only, so other backends cost no extra store read.
type ResourceNamer interface {
	NamesResources() bool
}

type resourceMetaKey struct{}

// WithResourceMeta returns a context carrying m to a backend call.
func WithResourceMeta(ctx context.Context, m ResourceMeta) context.Context {
	return context.WithValue(ctx, resourceMetaKey{}, m)
}

// ResourceMetaFrom returns the ResourceMeta ctx carries, if any.
func ResourceMetaFrom(ctx context.Context) (ResourceMeta, bool) {
	m, ok := ctx.Value(resourceMetaKey{}).(ResourceMeta)
	return m, ok
}

// BatchWrite is one write of a batch: exactly one of Create, Update and
// Delete is set. Meta is the instance's identity for a backend that names
// what it stores after the instance (ResourceNamer); it replaces the
// per-call context value (WithResourceMeta).
type BatchWrite struct {
	Meta   *ResourceMeta
	Create *OnCreateRequest
	Update *OnUpdateRequest
	Delete *OnDeleteRequest
}

// BatchResult is what a backend stored for a batch.
type BatchResult struct {
	// Contexts holds, in the order of the writes, the new context of
	// every create and update (nil for deletes and when the context is
	// unchanged).
	Contexts []json.RawMessage
	// Token names the stored batch for UndoBatch (a Git backend: the
	// commit, or the pull request in propose mode); empty when the batch
	// changed nothing the backend could name.
	Token string
}

// BatchWriter is implemented by a backend that can store several writes,
// creates, updates and deletes mixed, as one unit: a Git backend makes one
// commit of them (one pull request in propose mode). The hub hands such a
// backend its whole share of a request (a create, update or delete of
// several instances, or a stack reconcile's changes) as one batch.
//
// OnBatch is all or nothing: when it fails, none of the writes is stored.
// UndoBatch takes back a batch OnBatch stored, as one unit, when something
// after it failed (another backend, or the hub's store transaction): what
// the batch created is gone again, what it updated is back to the
// previous version and what it deleted is back. It leaves alone what
// someone else changed since.
type BatchWriter interface {
	OnBatch(ctx context.Context, writes []BatchWrite) (BatchResult, error)
	UndoBatch(ctx context.Context, writes []BatchWrite, stored BatchResult) error
}

// DeleteDeferrer is implemented by a BatchWriter whose deletes, in some
// calls, cannot be taken back once done: a Git backend recording the
// import of files a person removed (the removal is theirs, not the
// backend's to restore). For a call where DefersDeletes says so, the hub
// sends the deletes of its share after its own transaction committed, as
// it does for a backend without batches, but still as one OnBatch (one
// commit); their intents make recovery finish them should that fail.
type DeleteDeferrer interface {
	DefersDeletes(ctx context.Context) bool
}

// DeleteRestorer is implemented by a BatchWriter, whose deletes the hub
// sends with their batch before its own transaction commits. When the
// process stops between the two, the backend has deleted a value whose
// instance the hub still holds; recovery finds the delete's intent and
// calls RestoreDeleted to bring the value back: the version req.Context
// names, as it was stored. A value the backend holds (the batch never got
// there) is left alone.
type DeleteRestorer interface {
	RestoreDeleted(ctx context.Context, req OnDeleteRequest) error
}

// RecoveryWrite is one interrupted write recovery finishes in a backend:
// exactly one of UndoCreate (a create the hub never committed, as OnDelete
// under WithRollback takes it back), UndoUpdate (an update it never
// committed, as OnDeleteRevision under WithRollback) and Delete (a delete
// the hub committed whose value the backend may still hold) is set.
type RecoveryWrite struct {
	UndoCreate *OnDeleteRequest
	UndoUpdate *OnDeleteRevisionRequest
	Delete     *OnDeleteRequest
}

// BatchRecoverer is implemented by a backend that finishes several
// interrupted writes as one unit: recovery hands it every due write of one
// pass at once rather than one call each, so a failed batch of 1,000
// writes (a Git backend: one commit) is finished the way it was made (one
// commit, one push), not with 1,000. It is all or nothing: on an error
// recovery tries each write alone, as for any backend, unless the backend
// is unavailable.
type BatchRecoverer interface {
	RecoverBatch(ctx context.Context, writes []RecoveryWrite) error
}
