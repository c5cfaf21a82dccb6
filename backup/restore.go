package backup

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/store"
)

// RestoreOptions configures Restore.
type RestoreOptions struct {
	// Force replaces the content of a store that is not empty. Without it
	// Restore refuses such a store and changes nothing.
	Force bool
	// Bump is how far beyond the larger of the backup's and the target's
	// change-log positions the restored change log starts; 0 means
	// DefaultBump.
	Bump int64
	// BuiltinType is the target's built-in backend Type
	// (cap.core.type.hub.storage.<store kind>, hub.BuiltinTypeRef). When
	// set, a built-in backend restored from another kind of store takes
	// it instead of the Type naming the store it was backed up from.
	BuiltinType cairn.TypeRef
	// LeaseType is the Type path of leases, whose status says which server
	// of the backed-up store held them. They are restored released (no
	// status): held, they would keep the restored store's own servers
	// from taking them until they expired.
	LeaseType string
}

// Restore checks the whole backup in r (as Verify does), then loads it into
// st in one transaction: a damaged file, a non-empty store without Force,
// or any failure on the way leaves st as it was.
func Restore(ctx context.Context, st store.Store, r io.ReadSeeker, opts RestoreOptions) (Summary, error) {
	if _, err := r.Seek(0, io.SeekStart); err != nil {
		return Summary{}, fmt.Errorf("rewind the backup file: %w", err)
	}
	sum, err := Verify(r)
	if err != nil {
		return Summary{}, err
	}
	bump := opts.Bump
	if bump <= 0 {
		bump = DefaultBump
	}
	err = st.Update(ctx, func(ctx context.Context, tx store.Tx) error {
		rt, ok := tx.(store.RestoreTx)
		if !ok {
			return cairn.Errorf(cairn.CodeInvalid, "this store does not support restores")
		}
		// Update may run this more than once (PostgreSQL retries a
		// serialization failure): read the file from its start each time.
		if _, err := r.Seek(0, io.SeekStart); err != nil {
			return fmt.Errorf("rewind the backup file: %w", err)
		}
		target, err := rt.LastSeq(ctx)
		if err != nil {
			return fmt.Errorf("read the target's change-log position: %w", err)
		}
		if err := checkEmpty(ctx, rt, opts.Force); err != nil {
			return err
		}
		if err := rt.Clear(ctx); err != nil {
			return fmt.Errorf("empty the target: %w", err)
		}
		if err := load(ctx, rt, r, opts); err != nil {
			return err
		}
		sum.RestartedAt = max(sum.Position, target) + bump
		if err := rt.RestartChangeLog(ctx, sum.RestartedAt); err != nil {
			return err
		}
		return nil
	})
	if err != nil {
		return Summary{}, err
	}
	return sum, nil
}

// checkEmpty refuses a store holding any Type or instance unless force.
func checkEmpty(ctx context.Context, r store.Reader, force bool) error {
	if force {
		return nil
	}
	types, err := r.ListTypes(ctx, store.TypeFilter{})
	if err != nil {
		return fmt.Errorf("list the target's Types: %w", err)
	}
	insts, err := r.ListInstances(ctx, store.InstanceFilter{Limit: 1})
	if err != nil {
		return fmt.Errorf("list the target's instances: %w", err)
	}
	if len(types) == 0 && len(insts) == 0 {
		return nil
	}
	var what []string
	if len(types) > 0 {
		what = append(what, fmt.Sprintf("%d Types", len(types)))
	}
	if len(insts) > 0 {
		what = append(what, "instances")
	}
	return cairn.Errorf(cairn.CodeAlreadyExists,
		"the target store is not empty (it holds %s); restore into an empty data directory or database, or pass --force to replace everything in it",
		strings.Join(what, " and "))
}

