package sops

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"time"
)

// metadataKey is the top-level key of the metadata in every document.
const metadataKey = "sops"

// formatVersion is the sops version cairn writes in a file's metadata:
// the release whose format this package implements (and whose age and
// pgp packages it uses; a test checks they agree).
const formatVersion = "3.13.3"

// metadata is a file's "sops" mapping.
type metadata struct {
	unencryptedSuffix, encryptedSuffix string
	unencryptedRegex, encryptedRegex   string
	// Comment rules: sops writes them for YAML; cairn reads them.
	unencryptedCommentRegex, encryptedCommentRegex string
	macOnlyEncrypted                               bool
	lastModified                                   time.Time
	mac                                            string
	version                                        string
	shamirThreshold                                int
	groups                                         [][]masterKey
}

// masterKey is one recipient of a file's data key. cairn decrypts with
// age and pgp keys; the other kinds sops knows are read only to name them.
type masterKey struct {
	kind    string // age, pgp, kms, gcp_kms, hckms, azure_kv, hc_vault
	id      string // recipient, fingerprint, ARN, resource ID, URL...
	enc     string // the data key, encrypted to this key
	created string // created_at, RFC 3339 (all kinds but age)
}

// keyKinds are the key lists of a group, in the order sops reads them;
// id names a key by its fields as sops' own messages do.
var keyKinds = []struct {
	kind string
	id   func(m map[string]any) string
}{
	{"kms", func(m map[string]any) string {
		if r := field(m, "role"); r != "" {
			return field(m, "arn") + "+" + r
		}
		return field(m, "arn")
	}},
	{"gcp_kms", func(m map[string]any) string { return field(m, "resource_id") }},
	{"hckms", func(m map[string]any) string { return field(m, "key_id") }},
	{"azure_kv", func(m map[string]any) string {
		return field(m, "vault_url") + "/keys/" + field(m, "name") + "/" + field(m, "version")
	}},
	{"hc_vault", func(m map[string]any) string {
		return field(m, "vault_address") + "/v1/" + field(m, "engine_path") + "/keys/" + field(m, "key_name")
	}},
	{"pgp", func(m map[string]any) string { return field(m, "fp") }},
	{"age", func(m map[string]any) string { return field(m, "recipient") }},
}

func (m metadata) rules() (rules, error) {
	r := rules{
		unencryptedSuffix: m.unencryptedSuffix,
		encryptedSuffix:   m.encryptedSuffix,
		macOnlyEncrypted:  m.macOnlyEncrypted,
	}
	for _, x := range []struct {
		field, expr string
		re          **regexp.Regexp
	}{
		{"unencrypted_regex", m.unencryptedRegex, &r.unencryptedRegex},
		{"encrypted_regex", m.encryptedRegex, &r.encryptedRegex},
		{"unencrypted_comment_regex", m.unencryptedCommentRegex, &r.unencryptedCommentRegex},
		{"encrypted_comment_regex", m.encryptedCommentRegex, &r.encryptedCommentRegex},
	} {
		if x.expr == "" {
			continue
		}
		re, err := regexp.Compile(x.expr)
		if err != nil {
			return rules{}, fmt.Errorf("sops.%s: %w", x.field, err)
		}
		*x.re = re
	}
	return r, nil
}

// parseMetadata reads the "sops" mapping of a file.
func parseMetadata(b branch) (metadata, error) {
	md := plain(b).(map[string]any)
	var m metadata
	var err error
	str := func(k string) string {
		v, e := text(md, k)
		err = errors.Join(err, e)
		return v
	}
	m.unencryptedSuffix = str("unencrypted_suffix")
	m.encryptedSuffix = str("encrypted_suffix")
	m.unencryptedRegex = str("unencrypted_regex")
	m.encryptedRegex = str("encrypted_regex")
	m.mac = str("mac")
	m.version = str("version")
	m.unencryptedCommentRegex = str("unencrypted_comment_regex")
	m.encryptedCommentRegex = str("encrypted_comment_regex")
	lastModified := str("lastmodified")
	if err != nil {
		return m, err
	}
	if m.lastModified, err = time.Parse(time.RFC3339, lastModified); err != nil {
		return m, fmt.Errorf("sops.lastmodified %q is not an RFC 3339 time", lastModified)
	}
	switch v := md["mac_only_encrypted"].(type) {
	case nil:
	case bool:
		m.macOnlyEncrypted = v
	case string:
		if m.macOnlyEncrypted, err = strconv.ParseBool(v); err != nil {
			return m, fmt.Errorf("sops.mac_only_encrypted %q is not a boolean", v)
		}
	default:
		return m, fmt.Errorf("sops.mac_only_encrypted is a %T, not a boolean", v)
	}
	switch v := md["shamir_threshold"].(type) {
	case nil:
	case int:
		m.shamirThreshold = v
	case string:
		if m.shamirThreshold, err = strconv.Atoi(v); err != nil {
			return m, fmt.Errorf("sops.shamir_threshold %q is not an integer", v)
		}
	default:
		return m, fmt.Errorf("sops.shamir_threshold is a %T, not an integer", v)
	}
	n := 0
	for _, s := range []string{m.unencryptedSuffix, m.encryptedSuffix, m.unencryptedRegex, m.encryptedRegex, m.unencryptedCommentRegex, m.encryptedCommentRegex} {
		if s != "" {
			n++
		}
	}
	switch n {
	case 0:
		m.unencryptedSuffix = "_unencrypted" // sops' default
	case 1:
	default:
		return m, errors.New("sops metadata names more than one of unencrypted_suffix, encrypted_suffix, unencrypted_regex, encrypted_regex, unencrypted_comment_regex and encrypted_comment_regex")
	}
	// One group's keys at the top level, or several under key_groups.
	top, err := keyGroup(md, "sops")
	if err != nil {
		return m, err
	}
	if len(top) > 0 {
		m.groups = [][]masterKey{top}
		return m, nil
	}
	groups, _ := md["key_groups"].([]any)
	for i, g := range groups {
		gm, ok := g.(map[string]any)
		if !ok {
			return m, fmt.Errorf("sops.key_groups[%d] is not a mapping", i)
		}
		keys, err := keyGroup(gm, fmt.Sprintf("sops.key_groups[%d]", i))
		if err != nil {
			return m, err
		}
		m.groups = append(m.groups, keys)
	}
	if len(m.groups) == 0 {
		return m, errors.New("sops metadata lists no keys")
	}
	return m, nil
}

