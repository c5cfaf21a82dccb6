package cli_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/internal/cli"
)

// TestMigrateReencrypt stores a secret in plaintext, turns encryption at
// rest on with cairn migrate --reencrypt and checks the SQLite file itself;
// commands given the config read the value back, and without it they fail
// naming the key rather than showing ciphertext.
func TestMigrateReencrypt(t *testing.T) {
	dir := t.TempDir()
	vars := map[string]string{cli.EnvDataDir: dir}
	const marker = "reencrypt-cli-marker-1b2c"
	doc := filepath.Join(t.TempDir(), "creds.yaml")
	if err := os.WriteFile(doc, []byte(`apiVersion: hub.cairn.dev/v1
kind: TypeInstance
metadata: {name: s1}
spec: {typeRef: {path: cap.type.database.postgresql.credentials, revision: 0.1.0}, value: {username: app, password: `+marker+`}}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := runVars(t, vars, "apply", "-f", doc); r.code != 0 {
		t.Fatalf("apply: exit %d: %s", r.code, r.stderr)
	}
	dbFile := func() []byte {
		var all []byte
		for _, p := range []string{"cairn.db", "cairn.db-wal"} {
			b, _ := os.ReadFile(filepath.Join(dir, p))
			all = append(all, b...)
		}
		return all
	}
	if !bytes.Contains(dbFile(), []byte(marker)) {
		t.Fatal("setup: the plaintext is not in the SQLite file")
	}

	cfg, err := filepath.Abs("../../examples/secrets/encryption-config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if r := runVars(t, vars, "migrate", "--reencrypt"); r.code != 2 || !strings.Contains(r.stderr, "--reencrypt needs --encryption-config") {
		t.Fatalf("--reencrypt without a config: exit %d, stderr %q", r.code, r.stderr)
	}
	r := runVars(t, vars, "migrate", "--encryption-config", cfg, "--reencrypt", "--batch", "1")
	if r.code != 0 || !strings.Contains(r.stdout, "re-encrypted: 1 of ") {
		t.Fatalf("migrate --reencrypt: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if bytes.Contains(dbFile(), []byte(marker)) {
		t.Fatal("the SQLite file still holds the plaintext after migrate --reencrypt")
	}
	// Idempotent: nothing left to do.
	if r := runVars(t, vars, "migrate", "--encryption-config", cfg, "--reencrypt"); r.code != 0 || !strings.Contains(r.stdout, "re-encrypted: 0 of ") {
		t.Fatalf("second run: exit %d, stdout %q", r.code, r.stdout)
	}

	vars[cli.EnvEncryptionConfig] = cfg
	r = runVars(t, vars, "get", "cap.type.database.postgresql.credentials", "s1", "-o", "json")
	if r.code != 0 || !strings.Contains(r.stdout, marker) {
		t.Fatalf("get with the config: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	// A backup keeps the values sealed: it holds no plaintext, and a
	// restore reads back only with the same keys.
	bak := filepath.Join(t.TempDir(), "cairn.bak")
	if r := runVars(t, vars, "backup", "--to", bak); r.code != 0 {
		t.Fatalf("backup: exit %d: %s", r.code, r.stderr)
	}
	if b, err := os.ReadFile(bak); err != nil || bytes.Contains(b, []byte(marker)) {
		t.Fatalf("the backup holds the plaintext (read error %v)", err)
	}
	restored := map[string]string{cli.EnvDataDir: t.TempDir(), cli.EnvEncryptionConfig: cfg}
	if r := runVars(t, restored, "restore", "--from", bak); r.code != 0 {
		t.Fatalf("restore: exit %d: %s", r.code, r.stderr)
	}
	r = runVars(t, restored, "get", "cap.type.database.postgresql.credentials", "s1", "-o", "json")
	if r.code != 0 || !strings.Contains(r.stdout, marker) {
		t.Fatalf("get after restore: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}

	delete(vars, cli.EnvEncryptionConfig)
	r = runVars(t, vars, "get", "cap.type.database.postgresql.credentials", "s1", "-o", "json")
	if r.code == 0 || !strings.Contains(r.stderr, `aesgcm key "key1" and no encryption config is given (--encryption-config)`) || strings.Contains(r.stdout, "cairn:enc:") {
		t.Fatalf("get without the config: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}

	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("apiVersion: v1\nkind: Secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := runVars(t, vars, "migrate", "--encryption-config", bad); r.code == 0 || !strings.Contains(r.stderr, "--encryption-config: encryption config "+bad) {
		t.Fatalf("bad config: exit %d, stderr %q", r.code, r.stderr)
	}
}
