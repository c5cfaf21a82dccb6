// Package atrest encrypts the built-in backend's values at rest. Its
// configuration has the shape of the Kubernetes API server's
// EncryptionConfiguration: for each list of Type path patterns, an ordered
// list of providers (aesgcm, secretbox, identity) with named keys. The first
// provider of the first matching entry encrypts new values; every key of
// every provider decrypts, so keys can be rotated by adding a new first key,
// re-encrypting (Reencrypt, cairn migrate --reencrypt) and then removing the
// old one.
//
// Encryption wraps a store.Store (Wrap): values are sealed before they reach
// SQLite or PostgreSQL and opened when read, so nothing above the store
// changes. A sealed value is stored as a JSON string
// "cairn:enc:<provider>:v1:<key name>:<base64>", which both stores accept in
// their value column; any other stored value is plaintext (identity).
package atrest

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path"
	"strings"

	"sigs.k8s.io/yaml"
)

// APIVersion and Kind identify an encryption configuration file, as the
// Kubernetes API server names its own.
const (
	APIVersion = "apiserver.config.k8s.io/v1"
	Kind       = "EncryptionConfiguration"
)

// file is the configuration as written.
type file struct {
	APIVersion string          `json:"apiVersion"`
	Kind       string          `json:"kind"`
	Resources  []resourceEntry `json:"resources"`
}

type resourceEntry struct {
	// Resources are Type path patterns; "*" matches any run of characters,
	// dots included ("cap.type.*.credentials", "*").
	Resources []string        `json:"resources"`
	Providers []providerEntry `json:"providers"`
}

type providerEntry struct {
	AESGCM    *keysEntry `json:"aesgcm,omitempty"`
	Secretbox *keysEntry `json:"secretbox,omitempty"`
	Identity  *struct{}  `json:"identity,omitempty"`
	// Named only to refuse them with a clear error.
	AESCBC *keysEntry      `json:"aescbc,omitempty"`
	KMS    *map[string]any `json:"kms,omitempty"`
}

type keysEntry struct {
	Keys []keyEntry `json:"keys"`
}

type keyEntry struct {
	Name   string `json:"name"`
	Secret string `json:"secret"`
}

// Load reads and parses an encryption configuration file.
func Load(name string) (*Config, error) {
	data, err := os.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("encryption config: %w", err)
	}
	c, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("encryption config %s: %w", name, err)
	}
	return c, nil
}

// Parse parses an encryption configuration (YAML or JSON). Errors name the
// entry and field at fault and never include a key's secret.
func Parse(data []byte) (*Config, error) {
	var f file
	if err := yaml.UnmarshalStrict(data, &f); err != nil {
		return nil, fmt.Errorf("not a valid EncryptionConfiguration: %w", redactYAMLError(err))
	}
	if f.APIVersion != APIVersion || f.Kind != Kind {
		return nil, fmt.Errorf("apiVersion/kind is %q/%q, want %q/%q", f.APIVersion, f.Kind, APIVersion, Kind)
	}
	if len(f.Resources) == 0 {
		return nil, errors.New("resources: empty; list at least one entry")
	}
	c := &Config{keys: map[string]sealer{}}
	for i, r := range f.Resources {
		at := fmt.Sprintf("resources[%d]", i)
		if len(r.Resources) == 0 {
			return nil, fmt.Errorf("%s.resources: empty; list Type path patterns such as cap.type.*.credentials or *", at)
		}
		for j, p := range r.Resources {
			if _, err := path.Match(p, ""); err != nil || p == "" {
				return nil, fmt.Errorf("%s.resources[%d]: %q is not a valid Type path pattern", at, j, p)
			}
		}
		if len(r.Providers) == 0 {
			return nil, fmt.Errorf("%s.providers: empty; list at least one (identity stores plaintext)", at)
		}
		rule := rule{patterns: r.Resources}
		for j, p := range r.Providers {
			pat := fmt.Sprintf("%s.providers[%d]", at, j)
			ps, err := c.provider(pat, p)
			if err != nil {
				return nil, err
			}
			if j == 0 {
				rule.write = ps
			}
		}
		c.rules = append(c.rules, rule)
	}
	return c, nil
}

