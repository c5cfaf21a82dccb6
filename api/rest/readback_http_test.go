package rest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/api/rest"
	"github.com/cairn-dev/cairn/backend/file"
	"github.com/cairn-dev/cairn/hub"
	"github.com/cairn-dev/cairn/sdk/storagebackend"
)

// dyingBackend is the file backend that goes down (every read answers
// Unavailable) right after it stored an update, as a backend process killed
// between answering the hub's OnUpdate and the next call does.
type dyingBackend struct {
	*file.Backend
	armed, down atomic.Bool
}

func (b *dyingBackend) OnUpdate(ctx context.Context, req cairn.OnUpdateRequest) (json.RawMessage, error) {
	out, err := b.Backend.OnUpdate(ctx, req)
	if err == nil && b.armed.Load() {
		b.down.Store(true)
	}
	return out, err
}

func (b *dyingBackend) GetValue(ctx context.Context, req cairn.GetValueRequest) (json.RawMessage, error) {
	if b.down.Load() {
		return nil, status.Error(codes.Unavailable, "backend gone")
	}
	return b.Backend.GetValue(ctx, req)
}

// TestUpdateAnsweredAfterTheBackendWentDown: an update the backend stored
// and the hub committed is answered 200 with the value written, even when
// the backend cannot be read any more right after. It was answered 503
// (the value could not be read back), and a patch made on a guess was then
// applied again: a client told its committed write failed retries it.
func TestUpdateAnsweredAfterTheBackendWentDown(t *testing.T) {
	e := newGRPCRestEnv(t)
	fb, err := file.New(file.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	b := &dyingBackend{Backend: fb}
	id, _ := e.serveBackend(b)
	inBackend := map[string]string{rest.AnnotationBackend: id}

	for _, tc := range []struct {
		name, method, ct string
		body             func(o obj) any
		wantSpec         string
	}{
		{"merge patch", "PATCH", "application/merge-patch+json",
			func(obj) any { return `{"spec":{"enabled":true}}` }, `{"enabled":true,"key":"x"}`},
		{"json patch", "PATCH", "application/json-patch+json",
			func(obj) any { return `[{"op":"add","path":"/spec/tags/-","value":"t"}]` }, `{"key":"x","tags":["t"]}`},
		{"replace", "PUT", "application/json",
			func(o obj) any {
				f := flag(o.Metadata.Name, nil, `{"key":"y"}`)
				f["metadata"].(map[string]any)["resourceVersion"] = o.Metadata.ResourceVersion
				return f
			}, `{"key":"y"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b.armed.Store(false)
			b.down.Store(false)
			name := map[string]string{"merge patch": "mp", "json patch": "jp", "replace": "put"}[tc.name]
			f := flag(name, nil, `{"key":"x","tags":[]}`)
			if tc.name != "json patch" {
				f = flag(name, nil, `{"key":"x"}`)
			}
			f["metadata"].(map[string]any)["annotations"] = inBackend
			o := decodeObj(t, e.mustDo("POST", flagsIn("default"), "application/json", f, http.StatusCreated))
			b.armed.Store(true)
			r := e.do(tc.method, flagPath("default", name), tc.ct, tc.body(o))
			if r.code != http.StatusOK {
				t.Fatalf("%s after the backend stored it and went down = %s, want 200", tc.method, r)
			}
			if got, _ := json.Marshal(decodeObj(t, r).Spec); !cairn.JSONEqual(got, json.RawMessage(tc.wantSpec)) {
				t.Errorf("answer's spec %s, want %s", got, tc.wantSpec)
			}
			b.down.Store(false)
			rvs, err := e.h.ResourceVersions(e.ctx, o.Metadata.UID, true)
			if err != nil {
				t.Fatal(err)
			}
			if len(rvs) != 2 || !cairn.JSONEqual(rvs[1].Value, json.RawMessage(tc.wantSpec)) {
				t.Errorf("stored versions %+v, want 2, the second %s (written once)", rvs, tc.wantSpec)
			}
		})
	}
}

// dyingContextBackend is the file backend in its context-only mode (it
// keeps contexts; values are the files they name) going down right after it
// stored a write, as dyingBackend.
type dyingContextBackend struct {
	*file.Backend
	armed, down atomic.Bool
}

func (b *dyingContextBackend) OnCreate(ctx context.Context, req cairn.OnCreateRequest) (json.RawMessage, error) {
	out, err := b.Backend.OnCreate(ctx, req)
	if err == nil && b.armed.Load() {
		b.down.Store(true)
	}
	return out, err
}

func (b *dyingContextBackend) OnUpdate(ctx context.Context, req cairn.OnUpdateRequest) (json.RawMessage, error) {
	out, err := b.Backend.OnUpdate(ctx, req)
	if err == nil && b.armed.Load() {
		b.down.Store(true)
	}
	return out, err
}

func (b *dyingContextBackend) GetValue(ctx context.Context, req cairn.GetValueRequest) (json.RawMessage, error) {
	if b.down.Load() {
		return nil, status.Error(codes.Unavailable, "backend gone")
	}
	return b.Backend.GetValue(ctx, req)
}

// TestContextOnlyWriteAnsweredAfterTheBackendWentDown: a context-only
// backend keeps the context alone and derives the value, which the answer
// to a write reads back. When that read fails (the backend went down right
// after it stored the write), the committed create or update is answered
// 201/200 without the value and with a warning saying so; it was answered
// 503, and a client retried a write that had committed.
func TestContextOnlyWriteAnsweredAfterTheBackendWentDown(t *testing.T) {
	e := newGRPCRestEnv(t)
	src := t.TempDir()
	for name, v := range map[string]string{"a.json": `{"key":"a"}`, "b.json": `{"key":"b"}`} {
		if err := os.WriteFile(filepath.Join(src, name), []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	fb, err := file.New(file.Config{Dir: t.TempDir(), Source: src})
	if err != nil {
		t.Fatal(err)
	}
	b := &dyingContextBackend{Backend: fb}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan struct{})
	go func() {
		_ = storagebackend.NewContextServer(b, storagebackend.Options{}).Serve(ctx, lis)
		close(served)
	}()
	t.Cleanup(func() { cancel(); <-served })
	reg, err := e.h.CreateInstances(e.ctx, hub.CreateRequest{Instances: []hub.NewInstance{{
		Name: "sources", Namespace: hub.SystemNamespace,
		TypeRef:    cairn.TypeRef{Path: "cap.type.cairn.storage.grpc", Revision: "0.1.0"},
		Value:      json.RawMessage(fmt.Sprintf(`{"url":"grpc://%s","acceptValue":false,"contextSchema":%s}`, lis.Addr(), file.ContextSchema)),
		Attributes: []cairn.AttributeRef{{Path: cairn.StorageAttributePath, Revision: cairn.CoreRevision}},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	backendID := reg[0].ID
	flagType := decodeObj(t, e.mustDo("POST", flagsIn("default"), "application/json", flag("probe", nil, `{"key":"p"}`), http.StatusCreated))
	var probe struct {
		Spec struct {
			TypeRef cairn.TypeRef `json:"typeRef"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(e.mustDo("GET", hubGV+"/typeinstances/"+flagType.Metadata.UID, "", nil, http.StatusOK).body, &probe); err != nil {
		t.Fatal(err)
	}
	typ := probe.Spec.TypeRef

	checkCommitted := func(what string, r response, want int, rv int) rest.TypeInstanceObject {
		t.Helper()
		if r.code != want {
			t.Fatalf("%s after the backend stored it and went down = %s, want %d", what, r, want)
		}
		o := decodeTI(t, r)
		if o.Status.ResourceVersion != rv || len(o.Spec.Value) > 0 && string(o.Spec.Value) != "null" {
			t.Errorf("%s answered resource version %d with value %s, want version %d without a value", what, o.Status.ResourceVersion, o.Spec.Value, rv)
		}
		if w := r.header.Get("Warning"); !strings.Contains(w, "the write committed") || !strings.Contains(w, "could not be read") {
			t.Errorf("%s answered with Warning %q, want one saying the write committed and its value could not be read", what, w)
		}
		return o
	}
	stored := func(id string, rv int, want string) {
		t.Helper()
		b.down.Store(false)
		v, err := e.h.ResourceVersion(e.ctx, id, rv, true)
		if err != nil || !cairn.JSONEqual(v.Value, json.RawMessage(want)) {
			t.Errorf("resource version %d of %s = %s, %v; want %s", rv, id, v.Value, err, want)
		}
	}

	b.armed.Store(true)
	doc := fmt.Sprintf("apiVersion: hub.cairn.dev/v1\nkind: TypeInstance\nmetadata: {name: derived}\nspec:\n  typeRef: {path: %s, revision: %s}\n  backend: {id: %s, context: {file: a.json}}\n",
		typ.Path, typ.Revision, backendID)
	o := checkCommitted("create", e.do("POST", hubGV+"/typeinstances", "application/yaml", doc), http.StatusCreated, 1)
	stored(o.Metadata.UID, 1, `{"key":"a"}`)

	patch := `{"spec":{"backend":{"context":{"file":"b.json"}}}}`
	checkCommitted("update", e.do("PATCH", hubGV+"/typeinstances/"+o.Metadata.UID, "application/merge-patch+json", patch), http.StatusOK, 2)
	stored(o.Metadata.UID, 2, `{"key":"b"}`)

	// With the backend up, the answer has the value and no warning.
	b.armed.Store(false)
	r := e.do("PATCH", hubGV+"/typeinstances/"+o.Metadata.UID, "application/merge-patch+json", `{"spec":{"backend":{"context":{"file":"a.json"}}}}`)
	if got := decodeTI(t, r); r.code != http.StatusOK || !cairn.JSONEqual(got.Spec.Value, json.RawMessage(`{"key":"a"}`)) || r.header.Get("Warning") != "" {
		t.Errorf("update with the backend up = %s (Warning %q), want 200 with value a and no warning", r, r.header.Get("Warning"))
	}
}
