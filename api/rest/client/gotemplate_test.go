package client_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/api/rest"
	"github.com/cairn-dev/cairn/api/rest/client"
	"github.com/cairn-dev/cairn/backend/gotemplate"
	grpcbackend "github.com/cairn-dev/cairn/backend/grpc"
	"github.com/cairn-dev/cairn/hub"
	"github.com/cairn-dev/cairn/sdk/storagebackend"
	"github.com/cairn-dev/cairn/store/sqlite"
)

// The out-of-process gotemplate backend: served with the SDK over real gRPC,
// reading instances through a real REST server of the hub that calls it.
func TestExternalGotemplateOverGRPCAndREST(t *testing.T) {
	ctx := cairn.WithActor(context.Background(), "tester")
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "cairn.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	opener, err := grpcbackend.New(grpcbackend.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { opener.Close() })
	h, err := hub.New(ctx, hub.Config{Store: st, Backends: opener})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(rest.New(rest.Config{Hub: h}))
	t.Cleanup(srv.Close)

	c, err := client.New(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- storagebackend.NewContextServer(gotemplate.New(c), storagebackend.Options{}).Serve(sctx, lis)
	}()
	t.Cleanup(func() { stop(); <-done })

	value, _ := json.Marshal(map[string]any{"url": "grpc://" + lis.Addr().String(), "acceptValue": false,
		"contextSchema": json.RawMessage(gotemplate.ContextSchema)})
	reg, err := h.CreateInstances(ctx, hub.CreateRequest{Instances: []hub.NewInstance{{Alias: "gotemplate-remote",
		TypeRef: hub.GotemplateTypeRef(), Value: value, Namespace: hub.SystemNamespace,
		Attributes: []cairn.AttributeRef{{Path: cairn.StorageAttributePath, Revision: cairn.CoreRevision}}}}})
	if err != nil {
		t.Fatalf("register the external gotemplate backend: %v", err)
	}
	backendID := reg[0].ID

	projCtx, _ := json.Marshal(gotemplate.Context{Template: "host: '{{ .db.host }}:{{ .db.port }}'",
		Variables: map[string]gotemplate.Variable{"db": {RelatedTypeInstanceAlias: "db"}}})
	out, err := h.CreateInstances(ctx, hub.CreateRequest{
		Instances: []hub.NewInstance{
			{Alias: "db", TypeRef: cairn.TypeRef{Path: "cap.type.db.config", Revision: "0.1.0"}, Value: json.RawMessage(`{"host":"pg","port":5432}`)},
			{Alias: "view", TypeRef: cairn.TypeRef{Path: "cap.type.db.url", Revision: "0.1.0"}, Backend: &hub.BackendInput{ID: backendID, Context: projCtx}},
		},
		UsesRelations: []hub.UsesRelation{{From: "view", To: "db"}},
	})
	if err != nil {
		t.Fatalf("create a source and its projection in the external backend: %v", err)
	}
	read := func() string {
		t.Helper()
		inst, err := h.GetInstance(ctx, out[1].ID, true)
		if err != nil {
			t.Fatalf("read the projection: %v", err)
		}
		return string(inst.Latest.Value)
	}
	if got := read(); got != `{"host":"pg:5432"}` {
		t.Fatalf("projection = %s", got)
	}
	if _, err := h.UpdateInstances(ctx, []hub.UpdateInstance{{ID: out[0].ID, Value: json.RawMessage(`{"host":"pg2","port":6543}`)}}); err != nil {
		t.Fatal(err)
	}
	if got := read(); got != `{"host":"pg2:6543"}` {
		t.Fatalf("projection after the source's update = %s", got)
	}
	if err := h.DeleteInstance(ctx, out[0].ID, ""); !cairn.HasCode(err, cairn.CodeUsedBy) {
		t.Fatalf("delete the source = %v, want UsedBy", err)
	}
	// A template that does not render is refused over the wire too.
	bad, _ := json.Marshal(gotemplate.Context{Template: "x: {{ .db.nope }}", Variables: map[string]gotemplate.Variable{"db": {TypeInstanceID: out[0].ID}}})
	_, err = h.CreateInstances(ctx, hub.CreateRequest{Instances: []hub.NewInstance{{TypeRef: cairn.TypeRef{Path: "cap.type.db.url", Revision: "0.1.0"},
		Backend: &hub.BackendInput{ID: backendID, Context: bad}}}})
	if !cairn.HasCode(err, cairn.CodeInvalid) {
		t.Fatalf("broken template = %v, want Invalid", err)
	}
}
