package cli_test

import (
	"context"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn"
)

// TestLocalUninstall: in local mode no server's stack controller deletes an
// installation's children, so cairn delete does it in process, as cairn
// install renders: the installation and its children are gone when it
// returns, a shared dependency stays while another installation uses it,
// and a deletion a locked child blocks fails with the reason and changes
// nothing until it is retried.
func TestLocalUninstall(t *testing.T) {
	e := newEnv(t)
	e.ok("stack", "add", "../../examples/stacks/flags-env")
	e.ok("stack", "add", "../../examples/stacks/team-portal")
	e.ok("install", "team-portal", "-p", "team=web", "--name", "p1")
	e.ok("install", "team-portal", "-p", "team=web", "--name", "p2")

	portals := cairn.PathForGroupKind("examples.stacks.cairn.dev", "TeamPortal")
	settings := cairn.PathForGroupKind("portal.examples.cairn.dev", "PortalSettings")
	flagsEnvs := cairn.PathForGroupKind("flags.stacks.cairn.dev", "FlagsEnv")
	gone := func(path, name string) bool {
		t.Helper()
		_, err := e.hub().GetInstanceByName(context.Background(), path, cairn.DefaultNamespace, name, false)
		if err != nil && !cairn.HasCode(err, cairn.CodeNotFound) {
			t.Fatal(err)
		}
		return err != nil
	}
	flags := strings.Fields(e.ok("get", "flagsenvs", "-o", "name"))
	if len(flags) != 1 {
		t.Fatalf("flags installations: %q", flags)
	}
	_, flagsName, _ := strings.Cut(flags[0], "/")

	if r := e.run("", "delete", "flagsenv", flagsName); r.code != 5 {
		t.Errorf("delete of the shared flags: exit %d %q, want 5 (in use)", r.code, r.stderr)
	}
	if out := e.ok("delete", "teamportal", "p1"); !strings.Contains(out, `"p1" deleted`) {
		t.Errorf("delete p1 printed %q", out)
	}
	if !gone(portals, "p1") || !gone(settings, "p1-settings") {
		t.Fatalf("p1 or its settings are still there after cairn delete")
	}
	if gone(flagsEnvs, flagsName) {
		t.Fatalf("the flags p2 uses went with p1")
	}

	// A locked child blocks the deletion: it fails, names the child, and
	// deletes nothing; once unlocked, deleting again finishes it.
	e.ok("lock", "portalsettings/p2-settings", "--owner", "deploy-1")
	r := e.run("", "delete", "teamportal", "p2")
	if r.code != 5 || !strings.Contains(r.stderr, "p2-settings") || !strings.Contains(r.stderr, "locked") {
		t.Errorf("delete with a locked child: exit %d %q, want 5 naming the locked child", r.code, r.stderr)
	}
	if gone(portals, "p2") || gone(settings, "p2-settings") {
		t.Fatalf("a blocked deletion deleted something")
	}
	e.ok("unlock", "portalsettings/p2-settings", "--owner", "deploy-1")
	// By id, as a TypeInstance, it is the same.
	e.ok("delete", "ti", e.byName(portals, "p2").ID)
	if !gone(portals, "p2") || !gone(settings, "p2-settings") {
		t.Fatalf("p2 or its settings are still there after the second cairn delete")
	}
	e.ok("delete", "flagsenv", flagsName)
	if !gone(flagsEnvs, flagsName) || len(strings.Fields(e.ok("get", "flags", "-o", "name"))) != 0 {
		t.Errorf("the flags installation or its flags are still there")
	}
}
