package sops_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/cairn-dev/cairn/backend/sops"
)

// A YAML file with every shape sops handles: comments in all places
// (inside and outside the encrypted part, inline, in lists, at the end),
// nested maps and lists, ints, floats, bools, nulls, empty values,
// multi-line strings, timestamps, anchors.
const richYAML = `# Top comment
apiVersion: v1 # inline on a clear value
# sops:clear
kind: Secret
metadata:
  name: db
  labels:
    team: a
spec:
  # about the password
  # sops:enc
  password: hunter2-marker # inline in spec
  port: 5432
  ratio: 1.5
  huge: 1e+30
  negative: -7
  enabled: true
  disabled: false
  nothing: null
  tilde: ~
  empty: ""
  quoted: "012"
  multi: |
    line one
    line two
  folded: >
    folded
    text
  list:
    - a # item inline
    # before two
    - 2
    - nested: x
      deeper:
        - [1, 2.5]
  emptymap: {}
  emptylist: []
  when: 2001-12-14t21:59:43.10-05:00
  anchored: &a
    k: v
  alias: *a
  key_unencrypted: visible
  token_enc: secret-suffix
# trailing comment
`

const richJSON = `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"db","labels":{"team":"a"}},
"spec":{"password":"hunter2-marker <&> \"q\" ü","token_enc":"s","port":5432,"ratio":1.5,"one":1.0,"big":123456789012345678901,
"exp":1e21,"neg":-0.25,"t":true,"f":false,"nul":null,"e":"","list":[1,"two",{"k":false},[],{}],"obj":{},
"key_unencrypted":"visible"}}`

const twoDocsYAML = `# sops:clear
kind: A
spec:
  # sops:enc
  password: first-marker
  token_enc: token-marker
  key_unencrypted: visible
---
# second
# sops:clear
kind: B
spec:
  password: second-marker
`

// interopRules are the ways to choose the encrypted values, as sops'
// creation rules write them; cairn writes the first three itself.
var interopRules = []struct {
	name     string
	rule     string       // the creation rule's lines
	cairn    *sops.Config // cairn's config for the same rule, if it has one
	macOnly  bool
	clearKey string // a key whose string value the rule leaves readable
	encKey   string // a key whose value it encrypts
}{
	{"encrypted_regex default", "encrypted_regex: ^spec$", &sops.Config{}, false, "kind", "password"},
	{"encrypted_regex", "encrypted_regex: ^(password|list)$", &sops.Config{EncryptedRegex: "^(password|list)$"}, false, "kind", "password"},
	{"encrypted_suffix", "encrypted_suffix: _enc", &sops.Config{EncryptedSuffix: "_enc"}, false, "password", "token_enc"},
	{"no rule", "", nil, false, "key_unencrypted", "password"},
	{"unencrypted_suffix", "unencrypted_suffix: _unencrypted", nil, false, "key_unencrypted", "password"},
	{"unencrypted_regex", "unencrypted_regex: ^(apiVersion|kind|metadata)$", nil, false, "kind", "password"},
	{"mac_only_encrypted", "encrypted_regex: ^spec$\n    mac_only_encrypted: true", nil, true, "kind", "password"},
	// YAML only: JSON has no comments.
	{"encrypted_comment_regex", "encrypted_comment_regex: sops:enc", nil, false, "kind", "password"},
	{"unencrypted_comment_regex", "unencrypted_comment_regex: sops:clear", nil, false, "kind", "password"},
}

// sopsRun runs the real sops tool with the identity in keyFile.
func sopsRun(t *testing.T, keyFile string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(sopsTool(t), args...)
	cmd.Env = append(os.Environ(), "SOPS_AGE_KEY_FILE="+keyFile)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("sops %v: %v: %s", args, err, stderr.String())
	}
	return out
}

