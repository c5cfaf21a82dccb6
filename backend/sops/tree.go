package sops

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha512"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// A SOPS document is a tree in the order of the file: mappings are
// branches (ordered items), sequences are []any, and leaves are string,
// int, float64, bool, time.Time, []byte or nil. YAML comments are items
// too (a comment key in a branch, a comment element in a sequence), since
// sops encrypts them and keeps their place. This is sops' own model: the
// MAC is a hash over the leaves in this order, so the order is the format.
type (
	branch []item
	item   struct {
		key   any // string, or comment
		value any
	}
	comment struct {
		text   string // without the leading '#'
		inline bool   // after a value on its line
	}
)

// rules decide which leaves are encrypted: sops' metadata fields
// unencrypted_suffix, encrypted_suffix, unencrypted_regex and
// encrypted_regex (a file has at most one; none means the suffix
// "_unencrypted"), judged on every key of a leaf's path; or
// unencrypted_comment_regex and encrypted_comment_regex, judged on the
// YAML comments right before the leaf or before any collection holding it.
type rules struct {
	unencryptedSuffix, encryptedSuffix             string
	unencryptedRegex, encryptedRegex               *regexp.Regexp
	unencryptedCommentRegex, encryptedCommentRegex *regexp.Regexp
	// macOnlyEncrypted: the MAC covers only the encrypted leaves, so
	// readable values may be edited without sops.
	macOnlyEncrypted bool
}

// encrypts says whether the leaf at path is encrypted. comments holds,
// for each collection from the top down to the leaf's, the comments seen
// in it since its last value; a comment leaf is the last of the last.
func (r rules) encrypts(path []string, comments [][]string, isComment bool) bool {
	anyKey := func(match func(string) bool) bool {
		for _, k := range path {
			if match(k) {
				return true
			}
		}
		return false
	}
	anyComment := func(re *regexp.Regexp) bool {
		for i, level := range comments {
			for j, c := range level {
				// A comment does not mark itself encrypted: the marker
				// stays readable.
				self := isComment && i == len(comments)-1 && j == len(level)-1
				if !(self && re == r.encryptedCommentRegex) && re.MatchString(c) {
					return true
				}
			}
		}
		return false
	}
	switch {
	case r.unencryptedCommentRegex != nil:
		return !anyComment(r.unencryptedCommentRegex)
	case r.encryptedCommentRegex != nil:
		return anyComment(r.encryptedCommentRegex)
	case r.unencryptedSuffix != "":
		return !anyKey(func(k string) bool { return strings.HasSuffix(k, r.unencryptedSuffix) })
	case r.encryptedSuffix != "":
		return anyKey(func(k string) bool { return strings.HasSuffix(k, r.encryptedSuffix) })
	case r.unencryptedRegex != nil:
		return !anyKey(r.unencryptedRegex.MatchString)
	case r.encryptedRegex != nil:
		return anyKey(r.encryptedRegex.MatchString)
	}
	return true
}

// macOnlyEncryptedPrefix starts the MAC of a file with mac_only_encrypted,
// so such a MAC never equals the MAC over every value of the same tree.
// These are the bytes sops defines for it.
var macOnlyEncryptedPrefix = []byte{0x8a, 0x3f, 0xd2, 0xad, 0x54, 0xce, 0x66, 0x52, 0x7b, 0x10, 0x34, 0xf3, 0xd1, 0x47, 0xbe, 0x0b,
	0x0b, 0x97, 0x5b, 0x3b, 0xf4, 0x4f, 0x72, 0xc6, 0xfd, 0xad, 0xec, 0x81, 0x76, 0xf2, 0x7d, 0x69}

// walker encrypts or decrypts a tree's leaves in place and hashes them
// for the MAC.
type walker struct {
	rules
	dataKey []byte
	gcm     cipher.AEAD
	encrypt bool
	mac     hash.Hash
	// comments is the stack rules.encrypts reads.
	comments [][]string
}

