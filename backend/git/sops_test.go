package git_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"filippo.io/age"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/backend/backendtest"
	"github.com/cairn-dev/cairn/backend/git"
	"github.com/cairn-dev/cairn/backend/git/gittest"
	"github.com/cairn-dev/cairn/backend/sops"
)

// ageKey is a fresh age identity and the key file holding it.
type ageKey struct {
	id   *age.X25519Identity
	file string
}

func newAgeKey(t testing.TB) ageKey {
	t.Helper()
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "age.txt")
	if err := os.WriteFile(f, []byte(id.String()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return ageKey{id: id, file: f}
}

// newSOPSBackend opens a Git backend encrypting with SOPS to k.
func newSOPSBackend(t testing.TB, url string, k ageKey) *git.Backend {
	t.Helper()
	return gittest.Open(t, url, sopsSettings(k), nil)
}

// sopsSettings are a Git backend's settings to encrypt with SOPS to k.
func sopsSettings(k ageKey) map[string]any {
	return map[string]any{"encryption": map[string]any{"sops": map[string]any{"age": []string{k.id.Recipient().String()}, "ageKeyFile": k.file}}}
}

func TestConformanceSOPS(t *testing.T) {
	backendtest.Run(t, backendtest.Harness{
		New: func(t *testing.T) cairn.Backend {
			return newSOPSBackend(t, gittest.NewRemote(t).FileURL(), newAgeKey(t))
		},
		AcceptValue: true,
		Context:     conformanceContext,
	})
}

func TestSOPSConfigErrors(t *testing.T) {
	for _, tc := range []struct{ value, want string }{
		{`{"url":"file:///r","encryption":{}}`, "encryption: give sops"},
		{`{"url":"file:///r","encryption":{"sops":{}}}`, "at least one recipient"},
		{`{"url":"file:///r","encryption":{"sops":{"age":["nope"]}}}`, `encryption.sops.age[0]: "nope" is not an age recipient`},
		{`{"url":"file:///r","controller":{"wasm":{"module":"x.wasm"}},"encryption":{"sops":{"age":["` + newAgeKey(t).id.Recipient().String() + `"]}}}`, "template controller only"},
	} {
		_, err := git.ParseConfig(json.RawMessage(tc.value))
		if err == nil || !strings.Contains(err.Error(), tc.want) || !cairn.HasCode(err, cairn.CodeInvalid) {
			t.Errorf("%s: err = %v, want Invalid containing %q", tc.value, err, tc.want)
		}
	}
}

// sopsBin returns the real sops tool, skipping (failing when CI=true)
// without it; scripts/with-services builds it.
func sopsBin(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("CAIRN_TEST_SOPS"); p != "" {
		return p
	}
	if p, err := exec.LookPath("sops"); err == nil {
		return p
	}
	if ci, _ := strconv.ParseBool(os.Getenv("CI")); ci {
		t.Fatal("CI=true but no sops tool: run the tests under scripts/with-services")
	}
	t.Skip("no sops tool ($CAIRN_TEST_SOPS): run under scripts/with-services, which builds it")
	return ""
}

// TestSOPSFilesInTheRepository writes through the backend and reads the
// remote with git and the real sops: the password is nowhere in the
// repository's history, metadata is readable, sops -d gives the value, and
// rewriting the same value makes no commit.
func TestSOPSFilesInTheRepository(t *testing.T) {
	bin := sopsBin(t)
	ctx := context.Background()
	r := gittest.NewRemote(t)
	k := newAgeKey(t)
	b := newSOPSBackend(t, r.FileURL(), k)
	const marker = "git-sops-marker-0c9e"
	value := json.RawMessage(`{"username":"app","password":"` + marker + `"}`)
	rctx := json.RawMessage(`{"apiVersion":"db.example.com/v1","kind":"Credentials","namespace":"default"}`)
	res, err := b.OnCreate(ctx, cairn.OnCreateRequest{InstanceID: "creds", Value: value, Context: rctx})
	if err != nil {
		t.Fatal(err)
	}
	var vc struct{ Path string }
	if err := json.Unmarshal(res, &vc); err != nil || vc.Path == "" {
		t.Fatalf("version context %s: %v", res, err)
	}
	file := r.Show(t, "", vc.Path)
	if strings.Contains(file, marker) {
		t.Fatalf("the password is in the committed file:\n%s", file)
	}
	for _, clear := range []string{`"apiVersion": "db.example.com/v1"`, `"kind": "Credentials"`, `"name": "creds"`, `"sops"`} {
		if !strings.Contains(file, clear) {
			t.Fatalf("%s is not readable in the committed file:\n%s", clear, file)
		}
	}
	if log := gittest.Git(t, r.Path, "log", "-p", "main"); strings.Contains(log, marker) {
		t.Fatal("the password is in the repository's history")
	}

	// The real sops decrypts cairn's file.
	dir := t.TempDir()
	enc := filepath.Join(dir, "creds.json")
	os.WriteFile(enc, []byte(file), 0o600)
	cmd := exec.Command(bin, "decrypt", enc)
	cmd.Env = append(os.Environ(), "SOPS_AGE_KEY_FILE="+k.file)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("sops -d: %v\n%s", err, out)
	}
	var doc struct{ Spec json.RawMessage }
	if err := json.Unmarshal(out, &doc); err != nil || !sameValue(doc.Spec, value) {
		t.Fatalf("sops -d gives %s (%v), want spec %s", out, err, value)
	}

	// Read back through the backend.
	got, err := b.GetValue(ctx, cairn.GetValueRequest{InstanceID: "creds", ResourceVersion: 1, Context: res})
	if err != nil || !sameValue(got, value) {
		t.Fatalf("GetValue = %s, %v", got, err)
	}
	// The same value again changes no file, so makes no commit.
	before := r.Commits(t)
	if _, err := b.OnUpdate(ctx, cairn.OnUpdateRequest{InstanceID: "creds", NewResourceVersion: 2, NewValue: value, Context: res}); err != nil {
		t.Fatal(err)
	}
	if after := r.Commits(t); after != before {
		t.Fatalf("rewriting the same value made %d commits", after-before)
	}
}

