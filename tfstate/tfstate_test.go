package tfstate_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/tfstate"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name, doc, err string
	}{
		{"valid", `{"version":4,"serial":3,"lineage":"L","outputs":{"a":{"value":[1,2],"type":["list","number"]}},"resources":[]}`, ""},
		{"not JSON", `{"version":4`, "not a valid state document"},
		{"version 3", `{"version":3,"lineage":"L"}`, "format version 3"},
		{"no lineage", `{"version":4,"serial":1}`, "has no lineage"},
		{"output without value", `{"version":4,"lineage":"L","outputs":{"a":{"type":"string"}}}`, `output "a" has no value`},
		{"negative serial", `{"version":4,"lineage":"L","serial":-1}`, "not a valid state document"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := tfstate.Parse([]byte(tt.doc))
			sum, serr := tfstate.ParseSummary([]byte(tt.doc))
			if (err == nil) != (serr == nil) || (err == nil && (sum.Serial != s.Serial || sum.Lineage != s.Lineage || len(sum.Outputs) != len(s.Outputs) || sum.Resources != nil)) {
				t.Errorf("ParseSummary = %+v, %v; Parse = %+v, %v", sum, serr, s, err)
			}
			if tt.err == "" {
				if err != nil || s.Serial != 3 || s.Outputs["a"].Sensitive || string(s.Outputs["a"].Type) != `["list","number"]` {
					t.Fatalf("Parse = %+v, %v", s, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Fatalf("err = %v, want one containing %q", err, tt.err)
			}
		})
	}
}

func TestLockInfo(t *testing.T) {
	li, err := tfstate.ParseLockInfo([]byte(`{"ID":"abc","Operation":"OperationTypeApply","Who":"me@host","Version":"1.10.10","Created":"2026-01-01T00:00:00Z","Path":"","Info":""}`))
	if err != nil || li.String() != "abc (me@host OperationTypeApply)" {
		t.Fatalf("ParseLockInfo = %+v (%s), %v", li, li, err)
	}
	for _, bad := range []string{``, `{}`, `{"ID":" "}`, `[1]`} {
		if _, err := tfstate.ParseLockInfo([]byte(bad)); err == nil {
			t.Errorf("ParseLockInfo(%q) accepted", bad)
		}
	}
}

func TestCompare(t *testing.T) {
	a := mustParse(t, `{"version":4,"lineage":"L","serial":1,
		"outputs":{"same":{"value":{"x":1,"y":2},"type":"string"},"gone":{"value":1},"changed":{"value":"a"},"sens":{"value":"s"}},
		"resources":[{"mode":"managed","type":"t","name":"kept","instances":[{"attributes":{"a":1,"b":2}}]},
		             {"mode":"data","type":"t","name":"d","instances":[]},
		             {"module":"module.m","mode":"managed","type":"t","name":"x","instances":[{"attributes":{"a":1}}]}]}`)
	b := mustParse(t, `{"version":4,"lineage":"L","serial":2,
		"outputs":{"same":{"value":{"y":2,"x":1},"type":"string"},"changed":{"value":"b"},"new":{"value":true},"sens":{"value":"s","sensitive":true}},
		"resources":[{"mode":"managed","type":"t","name":"kept","instances":[{"attributes":{"b":2,"a":1}}]},
		             {"module":"module.m","mode":"managed","type":"t","name":"x","instances":[{"attributes":{"a":2}}]},
		             {"mode":"managed","type":"t","name":"added","instances":[]}]}`)
	got := tfstate.Compare(a, b)
	want := tfstate.Diff{
		ResourcesAdded: []string{"t.added"}, ResourcesRemoved: []string{"data.t.d"}, ResourcesChanged: []string{"module.m.t.x"},
		OutputsAdded: []string{"new"}, OutputsRemoved: []string{"gone"}, OutputsChanged: []string{"changed", "sens"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Compare = %+v\nwant      %+v", got, want)
	}
	if !tfstate.Compare(a, a).Empty() || got.Empty() {
		t.Error("Empty is wrong")
	}
}

func mustParse(t *testing.T, doc string) tfstate.State {
	t.Helper()
	s, err := tfstate.Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	return s
}
