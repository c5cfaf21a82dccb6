package graphql_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/api/graphql"
	"github.com/cairn-dev/cairn/api/rest"
	"github.com/cairn-dev/cairn/backend/file"
	grpcbackend "github.com/cairn-dev/cairn/backend/grpc"
	"github.com/cairn-dev/cairn/hub"
	"github.com/cairn-dev/cairn/sdk/storagebackend"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/sqlite"
)

// env is a hub on a real SQLite file, served by the REST and GraphQL
// handlers on one mux over real HTTP on loopback, as cairn serve does.
type env struct {
	t     testing.TB
	ctx   context.Context
	h     *hub.Hub
	st    *countingStore
	url   string // the /graphql endpoint
	calls atomic.Int64
}

type envOption func(*hub.Config, *graphql.Config)

func newEnv(t testing.TB, opts ...envOption) *env {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "cairn.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	backends, err := grpcbackend.New(grpcbackend.Config{Timeout: 5 * time.Second, ReadAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { backends.Close() })
	cs := &countingStore{Store: st}
	hcfg := hub.Config{Store: cs, Backends: backends}
	gcfg := graphql.Config{Introspection: true}
	for _, o := range opts {
		o(&hcfg, &gcfg)
	}
	h, err := hub.New(ctx, hcfg)
	if err != nil {
		t.Fatal(err)
	}
	gcfg.Hub = h
	mux := http.NewServeMux()
	mux.Handle("/graphql", graphql.New(gcfg))
	mux.Handle("/", rest.New(rest.Config{Hub: h}))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return &env{t: t, ctx: ctx, h: h, st: cs, url: srv.URL + "/graphql"}
}

// gqlError is one entry of a GraphQL response's errors.
type gqlError struct {
	Message string `json:"message"`
	Path    []any  `json:"path"`
}

type response struct {
	Data   json.RawMessage `json:"data"`
	Errors []gqlError      `json:"errors"`
}

// do posts a GraphQL request as any client would: JSON over HTTP.
func (e *env) do(query string, vars map[string]any) response {
	e.t.Helper()
	body, err := json.Marshal(map[string]any{"query": query, "variables": vars})
	if err != nil {
		e.t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(e.ctx, http.MethodPost, e.url, bytes.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	var out response
	if err := json.NewDecoder(res.Body).Decode(&out); err != nil {
		e.t.Fatalf("decode response (HTTP %d): %v", res.StatusCode, err)
	}
	return out
}

// ok runs a request that must succeed and decodes its data into out.
func (e *env) ok(query string, vars map[string]any, out any) {
	e.t.Helper()
	res := e.do(query, vars)
	if len(res.Errors) > 0 {
		e.t.Fatalf("unexpected errors: %+v", res.Errors)
	}
	if out != nil {
		if err := json.Unmarshal(res.Data, out); err != nil {
			e.t.Fatalf("decode data %s: %v", res.Data, err)
		}
	}
}

// fails runs a request that must fail and returns its one error message.
func (e *env) fails(query string, vars map[string]any) string {
	e.t.Helper()
	res := e.do(query, vars)
	if len(res.Errors) != 1 {
		e.t.Fatalf("want exactly one error, got %+v (data %s)", res.Errors, res.Data)
	}
	return res.Errors[0].Message
}

const createMany = `mutation($in: CreateTypeInstancesInput!) { createTypeInstances(in: $in) { id alias } }`

// create creates instances (GraphQL input objects) with relations and
// returns alias -> id.
func (e *env) create(tis []map[string]any, rels ...[2]string) map[string]string {
	e.t.Helper()
	relations := []map[string]any{}
	for _, r := range rels {
		relations = append(relations, map[string]any{"from": r[0], "to": r[1]})
	}
	var out struct {
		CreateTypeInstances []struct{ ID, Alias string }
	}
	e.ok(createMany, map[string]any{"in": map[string]any{"typeInstances": tis, "usesRelations": relations}}, &out)
	ids := map[string]string{}
	for _, c := range out.CreateTypeInstances {
		ids[c.Alias] = c.ID
	}
	return ids
}

func ti(alias, path, revision string, value any) map[string]any {
	return map[string]any{"alias": alias, "typeRef": map[string]any{"path": path, "revision": revision}, "value": value}
}

// fileBackend serves the example file backend over loopback gRPC (wrapped
// by faults, so a test can make chosen calls fail) and registers it in the
// hub; it returns the backend instance's id.
func (e *env) fileBackend(f *faults) string {
	e.t.Helper()
	id, _ := e.stoppableFileBackend(f)
	return id
}

// stoppableFileBackend is fileBackend that also returns a function that
// stops the backend (a backend that is down).
func (e *env) stoppableFileBackend(f *faults) (string, func()) {
	e.t.Helper()
	fb, err := file.New(file.Config{Dir: e.t.TempDir()})
	if err != nil {
		e.t.Fatal(err)
	}
	f.Backend = fb
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		e.t.Fatal(err)
	}
	srv := storagebackend.NewValueServer(f, storagebackend.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, lis) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			select {
			case <-done:
			case <-time.After(15 * time.Second):
				e.t.Error("file backend did not stop")
			}
		})
	}
	e.t.Cleanup(stop)
	return e.registerBackend("files", fmt.Sprintf(`{"url":"grpc://%s","acceptValue":true,"contextSchema":null}`, lis.Addr())), stop
}