func sameValue(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return bytes.Equal(xa, yb)
}

// TestRotateKeys re-encrypts every file from key A to key B in one
// commit: a backend holding only B reads the latest versions, sops -d with
// B reads the files and A no longer can.
func TestRotateKeys(t *testing.T) {
	bin := sopsBin(t)
	ctx := context.Background()
	r := gittest.NewRemote(t)
	a, bk := newAgeKey(t), newAgeKey(t)
	b := newSOPSBackend(t, r.FileURL(), a)
	rctx := json.RawMessage(`{"apiVersion":"db.example.com/v1","kind":"Credentials","namespace":"default"}`)
	ctxs := map[string]json.RawMessage{}
	for _, id := range []string{"one", "two"} {
		res, err := b.OnCreate(ctx, cairn.OnCreateRequest{InstanceID: id, Value: json.RawMessage(`{"password":"pw-` + id + `"}`), Context: rctx})
		if err != nil {
			t.Fatal(err)
		}
		ctxs[id] = res
	}
	if _, err := b.OnUpdate(ctx, cairn.OnUpdateRequest{InstanceID: "two", NewResourceVersion: 2, NewValue: json.RawMessage(`{"password":"pw-two-2"}`), Context: ctxs["two"]}); err != nil {
		t.Fatal(err)
	}
	before := r.Commits(t)
	// To B while the identities are still A's alone: nothing here could
	// read the files any more, so it is refused before anything changes.
	_, _, err := b.RotateKeys(ctx, sops.Config{Age: []string{bk.id.Recipient().String()}, AgeKeyFile: a.file})
	if !cairn.HasCode(err, cairn.CodeInvalid) || !strings.Contains(err.Error(), "age "+bk.id.Recipient().String()+": no matching identity in ageKeyFile "+a.file) {
		t.Fatalf("rotating to a recipient the backend cannot read: err = %v", err)
	}
	if r.Commits(t) != before {
		t.Fatal("a refused rotation made a commit")
	}
	commit, n, err := b.RotateKeys(ctx, sops.Config{Age: []string{bk.id.Recipient().String()}, AgeKeyFile: bk.file})
	if err != nil {
		t.Fatal(err)
	}
	if n != 2 || commit == "" || r.Commits(t) != before+1 {
		t.Fatalf("RotateKeys = %q, %d files; %d commits (want 2 files in 1 commit)", commit, n, r.Commits(t)-before)
	}
	if msg := gittest.Git(t, r.Path, "log", "-1", "--format=%s", "main"); !strings.HasPrefix(msg, "cairn: rotate SOPS keys of 2 files") {
		t.Fatalf("commit message %q", msg)
	}

	// The configuration now names B only; a backend reading with B alone.
	b2 := gittest.Open(t, r.FileURL(), sopsSettings(bk), nil)
	for id, rv := range map[string]int{"one": 1, "two": 2} {
		got, err := b2.GetValue(ctx, cairn.GetValueRequest{InstanceID: id, ResourceVersion: rv})
		want := `{"password":"pw-` + id + map[bool]string{true: "-2", false: ""}[rv == 2] + `"}`
		if err != nil || !sameValue(got, json.RawMessage(want)) {
			t.Fatalf("%s version %d after rotation = %s, %v; want %s", id, rv, got, err, want)
		}
	}
	// The files at the tip: B's sops reads them, A's does not.
	files := strings.Fields(gittest.Git(t, r.Path, "ls-tree", "-r", "--name-only", "main"))
	if len(files) != 2 {
		t.Fatalf("files at main: %v", files)
	}
	dir := t.TempDir()
	for _, f := range files {
		p := filepath.Join(dir, filepath.Base(f))
		os.WriteFile(p, []byte(r.Show(t, "", f)), 0o600)
		for key, ok := range map[string]bool{bk.file: true, a.file: false} {
			cmd := exec.Command(bin, "decrypt", p)
			cmd.Env = append(os.Environ(), "SOPS_AGE_KEY_FILE="+key)
			out, err := cmd.CombinedOutput()
			if (err == nil) != ok {
				t.Fatalf("sops -d %s with key %s: err %v (want success %v)\n%s", f, key, err, ok, out)
			}
		}
	}
}

