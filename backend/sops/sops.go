// Package sops encrypts resource files with SOPS for the Git backend: the
// files are what the sops tool (github.com/getsops/sops/v3) reads and
// writes, with age or PGP recipients. Only the values under keys matching
// EncryptedRegex (default: spec, the instance's value) or ending in
// EncryptedSuffix are encrypted; apiVersion, kind and metadata stay in the
// clear so diffs and reviews still make sense.
//
// The file format (the tree of values, its encryption and MAC, the
// metadata, the JSON and YAML stores) is implemented here, and only sops'
// age and pgp packages are used: sops' own packages for the format link
// every cloud KMS SDK, none of which cairn uses (docs/secrets.md).
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
	"sync/atomic"
	"time"

	sopsage "github.com/getsops/sops/v3/age"
	"github.com/getsops/sops/v3/pgp"

	"github.com/cairn-dev/cairn"
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
	cfg    Config
	getenv func(string) string
	// keys are the identities as last read: read again when they fail, so
	// a key file put in place or extended while cairn runs is used.
	keys atomic.Pointer[identities]
}

// identities are the age identities the configuration names.
type identities struct {
	ids sopsage.ParsedIdentities
	// err says why there are no identities, for the error of a decrypt.
	err error
	// from says where the identities were read, for the same error.
	from string
}

// reload reads the identities again and returns them.
func (c *Codec) reload() *identities {
	k := &identities{}
	k.ids, k.from, k.err = loadIdentities(c.cfg, c.getenv)
	c.keys.Store(k)
	return k
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
	c := &Codec{cfg: cfg, getenv: getenv}
	c.reload()
	return c, nil
}

// Config returns the codec's configuration.
func (c *Codec) Config() Config { return c.cfg }

// loadIdentities returns the age identities cfg names and where they were
// read (a file or a variable, never their content).
func loadIdentities(cfg Config, getenv func(string) string) (sopsage.ParsedIdentities, string, error) {
	var (
		text  string
		where string
	)
	switch {
	case cfg.AgeKeyFile != "":
		b, err := os.ReadFile(cfg.AgeKeyFile)
		if err != nil {
			return nil, "", fmt.Errorf("encryption.sops.ageKeyFile: %w", err)
		}
		text, where = string(b), "ageKeyFile "+cfg.AgeKeyFile
	case cfg.AgeKeyEnv != "":
		text, where = getenv(cfg.AgeKeyEnv), "$"+cfg.AgeKeyEnv
		if text == "" {
			return nil, "", fmt.Errorf("encryption.sops.ageKeyEnv: $%s is empty", cfg.AgeKeyEnv)
		}
	case getenv(sopsage.SopsAgeKeyEnv) != "":
		text, where = getenv(sopsage.SopsAgeKeyEnv), "$"+sopsage.SopsAgeKeyEnv
	case getenv(sopsage.SopsAgeKeyFileEnv) != "":
		name := getenv(sopsage.SopsAgeKeyFileEnv)
		b, err := os.ReadFile(name)
		if err != nil {
			return nil, "", fmt.Errorf("$%s: %w", sopsage.SopsAgeKeyFileEnv, err)
		}
		text, where = string(b), "$"+sopsage.SopsAgeKeyFileEnv+" "+name
	default:
		return nil, "", fmt.Errorf("no age identity: name one with encryption.sops.ageKeyFile or ageKeyEnv, or set $%s or $%s for cairn serve",
			sopsage.SopsAgeKeyEnv, sopsage.SopsAgeKeyFileEnv)
	}
	var ids sopsage.ParsedIdentities
	if err := ids.Import(text); err != nil {
		// The error of a malformed key may quote it: say only where it is.
		return nil, "", fmt.Errorf("%s does not hold valid age identities (AGE-SECRET-KEY-1...)", where)
	}
	return ids, where, nil
}

// format is a file syntax sops writes: YAML for .yaml and .yml, JSON
// otherwise, as the Git backend's template controller encodes them.
type format interface {
	load(in []byte) ([]branch, error)
	emit(docs []branch) ([]byte, error)
}

func formatOf(name string) format {
	switch strings.ToLower(path.Ext(name)) {
	case ".yaml", ".yml":
		return yamlFormat{}
	}
	return jsonFormat{}
}

// file is a parsed sops file: its documents without metadata, and the
// metadata.
type file struct {
	docs []branch
	meta metadata
}

// errNoMetadata: the file has no top-level "sops" mapping.
var errNoMetadata = errors.New("no sops metadata")

// load parses a sops file and takes the metadata out of its documents
// (every document carries a copy; the first one's is read).
func load(name string, data []byte) (file, error) {
	docs, err := formatOf(name).load(data)
	if err != nil {
		return file{}, err
	}
	var meta branch
	for d, doc := range docs {
		kept := doc[:0]
		for _, it := range doc {
			if it.key != metadataKey {
				kept = append(kept, it)
				continue
			}
			if d == 0 {
				if meta != nil {
					return file{}, errors.New("two sops entries")
				}
				m, ok := it.value.(branch)
				if !ok {
					return file{}, errors.New("the sops entry is not a mapping")
				}
				meta = m
			}
		}
		docs[d] = kept
	}
	if meta == nil {
		return file{}, errNoMetadata
	}
	m, err := parseMetadata(meta)
	if err != nil {
		return file{}, err
	}
	return file{docs: docs, meta: m}, nil
}

