package graphql_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/backend/file"
	"github.com/cairn-dev/cairn/sdk/storagebackend"
	"github.com/cairn-dev/cairn/store"
)

// recorder is a real file backend, served over loopback gRPC, that records
// every call that would change it.
type recorder struct {
	cairn.Backend
	mu    sync.Mutex
	calls []string
}

func (r *recorder) record(call string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, call)
}

func (r *recorder) OnCreate(ctx context.Context, req cairn.OnCreateRequest) (json.RawMessage, error) {
	r.record("OnCreate")
	return r.Backend.OnCreate(ctx, req)
}

func (r *recorder) OnUpdate(ctx context.Context, req cairn.OnUpdateRequest) (json.RawMessage, error) {
	r.record("OnUpdate")
	return r.Backend.OnUpdate(ctx, req)
}

func (r *recorder) OnDelete(ctx context.Context, req cairn.OnDeleteRequest) error {
	r.record("OnDelete")
	return r.Backend.OnDelete(ctx, req)
}

func (r *recorder) OnLock(ctx context.Context, req cairn.OnLockRequest) error {
	r.record("OnLock")
	return r.Backend.OnLock(ctx, req)
}

func (r *recorder) OnUnlock(ctx context.Context, req cairn.OnUnlockRequest) error {
	r.record("OnUnlock")
	return r.Backend.OnUnlock(ctx, req)
}

// dirListing is every file under dir with its contents.
func dirListing(t *testing.T, dir string) string {
	t.Helper()
	var out []string
	err := filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		out = append(out, p+"="+string(b))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return strings.Join(out, "\n")
}

// TestMutationsDryRun runs every mutation with dryRun: true against a real
// gRPC file backend and asserts the answers, the refusals, an untouched
// store and an untouched backend (no call, no file changed).
func TestMutationsDryRun(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	fb, err := file.New(file.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{Backend: fb}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := storagebackend.NewValueServer(rec, storagebackend.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, lis) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			t.Error("file backend did not stop")
		}
	})
	bid := e.registerBackend("files", fmt.Sprintf(`{"url":"grpc://%s","acceptValue":true,"contextSchema":null}`, lis.Addr()))
	in := ti("db", "cap.type.db", "0.1.0", map[string]any{"host": "a"})
	in["backend"] = map[string]any{"id": bid}
	id := e.create([]map[string]any{in})["db"]

	snapshot := func() string {
		seq, err := e.h.LastSeq(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		insts, err := e.h.ListInstances(e.ctx, store.InstanceFilter{}, true)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal([]any{seq, insts})
		rec.mu.Lock()
		calls := strings.Join(rec.calls, ",")
		rec.mu.Unlock()
		return string(b) + "\n" + calls + "\n" + dirListing(t, dir)
	}
	newIn := ti("new", "cap.type.db", "0.1.0", map[string]any{"host": "n"})
	newIn["backend"] = map[string]any{"id": bid}
	for _, tt := range []struct {
		name, query string
		vars        map[string]any
		fail        string // in the error when the real mutation fails too
	}{
		{"createTypeInstances", `mutation($in: CreateTypeInstancesInput!) { createTypeInstances(in: $in, dryRun: true) { id alias } }`,
			map[string]any{"in": map[string]any{"typeInstances": []any{newIn}, "usesRelations": []any{}}}, ""},
		{"createTypeInstance", `mutation($in: CreateTypeInstanceInput!) { createTypeInstance(in: $in, dryRun: true) }`,
			map[string]any{"in": newIn}, ""},
		{"updateTypeInstances", `mutation($id: ID!) { updateTypeInstances(in: [{id: $id, typeInstance: {value: {host: "z"}}}], dryRun: true) { id latestResourceVersion { resourceVersion spec { value } } } }`,
			map[string]any{"id": id}, ""},
		{"updateTypeInstances carrying the value over", `mutation($id: ID!) { updateTypeInstances(in: [{id: $id, typeInstance: {attributes: []}}], dryRun: true) { id latestResourceVersion { resourceVersion spec { value } } } }`,
			map[string]any{"id": id}, ""},
		{"deleteTypeInstance", `mutation($id: ID!) { deleteTypeInstance(id: $id, dryRun: true) }`, map[string]any{"id": id}, ""},
		{"deleteTypeInstance of a used backend", `mutation($id: ID!) { deleteTypeInstance(id: $id, dryRun: true) }`, map[string]any{"id": bid}, "you must first remove"},
		{"lockTypeInstances", `mutation($id: ID!) { lockTypeInstances(in: {ids: [$id], ownerID: "me"}, dryRun: true) }`, map[string]any{"id": id}, ""},
		{"unlockTypeInstances", `mutation($id: ID!) { unlockTypeInstances(in: {ids: [$id], ownerID: "me"}, dryRun: true) }`, map[string]any{"id": id}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			before := snapshot()
			res := e.do(tt.query, tt.vars)
			switch {
			case tt.fail == "" && len(res.Errors) > 0:
				t.Fatalf("errors: %+v", res.Errors)
			case tt.fail != "" && (len(res.Errors) != 1 || !strings.Contains(res.Errors[0].Message, tt.fail)):
				t.Fatalf("errors = %+v, want one containing %q", res.Errors, tt.fail)
			}
			if strings.HasPrefix(tt.name, "updateTypeInstances") {
				want := map[string]string{"updateTypeInstances": `"value":{"host":"z"}`, "updateTypeInstances carrying the value over": `"value":{"host":"a"}`}[tt.name]
				if !strings.Contains(string(res.Data), `"resourceVersion":2`) || !strings.Contains(string(res.Data), want) {
					t.Errorf("dry-run update answered %s, want resource version 2 with %s", res.Data, want)
				}
			}
			if after := snapshot(); after != before {
				t.Errorf("the dry run changed the store or the backend:\nbefore %s\nafter  %s", before, after)
			}
		})
	}
	// dryRun: false is an ordinary mutation.
	before := snapshot()
	e.ok(`mutation($id: ID!) { lockTypeInstances(in: {ids: [$id], ownerID: "me"}, dryRun: false) }`, map[string]any{"id": id}, nil)
	if snapshot() == before {
		t.Error("dryRun: false changed nothing")
	}
}
