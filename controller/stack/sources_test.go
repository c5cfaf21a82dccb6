package stack_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/hub"
)

// putState writes a version of Terraform state "network" whose outputs are
// those of examples/terraform/main.tf for cidr.
func (e *env) putState(serial int, cidr string) {
	e.t.Helper()
	doc := fmt.Sprintf(`{"version":4,"terraform_version":"1.10.10","serial":%d,"lineage":"L","outputs":{`+
		`"vpc_cidr":{"value":%q,"type":"string"},`+
		`"subnets":{"value":["%s.1.0/24","%s.2.0/24"],"type":["tuple",["string","string"]]},`+
		`"admin_token":{"value":"token-for-%s","type":"string","sensitive":true}},"resources":[]}`, serial, cidr, cidr, cidr, cidr)
	if _, err := e.h.PutTerraformState(e.ctx, "default", "network", "", json.RawMessage(doc)); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) installFrom(name, sources, spec string) cairn.Instance {
	e.t.Helper()
	entry := e.addOrGetStack()
	created, err := e.h.CreateInstances(e.ctx, hub.CreateRequest{Instances: []hub.NewInstance{{Name: name, TypeRef: entry.InstallationType,
		Annotations: map[string]string{hub.AnnotationParametersFrom: sources}, Value: json.RawMessage(spec)}}})
	if err != nil {
		e.t.Fatal(err)
	}
	return created[0].Instance
}

func (e *env) addOrGetStack() hub.StackEntry {
	e.t.Helper()
	if got, err := e.h.GetStack(e.ctx, "app-network", "0.1.0"); err == nil {
		return got
	}
	return e.addStack(repoPath("examples", "terraform", "app-network"))
}

func (e *env) childValues(inst cairn.Instance) string {
	e.t.Helper()
	var vs []string
	for _, k := range e.children(inst) {
		vs = append(vs, k.Name+"="+string(k.Latest.Value))
	}
	slices.Sort(vs)
	return strings.Join(vs, " ")
}

func TestParametersFromTerraformOutputs(t *testing.T) {
	e := newEnv(t)
	if err := e.h.RegisterTerraformTypes(e.ctx); err != nil {
		t.Fatal(err)
	}
	e.putState(1, "10.0")
	const both = "vpcCIDR: {terraformOutput: network-vpc-cidr}\nsubnets: {terraformOutput: network-subnets}\n"
	// A source wins over the same parameter in the spec.
	inst := e.installFrom("shop", both, `{"vpcCIDR":"ignored","port":443}`)
	e.reconcile(inst.ID)
	want := `shop-ingress={"port":443,"sourceRanges":["10.0.1.0/24","10.0.2.0/24"]} shop-settings={"vpcCIDR":"10.0"}`
	if got := e.childValues(inst); got != want {
		t.Fatalf("children = %s\nwant       %s\n(status %s)", got, want, e.get(inst.ID).Status)
	}
	if st := e.status(inst.ID); st.Outputs["vpcCIDR"] != "10.0" {
		t.Errorf("outputs = %v", st.Outputs)
	}
	uses := e.get(inst.ID).Uses
	for _, id := range []string{"terraformoutput.default.network-vpc-cidr", "terraformoutput.default.network-subnets"} {
		if !slices.Contains(uses, id) {
			t.Errorf("the installation uses %v, want %s among them", uses, id)
		}
	}
	// The next state version flows in on the next reconcile.
	e.putState(2, "10.7")
	e.reconcile(inst.ID)
	if got := e.childValues(inst); !strings.Contains(got, `"10.7.1.0/24"`) || !strings.Contains(got, `{"vpcCIDR":"10.7"}`) {
		t.Errorf("after the next state: %s", got)
	}
	// Sources that go stop being used: subnets now comes from the spec.
	cur := e.get(inst.ID)
	ann := map[string]string{hub.AnnotationParametersFrom: "vpcCIDR: {terraformOutput: network-vpc-cidr}"}
	if _, err := e.h.UpdateInstances(e.ctx, []hub.UpdateInstance{{ID: inst.ID, Annotations: ann, Value: json.RawMessage(`{"subnets":["192.168.0.0/24"]}`), IfSeq: cur.Seq}}); err != nil {
		t.Fatal(err)
	}
	e.reconcile(inst.ID)
	if got := e.childValues(inst); !strings.Contains(got, `"sourceRanges":["192.168.0.0/24"]`) {
		t.Errorf("after dropping the subnets source: %s", got)
	}
	uses = e.get(inst.ID).Uses
	if slices.Contains(uses, "terraformoutput.default.network-subnets") || !slices.Contains(uses, "terraformoutput.default.network-vpc-cidr") {
		t.Errorf("after dropping the subnets source the installation uses %v", uses)
	}

	bad := []struct {
		name, sources, reason, msg string
	}{
		{"not a mapping", "- vpcCIDR", "InvalidParameterSource", "not a mapping of parameter to source"},
		{"an unknown field", "vpcCIDR: {terraformOutputs: network-vpc-cidr}", "InvalidParameterSource", `unknown field "terraformOutputs"`},
		{"no name", "vpcCIDR: {terraformOutput: ''}", "InvalidParameterSource", "a source is {terraformOutput: NAME}"},
		{"an output the state does not have", "vpcCIDR: {terraformOutput: network-nope}", "ParameterSourceNotFound", "Terraform output default/network-nope does not exist"},
		{"a sensitive output", "vpcCIDR: {terraformOutput: network-admin-token}", "InvalidParameterSource", "is sensitive"},
	}
	for i, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			inst := e.installFrom(fmt.Sprintf("bad-%d", i), tt.sources, `{"subnets":[]}`)
			e.reconcile(inst.ID)
			st := e.status(inst.ID)
			c := cond(st, "Synced")
			if c.Status != "False" || !strings.Contains(c.Message, tt.msg) {
				t.Errorf("Synced = %+v, want False with %q", c, tt.msg)
			}
			if n := len(st.Events); n == 0 || st.Events[n-1].Reason != tt.reason {
				t.Errorf("events = %+v, want reason %s", st.Events, tt.reason)
			}
			if strings.Contains(string(e.get(inst.ID).Status), "token-for-") {
				t.Errorf("the status shows a sensitive value: %s", e.get(inst.ID).Status)
			}
			if kids := e.children(inst); len(kids) != 0 {
				t.Errorf("%d children rendered", len(kids))
			}
		})
	}
}
