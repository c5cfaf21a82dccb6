package hub

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/store"
)

// UpdateManagedFields replaces an instance's server-side apply field
// ownership without a new resource version: what a server-side apply that
// changes who owns a field, and no value, writes. Like an update it is
// refused on an instance locked by an owner other than ownerID, and when
// ifSeq is not 0 it is conditional on the instance's last change
// (CodeConflict otherwise). managedFields must be a JSON array.
func (h *Hub) UpdateManagedFields(ctx context.Context, id, ownerID string, managedFields json.RawMessage, ifSeq int64) (cairn.Instance, error) {
	if err := refuseHubInstance(id); err != nil {
		return cairn.Instance{}, err
	}
	mf, err := compactJSON(managedFields)
	if err != nil || len(mf) == 0 || mf[0] != '[' {
		return cairn.Instance{}, cairn.Errorf(cairn.CodeInvalid, "managedFields of TypeInstance %q must be a JSON array", id)
	}
	up := UpdateInstance{ID: id, OwnerID: ownerID, IfSeq: ifSeq}
	var out cairn.Instance
	err = h.write(ctx, func(ctx context.Context, tx store.Tx) error {
		found, err := tx.GetInstancesBrief(ctx, []string{id})
		if err != nil {
			return err
		}
		if err := checkPresentAndOwned([]UpdateInstance{up}, found, "update"); err != nil {
			return err
		}
		if err := checkSeq(up, found[0]); err != nil {
			return err
		}
		if err := tx.SetManagedFields(ctx, id, mf); err != nil {
			return err
		}
		after, err := tx.GetInstancesBrief(ctx, []string{id})
		if err != nil {
			return err
		}
		out = after[0]
		return nil
	})
	if err != nil {
		if isHubRefusal(err) || cairn.ErrorCode(err) != cairn.CodeInternal {
			return cairn.Instance{}, err
		}
		return cairn.Instance{}, fmt.Errorf("update the managed fields of TypeInstance %q: %w", id, err)
	}
	return out, nil
}