// TestInteropWithSops runs every shape through every rule both ways, and
// asks for the same bytes: what cairn decrypts from a file sops encrypted
// is what sops -d prints, and sops -d of a file cairn encrypted is too.
// sops is told to indent JSON as cairn writes it (not at all).
func TestInteropWithSops(t *testing.T) {
	sopsTool(t)
	id, keyFile := newIdentity(t)
	recipient := id.Recipient().String()
	for _, rule := range interopRules {
		for _, doc := range []struct{ name, text string }{{"rich.yaml", richYAML}, {"rich.json", richJSON}, {"docs.yml", twoDocsYAML}} {
			if strings.Contains(rule.rule, "comment_regex") && strings.HasSuffix(doc.name, ".json") {
				continue
			}
			t.Run(rule.name+"/"+doc.name, func(t *testing.T) {
				dir := t.TempDir()
				cfg := filepath.Join(dir, "sops.yaml")
				os.WriteFile(cfg, []byte("creation_rules:\n  - age: "+recipient+"\n    "+rule.rule+"\nstores:\n  json:\n    indent: 0\n"), 0o600)
				src := filepath.Join(dir, doc.name)
				os.WriteFile(src, []byte(doc.text), 0o600)

				// sops encrypts, cairn decrypts: sops -d's bytes.
				enc := sopsRun(t, keyFile, "--config", cfg, "encrypt", src)
				encFile := filepath.Join(dir, "enc-"+doc.name)
				os.WriteFile(encFile, enc, 0o600)
				want := sopsRun(t, keyFile, "--config", cfg, "decrypt", encFile)
				c := newCodec(t, sops.Config{Age: []string{recipient}, AgeKeyFile: keyFile})
				got, err := c.Decrypt(doc.name, enc)
				if err != nil {
					t.Fatalf("cairn cannot read sops' file: %v\n%s", err, enc)
				}
				if !bytes.Equal(got, want) {
					t.Fatalf("cairn decrypted sops' file to:\n%s\nsops -d:\n%s", got, want)
				}
				if !sops.IsEncrypted(doc.name, enc) {
					t.Fatal("IsEncrypted(sops' file) = false")
				}
				tamper(t, c, doc.name, enc, rule.clearKey, rule.encKey, rule.macOnly)

				if rule.cairn == nil {
					return
				}
				// cairn encrypts, sops decrypts: the same bytes again.
				cc := *rule.cairn
				cc.Age, cc.AgeKeyFile = []string{recipient}, keyFile
				c = newCodec(t, cc)
				mine, err := c.Encrypt(doc.name, []byte(doc.text))
				if err != nil {
					t.Fatal(err)
				}
				mineFile := filepath.Join(dir, "cairn-"+doc.name)
				os.WriteFile(mineFile, mine, 0o600)
				if got := sopsRun(t, keyFile, "--config", cfg, "decrypt", mineFile); !bytes.Equal(got, want) {
					t.Fatalf("sops -d of cairn's file:\n%s\nwant:\n%s", got, want)
				}
				if got, err := c.Decrypt(doc.name, mine); err != nil || !bytes.Equal(got, want) {
					t.Fatalf("cairn's own file: %v\n%s", err, got)
				}
				tamper(t, c, doc.name, mine, rule.clearKey, rule.encKey, false)
			})
		}
	}
}