// IsEncrypted reports whether a file carries sops metadata.
func IsEncrypted(name string, data []byte) bool {
	if !bytes.Contains(data, []byte(metadataKey)) {
		return false
	}
	_, err := load(name, data)
	return err == nil
}

// Encrypt encrypts a plaintext resource file (JSON or YAML by name) to the
// configured recipients with a fresh data key.
func (c *Codec) Encrypt(name string, plain []byte) ([]byte, error) {
	f := formatOf(name)
	docs, err := f.load(plain)
	if err != nil {
		return nil, fmt.Errorf("sops: read %s: %w", name, err)
	}
	for _, doc := range docs {
		for _, it := range doc {
			if it.key == metadataKey {
				return nil, fmt.Errorf("sops: %s has a top-level key %q, which sops reserves for its metadata", name, metadataKey)
			}
		}
	}
	m := metadata{encryptedRegex: c.cfg.EncryptedRegex, encryptedSuffix: c.cfg.EncryptedSuffix, version: formatVersion}
	if m.encryptedRegex == "" && m.encryptedSuffix == "" {
		m.encryptedRegex = DefaultEncryptedRegex
	}
	dataKey := make([]byte, 32)
	if _, err := rand.Read(dataKey); err != nil {
		return nil, fmt.Errorf("sops: data key: %w", err)
	}
	var group []masterKey
	for _, r := range c.cfg.Age {
		k, err := sopsage.MasterKeyFromRecipient(r)
		if err != nil {
			return nil, fmt.Errorf("sops: age recipient %q: %w", r, err)
		}
		if err := k.Encrypt(dataKey); err != nil {
			return nil, fmt.Errorf("sops: encrypt the data key of %s to %s: %w", name, r, err)
		}
		group = append(group, masterKey{kind: "age", id: k.Recipient, enc: k.EncryptedKey})
	}
	for _, fp := range c.cfg.PGP {
		k := pgp.NewMasterKeyFromFingerprint(fp)
		if err := k.Encrypt(dataKey); err != nil {
			return nil, fmt.Errorf("sops: encrypt the data key of %s to %s: %w", name, fp, err)
		}
		group = append(group, masterKey{kind: "pgp", id: k.Fingerprint, enc: k.EncryptedKey, created: k.CreationDate.UTC().Format(time.RFC3339)})
	}
	m.groups = [][]masterKey{group}
	r, err := m.rules()
	if err != nil {
		return nil, fmt.Errorf("sops: %s: %w", name, err)
	}
	w, err := newWalker(r, dataKey, true)
	if err != nil {
		return nil, fmt.Errorf("sops: encrypt %s: %w", name, err)
	}
	for _, doc := range docs {
		if err := w.branch(doc, nil); err != nil {
			return nil, fmt.Errorf("sops: encrypt %s: %w", name, err)
		}
	}
	// The MAC is encrypted with the time as its additional data, so the
	// time cannot be changed without sops either.
	m.lastModified = time.Now().UTC().Truncate(time.Second)
	if m.mac, err = w.seal(w.sum(), m.lastModified.Format(time.RFC3339)); err != nil {
		return nil, fmt.Errorf("sops: encrypt %s: %w", name, err)
	}
	mb := m.branch()
	for i := range docs {
		docs[i] = append(docs[i], item{key: metadataKey, value: mb})
	}
	out, err := f.emit(docs)
	if err != nil {
		return nil, fmt.Errorf("sops: write %s: %w", name, err)
	}
	return out, nil
}

// Decrypt returns the plaintext of a sops file, checking its MAC. A file
// without sops metadata is returned unchanged: a person may have committed
// a resource in the clear. Errors name the file, never a value.
func (c *Codec) Decrypt(name string, data []byte) ([]byte, error) {
	out, err := c.decrypt(name, data)
	// Its errors quote the file's metadata (recipients, fields), which
	// whoever pushes to the repository chose: bounded, printable.
	return out, cairn.BoundError(err, cairn.MaxErrorText)
}

func (c *Codec) decrypt(name string, data []byte) ([]byte, error) {
	if !bytes.Contains(data, []byte(metadataKey)) {
		return data, nil
	}
	f, err := load(name, data)
	if errors.Is(err, errNoMetadata) {
		return data, nil
	}
	if err != nil {
		return nil, fmt.Errorf("sops: read %s: %w", name, err)
	}
	dataKey, err := c.dataKey(name, f.meta)
	if err != nil {
		return nil, err
	}
	r, err := f.meta.rules()
	if err != nil {
		return nil, fmt.Errorf("sops: read %s: %w", name, err)
	}
	w, err := newWalker(r, dataKey, false)
	if err != nil {
		return nil, fmt.Errorf("sops: decrypt %s: %w", name, err)
	}
	for _, doc := range f.docs {
		if err := w.branch(doc, nil); err != nil {
			return nil, fmt.Errorf("sops: decrypt %s: %w", name, err)
		}
	}
	fileMAC, err := w.open(f.meta.mac, f.meta.lastModified.Format(time.RFC3339))
	if err != nil || fileMAC != w.sum() {
		return nil, fmt.Errorf("sops: %s: MAC mismatch: the file was changed without sops", name)
	}
	out, err := formatOf(name).emit(f.docs)
	if err != nil {
		return nil, fmt.Errorf("sops: write %s: %w", name, err)
	}
	return out, nil
}

