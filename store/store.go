// Package store defines the metadata store: the persistence of Types,
// instances, resource versions, relations and locks, plus the value table of
// the built-in (abstract) backend. Implementations live in subpackages
// (store/sqlite, store/postgres) and must pass the contract suite in
// store/storetest unchanged.
//
// The store enforces integrity (uniqueness, foreign keys, gapless resource
// versions) but no business rules: those live in package hub, which runs them
// inside Update transactions.
package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/labels"
)

// Store is a metadata store.
type Store interface {
	Reader
	// Update runs fn in one write transaction. It commits when fn returns nil
	// and rolls back otherwise, returning fn's error unchanged. Writes made
	// through tx are visible to reads through tx. Implementations serialize
	// conflicting transactions (SQLite: one writer; PostgreSQL: row locks,
	// see Tx.GetInstances) and may retry fn on a serialization failure, so fn
	// must not have side effects outside tx.
	Update(ctx context.Context, fn func(ctx context.Context, tx Tx) error) error
	// Close releases the store's resources.
	Close() error
}

// AfterCommitter is a Tx that runs a function of its caller once it has
// committed: on SQLite, right after the commit of the group of writes it
// belongs to, before the other writers of the group are woken and before
// the writer leaves the commit's change-log position for LastSeq. What a
// caller tells others of its commit there is told before most readers
// learn of the commit.
type AfterCommitter interface {
	// AfterCommit has fn run once the transaction has committed, never
	// when it does not commit (a refused write, a rolled-back group). It
	// returns false when it cannot (fn is then never run).
	AfterCommit(fn func()) bool
}

// TypeMatcher is a Tx that checks a Type revision against parts of it
// the caller kept, without reading the Type whole: a create that checked
// its value against a Type read earlier pins the Type in its transaction
// and proves the check still holds in one small query.
type TypeMatcher interface {
	// TypeMatches reports whether Type ref is registered with jsonSchema
	// (byte for byte, as GetType returns it; nil: none) and with Names set
	// or not as named says. Like GetType through the Tx, it keeps the
	// revision from being deleted until the transaction ends. A wrapper
	// over a Tx without TypeMatcher fails with errors.ErrUnsupported; the
	// caller then reads the Type.
	TypeMatches(ctx context.Context, ref cairn.TypeRef, jsonSchema json.RawMessage, named bool) (bool, error)
}

// Reader reads committed state (or, through a Tx, the transaction's state).
type Reader interface {
	// GetType returns one Type revision; CodeNotFound when absent. Through
	// a Tx it keeps the revision from being deleted by another transaction
	// until this one ends.
	GetType(ctx context.Context, ref cairn.TypeRef) (cairn.Type, error)
	// ListTypes returns Types sorted by path ascending, revision descending.
	ListTypes(ctx context.Context, f TypeFilter) ([]cairn.Type, error)
	// GetInstances returns the instances with the given ids that exist, in
	// the order of ids; ids that do not exist are left out. Through a Tx the
	// returned rows stay locked against other writers until the transaction
	// ends.
	GetInstances(ctx context.Context, ids []string) ([]cairn.Instance, error)
	// GetInstancesBrief is GetInstances without relations: Uses and UsedBy
	// are nil. Its cost does not grow with the number of users, which
	// matters for backends every instance uses. Through a Tx it locks the
	// rows as GetInstances does.
	GetInstancesBrief(ctx context.Context, ids []string) ([]cairn.Instance, error)
	// GetInstanceByName returns the instance of a Type path with the given
	// namespace and name; CodeNotFound when absent.
	GetInstanceByName(ctx context.Context, typePath, namespace, name string) (cairn.Instance, error)
	// ListInstances returns the instances matching f in f.Order: by
	// default sorted by type path ascending, revision descending, createdAt
	// descending, id ascending.
	ListInstances(ctx context.Context, f InstanceFilter) ([]cairn.Instance, error)
	// CountInstances counts the instances of one Type revision.
	CountInstances(ctx context.Context, ref cairn.TypeRef) (int, error)
	// ResourceVersions returns every resource version of an instance in
	// ascending order, without values; CodeNotFound for an unknown instance.
	ResourceVersions(ctx context.Context, id string) ([]cairn.ResourceVersion, error)
	// ResourceVersionsOf returns every resource version of each instance
	// (ascending, without values) in one query, for lists that show
	// history; instances that do not exist are absent from the map.
	ResourceVersionsOf(ctx context.Context, ids []string) (map[string][]cairn.ResourceVersion, error)
	// ResourceVersion returns one resource version without its value;
	// CodeNotFound when the instance or the revision is absent.
	ResourceVersion(ctx context.Context, id string, rv int) (cairn.ResourceVersion, error)
	// Value returns a value kept in the built-in value table; CodeNotFound
	// when absent.
	Value(ctx context.Context, id string, rv int) (json.RawMessage, error)
	// Values reads many values of the built-in value table in one query,
	// in the order of keys; CodeNotFound naming the first missing key.
	Values(ctx context.Context, keys []ValueKey) ([]json.RawMessage, error)
	// HasValues reports whether the built-in value table holds any value of id.
	HasValues(ctx context.Context, id string) (bool, error)
	// Changes returns up to limit changes with Seq > after, oldest first.
	// CodeGone when changes after that position were already pruned.
	Changes(ctx context.Context, after int64, limit int) ([]Change, error)
	// LastSeq returns the Seq of the newest change, 0 when there is none.
	// Through a Tx it includes the transaction's own changes: right after
	// a write that logged a change, it is that change's Seq.
	LastSeq(ctx context.Context) (int64, error)
	// ValueLock returns the lock owner recorded in the built-in value table's
	// lock records, "" when none.
	ValueLock(ctx context.Context, id string) (string, error)
	// Intents returns the recorded intents whose NextAttempt is not after
	// due, oldest first.
	Intents(ctx context.Context, due time.Time) ([]Intent, error)
}

