package tfstate_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

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
	// Created is a time in tofu's LockInfo: one that is not would be
	// answered to the next locker, whose tofu could not read who holds it.
	if _, err := tfstate.ParseLockInfo([]byte(`{"ID":"a","Created":"yesterday"}`)); err == nil || !strings.Contains(err.Error(), `Created "yesterday"`) {
		t.Errorf("ParseLockInfo with Created yesterday: %v, want an error naming Created", err)
	}
	// An unlock uses the ID alone.
	if id, err := tfstate.ParseUnlockID([]byte(`{"ID":"a","Created":"yesterday"}`)); id != "a" || err != nil {
		t.Errorf("ParseUnlockID = %q, %v", id, err)
	}
	for _, bad := range []string{``, `{}`, `{"ID":" "}`, `[1]`} {
		if _, err := tfstate.ParseUnlockID([]byte(bad)); err == nil {
			t.Errorf("ParseUnlockID(%q) accepted", bad)
		}
	}
}

// TestLockInfoReadsAsTofus: the lock info answered with 423 is decoded by
// tofu into its statemgr.LockInfo (Created a time.Time); a lock taken with
// no Created (curl, another client) must decode there too.
func TestLockInfoReadsAsTofus(t *testing.T) {
	type tofuLockInfo struct {
		ID, Operation, Info, Who, Version, Path string
		Created                                 time.Time
	}
	for _, doc := range []string{
		`{"ID":"b","Who":"bob@host"}`,
		`{"ID":"b","Who":"bob@host","Created":""}`,
		`{"ID":"b","Who":"bob@host","Created":"2026-11-24T19:40:28.592788086Z"}`,
	} {
		li, err := tfstate.ParseLockInfo([]byte(doc))
		if err != nil {
			t.Fatalf("ParseLockInfo(%s): %v", doc, err)
		}
		b, err := json.Marshal(li)
		if err != nil {
			t.Fatal(err)
		}
		var got tofuLockInfo
		if err := json.Unmarshal(b, &got); err != nil || got.ID != "b" || got.Who != "bob@host" {
			t.Errorf("lock info %s answered as %s: tofu reads %+v, %v", doc, b, got, err)
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
