// Package builtin is the built-in storage backend: values kept in the
// metadata store's own value table.
//
// The hub does not call this Backend on its write path: the built-in backend
// is abstract, so the hub writes its values through the same table inside its
// own metadata transaction, making value and metadata commit together. This
// type exposes that storage through the cairn.Backend interface, so the
// built-in backend can be read and exercised like any other one and pass the
// same conformance suite (backend/backendtest).
//
// The built-in backend takes no context: contexts in requests are ignored.
package builtin

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/store"
)

// Backend implements cairn.Backend over a store's value table.
type Backend struct {
	st store.Store
}

var _ cairn.Backend = (*Backend)(nil)

// New returns the built-in backend over st.
func New(st store.Store) *Backend {
	return &Backend{st: st}
}

// null is the value stored for a nil value, so that "no value given" still
// creates resource version 1.
var null = json.RawMessage("null")

// GetPreCreateValue returns nil: the built-in backend has no context to
// derive a value from.
func (b *Backend) GetPreCreateValue(ctx context.Context, req cairn.GetPreCreateValueRequest) (json.RawMessage, error) {
	return nil, nil
}

// OnCreate stores resource version 1.
func (b *Backend) OnCreate(ctx context.Context, req cairn.OnCreateRequest) (json.RawMessage, error) {
	value := req.Value
	if value == nil {
		value = null
	}
	err := b.st.Update(ctx, func(ctx context.Context, tx store.Tx) error {
		has, err := tx.HasValues(ctx, req.InstanceID)
		if err != nil {
			return fmt.Errorf("builtin backend: create instance %q: %w", req.InstanceID, err)
		}
		if has {
			return cairn.Errorf(cairn.CodeAlreadyExists, "builtin backend: instance %q already exists", req.InstanceID)
		}
		if err := tx.PutValue(ctx, req.InstanceID, 1, value); err != nil {
			return fmt.Errorf("builtin backend: create instance %q: %w", req.InstanceID, err)
		}
		return nil
	})
	return nil, err
}

// OnUpdate stores req.NewResourceVersion.
func (b *Backend) OnUpdate(ctx context.Context, req cairn.OnUpdateRequest) (json.RawMessage, error) {
	value := req.NewValue
	if value == nil {
		value = null
	}
	err := b.st.Update(ctx, func(ctx context.Context, tx store.Tx) error {
		if err := checkUnlocked(ctx, tx, req.InstanceID, req.OwnerID, "update"); err != nil {
			return err
		}
		err := tx.PutValue(ctx, req.InstanceID, req.NewResourceVersion, value)
		if cairn.HasCode(err, cairn.CodeAlreadyExists) {
			return cairn.Errorf(cairn.CodeAlreadyExists,
				"builtin backend: instance %q already has resource version %d", req.InstanceID, req.NewResourceVersion)
		}
		if err != nil {
			return fmt.Errorf("builtin backend: update instance %q to resource version %d: %w",
				req.InstanceID, req.NewResourceVersion, err)
		}
		return nil
	})
	return nil, err
}

// OnDelete removes every resource version of an instance and its lock.
func (b *Backend) OnDelete(ctx context.Context, req cairn.OnDeleteRequest) error {
	return b.st.Update(ctx, func(ctx context.Context, tx store.Tx) error {
		if err := checkUnlocked(ctx, tx, req.InstanceID, req.OwnerID, "delete"); err != nil {
			return err
		}
		if err := tx.DeleteValues(ctx, req.InstanceID); err != nil {
			return fmt.Errorf("builtin backend: delete instance %q: %w", req.InstanceID, err)
		}
		if err := tx.SetValueLock(ctx, req.InstanceID, ""); err != nil {
			return fmt.Errorf("builtin backend: delete lock of instance %q: %w", req.InstanceID, err)
		}
		return nil
	})
}

// OnDeleteRevision removes one resource version.
func (b *Backend) OnDeleteRevision(ctx context.Context, req cairn.OnDeleteRevisionRequest) error {
	return b.st.Update(ctx, func(ctx context.Context, tx store.Tx) error {
		if err := mustExist(ctx, tx, req.InstanceID); err != nil {
			return err
		}
		err := tx.DeleteValue(ctx, req.InstanceID, req.ResourceVersion)
		if cairn.HasCode(err, cairn.CodeNotFound) {
			return revisionNotFound(req.InstanceID, req.ResourceVersion)
		}
		if err != nil {
			return fmt.Errorf("builtin backend: delete resource version %d of instance %q: %w",
				req.ResourceVersion, req.InstanceID, err)
		}
		return nil
	})
}