// Tx is one write transaction.
type Tx interface {
	Reader
	// CreateType inserts a Type; CodeAlreadyExists when the revision exists.
	CreateType(ctx context.Context, t cairn.Type) error
	// DeleteType removes a Type revision; CodeNotFound when absent,
	// CodeUsedBy while instances of it exist, counting those of
	// transactions that commit while it waits: the database decides, so a
	// create racing the delete either keeps the Type or sees it gone.
	DeleteType(ctx context.Context, ref cairn.TypeRef) error
	// CreateInstance inserts an instance with its first resource version
	// (inst.Latest), labels, attributes, status and managed fields. Uses and
	// UsedBy are ignored.
	// CodeAlreadyExists when the id, or the (type path, namespace, name)
	// triple, is taken; the message names which.
	CreateInstance(ctx context.Context, inst cairn.Instance) error
	// AddUses records that instance from uses instance to. CodeNotFound when
	// either end does not exist; adding an existing edge is a no-op.
	// An instance uses its backend (Backend.ID) without AddUses when that
	// backend is another instance: Uses, UsedBy and DeleteInstance's
	// CodeUsedBy count that edge as any other, for as long as the instance
	// is there. AddUses of it checks both ends as for any edge (and, where
	// writers run at once, keeps them from being deleted until the
	// transaction ends), but writes and logs nothing.
	AddUses(ctx context.Context, from, to string) error
	// AddResourceVersion appends a resource version, which must be exactly
	// the latest + 1 (CodeConflict otherwise), and makes it the latest.
	AddResourceVersion(ctx context.Context, id string, rv cairn.ResourceVersion) error
	// SetMetadata replaces an instance's labels and annotations.
	SetMetadata(ctx context.Context, id string, labels, annotations map[string]string) error
	// SetStatus replaces an instance's status (nil clears it). The status is
	// what controllers observe and report (conditions, outputs); it is not
	// versioned, as the Kubernetes status subresource is not, but the change
	// is logged. CodeNotFound when the instance is absent.
	SetStatus(ctx context.Context, id string, status json.RawMessage) error
	// SetManagedFields replaces the server-side apply field ownership of an
	// instance (nil clears it); the change is logged. CodeNotFound when the
	// instance is absent.
	SetManagedFields(ctx context.Context, id string, fields json.RawMessage) error
	// RemoveUses deletes the edge from -> to; a missing edge, and the edge
	// to from's own backend (see AddUses), are no-ops.
	RemoveUses(ctx context.Context, from, to string) error
	// SetLockedBy sets (owner != "") or clears (owner == "") the lock of
	// every id. CodeNotFound naming the missing ids, changing nothing, when
	// any id does not exist.
	SetLockedBy(ctx context.Context, ids []string, owner string) error
	// DeleteInstance removes an instance, its resource versions, labels,
	// attributes and outgoing uses edges. CodeNotFound when absent;
	// CodeUsedBy (IDs = the users) while other instances use it.
	DeleteInstance(ctx context.Context, id string) error
	// PutValue stores a value in the built-in value table; CodeAlreadyExists
	// when (id, rv) is taken.
	PutValue(ctx context.Context, id string, rv int, value json.RawMessage) error
	// DeleteValues removes every value of id; CodeNotFound when there is none.
	DeleteValues(ctx context.Context, id string) error
	// DeleteValue removes one value; CodeNotFound when absent.
	DeleteValue(ctx context.Context, id string, rv int) error
	// PruneChanges forgets the changes with Seq <= through; Changes with an
	// earlier position then fails with CodeGone.
	PruneChanges(ctx context.Context, through int64) error
	// SetValueLock records (owner != "") or clears a lock in the built-in
	// value table's lock records.
	SetValueLock(ctx context.Context, id string, owner string) error
	// PutIntent records an intent; CodeAlreadyExists when one for the same
	// instance and resource version is recorded, so two writers cannot
	// both be on the way to the same version.
	PutIntent(ctx context.Context, in Intent) error
	// DeleteIntent forgets the intent of (instance, resource version); a
	// missing one is a no-op.
	DeleteIntent(ctx context.Context, instanceID string, rv int) error
	// RetryIntent records a failed attempt to finish an intent: Attempts
	// grows by one, LastError and NextAttempt are set. CodeNotFound when
	// the intent is gone.
	RetryIntent(ctx context.Context, instanceID string, rv int, lastError string, next time.Time) error
}