// dataKey recovers a file's data key with the codec's age identities (or
// the PGP keyring), read again when they do not. Only one key group is
// supported: the data key is then encrypted whole to every key of it.
func (c *Codec) dataKey(name string, m metadata) ([]byte, error) {
	dk, err := c.dataKeyWith(c.keys.Load(), name, m)
	if err != nil && len(m.groups) == 1 {
		dk, err = c.dataKeyWith(c.reload(), name, m)
	}
	return dk, err
}

func (c *Codec) dataKeyWith(keys *identities, name string, m metadata) ([]byte, error) {
	if len(m.groups) != 1 {
		return nil, fmt.Errorf("sops: %s has %d key groups; cairn reads files with one (no Shamir secret sharing)", name, len(m.groups))
	}
	var tried []string
	for _, k := range m.groups[0] {
		switch k.kind {
		case "age":
			if len(keys.ids) == 0 {
				tried = append(tried, "age "+k.id+": "+keys.none())
				continue
			}
			ak := &sopsage.MasterKey{Recipient: k.id, EncryptedKey: k.enc}
			keys.ids.ApplyToMasterKey(ak)
			if dk, err := ak.Decrypt(); err == nil {
				return dk, nil
			}
			tried = append(tried, "age "+k.id+": no matching identity in "+keys.from)
		case "pgp":
			pk := &pgp.MasterKey{Fingerprint: k.id, EncryptedKey: k.enc}
			dk, err := pk.Decrypt()
			if err == nil {
				return dk, nil
			}
			tried = append(tried, "pgp "+k.id+": "+oneLine(err.Error()))
		default:
			tried = append(tried, k.kind+" "+k.id+": not supported by cairn")
		}
	}
	return nil, fmt.Errorf("sops: cannot decrypt the data key of %s: %s", name, strings.Join(tried, "; "))
}

// none says why there is no age identity: the error reading them, or
// where they were looked for and none was (a key file cut short, holding
// only age-keygen's comments, or empty).
func (k *identities) none() string {
	switch {
	case k.err != nil:
		return k.err.Error()
	case k.from != "":
		return "no age identity in " + k.from + " (want a line AGE-SECRET-KEY-1...)"
	}
	return "no age identity"
}

// CheckReadable reports whether the codec's identities read what it
// encrypts: whether one of them belongs to one of its recipients. Encrypting
// needs no identity, so without this a backend could write files it can
// no longer read (a key rotation to a recipient whose identity it lacks).
// The error names each recipient and where identities were looked for.
// Identities that do not read are read again first.
func (c *Codec) CheckReadable() error {
	if err := c.checkReadable(c.keys.Load()); err == nil {
		return nil
	}
	return c.checkReadable(c.reload())
}

func (c *Codec) checkReadable(keys *identities) error {
	dataKey := make([]byte, 32)
	if _, err := rand.Read(dataKey); err != nil {
		return fmt.Errorf("sops: data key: %w", err)
	}
	var tried []string
	for _, r := range c.cfg.Age {
		k, err := sopsage.MasterKeyFromRecipient(r)
		if err != nil {
			return fmt.Errorf("sops: age recipient %q: %w", r, err)
		}
		if err := k.Encrypt(dataKey); err != nil {
			return fmt.Errorf("sops: encrypt a data key to %s: %w", r, err)
		}
		if len(keys.ids) == 0 {
			tried = append(tried, "age "+r+": "+keys.none())
			continue
		}
		keys.ids.ApplyToMasterKey(k)
		if dk, err := k.Decrypt(); err == nil && bytes.Equal(dk, dataKey) {
			return nil
		}
		tried = append(tried, "age "+r+": no matching identity in "+keys.from)
	}
	for _, fp := range c.cfg.PGP {
		k := pgp.NewMasterKeyFromFingerprint(fp)
		if err := k.Encrypt(dataKey); err != nil {
			return fmt.Errorf("sops: encrypt a data key to %s: %w", fp, err)
		}
		dk, err := k.Decrypt()
		if err == nil && bytes.Equal(dk, dataKey) {
			return nil
		}
		why := "the GnuPG keyring does not decrypt it"
		if err != nil {
			why = oneLine(err.Error())
		}
		tried = append(tried, "pgp "+fp+": "+why)
	}
	return fmt.Errorf("sops: no identity reads files encrypted to these recipients: %s", strings.Join(tried, "; "))
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
