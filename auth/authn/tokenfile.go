package authn

import (
	"crypto/sha256"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/cairn-dev/cairn"
)

// TokenFile holds static bearer tokens, read from a CSV file in the format of
// the Kubernetes API server's --token-auth-file: token,user,uid,"group1,group2".
// Tokens are kept only as SHA-256 digests.
type TokenFile struct {
	users map[[sha256.Size]byte]cairn.User
}

// ReadTokenFile reads path. An error names the file and line; it never
// quotes a token.
func ReadTokenFile(path string) (*TokenFile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("token file: %w", err)
	}
	defer f.Close()
	tf, err := ParseTokenFile(f)
	if err != nil {
		return nil, fmt.Errorf("token file %s: %w", path, err)
	}
	return tf, nil
}

// ParseTokenFile parses the CSV from r. Blank lines and lines starting with
// # are skipped.
func ParseTokenFile(r io.Reader) (*TokenFile, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	cr.Comment = '#'
	cr.TrimLeadingSpace = true
	tf := &TokenFile{users: map[[sha256.Size]byte]cairn.User{}}
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		line, _ := cr.FieldPos(0)
		if err != nil {
			var pe *csv.ParseError
			if errors.As(err, &pe) {
				return nil, fmt.Errorf("line %d: not valid CSV: %v", pe.Line, pe.Err)
			}
			return nil, err
		}
		if len(rec) < 3 {
			return nil, fmt.Errorf("line %d: want token,user,uid[,\"group1,group2\"], got %d fields", line, len(rec))
		}
		tok, name := strings.TrimSpace(rec[0]), strings.TrimSpace(rec[1])
		if tok == "" || strings.ContainsAny(tok, " \t") {
			return nil, fmt.Errorf("line %d: the token is empty or contains spaces", line)
		}
		if name == "" {
			return nil, fmt.Errorf("line %d: the user name is empty", line)
		}
		u := cairn.User{Name: name, UID: strings.TrimSpace(rec[2])}
		if len(rec) > 3 {
			for g := range strings.SplitSeq(rec[3], ",") {
				if g = strings.TrimSpace(g); g != "" {
					u.Groups = append(u.Groups, g)
				}
			}
		}
		sum := sha256.Sum256([]byte(tok))
		if _, dup := tf.users[sum]; dup {
			return nil, fmt.Errorf("line %d: the token of user %q is already given to another user", line, name)
		}
		tf.users[sum] = authenticated(u)
	}
	return tf, nil
}

// Add registers one more token (the generated admin token).
func (t *TokenFile) Add(token string, u cairn.User) {
	if t.users == nil {
		t.users = map[[sha256.Size]byte]cairn.User{}
	}
	// Every authenticated user is in system:authenticated; added here,
	// once, the chain need not copy the groups on each request.
	t.users[sha256.Sum256([]byte(token))] = authenticated(u)
}

// Len is the number of tokens.
func (t *TokenFile) Len() int { return len(t.users) }

// AuthenticateToken implements TokenAuthenticator.
func (t *TokenFile) AuthenticateToken(token string) (cairn.User, bool, error) {
	sum := sha256.Sum256([]byte(token))
	u, ok := t.users[sum] // keyed by digest: lookup timing reveals nothing of the token
	return u, ok, nil
}