// TestSOPSRefusesWritesItCouldNotRead: a backend whose identities read none
// of its recipients' files (the key file missing, another identity's, an
// empty variable) encrypted every write, since encrypting needs only
// recipients, and committed files the hub then failed to read. Such a
// backend is refused when registered, and its writes fail before anything
// is committed, saying where identities were looked for; the key is never
// quoted.
func TestSOPSRefusesWritesItCouldNotRead(t *testing.T) {
	ctx := context.Background()
	k, other := newAgeKey(t), newAgeKey(t)
	recipient := k.id.Recipient().String()
	for _, tc := range []struct {
		name   string
		sops   map[string]any
		getenv func(string) string
		want   string
	}{
		{"missing key file", map[string]any{"ageKeyFile": "/nonexistent/age.key"}, nil, "encryption.sops.ageKeyFile: open /nonexistent/age.key"},
		{"another identity", map[string]any{"ageKeyFile": other.file}, nil, "age " + recipient + ": no matching identity in ageKeyFile " + other.file},
		{"empty variable", map[string]any{"ageKeyEnv": "CAIRN_TEST_NO_KEY"}, func(string) string { return "" }, "encryption.sops.ageKeyEnv: $CAIRN_TEST_NO_KEY is empty"},
		{"no key anywhere", map[string]any{}, func(string) string { return "" }, "no age identity: name one with encryption.sops.ageKeyFile"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := gittest.NewRemote(t)
			s := map[string]any{"age": []string{recipient}}
			for f, v := range tc.sops {
				s[f] = v
			}
			settings := map[string]any{"encryption": map[string]any{"sops": s}}
			b := gittest.Open(t, r.FileURL(), settings, tc.getenv)
			_, err := b.OnCreate(ctx, cairn.OnCreateRequest{InstanceID: "one", Value: json.RawMessage(`{"password":"pw-unreadable"}`),
				Context: json.RawMessage(`{"apiVersion":"db.example.com/v1","kind":"Credentials","namespace":"default"}`)})
			if !cairn.HasCode(err, cairn.CodeInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("write: err = %v, want Invalid containing %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "AGE-SECRET-KEY") || strings.Contains(err.Error(), "pw-unreadable") {
				t.Fatalf("the error quotes a key or the value: %v", err)
			}
			if n := r.Commits(t); n != 0 {
				t.Fatalf("a refused write made %d commits", n)
			}

			// Registering such a backend is refused the same way.
			value, err := json.Marshal(map[string]any{"url": r.FileURL(), "author": map[string]string{"name": "t", "email": "t@example.com"}, "encryption": map[string]any{"sops": s}})
			if err != nil {
				t.Fatal(err)
			}
			o := git.NewOpener(git.OpenerConfig{CacheDir: t.TempDir(), Getenv: tc.getenv})
			err = o.CheckBackendConfig(ctx, cairn.StorageBackend{TypeRef: cairn.TypeRef{Path: git.TypePath, Revision: "0.1.0"}, Value: value})
			if !cairn.HasCode(err, cairn.CodeInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("CheckBackendConfig: err = %v, want Invalid containing %q", err, tc.want)
			}
		})
	}
}

// TestSOPSKeyFixedWhileRunning: the identities were read once, when the
// backend was opened, so a write refused for a missing key file stayed
// refused after the file was put in place (and a file encrypted to a key
// added to the key file stayed unreadable) until the server restarted. A
// failing decryption or check reads the identities again.
func TestSOPSKeyFixedWhileRunning(t *testing.T) {
	ctx := context.Background()
	r := gittest.NewRemote(t)
	k := newAgeKey(t)
	file := filepath.Join(t.TempDir(), "age.txt")
	b := gittest.Open(t, r.FileURL(), map[string]any{"encryption": map[string]any{"sops": map[string]any{
		"age": []string{k.id.Recipient().String()}, "ageKeyFile": file}}}, nil)
	req := cairn.OnCreateRequest{InstanceID: "one", Value: json.RawMessage(`{"password":"pw-one"}`),
		Context: json.RawMessage(`{"apiVersion":"db.example.com/v1","kind":"Credentials","namespace":"default"}`)}
	if _, err := b.OnCreate(ctx, req); !cairn.HasCode(err, cairn.CodeInvalid) {
		t.Fatalf("write without the key file: err = %v, want Invalid", err)
	}
	if err := os.WriteFile(file, []byte(k.id.String()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := b.OnCreate(ctx, req); err != nil {
		t.Fatalf("write once the key file is in place: %v", err)
	}
	got, err := b.GetValue(ctx, cairn.GetValueRequest{InstanceID: "one", ResourceVersion: 1})
	if err != nil || !sameValue(got, req.Value) {
		t.Fatalf("read back = %s, %v", got, err)
	}
}
