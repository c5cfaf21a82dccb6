package hub

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/store"
)

// An installation is an instance of a Type a stack defines (seed 004's
// MinimalGCP); it owns the instances rendered from it, its children,
// through a uses edge from the installation to each child.
const (
	// InstallationParent is listed in the additionalRefs of every Type a
	// stack registers for its installations.
	InstallationParent = "cap.core.type.stack.installation"
	// LabelInstallationName and LabelInstallationUID are on every child:
	// the name and id of the installation that owns it (seed 004's
	// <group>/name and <group>/uid labels).
	LabelInstallationName = "stacks.cairn.dev/name"
	LabelInstallationUID  = "stacks.cairn.dev/uid"
	// AnnotationDeletionRequested marks an installation whose deletion
	// was asked for while it still had children: the stack controller
	// deletes them by deletion priority and then the installation, as a
	// Kubernetes finalizer would. Its value is the time of the request
	// (RFC 3339), served as metadata.deletionTimestamp.
	AnnotationDeletionRequested = "stacks.cairn.dev/deletion-requested"
	// AnnotationParametersFrom on an installation gives parameters by
	// reference to other instances, re-read on every reconcile (the stack
	// controller's parameter sources): a YAML or JSON mapping of parameter
	// name to source, {terraformOutput: NAME}.
	AnnotationParametersFrom = "stacks.cairn.dev/parameters-from"
	// FinalizerChildren is the finalizer REST shows while the deletion of
	// an installation waits for its children.
	FinalizerChildren = "stacks.cairn.dev/children"
)

