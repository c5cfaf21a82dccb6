package hub

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/deps"
	"github.com/cairn-dev/cairn/stack"
	"github.com/cairn-dev/cairn/store"
)

// Dependency metadata of an installation (seed 002 "Installation
// Resource"). Sharing is kept in annotations, so the user can edit it
// ("break glass") with kubectl annotate, and the installation's spec stays
// exactly its stack's parameters.
const (
	// AnnotationSharingMode is "none" or "group" (absent: group).
	AnnotationSharingMode = "deps.cairn.dev/sharing-mode"
	// AnnotationSharingGroup is the sharing group (absent: "").
	AnnotationSharingGroup = "deps.cairn.dev/sharing-group"
	// AnnotationRootID is the id of the root installation of the install
	// that created it (${installation.root.id}).
	AnnotationRootID = "deps.cairn.dev/root-id"
	// AnnotationInputsDigest identifies the inputs it was last installed
	// with, so a resumed install skips it.
	AnnotationInputsDigest = "deps.cairn.dev/inputs-digest"
	// AnnotationParametersDigest is, on a root installation, the
	// ParametersDigest of the spec its dependencies were last installed
	// for: the stack controller installs them again when the spec no
	// longer has it (a kubectl patch of the spec).
	AnnotationParametersDigest = "deps.cairn.dev/parameters-digest"
	// AnnotationDependencyOverrides holds, on a root installation, the
	// --dependency overrides of its install (JSON list), so an install
	// the stack controller starts again resolves them the same way.
	AnnotationDependencyOverrides = "deps.cairn.dev/dependency-overrides"
	// AnnotationDependencyInputs holds, on a root installation, the
	// answers its install gave for dependencies' unmapped inputs (JSON,
	// by dependency path; credentials by reference only), for the same
	// reason.
	AnnotationDependencyInputs = "deps.cairn.dev/dependency-inputs"
	// AnnotationInstalledAt is when an install last wrote it.
	AnnotationInstalledAt = "deps.cairn.dev/installed-at"
	// AnnotationOutputs holds the outputs its dependencies set on it
	// (dependencies.requires[].outputs), JSON; the stack controller adds
	// them to status.outputs.
	AnnotationOutputs = "deps.cairn.dev/outputs"
	// AnnotationCredentials holds the credential instances handed to it by
	// reference ({"name": "namespace/instance"}); never a value.
	AnnotationCredentials = "deps.cairn.dev/credentials"
	// AnnotationWaiting marks a root installation created before its
	// dependencies: the stack controller does not render it until the
	// install removes the annotation. Its value names what it waits for.
	AnnotationWaiting = "deps.cairn.dev/waiting-for"
)

