package hub_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/backend/gotemplate"
	"github.com/cairn-dev/cairn/hub"
	"github.com/cairn-dev/cairn/policy"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/tfstate"
)

// tfDoc builds a version-4 state document with the given outputs (name ->
// JSON value; a name starting with "!" is sensitive).
func tfDoc(lineage string, serial int, outputs map[string]string) json.RawMessage {
	var outs []string
	for n, v := range outputs {
		sens := strings.HasPrefix(n, "!")
		n = strings.TrimPrefix(n, "!")
		outs = append(outs, fmt.Sprintf(`%q:{"value":%s,"type":"string","sensitive":%t}`, n, v, sens))
	}
	return json.RawMessage(fmt.Sprintf(`{"version":4,"terraform_version":"1.10.10","serial":%d,"lineage":%q,"outputs":{%s},`+
		`"resources":[{"mode":"managed","type":"terraform_data","name":"x","provider":"provider[\"terraform.io/builtin/terraform\"]","instances":[{"attributes":{"input":"s%d"}}]}],"check_results":null}`,
		serial, lineage, strings.Join(outs, ","), serial))
}

func newTFEnv(t *testing.T) *env {
	t.Helper()
	e := newEnv(t)
	if err := e.h.RegisterTerraformTypes(e.ctx); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *env) outputs(state string) map[string]cairn.Instance {
	e.t.Helper()
	sel := mustSelector(e.t, hub.TerraformStateLabel+"="+state)
	list, err := e.h.ListInstances(e.ctx, store.InstanceFilter{TypePath: "cap.type.terraform.*", Labels: sel}, true)
	if err != nil {
		e.t.Fatal(err)
	}
	m := map[string]cairn.Instance{}
	for _, i := range list {
		if i.TypeRef.Path != hub.TerraformStatePath {
			m[i.Name] = i
		}
	}
	return m
}

func TestTerraformStateVersionsAndOutputs(t *testing.T) {
	e := newTFEnv(t)
	if _, _, err := e.h.TerraformState(e.ctx, "default", "net"); !cairn.HasCode(err, cairn.CodeNotFound) {
		t.Fatalf("state before any write: err %v, want NotFound", err)
	}
	v1 := tfDoc("L1", 1, map[string]string{"ip": `"10.0.0.1"`, "db_host": `"db"`, "!password": `"hunter2"`})
	st, err := e.h.PutTerraformState(e.ctx, "default", "net", "", v1)
	if err != nil {
		t.Fatal(err)
	}
	outs := e.outputs("net")
	if len(outs) != 3 {
		t.Fatalf("outputs after the first write: %v", keys(outs))
	}
	ip := outs["net-ip"]
	if ip.TypeRef.Path != hub.TerraformOutputPath || !hub.JSONEqual(ip.Latest.Value, json.RawMessage(`{"state":"net","output":"ip","value":"10.0.0.1","type":"string"}`)) {
		t.Errorf("net-ip = %s %s", ip.TypeRef, ip.Latest.Value)
	}
	if len(ip.Uses) == 0 || !slices.Contains(ip.Uses, st.ID) {
		t.Errorf("net-ip uses %v, want the state %s", ip.Uses, st.ID)
	}
	if outs["net-db-host"].Labels[hub.TerraformOutputLabel] != "db_host" {
		t.Errorf("db_host's instance labels: %v", outs["net-db-host"].Labels)
	}
	if p := outs["net-password"]; p.TypeRef.Path != hub.TerraformSensitivePath {
		t.Errorf("a sensitive output has Type %s, want %s", p.TypeRef, hub.TerraformSensitivePath)
	}

	// Second write: ip changes, db_host is gone, region is new, password unchanged.
	v2 := tfDoc("L1", 2, map[string]string{"ip": `"10.0.0.2"`, "region": `"eu"`, "!password": `"hunter2"`})
	if _, err := e.h.PutTerraformState(e.ctx, "default", "net", "", v2); err != nil {
		t.Fatal(err)
	}
	outs = e.outputs("net")
	if got := keys(outs); got != "net-ip,net-password,net-region" {
		t.Fatalf("outputs after the second write: %s", got)
	}
	if outs["net-ip"].Latest.ResourceVersion != 2 || outs["net-password"].Latest.ResourceVersion != 1 {
		t.Errorf("ip at version %d (want 2), password at %d (want 1: unchanged outputs get no new version)",
			outs["net-ip"].Latest.ResourceVersion, outs["net-password"].Latest.ResourceVersion)
	}
	doc, _, err := e.h.TerraformState(e.ctx, "default", "net")
	if err != nil || !hub.JSONEqual(doc, v2) {
		t.Fatalf("TerraformState = %s, %v; want the second document", doc, err)
	}
	hist, err := e.h.TerraformStateHistory(e.ctx, "default", "net")
	if err != nil || len(hist) != 2 || hist[0].Serial != 1 || hist[1].Serial != 2 || hist[1].Outputs != 3 {
		t.Fatalf("history = %+v, %v", hist, err)
	}
	d, err := e.h.TerraformStateDiff(e.ctx, "default", "net", hist[0].ResourceVersion, hist[1].ResourceVersion)
	if err != nil {
		t.Fatal(err)
	}
	want := tfstate.Diff{ResourcesAdded: []string{}, ResourcesRemoved: []string{}, ResourcesChanged: []string{"terraform_data.x"},
		OutputsAdded: []string{"region"}, OutputsRemoved: []string{"db_host"}, OutputsChanged: []string{"ip"}}
	if fmt.Sprint(d) != fmt.Sprint(want) {
		t.Errorf("diff = %+v\nwant   %+v", d, want)
	}
}

