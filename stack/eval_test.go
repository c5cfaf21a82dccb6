package stack

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestCheckReady(t *testing.T) {
	obj := map[string]any{
		"spec": map[string]any{
			"region": "us-west1", "empty": "", "none": nil, "list": []any{}, "obj": map[string]any{},
			"replicas": json.Number("3"), "float": 3.0, "half": 2.5, "ports": []any{map[string]any{"port": json.Number("80")}},
		},
		"status": map[string]any{
			"atProvider": map[string]any{"state": "RUNNABLE"},
			"conditions": []any{
				map[string]any{"type": "Synced", "status": "True"},
				map[string]any{"type": "Ready", "status": "False", "reason": "Creating", "message": "waiting for the instance"},
			},
		},
	}
	tests := []struct {
		name   string
		check  ReadinessCheck
		ready  bool
		reason string
	}{
		{"none", ReadinessCheck{Type: None}, true, ""},
		{"non-empty string", ReadinessCheck{Type: NonEmpty, FieldPath: "spec.region"}, true, ""},
		{"non-empty list item", ReadinessCheck{Type: NonEmpty, FieldPath: "spec.ports[0].port"}, true, ""},
		{"non-empty number", ReadinessCheck{Type: NonEmpty, FieldPath: "spec.replicas"}, true, ""},
		{"empty string", ReadinessCheck{Type: NonEmpty, FieldPath: "spec.empty"}, false, `spec.empty is empty ("")`},
		{"empty list", ReadinessCheck{Type: NonEmpty, FieldPath: "spec.list"}, false, "spec.list is empty (an empty list)"},
		{"empty object", ReadinessCheck{Type: NonEmpty, FieldPath: "spec.obj"}, false, "spec.obj is empty (an empty object)"},
		{"null", ReadinessCheck{Type: NonEmpty, FieldPath: "spec.none"}, false, "spec.none is not set"},
		{"missing", ReadinessCheck{Type: NonEmpty, FieldPath: "status.atProvider.ip"}, false, "status.atProvider.ip is not set"},
		{"string match", ReadinessCheck{Type: MatchString, FieldPath: "status.atProvider.state", MatchString: "RUNNABLE"}, true, ""},
		{"string mismatch", ReadinessCheck{Type: MatchString, FieldPath: "status.atProvider.state", MatchString: "READY"}, false,
			`status.atProvider.state is "RUNNABLE", want "READY"`},
		{"string of a number", ReadinessCheck{Type: MatchString, FieldPath: "spec.replicas", MatchString: "3"}, false, `spec.replicas is 3, want "3"`},
		{"string missing", ReadinessCheck{Type: MatchString, FieldPath: "status.phase", MatchString: "Bound"}, false, `status.phase is not set, want "Bound"`},
		{"integer match", ReadinessCheck{Type: MatchInteger, FieldPath: "spec.replicas", MatchInteger: 3}, true, ""},
		{"integer as float", ReadinessCheck{Type: MatchInteger, FieldPath: "spec.float", MatchInteger: 3}, true, ""},
		{"integer mismatch", ReadinessCheck{Type: MatchInteger, FieldPath: "spec.replicas", MatchInteger: 4}, false, "spec.replicas is 3, want 4"},
		{"not an integer", ReadinessCheck{Type: MatchInteger, FieldPath: "spec.half", MatchInteger: 2}, false, "spec.half is 2.5, want 2"},
		{"integer of a string", ReadinessCheck{Type: MatchInteger, FieldPath: "spec.region", MatchInteger: 1}, false, `spec.region is "us-west1", want 1`},
		{"integer missing", ReadinessCheck{Type: MatchInteger, FieldPath: "status.count", MatchInteger: 1}, false, "status.count is not set, want 1"},
		{"condition true", ReadinessCheck{Type: MatchCondition, MatchCondition: &ConditionMatch{Type: "Synced", Status: "True"}}, true, ""},
		{"condition default status", ReadinessCheck{Type: MatchCondition, MatchCondition: &ConditionMatch{Type: "Synced"}}, true, ""},
		{"condition false", ReadinessCheck{Type: MatchCondition, MatchCondition: &ConditionMatch{Type: "Ready"}}, false,
			`condition Ready is "False", want "True" (reason Creating, message "waiting for the instance")`},
		{"condition wanted false", ReadinessCheck{Type: MatchCondition, MatchCondition: &ConditionMatch{Type: "Ready", Status: "False"}}, true, ""},
		{"condition absent", ReadinessCheck{Type: MatchCondition, MatchCondition: &ConditionMatch{Type: "Healthy"}}, false,
			`condition Healthy is not in status.conditions, want "True"`},
		{"unknown type", ReadinessCheck{Type: "Eventually"}, false, `unknown readiness check type "Eventually"`},
	}
	for _, tt := range tests {
		ready, reason := CheckReady(tt.check, obj)
		if ready != tt.ready || reason != tt.reason {
			t.Errorf("%s: CheckReady = %v %q, want %v %q", tt.name, ready, reason, tt.ready, tt.reason)
		}
	}
	// No status at all.
	if ready, reason := CheckReady(ReadinessCheck{Type: MatchCondition, MatchCondition: &ConditionMatch{Type: "Ready"}}, map[string]any{}); ready || !strings.Contains(reason, "not in status.conditions") {
		t.Errorf("no status: %v %q", ready, reason)
	}
}