// load writes every record of a verified backup through tx: Types and
// instances first, then what refers to other instances (uses edges) and
// what the instance writes stamped (Seqs), then the built-in values.
func load(ctx context.Context, tx store.RestoreTx, r io.Reader, opts RestoreOptions) error {
	d, err := newDecoder(r)
	if err != nil {
		return err
	}
	var insts []*instanceRecord
	for {
		rec, err := d.record()
		if err != nil {
			return err
		}
		if rec == nil {
			break
		}
		if t := rec.Type; t != nil {
			if err := tx.CreateType(ctx, *t); err != nil {
				return fmt.Errorf("Type %s:%s: %w", t.Path, t.Revision, err)
			}
			continue
		}
		in := rec.Instance
		if opts.LeaseType != "" && in.TypeRef.Path == opts.LeaseType {
			in.Status = nil
		}
		if err := retypeBuiltin(ctx, tx, in, opts.BuiltinType); err != nil {
			return err
		}
		if err := createInstance(ctx, tx, in); err != nil {
			return err
		}
		// Keep what the later passes need, not the values.
		for i := range in.Versions {
			if len(in.Versions[i].Value) > 0 {
				if err := tx.PutValue(ctx, in.ID, in.Versions[i].ResourceVersion, in.Versions[i].Value); err != nil {
					return fmt.Errorf("value of instance %q resource version %d: %w", in.ID, in.Versions[i].ResourceVersion, err)
				}
			}
		}
		in.Versions = nil
		insts = append(insts, in)
	}
	for _, in := range insts {
		for _, to := range in.Uses {
			if err := tx.AddUses(ctx, in.ID, to); err != nil {
				return fmt.Errorf("instance %q uses %q: %w", in.ID, to, err)
			}
		}
		if in.ValueLock != "" {
			if err := tx.SetValueLock(ctx, in.ID, in.ValueLock); err != nil {
				return fmt.Errorf("value lock of instance %q: %w", in.ID, err)
			}
		}
		if err := tx.SetSeq(ctx, in.ID, in.Seq); err != nil {
			return err
		}
	}
	return nil
}

// retypeBuiltin gives the built-in backend's instance the target's Type
// when it comes from another kind of store, creating that Type from the
// backup's (Types come before instances in a backup) unless the target
// has it.
func retypeBuiltin(ctx context.Context, tx store.Tx, in *instanceRecord, to cairn.TypeRef) error {
	if to.Path == "" || in.ID != cairn.BuiltinBackendID || in.TypeRef == to ||
		!strings.HasPrefix(in.TypeRef.Path, cairn.StorageTypePrefix+".") {
		return nil
	}
	_, err := tx.GetType(ctx, to)
	if cairn.HasCode(err, cairn.CodeNotFound) {
		var from cairn.Type
		if from, err = tx.GetType(ctx, in.TypeRef); err != nil {
			return fmt.Errorf("the built-in backend's Type %s: %w", in.TypeRef, err)
		}
		from.Path, from.Revision = to.Path, to.Revision
		err = tx.CreateType(ctx, from)
	}
	if err != nil {
		return fmt.Errorf("the built-in backend's Type %s: %w", to, err)
	}
	in.TypeRef = to
	return nil
}

// createInstance creates an instance with its first resource version and
// appends the others in order.
func createInstance(ctx context.Context, tx store.Tx, in *instanceRecord) error {
	if len(in.Versions) == 0 {
		return cairn.Errorf(cairn.CodeInvalid, "instance %q has no resource versions", in.ID)
	}
	first := in.Versions[0]
	first.Value = nil
	inst := cairn.Instance{
		ID: in.ID, TypeRef: in.TypeRef, Namespace: in.Namespace, Name: in.Name, Alias: in.Alias,
		Labels: in.Labels, Annotations: in.Annotations, Backend: in.Backend, LockedBy: in.LockedBy,
		CreatedAt: in.CreatedAt, Status: in.Status, ManagedFields: in.ManagedFields, Latest: first,
	}
	if err := tx.CreateInstance(ctx, inst); err != nil {
		return fmt.Errorf("instance %q: %w", in.ID, err)
	}
	for _, v := range in.Versions[1:] {
		v.Value = nil
		if err := tx.AddResourceVersion(ctx, in.ID, v); err != nil {
			return fmt.Errorf("instance %q resource version %d: %w", in.ID, v.ResourceVersion, err)
		}
	}
	return nil
}
