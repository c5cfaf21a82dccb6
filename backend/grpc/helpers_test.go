package grpc_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/cairn-dev/cairn"
	grpcbackend "github.com/cairn-dev/cairn/backend/grpc"
	"github.com/cairn-dev/cairn/sdk/storagebackend"
)

// served is a backend served over a real loopback TCP listener.
type served struct {
	addr   string
	server *storagebackend.Server
	done   chan error
	stop   context.CancelFunc
}

// serve serves b with the SDK on 127.0.0.1 and stops it when the test ends.
// acceptValue picks the service; b must be a ContextBackend when false.
func serve(t testing.TB, b storagebackend.ValueBackend, acceptValue bool, opts storagebackend.Options) *served {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return serveOn(t, lis, b, acceptValue, opts)
}

func serveOn(t testing.TB, lis net.Listener, b storagebackend.ValueBackend, acceptValue bool, opts storagebackend.Options) *served {
	t.Helper()
	var srv *storagebackend.Server
	if acceptValue {
		srv = storagebackend.NewValueServer(b, opts)
	} else {
		cb, ok := b.(storagebackend.ContextBackend)
		if !ok {
			t.Fatal("a context-only backend must implement GetPreCreateValue")
		}
		srv = storagebackend.NewContextServer(cb, opts)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &served{addr: lis.Addr().String(), server: srv, done: make(chan error, 1), stop: cancel}
	go func() { s.done <- srv.Serve(ctx, lis) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-s.done:
		case <-time.After(15 * time.Second):
			t.Error("backend server did not stop")
		}
	})
	return s
}

// opener returns an adapter Opener closed when the test ends.
func opener(t testing.TB, cfg grpcbackend.Config) *grpcbackend.Opener {
	t.Helper()
	o, err := grpcbackend.New(cfg)
	if err != nil {
		t.Fatalf("grpc.New: %v", err)
	}
	t.Cleanup(func() { o.Close() })
	return o
}

// storage describes a backend instance the way the hub hands it over.
func storage(url string, acceptValue bool) cairn.StorageBackend {
	return cairn.StorageBackend{ID: uuid.NewString(), URL: url, AcceptValue: acceptValue, ResourceVersion: 1}
}

func open(t testing.TB, o *grpcbackend.Opener, sb cairn.StorageBackend) cairn.Backend {
	t.Helper()
	b, err := o.OpenBackend(context.Background(), sb)
	if err != nil {
		t.Fatalf("OpenBackend: %v", err)
	}
	return b
}

// pki is a throwaway CA with a server and a client certificate, as PEM files.
type pki struct {
	caFile, serverCert, serverKey, clientCert, clientKey string
	serverTLS                                            *tls.Config // requires no client certificate
	mutualTLS                                            *tls.Config // requires one signed by the CA
}

func newPKI(t testing.TB) *pki {
	t.Helper()
	dir := t.TempDir()
	caKey := mustKey(t)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "cairn test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	issue := func(name string, usage x509.ExtKeyUsage, serial int64) (certFile, keyFile string, pair tls.Certificate) {
		key := mustKey(t)
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			ExtKeyUsage: []x509.ExtKeyUsage{usage}, KeyUsage: x509.KeyUsageDigitalSignature,
			IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		keyDER, _ := x509.MarshalECPrivateKey(key)
		certFile, keyFile = filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem")
		writePEM(t, certFile, "CERTIFICATE", der)
		writePEM(t, keyFile, "EC PRIVATE KEY", keyDER)
		pair, err = tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			t.Fatal(err)
		}
		return certFile, keyFile, pair
	}
	p := &pki{caFile: filepath.Join(dir, "ca.pem")}
	writePEM(t, p.caFile, "CERTIFICATE", caDER)
	var serverPair tls.Certificate
	p.serverCert, p.serverKey, serverPair = issue("server", x509.ExtKeyUsageServerAuth, 2)
	p.clientCert, p.clientKey, _ = issue("client", x509.ExtKeyUsageClientAuth, 3)
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	p.serverTLS = &tls.Config{Certificates: []tls.Certificate{serverPair}, MinVersion: tls.VersionTLS12}
	p.mutualTLS = &tls.Config{Certificates: []tls.Certificate{serverPair}, MinVersion: tls.VersionTLS12,
		ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool}
	return p
}

func mustKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func writePEM(t testing.TB, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

func wantCode(t testing.TB, err error, code cairn.Code) {
	t.Helper()
	if got := cairn.ErrorCode(err); got != code {
		t.Errorf("error %v: code %q, want %q", err, got, code)
	}
}

var errInjected = errors.New("injected failure")
