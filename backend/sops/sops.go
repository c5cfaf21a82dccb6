// Package sops encrypts resource files with SOPS (github.com/getsops/sops/v3)
// for the Git backend: the files are what the sops tool reads and writes,
// with age (filippo.io/age) or PGP recipients. Only the values under keys
// matching EncryptedRegex (default: spec, the instance's value) or ending in
// EncryptedSuffix are encrypted; apiVersion, kind and metadata stay in the
// clear so diffs and reviews still make sense.
//
// Decryption keys never come from the hub: age identities are read from a
// file or environment variable the backend names, else from sops' own
// SOPS_AGE_KEY and SOPS_AGE_KEY_FILE; PGP keys from the GnuPG keyring.
package sops

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path"
	"regexp"
	"strings"
	"time"

	gosops "github.com/getsops/sops/v3"
	sopsaes "github.com/getsops/sops/v3/aes"
	sopsage "github.com/getsops/sops/v3/age"
	sopsconfig "github.com/getsops/sops/v3/config"
	"github.com/getsops/sops/v3/keys"
	"github.com/getsops/sops/v3/pgp"
	sopsjson "github.com/getsops/sops/v3/stores/json"
	sopsyaml "github.com/getsops/sops/v3/stores/yaml"
	"github.com/getsops/sops/v3/version"
)

// DefaultEncryptedRegex encrypts the resource's spec (the instance's value)
// and leaves apiVersion, kind and metadata readable.
const DefaultEncryptedRegex = "^spec$"

// Config is the Git backend's encryption.sops setting.
type Config struct {
	// Age and PGP are the recipients (age public keys, PGP fingerprints)
	// every file is encrypted to; at least one is required.
	Age []string `json:"age,omitempty"`
	PGP []string `json:"pgp,omitempty"`
	// EncryptedRegex or EncryptedSuffix choose which keys' values are
	// encrypted (sops' --encrypted-regex, --encrypted-suffix); at most one.
	// Default: EncryptedRegex DefaultEncryptedRegex.
	EncryptedRegex  string `json:"encryptedRegex,omitempty"`
	EncryptedSuffix string `json:"encryptedSuffix,omitempty"`
	// AgeKeyFile or AgeKeyEnv name where the age identities that decrypt
	// are: a file on the hub's machine, or an environment variable of
	// cairn serve. Default: SOPS_AGE_KEY, then SOPS_AGE_KEY_FILE.
	AgeKeyFile string `json:"ageKeyFile,omitempty"`
	AgeKeyEnv  string `json:"ageKeyEnv,omitempty"`
}

// Check reports what is wrong with c, naming the field.
func (c Config) Check() error {
	if len(c.Age)+len(c.PGP) == 0 {
		return errors.New("encryption.sops: list at least one recipient in age or pgp")
	}
	for i, r := range c.Age {
		if _, err := sopsage.MasterKeyFromRecipient(r); err != nil {
			return fmt.Errorf("encryption.sops.age[%d]: %q is not an age recipient (age1...)", i, r)
		}
	}
	for i, fp := range c.PGP {
		if strings.TrimSpace(fp) == "" {
			return fmt.Errorf("encryption.sops.pgp[%d]: empty fingerprint", i)
		}
	}
	if c.EncryptedRegex != "" && c.EncryptedSuffix != "" {
		return errors.New("encryption.sops: give encryptedRegex or encryptedSuffix, not both")
	}
	if c.EncryptedRegex != "" {
		if _, err := regexp.Compile(c.EncryptedRegex); err != nil {
			return fmt.Errorf("encryption.sops.encryptedRegex: %w", err)
		}
	}
	if c.AgeKeyFile != "" && c.AgeKeyEnv != "" {
		return errors.New("encryption.sops: give ageKeyFile or ageKeyEnv, not both")
	}
	return nil
}

// Codec encrypts and decrypts resource files. It is safe for concurrent use.
type Codec struct {
	cfg Config
	ids sopsage.ParsedIdentities
	// idsErr says why there are no identities, for the error of a decrypt.
	idsErr error
}

// New checks cfg and loads the age identities it names (getenv reads the
// environment; nil for os.Getenv). Missing identities are not an error
// here, since encrypting needs only recipients; decrypting then fails
// saying where keys were looked for.
func New(cfg Config, getenv func(string) string) (*Codec, error) {
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	if getenv == nil {
		getenv = os.Getenv
	}
	c := &Codec{cfg: cfg}
	c.ids, c.idsErr = loadIdentities(cfg, getenv)
	return c, nil
}

