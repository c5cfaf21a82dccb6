package hub

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/store"
)

// LeaseTypeRef is the Type of leases: instances in SystemNamespace whose
// status says which replica holds them until when. Controllers that must
// run on one replica at a time (the stack reconciler) take one, as
// Kubernetes controllers take a coordination.k8s.io Lease.
func LeaseTypeRef() cairn.TypeRef {
	return cairn.TypeRef{Path: "cap.core.type.hub.lease", Revision: cairn.CoreRevision}
}

// LeaseStatus is the status of a lease instance.
type LeaseStatus struct {
	Holder               string    `json:"holder"`
	AcquireTime          time.Time `json:"acquireTime"`
	RenewTime            time.Time `json:"renewTime"`
	LeaseDurationSeconds float64   `json:"leaseDurationSeconds"`
	// ReleaseTime is when the last holder gave the lease up (ReleaseLease);
	// zero once another holder took it.
	ReleaseTime time.Time `json:"releaseTime,omitzero"`
}

// LeaseHandover bounds how long a lease given up by a replica that stops
// stays free while another replica runs: the others watch it (WatchLease)
// and take it when they hear of the release, through the store's
// notification (PostgreSQL) or, failing that, the watch's poll (every
// second). A tool that must not run while any replica does (a restore)
// waits this long after a release before it trusts a free lease.
const LeaseHandover = 2 * time.Second

// AcquireLease takes or renews the lease name for holder for d. It reports
// whether holder holds it afterwards. A lease held by another holder is
// taken over only once its last renewal is older than its duration. Every
// write is conditional on the lease's last change, so of two replicas
// racing for it exactly one wins; the store (SQLite or PostgreSQL) decides,
// not process memory. Renewals write the lease's status only, so the
// value's history does not grow.
func (h *Hub) AcquireLease(ctx context.Context, name, holder string, d time.Duration) (bool, error) {
	if holder == "" || d <= 0 {
		return false, cairn.Errorf(cairn.CodeInvalid, "a lease needs a holder and a positive duration")
	}
	inst, err := h.leaseInstance(ctx, name)
	if err != nil {
		return false, err
	}
	var cur LeaseStatus
	if len(inst.Status) > 0 {
		if err := json.Unmarshal(inst.Status, &cur); err != nil {
			return false, fmt.Errorf("lease %q: its status is not a lease: %w", name, err)
		}
	}
	now := h.now().UTC()
	if cur.Holder != holder && cur.HeldAt(now) {
		return false, nil
	}
	next := LeaseStatus{Holder: holder, AcquireTime: cur.AcquireTime, RenewTime: now, LeaseDurationSeconds: d.Seconds()}
	if cur.Holder != holder {
		next.AcquireTime = now
	}
	b, _ := json.Marshal(next)
	if _, err := h.UpdateStatus(ctx, inst.ID, b, inst.Seq); err != nil {
		if cairn.HasCode(err, cairn.CodeConflict) || cairn.HasCode(err, cairn.CodeNotFound) {
			return false, nil // another replica got there first
		}
		return false, fmt.Errorf("lease %q: %w", name, err)
	}
	if cur.Holder != holder {
		h.log.InfoContext(ctx, "lease acquired", "lease", name, "holder", holder, "previous", cur.Holder)
	}
	return true, nil
}

// ReleaseLease gives up the lease when holder holds it, so another replica
// takes over without waiting for it to expire.
func (h *Hub) ReleaseLease(ctx context.Context, name, holder string) error {
	inst, err := h.leaseInstance(ctx, name)
	if err != nil {
		return err
	}
	var cur LeaseStatus
	if len(inst.Status) > 0 && json.Unmarshal(inst.Status, &cur) == nil && cur.Holder == holder {
		cur.Holder, cur.ReleaseTime = "", h.now().UTC()
		b, _ := json.Marshal(cur)
		if _, err := h.UpdateStatus(ctx, inst.ID, b, inst.Seq); err != nil && !cairn.HasCode(err, cairn.CodeConflict) {
			return fmt.Errorf("release lease %q: %w", name, err)
		}
	}
	return nil
}

// HeldAt reports whether the lease has a holder whose last renewal is not
// older than its duration at now.
func (l LeaseStatus) HeldAt(now time.Time) bool {
	return l.Holder != "" && now.Sub(l.RenewTime) <= l.Duration()
}

// HandingOverAt reports whether the lease was given up less than
// LeaseHandover before now, so another replica may be about to take it.
func (l LeaseStatus) HandingOverAt(now time.Time) bool {
	return l.Holder == "" && !l.ReleaseTime.IsZero() && now.Sub(l.ReleaseTime) < LeaseHandover
}

// Duration is the lease's duration.
func (l LeaseStatus) Duration() time.Duration {
	return time.Duration(l.LeaseDurationSeconds * float64(time.Second))
}

// WatchLease calls changed once it watches, then for every change of
// lease name from then on (renewals, a release, a takeover), until ctx
// ends (it then returns nil) or the watch fails. A replica that does not
// hold the lease watches it to take it as soon as its holder gives it up,
// instead of at its next attempt; the first call covers a release between
// its last look at the lease and the watch, which the watch does not see.
func (h *Hub) WatchLease(ctx context.Context, name string, changed func()) error {
	from, err := h.LastSeq(ctx)
	if err != nil {
		return err
	}
	changed()
	path := LeaseTypeRef().Path
	return h.Watch(ctx, from, func(c store.Change) error {
		if c.TypeRef.Path == path && c.Namespace == SystemNamespace && c.Name == name {
			changed()
		}
		return nil
	})
}

// Lease returns the lease's current status (zero when it was never taken).
func (h *Hub) Lease(ctx context.Context, name string) (LeaseStatus, error) {
	return ReadLease(ctx, h.st, name)
}

// ReadLease is Hub.Lease on a store without a hub (a tool that must not
// run while a replica does, such as a restore).
func ReadLease(ctx context.Context, st store.Reader, name string) (LeaseStatus, error) {
	var cur LeaseStatus
	inst, err := st.GetInstanceByName(ctx, LeaseTypeRef().Path, SystemNamespace, name)
	if cairn.HasCode(err, cairn.CodeNotFound) {
		return cur, nil
	}
	if err != nil {
		return cur, err
	}
	if len(inst.Status) > 0 {
		err = json.Unmarshal(inst.Status, &cur)
	}
	return cur, err
}

// leaseInstance returns the lease instance, creating it (and its Type) the
// first time.
func (h *Hub) leaseInstance(ctx context.Context, name string) (cairn.Instance, error) {
	inst, err := h.st.GetInstanceByName(ctx, LeaseTypeRef().Path, SystemNamespace, name)
	if err == nil || !cairn.HasCode(err, cairn.CodeNotFound) {
		return inst, err
	}
	ref := LeaseTypeRef()
	if _, _, err := h.ApplyType(ctx, cairn.Type{Path: ref.Path, Revision: ref.Revision, JSONSchema: json.RawMessage(`{"type":"object"}`)}); err != nil {
		return inst, err
	}
	_, err = h.CreateInstances(cairn.WithActor(ctx, SystemActor), CreateRequest{Instances: []NewInstance{{
		Namespace: SystemNamespace, Name: name, TypeRef: ref, Value: json.RawMessage(`{}`),
		Backend: &BackendInput{ID: cairn.BuiltinBackendID},
	}}})
	if err != nil && !cairn.HasCode(err, cairn.CodeAlreadyExists) {
		return inst, fmt.Errorf("create lease %q: %w", name, err)
	}
	return h.st.GetInstanceByName(ctx, ref.Path, SystemNamespace, name)
}