// GetValue returns the value of one resource version.
func (b *Backend) GetValue(ctx context.Context, req cairn.GetValueRequest) (json.RawMessage, error) {
	v, err := b.st.Value(ctx, req.InstanceID, req.ResourceVersion)
	if err == nil {
		return v, nil
	}
	if !cairn.HasCode(err, cairn.CodeNotFound) {
		return nil, fmt.Errorf("builtin backend: get resource version %d of instance %q: %w",
			req.ResourceVersion, req.InstanceID, err)
	}
	// Say which is missing, the instance or only the revision.
	if err := mustExist(ctx, b.st, req.InstanceID); err != nil {
		return nil, err
	}
	return nil, revisionNotFound(req.InstanceID, req.ResourceVersion)
}

// GetLockedBy returns the lock owner, "" when unlocked.
func (b *Backend) GetLockedBy(ctx context.Context, req cairn.GetLockedByRequest) (string, error) {
	if err := mustExist(ctx, b.st, req.InstanceID); err != nil {
		return "", err
	}
	owner, err := b.st.ValueLock(ctx, req.InstanceID)
	if err != nil {
		return "", fmt.Errorf("builtin backend: get lock of instance %q: %w", req.InstanceID, err)
	}
	return owner, nil
}

// OnLock records req.LockedBy as the lock owner. Locking again by the same
// owner succeeds.
func (b *Backend) OnLock(ctx context.Context, req cairn.OnLockRequest) error {
	if req.LockedBy == "" {
		// Recording "" would clear the lock instead.
		return cairn.Errorf(cairn.CodeInvalid, "builtin backend: lock instance %q: empty lock owner", req.InstanceID)
	}
	return b.st.Update(ctx, func(ctx context.Context, tx store.Tx) error {
		if err := checkUnlocked(ctx, tx, req.InstanceID, req.LockedBy, "lock"); err != nil {
			return err
		}
		if err := tx.SetValueLock(ctx, req.InstanceID, req.LockedBy); err != nil {
			return fmt.Errorf("builtin backend: lock instance %q: %w", req.InstanceID, err)
		}
		return nil
	})
}

// OnUnlock clears the lock, whoever holds it: the hub has checked the caller.
func (b *Backend) OnUnlock(ctx context.Context, req cairn.OnUnlockRequest) error {
	return b.st.Update(ctx, func(ctx context.Context, tx store.Tx) error {
		if err := mustExist(ctx, tx, req.InstanceID); err != nil {
			return err
		}
		if err := tx.SetValueLock(ctx, req.InstanceID, ""); err != nil {
			return fmt.Errorf("builtin backend: unlock instance %q: %w", req.InstanceID, err)
		}
		return nil
	})
}

// mustExist returns CodeNotFound unless the value table holds a value of id.
func mustExist(ctx context.Context, r store.Reader, id string) error {
	has, err := r.HasValues(ctx, id)
	if err != nil {
		return fmt.Errorf("builtin backend: look up instance %q: %w", id, err)
	}
	if !has {
		e := cairn.Errorf(cairn.CodeNotFound, "builtin backend: instance %q not found", id)
		e.IDs = []string{id}
		return e
	}
	return nil
}

// checkUnlocked returns CodeNotFound for an unknown instance and CodeLocked
// when the instance is locked by someone other than owner.
func checkUnlocked(ctx context.Context, r store.Reader, id, owner, op string) error {
	if err := mustExist(ctx, r, id); err != nil {
		return err
	}
	lockedBy, err := r.ValueLock(ctx, id)
	if err != nil {
		return fmt.Errorf("builtin backend: %s instance %q: get lock: %w", op, id, err)
	}
	if lockedBy != "" && lockedBy != owner {
		e := cairn.Errorf(cairn.CodeLocked, "builtin backend: cannot %s instance %q: locked by %q", op, id, lockedBy)
		e.IDs = []string{id}
		return e
	}
	return nil
}

func revisionNotFound(id string, rv int) error {
	e := cairn.Errorf(cairn.CodeNotFound, "builtin backend: resource version %d of instance %q not found", rv, id)
	e.IDs = []string{id}
	return e
}
