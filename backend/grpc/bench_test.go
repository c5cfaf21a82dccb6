package grpc_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/google/uuid"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/backend/builtin"
	"github.com/cairn-dev/cairn/backend/file"
	grpcbackend "github.com/cairn-dev/cairn/backend/grpc"
	"github.com/cairn-dev/cairn/hub"
	"github.com/cairn-dev/cairn/sdk/storagebackend"
	"github.com/cairn-dev/cairn/store/sqlite"
)

// benchValue is a ~100-byte credentials document.
// benchSchema is benchValue's Type's schema.
var benchSchema = json.RawMessage(`{"type":"object","additionalProperties":false,"required":["host","port"],"properties":{
 "host":{"type":"string"},"port":{"type":"integer","minimum":1,"maximum":65535},"user":{"type":"string"},
 "password":{"type":"string","x-cairn-secret":true},"tls":{"type":"boolean"}}}`)

var benchValue = json.RawMessage(`{"host":"db.example.com","port":5432,"user":"app","password":"s3cr3t-passw0rd","tls":true}`)

// constBackend answers every GetValue with the same value from memory, to
// measure the protocol and transport alone.
type constBackend struct{ cairn.Backend }

func (constBackend) GetValue(context.Context, cairn.GetValueRequest) (json.RawMessage, error) {
	return benchValue, nil
}

func benchGet(b *testing.B, be cairn.Backend, id string) {
	ctx := context.Background()
	req := cairn.GetValueRequest{InstanceID: id, ResourceVersion: 1}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := be.GetValue(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
}

func newFile(b *testing.B) *file.Backend {
	fb, err := file.New(file.Config{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	return fb
}

func create(b *testing.B, be cairn.Backend) string {
	id := uuid.NewString()
	if _, err := be.OnCreate(context.Background(), cairn.OnCreateRequest{InstanceID: id, Value: benchValue}); err != nil {
		b.Fatal(err)
	}
	return id
}

// BenchmarkGetValue compares reading one value from the built-in backend
// (SQLite), from the file backend in-process, and from backends over gRPC
// on loopback TCP.
func BenchmarkGetValue(b *testing.B) {
	b.Run("builtin-sqlite", func(b *testing.B) {
		st, err := sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "cairn.db"))
		if err != nil {
			b.Fatal(err)
		}
		defer st.Close()
		be := builtin.New(st)
		benchGet(b, be, create(b, be))
	})
	b.Run("file-in-process", func(b *testing.B) {
		be := newFile(b)
		benchGet(b, be, create(b, be))
	})
	b.Run("grpc-memory", func(b *testing.B) {
		s := serve(b, constBackend{}, true, storagebackend.Options{})
		benchGet(b, open(b, opener(b, grpcbackend.Config{}), storage("grpc://"+s.addr, true)), uuid.NewString())
	})
	b.Run("grpc-file", func(b *testing.B) {
		s := serve(b, newFile(b), true, storagebackend.Options{})
		be := open(b, opener(b, grpcbackend.Config{}), storage("grpc://"+s.addr, true))
		benchGet(b, be, create(b, be))
	})
	b.Run("grpc-file-parallel", func(b *testing.B) {
		s := serve(b, newFile(b), true, storagebackend.Options{})
		be := open(b, opener(b, grpcbackend.Config{}), storage("grpc://"+s.addr, true))
		id := create(b, be)
		req := cairn.GetValueRequest{InstanceID: id, ResourceVersion: 1}
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := be.GetValue(context.Background(), req); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}

// BenchmarkHub measures the hub's operations on an instance kept in the
// file backend over gRPC, next to the same on the built-in backend. The
// hub's own cost per external call is GetInstance/grpc-file minus
// GetValue/grpc-file: the metadata read, resolving the backend instance (a
// read of its value) and the adapter's cached client.
func BenchmarkHub(b *testing.B) {
	ctx := cairn.WithActor(context.Background(), "bench")
	st, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "cairn.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	s := serve(b, newFile(b), true, storagebackend.Options{})
	h, err := hub.New(ctx, hub.Config{Store: st, Backends: opener(b, grpcbackend.Config{})})
	if err != nil {
		b.Fatal(err)
	}
	out, err := h.CreateInstances(ctx, hub.CreateRequest{Instances: []hub.NewInstance{{
		TypeRef:    cairn.TypeRef{Path: "cap.type.cairn.storage.grpc", Revision: "0.1.0"},
		Value:      json.RawMessage(fmt.Sprintf(`{"url":"grpc://%s","acceptValue":true,"contextSchema":null}`, s.addr)),
		Attributes: []cairn.AttributeRef{{Path: cairn.StorageAttributePath, Revision: cairn.CoreRevision}},
	}}})
	if err != nil {
		b.Fatal(err)
	}
	bid := out[0].ID
	// A registered Type with a schema, as instances have in use: a value
	// read back from an external backend is checked against it.
	ref := cairn.TypeRef{Path: "cap.type.bench", Revision: "0.1.0"}
	if _, err := h.CreateType(ctx, cairn.Type{Path: ref.Path, Revision: ref.Revision, JSONSchema: benchSchema}); err != nil {
		b.Fatal(err)
	}
	mk := func(backend *hub.BackendInput) string {
		out, err := h.CreateInstances(ctx, hub.CreateRequest{Instances: []hub.NewInstance{{TypeRef: ref, Value: benchValue, Backend: backend}}})
		if err != nil {
			b.Fatal(err)
		}
		return out[0].ID
	}
	for _, bc := range []struct {
		name    string
		backend *hub.BackendInput
	}{{"builtin", nil}, {"grpc-file", &hub.BackendInput{ID: bid}}} {
		id := mk(bc.backend)
		b.Run("GetInstance/"+bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := h.GetInstance(ctx, id, true); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("GetInstanceMetadataOnly/"+bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := h.GetInstance(ctx, id, false); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("Create/"+bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				mk(bc.backend)
			}
		})
		b.Run("Update/"+bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := h.UpdateInstances(ctx, []hub.UpdateInstance{{ID: id, Value: benchValue}}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkOnCreate separates the file backend's durable write (a synced
// file and two synced directories) from the transport.
func BenchmarkOnCreate(b *testing.B) {
	run := func(b *testing.B, be cairn.Backend) {
		b.ReportAllocs()
		for b.Loop() {
			create(b, be)
		}
	}
	b.Run("file-in-process", func(b *testing.B) { run(b, newFile(b)) })
	b.Run("grpc-file", func(b *testing.B) {
		s := serve(b, newFile(b), true, storagebackend.Options{})
		run(b, open(b, opener(b, grpcbackend.Config{}), storage("grpc://"+s.addr, true)))
	})
}
