package hub

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/store"
)

// UpdateStatus replaces an instance's status: what its controllers observe
// and report (conditions, outputs, observedGeneration). The status is not a
// resource version: the value's history does not grow, but watchers see
// the change. A lock does not stop it, for the same reason a Kubernetes
// status write does not need the spec's owner: a controller reports on
// what it does not own. ifSeq, when not 0, makes the write conditional on
// the instance's last change (CodeConflict otherwise). status must be a
// JSON object, or nil to clear it.
func (h *Hub) UpdateStatus(ctx context.Context, id string, status json.RawMessage, ifSeq int64) (cairn.Instance, error) {
	if err := refuseHubInstance(id); err != nil {
		return cairn.Instance{}, err
	}
	if len(status) > 0 {
		var b bytes.Buffer
		if err := json.Compact(&b, status); err != nil {
			return cairn.Instance{}, cairn.Errorf(cairn.CodeInvalid, "status of TypeInstance %q is not valid JSON: %v", id, err)
		}
		if b.Len() == 0 || b.Bytes()[0] != '{' {
			return cairn.Instance{}, cairn.Errorf(cairn.CodeInvalid, "status of TypeInstance %q must be a JSON object", id)
		}
		status = b.Bytes()
	}
	var out cairn.Instance
	err := h.write(ctx, func(ctx context.Context, tx store.Tx) error {
		found, err := tx.GetInstancesBrief(ctx, []string{id})
		if err != nil {
			return err
		}
		if len(found) == 0 {
			return notFound(id)
		}
		if err := checkSeq(UpdateInstance{ID: id, IfSeq: ifSeq}, found[0]); err != nil {
			return err
		}
		if err := tx.SetStatus(ctx, id, status); err != nil {
			return err
		}
		after, err := tx.GetInstances(ctx, []string{id})
		if err != nil {
			return err
		}
		if len(after) == 0 {
			return notFound(id)
		}
		out = after[0]
		return nil
	})
	if err != nil {
		if c := cairn.ErrorCode(err); c != cairn.CodeInternal {
			return cairn.Instance{}, err
		}
		return cairn.Instance{}, fmt.Errorf("update the status of TypeInstance %q: %w", id, err)
	}
	return out, nil
}