func newWalker(r rules, dataKey []byte, encrypt bool) (*walker, error) {
	block, err := aes.NewCipher(dataKey)
	if err != nil {
		return nil, fmt.Errorf("data key: %w", err)
	}
	// sops uses 32-byte nonces.
	gcm, err := cipher.NewGCMWithNonceSize(block, 32)
	if err != nil {
		return nil, err
	}
	w := &walker{rules: r, dataKey: dataKey, gcm: gcm, encrypt: encrypt, mac: sha512.New()}
	if r.macOnlyEncrypted {
		w.mac.Write(macOnlyEncryptedPrefix)
	}
	return w, nil
}

// sum is the MAC over the leaves walked: hex of SHA-512, upper case.
func (w *walker) sum() string { return fmt.Sprintf("%X", w.mac.Sum(nil)) }

func (w *walker) branch(b branch, path []string) error {
	w.comments = append(w.comments, nil)
	defer func() { w.comments = w.comments[:len(w.comments)-1] }()
	for i := range b {
		if c, ok := b[i].key.(comment); ok {
			w.noteComment(c.text)
			v, err := w.leaf(c, path)
			if err != nil {
				return err
			}
			switch v := v.(type) {
			case comment:
				b[i].key = v
			case string:
				b[i].key = comment{text: v, inline: c.inline}
			}
			continue
		}
		k, ok := b[i].key.(string)
		if !ok {
			return fmt.Errorf("key %v under %q is a %T; sops supports string keys only", b[i].key, strings.Join(path, "."), b[i].key)
		}
		v, err := w.element(b[i].value, append(path[:len(path):len(path)], k))
		if err != nil {
			return err
		}
		b[i].value = v
	}
	return nil
}

func (w *walker) noteComment(text string) {
	top := &w.comments[len(w.comments)-1]
	*top = append(*top, text)
}

// element walks a value of a collection: a comment there is noted for
// what follows it, and any other value ends the run of comments.
func (w *walker) element(v any, path []string) (any, error) {
	c, isComment := v.(comment)
	if isComment {
		w.noteComment(c.text)
	}
	out, err := w.value(v, path)
	if !isComment {
		w.comments[len(w.comments)-1] = nil
	}
	return out, err
}

func (w *walker) value(v any, path []string) (any, error) {
	switch v := v.(type) {
	case branch:
		return v, w.branch(v, path)
	case []any:
		// Elements of a sequence share its path: sops names no index.
		w.comments = append(w.comments, nil)
		defer func() { w.comments = w.comments[:len(w.comments)-1] }()
		for i := range v {
			var err error
			if v[i], err = w.element(v[i], path); err != nil {
				return nil, err
			}
		}
		return v, nil
	case nil:
		return nil, nil
	}
	return w.leaf(v, path)
}

// leaf encrypts or decrypts one value (or comment) at path. The
// additional data of its AES-GCM is the path's keys, each followed by a
// colon, so a value moved elsewhere in the tree does not decrypt.
func (w *walker) leaf(v any, path []string) (any, error) {
	_, isComment := v.(comment)
	enc := w.encrypts(path, w.comments, isComment)
	var ad string
	if enc {
		ad = strings.Join(path, ":") + ":"
	}
	at := func() string { return strings.Join(path, ".") }
	if w.encrypt {
		if err := w.hash(v, enc); err != nil {
			return nil, fmt.Errorf("under %q: %w", at(), err)
		}
		if !enc {
			return v, nil
		}
		out, err := w.seal(v, ad)
		if err != nil {
			return nil, fmt.Errorf("under %q: %w", at(), err)
		}
		return out, nil
	}
	if enc {
		switch c := v.(type) {
		case comment:
			// A comment added in the clear (as older sops wrote them)
			// stays as it is.
			if p, err := w.open(c.text, ad); err == nil {
				v = p
			}
		case string:
			p, err := w.open(c, ad)
			if err != nil {
				return nil, fmt.Errorf("value under %q: %w", at(), err)
			}
			v = p
		default:
			return nil, fmt.Errorf("value under %q is a %T, not an encrypted string", at(), v)
		}
	}
	if err := w.hash(v, enc); err != nil {
		return nil, fmt.Errorf("under %q: %w", at(), err)
	}
	return v, nil
}

// hash adds a leaf to the MAC. Comments are not covered.
func (w *walker) hash(v any, encrypted bool) error {
	if _, ok := v.(comment); ok || (w.macOnlyEncrypted && !encrypted) {
		return nil
	}
	b, _, err := leafBytes(v)
	if err != nil {
		return err
	}
	w.mac.Write(b)
	return nil
}

