package stack_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/hub"
)

// Changing an installation's configuration set re-renders it: the children
// of the new set are created or changed, and those only the old set had are
// deleted (examples/stacks/sql-env: prod adds a replica to dev's network
// and primary).
func TestConfigurationSetSwitch(t *testing.T) {
	e := newEnv(t)
	entry := e.addStack(repoPath("examples", "stacks", "sql-env"))

	// The set field is part of the installation Type: the hub refuses a set
	// the stack does not have, naming the field.
	_, err := e.h.CreateInstances(e.ctx, hub.CreateRequest{Instances: []hub.NewInstance{{
		Name: "bad", TypeRef: entry.InstallationType, Value: json.RawMessage(`{"region":"us-west2","tier":"staging"}`)}}})
	if !cairn.HasCode(err, cairn.CodeInvalid) || !strings.Contains(err.Error(), "tier") {
		t.Fatalf("create with tier staging: %v, want Invalid naming tier", err)
	}

	inst := e.install(entry, "orders", nil, `{"region":"us-west2"}`)
	check := func(set string, want ...string) map[string]cairn.Instance {
		t.Helper()
		e.reconcile(inst.ID)
		st := e.status(inst.ID)
		if c := cond(st, "Synced"); c.Status != "True" {
			t.Fatalf("%s: Synced = %+v", set, c)
		}
		if st.Configuration != set || st.Outputs["tier"] != set {
			t.Errorf("status.configuration %q, outputs.tier %v; want %s", st.Configuration, st.Outputs["tier"], set)
		}
		kids := map[string]cairn.Instance{}
		var names []string
		for _, k := range e.children(inst) {
			kids[k.Name] = k
			names = append(names, k.Name)
		}
		slices.Sort(names)
		if !slices.Equal(names, want) {
			t.Fatalf("%s: children %v, want %v", set, names, want)
		}
		return kids
	}
	tierOf := func(k cairn.Instance) string {
		var v struct {
			ForProvider struct {
				Settings struct{ Tier string } `json:"settings"`
			} `json:"forProvider"`
		}
		if err := json.Unmarshal(k.Latest.Value, &v); err != nil {
			t.Fatal(err)
		}
		return v.ForProvider.Settings.Tier
	}

	kids := check("dev", "orders-main", "orders-network")
	if got := tierOf(kids["orders-main"]); got != "db-f1-micro" {
		t.Errorf("dev primary tier %q", got)
	}
	update := func(spec string) {
		t.Helper()
		if _, err := e.h.UpdateInstances(e.ctx, []hub.UpdateInstance{{ID: inst.ID, Value: json.RawMessage(spec)}}); err != nil {
			t.Fatal(err)
		}
	}

	update(`{"region":"us-west2","tier":"prod"}`)
	kids = check("prod", "orders-main", "orders-network", "orders-replica")
	if got := tierOf(kids["orders-main"]); got != "db-n1-standard-4" {
		t.Errorf("prod primary tier %q", got)
	}
	replica := kids["orders-replica"]
	if !slices.Contains(e.get(inst.ID).Uses, replica.ID) {
		t.Error("the installation does not use the replica")
	}

	// Back to dev: the replica, which only prod renders, is deleted.
	update(`{"region":"us-west2","tier":"dev"}`)
	kids = check("dev", "orders-main", "orders-network")
	if got := tierOf(kids["orders-main"]); got != "db-f1-micro" {
		t.Errorf("primary tier back in dev %q", got)
	}
	if _, err := e.h.GetInstance(e.ctx, replica.ID, false); !cairn.HasCode(err, cairn.CodeNotFound) {
		t.Errorf("the replica after going back to dev: %v, want NotFound", err)
	}
	if evs := e.status(inst.ID).Events; len(evs) == 0 || !strings.Contains(evs[len(evs)-1].Message, "deleted 1") {
		t.Errorf("events = %+v, want the last to say one child was deleted", evs)
	}
}
