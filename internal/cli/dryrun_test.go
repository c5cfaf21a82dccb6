package cli_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/hub"
	"github.com/cairn-dev/cairn/store"
)

// hubState is what a write could change, read from a hub.
func hubState(t *testing.T, h *hub.Hub) string {
	t.Helper()
	ctx := context.Background()
	seq, err := h.LastSeq(ctx)
	if err != nil {
		t.Fatal(err)
	}
	insts, err := h.ListInstances(ctx, store.InstanceFilter{}, true)
	if err != nil {
		t.Fatal(err)
	}
	types, err := h.ListTypes(ctx, store.TypeFilter{})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal([]any{seq, insts, types})
	return string(b)
}

// TestClientDryRun: every client-mode write with --dry-run=server or
// client prints what it would do, says it changed nothing, and changes
// nothing on the server; refusals are the real write's.
func TestClientDryRun(t *testing.T) {
	s := newServer(t)
	s.withFlags()
	a := s.flag("default", "a")
	changed := s.file("changed.yaml", flagDoc("a", "", "{team: x}", "{enabled: false}"))
	fresh := s.file("fresh.yaml", flagDoc("fresh", "", "", "{enabled: true}"))
	for _, tt := range []struct {
		args []string
		out  string // in stdout; "" when the write must fail
		err  string // in stderr when it fails
	}{
		{[]string{"apply", "-f", changed}, "configured", ""},
		{[]string{"apply", "-f", fresh}, "created", ""},
		{[]string{"create", "-f", fresh}, "created", ""},
		{[]string{"create", "-f", changed}, "", "already exists"},
		{[]string{"replace", "-f", changed}, "replaced", ""},
		{[]string{"delete", "flag", "a"}, "deleted", ""},
		{[]string{"lock", a.ID, "--owner", "me"}, "locked", ""},
	} {
		for _, mode := range []string{"server", "client"} {
			args := append(append([]string{}, tt.args...), "--dry-run="+mode)
			before := hubState(t, s.h)
			r := s.run("", args...)
			switch {
			case tt.out != "" && (r.code != 0 || !strings.Contains(r.stdout, tt.out) || !strings.Contains(r.stderr, "dry run (--dry-run="+mode+"): nothing was changed")):
				t.Errorf("cairn %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
			case tt.out == "" && (r.code == 0 || !strings.Contains(r.stderr, tt.err)):
				t.Errorf("cairn %s: exit %d, stderr %q; want a failure with %q", strings.Join(args, " "), r.code, r.stderr, tt.err)
			}
			if hubState(t, s.h) != before {
				t.Errorf("cairn %s changed the server's hub", strings.Join(args, " "))
			}
		}
	}
	// A bare --dry-run is kubectl's deprecated form of client: it must not
	// take the next argument as its value, and it says what to write.
	for _, args := range [][]string{{"apply", "--dry-run", "-f", changed}, {"apply", "-f", changed, "--dry-run"}} {
		before := hubState(t, s.h)
		r := s.run("", args...)
		if r.code != 0 || !strings.Contains(r.stdout, "configured") || !strings.Contains(r.stderr, "--dry-run is deprecated and can be replaced with --dry-run=client.") ||
			!strings.Contains(r.stderr, "dry run (--dry-run=client): nothing was changed") {
			t.Errorf("cairn %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
		}
		if hubState(t, s.h) != before {
			t.Errorf("cairn %s changed the server's hub", strings.Join(args, " "))
		}
	}
	if r := s.run("", "apply", "-f", changed, "--dry-run=maybe"); r.code == 0 || !strings.Contains(r.stderr, `--dry-run "maybe": want none, server or client`) {
		t.Errorf("--dry-run=maybe: exit %d, stderr %q", r.code, r.stderr)
	}
}

// TestLocalDryRun: local-mode writes with --dry-run change nothing in the
// data directory's store.
func TestLocalDryRun(t *testing.T) {
	e := newEnv(t)
	e.ok("apply", "-f", quickstart)
	inst := e.byName(configType, "db-config")
	var value map[string]any
	if err := json.Unmarshal(inst.Latest.Value, &value); err != nil {
		t.Fatal(err)
	}
	value["host"] = "elsewhere"
	newValue, _ := json.Marshal(value)
	before := hubState(t, e.hub())
	for _, args := range [][]string{
		{"apply", "-f", writeFile(t, e.dir, "new.yaml", `apiVersion: hub.cairn.dev/v1
kind: TypeInstance
metadata: {name: extra}
spec:
  typeRef: {path: cap.type.extra, revision: 0.1.0}
  value: {a: 1}
`)},
		{"delete", inst.ID},
		{"lock", inst.ID, "--owner", "me"},
		{"update", inst.ID, "--value-file", writeFile(t, e.dir, "v.json", string(newValue))},
	} {
		r := e.run("", append(args, "--dry-run=server")...)
		if r.code != 0 || !strings.Contains(r.stderr, "nothing was changed") {
			t.Errorf("cairn %s --dry-run=server: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
		}
		if after := hubState(t, e.hub()); after != before {
			t.Errorf("cairn %s --dry-run=server changed the store", strings.Join(args, " "))
		}
	}
}