// Config returns the codec's configuration.
func (c *Codec) Config() Config { return c.cfg }

func loadIdentities(cfg Config, getenv func(string) string) (sopsage.ParsedIdentities, error) {
	var (
		text  string
		where string
	)
	switch {
	case cfg.AgeKeyFile != "":
		b, err := os.ReadFile(cfg.AgeKeyFile)
		if err != nil {
			return nil, fmt.Errorf("encryption.sops.ageKeyFile: %w", err)
		}
		text, where = string(b), "ageKeyFile "+cfg.AgeKeyFile
	case cfg.AgeKeyEnv != "":
		text, where = getenv(cfg.AgeKeyEnv), "$"+cfg.AgeKeyEnv
		if text == "" {
			return nil, fmt.Errorf("encryption.sops.ageKeyEnv: $%s is empty", cfg.AgeKeyEnv)
		}
	case getenv(sopsage.SopsAgeKeyEnv) != "":
		text, where = getenv(sopsage.SopsAgeKeyEnv), "$"+sopsage.SopsAgeKeyEnv
	case getenv(sopsage.SopsAgeKeyFileEnv) != "":
		name := getenv(sopsage.SopsAgeKeyFileEnv)
		b, err := os.ReadFile(name)
		if err != nil {
			return nil, fmt.Errorf("$%s: %w", sopsage.SopsAgeKeyFileEnv, err)
		}
		text, where = string(b), "$"+sopsage.SopsAgeKeyFileEnv+" "+name
	default:
		return nil, fmt.Errorf("no age identity: name one with encryption.sops.ageKeyFile or ageKeyEnv, or set $%s or $%s for cairn serve",
			sopsage.SopsAgeKeyEnv, sopsage.SopsAgeKeyFileEnv)
	}
	var ids sopsage.ParsedIdentities
	if err := ids.Import(text); err != nil {
		// The error of a malformed key may quote it: say only where it is.
		return nil, fmt.Errorf("%s does not hold valid age identities (AGE-SECRET-KEY-1...)", where)
	}
	return ids, nil
}

// store returns sops' store for a file name: YAML for .yaml and .yml,
// JSON otherwise, as the Git backend's template controller encodes them.
func store(name string) interface {
	gosops.EncryptedFileLoader
	gosops.PlainFileLoader
	gosops.EncryptedFileEmitter
} {
	switch strings.ToLower(path.Ext(name)) {
	case ".yaml", ".yml":
		return sopsyaml.NewStore(&sopsconfig.YAMLStoreConfig{})
	}
	return sopsjson.NewStore(&sopsconfig.JSONStoreConfig{})
}

// IsEncrypted reports whether a file carries sops metadata.
func IsEncrypted(name string, data []byte) bool {
	if !bytes.Contains(data, []byte("sops")) {
		return false
	}
	_, err := store(name).LoadEncryptedFile(data)
	return err == nil
}

// Encrypt encrypts a plaintext resource file (JSON or YAML by name) to the
// configured recipients with a fresh data key.
func (c *Codec) Encrypt(name string, plain []byte) ([]byte, error) {
	st := store(name)
	branches, err := st.LoadPlainFile(plain)
	if err != nil {
		return nil, fmt.Errorf("sops: read %s: %w", name, err)
	}
	tree := gosops.Tree{Branches: branches, FilePath: name, Metadata: gosops.Metadata{
		EncryptedRegex:  c.cfg.EncryptedRegex,
		EncryptedSuffix: c.cfg.EncryptedSuffix,
		Version:         version.Version,
	}}
	if tree.Metadata.EncryptedRegex == "" && tree.Metadata.EncryptedSuffix == "" {
		tree.Metadata.EncryptedRegex = DefaultEncryptedRegex
	}
	var group gosops.KeyGroup
	for _, r := range c.cfg.Age {
		k, err := sopsage.MasterKeyFromRecipient(r)
		if err != nil {
			return nil, fmt.Errorf("sops: age recipient %q: %w", r, err)
		}
		group = append(group, k)
	}
	for _, fp := range c.cfg.PGP {
		group = append(group, pgp.NewMasterKeyFromFingerprint(fp))
	}
	tree.Metadata.KeyGroups = []gosops.KeyGroup{group}
	dataKey := make([]byte, 32)
	if _, err := rand.Read(dataKey); err != nil {
		return nil, fmt.Errorf("sops: data key: %w", err)
	}
	for _, k := range group {
		if err := k.Encrypt(dataKey); err != nil {
			return nil, fmt.Errorf("sops: encrypt the data key of %s to %s: %w", name, k.ToString(), err)
		}
	}
	if err := encryptTree(&tree, dataKey); err != nil {
		return nil, fmt.Errorf("sops: encrypt %s: %w", name, err)
	}
	out, err := st.EmitEncryptedFile(tree)
	if err != nil {
		return nil, fmt.Errorf("sops: write %s: %w", name, err)
	}
	return out, nil
}

