package atrest

import (
	"bytes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/crypto/nacl/secretbox"
)

// sealer is one named key of one provider.
type sealer interface {
	// prefix is "<provider>:v1:<name>:", the part of the envelope after
	// "cairn:enc:" that names the key.
	prefix() string
	seal(plain, aad []byte) ([]byte, error)
	open(sealed, aad []byte) ([]byte, error)
	sameKey(other sealer) bool
}

// Seal encrypts the value of one resource version of an instance of a
// Type path with the write key configured for that path; values of paths
// whose write provider is identity (or that no entry matches) are returned
// unchanged. The instance id and resource version are bound to the
// ciphertext (aesgcm), so a sealed value cannot be moved to another row.
func (c *Config) Seal(typePath, id string, rv int, value json.RawMessage) (json.RawMessage, error) {
	s := c.writer(typePath)
	if s == nil || value == nil {
		return value, nil
	}
	ct, err := s.seal(value, aad(id, rv))
	if err != nil {
		return nil, fmt.Errorf("encrypt the value of %q version %d with %s: %w", id, rv, describe(s), err)
	}
	out := make([]byte, 0, len(envelope)+len(s.prefix())+base64.StdEncoding.EncodedLen(len(ct))+1)
	out = append(out, envelope...)
	out = append(out, s.prefix()...)
	out = base64.StdEncoding.AppendEncode(out, ct)
	out = append(out, '"')
	return out, nil
}

// Open decrypts a stored value; plaintext (identity) values are returned
// unchanged. Errors name the instance, version and key, never the value.
func (c *Config) Open(id string, rv int, stored json.RawMessage) (json.RawMessage, error) {
	if !IsSealed(stored) {
		return stored, nil
	}
	s, body, err := c.parse(stored)
	if err != nil {
		return nil, fmt.Errorf("decrypt the value of %q version %d: %w", id, rv, err)
	}
	ct, err := base64.StdEncoding.DecodeString(body)
	if err != nil {
		return nil, fmt.Errorf("decrypt the value of %q version %d: the stored ciphertext is not valid base64", id, rv)
	}
	plain, err := s.open(ct, aad(id, rv))
	if err != nil {
		return nil, fmt.Errorf("decrypt the value of %q version %d with %s: %w", id, rv, describe(s), err)
	}
	return plain, nil
}

// Current reports whether a stored value of a Type path is already written
// the way Seal would write it now: with the path's write key, or in
// plaintext when the path's write provider is identity.
func (c *Config) Current(typePath string, stored json.RawMessage) bool {
	w := c.writer(typePath)
	if !IsSealed(stored) {
		return w == nil
	}
	return w != nil && bytes.HasPrefix(stored[len(envelope):], []byte(w.prefix()))
}

// parse finds the key a sealed value names.
func (c *Config) parse(stored []byte) (sealer, string, error) {
	rest := stored[len(envelope):]
	if len(rest) == 0 || rest[len(rest)-1] != '"' {
		return nil, "", errors.New("the stored value is not a well-formed encrypted value")
	}
	rest = rest[:len(rest)-1]
	// <provider>:v1:<name>:<base64>
	parts := strings.SplitN(string(rest), ":", 4)
	if len(parts) != 4 || parts[1] != "v1" {
		return nil, "", errors.New("the stored value is not a well-formed encrypted value")
	}
	s, ok := c.keys[parts[0]+":v1:"+parts[2]+":"]
	if !ok && len(c.rules) == 0 {
		return nil, "", fmt.Errorf("it was encrypted with %s key %q and no encryption config is given (--encryption-config)", parts[0], parts[2])
	}
	if !ok {
		return nil, "", fmt.Errorf("it was encrypted with %s key %q, which the encryption config does not list; add that key back to read it", parts[0], parts[2])
	}
	return s, parts[3], nil
}

func aad(id string, rv int) []byte {
	return []byte(id + "/" + strconv.Itoa(rv))
}

func describe(s sealer) string {
	p := strings.Split(s.prefix(), ":")
	return fmt.Sprintf("%s key %q", p[0], p[2])
}

type aesGCM struct {
	name   string
	aead   cipher.AEAD
	secret []byte
}

func (a *aesGCM) prefix() string { return "aesgcm:v1:" + a.name + ":" }

func (a *aesGCM) seal(plain, aad []byte) ([]byte, error) {
	nonce := make([]byte, a.aead.NonceSize(), a.aead.NonceSize()+len(plain)+a.aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	return a.aead.Seal(nonce, nonce, plain, aad), nil
}

func (a *aesGCM) open(sealed, aad []byte) ([]byte, error) {
	n := a.aead.NonceSize()
	if len(sealed) < n+a.aead.Overhead() {
		return nil, errors.New("ciphertext too short")
	}
	plain, err := a.aead.Open(nil, sealed[:n], sealed[n:], aad)
	if err != nil {
		return nil, errors.New("message authentication failed (wrong key, or the value was altered or moved)")
	}
	return plain, nil
}

func (a *aesGCM) sameKey(o sealer) bool {
	b, ok := o.(*aesGCM)
	return ok && subtle.ConstantTimeCompare(a.secret, b.secret) == 1
}

type secretBox struct {
	name string
	key  [32]byte
}

func (s *secretBox) prefix() string { return "secretbox:v1:" + s.name + ":" }

// seal ignores aad: NaCl secretbox authenticates no additional data.
func (s *secretBox) seal(plain, _ []byte) ([]byte, error) {
	var nonce [24]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		return nil, err
	}
	return secretbox.Seal(nonce[:], plain, &nonce, &s.key), nil
}

func (s *secretBox) open(sealed, _ []byte) ([]byte, error) {
	if len(sealed) < 24+secretbox.Overhead {
		return nil, errors.New("ciphertext too short")
	}
	var nonce [24]byte
	copy(nonce[:], sealed[:24])
	plain, ok := secretbox.Open(nil, sealed[24:], &nonce, &s.key)
	if !ok {
		return nil, errors.New("message authentication failed (wrong key, or the value was altered)")
	}
	return plain, nil
}

func (s *secretBox) sameKey(o sealer) bool {
	b, ok := o.(*secretBox)
	return ok && subtle.ConstantTimeCompare(s.key[:], b.key[:]) == 1
}