// leafBytes is the text sops encrypts and hashes for a leaf, and the name
// of its type in the ENC[...] string.
func leafBytes(v any) ([]byte, string, error) {
	switch v := v.(type) {
	case string:
		return []byte(v), "str", nil
	case int:
		return strconv.AppendInt(nil, int64(v), 10), "int", nil
	case float64:
		return strconv.AppendFloat(nil, v, 'f', -1, 64), "float", nil
	case bool:
		// Title case, as the original Python sops wrote them.
		if v {
			return []byte("True"), "bool", nil
		}
		return []byte("False"), "bool", nil
	case time.Time:
		b, err := v.MarshalText()
		return b, "time", err
	case []byte:
		return v, "bytes", nil
	case comment:
		return []byte(v.text), "comment", nil
	}
	return nil, "", fmt.Errorf("a value of type %T cannot be encrypted", v)
}

// seal encrypts a leaf to ENC[AES256_GCM,data:...,iv:...,tag:...,type:...].
// Empty strings and comments stay empty, as sops leaves them.
func (w *walker) seal(v any, ad string) (string, error) {
	plain, typ, err := leafBytes(v)
	if err != nil {
		return "", err
	}
	if len(plain) == 0 && (typ == "str" || typ == "comment" || typ == "bytes") {
		return "", nil
	}
	iv := make([]byte, w.gcm.NonceSize())
	if _, err := rand.Read(iv); err != nil {
		return "", err
	}
	out := w.gcm.Seal(nil, iv, plain, []byte(ad))
	data, tag := out[:len(out)-w.gcm.Overhead()], out[len(out)-w.gcm.Overhead():]
	b64 := base64.StdEncoding.EncodeToString
	return "ENC[AES256_GCM,data:" + b64(data) + ",iv:" + b64(iv) + ",tag:" + b64(tag) + ",type:" + typ + "]", nil
}

var encrypted = regexp.MustCompile(`^ENC\[AES256_GCM,data:(.+),iv:(.+),tag:(.+),type:(.+)\]`)

var errNotEncrypted = errors.New("not an ENC[AES256_GCM,...] value")

// open decrypts what seal wrote back to a leaf of its type. The empty
// string is its own plaintext.
func (w *walker) open(s, ad string) (any, error) {
	if s == "" {
		return "", nil
	}
	m := encrypted.FindStringSubmatch(s)
	if m == nil {
		return nil, errNotEncrypted
	}
	var parts [3][]byte
	for i := range parts {
		var err error
		if parts[i], err = base64.StdEncoding.DecodeString(m[i+1]); err != nil {
			return nil, fmt.Errorf("base64 of %s: %w", [3]string{"data", "iv", "tag"}[i], err)
		}
	}
	gcm := w.gcm
	if len(parts[1]) != gcm.NonceSize() {
		// sops has always written 32-byte nonces; read others all the same.
		block, _ := aes.NewCipher(w.dataKey)
		var err error
		if gcm, err = cipher.NewGCMWithNonceSize(block, len(parts[1])); err != nil {
			return nil, err
		}
	}
	plain, err := gcm.Open(nil, parts[1], append(parts[0], parts[2]...), []byte(ad))
	if err != nil {
		return nil, errors.New("cannot decrypt with the data key (AES-GCM authentication failed)")
	}
	var v any
	switch typ := m[4]; typ {
	case "str":
		v = string(plain)
	case "int":
		v, err = strconv.Atoi(string(plain))
	case "float":
		v, err = strconv.ParseFloat(string(plain), 64)
	case "bool":
		v, err = strconv.ParseBool(string(plain))
	case "bytes":
		v = plain
	case "time":
		var t time.Time
		err = t.UnmarshalText(plain)
		v = t
	case "comment":
		v = comment{text: string(plain)}
	default:
		return nil, fmt.Errorf("unknown type %q", typ)
	}
	if err != nil {
		// strconv's errors quote the text: say only that it is wrong.
		return nil, fmt.Errorf("the decrypted value is not a valid %s", m[4])
	}
	return v, nil
}