// IntentOp is the write an intent announces.
type IntentOp string

const (
	IntentCreate IntentOp = "create" // a new instance's first value
	IntentUpdate IntentOp = "update" // a new resource version's value
	// IntentDelete is a deleted instance's value, which the backend is
	// asked to delete once the store committed the delete.
	IntentDelete IntentOp = "delete"
	// IntentBatchDelete is a deleted instance's value sent to a
	// cairn.BatchWriter with its batch, before the store commits: should
	// the commit never come, the backend has to put the value back.
	IntentBatchDelete IntentOp = "batch-delete"
)

// Intent is an entry of the intent journal: a write to an external backend
// recorded before the backend is called and forgotten once the write
// committed or was rolled back. One left behind is the trace of a process
// that died in between; recovery (hub.Recover) finishes it.
type Intent struct {
	InstanceID      string
	ResourceVersion int
	BackendID       string
	Op              IntentOp
	// Context is the backend context sent with the write, which the undo
	// sends too.
	Context json.RawMessage
	// OwnerID is the lock owner a delete is sent for (the instance's lock
	// is gone from the store with the instance; a backend keeping its own
	// lock records checks it).
	OwnerID   string
	CreatedAt time.Time
	// Attempts, LastError and NextAttempt follow recovery's retries.
	Attempts    int
	LastError   string
	NextAttempt time.Time
}

// Snapshotter is a store that reads its whole content in one consistent
// snapshot while writers go on, which is what an online backup needs.
type Snapshotter interface {
	// Snapshot runs fn with a Reader whose reads all see the same committed
	// state; the snapshot is released when fn returns.
	Snapshot(ctx context.Context, fn func(ctx context.Context, r Reader) error) error
}

// RestoreTx is a Tx that can also do what only a restore from backup does:
// empty the store and put change-log positions back. Update's Tx
// implements it on the stores that support restores.
type RestoreTx interface {
	Tx
	// Clear deletes every Type, instance, resource version, relation,
	// built-in value, value lock, change and intent; the schema stays.
	Clear(ctx context.Context) error
	// SetSeq stamps an instance with the Seq of its last change (its
	// resourceVersion on the REST surface).
	SetSeq(ctx context.Context, id string, seq int64) error
	// RestartChangeLog empties the change log and starts it after through:
	// LastSeq returns through, the next change gets a higher Seq, and
	// Changes after an earlier position fails with CodeGone.
	RestartChangeLog(ctx context.Context, through int64) error
}

