package gitsync_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"filippo.io/age"

	"github.com/cairn-dev/cairn/backend/git/gittest"
)

// TestSyncImportsAFileEncryptedWithSops: a person encrypts a resource file
// with the real `sops -e` and pushes it; a sync of the SOPS-encrypted Git
// backend decrypts it (with the key file the backend names) and the hub
// shows its value.
func TestSyncImportsAFileEncryptedWithSops(t *testing.T) {
	bin := os.Getenv("CAIRN_TEST_SOPS")
	if bin == "" {
		if p, err := exec.LookPath("sops"); err == nil {
			bin = p
		} else if ci, _ := strconv.ParseBool(os.Getenv("CI")); ci {
			t.Fatal("CI=true but no sops tool: run the tests under scripts/with-services")
		} else {
			t.Skip("no sops tool ($CAIRN_TEST_SOPS): run under scripts/with-services, which builds it")
		}
	}
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(t.TempDir(), "age.txt")
	if err := os.WriteFile(keyFile, []byte(id.String()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e := newSyncEnvWith(t, gittest.NewRemote(t), map[string]any{"encryption": map[string]any{"sops": map[string]any{
		"age": []string{id.Recipient().String()}, "ageKeyFile": keyFile}}}, nil)
	s := e.syncer()
	if _, err := s.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.create("by-cairn", false) // the branch exists, and holds an encrypted file
	e.person("status")
	e.write("by-jane", flagFile("by-jane", true))
	p := filepath.Join(e.clone, "default", "flipt.io-v1-Flag-by-jane.json")
	cmd := exec.Command(bin, "encrypt", "--in-place", "--age", id.Recipient().String(), "--encrypted-regex", "^spec$", p)
	cmd.Env = os.Environ()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("sops -e: %v\n%s", err, out)
	}
	data, _ := os.ReadFile(p)
	if !strings.Contains(string(data), "ENC[AES256_GCM,") {
		t.Fatalf("sops -e did not encrypt the spec:\n%s", data)
	}
	e.pushAll("add by-jane, encrypted with sops")

	res, err := s.Sync(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.Created != 1 || res.Skipped != 0 {
		t.Fatalf("Sync = %+v, want 1 created", res)
	}
	inst, err := e.get("by-jane")
	if err != nil {
		t.Fatal(err)
	}
	if string(inst.Latest.Value) != `{"enabled":true}` || inst.Latest.CreatedBy != jane {
		t.Fatalf("by-jane: value %s by %q", inst.Latest.Value, inst.Latest.CreatedBy)
	}
}