func keyGroup(g map[string]any, at string) ([]masterKey, error) {
	var keys []masterKey
	for _, kk := range keyKinds {
		v, ok := g[kk.kind]
		if !ok || v == nil {
			continue
		}
		list, ok := v.([]any)
		if !ok {
			return nil, fmt.Errorf("%s.%s is not a list", at, kk.kind)
		}
		for i, e := range list {
			em, ok := e.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("%s.%s[%d] is not a mapping", at, kk.kind, i)
			}
			keys = append(keys, masterKey{kind: kk.kind, id: kk.id(em), enc: field(em, "enc"), created: field(em, "created_at")})
		}
	}
	return keys, nil
}

// branch returns the metadata as sops writes it: keys sorted, empty
// fields left out, the keys of a single group at the top level.
func (m metadata) branch() branch {
	var b branch
	add := func(k string, v any) { b = append(b, item{key: k, value: v}) }
	keys := func(kind string, ks []masterKey) []any {
		var out []any
		for _, k := range ks {
			if k.kind != kind {
				continue
			}
			switch kind {
			case "age":
				out = append(out, branch{{"enc", k.enc}, {"recipient", k.id}})
			case "pgp":
				out = append(out, branch{{"created_at", k.created}, {"enc", k.enc}, {"fp", k.id}})
			}
		}
		return out
	}
	group := m.groups[0] // cairn writes one group
	if l := keys("age", group); l != nil {
		add("age", l)
	}
	for _, f := range []struct{ k, v string }{
		{"encrypted_regex", m.encryptedRegex},
		{"encrypted_suffix", m.encryptedSuffix},
		{"lastmodified", m.lastModified.Format(time.RFC3339)},
		{"mac", m.mac},
	} {
		if f.v != "" {
			add(f.k, f.v)
		}
	}
	if m.macOnlyEncrypted {
		add("mac_only_encrypted", true)
	}
	if l := keys("pgp", group); l != nil {
		add("pgp", l)
	}
	for _, f := range []struct{ k, v string }{
		{"unencrypted_regex", m.unencryptedRegex},
		{"unencrypted_suffix", m.unencryptedSuffix},
	} {
		if f.v != "" {
			add(f.k, f.v)
		}
	}
	add("version", m.version)
	return b
}

// plain turns a branch into maps and lists without comments, to read
// metadata by name.
func plain(v any) any {
	switch v := v.(type) {
	case branch:
		m := make(map[string]any, len(v))
		for _, it := range v {
			if k, ok := it.key.(string); ok {
				m[k] = plain(it.value)
			}
		}
		return m
	case []any:
		out := make([]any, 0, len(v))
		for _, e := range v {
			if _, ok := e.(comment); !ok {
				out = append(out, plain(e))
			}
		}
		return out
	}
	return v
}

// text reads a metadata string. Like sops, it takes a number or boolean
// as its text (an unquoted YAML value).
func text(m map[string]any, k string) (string, error) {
	switch v := m[k].(type) {
	case nil:
		return "", nil
	case string:
		return v, nil
	case int:
		return strconv.Itoa(v), nil
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64), nil
	case bool:
		return strconv.FormatBool(v), nil
	case time.Time:
		return v.Format(time.RFC3339), nil
	default:
		return "", fmt.Errorf("sops.%s is a %T, not a string", k, v)
	}
}

func field(m map[string]any, k string) string {
	s, _ := text(m, k)
	return s
}