// TestReadinessOfExamples: the examples' children are Ready as rendered,
// which is what lets an installation become Ready without a provider.
func TestReadinessOfExamples(t *testing.T) {
	for src, spec := range map[string]map[string]any{
		minimalGCP: {"region": "us-west1", "projectID": "bars-project"},
		flagsEnv:   {"team": "bars"},
	} {
		s := mustLoad(t, src)
		rs := mustRender(t, s, s.NewInstallation("default", "x", "", nil, spec))
		checked := 0
		for _, r := range rs {
			checked += len(s.ReadinessFor(r))
			if ok, why := s.Ready(r, r.Object); !ok {
				t.Errorf("%s: %s not ready as rendered: %s", s.Manifest.Name, r.Key(), why)
			}
		}
		if checked == 0 {
			t.Errorf("%s: no readiness check applies to any resource", s.Manifest.Name)
		}
	}
}

func TestReadinessForAndReady(t *testing.T) {
	s := mustLoad(t, writeTree(t, webStack()))
	rs := mustRender(t, s, s.NewInstallation("default", "a", "", nil, map[string]any{"image": "x"}))
	dep := find(t, rs, "Deployment", "web")
	if got := s.ReadinessFor(dep); len(got) != 1 || got[0].Type != MatchCondition {
		t.Fatalf("ReadinessFor(Deployment) = %+v", got)
	}
	if got := s.ReadinessFor(find(t, rs, "ConfigMap", "settings")); len(got) != 0 {
		t.Errorf("ReadinessFor(ConfigMap) = %+v, want none", got)
	}
	ready, why := s.Ready(dep, dep.Object)
	if ready || why != `condition Available is not in status.conditions, want "True"` {
		t.Errorf("Ready(rendered Deployment) = %v %q", ready, why)
	}
	observed := map[string]any{"status": map[string]any{"conditions": []any{map[string]any{"type": "Available", "status": "True"}}}}
	if ready, why := s.Ready(dep, observed); !ready {
		t.Errorf("Ready(available Deployment) = false %q", why)
	}
	// A resource no check matches is ready once it exists.
	if ready, _ := s.Ready(find(t, rs, "ConfigMap", "settings"), nil); !ready {
		t.Error("unchecked resource not ready")
	}
}

func TestOutputs(t *testing.T) {
	s := mustLoad(t, writeTree(t, webStack()))
	inst := s.NewInstallation("shop", "blue", "u-1", map[string]string{"team": "web"}, map[string]any{"image": "nginx", "replicas": 3})
	rs := mustRender(t, s, inst)

	// The Deployment has no status yet: that output cannot be computed.
	out, err := s.Outputs(inst, rs, nil)
	if err == nil || !strings.Contains(err.Error(), `output available: template "${resources.Deployment.web.status.availableReplicas}": unknown reference "resources.Deployment.web.status.availableReplicas"`) {
		t.Errorf("Outputs without status: err %v", err)
	}
	want := map[string]any{"url": "https://example.com/", "service": "blue-web", "replicas": 3}
	if !reflect.DeepEqual(out, want) {
		t.Errorf("Outputs = %#v, want %#v", out, want)
	}

	// With the observed Deployment, its status is read.
	dep := find(t, rs, "Deployment", "web")
	observed := map[string]map[string]any{dep.Key(): {"status": map[string]any{"availableReplicas": json.Number("3")}}}
	out, err = s.Outputs(inst, rs, observed)
	if err != nil {
		t.Fatal(err)
	}
	if out["available"] != json.Number("3") || out["service"] != "blue-web" {
		t.Errorf("Outputs with observed = %#v", out)
	}

	// The examples' outputs from a fresh render.
	g := mustLoad(t, minimalGCP)
	gi := g.NewInstallation("default", "bars", "", nil, map[string]any{"region": "us-west1", "projectID": "bars-project"})
	out, err = g.Outputs(gi, mustRender(t, g, gi), nil)
	if err != nil {
		t.Fatal(err)
	}
	want = map[string]any{"network": "bars-network", "subnetwork": "bars-subnetwork", "region": "us-west1",
		"networkSelfLink": "projects/bars-project/global/networks/bars-network"}
	if !reflect.DeepEqual(out, want) {
		t.Errorf("minimal-gcp outputs = %#v, want %#v", out, want)
	}
}