// encryptTree encrypts the values and the MAC over them, as sops does.
func encryptTree(tree *gosops.Tree, dataKey []byte) error {
	cipher := sopsaes.NewCipher()
	mac, err := tree.Encrypt(dataKey, cipher)
	if err != nil {
		return err
	}
	tree.Metadata.LastModified = time.Now().UTC()
	tree.Metadata.MessageAuthenticationCode, err = cipher.Encrypt(mac, dataKey, tree.Metadata.LastModified.Format(time.RFC3339))
	return err
}

// Decrypt returns the plaintext of a sops file, checking its MAC. A file
// without sops metadata is returned unchanged: a person may have committed
// a resource in the clear. Errors name the file, never a value.
func (c *Codec) Decrypt(name string, data []byte) ([]byte, error) {
	st := store(name)
	if !bytes.Contains(data, []byte("sops")) {
		return data, nil
	}
	tree, err := st.LoadEncryptedFile(data)
	if err != nil {
		if errors.Is(err, gosops.MetadataNotFound) {
			return data, nil
		}
		return nil, fmt.Errorf("sops: read %s: %w", name, err)
	}
	dataKey, err := c.dataKey(name, tree.Metadata)
	if err != nil {
		return nil, err
	}
	cipher := sopsaes.NewCipher()
	mac, err := tree.Decrypt(dataKey, cipher)
	if err != nil {
		return nil, fmt.Errorf("sops: decrypt %s: %w", name, err)
	}
	fileMAC, err := cipher.Decrypt(tree.Metadata.MessageAuthenticationCode, dataKey, tree.Metadata.LastModified.Format(time.RFC3339))
	if err != nil || fileMAC != mac {
		return nil, fmt.Errorf("sops: %s: MAC mismatch: the file was changed without sops", name)
	}
	out, err := plainEmitter(name).EmitPlainFile(tree.Branches)
	if err != nil {
		return nil, fmt.Errorf("sops: write %s: %w", name, err)
	}
	return out, nil
}

func plainEmitter(name string) gosops.PlainFileEmitter {
	switch strings.ToLower(path.Ext(name)) {
	case ".yaml", ".yml":
		return sopsyaml.NewStore(&sopsconfig.YAMLStoreConfig{})
	}
	return sopsjson.NewStore(&sopsconfig.JSONStoreConfig{})
}

// dataKey recovers a file's data key with the codec's age identities (or
// the PGP keyring). Only one key group is supported: the data key is then
// encrypted whole to every key of it.
func (c *Codec) dataKey(name string, m gosops.Metadata) ([]byte, error) {
	if len(m.KeyGroups) != 1 {
		return nil, fmt.Errorf("sops: %s has %d key groups; cairn reads files with one (no Shamir secret sharing)", name, len(m.KeyGroups))
	}
	var tried []string
	for _, k := range m.KeyGroups[0] {
		switch k := k.(type) {
		case *sopsage.MasterKey:
			if len(c.ids) == 0 {
				tried = append(tried, "age "+k.Recipient+": "+c.idsErr.Error())
				continue
			}
			c.ids.ApplyToMasterKey(k)
			if dk, err := k.Decrypt(); err == nil {
				return dk, nil
			}
			tried = append(tried, "age "+k.Recipient+": no matching identity")
		case *pgp.MasterKey:
			dk, err := k.Decrypt()
			if err == nil {
				return dk, nil
			}
			tried = append(tried, "pgp "+k.Fingerprint+": "+oneLine(err.Error()))
		default:
			tried = append(tried, describeKey(k)+": not supported by cairn")
		}
	}
	return nil, fmt.Errorf("sops: cannot decrypt the data key of %s: %s", name, strings.Join(tried, "; "))
}

func describeKey(k keys.MasterKey) string { return k.TypeToIdentifier() + " " + k.ToString() }

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
