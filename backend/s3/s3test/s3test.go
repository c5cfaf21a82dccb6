// Package s3test starts a real S3 server for tests: versitygw (Apache-2.0)
// in posix mode on a temporary directory, one per call. scripts/with-services
// builds it and exports its path as CAIRN_TEST_VERSITYGW; without it the
// calling test is skipped, or fails under CI=true.
package s3test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// EnvVersityGW names the versitygw binary.
const EnvVersityGW = "CAIRN_TEST_VERSITYGW"

// Server is a running versitygw.
type Server struct {
	// Endpoint is http://127.0.0.1:PORT.
	Endpoint  string
	AccessKey string
	SecretKey string
	Region    string
	// Dir is the posix directory behind the buckets.
	Dir string
	// CAFile is the CA of a TLS server's certificate (PEM); "" for http.
	CAFile string
	// VirtualDomain is the base domain of virtual-hosted addressing
	// (StartVirtual); "" when only path-style requests are served.
	VirtualDomain string
}

// writeCerts writes a CA and a server certificate for 127.0.0.1 signed by
// it, returning the certificate, key and CA files.
func writeCerts(t testing.TB, dir string) (cert, key, ca string) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "cairn test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	srvKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	srvTmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		KeyUsage: x509.KeyUsageDigitalSignature}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, caCert, &srvKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(srvKey)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	return write("server.pem", "CERTIFICATE", srvDER), write("server-key.pem", "EC PRIVATE KEY", keyDER), write("ca.pem", "CERTIFICATE", caDER)
}

// Binary returns the versitygw binary, skipping t (failing it under
// CI=true) when there is none.
func Binary(t testing.TB) string {
	t.Helper()
	bin := os.Getenv(EnvVersityGW)
	if bin == "" {
		if ci, _ := strconv.ParseBool(os.Getenv("CI")); ci {
			t.Fatalf("%s is not set: run the tests through scripts/with-services, which builds versitygw", EnvVersityGW)
		}
		t.Skipf("%s is not set: run the tests through scripts/with-services to build versitygw", EnvVersityGW)
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%s=%s: %v", EnvVersityGW, bin, err)
	}
	return bin
}

// Start starts a versitygw for t and stops it when t ends.
func Start(t testing.TB) *Server { return start(t, false, "") }

// StartTLS starts a versitygw serving https with a certificate for
// 127.0.0.1 signed by a CA of its own; CAFile is that CA (PEM).
func StartTLS(t testing.TB) *Server { return start(t, true, "") }

// StartVirtual starts a versitygw that also serves virtual-hosted
// requests (http://BUCKET.domain:PORT/KEY). Endpoint is
// http://domain:PORT; names under domain resolve nowhere, so clients dial
// through Transport, which connects every name to the server.
func StartVirtual(t testing.TB, domain string) *Server { return start(t, false, domain) }

// Transport is an HTTP transport for s: for a virtual-hosted server it
// connects every host name to s's loopback address.
func (s *Server) Transport() *http.Transport {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if s.VirtualDomain != "" {
		_, port, _ := net.SplitHostPort(strings.TrimPrefix(s.Endpoint, "http://"))
		var d net.Dialer
		tr.DialContext = func(ctx context.Context, network, _ string) (net.Conn, error) {
			return d.DialContext(ctx, network, "127.0.0.1:"+port)
		}
	}
	return tr
}

func start(t testing.TB, withTLS bool, virtualDomain string) *Server {
	t.Helper()
	bin := Binary(t)
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	side := filepath.Join(dir, "meta")
	for _, d := range []string{data, side} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	port := freePort(t)
	s := &Server{Endpoint: "http://127.0.0.1:" + strconv.Itoa(port), AccessKey: "cairntestaccess", SecretKey: "cairntestsecret0123456789", Region: "us-east-1", Dir: data}
	args := []string{"--access", s.AccessKey, "--secret", s.SecretKey, "--region", s.Region, "--port", "127.0.0.1:" + strconv.Itoa(port)}
	if withTLS {
		cert, key, ca := writeCerts(t, dir)
		args = append(args, "--cert", cert, "--key", key)
		s.CAFile = ca
		s.Endpoint = "https://127.0.0.1:" + strconv.Itoa(port)
	}
	if virtualDomain != "" {
		args = append(args, "--virtual-domain", virtualDomain)
		s.VirtualDomain = virtualDomain
		s.Endpoint = "http://" + virtualDomain + ":" + strconv.Itoa(port)
	}
	var out bytes.Buffer
	cmd := exec.Command(bin, append(args, "posix", "--sidecar", side, data)...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start versitygw: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	deadline := time.Now().Add(15 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), 200*time.Millisecond)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("versitygw did not listen on %d within 15 s: %s", port, out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	return s
}

// Client returns a client of s.
func (s *Server) Client(t testing.TB) *minio.Client {
	t.Helper()
	tr := s.Transport()
	host, secure := strings.CutPrefix(s.Endpoint, "https://")
	if secure {
		pemCA, err := os.ReadFile(s.CAFile)
		if err != nil {
			t.Fatal(err)
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(pemCA)
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	} else {
		host = strings.TrimPrefix(s.Endpoint, "http://")
	}
	c, err := minio.New(host, &minio.Options{
		Creds: credentials.NewStaticV4(s.AccessKey, s.SecretKey, ""), Region: s.Region, BucketLookup: minio.BucketLookupPath,
		Transport: tr, Secure: secure,
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Bucket creates a bucket named name.
func (s *Server) Bucket(t testing.TB, name string) {
	t.Helper()
	if err := s.Client(t).MakeBucket(context.Background(), name, minio.MakeBucketOptions{Region: s.Region}); err != nil {
		t.Fatalf("create bucket %s: %v", name, err)
	}
}

// Env returns the environment variables that give s's credentials.
func (s *Server) Env() []string {
	return []string{"AWS_ACCESS_KEY_ID=" + s.AccessKey, "AWS_SECRET_ACCESS_KEY=" + s.SecretKey, "AWS_REGION=" + s.Region}
}

func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
