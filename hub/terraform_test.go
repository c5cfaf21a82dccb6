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
	if ip.TypeRef.Path != hub.TerraformOutputPath || !cairn.JSONEqual(ip.Latest.Value, json.RawMessage(`{"state":"net","output":"ip","value":"10.0.0.1","type":"string"}`)) {
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
	if err != nil || !cairn.JSONEqual(doc, v2) {
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

// Output instances are named <state>-<output>, so output b_c of state a
// and output c of state a-b want one name. The second write is refused as
// a conflict naming both, on a state's first write and on a later one, and
// changes nothing; it used to answer "state was not found" (first write)
// or a bare "already exists".
func TestTerraformOutputNameTakenByAnotherState(t *testing.T) {
	tests := []struct {
		name      string
		first     bool // the refused write is the state's first
		sensitive bool
	}{
		{"first write of the state", true, false},
		{"later write of the state", false, false},
		{"sensitive outputs", true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newTFEnv(t)
			mark := "" // tfDoc's prefix of a sensitive output
			if tt.sensitive {
				mark = "!"
			}
			if _, err := e.h.PutTerraformState(e.ctx, "default", "a", "", tfDoc("LA", 1, map[string]string{mark + "b_c": `"from-a"`})); err != nil {
				t.Fatal(err)
			}
			serial := 1
			if !tt.first {
				if _, err := e.h.PutTerraformState(e.ctx, "default", "a-b", "", tfDoc("LB", 1, map[string]string{"x": `"1"`})); err != nil {
					t.Fatal(err)
				}
				serial = 2
			}
			beforeA := e.tfSnapshot("a")
			_, err := e.h.PutTerraformState(e.ctx, "default", "a-b", "", tfDoc("LB", serial, map[string]string{"x": `"2"`, mark + "c": `"from-a-b"`}))
			want := `state "default/a-b": nothing was written: output "c" would be the instance`
			wantOther := `"a-b-c", which is already output "b_c" of state "default/a"`
			if !cairn.HasCode(err, cairn.CodeConflict) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), wantOther) {
				t.Fatalf("err = %v (code %s), want Conflict saying %q and %q", err, cairn.ErrorCode(err), want, wantOther)
			}
			if got := e.tfSnapshot("a"); got != beforeA {
				t.Errorf("state a changed:\nbefore %s\nafter  %s", beforeA, got)
			}
			hist, err := e.h.TerraformStateHistory(e.ctx, "default", "a-b")
			switch {
			case tt.first && !cairn.HasCode(err, cairn.CodeNotFound):
				t.Errorf("state a-b after its refused first write: %+v %v", hist, err)
			case !tt.first && (err != nil || len(hist) != 1):
				t.Errorf("state a-b history after a refused write: %+v %v", hist, err)
			}
		})
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
	// Nor does a list show it inside the state document.
	states, err := e.h.ListInstances(e.ctx, store.InstanceFilter{TypePath: hub.TerraformStatePath}, true)
	if err != nil || len(states) != 1 {
		t.Fatalf("list states: %d, %v", len(states), err)
	}
	if v := string(states[0].Latest.Value); strings.Contains(v, "t0ps3cret") || !strings.Contains(v, `"url":{"sensitive":false,"type":"string","value":"u"}`) {
		t.Errorf("a list shows the state as %s", v)
	}
	if v := string(e.get(states[0].ID).Latest.Value); !strings.Contains(v, "t0ps3cret") {
		t.Errorf("reading the state gives %s", v)
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

// Output instances have readable ids derived from namespace and name,
// the same across applies, so the TypeInstance view names them and a
// reference to one survives every apply.
func TestTerraformReadableIDs(t *testing.T) {
	e := newTFEnv(t)
	st, err := e.h.PutTerraformState(e.ctx, "default", "net", "", tfDoc("L", 1, map[string]string{"ip": `"a"`, "db_host": `"h"`, "!pw": `"p"`}))
	if err != nil {
		t.Fatal(err)
	}
	if st.ID != "terraformstate.default.net" {
		t.Errorf("state id %q", st.ID)
	}
	want := map[string]string{"net-ip": "terraformoutput.default.net-ip", "net-db-host": "terraformoutput.default.net-db-host",
		"net-pw": "terraformsensitiveoutput.default.net-pw"}
	for name, id := range want {
		if got := e.outputs("net")[name].ID; got != id {
			t.Errorf("output %s has id %q, want %q", name, got, id)
		}
	}
	if _, err := e.h.PutTerraformState(e.ctx, "default", "net", "", tfDoc("L", 2, map[string]string{"ip": `"b"`, "db_host": `"h"`, "!pw": `"p"`})); err != nil {
		t.Fatal(err)
	}
	ip := e.get("terraformoutput.default.net-ip")
	if ip.Latest.ResourceVersion != 2 || !strings.Contains(string(ip.Latest.Value), `"value":"b"`) {
		t.Errorf("after the second apply the same id holds version %d %s", ip.Latest.ResourceVersion, ip.Latest.Value)
	}
	// The same state and output names in another namespace are other ids.
	other, err := e.h.PutTerraformState(e.ctx, "team-b", "net", "", tfDoc("M", 1, map[string]string{"ip": `"c"`}))
	if err != nil || other.ID != "terraformstate.team-b.net" {
		t.Fatalf("state in team-b: %v %v", other.ID, err)
	}
	if v := e.get("terraformoutput.team-b.net-ip").Latest.Value; !strings.Contains(string(v), `"value":"c"`) {
		t.Errorf("team-b's output: %s", v)
	}
	// An output that turns sensitive is replaced by an instance of the
	// other Type, with the other id.
	if _, err := e.h.PutTerraformState(e.ctx, "default", "net", "", tfDoc("L", 3, map[string]string{"!ip": `"b"`, "db_host": `"h"`, "!pw": `"p"`})); err != nil {
		t.Fatal(err)
	}
	if _, err := e.h.GetInstance(e.ctx, "terraformoutput.default.net-ip", false); !cairn.HasCode(err, cairn.CodeNotFound) {
		t.Errorf("the plain output is still there: %v", err)
	}
	if p := e.get("terraformsensitiveoutput.default.net-ip"); p.TypeRef.Path != hub.TerraformSensitivePath {
		t.Errorf("the sensitive output: %s", p.TypeRef)
	}
}

// A state write is one transaction: the state's version and every output's
// create, update and delete happen together or not at all, whichever step
// fails.
func TestTerraformWriteIsAllOrNothing(t *testing.T) {
	e := newTFEnv(t)
	outsID, outsB := e.addBackend("outs", true, "")
	if _, err := e.h.ApplyPolicy(e.ctx, policy.Policy{TypeInstance: policy.TypeInstancePolicy{Rules: []policy.Rule{
		{TypeRef: policy.TypeRef{Path: hub.TerraformOutputPath}, Backend: policy.BackendRef{ID: outsID}},
	}}}); err != nil {
		t.Fatal(err)
	}
	v1 := map[string]string{"a": `"a1"`, "b": `"b1"`, "c": `"c1"`}
	if _, err := e.h.PutTerraformState(e.ctx, "default", "s", "", tfDoc("L", 1, v1)); err != nil {
		t.Fatal(err)
	}
	before := e.tfSnapshot("s")
	// The next state changes a and c, drops b and adds d.
	v2 := tfDoc("L", 2, map[string]string{"a": `"a2"`, "c": `"c2"`, "d": `"d2"`})

	unchanged := func(t *testing.T, err error) {
		t.Helper()
		if err == nil {
			t.Fatal("the write succeeded")
		}
		if !strings.Contains(err.Error(), "nothing was written") {
			t.Errorf("error %q does not say that nothing was written", err)
		}
		if got := e.tfSnapshot("s"); got != before {
			t.Errorf("a failed write changed the hub:\nbefore %s\nafter  %s", before, got)
		}
		// The backend holds what it held: versions the write stored are
		// gone again, d was never left there.
		for id, want := range map[string]string{"terraformoutput.default.s-a": "a1", "terraformoutput.default.s-c": "c1"} {
			v, err := outsB.Backend.GetValue(e.ctx, cairn.GetValueRequest{InstanceID: id, ResourceVersion: 2})
			if err == nil {
				t.Errorf("the backend still has version 2 of %s: %s", id, v)
			}
			v, err = outsB.Backend.GetValue(e.ctx, cairn.GetValueRequest{InstanceID: id, ResourceVersion: 1})
			if err != nil || !strings.Contains(string(v), want) {
				t.Errorf("%s version 1 in the backend: %s %v", id, v, err)
			}
		}
		if v, err := outsB.Backend.GetValue(e.ctx, cairn.GetValueRequest{InstanceID: "terraformoutput.default.s-d", ResourceVersion: 1}); err == nil {
			t.Errorf("the backend kept the new output d: %s", v)
		}
	}

	t.Run("the backend fails an update halfway", func(t *testing.T) {
		outsB.failOn("OnUpdate", func(id string) error {
			if id == "terraformoutput.default.s-c" {
				return cairn.Errorf(cairn.CodeUnavailable, "disk full")
			}
			return nil
		})
		defer outsB.failOn("OnUpdate", nil)
		_, err := e.h.PutTerraformState(e.ctx, "default", "s", "", v2)
		unchanged(t, err)
		if !strings.Contains(err.Error(), "disk full") {
			t.Errorf("error %q does not say what failed", err)
		}
	})
	t.Run("the store refuses after the backend wrote", func(t *testing.T) {
		// While the backend stores the new output d, another client locks
		// output b, which the write deletes: the transaction refuses it
		// after the backend has written a, c and d.
		outsB.failOn("OnCreate", func(id string) error {
			if id == "terraformoutput.default.s-d" {
				if err := e.h.LockInstances(e.ctx, []string{"terraformoutput.default.s-b"}, "someone"); err != nil {
					t.Errorf("lock b: %v", err)
				}
			}
			return nil
		})
		defer outsB.failOn("OnCreate", nil)
		_, err := e.h.PutTerraformState(e.ctx, "default", "s", "", v2)
		if !cairn.HasCode(err, cairn.CodeLocked) {
			t.Errorf("err = %v, want Locked", err)
		}
		if err := e.h.UnlockInstances(e.ctx, []string{"terraformoutput.default.s-b"}, "someone"); err != nil {
			t.Fatal(err)
		}
		unchanged(t, err)
		if len(outsB.called("OnDeleteRevision")) == 0 || len(outsB.called("OnDelete terraformoutput.default.s-d")) == 0 {
			t.Errorf("no rollback in the backend: %v", outsB.called("On"))
		}
	})
	t.Run("an output the hub cannot name", func(t *testing.T) {
		_, err := e.h.PutTerraformState(e.ctx, "default", "s", "", tfDoc("L", 2, map[string]string{"a": `"a2"`, "Bad.Name!": `"x"`}))
		if !cairn.HasCode(err, cairn.CodeInvalid) {
			t.Fatalf("err = %v, want Invalid", err)
		}
		if got := e.tfSnapshot("s"); got != before {
			t.Errorf("a refused write changed the hub:\nbefore %s\nafter  %s", before, got)
		}
	})

	// The same write succeeds once nothing fails, all at once.
	if _, err := e.h.PutTerraformState(e.ctx, "default", "s", "", v2); err != nil {
		t.Fatal(err)
	}
	if got := keys(e.outputs("s")); got != "s-a,s-c,s-d" {
		t.Errorf("outputs after the write: %s", got)
	}
	if _, err := outsB.Backend.GetValue(e.ctx, cairn.GetValueRequest{InstanceID: "terraformoutput.default.s-b", ResourceVersion: 1}); err == nil {
		t.Error("the dropped output's value is still in the backend")
	}

	// DELETE is one transaction too: refused as a whole while an output
	// is used by another instance.
	user := e.create(hub.NewInstance{Alias: "user", TypeRef: cairn.TypeRef{Path: "cap.type.app", Revision: "0.1.0"}, Value: json.RawMessage(`{}`)})
	if err := e.h.AddUses(e.ctx, user, []string{"terraformoutput.default.s-c"}); err != nil {
		t.Fatal(err)
	}
	mid := e.tfSnapshot("s")
	if err := e.h.DeleteTerraformState(e.ctx, "default", "s", ""); !cairn.HasCode(err, cairn.CodeUsedBy) {
		t.Errorf("delete while an output is used: %v, want UsedBy", err)
	}
	if got := e.tfSnapshot("s"); got != mid {
		t.Errorf("a refused delete changed the hub:\nbefore %s\nafter  %s", mid, got)
	}
}

// tfSnapshot describes a state and its outputs: ids, versions and values.
func (e *env) tfSnapshot(state string) string {
	e.t.Helper()
	var b strings.Builder
	st, err := e.h.GetInstanceByName(e.ctx, hub.TerraformStatePath, "default", state, false)
	if err != nil {
		e.t.Fatal(err)
	}
	fmt.Fprintf(&b, "state %s v%d lock=%q;", st.ID, st.Latest.ResourceVersion, st.LockedBy)
	outs := e.outputs(state)
	for _, n := range slices.Sorted(maps.Keys(outs)) {
		o := e.get(outs[n].ID)
		fmt.Fprintf(&b, " %s v%d %s lock=%q;", o.ID, o.Latest.ResourceVersion, o.Latest.Value, o.LockedBy)
	}
	return b.String()
}

// Outputs an earlier cairn created with UUIDs get their readable ids on the
// next write, unless another instance uses them.
func TestTerraformLegacyOutputIDs(t *testing.T) {
	e := newTFEnv(t)
	if _, err := e.h.PutTerraformState(e.ctx, "default", "old", "", tfDoc("L", 1, map[string]string{"a": `"1"`, "b": `"1"`})); err != nil {
		t.Fatal(err)
	}
	// Make a and b what an earlier cairn wrote: instances with UUIDs.
	st := e.outputs("old")
	for _, n := range []string{"old-a", "old-b"} {
		o := st[n]
		if err := e.h.DeleteInstance(e.ctx, o.ID, ""); err != nil {
			t.Fatal(err)
		}
		stInst, _ := e.h.GetInstanceByName(e.ctx, hub.TerraformStatePath, "default", "old", false)
		out, err := e.h.CreateInstances(e.ctx, hub.CreateRequest{Instances: []hub.NewInstance{{Alias: "o", Name: n, TypeRef: o.TypeRef, Labels: o.Labels, Value: o.Latest.Value}},
			UsesRelations: []hub.UsesRelation{{From: "o", To: stInst.ID}}})
		if err != nil {
			t.Fatal(err)
		}
		st[n] = out[0].Instance
	}
	user := e.create(hub.NewInstance{Alias: "user", TypeRef: cairn.TypeRef{Path: "cap.type.app", Revision: "0.1.0"}, Value: json.RawMessage(`{}`)})
	if err := e.h.AddUses(e.ctx, user, []string{st["old-b"].ID}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.h.PutTerraformState(e.ctx, "default", "old", "", tfDoc("L", 2, map[string]string{"a": `"2"`, "b": `"2"`})); err != nil {
		t.Fatal(err)
	}
	now := e.outputs("old")
	if now["old-a"].ID != "terraformoutput.default.old-a" || !strings.Contains(string(now["old-a"].Latest.Value), `"value":"2"`) {
		t.Errorf("unused legacy output a: %s %s", now["old-a"].ID, now["old-a"].Latest.Value)
	}
	if now["old-b"].ID != st["old-b"].ID || now["old-b"].Latest.ResourceVersion != 2 {
		t.Errorf("used legacy output b: %s v%d, want it kept as %s v2", now["old-b"].ID, now["old-b"].Latest.ResourceVersion, st["old-b"].ID)
	}
}

func TestIsTerraformID(t *testing.T) {
	for s, want := range map[string]bool{
		"terraformoutput.default.network-ip":               true,
		"terraformstate.team-a.app.v2":                     true, // a name may have dots
		"terraformsensitiveoutput.default.network-db-pass": true,
		"terraformoutput.default":                          false,
		"terraformoutputs.terraform.cairn.dev":             false, // a resource type, not an id
		"terraformoutput.Default.x":                        false,
		"terraformoutput.default.-x":                       false,
		"flag.default.x":                                   false,
		"2f1d4a36-9c1e-4a57-8f0e-8d3c2b1a0f9e":             false,
	} {
		if got := hub.IsTerraformID(s); got != want {
			t.Errorf("IsTerraformID(%q) = %v, want %v", s, got, want)
		}
	}
}

// TestTerraformStateAddressMustBeValid: tofu's http backend takes a GET
// answered 404 as "no state yet", so a read of a state whose namespace or
// name can never exist (My_State, a namespace with a dot) must not be
// NotFound: tofu planned from an empty state, and with -lock=false created
// everything again before its write was refused. Every operation refuses
// such an address as Invalid, naming it, and creates nothing.
func TestTerraformStateAddressMustBeValid(t *testing.T) {
	e := newTFEnv(t)
	for _, tc := range []struct{ ns, name, msg string }{
		{"default", "My_State", `state name "My_State" must be a DNS subdomain`},
		{"default", "-x", `state name "-x" must be a DNS subdomain`},
		{"default", strings.Repeat("a", 254), "must be a DNS subdomain"},
		{"Team_A", "net", `namespace "Team_A" must be a DNS label`},
		{"a.b", "net", `namespace "a.b" must be a DNS label`},
	} {
		ops := map[string]func() error{
			"get": func() error { _, _, err := e.h.TerraformState(e.ctx, tc.ns, tc.name); return err },
			"put": func() error {
				_, err := e.h.PutTerraformState(e.ctx, tc.ns, tc.name, "", tfDoc("L", 1, nil))
				return err
			},
			"lock":    func() error { return e.h.LockTerraformState(e.ctx, tc.ns, tc.name, tfstate.LockInfo{ID: "l"}) },
			"unlock":  func() error { return e.h.UnlockTerraformState(e.ctx, tc.ns, tc.name, "l") },
			"delete":  func() error { return e.h.DeleteTerraformState(e.ctx, tc.ns, tc.name, "") },
			"history": func() error { _, err := e.h.TerraformStateHistory(e.ctx, tc.ns, tc.name); return err },
			"diff":    func() error { _, err := e.h.TerraformStateDiff(e.ctx, tc.ns, tc.name, 1, 2); return err },
		}
		for _, op := range slices.Sorted(maps.Keys(ops)) {
			if err := ops[op](); !cairn.HasCode(err, cairn.CodeInvalid) || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("%s %s/%s: %v (code %s), want Invalid containing %q", op, tc.ns, tc.name, err, cairn.ErrorCode(err), tc.msg)
			}
		}
	}
	list, err := e.h.ListInstances(e.ctx, store.InstanceFilter{TypePath: "cap.type.terraform.*"}, false)
	if err != nil || len(list) != 0 {
		t.Errorf("refused addresses left instances: %d, %v", len(list), err)
	}
}

// TestTerraformInstancesFollowTheProtocol: a state's value is written by
// tofu through the protocol, which checks lineage and serial and brings
// the outputs in line; an output's value follows its state. A generic
// update (kubectl edit or patch, apply, GraphQL, the CLI) of either value,
// or of what the protocol keys on (the lineage and serial annotations, the
// state and output labels), used to be stored: a patch could set the
// state's format version to 3 or lower its serial, and tofu then read a
// state it refuses while the outputs kept the old values. Such an update
// is refused, naming the way to change it, and changes nothing; other
// labels and annotations stay the caller's.
func TestTerraformInstancesFollowTheProtocol(t *testing.T) {
	e := newTFEnv(t)
	doc := tfDoc("L1", 3, map[string]string{"ip": `"10.0.0.1"`})
	st, err := e.h.PutTerraformState(e.ctx, "default", "net", "", doc)
	if err != nil {
		t.Fatal(err)
	}
	out := e.outputs("net")["net-ip"]
	with := func(m map[string]string, k, v string) map[string]string {
		c := maps.Clone(m)
		if c == nil {
			c = map[string]string{}
		}
		c[k] = v
		return c
	}
	for _, tc := range []struct {
		name string
		up   hub.UpdateInstance
		msg  string // "": allowed
	}{
		{"the state's value", hub.UpdateInstance{ID: st.ID, Value: json.RawMessage(`{"version":3,"serial":0,"lineage":"evil"}`)},
			`TerraformState "default/net" is written by OpenTofu/Terraform`},
		{"the same state value again", hub.UpdateInstance{ID: st.ID, Value: doc}, `TerraformState "default/net" is written by OpenTofu/Terraform`},
		{"the state's serial annotation", hub.UpdateInstance{ID: st.ID, Annotations: with(st.Annotations, hub.TerraformSerialAnnotation, "99")},
			`annotation "terraform.cairn.dev/serial"`},
		{"the state's lineage annotation removed", hub.UpdateInstance{ID: st.ID, Annotations: map[string]string{}},
			`annotation "terraform.cairn.dev/lineage"`},
		{"an output's value", hub.UpdateInstance{ID: out.ID, Value: json.RawMessage(`{"state":"net","output":"ip","value":"6.6.6.6"}`)},
			`TerraformOutput "default/net-ip" is output "ip" of state "default/net"`},
		{"an output's state label", hub.UpdateInstance{ID: out.ID, Labels: with(out.Labels, hub.TerraformStateLabel, "other")},
			`label "terraform.cairn.dev/state"`},
		{"another label on an output", hub.UpdateInstance{ID: out.ID, Labels: with(out.Labels, "team", "a")}, ""},
		{"another annotation on the state", hub.UpdateInstance{ID: st.ID, Annotations: with(st.Annotations, "note", "x")}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.h.UpdateInstances(e.ctx, []hub.UpdateInstance{tc.up})
			if tc.msg == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !cairn.HasCode(err, cairn.CodeInvalid) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("err = %v (code %s), want Invalid containing %q", err, cairn.ErrorCode(err), tc.msg)
			}
		})
	}
	got, _, err := e.h.TerraformState(e.ctx, "default", "net")
	if err != nil || !cairn.JSONEqual(got, doc) {
		t.Errorf("the state is %s, %v; want the document tofu wrote", got, err)
	}
	if o := e.outputs("net")["net-ip"]; !strings.Contains(string(o.Latest.Value), "10.0.0.1") || o.Labels["team"] != "a" {
		t.Errorf("net-ip is %s %v", o.Latest.Value, o.Labels)
	}
	// tofu's next write is checked against what it wrote last.
	if _, err := e.h.PutTerraformState(e.ctx, "default", "net", "", tfDoc("L1", 4, map[string]string{"ip": `"10.0.0.2"`})); err != nil {
		t.Errorf("the next write: %v", err)
	}
}

