package cli

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// selfSignedPair returns the paths of <data-dir>/tls/serving.crt and .key,
// writing a self-signed pair for loopback (and host, when it is a name or
// address) on first start, as the Kubernetes API server does in its
// --cert-dir when no certificate is given.
func selfSignedPair(dataDir, host string) (certPath, keyPath string, err error) {
	dir := filepath.Join(dataDir, "tls")
	certPath, keyPath = filepath.Join(dir, "serving.crt"), filepath.Join(dir, "serving.key")
	if _, err := os.Stat(certPath); err == nil {
		if _, err := os.Stat(keyPath); err == nil {
			return certPath, keyPath, nil
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", "", fmt.Errorf("self-signed certificate: %w", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", fmt.Errorf("self-signed certificate: %w", err)
	}
	serial, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: "cairn"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().AddDate(10, 0, 0),
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, BasicConstraintsValid: true, IsCA: true,
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	if ip := net.ParseIP(host); ip != nil && !ip.IsUnspecified() && !ip.IsLoopback() {
		tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
	} else if ip == nil && host != "" && host != "localhost" {
		tmpl.DNSNames = append(tmpl.DNSNames, host)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return "", "", fmt.Errorf("self-signed certificate: %w", err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return "", "", fmt.Errorf("self-signed certificate: %w", err)
	}
	if err := os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		return "", "", fmt.Errorf("self-signed certificate: %w", err)
	}
	if err := os.WriteFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return "", "", fmt.Errorf("self-signed certificate: %w", err)
	}
	return certPath, keyPath, nil
}

// dualListener serves TLS and plain HTTP on one port: a connection whose
// first byte opens a TLS handshake (0x16) is served over TLS, any other as
// plain HTTP. kubectl sends credentials only over TLS, so the default
// loopback server can be reached with the generated kubeconfig (https) while
// curl http:// and existing clients keep working. Classifying happens off
// the Accept loop, with a deadline, so a silent client stalls nobody.
type dualListener struct {
	net.Listener
	tls   *tls.Config
	conns chan net.Conn
	errc  chan error
	done  chan struct{}
	once  sync.Once
}

func newDualListener(ln net.Listener, cfg *tls.Config) *dualListener {
	d := &dualListener{Listener: ln, tls: cfg, conns: make(chan net.Conn), errc: make(chan error, 1), done: make(chan struct{})}
	go d.loop()
	return d
}

func (d *dualListener) loop() {
	for {
		c, err := d.Listener.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			d.errc <- err
			return
		}
		go d.classify(c)
	}
}

func (d *dualListener) classify(c net.Conn) {
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	first := make([]byte, 1)
	if _, err := io.ReadFull(c, first); err != nil {
		c.Close()
		return
	}
	c.SetReadDeadline(time.Time{})
	var out net.Conn = &prefixConn{Conn: c, prefix: first}
	if first[0] == 0x16 {
		out = tls.Server(out, d.tls)
	}
	select {
	case d.conns <- out:
	case <-d.done:
		c.Close()
	}
}

func (d *dualListener) Accept() (net.Conn, error) {
	select {
	case c := <-d.conns:
		return c, nil
	case err := <-d.errc:
		return nil, err
	case <-d.done:
		return nil, net.ErrClosed
	}
}

func (d *dualListener) Close() error {
	d.once.Do(func() { close(d.done) })
	return d.Listener.Close()
}

type prefixConn struct {
	net.Conn
	prefix []byte
}

func (p *prefixConn) Read(b []byte) (int, error) {
	if len(p.prefix) > 0 {
		n := copy(b, p.prefix)
		p.prefix = p.prefix[n:]
		return n, nil
	}
	return p.Conn.Read(b)
}
