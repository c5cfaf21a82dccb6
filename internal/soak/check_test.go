package soak

import (
	"strings"
	"testing"
)

func TestCheckWatch(t *testing.T) {
	acks := []ack{{id: "a", seq: 1}, {id: "b", seq: 2}, {id: "a", seq: 3}, {id: "b", deleted: true}}
	finals := map[string]final{"a": {seq: 5}, "b": {gone: true}}
	cases := []struct {
		name   string
		events []event
		want   string // "" for no violation
	}{
		{"complete", []event{{"ADDED", "a", 1}, {"ADDED", "b", 2}, {"MODIFIED", "a", 3}, {"DELETED", "b", 4}, {"MODIFIED", "a", 5}}, ""},
		{"coalesced versions are fine", []event{{"ADDED", "b", 2}, {"ADDED", "a", 3}, {"DELETED", "b", 4}, {"MODIFIED", "a", 5}}, ""},
		{"missed a write", []event{{"ADDED", "a", 1}, {"ADDED", "b", 2}, {"DELETED", "b", 4}}, "instance a is at 5"},
		{"missed a deletion", []event{{"ADDED", "a", 1}, {"ADDED", "b", 2}, {"MODIFIED", "a", 5}}, "instance b is gone"},
		{"goes back", []event{{"ADDED", "a", 1}, {"ADDED", "b", 2}, {"DELETED", "b", 4}, {"MODIFIED", "a", 3}, {"MODIFIED", "a", 5}}, "does not come after 4"},
		{"repeats", []event{{"ADDED", "a", 1}, {"ADDED", "b", 2}, {"MODIFIED", "a", 3}, {"MODIFIED", "a", 3}, {"DELETED", "b", 4}, {"MODIFIED", "a", 5}}, "does not come after 3"},
		{"never appeared", []event{{"ADDED", "b", 2}, {"DELETED", "b", 4}}, "missed the write of a at 1"},
		{"relist after Gone", []event{{"ADDED", "a", 1}, {"RELIST", "", 4}, {"LIST", "a", 3}, {"LIST-DELETED", "b", 4}, {"MODIFIED", "a", 5}}, ""},
		{"relist missing a deletion", []event{{"ADDED", "a", 1}, {"ADDED", "b", 2}, {"RELIST", "", 4}, {"LIST", "a", 3}, {"LIST", "b", 2}, {"MODIFIED", "a", 5}}, "instance b is gone"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := checkWatch("w", c.events, acks, finals, 10)
			if c.want == "" && len(got) > 0 {
				t.Fatalf("violations %q, want none", got)
			}
			if c.want != "" && (len(got) == 0 || !strings.Contains(strings.Join(got, "\n"), c.want)) {
				t.Fatalf("violations %q, want one containing %q", got, c.want)
			}
		})
	}
}

func TestCheckFinal(t *testing.T) {
	expects := map[string]expect{"a": {n: 3, rvs: 4}, "b": {deleted: true}}
	cases := []struct {
		name   string
		finals map[string]final
		want   string
	}{
		{"as acknowledged", map[string]final{"a": {seq: 9, n: 3, rvs: 4}, "b": {gone: true}}, ""},
		{"lost write", map[string]final{"a": {seq: 9, n: 2, rvs: 3}, "b": {gone: true}}, "lost write"},
		{"refused write written", map[string]final{"a": {seq: 9, n: 4, rvs: 5}, "b": {gone: true}}, "acknowledged n=3, holds n=4"},
		{"version gap", map[string]final{"a": {seq: 9, n: 3, rvs: 5}, "b": {gone: true}}, "5 resource versions, 4 acknowledged"},
		{"lost instance", map[string]final{"a": {gone: true}, "b": {gone: true}}, "now gone"},
		{"deleted but there", map[string]final{"a": {seq: 9, n: 3, rvs: 4}, "b": {seq: 7}}, "was deleted"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := checkFinal(expects, c.finals, 10)
			if c.want == "" && len(got) > 0 {
				t.Fatalf("violations %q, want none", got)
			}
			if c.want != "" && (len(got) == 0 || !strings.Contains(strings.Join(got, "\n"), c.want)) {
				t.Fatalf("violations %q, want one containing %q", got, c.want)
			}
		})
	}
}

func TestReportGrowth(t *testing.T) {
	flat := make([]sample, 16)
	grow := make([]sample, 16)
	for i := range flat {
		flat[i] = sample{RSS: 80 << 20, Goroutines: 30}
		grow[i] = sample{RSS: float64((80 + 20*i) << 20), Goroutines: 30}
	}
	r := &run{cfg: Config{Duration: 1, Sample: 1}, ops: map[string]int{}, errs: map[string]int{}}
	if v := r.report(sample{Goroutines: 15}, sample{Goroutines: 16}, flat).Violations; len(v) != 0 {
		t.Fatalf("flat run: %q", v)
	}
	if v := r.report(sample{Goroutines: 15}, sample{Goroutines: 16}, grow).Violations; len(v) != 1 || !strings.Contains(v[0], "RSS keeps growing") {
		t.Fatalf("growing RSS: %q", v)
	}
	if v := r.report(sample{Goroutines: 15}, sample{Goroutines: 60}, flat).Violations; len(v) != 1 || !strings.Contains(v[0], "goroutines grew") {
		t.Fatalf("leaked goroutines: %q", v)
	}
	r.errs["update: Unavailable"] = 2
	r.errs["graphql-list: "+expectedKind] = 5
	if v := r.report(sample{Goroutines: 15}, sample{Goroutines: 16}, flat).Violations; len(v) != 1 || !strings.Contains(v[0], "2 operations failed") {
		t.Fatalf("failed operations: %q", v)
	}
}