// provider registers the keys of one provider entry and returns the sealer
// that writes with it (nil for identity).
func (c *Config) provider(at string, p providerEntry) (sealer, error) {
	set := 0
	for _, b := range []bool{p.AESGCM != nil, p.Secretbox != nil, p.Identity != nil, p.AESCBC != nil, p.KMS != nil} {
		if b {
			set++
		}
	}
	if set != 1 {
		return nil, fmt.Errorf("%s: want exactly one of aesgcm, secretbox, identity; found %d", at, set)
	}
	var (
		kind string
		ks   *keysEntry
	)
	switch {
	case p.Identity != nil:
		return nil, nil
	case p.AESCBC != nil:
		return nil, fmt.Errorf("%s: aescbc is not supported (Kubernetes discourages it); use aesgcm or secretbox", at)
	case p.KMS != nil:
		return nil, fmt.Errorf("%s: kms is not supported yet; use aesgcm or secretbox", at)
	case p.AESGCM != nil:
		kind, ks = "aesgcm", p.AESGCM
	default:
		kind, ks = "secretbox", p.Secretbox
	}
	if len(ks.Keys) == 0 {
		return nil, fmt.Errorf("%s.%s.keys: empty; list at least one key", at, kind)
	}
	var first sealer
	for i, k := range ks.Keys {
		kat := fmt.Sprintf("%s.%s.keys[%d]", at, kind, i)
		if k.Name == "" || strings.ContainsAny(k.Name, ":\"\\") {
			return nil, fmt.Errorf("%s.name: %q: want a non-empty name without ':', '\"' or '\\'", kat, k.Name)
		}
		secret, err := base64.StdEncoding.DecodeString(k.Secret)
		if err != nil {
			return nil, fmt.Errorf("%s.secret (key %q): not valid base64", kat, k.Name)
		}
		s, err := newSealer(kind, k.Name, secret)
		if err != nil {
			return nil, fmt.Errorf("%s.secret (key %q): %w", kat, k.Name, err)
		}
		id := s.prefix()
		if prev, ok := c.keys[id]; ok && !prev.sameKey(s) {
			return nil, fmt.Errorf("%s.name: %s key %q is listed twice with different secrets", kat, kind, k.Name)
		}
		c.keys[id] = s
		if i == 0 {
			first = s
		}
	}
	return first, nil
}

// redactYAMLError drops the offending text a YAML error may quote, since it
// can be a key's secret.
func redactYAMLError(err error) error {
	msg := err.Error()
	if i := strings.Index(msg, "unmarshal"); i >= 0 {
		// "json: cannot unmarshal X into Go struct field ..." names the field.
		return errors.New(msg[i:])
	}
	return err
}

// Config is a parsed encryption configuration. It is immutable and safe for
// concurrent use.
type Config struct {
	rules []rule
	// keys holds every key, by its envelope prefix.
	keys map[string]sealer
}

type rule struct {
	patterns []string
	write    sealer // nil: identity
}

// writer returns the sealer new values of a Type path are written with; nil
// means plaintext (identity, or no entry matches).
func (c *Config) writer(typePath string) sealer {
	for _, r := range c.rules {
		for _, p := range r.patterns {
			if match(p, typePath) {
				return r.write
			}
		}
	}
	return nil
}

// Seals reports whether new values of a Type path are written encrypted
// (false for a nil Config): the hub then keeps no copy of them in
// metadata, which is not encrypted (hub.Config.SealedValues).
func (c *Config) Seals(typePath string) bool {
	return c != nil && c.writer(typePath) != nil
}

// sealsNothing reports whether every new value is written in plaintext,
// whatever its Type: then a write needs no Type path to choose a key.
func (c *Config) sealsNothing() bool {
	for _, r := range c.rules {
		if r.write != nil {
			return false
		}
	}
	return true
}

// match reports whether a Type path matches a pattern in which "*" stands
// for any run of characters, dots included.
func match(pattern, typePath string) bool {
	// path.Match's "*" stops at '/', which Type paths never contain.
	ok, _ := path.Match(pattern, typePath)
	return ok
}

// envelope is the start of every sealed value as stored: a JSON string.
const envelope = `"cairn:enc:`

// IsSealed reports whether a stored value is encrypted.
func IsSealed(stored []byte) bool {
	return bytes.HasPrefix(stored, []byte(envelope))
}

// newSealer checks a key's length for its provider.
func newSealer(kind, name string, secret []byte) (sealer, error) {
	switch kind {
	case "aesgcm":
		switch len(secret) {
		case 16, 24, 32:
		default:
			return nil, fmt.Errorf("aesgcm wants a 16, 24 or 32 byte key, got %d bytes", len(secret))
		}
		block, err := aes.NewCipher(secret)
		if err != nil {
			return nil, err
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, err
		}
		return &aesGCM{name: name, aead: aead, secret: secret}, nil
	case "secretbox":
		if len(secret) != 32 {
			return nil, fmt.Errorf("secretbox wants a 32 byte key, got %d bytes", len(secret))
		}
		s := &secretBox{name: name}
		copy(s.key[:], secret)
		return s, nil
	}
	return nil, fmt.Errorf("unknown provider %q", kind)
}
