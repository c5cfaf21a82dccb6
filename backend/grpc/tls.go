package grpc

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"sigs.k8s.io/yaml"
)

// TLSFiles configures TLS towards one backend, from PEM files.
type TLSFiles struct {
	// CAFile holds the CA certificates that sign the backend's certificate.
	// Empty: the system's roots.
	CAFile string `json:"caFile,omitempty"`
	// CertFile and KeyFile hold a client certificate, for backends that
	// require one. Both or neither.
	CertFile string `json:"certFile,omitempty"`
	KeyFile  string `json:"keyFile,omitempty"`
	// ServerName overrides the name checked in the backend's certificate
	// (default: the url's host).
	ServerName string `json:"serverName,omitempty"`
}

// load reads the files into a tls.Config.
func (f TLSFiles) load() (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: f.ServerName}
	if f.CAFile != "" {
		pem, err := os.ReadFile(f.CAFile)
		if err != nil {
			return nil, fmt.Errorf("caFile: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("caFile %s: no PEM certificate in it", f.CAFile)
		}
		cfg.RootCAs = pool
	}
	switch {
	case f.CertFile != "" && f.KeyFile != "":
		cert, err := tls.LoadX509KeyPair(f.CertFile, f.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("certFile %s / keyFile %s: %w", f.CertFile, f.KeyFile, err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	case f.CertFile != "" || f.KeyFile != "":
		return nil, errors.New("certFile and keyFile go together: give both or neither")
	}
	return cfg, nil
}

// LoadTLSConfigFile reads a TLS configuration file: a YAML or JSON object
// mapping a backend id (or alias) to its TLSFiles, for example
//
//	vault-backend:
//	  caFile: ca.pem
//	  certFile: client.pem
//	  keyFile: client-key.pem
//
// Relative paths are relative to the file's directory.
func LoadTLSConfigFile(path string) (map[string]TLSFiles, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("backend TLS config: %w", err)
	}
	j, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return nil, fmt.Errorf("backend TLS config %s: invalid YAML or JSON: %w", path, err)
	}
	var m map[string]TLSFiles
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("backend TLS config %s: want a map of backend id or alias to {caFile, certFile, keyFile, serverName}: %w", path, err)
	}
	dir := filepath.Dir(path)
	abs := func(p string) string {
		if p == "" || filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(dir, p)
	}
	for k, f := range m {
		f.CAFile, f.CertFile, f.KeyFile = abs(f.CAFile), abs(f.CertFile), abs(f.KeyFile)
		m[k] = f
	}
	return m, nil
}