func TestDeletionBands(t *testing.T) {
	s := mustLoad(t, writeTree(t, webStack()))
	rs := mustRender(t, s, s.NewInstallation("default", "a", "", nil, map[string]any{"image": "x"}))
	prio := map[string]int{}
	for _, r := range rs {
		prio[r.Kind()+"/"+r.OriginalName] = s.DeletionPriority(r)
	}
	// The name match (-5) beats the kind match (-1) whatever the order.
	want := map[string]int{"Ingress/web": 10, "ConfigMap/settings": -5, "Deployment/web": 0, "Service/web": 0, "Certificate/cert": 0}
	if !reflect.DeepEqual(prio, want) {
		t.Errorf("priorities %v, want %v", prio, want)
	}
	var bands [][]string
	for _, b := range s.DeletionBands(rs) {
		var names []string
		for _, r := range b {
			names = append(names, r.Kind())
		}
		bands = append(bands, names)
	}
	wantBands := [][]string{{"Ingress"}, {"Service", "Deployment", "Certificate"}, {"ConfigMap"}}
	if !reflect.DeepEqual(bands, wantBands) {
		t.Errorf("bands %v, want %v", bands, wantBands)
	}

	g := mustLoad(t, minimalGCP)
	gb := g.DeletionBands(mustRender(t, g, g.NewInstallation("default", "x", "", nil, map[string]any{"region": "us-west1", "projectID": "bars-project"})))
	if first, last := gb[0][0].Kind(), gb[len(gb)-1][0].Kind(); first != "Connection" || last != "Provider" {
		t.Errorf("minimal-gcp deletes %s first and %s last", first, last)
	}
}

func TestDefaults(t *testing.T) {
	s := mustLoad(t, writeTree(t, webStack()))
	in := map[string]any{"image": "x", "tls": map[string]any{}}
	got, err := s.Defaults(in)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"image": "x", "replicas": float64(2), "domain": "example.com", "tls": map[string]any{"issuer": "letsencrypt"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Defaults = %#v, want %#v", got, want)
	}
	if len(in["tls"].(map[string]any)) != 0 || len(in) != 2 {
		t.Errorf("Defaults changed its input: %v", in)
	}
	got, _ = s.Defaults(map[string]any{"image": "x", "replicas": 7, "domain": "d"})
	if got["replicas"] != 7 || got["domain"] != "d" {
		t.Errorf("Defaults overrode given values: %v", got)
	}
}

func TestInstallationFromObject(t *testing.T) {
	s := mustLoad(t, minimalGCP)
	inst, err := s.InstallationFromObject(map[string]any{
		"apiVersion": "gcp.stacks.cairn.dev/v1alpha1", "kind": "MinimalGCP",
		"metadata": map[string]any{"name": "bars", "namespace": "infra", "uid": "u", "labels": map[string]any{"team": "bars"}},
		"spec":     map[string]any{"region": "us-west1"},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := Installation{APIVersion: "gcp.stacks.cairn.dev/v1alpha1", Kind: "MinimalGCP", Name: "bars", Namespace: "infra", UID: "u",
		Labels: map[string]string{"team": "bars"}, Spec: map[string]any{"region": "us-west1"}}
	if !reflect.DeepEqual(inst, want) {
		t.Errorf("InstallationFromObject = %+v", inst)
	}
	for _, tt := range []struct {
		obj  map[string]any
		want string
	}{
		{map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{}}, "is apiVersion gcp.stacks.cairn.dev/v1alpha1, kind MinimalGCP, not v1 ConfigMap"},
		{map[string]any{"apiVersion": "gcp.stacks.cairn.dev/v1alpha1", "kind": "MinimalGCP", "metadata": map[string]any{"labels": map[string]any{"n": 1}}}, "metadata.labels.n must be a string"},
		{map[string]any{"apiVersion": "gcp.stacks.cairn.dev/v1alpha1", "kind": "MinimalGCP", "metadata": map[string]any{}, "spec": "x"}, "spec must be an object"},
	} {
		if _, err := s.InstallationFromObject(tt.obj); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("InstallationFromObject(%v) = %v, want %q", tt.obj, err, tt.want)
		}
	}
}
