package replicatest

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/auth/rbac"
	"github.com/cairn-dev/cairn/hub"
)

// testRBACReplicas: writers on every replica create RBAC bindings at once.
// Each acknowledged binding is kept (none lost to a concurrent writer of
// the one instance holding them), every replica lists them all, and each
// replica's decisions follow within its poll interval.
func testRBACReplicas(t *testing.T, db Database) {
	const poll = 50 * time.Millisecond
	hubs := startReplicas(t, db, replicas, func(c *hub.Config) { c.PollInterval = poll })
	// The Type of x.io is created through one replica; the others learn
	// of its group (which cairn-editor then covers) when a request names it.
	if _, err := hubs[0].CreateType(ctx(), cairn.Type{Path: "io.x.thing", Revision: "1.0.0", Group: "x.io", Version: "v1",
		Names: &cairn.Names{Kind: "Thing", Plural: "things"}}); err != nil {
		t.Fatal(err)
	}
	const perReplica = 4
	var acked atomic.Int32
	errs := make(chan error, replicas*perReplica)
	race(replicas*perReplica, func(w int) {
		b := &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("b%d", w), Namespace: fmt.Sprintf("ns%d", w)},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: rbac.EditorRole},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: fmt.Sprintf("user%d", w)}},
		}
		if _, err := hubs[w%replicas].CreateRBAC(ctx(), b); err != nil {
			errs <- fmt.Errorf("writer %d: %w", w, err)
			return
		}
		acked.Add(1)
	})
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	total := replicas * perReplica
	for i, h := range hubs {
		list, _, err := h.ListRBAC(ctx(), hub.KindRoleBinding, "")
		if err != nil {
			t.Fatal(err)
		}
		if len(list) != total || int(acked.Load()) != total {
			t.Fatalf("replica %d lists %d bindings, %d acknowledged, want %d", i, len(list), acked.Load(), total)
		}
	}
	// Every replica lets user<w> create in ns<w> within the poll interval
	// (plus scheduling slack), and nowhere else.
	deadline := time.Now().Add(20 * poll)
	for i, h := range hubs {
		for w := range total {
			u := cairn.WithUser(context.Background(), cairn.User{Name: fmt.Sprintf("user%d", w), Groups: []string{cairn.Authenticated}})
			attrs := rbac.Attributes{Verb: "create", ResourceRequest: true, APIGroup: "x.io", Resource: "things", Namespace: fmt.Sprintf("ns%d", w)}
			for !h.Authorize(u, attrs).Allowed {
				if time.Now().After(deadline) {
					t.Fatalf("replica %d: user%d's binding not in effect after %s", i, w, 20*poll)
				}
				time.Sleep(poll / 5)
			}
			attrs.Namespace = "elsewhere"
			if h.Authorize(u, attrs).Allowed {
				t.Fatalf("replica %d: user%d may create outside its namespace", i, w)
			}
		}
	}
}