// TestTerraformStatesAreCreatedByTheProtocol: a state created generically
// (kubectl create -f, GraphQL) had no lineage annotation, so the protocol
// took the first write of any configuration over it; it is refused,
// naming the protocol, and nothing is created.
func TestTerraformStatesAreCreatedByTheProtocol(t *testing.T) {
	e := newTFEnv(t)
	_, err := e.h.CreateInstances(e.ctx, hub.CreateRequest{Instances: []hub.NewInstance{{Namespace: "default", Name: "x",
		TypeRef: cairn.TypeRef{Path: hub.TerraformStatePath, Revision: "0.1.0"}, Value: json.RawMessage(`{"version":4,"serial":1,"lineage":"L","outputs":{},"resources":[]}`)}}})
	if want := `TerraformState "default/x" is written by OpenTofu/Terraform`; !cairn.HasCode(err, cairn.CodeInvalid) || !strings.Contains(err.Error(), want) {
		t.Errorf("create: %v (code %s), want Invalid containing %q", err, cairn.ErrorCode(err), want)
	}
	list, err := e.h.ListInstances(e.ctx, store.InstanceFilter{TypePath: "cap.type.terraform.*"}, false)
	if err != nil || len(list) != 0 {
		t.Errorf("a refused create left %d instances, %v", len(list), err)
	}
}