// ParametersDigest is the digest of a root installation's parameters as
// an install plans with them: the stack's name and version and the spec
// with the stack's schema defaults applied, as canonical JSON ("sha256:"
// and hex). The installer records it (AnnotationParametersDigest) and the
// stack controller compares it with the spec's, so both compute it here:
// a spec that differs only by a defaulted value has the same digest.
func ParametersDigest(s *stack.Stack, spec map[string]any) (string, error) {
	params, err := s.Defaults(spec)
	if err != nil {
		return "", err
	}
	b, err := json.Marshal(map[string]any{"stack": s.Manifest.Name, "version": s.Manifest.Version, "parameters": params})
	if err != nil {
		return "", fmt.Errorf("parameters of %s: %w", s.Manifest.Name, err)
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

// DependencyCatalog is the stack catalog as the dependency resolver reads
// it.
func (h *Hub) DependencyCatalog() deps.Catalog { return depsCatalog{h} }

type depsCatalog struct{ h *Hub }

func (c depsCatalog) Versions(ctx context.Context, name string) ([]string, error) {
	all, err := c.h.ListStacks(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range all {
		if e.Name == name {
			out = append(out, e.Version)
		}
	}
	return out, nil
}

func (c depsCatalog) Stack(ctx context.Context, ref deps.Reference) (*deps.Stack, error) {
	e, err := c.h.GetStack(ctx, ref.Name, ref.Version)
	if cairn.HasCode(err, cairn.CodeNotFound) {
		return nil, fmt.Errorf("%v: %w", err, deps.ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	return deps.FromManifest(&e.Manifest)
}

// SharingOf reads an installation's sharing mode and group.
func SharingOf(inst cairn.Instance) deps.InstallationSharing {
	s := deps.InstallationSharing{Mode: deps.SharingMode(inst.Annotations[AnnotationSharingMode]), Group: inst.Annotations[AnnotationSharingGroup]}
	if s.Mode == "" {
		s.Mode = deps.SharingGroupMode
	}
	return s
}

// installationStatus is the part of an installation's status the
// dependency query reads (the stack controller writes it).
type installationStatus struct {
	Sharing *deps.SharingStatus `json:"sharing"`
	Stack   *struct {
		Name    string `json:"name"`
		Version string `json:"version"`
	} `json:"stack"`
}

// DependencyCandidates returns the installations of the given namespaces as
// the dependency resolver's candidate index: their sharing metadata and
// status.sharing, which the stack controller keeps from their stack's
// definition. An installation never reconciled yet gets it from the
// catalog. Only the namespaces a resolution may look in are read (the
// root's and the global one), by one query per installation Type.
func (h *Hub) DependencyCandidates(ctx context.Context, namespaces ...string) (*deps.Index, error) {
	idx := deps.NewIndex()
	types, err := h.ListTypes(ctx, store.TypeFilter{Parent: InstallationParent})
	if err != nil {
		return nil, err
	}
	entries, err := h.ListStacks(ctx)
	if err != nil {
		return nil, err
	}
	byType := map[cairn.TypeRef][]StackEntry{}
	for _, e := range entries {
		byType[e.InstallationType] = append(byType[e.InstallationType], e)
	}
	for _, t := range types {
		for _, ns := range slices.Compact(slices.Clone(namespaces)) {
			listNS := ns
			if t.ClusterScoped() {
				// A cluster-scoped installation is a candidate of the
				// global tier, for any namespace's dependencies.
				if ns != deps.DefaultGlobalNamespace {
					continue
				}
				listNS = ""
			}
			insts, err := h.ListInstances(ctx, store.InstanceFilter{TypePath: t.Path, TypeRevision: t.Revision, Namespace: listNS}, false)
			if err != nil {
				return nil, err
			}
			// The caller's plan reuses and shows only installations it may
			// read: one it may not is no candidate, as if it were not
			// there. A grant for the namespace (no resourceNames) covers
			// every name, so instances are asked one by one only without.
			all, err := h.MayRead(ctx, cairn.Instance{TypeRef: t.Ref(), Namespace: listNS})
			if err != nil {
				return nil, err
			}
			if !all {
				insts = slices.DeleteFunc(insts, func(in cairn.Instance) bool {
					ok, err := h.MayRead(ctx, in)
					return err != nil || !ok
				})
			}
			for _, inst := range insts {
				// A cluster-scoped one keeps no namespace: the resolver
				// ranks it in the global tier and keys it by name.
				in, ok := h.candidate(inst, t, byType[t.Ref()])
				if ok {
					idx.Put(in)
				}
			}
		}
	}
	return idx, nil
}

func (h *Hub) candidate(inst cairn.Instance, t cairn.Type, entries []StackEntry) (deps.Installation, bool) {
	in := deps.Installation{ID: inst.ID, Namespace: inst.Namespace, Name: inst.Name, Sharing: SharingOf(inst)}
	if t.Names != nil {
		in.Kind = t.Names.Kind
	}
	var st installationStatus
	if len(inst.Status) > 0 {
		_ = json.Unmarshal(inst.Status, &st)
	}
	// The stack: what the controller last rendered it with, else the
	// version it pins, else the one rendering it (StackFor's choice).
	pinned := inst.Annotations[AnnotationStackVersion]
	e, ok := latest(entries, func(e StackEntry) bool {
		if st.Stack != nil {
			return e.Name == st.Stack.Name && e.Version == st.Stack.Version
		}
		return pinned == "" || e.Version == pinned
	})
	if !ok {
		return in, false
	}
	entry := &e
	in.Stack = deps.Reference{Name: entry.Name, Version: entry.Version}
	if st.Sharing != nil {
		in.Status = *st.Sharing
	} else if s, err := deps.FromManifest(&entry.Manifest); err == nil {
		in.Status = deps.SharingStatusOf(s)
	}
	return in, true
}

// AddUses records that the instance from uses each of to, in one
// transaction (an installation's uses edges to its dependencies, added
// when an install updates an installation created before them). Edges that
// exist are kept.
func (h *Hub) AddUses(ctx context.Context, from string, to []string) error {
	if len(to) == 0 {
		return nil
	}
	cur, err := h.st.GetInstancesBrief(ctx, []string{from})
	if err != nil {
		return err
	}
	if len(cur) == 0 {
		return notFound(from)
	}
	var add []string
	for _, id := range to {
		if !slices.Contains(cur[0].Uses, id) && id != from {
			add = append(add, id)
		}
	}
	if len(add) == 0 {
		return nil
	}
	return h.write(ctx, func(ctx context.Context, tx store.Tx) error {
		for _, id := range add {
			if err := tx.AddUses(ctx, from, id); err != nil {
				return err
			}
		}
		return nil
	})
}

// SetDependencyUses makes the uses edges from the installation from to
// other installations exactly deps: it adds the missing ones and removes
// those to installations not in deps, in one transaction. Its edges to its
// own children (the stack controller's) and to instances that are not
// installations (its backend, parameter sources) are left as they are. An
// install that resolves a dependency to another installation than before
// (the parameters it maps changed) so drops its use of the old one, which
// can then be deleted. It returns the installations whose edges it removed.
func (h *Hub) SetDependencyUses(ctx context.Context, from string, deps []string) ([]string, error) {
	var removed []string
	err := h.write(ctx, func(ctx context.Context, tx store.Tx) error {
		removed = removed[:0]
		cur, err := tx.GetInstances(ctx, []string{from}) // with its Uses
		if err != nil {
			return err
		}
		if len(cur) == 0 {
			return notFound(from)
		}
		for _, id := range deps {
			if !slices.Contains(cur[0].Uses, id) && id != from {
				if err := tx.AddUses(ctx, from, id); err != nil {
					return err
				}
			}
		}
		used, err := tx.GetInstancesBrief(ctx, cur[0].Uses)
		if err != nil {
			return err
		}
		isInst := map[cairn.TypeRef]bool{}
		for _, u := range used {
			if slices.Contains(deps, u.ID) || u.Labels[LabelInstallationUID] == from {
				continue
			}
			known, ok := isInst[u.TypeRef]
			if !ok {
				t, err := tx.GetType(ctx, u.TypeRef)
				if err != nil && !cairn.HasCode(err, cairn.CodeNotFound) {
					return err
				}
				known = err == nil && isInstallationType(t)
				isInst[u.TypeRef] = known
			}
			if known {
				if err := tx.RemoveUses(ctx, from, u.ID); err != nil {
					return err
				}
				removed = append(removed, u.ID)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return removed, nil
}

// DeleteDroppedDependencies deletes, of the installations in dropped
// (those an install no longer resolves the installation from's
// dependencies to: SetDependencyUses' result), its exclusive ones: sharing
// mode none and created by the install of root, the root id of from. No
// other installation may use one (mode none is never reused), so nothing
// could use it again; seed 002's unshared dependency goes with its
// dependent's need of it, as with the dependent. Shared ones stay. It
// returns the ids it deleted (or requested the deletion of, for one with
// children) and the failures, joined.
func (h *Hub) DeleteDroppedDependencies(ctx context.Context, root string, dropped []string) ([]string, error) {
	if len(dropped) == 0 {
		return nil, nil
	}
	used, err := h.st.GetInstancesBrief(ctx, dropped)
	if err != nil {
		return nil, fmt.Errorf("read the dropped dependencies: %w", err)
	}
	var deleted []string
	var errs []error
	for _, u := range used {
		if u.Annotations[AnnotationSharingMode] != string(deps.SharingNone) || u.Annotations[AnnotationRootID] != root {
			continue
		}
		if err := h.DeleteInstance(ctx, u.ID, ""); err != nil && !cairn.HasCode(err, cairn.CodeNotFound) {
			errs = append(errs, fmt.Errorf("delete the exclusive dependency %s/%s no longer used: %w", u.Namespace, u.Name, err))
			continue
		}
		deleted = append(deleted, u.ID)
	}
	return deleted, errors.Join(errs...)
}

// RemoveUses removes the uses edges from -> to (missing edges are no-ops),
// in one transaction.
func (h *Hub) RemoveUses(ctx context.Context, from string, to []string) error {
	if len(to) == 0 {
		return nil
	}
	return h.write(ctx, func(ctx context.Context, tx store.Tx) error {
		for _, id := range to {
			if err := tx.RemoveUses(ctx, from, id); err != nil {
				return err
			}
		}
		return nil
	})
}

// WithAnnotations returns a copy of base with set added and del removed.
func WithAnnotations(base map[string]string, set map[string]string, del ...string) map[string]string {
	out := maps.Clone(base)
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, set)
	for _, k := range del {
		delete(out, k)
	}
	return out
}

// deleteExclusiveDependencies deletes, after an installation, the
// dependencies its install created for it alone (sharing mode none, its
// root id): seed 002's unshared dependencies go with their dependent.
// Shared ones stay. The installation is gone already, so a failure is
// logged, not returned: the dependency stays installed, and deleting it
// by hand finishes the job.
func (h *Hub) deleteExclusiveDependencies(ctx context.Context, inst cairn.Instance) {
	root := inst.Annotations[AnnotationRootID]
	if root == "" {
		root = inst.ID
	}
	if len(inst.Uses) > 0 {
		used, err := h.st.GetInstancesBrief(ctx, inst.Uses)
		if err != nil {
			h.log.WarnContext(ctx, "exclusive dependencies of a deleted installation not read", "id", inst.ID, "err", err)
			return
		}
		for _, u := range used {
			if u.Annotations[AnnotationSharingMode] != string(deps.SharingNone) || u.Annotations[AnnotationRootID] != root {
				continue
			}
			if err := h.DeleteInstance(ctx, u.ID, ""); err != nil && !cairn.HasCode(err, cairn.CodeNotFound) {
				h.log.WarnContext(ctx, "an exclusive dependency of a deleted installation was not deleted", "id", u.ID, "dependent", inst.ID, "err", err)
			}
		}
	}
	// The root of an install: a completed one records its root id, one
	// stopped halfway is still waiting for its dependencies.
	if root == inst.ID && (inst.Annotations[AnnotationRootID] != "" || inst.Annotations[AnnotationWaiting] != "") {
		h.deleteStrandedDependencies(ctx, inst)
	}
}

// deleteStrandedDependencies deletes, after the root of an install, the
// exclusive dependencies that install created but the root never came to
// use: an install stopped halfway (the CLI killed, its client gone) has
// created them before the root gets its uses edges, last. Each is found by
// its root id in the root's namespace, where an install creates them; one
// still used is left to the deletion of its user, which takes it along.
func (h *Hub) deleteStrandedDependencies(ctx context.Context, root cairn.Instance) {
	types, err := h.ListTypes(ctx, store.TypeFilter{Parent: InstallationParent})
	if err != nil {
		h.log.WarnContext(ctx, "exclusive dependencies of a deleted root installation not searched", "id", root.ID, "err", err)
		return
	}
	for _, t := range types {
		insts, err := h.st.ListInstances(ctx, store.InstanceFilter{TypePath: t.Path, TypeRevision: t.Revision, Namespace: root.Namespace})
		if err != nil {
			h.log.WarnContext(ctx, "exclusive dependencies of a deleted root installation not searched", "id", root.ID, "type", t.Path, "err", err)
			return
		}
		for _, u := range insts {
			if u.Annotations[AnnotationSharingMode] != string(deps.SharingNone) || u.Annotations[AnnotationRootID] != root.ID || u.ID == root.ID {
				continue
			}
			err := h.DeleteInstance(ctx, u.ID, "")
			if err != nil && !cairn.HasCode(err, cairn.CodeNotFound) && !cairn.HasCode(err, cairn.CodeUsedBy) {
				h.log.WarnContext(ctx, "an exclusive dependency of a deleted root installation was not deleted", "id", u.ID, "root", root.ID, "err", err)
			}
		}
	}
}