// tamper changes an encrypted file as someone without sops would and
// expects the MAC to catch it: a readable value changed, an encrypted key
// removed, the metadata's lastmodified changed. With mac_only_encrypted a
// readable value may change; that is the point of the option.
func tamper(t *testing.T, c *sops.Codec, name string, enc []byte, clearKey, encKey string, macOnly bool) {
	t.Helper()
	isJSON := strings.HasSuffix(name, ".json")
	// edit changes the first line holding key (a YAML key or JSON member
	// whose value is on the line) with f.
	edit := func(key string, f func(line string) string) []byte {
		lines := strings.Split(string(enc), "\n")
		for i, l := range lines {
			tl := strings.TrimSpace(l)
			if strings.HasPrefix(tl, key+": ") || strings.HasPrefix(tl, `"`+key+`": `) {
				lines[i] = f(l)
				if lines[i] == "" && i > 0 && strings.TrimSpace(lines[i-1]) == "# sops:enc" {
					// The marker goes with the key it marks, or it
					// would mark the next one.
					lines[i-1] = ""
				}
				return []byte(strings.Join(lines, "\n"))
			}
		}
		t.Fatalf("no line with %s in:\n%s", key, enc)
		return nil
	}
	changed := edit(clearKey, func(l string) string {
		if isJSON {
			return strings.Replace(l, `": "`, `": "x`, 1)
		}
		return strings.Replace(l, ": ", ": x", 1)
	})
	removed := edit(encKey, func(l string) string {
		if !strings.Contains(l, ": ") || !strings.Contains(l, "ENC[AES256_GCM,") {
			t.Fatalf("%s is not encrypted: %s", encKey, l)
		}
		return ""
	})
	stamp := regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ`)
	lastModified := edit("lastmodified", func(l string) string { return stamp.ReplaceAllString(l, "1999-01-01T00:00:00Z") })
	for _, tc := range []struct {
		what string
		data []byte
		ok   bool
	}{
		{"a readable value changed", changed, macOnly},
		{"an encrypted key removed", removed, false},
		{"lastmodified changed", lastModified, false},
	} {
		if bytes.Equal(tc.data, enc) {
			t.Fatalf("%s: the edit changed nothing", tc.what)
		}
		_, err := c.Decrypt(name, tc.data)
		switch {
		case tc.ok && err != nil:
			t.Errorf("%s, mac_only_encrypted: %v", tc.what, err)
		case !tc.ok && (err == nil || !strings.Contains(err.Error(), "sops: "+name+": MAC mismatch")):
			t.Errorf("%s: err = %v, want a MAC mismatch naming the file", tc.what, err)
		}
	}
}

// TestSopsEditsCairnsFile: sops set (what sops edit does, without an
// editor) changes a value in a file cairn wrote, and cairn reads the
// change with the MAC sops recomputed.
func TestSopsEditsCairnsFile(t *testing.T) {
	sopsTool(t)
	id, keyFile := newIdentity(t)
	c := newCodec(t, sops.Config{Age: []string{id.Recipient().String()}, AgeKeyFile: keyFile})
	for _, name := range []string{"db.json", "db.yaml"} {
		plain := []byte(resource)
		if strings.HasSuffix(name, ".yaml") {
			plain, _ = yaml.JSONToYAML(plain)
		}
		enc, err := c.Encrypt(name, plain)
		if err != nil {
			t.Fatal(err)
		}
		file := filepath.Join(t.TempDir(), name)
		os.WriteFile(file, enc, 0o600)
		sopsRun(t, keyFile, "set", file, `["spec"]["password"]`, `"changed-by-sops"`)
		edited, _ := os.ReadFile(file)
		dec, err := c.Decrypt(name, edited)
		if err != nil {
			t.Fatalf("%s after sops set: %v\n%s", name, err, edited)
		}
		if !bytes.Contains(dec, []byte("changed-by-sops")) || bytes.Contains(dec, []byte("sops-marker-44d1")) {
			t.Fatalf("%s after sops set decrypts to:\n%s", name, dec)
		}
	}
}

// TestKeysCairnDoesNotUse: a file whose data key is encrypted to cloud KMS
// keys, or split over key groups, is read far enough to say so.
func TestKeysCairnDoesNotUse(t *testing.T) {
	id, keyFile := newIdentity(t)
	c := newCodec(t, sops.Config{Age: []string{id.Recipient().String()}, AgeKeyFile: keyFile})
	enc, err := c.Encrypt("db.json", []byte(resource))
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(enc, &doc); err != nil {
		t.Fatal(err)
	}
	md := doc["sops"].(map[string]any)
	age := md["age"]
	withKeys := func(change func(md map[string]any)) []byte {
		m := map[string]any{}
		for k, v := range md {
			m[k] = v
		}
		change(m)
		doc["sops"] = m
		b, err := json.Marshal(doc)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	const created = "2026-01-02T03:04:05Z"
	cloud := func(md map[string]any) {
		delete(md, "age")
		md["kms"] = []any{map[string]any{"arn": "arn:aws:kms:eu-west-1:1:key/k", "role": "arn:aws:iam::1:role/r", "created_at": created, "enc": "AQID", "aws_profile": ""}}
		md["gcp_kms"] = []any{map[string]any{"resource_id": "projects/p/locations/l/keyRings/r/cryptoKeys/k", "created_at": created, "enc": "AQID"}}
		md["azure_kv"] = []any{map[string]any{"vault_url": "https://v.vault.azure.net", "name": "k", "version": "1", "created_at": created, "enc": "AQID"}}
		md["hc_vault"] = []any{map[string]any{"vault_address": "https://vault:8200", "engine_path": "sops", "key_name": "k", "created_at": created, "enc": "AQID"}}
	}
	for _, tc := range []struct {
		name string
		data []byte
		want []string
	}{
		{"cloud keys only", withKeys(cloud), []string{
			"sops: cannot decrypt the data key of db.json: ",
			"kms arn:aws:kms:eu-west-1:1:key/k+arn:aws:iam::1:role/r: not supported by cairn",
			"gcp_kms projects/p/locations/l/keyRings/r/cryptoKeys/k: not supported by cairn",
			"azure_kv https://v.vault.azure.net/keys/k/1: not supported by cairn",
			"hc_vault https://vault:8200/v1/sops/keys/k: not supported by cairn",
		}},
		{"two key groups", withKeys(func(md map[string]any) {
			delete(md, "age")
			md["key_groups"] = []any{map[string]any{"age": age}, map[string]any{"age": age}}
			md["shamir_threshold"] = 2
		}), []string{"sops: db.json has 2 key groups; cairn reads files with one (no Shamir secret sharing)"}},
		{"two rules", withKeys(func(md map[string]any) { md["encrypted_suffix"] = "_enc" }),
			[]string{"sops: read db.json: sops metadata names more than one of"}},
	} {
		if !bytes.Contains(tc.data, []byte(`"sops"`)) {
			t.Fatal("no metadata")
		}
		_, err := c.Decrypt("db.json", tc.data)
		for _, w := range tc.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%s: err = %v, want %q", tc.name, err, w)
			}
		}
	}
	// With a KMS key beside the age key, the age key still reads it (the
	// file as written, a key list added: re-encoding would reorder it).
	mixed := bytes.Replace(enc, []byte(`"sops": {`), []byte(`"sops": {"kms": [{"arn": "arn:aws:kms:eu-west-1:1:key/k", "created_at": "`+created+`", "enc": "AQID"}],`), 1)
	if dec, err := c.Decrypt("db.json", mixed); err != nil || !bytes.Contains(dec, []byte("sops-marker-44d1")) {
		t.Fatalf("age beside a KMS key: %v\n%s", err, mixed)
	}
}

// TestFormatVersion: the version cairn writes in the metadata is the
// sops release go.mod requires, whose age and pgp packages cairn links.
func TestFormatVersion(t *testing.T) {
	mod, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*github\.com/getsops/sops/v3 v(\S+)`).FindSubmatch(mod)
	if m == nil {
		t.Fatal("go.mod does not require github.com/getsops/sops/v3")
	}
	v := string(m[1])
	id, keyFile := newIdentity(t)
	c := newCodec(t, sops.Config{Age: []string{id.Recipient().String()}, AgeKeyFile: keyFile})
	enc, err := c.Encrypt("db.json", []byte(resource))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(enc, []byte(`"version": "`+v+`"`)) {
		t.Fatalf("cairn writes another version than sops %s:\n%s", v, enc)
	}
}

// TestDecryptErrorsNameNoValue: a damaged encrypted value is reported by
// file and key, never by its plaintext.
func TestDecryptErrorsNameNoValue(t *testing.T) {
	id, keyFile := newIdentity(t)
	c := newCodec(t, sops.Config{Age: []string{id.Recipient().String()}, AgeKeyFile: keyFile})
	enc, err := c.Encrypt("db.json", []byte(resource))
	if err != nil {
		t.Fatal(err)
	}
	encValue := regexp.MustCompile(`"(password|username)": "(ENC\[[^"]*)"`)
	vals := map[string]string{}
	for _, m := range encValue.FindAllStringSubmatch(string(enc), -1) {
		vals[m[1]] = m[2]
	}
	for _, tc := range []struct {
		name string
		data string
		want string
	}{
		// The type is outside what AES-GCM authenticates.
		{"wrong type", strings.Replace(string(enc), vals["password"], strings.Replace(vals["password"], "type:str", "type:int", 1), 1),
			`sops: decrypt db.json: value under "spec.password": the decrypted value is not a valid int`},
		// A value moved to another key does not decrypt there.
		{"moved value", strings.Replace(string(enc), vals["username"], vals["password"], 1),
			`sops: decrypt db.json: value under "spec.username": cannot decrypt with the data key`},
		{"not encrypted", strings.Replace(string(enc), vals["password"], "plain", 1),
			`sops: decrypt db.json: value under "spec.password": not an ENC[AES256_GCM,...] value`},
	} {
		_, err := c.Decrypt("db.json", []byte(tc.data))
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "sops-marker-44d1") {
			t.Errorf("%s: err = %v, want %q", tc.name, err, tc.want)
		}
	}
}