// TypeFilter selects Types. Empty fields match everything.
type TypeFilter struct {
	// PathPrefix matches Types whose path equals it or starts with it
	// followed by a dot. A trailing ".*" is accepted and ignored.
	PathPrefix string
	// Parent matches Types listing it in additionalRefs.
	Parent string
	// Group and Version match the REST group and version.
	Group   string
	Version string
}

// InstanceFilter selects instances. Empty fields match everything.
type InstanceFilter struct {
	// TypePath matches the type path exactly, unless it ends in ".*", which
	// makes it a prefix pattern ("cap.type.aws.*" matches cap.type.aws.x.y).
	TypePath     string
	TypeRevision string
	// Attributes filter on the latest resource version's attributes.
	Attributes []AttributeFilter
	// CreatedBy matches the latest resource version's createdBy.
	CreatedBy string
	Namespace string
	Name      string
	// ID matches the one instance of that id.
	ID string
	// Labels must all match.
	Labels []labels.Requirement
	// BackendID matches instances stored in that backend.
	BackendID string
	// Limit caps the number of instances returned; 0 means no limit.
	Limit int
	// After continues a limited list: only instances sorting after this
	// one (in the list order) are returned. Pass the last instance of the
	// previous page; only the fields Order sorts by are read.
	After *cairn.Instance
	// Order is the order of the list, and of After.
	Order InstanceOrder
}

// InstanceOrder is the order of a list of instances. Every order is total
// and sorts by fields an instance never changes, so paging with After
// neither skips nor repeats an instance that exists throughout, whatever
// is created or deleted between pages.
type InstanceOrder int

const (
	// ByType is the store's own order, GraphQL's: type path ascending,
	// revision descending, createdAt descending, id ascending.
	ByType InstanceOrder = iota
	// ByName is the Kubernetes API server's key order, the REST lists of
	// a kind: namespace, then name, then type path ascending (bytewise).
	// Namespace and name are unique within a type path, so a page of one
	// type path's list is a range of its (type path, namespace, name) key.
	ByName
	// ByID is id ascending (bytewise): the REST list of typeinstances,
	// whose metadata.name is the id.
	ByID
)

// ValueKey names one resource version's value in the built-in value table.
type ValueKey struct {
	InstanceID      string
	ResourceVersion int
}

// ChangeKind says what happened to an instance.
type ChangeKind string

const (
	Added    ChangeKind = "ADDED"
	Modified ChangeKind = "MODIFIED"
	Deleted  ChangeKind = "DELETED"
)

// Change is one entry of the store's change log, written in the same
// transaction as the change itself. Every write transaction that creates,
// versions, relabels, locks or deletes an instance appends one per instance.
type Change struct {
	Seq        int64
	Kind       ChangeKind
	InstanceID string
	TypeRef    cairn.TypeRef
	Namespace  string
	Name       string
	At         time.Time
}

// AttributeFilter includes (or excludes) instances whose latest resource
// version has the attribute, at Revision when it is set.
type AttributeFilter struct {
	Path     string
	Revision string
	Exclude  bool
}

// extrasSetter writes the parts of an instance row that CreateInstance
// leaves to separate statements.
type extrasSetter interface {
	SetStatus(ctx context.Context, id string, status json.RawMessage) error
	SetManagedFields(ctx context.Context, id string, fields json.RawMessage) error
}

// Taken is the error for creating in when another instance, takenID at
// path/namespace/name, already has its id or its name.
func Taken(in cairn.Instance, takenID, path, namespace, name string) error {
	if takenID == in.ID {
		return &cairn.Error{Code: cairn.CodeAlreadyExists, Msg: fmt.Sprintf("instance %q already exists", in.ID), IDs: []string{in.ID}}
	}
	return &cairn.Error{
		Code: cairn.CodeAlreadyExists,
		Msg:  fmt.Sprintf("instance %q already exists", path+"/"+namespace+"/"+name),
		IDs:  []string{takenID},
	}
}

// SetCreatedExtras writes a new instance's status and managed fields when it
// has them; stores call it at the end of CreateInstance so that the hub
// creates an instance with them in one call.
func SetCreatedExtras(ctx context.Context, tx extrasSetter, in cairn.Instance) error {
	if len(in.Status) > 0 {
		if err := tx.SetStatus(ctx, in.ID, in.Status); err != nil {
			return err
		}
	}
	if len(in.ManagedFields) > 0 {
		return tx.SetManagedFields(ctx, in.ID, in.ManagedFields)
	}
	return nil
}
