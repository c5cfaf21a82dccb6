package atrest

import (
	"context"
	"fmt"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/store"
)

// Progress is what Reencrypt has done so far.
type Progress struct {
	// Instances is the number of instances looked at.
	Instances int
	// Values is the number of built-in values looked at.
	Values int
	// Rewritten is the number of values rewritten with the current write key
	// (or to plaintext, where the write provider is identity).
	Rewritten int
}

// Reencrypt rewrites every value of the built-in value table that is not
// written the way c would write it now, batch instances per transaction, so
// the store stays online: each batch is a short transaction of its own and
// concurrent writes simply go on (a value they add is already current).
// It is resumable: values already current are skipped, so running it again
// after an interruption only does what is left. report, when not nil, is
// called after each batch. st is the store itself, not one Wrap returned.
//
// On SQLite the rewritten rows are zeroed in the file (secure_delete) and
// the write-ahead log is truncated at the end. PostgreSQL keeps dead row
// versions in its files until (auto)vacuum reclaims them; run
// VACUUM FULL builtin_values after re-encrypting to rewrite the table.
func Reencrypt(ctx context.Context, st store.Store, c *Config, batch int, report func(Progress)) (Progress, error) {
	if batch <= 0 {
		batch = 100
	}
	var (
		p     Progress
		after *cairn.Instance
	)
	for {
		page, err := st.ListInstances(ctx, store.InstanceFilter{Limit: batch, After: after})
		if err != nil {
			return p, fmt.Errorf("re-encrypt: list instances after %d: %w", p.Instances, err)
		}
		if len(page) == 0 {
			return p, compact(ctx, st)
		}
		values, rewritten := 0, 0
		err = st.Update(ctx, func(ctx context.Context, tx store.Tx) error {
			values, rewritten = 0, 0 // Update may retry fn
			for _, inst := range page {
				v, r, err := reencryptInstance(ctx, tx, c, inst)
				if err != nil {
					return err
				}
				values, rewritten = values+v, rewritten+r
			}
			return nil
		})
		if err != nil {
			return p, err
		}
		p.Values += values
		p.Rewritten += rewritten
		p.Instances += len(page)
		last := page[len(page)-1]
		after = &last
		if report != nil {
			report(p)
		}
	}
}

// reencryptInstance rewrites the values of one instance that are not
// current. Instances of non-built-in backends have no values here.
func reencryptInstance(ctx context.Context, tx store.Tx, c *Config, inst cairn.Instance) (values, rewritten int, err error) {
	if !inst.Backend.Abstract {
		return 0, 0, nil
	}
	rvs, err := tx.ResourceVersions(ctx, inst.ID)
	if cairn.HasCode(err, cairn.CodeNotFound) {
		return 0, 0, nil // deleted since the page was listed
	}
	if err != nil {
		return 0, 0, fmt.Errorf("re-encrypt %q: list resource versions: %w", inst.ID, err)
	}
	for _, rv := range rvs {
		stored, err := tx.Value(ctx, inst.ID, rv.ResourceVersion)
		if cairn.HasCode(err, cairn.CodeNotFound) {
			continue
		}
		if err != nil {
			return values, rewritten, fmt.Errorf("re-encrypt %q version %d: read: %w", inst.ID, rv.ResourceVersion, err)
		}
		values++
		if c.Current(inst.TypeRef.Path, stored) {
			continue
		}
		plain, err := c.Open(inst.ID, rv.ResourceVersion, stored)
		if err != nil {
			return values, rewritten, fmt.Errorf("re-encrypt: %w", err)
		}
		sealed, err := c.Seal(inst.TypeRef.Path, inst.ID, rv.ResourceVersion, plain)
		if err != nil {
			return values, rewritten, fmt.Errorf("re-encrypt: %w", err)
		}
		if err := tx.DeleteValue(ctx, inst.ID, rv.ResourceVersion); err != nil {
			return values, rewritten, fmt.Errorf("re-encrypt %q version %d: %w", inst.ID, rv.ResourceVersion, err)
		}
		if err := tx.PutValue(ctx, inst.ID, rv.ResourceVersion, sealed); err != nil {
			return values, rewritten, fmt.Errorf("re-encrypt %q version %d: %w", inst.ID, rv.ResourceVersion, err)
		}
		rewritten++
	}
	return values, rewritten, nil
}

// compact lets a store drop old page images that may still hold what was
// just rewritten (SQLite's write-ahead log); stores without one have
// nothing to do here.
func compact(ctx context.Context, st store.Store) error {
	c, ok := st.(interface{ Compact(context.Context) error })
	if !ok {
		return nil
	}
	if err := c.Compact(ctx); err != nil {
		return fmt.Errorf("re-encrypt: %w", err)
	}
	return nil
}