// TestTerraformSensitiveAttributesHiddenInLists: a resource instance whose
// provider marks attributes sensitive (sensitive_attributes, as terraform
// 1.11 writes them for terraform_data) shows none of its attribute values
// where sensitive outputs are hidden (lists, watches, reads without
// reveal): its output attribute mirrors the input unmarked, so hiding the
// marked paths alone would not do. Other instances show theirs; reading
// the state by id shows all.
func TestTerraformSensitiveAttributesHiddenInLists(t *testing.T) {
	e := newTFEnv(t)
	doc := `{"version":4,"terraform_version":"1.11.4","serial":1,"lineage":"L","outputs":{},"resources":[` +
		`{"mode":"managed","type":"terraform_data","name":"db","provider":"provider[\"terraform.io/builtin/terraform\"]","instances":[{"schema_version":0,` +
		`"attributes":{"id":"6f6c","input":{"value":{"password":"tf-s3cret-pw","user":"u"},"type":["object",{"password":"string","user":"string"}]},` +
		`"output":{"value":{"password":"tf-s3cret-pw","user":"u"},"type":["object",{"password":"string","user":"string"}]},"triggers_replace":null},` +
		`"sensitive_attributes":[[{"type":"get_attr","value":"input"},{"type":"get_attr","value":"password"}]]}]},` +
		`{"mode":"managed","type":"terraform_data","name":"plain","provider":"provider[\"terraform.io/builtin/terraform\"]","instances":[{"schema_version":0,` +
		`"attributes":{"id":"7a7b","input":{"value":"visible-input","type":"string"}},"sensitive_attributes":[]}]},` +
		`{"mode":"data","type":"x","name":"older","provider":"provider[\"example.org/x\"]","instances":[{"attributes":{"id":"visible-older"}}]}],"check_results":null}`
	if _, err := e.h.PutTerraformState(e.ctx, "default", "app", "", json.RawMessage(doc)); err != nil {
		t.Fatal(err)
	}
	states, err := e.h.ListInstances(e.ctx, store.InstanceFilter{TypePath: hub.TerraformStatePath}, true)
	if err != nil || len(states) != 1 {
		t.Fatalf("list states: %d, %v", len(states), err)
	}
	v := string(states[0].Latest.Value)
	if strings.Contains(v, "tf-s3cret-pw") || !strings.Contains(v, `"input":"`+hub.SensitiveMarker+`"`) {
		t.Errorf("a list shows the state as %s", v)
	}
	if !strings.Contains(v, "visible-input") || !strings.Contains(v, "visible-older") || !strings.Contains(v, `"name":"db"`) {
		t.Errorf("a list hides more than the marked instance: %s", v)
	}
	if v := string(e.get(states[0].ID).Latest.Value); !strings.Contains(v, "tf-s3cret-pw") {
		t.Errorf("reading the state gives %s", v)
	}
}