// IsInstallationType reports whether ref is a Type a stack registered for
// its installations.
func (h *Hub) IsInstallationType(ctx context.Context, ref cairn.TypeRef) (bool, error) {
	t, err := h.st.GetType(ctx, ref)
	if cairn.HasCode(err, cairn.CodeNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return isInstallationType(t), nil
}

func isInstallationType(t cairn.Type) bool {
	return slices.Contains(t.AdditionalRefs, InstallationParent)
}

// Children returns the ids of the instances inst owns: those it uses that
// carry its id in LabelInstallationUID.
func (h *Hub) Children(ctx context.Context, inst cairn.Instance) ([]string, error) {
	return children(ctx, h.st, inst)
}

func children(ctx context.Context, r store.Reader, inst cairn.Instance) ([]string, error) {
	if len(inst.Uses) == 0 {
		return nil, nil
	}
	used, err := r.GetInstancesBrief(ctx, inst.Uses)
	if err != nil {
		return nil, fmt.Errorf("read what TypeInstance %q uses: %w", inst.ID, err)
	}
	var out []string
	for _, u := range used {
		if u.Labels[LabelInstallationUID] == inst.ID {
			out = append(out, u.ID)
		}
	}
	return out, nil
}

// requestDeletion handles the deletion of an installation that still owns
// children: it records the request (AnnotationDeletionRequested, without a
// new resource version) and leaves the rest to the stack controller, which
// deletes the children band by band and then the installation. It reports
// whether it did so; false means the instance is deleted right away.
func (h *Hub) requestDeletion(ctx context.Context, inst cairn.Instance, ownerID string, ifSeq int64) (bool, error) {
	isInst, err := h.IsInstallationType(ctx, inst.TypeRef)
	if err != nil || !isInst {
		return false, err
	}
	kids, err := children(ctx, h.st, inst)
	if err != nil || len(kids) == 0 {
		return false, err
	}
	if inst.Annotations[AnnotationDeletionRequested] != "" {
		return true, nil // already under way
	}
	err = h.write(ctx, func(ctx context.Context, tx store.Tx) error {
		found, err := tx.GetInstancesBrief(ctx, []string{inst.ID})
		if err != nil {
			return err
		}
		if len(found) == 0 {
			return notFound(inst.ID)
		}
		cur := found[0]
		if cur.LockedBy != "" && cur.LockedBy != ownerID {
			return &cairn.Error{Code: cairn.CodeLocked, IDs: []string{cur.ID},
				Msg: fmt.Sprintf("TypeInstance %q is locked by different owner", cur.ID)}
		}
		if err := checkSeq(UpdateInstance{ID: cur.ID, IfSeq: ifSeq}, cur); err != nil {
			return err
		}
		ann := maps.Clone(cur.Annotations)
		if ann == nil {
			ann = map[string]string{}
		}
		ann[AnnotationDeletionRequested] = h.now().UTC().Format("2006-01-02T15:04:05Z")
		return tx.SetMetadata(ctx, cur.ID, cur.Labels, ann)
	})
	if err != nil {
		return false, err
	}
	h.log.InfoContext(ctx, "deletion of an installation requested; its children go first", "id", inst.ID, "children", len(kids), "actor", cairn.Actor(ctx), impersonatorAttr(ctx))
	return true, nil
}

// DeleteOwned deletes children of the installation ownerID: it removes the
// owner's uses edge to each and deletes them, all in one store transaction.
// It changes nothing when any of them is locked (by someone other than
// lockOwner) or used by an instance other than the owner; the error names
// them. Values in backends that take batches are deleted first, each
// backend's share as one batch (a Git backend: one commit), which is taken
// back (the files restored) when the store transaction then fails. A
// backend without batches cannot take a delete back: it is asked once the
// store committed, the intent journal keeping the delete until it is done.
func (h *Hub) DeleteOwned(ctx context.Context, ownerID string, ids []string, lockOwner string) error {
	if len(ids) == 0 {
		return nil
	}
	ws, found, err := h.stageOwnedDeletes(ctx, ownerID, ids, lockOwner)
	if err != nil {
		return err
	}
	j, failed, err := h.writeExternal(ctx, ws)
	if err != nil && failed == nil { // the intent journal, before any backend call
		return h.undo(ctx, j, fmt.Errorf("delete the children of %q: %w", ownerID, err))
	}
	if err != nil && !cairn.HasCode(err, cairn.CodeNotFound) {
		return h.undo(ctx, j, h.externalErr(ctx, failed.b.ID, fmt.Sprintf("delete %q", failed.inst.ID), err))
	}
	err = h.write(ctx, func(ctx context.Context, tx store.Tx) error {
		return storeOwnedDeletes(ctx, tx, ownerID, ids, lockOwner)
	})
	if err != nil {
		return h.undo(ctx, j, fmt.Errorf("delete the children of %q: %w", ownerID, err))
	}
	h.settle(ctx, j)
	h.log.InfoContext(ctx, "deleted children", "owner", ownerID, "count", len(found), "actor", cairn.Actor(ctx), impersonatorAttr(ctx))
	return nil
}

// stageOwnedDeletes checks that the children ids of ownerID can go and
// returns the external deletes.
func (h *Hub) stageOwnedDeletes(ctx context.Context, ownerID string, ids []string, lockOwner string) ([]*externalWrite, []cairn.Instance, error) {
	found, err := h.st.GetInstances(ctx, ids)
	if err != nil {
		return nil, nil, fmt.Errorf("delete the children of %q: %w", ownerID, err)
	}
	if err := checkOwnedDeletable(found, ownerID, lockOwner); err != nil {
		return nil, nil, err
	}
	if err := h.checkNoGrandchildren(ctx, found); err != nil {
		return nil, nil, err
	}
	ws, err := h.externalDeletes(ctx, found, lockOwner)
	if err != nil {
		return nil, nil, err
	}
	return ws, found, nil
}

// externalDeletes are the deletes of found's values that external
// backends hold (the built-in backend's go with their rows).
func (h *Hub) externalDeletes(ctx context.Context, found []cairn.Instance, lockOwner string) ([]*externalWrite, error) {
	bs := h.newBackendSet()
	var ws []*externalWrite
	for _, inst := range found {
		if inst.Backend.Abstract {
			continue
		}
		b, err := bs.get(ctx, inst.Backend.ID)
		if err != nil {
			return nil, fmt.Errorf("delete TypeInstance %q: %w", inst.ID, err)
		}
		ws = append(ws, &externalWrite{b: b, inst: inst,
			w: cairn.BatchWrite{Delete: &cairn.OnDeleteRequest{InstanceID: inst.ID, Context: inst.Latest.Context, OwnerID: lockOwner}}})
	}
	return ws, nil
}

// storeOwnedDeletes deletes the children ids of ownerID in tx, checking
// again that none is locked or used from outside.
func storeOwnedDeletes(ctx context.Context, tx store.Tx, ownerID string, ids []string, lockOwner string) error {
	cur, err := tx.GetInstances(ctx, ids)
	if err != nil {
		return err
	}
	if err := checkOwnedDeletable(cur, ownerID, lockOwner); err != nil {
		return err
	}
	for _, inst := range cur {
		if err := tx.RemoveUses(ctx, ownerID, inst.ID); err != nil {
			return err
		}
		if err := tx.DeleteInstance(ctx, inst.ID); err != nil {
			return err
		}
		if inst.Backend.Abstract {
			if err := tx.DeleteValues(ctx, inst.ID); err != nil && !cairn.HasCode(err, cairn.CodeNotFound) {
				return err
			}
		}
	}
	return nil
}

// RequestDeletion records that an installation is to be deleted, as
// DeleteInstance does for one with children, whoever uses it: the stack
// controller asks it of a nested installation (a child that is itself an
// installation) so that it deletes its own children before its owner
// deletes it.
func (h *Hub) RequestDeletion(ctx context.Context, id string) error {
	found, err := h.st.GetInstances(ctx, []string{id})
	if err != nil {
		return err
	}
	if len(found) == 0 {
		return notFound(id)
	}
	_, err = h.requestDeletion(ctx, found[0], found[0].LockedBy, 0)
	return err
}

// checkOwnedDeletable refuses children that are locked or used by anything
// but their owner, naming every one.
func checkOwnedDeletable(found []cairn.Instance, ownerID, lockOwner string) error {
	var locked, usedBy []string
	var lockedNames, usedByNames []string
	var users []string
	for _, inst := range found {
		if inst.LockedBy != "" && inst.LockedBy != lockOwner {
			locked = append(locked, inst.ID)
			lockedNames = append(lockedNames, nsName(inst))
		}
		for _, u := range inst.UsedBy {
			if u != ownerID {
				usedBy = append(usedBy, inst.ID)
				usedByNames = append(usedByNames, nsName(inst))
				users = append(users, u)
				break
			}
		}
	}
	// The children's names beside their ids: the ids alone tell a user
	// reading a Deleting condition nothing.
	switch {
	case len(locked) > 0:
		return &cairn.Error{Code: cairn.CodeLocked, IDs: locked,
			Msg: fmt.Sprintf("TypeInstances %s (%s) are locked by a different owner", cairn.QuoteIDs(locked), strings.Join(lockedNames, ", "))}
	case len(usedBy) > 0:
		return &cairn.Error{Code: cairn.CodeUsedBy, IDs: users,
			Msg: fmt.Sprintf("TypeInstances %s (%s) are used by TypeInstances outside the stack (%s)", cairn.QuoteIDs(usedBy), strings.Join(usedByNames, ", "), cairn.QuoteIDs(users))}
	}
	return nil
}

// nsName is an instance's namespace/name, or its id when it has no name.
func nsName(inst cairn.Instance) string {
	if inst.Name == "" {
		return inst.ID
	}
	return inst.Namespace + "/" + inst.Name
}

// KindType returns the Type serving apiVersion/kind over REST. When no Type
// does, it registers a schema-less one named by the one rule of restnames.go
// (path from group and kind, revision from the API version), so any
// rendered resource can be stored and served.
func (h *Hub) KindType(ctx context.Context, apiVersion, kind string) (cairn.Type, error) {
	group, version, ok := strings.Cut(apiVersion, "/")
	if !ok {
		group, version = "", apiVersion
	}
	if kind == "" || version == "" {
		return cairn.Type{}, cairn.Errorf(cairn.CodeInvalid, "a resource needs apiVersion and kind (got %q, %q)", apiVersion, kind)
	}
	restGroup := group
	if restGroup == "" {
		// The Kubernetes core group has no name; cairn serves it as "core".
		restGroup = "core"
	}
	ts, err := h.st.ListTypes(ctx, store.TypeFilter{Group: restGroup, Version: version})
	if err != nil {
		return cairn.Type{}, fmt.Errorf("find the Type of %s %s: %w", apiVersion, kind, err)
	}
	for _, t := range ts {
		if t.Names != nil && t.Names.Kind == kind {
			return t, nil
		}
	}
	rev, err := cairn.RevisionForVersion(version)
	if err != nil {
		return cairn.Type{}, cairn.Errorf(cairn.CodeInvalid, "%s %s: %v", apiVersion, kind, err)
	}
	lower := strings.ToLower(kind)
	t := cairn.Type{
		Path:       cairn.PathForGroupKind(restGroup, kind),
		Revision:   rev,
		JSONSchema: []byte(`{"type":"object","x-kubernetes-preserve-unknown-fields":true}`),
		Group:      restGroup, Version: version,
		Names: &cairn.Names{Kind: kind, Singular: lower, Plural: cairn.PluralForKind(kind)},
	}
	out, _, err := h.ApplyType(ctx, t)
	return out, err
}

// CheckOwnedDeletable says whether DeleteOwned would delete every one of
// ids now: none is locked by someone other than lockOwner or used by an
// instance other than ownerID. The stack controller asks before deleting
// the first band, so that a deletion that cannot finish does not start.
func (h *Hub) CheckOwnedDeletable(ctx context.Context, ownerID string, ids []string, lockOwner string) error {
	found, err := h.st.GetInstances(ctx, ids)
	if err != nil {
		return err
	}
	return checkOwnedDeletable(found, ownerID, lockOwner)
}

// checkNoGrandchildren refuses to delete a child that is itself an
// installation still owning children: deleting it with its owner's band
// would leave its own children without an owner.
func (h *Hub) checkNoGrandchildren(ctx context.Context, found []cairn.Instance) error {
	var owning []string
	for _, inst := range found {
		kids, err := children(ctx, h.st, inst)
		if err != nil {
			return err
		}
		if len(kids) > 0 {
			owning = append(owning, inst.ID)
		}
	}
	if len(owning) > 0 {
		return &cairn.Error{Code: cairn.CodeUsedBy, IDs: owning,
			Msg: fmt.Sprintf("TypeInstances %s are installations that still own children; nested installations are not deleted with their owner: delete them first", cairn.QuoteIDs(owning))}
	}
	return nil
}