func TestTerraformStateRefusals(t *testing.T) {
	e := newTFEnv(t)
	if _, err := e.h.PutTerraformState(e.ctx, "default", "s", "", tfDoc("L1", 5, nil)); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		doc  json.RawMessage
		code cairn.Code
		msg  string
	}{
		{"another lineage", tfDoc("L2", 6, nil), cairn.CodeConflict, `lineage mismatch: the stored state has lineage "L1", the new one "L2"`},
		{"an older serial", tfDoc("L1", 4, nil), cairn.CodeConflict, "serial 4 is older than the stored serial 5"},
		{"not JSON", json.RawMessage(`{"version":4,`), cairn.CodeInvalid, "not a valid state document"},
		{"format version 3", json.RawMessage(`{"version":3,"lineage":"L1","serial":9}`), cairn.CodeInvalid, "format version 3"},
		{"no lineage", json.RawMessage(`{"version":4,"serial":9}`), cairn.CodeInvalid, "has no lineage"},
		{"clashing output names", tfDoc("L1", 7, map[string]string{"a_b": `"1"`, "a-b": `"2"`}), cairn.CodeInvalid, "would both be instance \"s-a-b\""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := e.h.PutTerraformState(e.ctx, "default", "s", "", tt.doc)
			if !cairn.HasCode(err, tt.code) || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("err = %v (code %s), want %s containing %q", err, cairn.ErrorCode(err), tt.code, tt.msg)
			}
			hist, _ := e.h.TerraformStateHistory(e.ctx, "default", "s")
			if len(hist) != 1 {
				t.Errorf("a refused write changed the history: %+v", hist)
			}
		})
	}
	// The same serial again is accepted (tofu re-writes a state it did not change).
	if _, err := e.h.PutTerraformState(e.ctx, "default", "s", "", tfDoc("L1", 5, nil)); err != nil {
		t.Errorf("same serial: %v", err)
	}
}

