package hub

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/cairn-dev/cairn"
)

// KeyRotator is implemented by backend openers whose backends encrypt to
// recipients that can change (the Git backend's encryption.sops): files are
// re-encrypted and the backend instance's new value returned.
type KeyRotator interface {
	RotateKeys(ctx context.Context, sb cairn.StorageBackend, addAge, removeAge []string) (value json.RawMessage, commit string, files int, err error)
}

// KeyRotation asks for a backend's age recipients to change.
type KeyRotation struct {
	AddAge    []string `json:"addAge,omitempty"`
	RemoveAge []string `json:"removeAge,omitempty"`
}

// KeyRotationResult says what a rotation did.
type KeyRotationResult struct {
	Backend string `json:"backend"`
	// Commit re-encrypted the files; "" when there was no file to rewrite.
	Commit string `json:"commit,omitempty"`
	Files  int    `json:"files"`
	// ResourceVersion is the backend instance's version naming the new
	// recipients.
	ResourceVersion int `json:"resourceVersion"`
}

// RotateBackendKeys re-encrypts every file of an encrypting backend to its
// recipients plus r.AddAge minus r.RemoveAge, in one commit, then records
// the new recipients as the backend instance's next resource version, so
// later writes encrypt to them.
func (h *Hub) RotateBackendKeys(ctx context.Context, id string, r KeyRotation) (KeyRotationResult, error) {
	if len(r.AddAge)+len(r.RemoveAge) == 0 {
		return KeyRotationResult{}, cairn.Errorf(cairn.CodeInvalid, "rotate keys of backend %q: name recipients to add or remove", id)
	}
	sb, err := h.StorageBackend(ctx, id)
	if err != nil {
		return KeyRotationResult{}, err
	}
	kr, ok := h.opener.(KeyRotator)
	if sb.Abstract || !ok {
		return KeyRotationResult{}, &cairn.Error{Code: cairn.CodeInvalid, IDs: []string{sb.ID},
			Msg: fmt.Sprintf("backend %q does not encrypt with rotatable keys (only Git backends with encryption.sops do)", sb.ID)}
	}
	value, commit, files, err := kr.RotateKeys(ctx, sb, r.AddAge, r.RemoveAge)
	if err != nil {
		if cairn.ErrorCode(err) == cairn.CodeInvalid {
			return KeyRotationResult{}, err
		}
		return KeyRotationResult{}, h.externalErr(ctx, sb.ID, "rotate keys", err)
	}
	out, err := h.UpdateInstances(ctx, []UpdateInstance{{ID: sb.ID, Value: value}})
	if err != nil {
		return KeyRotationResult{Backend: sb.ID, Commit: commit, Files: files}, fmt.Errorf(
			"the files of backend %q were re-encrypted (commit %s) but recording its new recipients failed; apply them to the backend by hand: %w", sb.ID, commit, err)
	}
	return KeyRotationResult{Backend: sb.ID, Commit: commit, Files: files, ResourceVersion: out[0].Latest.ResourceVersion}, nil
}
