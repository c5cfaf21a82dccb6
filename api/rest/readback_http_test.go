package rest_test

import (
	"context"
	"encoding/json"
	"net/http"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/api/rest"
	"github.com/cairn-dev/cairn/backend/file"
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