func TestTerraformLock(t *testing.T) {
	e := newTFEnv(t)
	alice := tfstate.LockInfo{ID: "lock-a", Operation: "OperationTypeApply", Who: "alice@laptop", Version: "1.10.10"}
	// A first run locks before any state exists.
	if err := e.h.LockTerraformState(e.ctx, "default", "s", alice); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.h.TerraformState(e.ctx, "default", "s"); !cairn.HasCode(err, cairn.CodeNotFound) {
		t.Errorf("a locked state never written: err %v, want NotFound", err)
	}
	inst, err := e.h.GetInstanceByName(e.ctx, hub.TerraformStatePath, "default", "s", false)
	if err != nil || inst.LockedBy != "lock-a" || !strings.Contains(string(inst.Status), `"Who":"alice@laptop"`) {
		t.Fatalf("locked state: lockedBy %q status %s err %v", inst.LockedBy, inst.Status, err)
	}
	bob := tfstate.LockInfo{ID: "lock-b", Operation: "OperationTypePlan", Who: "bob@ci"}
	err = e.h.LockTerraformState(e.ctx, "default", "s", bob)
	holder, ok := hub.IsTerraformLocked(err)
	if !ok || holder != alice || !cairn.HasCode(err, cairn.CodeLocked) {
		t.Fatalf("second lock: %v (holder %+v)", err, holder)
	}
	if _, err := e.h.PutTerraformState(e.ctx, "default", "s", "lock-b", tfDoc("L", 1, nil)); !cairn.HasCode(err, cairn.CodeLocked) {
		t.Errorf("write with another lock: %v, want Locked", err)
	}
	if _, err := e.h.PutTerraformState(e.ctx, "default", "s", "", tfDoc("L", 1, nil)); !cairn.HasCode(err, cairn.CodeLocked) {
		t.Errorf("write without the lock: %v, want Locked", err)
	}
	if err := e.h.DeleteTerraformState(e.ctx, "default", "s", "lock-b"); !cairn.HasCode(err, cairn.CodeLocked) {
		t.Errorf("delete with another lock: %v, want Locked", err)
	}
	if err := e.h.UnlockTerraformState(e.ctx, "default", "s", "lock-b"); !cairn.HasCode(err, cairn.CodeLocked) {
		t.Errorf("unlock with another lock: %v, want Locked", err)
	}
	if _, err := e.h.PutTerraformState(e.ctx, "default", "s", "lock-a", tfDoc("L", 1, map[string]string{"o": `"v"`})); err != nil {
		t.Fatalf("write by the holder: %v", err)
	}
	if err := e.h.UnlockTerraformState(e.ctx, "default", "s", "lock-a"); err != nil {
		t.Fatal(err)
	}
	inst, _ = e.h.GetInstanceByName(e.ctx, hub.TerraformStatePath, "default", "s", false)
	if inst.LockedBy != "" || strings.Contains(string(inst.Status), "lock") {
		t.Errorf("after unlock: lockedBy %q status %s", inst.LockedBy, inst.Status)
	}
	// force-unlock: no lock ID releases whoever holds it.
	if err := e.h.LockTerraformState(e.ctx, "default", "s", bob); err != nil {
		t.Fatal(err)
	}
	if err := e.h.UnlockTerraformState(e.ctx, "default", "s", ""); err != nil {
		t.Fatal(err)
	}
	if err := e.h.LockTerraformState(e.ctx, "default", "s", alice); err != nil {
		t.Fatalf("lock after force-unlock: %v", err)
	}
	if err := e.h.DeleteTerraformState(e.ctx, "default", "s", "lock-a"); err != nil {
		t.Fatalf("delete by the holder: %v", err)
	}
	if n := len(e.outputs("s")); n != 0 {
		t.Errorf("%d output instances left after the state was deleted", n)
	}
}

