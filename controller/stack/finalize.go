package stack

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/hub"
	pkg "github.com/cairn-dev/cairn/stack"
)

// finalize carries out a requested deletion (hub.AnnotationDeletionRequested)
// one band per call: it deletes the children of the highest deletion
// priority left, each band gone before the next is started, and the
// installation itself once no child is left. Before the first child goes
// it checks that every child can go (none locked, none used by an
// instance outside the stack); when one cannot, nothing is deleted and
// the Deleting condition says which and why.
func (c *Controller) finalize(ctx context.Context, inst cairn.Instance, st Status) (time.Duration, error) {
	now := time.Now().UTC()
	next := st.clone()
	kidIDs, err := c.hub.Children(ctx, inst)
	if err != nil {
		return 0, err
	}
	if len(kidIDs) == 0 {
		if owner := inst.Labels[hub.LabelInstallationUID]; owner != "" && slices.Contains(inst.UsedBy, owner) {
			// A nested installation: its owner deletes it (finalize of
			// the owner's band), now that its children are gone.
			next.setCondition(Condition{Type: "Deleting", Status: "True", Reason: "WaitingForOwner", Message: "the children are deleted; the owning installation deletes this one"}, now)
			return 0, c.writeStatus(ctx, inst, st, next)
		}
		err := c.hub.DeleteInstance(ctx, inst.ID, "")
		if err == nil || cairn.HasCode(err, cairn.CodeNotFound) {
			c.forgetOwner(inst.ID)
			c.log.InfoContext(ctx, "installation deleted", "installation", inst.Namespace+"/"+inst.Name)
			return 0, nil
		}
		next.setCondition(Condition{Type: "Deleting", Status: "False", Reason: "DeletionBlocked", Message: "the installation cannot be deleted: " + err.Error()}, now)
		next.event(now, "Warning", "DeletionBlocked", err.Error())
		if werr := c.writeStatus(ctx, inst, st, next); werr != nil {
			return 0, werr
		}
		return 0, err
	}
	kids, err := c.hub.GetInstances(ctx, kidIDs)
	if err != nil {
		return 0, err
	}
	if err := c.hub.CheckOwnedDeletable(ctx, inst.ID, kidIDs, ""); err != nil {
		msg := fmt.Sprintf("no child was deleted: %v", err)
		next.setCondition(Condition{Type: "Deleting", Status: "False", Reason: "DeletionBlocked", Message: msg}, now)
		next.event(now, "Warning", "DeletionBlocked", msg)
		if werr := c.writeStatus(ctx, inst, st, next); werr != nil {
			return 0, werr
		}
		return 0, err
	}

	// Bands by the stack's deletion priorities; without the stack (removed
	// from the catalog) every child is in one band.
	var s *pkg.Stack
	if entry, err := c.stackFor(ctx, inst); err == nil {
		s, _ = c.stackOf(entry)
	}
	byKey := map[string]string{}
	var rs []pkg.Resource
	types := map[cairn.TypeRef]cairn.Type{}
	for _, k := range kids {
		t, ok := types[k.TypeRef]
		if !ok {
			if t, err = c.hub.GetType(ctx, k.TypeRef); err != nil {
				return 0, err
			}
			types[k.TypeRef] = t
		}
		apiVersion, kind := t.Version, k.TypeRef.Path
		if t.Group != "" && t.Group != "core" {
			apiVersion = t.Group + "/" + t.Version
		}
		if t.Names != nil {
			kind = t.Names.Kind
		}
		r := pkg.Resource{Object: map[string]any{"apiVersion": apiVersion, "kind": kind,
			"metadata": map[string]any{"name": k.Name, "namespace": k.Namespace}},
			OriginalName: strings.TrimPrefix(k.Name, inst.Name+"-")}
		rs = append(rs, r)
		byKey[r.Key()] = k.ID
	}
	band, prio := rs, 0
	if s != nil {
		band = s.DeletionBands(rs)[0]
		prio = s.DeletionPriority(band[0])
	}
	ids := make([]string, 0, len(band))
	names := make([]string, 0, len(band))
	for _, r := range band {
		ids = append(ids, byKey[r.Key()])
		names = append(names, r.Kind()+" "+r.Name())
	}
	// A child that is itself an installation deletes its own children
	// first: ask it to, and wait.
	var nested []string
	for _, k := range kids {
		if !slices.Contains(ids, k.ID) {
			continue
		}
		if own, err := c.hub.Children(ctx, k); err == nil && len(own) > 0 {
			if err := c.hub.RequestDeletion(ctx, k.ID); err != nil {
				return 0, err
			}
			nested = append(nested, k.Namespace+"/"+k.Name)
		}
	}
	if len(nested) > 0 {
		msg := fmt.Sprintf("waiting for the nested installations %s to delete their children", strings.Join(nested, ", "))
		next.setCondition(Condition{Type: "Deleting", Status: "True", Reason: "DeletingNested", Message: msg}, now)
		if err := c.writeStatus(ctx, inst, st, next); err != nil {
			return 0, err
		}
		return 500 * time.Millisecond, nil
	}
	if err := c.hub.DeleteOwned(ctx, inst.ID, ids, ""); err != nil {
		msg := fmt.Sprintf("deleting the children of priority %d failed: %v", prio, err)
		next.setCondition(Condition{Type: "Deleting", Status: "False", Reason: "DeletionBlocked", Message: msg}, now)
		next.event(now, "Warning", "DeletionBlocked", msg)
		if werr := c.writeStatus(ctx, inst, st, next); werr != nil {
			return 0, werr
		}
		return 0, err
	}
	c.log.InfoContext(ctx, "deleted a band of children", "installation", inst.Namespace+"/"+inst.Name, "priority", prio, "children", names)
	left := len(kids) - len(band)
	msg := fmt.Sprintf("deleted priority %d (%s); %d children left", prio, strings.Join(names, ", "), left)
	next.setCondition(Condition{Type: "Deleting", Status: "True", Reason: "DeletingChildren", Message: msg}, now)
	next.setCondition(Condition{Type: "Ready", Status: "False", Reason: "Deleting", Message: "the installation is being deleted"}, now)
	next.event(now, "Normal", "DeletedChildren", msg)
	if err := c.writeStatus(ctx, inst, st, next); err != nil {
		return 0, err
	}
	return time.Millisecond, nil
}