// registerBackend registers a storage backend instance with the given value.
func (e *env) registerBackend(alias, value string) string {
	e.t.Helper()
	var v any
	if err := json.Unmarshal([]byte(value), &v); err != nil {
		e.t.Fatal(err)
	}
	in := ti(alias, "cap.type.cairn.storage.grpc", "0.1.0", v)
	in["attributes"] = []map[string]any{{"path": cairn.StorageAttributePath, "revision": cairn.CoreRevision}}
	return e.create([]map[string]any{in})[alias]
}

// faults wraps a backend on the server side of the wire so a test can make
// calls fail; the failure travels through real gRPC to the hub.
type faults struct {
	cairn.Backend
	failCreate atomic.Bool // OnCreate fails for values {"fail": true}
	failDelete atomic.Bool // OnDelete fails
}

func (f *faults) OnCreate(ctx context.Context, req cairn.OnCreateRequest) (json.RawMessage, error) {
	if f.failCreate.Load() && string(req.Value) == `{"fail":true}` {
		return nil, cairn.Errorf(cairn.CodeInvalid, "refusing value of %s", req.InstanceID)
	}
	return f.Backend.OnCreate(ctx, req)
}

func (f *faults) OnDelete(ctx context.Context, req cairn.OnDeleteRequest) error {
	if f.failDelete.Load() {
		return cairn.Errorf(cairn.CodeInternal, "disk on fire")
	}
	return f.Backend.OnDelete(ctx, req)
}

// countingStore counts the store reads the hub makes, so a test can show
// that a GraphQL list costs a bounded number of them.
type countingStore struct {
	store.Store
	mu    sync.Mutex
	reads map[string]int
}

func (c *countingStore) count(method string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.reads == nil {
		c.reads = map[string]int{}
	}
	c.reads[method]++
}

// reset starts counting afresh and returns what was counted.
func (c *countingStore) reset() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.reads
	c.reads = map[string]int{}
	return r
}

func total(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func (c *countingStore) GetType(ctx context.Context, ref cairn.TypeRef) (cairn.Type, error) {
	c.count("GetType")
	return c.Store.GetType(ctx, ref)
}

func (c *countingStore) ListTypes(ctx context.Context, f store.TypeFilter) ([]cairn.Type, error) {
	c.count("ListTypes")
	return c.Store.ListTypes(ctx, f)
}

func (c *countingStore) GetInstances(ctx context.Context, ids []string) ([]cairn.Instance, error) {
	c.count("GetInstances")
	return c.Store.GetInstances(ctx, ids)
}

func (c *countingStore) GetInstancesBrief(ctx context.Context, ids []string) ([]cairn.Instance, error) {
	c.count("GetInstancesBrief")
	return c.Store.GetInstancesBrief(ctx, ids)
}

func (c *countingStore) ListInstances(ctx context.Context, f store.InstanceFilter) ([]cairn.Instance, error) {
	c.count("ListInstances")
	return c.Store.ListInstances(ctx, f)
}

func (c *countingStore) ResourceVersions(ctx context.Context, id string) ([]cairn.ResourceVersion, error) {
	c.count("ResourceVersions")
	return c.Store.ResourceVersions(ctx, id)
}

func (c *countingStore) ResourceVersion(ctx context.Context, id string, rv int) (cairn.ResourceVersion, error) {
	c.count("ResourceVersion")
	return c.Store.ResourceVersion(ctx, id, rv)
}

func (c *countingStore) Value(ctx context.Context, id string, rv int) (json.RawMessage, error) {
	c.count("Value")
	return c.Store.Value(ctx, id, rv)
}

func (c *countingStore) Values(ctx context.Context, keys []store.ValueKey) ([]json.RawMessage, error) {
	c.count("Values")
	return c.Store.Values(ctx, keys)
}
