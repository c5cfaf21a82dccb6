package sops_test

import (
	"bytes"
	"testing"

	"github.com/cairn-dev/cairn/backend/sops"
)

// FuzzCodec feeds files a person could push to the repository: Decrypt
// and IsEncrypted must not panic on any of them, and whatever Encrypt
// accepts must decrypt, MAC checked, to a plaintext that encrypts and
// decrypts to itself again.
func FuzzCodec(f *testing.F) {
	id, keyFile := newIdentity(f)
	c, err := sops.New(sops.Config{Age: []string{id.Recipient().String()}, AgeKeyFile: keyFile}, nil)
	if err != nil {
		f.Fatal(err)
	}
	for _, seed := range []struct {
		name string
		text string
	}{{"x.json", resource}, {"x.yaml", richYAML}, {"x.yaml", twoDocsYAML}, {"x.json", richJSON}} {
		f.Add(seed.name == "x.yaml", []byte(seed.text))
		enc, err := c.Encrypt(seed.name, []byte(seed.text))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(seed.name == "x.yaml", enc)
	}
	f.Fuzz(func(t *testing.T, isYAML bool, data []byte) {
		name := "x.json"
		if isYAML {
			name = "x.yaml"
		}
		sops.IsEncrypted(name, data)
		c.Decrypt(name, data)
		enc, err := c.Encrypt(name, data)
		if err != nil {
			return
		}
		plain, err := c.Decrypt(name, enc)
		if err != nil {
			t.Fatalf("cairn cannot read what it encrypted: %v\n%s", err, enc)
		}
		enc2, err := c.Encrypt(name, plain)
		if err != nil {
			t.Fatalf("cairn cannot encrypt what it decrypted: %v\n%s", err, plain)
		}
		plain2, err := c.Decrypt(name, enc2)
		if err != nil || !bytes.Equal(plain, plain2) {
			t.Fatalf("second round: %v\n%s\nfirst round:\n%s", err, plain2, plain)
		}
	})
}
