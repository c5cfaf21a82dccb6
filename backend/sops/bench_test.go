package sops_test

import (
	"encoding/json"
	"testing"

	"github.com/cairn-dev/cairn/backend/sops"
)

// BenchmarkCodec is the cost SOPS adds per file written and read, against
// the baseline of formatting the same resource as plain JSON.
func BenchmarkCodec(b *testing.B) {
	id, keyFile := newIdentity(b)
	c, err := sops.New(sops.Config{Age: []string{id.Recipient().String()}, AgeKeyFile: keyFile}, nil)
	if err != nil {
		b.Fatal(err)
	}
	plain := []byte(resource)
	enc, err := c.Encrypt("default/db.json", plain)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("baseline-plain-json", func(b *testing.B) {
		for b.Loop() {
			var v any
			if err := json.Unmarshal(plain, &v); err != nil {
				b.Fatal(err)
			}
			if _, err := json.MarshalIndent(v, "", "  "); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encrypt", func(b *testing.B) {
		for b.Loop() {
			if _, err := c.Encrypt("default/db.json", plain); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decrypt", func(b *testing.B) {
		for b.Loop() {
			if _, err := c.Decrypt("default/db.json", enc); err != nil {
				b.Fatal(err)
			}
		}
	})
}
