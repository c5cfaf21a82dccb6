package cli_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestServeTLSReloads: cairn serve --tls-cert --tls-key speaks HTTP/2 over
// TLS (and not plain HTTP), serves a pair written over the files without a
// restart, and keeps the previous pair while the files hold one that does
// not load.
func TestServeTLSReloads(t *testing.T) {
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	// write puts a serving pair with serial n in place, its files dated
	// at, as a certificate manager replacing them would.
	write := func(n int64, at time.Time) {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(n), Subject: pkix.Name{CommonName: "cairn"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		kder, _ := x509.MarshalECPrivateKey(key)
		os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
		os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600)
		os.Chtimes(certFile, at, at)
		os.Chtimes(keyFile, at, at)
	}
	write(100, time.Now().Add(-time.Minute))
	vars := map[string]string{"CAIRN_DATA_DIR": t.TempDir(), "CAIRN_CONFIG": filepath.Join(dir, "config.yaml")}
	url := startServeSecure(t, vars, "--tls-cert", certFile, "--tls-key", keyFile)

	pool := x509.NewCertPool()
	pool.AddCert(ca)
	// A new connection each time, so each sees the certificate served now.
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool},
		ForceAttemptHTTP2: true, DisableKeepAlives: true}}
	serial := func() (int64, int) {
		t.Helper()
		resp, err := client.Get(url + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.TLS.PeerCertificates[0].SerialNumber.Int64(), resp.ProtoMajor
	}
	if n, proto := serial(); n != 100 || proto != 2 {
		t.Fatalf("serving certificate %d over HTTP/%d, want 100 over HTTP/2", n, proto)
	}
	plain, err := http.Get("http://" + url[len("https://"):] + "/healthz")
	if err == nil {
		plain.Body.Close()
		if plain.StatusCode != http.StatusBadRequest {
			t.Errorf("plain HTTP to the TLS port: %d, want 400", plain.StatusCode)
		}
	}

	waitFor := func(want int64) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			n, _ := serial()
			if n == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("serving certificate %d, want %d within 10s of the files changing", n, want)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	write(200, time.Now())
	waitFor(200)
	// A pair that does not load (a key of another certificate, as when
	// the files are caught half-replaced) is not served; the last good one is.
	cert200, _ := os.ReadFile(certFile)
	write(300, time.Now().Add(time.Minute))
	os.WriteFile(certFile, cert200, 0o600)
	os.Chtimes(certFile, time.Now().Add(2*time.Minute), time.Now().Add(2*time.Minute))
	time.Sleep(1200 * time.Millisecond) // past the once-a-second look at the files
	if n, _ := serial(); n != 200 {
		t.Errorf("with a mismatched pair in the files: serving %d, want the previous 200", n)
	}
	write(400, time.Now().Add(3*time.Minute))
	waitFor(400)
}
