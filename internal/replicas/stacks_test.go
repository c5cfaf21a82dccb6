package replicas

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/api/rest/client"
	"github.com/cairn-dev/cairn/stack"
	"github.com/cairn-dev/cairn/store/postgres/pgtest"
)

// TestStackControllerOneReplicaAtATime runs two `cairn serve` replicas on
// one PostgreSQL with the stack controller on. A stack is installed and
// driven to Ready with the real kubectl through both replicas; every write
// to the children comes from the one replica holding the lease. That
// replica is killed (kill -9); the other takes the lease over once it
// expires and applies the next parameter change. No resource version of
// any child is written by the replica that does not hold the lease.
func TestStackControllerOneReplicaAtATime(t *testing.T) {
	pgtest.DSN(t)
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl is not installed")
	}
	bin := cairnBinary(t)
	db := newDatabase(t)
	flags := func(id string) []string {
		return []string{"--stack-lease-duration", "3s", "--stack-resync", "2s", "--stack-controller-identity", id}
	}
	rs := map[string]*replica{
		"ctl-a": startReplica(t, bin, db, "a", flags("ctl-a")...),
		"ctl-b": startReplica(t, bin, db, "b", flags("ctl-b")...),
	}
	a, b := rs["ctl-a"], rs["ctl-b"]
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	s, err := stack.Load(ctx, filepath.Join(moduleRoot(t), "controller", "stack", "testdata", "db"))
	if err != nil {
		t.Fatal(err)
	}
	archive, err := s.Archive()
	if err != nil {
		t.Fatal(err)
	}
	if _, added, err := a.client.AddStack(ctx, archive); err != nil || !added {
		t.Fatalf("add the stack through a: %v (added %v)", err, added)
	}
	// The catalog is shared: b sees the stack and serves its kind.
	if got, err := b.client.GetStack(ctx, "db", ""); err != nil || got.Spec.Digest != s.Digest {
		t.Fatalf("the stack through b: %v %+v", err, got.Spec)
	}

	k := func(r *replica, args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(ctx, kubectl, append([]string{"--server", r.url}, args...)...)
		cmd.Env = []string{"HOME=" + t.TempDir(), "KUBECONFIG=/dev/null"}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl %s on %s: %v\n%s", strings.Join(args, " "), r.name, err, out)
		}
		return string(out)
	}
	waitServes(t, b, "dbs")
	inst := filepath.Join(t.TempDir(), "orders.yaml")
	writeFile(t, inst, "apiVersion: db.test.cairn.dev/v1\nkind: DB\nmetadata: {name: orders}\nspec: {engine: mysql}\n")
	k(a, "apply", "-f", inst)
	k(b, "wait", "--for=condition=Synced", "dbs/orders", "--timeout=30s")
	// The Database is ready once whatever acts on it says so in its
	// status: here a person, through b's status subresource.
	waitServes(t, b, "databases")
	k(b, "patch", "databases", "orders-main", "--subresource=status", "--type=merge", "-p", `{"status":{"conditions":[{"type":"Ready","status":"True"}]}}`)
	k(a, "wait", "--for=condition=Ready", "dbs/orders", "--timeout=30s")
	if out := k(b, "get", "dbs"); !regexpMatch(`(?m)^orders\s+True\s+True\s`, out) {
		t.Fatalf("kubectl get dbs shows no READY and SYNCED True:\n%s", out)
	}

	leader := writerOf(ctx, t, a.client, "orders-main")
	if rs[leader] == nil {
		t.Fatalf("the children were written by %q, not by a replica's controller", leader)
	}
	other := "ctl-a"
	if leader == "ctl-a" {
		other = "ctl-b"
	}
	if w := writerOf(ctx, t, a.client, "orders-backups"); w != leader {
		t.Fatalf("children written by %s and %s", leader, w)
	}
	killedAt := time.Now()
	if err := rs[leader].kill(); err != nil {
		t.Fatal(err)
	}
	survivor := rs[other]
	k(survivor, "patch", "dbs", "orders", "--type=merge", "-p", `{"spec":{"engine":"postgres"}}`)
	deadline := time.Now().Add(30 * time.Second)
	for {
		raw, err := survivor.client.Get(ctx, dbResource("databases", "Database"), "default", "orders-main")
		if err == nil && strings.Contains(string(raw), `"postgres"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the surviving replica never applied the change: %s %v\n%s", raw, err, survivor.logs)
		}
		time.Sleep(200 * time.Millisecond)
	}
	took := time.Since(killedAt)
	if w := writerOf(ctx, t, survivor.client, "orders-main"); w != other {
		t.Fatalf("after the kill the change was written by %q, want %q", w, other)
	}
	// The survivor started leading only after the leader died: its log
	// says "leading" once, after the kill.
	leads := strings.Count(survivor.logs.String(), `"stack controller: leading"`)
	if leads != 1 {
		t.Fatalf("%s led %d times, want once (after the kill)\n%s", other, leads, survivor.logs)
	}
	t.Logf("%s led first; %s took over and applied the change %v after the kill", leader, other, took.Round(time.Millisecond))
	k(survivor, "wait", "--for=condition=Ready", "dbs/orders", "--timeout=30s")
}

func regexpMatch(pattern, s string) bool {
	ok, _ := regexp.MatchString(pattern, s)
	return ok
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func dbResource(plural, kind string) client.Resource {
	g := "example.org"
	if plural == "dbs" {
		g = "db.test.cairn.dev"
	}
	return client.Resource{Group: g, Version: "v1", Plural: plural, Kind: kind, Namespaced: true}
}

// writerOf is the createdBy of a Database or Bucket child's latest
// resource version.
func writerOf(ctx context.Context, t *testing.T, c *client.Client, name string) string {
	t.Helper()
	plural, kind := "databases", "Database"
	if strings.HasSuffix(name, "backups") {
		plural, kind = "buckets", "Bucket"
	}
	raw, err := c.Get(ctx, dbResource(plural, kind), "default", name)
	if err != nil {
		t.Fatalf("get %s: %v", name, err)
	}
	var o struct {
		Status struct {
			CreatedBy string `json:"createdBy"`
		} `json:"status"`
	}
	if err := json.Unmarshal(raw, &o); err != nil {
		t.Fatal(err)
	}
	return o.Status.CreatedBy
}

// waitServes waits until r's discovery serves a resource (each replica
// caches the Types for a moment).
func waitServes(t *testing.T, r *replica, plural string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := r.client.FindResource(context.Background(), plural); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s does not serve %s", r.name, plural)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func moduleRoot(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatal(fmt.Errorf("go env GOMOD: %w", err))
	}
	return filepath.Dir(strings.TrimSpace(string(out)))
}
