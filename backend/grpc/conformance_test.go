package grpc_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/backend/backendtest"
	"github.com/cairn-dev/cairn/backend/file"
	grpcbackend "github.com/cairn-dev/cairn/backend/grpc"
	"github.com/cairn-dev/cairn/sdk/storagebackend"
)

// TestConformanceFileBackend runs the conformance suite against the example
// file backend through the real adapter, over real gRPC on loopback TCP:
// every protocol error (unknown id, duplicate revision, locked) must survive
// the wire with its code.
func TestConformanceFileBackend(t *testing.T) {
	backendtest.Run(t, backendtest.Harness{
		New: func(t *testing.T) cairn.Backend {
			fb, err := file.New(file.Config{Dir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			s := serve(t, fb, true, storagebackend.Options{})
			return open(t, opener(t, grpcbackend.Config{}), storage("grpc://"+s.addr, true))
		},
		AcceptValue: true,
	})
}

// TestConformanceContextOnlyFileBackend does the same for a backend that
// takes only a context, over the ContextStorageBackend service.
func TestConformanceContextOnlyFileBackend(t *testing.T) {
	backendtest.Run(t, backendtest.Harness{
		New: func(t *testing.T) cairn.Backend {
			src := t.TempDir()
			if err := os.MkdirAll(filepath.Join(src, "cfg"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(src, "cfg", "app.json"), []byte(`{"replicas":3}`), 0o644); err != nil {
				t.Fatal(err)
			}
			fb, err := file.New(file.Config{Dir: t.TempDir(), Source: src})
			if err != nil {
				t.Fatal(err)
			}
			s := serve(t, fb, false, storagebackend.Options{})
			return open(t, opener(t, grpcbackend.Config{}), storage("grpc://"+s.addr, false))
		},
		Context:      json.RawMessage(`{"file":"cfg/app.json"}`),
		ContextValue: json.RawMessage(`{"replicas":3}`),
	})
}