func TestTerraformSensitiveOutputsFollowThePolicy(t *testing.T) {
	e := newTFEnv(t)
	secrets, _ := e.addBackend("secrets", true, "")
	if _, err := e.h.ApplyPolicy(e.ctx, policy.Policy{TypeInstance: policy.TypeInstancePolicy{Rules: []policy.Rule{
		{TypeRef: policy.TypeRef{Path: hub.TerraformSensitivePath}, Backend: policy.BackendRef{ID: secrets}},
	}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.h.PutTerraformState(e.ctx, "default", "app", "", tfDoc("L", 1, map[string]string{"url": `"u"`, "!token": `"t0ps3cret"`})); err != nil {
		t.Fatal(err)
	}
	outs := e.outputs("app")
	if b := outs["app-token"].Backend.ID; b != secrets {
		t.Errorf("sensitive output stored in %s, want the policy's %s", b, secrets)
	}
	if b := outs["app-url"].Backend.ID; b != cairn.BuiltinBackendID {
		t.Errorf("plain output stored in %s, want the built-in backend", b)
	}
	// Lists never show a sensitive value; reading the one instance does.
	if v := string(outs["app-token"].Latest.Value); strings.Contains(v, "t0ps3cret") || !strings.Contains(v, hub.SensitiveMarker) {
		t.Errorf("a list shows the sensitive output as %s", v)
	}
	if v := string(e.get(outs["app-token"].ID).Latest.Value); !strings.Contains(v, "t0ps3cret") {
		t.Errorf("reading the sensitive output gives %s", v)
	}
	// Writing the same state again changes no output (compared unredacted).
	if _, err := e.h.PutTerraformState(e.ctx, "default", "app", "", tfDoc("L", 2, map[string]string{"url": `"u"`, "!token": `"t0ps3cret"`})); err != nil {
		t.Fatal(err)
	}
	if rv := e.outputs("app")["app-token"].Latest.ResourceVersion; rv != 1 {
		t.Errorf("an unchanged sensitive output got version %d", rv)
	}
}

func keys(m map[string]cairn.Instance) string {
	return strings.Join(slices.Sorted(maps.Keys(m)), ",")
}

// An output instance is an instance like any other: a Go-template
// projection reads it and follows the next apply.
func TestTerraformOutputFeedsAProjection(t *testing.T) {
	e := newTFEnv(t)
	if _, err := e.h.PutTerraformState(e.ctx, "default", "net", "", tfDoc("L", 1, map[string]string{"ip": `"10.0.0.1"`})); err != nil {
		t.Fatal(err)
	}
	ip := e.outputs("net")["net-ip"]
	appType := cairn.TypeRef{Path: "cap.type.app.config", Revision: "0.1.0"}
	ctxDoc, _ := json.Marshal(gotemplate.Context{Template: `endpoint: "http://{{ .ip.value }}:8080"`,
		Variables: map[string]gotemplate.Variable{"ip": {TypeInstanceID: ip.ID}}})
	out, err := e.h.CreateInstances(e.ctx, hub.CreateRequest{
		Instances:     []hub.NewInstance{{Alias: "app", TypeRef: appType, Backend: &hub.BackendInput{ID: gotemplate.BackendID, Context: ctxDoc}}},
		UsesRelations: []hub.UsesRelation{{From: "app", To: ip.ID}},
	})
	if err != nil {
		t.Fatal(err)
	}
	jsonEq(t, e.get(out[0].ID).Latest.Value, `{"endpoint":"http://10.0.0.1:8080"}`)
	if _, err := e.h.PutTerraformState(e.ctx, "default", "net", "", tfDoc("L", 2, map[string]string{"ip": `"10.0.0.9"`})); err != nil {
		t.Fatal(err)
	}
	jsonEq(t, e.get(out[0].ID).Latest.Value, `{"endpoint":"http://10.0.0.9:8080"}`)
	// While the projection uses it, the output cannot disappear with the
	// output: the state write says so and changes nothing.
	if _, err := e.h.PutTerraformState(e.ctx, "default", "net", "", tfDoc("L", 3, nil)); !cairn.HasCode(err, cairn.CodeUsedBy) {
		t.Errorf("removing an output another instance uses: %v, want UsedBy", err)
	}
	if h, _ := e.h.TerraformStateHistory(e.ctx, "default", "net"); len(h) != 2 {
		t.Errorf("the refused write left %d versions, want 2", len(h))
	}
}
