package sops_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"filippo.io/age"
	"sigs.k8s.io/yaml"

	"github.com/cairn-dev/cairn/backend/sops"
)

const resource = `{"apiVersion":"db.example.com/v1","kind":"Credentials","metadata":{"namespace":"default","name":"db","labels":{"team":"a"}},"spec":{"username":"app","password":"sops-marker-44d1"}}`

// newIdentity returns a fresh age identity and a key file holding it.
func newIdentity(t testing.TB) (*age.X25519Identity, string) {
	t.Helper()
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "keys.txt")
	if err := os.WriteFile(f, []byte("# test key\n"+id.String()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return id, f
}

func newCodec(t *testing.T, cfg sops.Config) *sops.Codec {
	t.Helper()
	c, err := sops.New(cfg, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestRoundTrip(t *testing.T) {
	id, keyFile := newIdentity(t)
	for _, name := range []string{"default/db.json", "default/db.yaml"} {
		t.Run(name, func(t *testing.T) {
			c := newCodec(t, sops.Config{Age: []string{id.Recipient().String()}, AgeKeyFile: keyFile})
			plain := []byte(resource)
			if strings.HasSuffix(name, ".yaml") {
				var err error
				if plain, err = yaml.JSONToYAML(plain); err != nil {
					t.Fatal(err)
				}
			}
			enc, err := c.Encrypt(name, plain)
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Contains(enc, []byte("sops-marker-44d1")) || bytes.Contains(enc, []byte(`"app"`)) {
				t.Fatalf("plaintext of spec in the encrypted file:\n%s", enc)
			}
			// Keys in the clear stay readable.
			for _, clear := range []string{"db.example.com/v1", "Credentials", "team", "ENC[AES256_GCM,"} {
				if !bytes.Contains(enc, []byte(clear)) {
					t.Fatalf("%q not in the encrypted file:\n%s", clear, enc)
				}
			}
			if !sops.IsEncrypted(name, enc) || sops.IsEncrypted(name, plain) {
				t.Fatal("IsEncrypted is wrong")
			}
			dec, err := c.Decrypt(name, enc)
			if err != nil {
				t.Fatal(err)
			}
			if !sameJSON(t, name, dec, plain) {
				t.Fatalf("decrypted:\n%s\nwant:\n%s", dec, plain)
			}
			// Someone else's key cannot read it.
			_, otherFile := newIdentity(t)
			other := newCodec(t, sops.Config{Age: []string{id.Recipient().String()}, AgeKeyFile: otherFile})
			if _, err := other.Decrypt(name, enc); err == nil || !strings.Contains(err.Error(), "no matching identity in ageKeyFile "+otherFile) {
				t.Fatalf("wrong key: err = %v", err)
			}
			// A value changed without sops fails the MAC.
			tampered := bytes.Replace(enc, []byte("Credentials"), []byte("Credentialz"), 1)
			if _, err := c.Decrypt(name, tampered); err == nil || !strings.Contains(err.Error(), "MAC mismatch") {
				t.Fatalf("tampered: err = %v", err)
			}
		})
	}
}

func sameJSON(t *testing.T, name string, a, b []byte) bool {
	t.Helper()
	norm := func(x []byte) any {
		if strings.HasSuffix(name, ".yaml") {
			var err error
			if x, err = yaml.YAMLToJSON(x); err != nil {
				t.Fatal(err)
			}
		}
		var v any
		if err := json.Unmarshal(x, &v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	ja, _ := json.Marshal(norm(a))
	jb, _ := json.Marshal(norm(b))
	return bytes.Equal(ja, jb)
}

func TestConfigErrors(t *testing.T) {
	id, _ := newIdentity(t)
	r := id.Recipient().String()
	for _, tc := range []struct {
		cfg  sops.Config
		want string
	}{
		{sops.Config{}, "at least one recipient"},
		{sops.Config{Age: []string{"age1nope"}}, `encryption.sops.age[0]: "age1nope" is not an age recipient`},
		{sops.Config{Age: []string{r}, EncryptedRegex: "^(", EncryptedSuffix: "_x"}, "not both"},
		{sops.Config{Age: []string{r}, EncryptedRegex: "^("}, "encryption.sops.encryptedRegex"},
	} {
		if _, err := sops.New(tc.cfg, nil); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: err = %v, want %q", tc.cfg, err, tc.want)
		}
	}
	// An identity that does not parse is named by where it is, not quoted.
	bad := filepath.Join(t.TempDir(), "bad.txt")
	os.WriteFile(bad, []byte("AGE-SECRET-KEY-1NOTAKEY\n"), 0o600)
	c := newCodec(t, sops.Config{Age: []string{r}, AgeKeyFile: bad})
	enc, err := c.Encrypt("x.json", []byte(resource))
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Decrypt("x.json", enc)
	if err == nil || !strings.Contains(err.Error(), "ageKeyFile "+bad+" does not hold valid age identities") || strings.Contains(err.Error(), "NOTAKEY") {
		t.Fatalf("bad identity: err = %v", err)
	}
}

// CheckReadable tells whether a codec's identities read what it encrypts,
// naming the recipients and where identities were looked for, never a key.
func TestCheckReadable(t *testing.T) {
	a, aFile := newIdentity(t)
	b, bFile := newIdentity(t)
	ra, rb := a.Recipient().String(), b.Recipient().String()
	// A key file cut short after age-keygen's comments, and an empty one.
	dir := t.TempDir()
	cut, empty := filepath.Join(dir, "cut.key"), filepath.Join(dir, "empty.key")
	if err := os.WriteFile(cut, []byte("# created: 2026-11-24T21:28:27Z\n# public key: "+ra+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		cfg  sops.Config
		want string // "" when readable
	}{
		{"a key file holding comments only", sops.Config{Age: []string{ra}, AgeKeyFile: cut}, "age " + ra + ": no age identity in ageKeyFile " + cut},
		{"an empty key file", sops.Config{Age: []string{ra}, AgeKeyFile: empty}, "age " + ra + ": no age identity in ageKeyFile " + empty},
		{"its own recipient", sops.Config{Age: []string{ra}, AgeKeyFile: aFile}, ""},
		{"one of two recipients", sops.Config{Age: []string{rb, ra}, AgeKeyFile: aFile}, ""},
		{"another recipient only", sops.Config{Age: []string{rb}, AgeKeyFile: aFile}, "age " + rb + ": no matching identity in ageKeyFile " + aFile},
		{"no identity at all", sops.Config{Age: []string{ra}}, "age " + ra + ": no age identity: name one with encryption.sops.ageKeyFile"},
		{"a key file that is not there", sops.Config{Age: []string{ra}, AgeKeyFile: bFile + ".missing"}, "encryption.sops.ageKeyFile: open " + bFile + ".missing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := newCodec(t, tc.cfg).CheckReadable()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("err = %v, want readable", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("err = %v, want %q", err, tc.want)
			case err != nil && (strings.Contains(err.Error(), a.String()) || strings.Contains(err.Error(), b.String())):
				t.Fatalf("the error quotes an identity: %v", err)
			}
		})
	}
}

// sopsTool returns the real sops binary, skipping (failing under CI) when
// scripts/with-services did not provide it.
func sopsTool(t *testing.T) string {
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

// TestRealSops checks both directions against the sops tool: it decrypts
// what cairn wrote, and cairn decrypts what it encrypted.
func TestRealSops(t *testing.T) {
	sopsTool(t) // skips without the tool
	id, keyFile := newIdentity(t)
	c := newCodec(t, sops.Config{Age: []string{id.Recipient().String()}, AgeKeyFile: keyFile})
	dir := t.TempDir()
	for _, ext := range []string{"json", "yaml"} {
		name := filepath.Join(dir, "db."+ext)
		plain := []byte(resource)
		if ext == "yaml" {
			plain, _ = yaml.JSONToYAML(plain)
		}
		enc, err := c.Encrypt(name, plain)
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(name, enc, 0o600)
		if got := sopsRun(t, keyFile, "decrypt", name); !sameJSON(t, name, got, plain) {
			t.Fatalf("sops -d of cairn's %s file:\n%s", ext, got)
		}

		// A person encrypts with sops -e; cairn reads it.
		src := filepath.Join(dir, "person."+ext)
		os.WriteFile(src, plain, 0o600)
		enc = sopsRun(t, keyFile, "encrypt", "--age", id.Recipient().String(), "--encrypted-regex", "^spec$", src)
		if bytes.Contains(enc, []byte("sops-marker-44d1")) {
			t.Fatal("sops -e left the password in the clear")
		}
		dec, err := c.Decrypt(src, enc)
		if err != nil {
			t.Fatalf("cairn cannot read sops -e's %s file: %v\n%s", ext, err, enc)
		}
		if !sameJSON(t, src, dec, plain) {
			t.Fatalf("cairn decrypted sops -e's %s file to:\n%s", ext, dec)
		}
	}
}

// TestFileTextBounded: an encrypted file's metadata is written by whoever
// pushes to the repository; the errors that name it (a recipient no
// identity reads, a malformed field) carry it bounded and printable.
func TestFileTextBounded(t *testing.T) {
	id, keyFile := newIdentity(t)
	c := newCodec(t, sops.Config{Age: []string{id.Recipient().String()}, AgeKeyFile: keyFile})
	enc, err := c.Encrypt("default/db.json", []byte(resource))
	if err != nil {
		t.Fatal(err)
	}
	hostile := `tenant-b \u001b[2J\u202e` + strings.Repeat("x", 100_000)
	for name, file := range map[string][]byte{
		"recipient":    bytes.Replace(enc, []byte(`"recipient": "`+id.Recipient().String()), []byte(`"recipient": "`+hostile), 1),
		"lastmodified": regexpReplace(t, enc, `"lastmodified": "[^"]*"`, `"lastmodified": "`+hostile+`"`),
	} {
		if bytes.Equal(file, enc) {
			t.Fatalf("%s: the file was not changed:\n%s", name, enc)
		}
		// Another identity: the data key is not read, and the error names
		// the file's recipients.
		_, other := newIdentity(t)
		_, err := newCodec(t, sops.Config{Age: []string{id.Recipient().String()}, AgeKeyFile: other}).Decrypt("default/db.json", file)
		if err == nil {
			t.Fatalf("%s: no error", name)
		}
		msg := err.Error()
		if len(msg) > 2048 || strings.ContainsAny(msg, "\x1b\u202e") || !strings.Contains(msg, "tenant-b") || !strings.Contains(msg, "more bytes") {
			t.Errorf("%s: the error is %d bytes, has control characters, lost the file's words or does not say they were cut: %q", name, len(msg), msg[:min(len(msg), 300)])
		}
	}
}

func regexpReplace(t *testing.T, b []byte, re, with string) []byte {
	t.Helper()
	return regexp.MustCompile(re).ReplaceAll(b, []byte(with))
}
