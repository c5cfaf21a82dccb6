package soak

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
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

// TestCheckGit reads a real repository (made with git) and compares it
// with what the Git writer was acknowledged.
func TestCheckGit(t *testing.T) {
	dir := t.TempDir()
	gitRun := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+dir)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	gitRun("init", "--quiet", "--initial-branch="+gitBranch)
	for name, n := range map[string]int{"a": 3, "b": 1} {
		doc := `{"apiVersion": "soak.cairn.dev/v1", "kind": "GitCounter", "metadata": {"namespace": "default", "name": "` + name + `"}, "spec": {"writer": -2, "slot": 0, "n": ` + strconv.Itoa(n) + `}}` + "\n"
		if err := os.MkdirAll(filepath.Join(dir, "default"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "default", "soak.cairn.dev-v1-GitCounter-"+name+".json"), []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	gitRun("add", ".")
	gitRun("commit", "--quiet", "-m", "two counters")
	files, err := gitFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 2 || files["a"].n != 3 || files["b"].n != 1 || files["a"].path != "default/soak.cairn.dev-v1-GitCounter-a.json" {
		t.Fatalf("files at the tip: %+v", files)
	}

	names := map[string]string{"1": "a", "2": "b", "3": "c"}
	inGit := map[string]final{"1": {backend: "repo"}, "2": {backend: "repo"}, "3": {gone: true}}
	cases := []struct {
		name    string
		names   map[string]string // nil: names
		expects map[string]expect
		finals  map[string]final
		want    string // "" for no violation
	}{
		{"as acknowledged", nil, map[string]expect{"1": {n: 3}, "2": {n: 1}, "3": {deleted: true}}, inGit, ""},
		{"missing write", nil, map[string]expect{"1": {n: 4}, "2": {n: 1}, "3": {deleted: true}}, inGit, "acknowledged n=4, default/soak.cairn.dev-v1-GitCounter-a.json holds n=3"},
		{"missing file", nil, map[string]expect{"1": {n: 3}, "2": {n: 1}, "3": {n: 0}}, inGit, "instance 3 (c): acknowledged with n=0, no file"},
		{"deleted but there", nil, map[string]expect{"1": {n: 3}, "2": {deleted: true}, "3": {deleted: true}}, inGit, "instance 2 (b) was deleted"},
		{"refused write written", map[string]string{"1": "a", "3": "c"}, map[string]expect{"1": {n: 3}, "3": {deleted: true}}, inGit, "GitCounter-b.json (b, n=1) is at the tip, but no acknowledged write"},
		{"not in the Git backend", nil, map[string]expect{"1": {n: 3}, "2": {n: 1}, "3": {deleted: true}},
			map[string]final{"1": {backend: "repo"}, "2": {backend: "other"}, "3": {gone: true}}, `instance 2 (b) is in backend "other"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.names == nil {
				c.names = names
			}
			got := checkGit("repo", c.names, c.expects, c.finals, files, 10)
			if c.want == "" && len(got) > 0 {
				t.Fatalf("violations %q, want none", got)
			}
			if c.want != "" && (len(got) == 0 || !strings.Contains(strings.Join(got, "\n"), c.want)) {
				t.Fatalf("violations %q, want one containing %q", got, c.want)
			}
		})
	}
}
