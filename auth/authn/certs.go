package authn

import (
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"

	"github.com/cairn-dev/cairn"
)

// ClientCerts authenticates TLS client certificates signed by a CA: the
// subject's CommonName is the user, its Organizations the groups.
type ClientCerts struct {
	roots *x509.CertPool
}

// ReadClientCA reads a PEM bundle of CA certificates.
func ReadClientCA(path string) (*ClientCerts, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("client CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("client CA %s: no PEM certificate in it", path)
	}
	return &ClientCerts{roots: pool}, nil
}

// NewClientCerts trusts the certificates of pool.
func NewClientCerts(pool *x509.CertPool) *ClientCerts { return &ClientCerts{roots: pool} }

// Pool is the CA pool, for the TLS server's ClientCAs.
func (c *ClientCerts) Pool() *x509.CertPool { return c.roots }

// Authenticate implements Authenticator. The chain is verified here, not
// only by the TLS layer, so a server that asks for any certificate still
// accepts only those of the CA.
func (c *ClientCerts) Authenticate(r *http.Request) (cairn.User, bool, error) {
	if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
		return cairn.User{}, false, nil
	}
	leaf := r.TLS.PeerCertificates[0]
	inter := x509.NewCertPool()
	for _, ic := range r.TLS.PeerCertificates[1:] {
		inter.AddCert(ic)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: c.roots, Intermediates: inter,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		return cairn.User{}, false, errors.Join(ErrInvalid, fmt.Errorf("the client certificate is not valid: %w", err))
	}
	if leaf.Subject.CommonName == "" {
		return cairn.User{}, false, errors.Join(ErrInvalid, errors.New("the client certificate has no CommonName (the user name)"))
	}
	return cairn.User{Name: leaf.Subject.CommonName, Groups: append([]string(nil), leaf.Subject.Organization...)}, true, nil
}
