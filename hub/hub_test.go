package hub_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/backend/builtin"
	"github.com/cairn-dev/cairn/hub"
	"github.com/cairn-dev/cairn/labels"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/sqlite"
)

// env is a hub on a real SQLite file, plus external backends served by the
// built-in implementation over a second SQLite file, with fault injection.
type env struct {
	t        *testing.T
	h        *hub.Hub
	st       store.Store
	opener   *opener
	ctx      context.Context
	backends map[string]*faulty
}

type opener struct {
	mu       sync.Mutex
	backends map[string]cairn.Backend
}

func (o *opener) OpenBackend(_ context.Context, sb cairn.StorageBackend) (cairn.Backend, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	b, ok := o.backends[sb.URL]
	if !ok {
		return nil, fmt.Errorf("no backend listens on %q", sb.URL)
	}
	return b, nil
}

// faulty wraps a real Backend and fails chosen calls.
type faulty struct {
	cairn.Backend
	mu    sync.Mutex
	fail  map[string]func(id string) error // by method name
	calls []string
	// namer makes it a cairn.ResourceNamer, as the Git backend is.
	namer bool
}

func (f *faulty) NamesResources() bool { return f.namer }

func (f *faulty) hook(method, id string) error {
	f.mu.Lock()
	f.calls = append(f.calls, method+" "+id)
	fn := f.fail[method]
	f.mu.Unlock()
	// Called unlocked: a hook may call the hub, which calls the backend.
	if fn != nil {
		return fn(id)
	}
	return nil
}

func (f *faulty) failOn(method string, fn func(id string) error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail[method] = fn
}

func (f *faulty) called(prefix string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, c := range f.calls {
		if strings.HasPrefix(c, prefix) {
			out = append(out, c)
		}
	}
	return out
}

func (f *faulty) OnCreate(ctx context.Context, req cairn.OnCreateRequest) (json.RawMessage, error) {
	if err := f.hook("OnCreate", req.InstanceID); err != nil {
		return nil, err
	}
	return f.Backend.OnCreate(ctx, req)
}

func (f *faulty) OnUpdate(ctx context.Context, req cairn.OnUpdateRequest) (json.RawMessage, error) {
	if err := f.hook("OnUpdate", req.InstanceID); err != nil {
		return nil, err
	}
	return f.Backend.OnUpdate(ctx, req)
}

func (f *faulty) OnDelete(ctx context.Context, req cairn.OnDeleteRequest) error {
	if err := f.hook("OnDelete", req.InstanceID); err != nil {
		return err
	}
	return f.Backend.OnDelete(ctx, req)
}

func (f *faulty) OnDeleteRevision(ctx context.Context, req cairn.OnDeleteRevisionRequest) error {
	if err := f.hook("OnDeleteRevision", req.InstanceID); err != nil {
		return err
	}
	return f.Backend.OnDeleteRevision(ctx, req)
}

func (f *faulty) GetValue(ctx context.Context, req cairn.GetValueRequest) (json.RawMessage, error) {
	if err := f.hook("GetValue", req.InstanceID); err != nil {
		return nil, err
	}
	return f.Backend.GetValue(ctx, req)
}

func (f *faulty) OnLock(ctx context.Context, req cairn.OnLockRequest) error {
	if err := f.hook("OnLock", req.InstanceID); err != nil {
		return err
	}
	return f.Backend.OnLock(ctx, req)
}

func (f *faulty) OnUnlock(ctx context.Context, req cairn.OnUnlockRequest) error {
	if err := f.hook("OnUnlock", req.InstanceID); err != nil {
		return err
	}
	return f.Backend.OnUnlock(ctx, req)
}

func openStore(t testing.TB, name string) store.Store {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), name))
	if err != nil {
		t.Fatalf("open SQLite store: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func newEnv(t *testing.T, opts ...func(*hub.Config)) *env {
	t.Helper()
	e := &env{t: t, ctx: cairn.WithActor(context.Background(), "tester"), opener: &opener{backends: map[string]cairn.Backend{}}}
	e.st = openStore(t, "hub.db")
	cfg := hub.Config{Store: e.st, Backends: e.opener}
	for _, o := range opts {
		o(&cfg)
	}
	h, err := hub.New(e.ctx, cfg)
	if err != nil {
		t.Fatalf("hub.New: %v", err)
	}
	e.h = h
	return e
}

// addBackend registers an external backend instance (stored in the built-in
// backend) served by a real built-in implementation on its own store.
func (e *env) addBackend(alias string, acceptValue bool, contextSchema string) (string, *faulty) {
	e.t.Helper()
	url := "test://" + alias
	f := &faulty{Backend: builtin.New(openStore(e.t, alias+".db")), fail: map[string]func(string) error{}}
	e.opener.mu.Lock()
	e.opener.backends[url] = f
	e.opener.mu.Unlock()
	cs := "null"
	if contextSchema != "" {
		cs = contextSchema
	}
	value := fmt.Sprintf(`{"url":%q,"acceptValue":%t,"contextSchema":%s}`, url, acceptValue, cs)
	id := e.create(hub.NewInstance{
		Alias:      alias,
		TypeRef:    cairn.TypeRef{Path: "cap.type.test.storage", Revision: "0.1.0"},
		Value:      json.RawMessage(value),
		Attributes: []cairn.AttributeRef{{Path: cairn.StorageAttributePath, Revision: "0.1.0"}},
	})
	return id, f
}

func (e *env) create(ins ...hub.NewInstance) string {
	e.t.Helper()
	out, err := e.h.CreateInstances(e.ctx, hub.CreateRequest{Instances: ins})
	if err != nil {
		e.t.Fatalf("CreateInstances: %v", err)
	}
	return out[0].ID
}

// takeNameDuringNextCreate has another writer create a cfgType instance
// named name while f stores the next create, so that the store refuses
// that create after the backend call (the hub checks names before it).
func (e *env) takeNameDuringNextCreate(f *faulty, name string) {
	var once sync.Once
	f.failOn("OnCreate", func(string) error {
		var err error
		once.Do(func() {
			_, err = e.h.CreateInstances(e.ctx, hub.CreateRequest{Instances: []hub.NewInstance{{TypeRef: cfgType, Name: name}}})
		})
		return err
	})
}

func (e *env) get(id string) cairn.Instance {
	e.t.Helper()
	inst, err := e.h.GetInstance(e.ctx, id, true)
	if err != nil {
		e.t.Fatalf("GetInstance(%s): %v", id, err)
	}
	return inst
}

func (e *env) count() int {
	e.t.Helper()
	list, err := e.h.ListInstances(e.ctx, store.InstanceFilter{}, false)
	if err != nil {
		e.t.Fatalf("ListInstances: %v", err)
	}
	return len(list)
}

func (e *env) registerType(path, rev, schema string) {
	e.t.Helper()
	if _, err := e.h.CreateType(e.ctx, cairn.Type{Path: path, Revision: rev, JSONSchema: json.RawMessage(schema)}); err != nil {
		e.t.Fatalf("CreateType: %v", err)
	}
}

var cfgType = cairn.TypeRef{Path: "cap.type.database.postgresql.config", Revision: "0.1.0"}

const cfgSchema = `{
  "$schema": "http://json-schema.org/draft-07/schema",
  "type": "object",
  "required": ["host"],
  "properties": {"host": {"type": "string"}, "port": {"type": "integer"}}
}`

func wantCode(t *testing.T, err error, code cairn.Code) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want %s", code)
	}
	if got := cairn.ErrorCode(err); got != code {
		t.Fatalf("error code = %s, want %s (error: %v)", got, code, err)
	}
}

func wantContains(t *testing.T, err error, parts ...string) {
	t.Helper()
	for _, p := range parts {
		if err == nil || !strings.Contains(err.Error(), p) {
			t.Fatalf("error %q does not contain %q", err, p)
		}
	}
}

func jsonEq(t *testing.T, got json.RawMessage, want string) {
	t.Helper()
	if !cairn.JSONEqual(got, json.RawMessage(want)) {
		t.Fatalf("value = %s, want %s", got, want)
	}
}

func TestBuiltinBackendRegistered(t *testing.T) {
	e := newEnv(t)
	b := e.get(cairn.BuiltinBackendID)
	if !b.Backend.Abstract || b.Backend.ID != cairn.BuiltinBackendID {
		t.Errorf("backend = %+v, want abstract self", b.Backend)
	}
	if want := (cairn.TypeRef{Path: "cap.core.type.hub.storage.sqlite", Revision: "0.1.0"}); b.TypeRef != want {
		t.Errorf("typeRef = %v, want %v", b.TypeRef, want)
	}
	jsonEq(t, b.Latest.Value, `{"acceptValue":true,"contextSchema":null}`)

	// A second start on the same store registers nothing new.
	if _, err := hub.New(e.ctx, hub.Config{Store: e.st}); err != nil {
		t.Fatalf("second hub.New: %v", err)
	}
	// The built-in backend and the in-process gotemplate backend.
	if n := e.count(); n != 2 {
		t.Errorf("instances after restart = %d, want 2", n)
	}
	sb, err := e.h.StorageBackend(e.ctx, cairn.BuiltinBackendID)
	if err != nil || !sb.Abstract || !sb.AcceptValue || sb.ContextSchema != nil {
		t.Errorf("StorageBackend(builtin) = %+v, %v", sb, err)
	}
}

func TestBuiltinBackendCannotBeDeleted(t *testing.T) {
	e := newEnv(t)
	wantCode(t, e.h.DeleteInstance(e.ctx, cairn.BuiltinBackendID, ""), cairn.CodeInvalid)
	wantCode(t, e.h.DeleteType(e.ctx, e.h.BuiltinTypeRef()), cairn.CodeInvalid)
	e.get(cairn.BuiltinBackendID)
}

func TestNoOtherAbstractBackend(t *testing.T) {
	e := newEnv(t)
	_, err := e.h.CreateInstances(e.ctx, hub.CreateRequest{Instances: []hub.NewInstance{{
		TypeRef: cairn.TypeRef{Path: "cap.type.my.storage", Revision: "0.1.0"},
		Value:   json.RawMessage(`{"acceptValue":true,"contextSchema":null}`),
		Backend: &hub.BackendInput{Abstract: true},
	}}})
	wantCode(t, err, cairn.CodeInvalid)
	wantContains(t, err, "abstract")
	if n := e.count(); n != 2 { // the two backends of a fresh hub
		t.Errorf("instances = %d, want 2", n)
	}
}

func TestCreateDefaults(t *testing.T) {
	e := newEnv(t)
	out, err := e.h.CreateInstances(e.ctx, hub.CreateRequest{Instances: []hub.NewInstance{{
		TypeRef: cfgType,
		Value:   json.RawMessage(`{"host": "db"}`),
	}}})
	if err != nil {
		t.Fatal(err)
	}
	id := out[0].ID
	if got := out[0].Instance; got.ID != id || got.Seq == 0 || string(got.Latest.Value) != `{"host":"db"}` || len(got.Uses) != 1 {
		t.Errorf("Created.Instance = %+v, want the stored instance with its value, Seq and uses", got)
	}
	if out[0].Alias != id {
		t.Errorf("generated alias = %q, want the id %q", out[0].Alias, id)
	}
	inst := e.get(id)
	// The name is readable: the Type's last node and the id's last 8.
	if want := "config-" + id[28:]; inst.Namespace != "default" || inst.Name != want {
		t.Errorf("namespace/name = %s/%s, want default/%s", inst.Namespace, inst.Name, want)
	}
	if inst.Backend != (cairn.BackendRef{ID: cairn.BuiltinBackendID, Abstract: true}) {
		t.Errorf("backend = %+v", inst.Backend)
	}
	if inst.Latest.ResourceVersion != 1 || inst.Latest.CreatedBy != "tester" {
		t.Errorf("latest = %+v", inst.Latest)
	}
	jsonEq(t, inst.Latest.Value, `{"host":"db"}`)
	if !slices.Equal(inst.Uses, []string{cairn.BuiltinBackendID}) {
		t.Errorf("uses = %v, want the built-in backend", inst.Uses)
	}
	if b := e.get(cairn.BuiltinBackendID); !slices.Contains(b.UsedBy, id) {
		t.Errorf("built-in backend usedBy = %v, want it to contain %s", b.UsedBy, id)
	}
}

func TestCreateBatchWithRelations(t *testing.T) {
	e := newEnv(t)
	existing := e.create(hub.NewInstance{TypeRef: cfgType, Name: "cluster", Value: json.RawMessage(`{"host":"k8s"}`)})
	out, err := e.h.CreateInstances(e.ctx, hub.CreateRequest{
		Instances: []hub.NewInstance{
			{Alias: "server", TypeRef: cfgType, Name: "server", Value: json.RawMessage(`{"host":"a"}`)},
			{Alias: "config", TypeRef: cfgType, Name: "config", Value: json.RawMessage(`{"host":"b"}`), CreatedBy: "workflow-1"},
		},
		UsesRelations: []hub.UsesRelation{{From: "config", To: "server"}, {From: "server", To: existing}},
	})
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]string{}
	for _, c := range out {
		ids[c.Alias] = c.ID
	}
	cfg, srv := e.get(ids["config"]), e.get(ids["server"])
	if !slices.Contains(cfg.Uses, srv.ID) || !slices.Contains(srv.UsedBy, cfg.ID) {
		t.Errorf("config.uses = %v, server.usedBy = %v", cfg.Uses, srv.UsedBy)
	}
	if !slices.Contains(srv.Uses, existing) {
		t.Errorf("server.uses = %v, want %s", srv.Uses, existing)
	}
	if cfg.Latest.CreatedBy != "workflow-1" {
		t.Errorf("createdBy = %q, want the given one", cfg.Latest.CreatedBy)
	}
}

func TestCreateRefusalsLeaveNothing(t *testing.T) {
	tests := []struct {
		name  string
		setup func(e *env) hub.CreateRequest
		code  cairn.Code
		msg   []string
	}{
		{
			name: "duplicate alias",
			setup: func(e *env) hub.CreateRequest {
				return hub.CreateRequest{Instances: []hub.NewInstance{
					{Alias: "a", TypeRef: cfgType}, {Alias: "a", TypeRef: cfgType},
				}}
			},
			code: cairn.CodeInvalid, msg: []string{`alias "a"`, "unique within a batch"},
		},
		{
			name: "unknown relation end",
			setup: func(e *env) hub.CreateRequest {
				return hub.CreateRequest{
					Instances:     []hub.NewInstance{{Alias: "a", TypeRef: cfgType}},
					UsesRelations: []hub.UsesRelation{{From: "a", To: "nope"}},
				}
			},
			code: cairn.CodeNotFound, msg: []string{`"nope"`},
		},
		{
			name: "missing typeRef",
			setup: func(e *env) hub.CreateRequest {
				return hub.CreateRequest{Instances: []hub.NewInstance{{Alias: "a"}}}
			},
			code: cairn.CodeInvalid, msg: []string{"typeRef/path is required", "typeRef/revision is required"},
		},
		{
			name: "bad name and label",
			setup: func(e *env) hub.CreateRequest {
				return hub.CreateRequest{Instances: []hub.NewInstance{{TypeRef: cfgType, Name: "Bad_Name", Labels: map[string]string{"a b": "c"}}}}
			},
			code: cairn.CodeInvalid, msg: []string{"metadata/name", "metadata/labels"},
		},
		{
			name: "unknown backend",
			setup: func(e *env) hub.CreateRequest {
				return hub.CreateRequest{Instances: []hub.NewInstance{{TypeRef: cfgType, Backend: &hub.BackendInput{ID: "0b4ae0fd-1d60-4ac9-a2a1-8c4a6a5b0c8f"}}}}
			},
			code: cairn.CodeNotFound, msg: []string{`failed to resolve the TypeInstance's backend "0b4ae0fd-1d60-4ac9-a2a1-8c4a6a5b0c8f"`},
		},
		{
			name: "backend breaks the storage schema",
			setup: func(e *env) hub.CreateRequest {
				bad := e.create(hub.NewInstance{TypeRef: cairn.TypeRef{Path: "cap.type.bad.storage", Revision: "0.1.0"},
					Value: json.RawMessage(`{"acceptValue":"yes","contextSchema":5}`)})
				return hub.CreateRequest{Instances: []hub.NewInstance{{TypeRef: cfgType, Backend: &hub.BackendInput{ID: bad}}}}
			},
			code: cairn.CodeInvalid,
			msg: []string{"failed to resolve the TypeInstance's backend", "spec/value must have required property 'url'",
				"spec/value/acceptValue must be boolean", "spec/value/contextSchema must be object"},
		},
		{
			name: "value for a context-only backend",
			setup: func(e *env) hub.CreateRequest {
				id, _ := e.addBackend("helm", false, `{"type":"object"}`)
				return hub.CreateRequest{Instances: []hub.NewInstance{{TypeRef: cfgType, Value: json.RawMessage(`{"host":"x"}`), Backend: &hub.BackendInput{ID: id}}}}
			},
			code: cairn.CodeInvalid, msg: []string{"input value not allowed", "External backend"},
		},
		{
			name: "context for a backend without context schema",
			setup: func(e *env) hub.CreateRequest {
				return hub.CreateRequest{Instances: []hub.NewInstance{{TypeRef: cfgType, Backend: &hub.BackendInput{Context: json.RawMessage(`{"a":1}`)}}}}
			},
			code: cairn.CodeInvalid, msg: []string{fmt.Sprintf(`External backend %q: input context not allowed`, cairn.BuiltinBackendID)},
		},
		{
			name: "context breaks the backend's context schema",
			setup: func(e *env) hub.CreateRequest {
				id, _ := e.addBackend("vault", true, `{"type":"object","required":["path"],"properties":{"provider":{"type":"string"}}}`)
				return hub.CreateRequest{Instances: []hub.NewInstance{{TypeRef: cfgType, Value: json.RawMessage(`{"host":"x"}`),
					Backend: &hub.BackendInput{ID: id, Context: json.RawMessage(`{"provider":1}`)}}}}
			},
			code: cairn.CodeInvalid, msg: []string{"invalid input:", "context/provider must be string", "context must have required property 'path'"},
		},
		{
			name: "required context missing",
			setup: func(e *env) hub.CreateRequest {
				id, _ := e.addBackend("vault2", true, `{"type":"object","required":["path"]}`)
				return hub.CreateRequest{Instances: []hub.NewInstance{{TypeRef: cfgType, Value: json.RawMessage(`{"host":"x"}`), Backend: &hub.BackendInput{ID: id}}}}
			},
			code: cairn.CodeInvalid, msg: []string{"context must have required property 'path'"},
		},
		{
			name: "value breaks the Type's schema",
			setup: func(e *env) hub.CreateRequest {
				e.registerType(cfgType.Path, cfgType.Revision, cfgSchema)
				return hub.CreateRequest{Instances: []hub.NewInstance{
					{Alias: "ok", TypeRef: cfgType, Value: json.RawMessage(`{"host":"fine"}`)},
					{Alias: "bad", TypeRef: cfgType, Value: json.RawMessage(`{"port":"x"}`)},
				}}
			},
			code: cairn.CodeInvalid, msg: []string{`TypeInstance "bad"`, "spec/value must have required property 'host'", "spec/value/port must be integer"},
		},
		{
			name: "name taken in the same Type and namespace",
			setup: func(e *env) hub.CreateRequest {
				e.create(hub.NewInstance{TypeRef: cfgType, Name: "taken"})
				return hub.CreateRequest{Instances: []hub.NewInstance{
					{Alias: "first", TypeRef: cfgType, Name: "fresh"},
					{Alias: "second", TypeRef: cfgType, Name: "taken"},
				}}
			},
			code: cairn.CodeAlreadyExists, msg: []string{"taken"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			req := tc.setup(e)
			before := e.count()
			_, err := e.h.CreateInstances(e.ctx, req)
			wantCode(t, err, tc.code)
			wantContains(t, err, tc.msg...)
			if n := e.count(); n != before {
				t.Errorf("instances = %d after a refused create, want %d", n, before)
			}
		})
	}
}

func TestUnregisteredTypesAndStrictMode(t *testing.T) {
	e := newEnv(t)
	e.create(hub.NewInstance{TypeRef: cairn.TypeRef{Path: "cap.type.unknown", Revision: "0.1.0"}, Value: json.RawMessage(`42`)})

	strict := newEnv(t, func(c *hub.Config) { c.Strict = true })
	_, err := strict.h.CreateInstances(strict.ctx, hub.CreateRequest{Instances: []hub.NewInstance{{
		TypeRef: cairn.TypeRef{Path: "cap.type.unknown", Revision: "0.1.0"}, Value: json.RawMessage(`42`)}}})
	wantCode(t, err, cairn.CodeInvalid)
	wantContains(t, err, "not registered", "strict")
}

func TestExternalBackendCreateAndRead(t *testing.T) {
	e := newEnv(t)
	bid, f := e.addBackend("secrets", true, `{"type":"object","properties":{"path":{"type":"string"}}}`)
	id := e.create(hub.NewInstance{TypeRef: cfgType, Value: json.RawMessage(`{"host":"vault"}`),
		Backend: &hub.BackendInput{ID: bid, Context: json.RawMessage(`{"path":"kv/db"}`)}})
	inst := e.get(id)
	if inst.Backend != (cairn.BackendRef{ID: bid}) {
		t.Errorf("backend = %+v", inst.Backend)
	}
	jsonEq(t, inst.Latest.Value, `{"host":"vault"}`)
	jsonEq(t, inst.Latest.Context, `{"path":"kv/db"}`)
	if len(f.called("OnCreate "+id)) != 1 || len(f.called("GetValue "+id)) != 1 {
		t.Errorf("backend calls = %v", f.calls)
	}
	// The value lives in the external backend, not in the hub's value table.
	if _, err := e.st.Value(e.ctx, id, 1); !cairn.HasCode(err, cairn.CodeNotFound) {
		t.Errorf("hub value table has the external value: %v", err)
	}
	// A backend with users cannot be deleted.
	err := e.h.DeleteInstance(e.ctx, bid, "")
	wantCode(t, err, cairn.CodeUsedBy)
	wantContains(t, err, id)
}

func TestCreateRollsBackExternalValues(t *testing.T) {
	t.Run("second backend call fails", func(t *testing.T) {
		e := newEnv(t)
		bid, f := e.addBackend("ext", true, "")
		calls := 0
		f.failOn("OnCreate", func(string) error {
			calls++
			if calls == 2 {
				return errors.New("disk full")
			}
			return nil
		})
		before := e.count()
		_, err := e.h.CreateInstances(e.ctx, hub.CreateRequest{Instances: []hub.NewInstance{
			{Alias: "a", TypeRef: cfgType, Value: json.RawMessage(`1`), Backend: &hub.BackendInput{ID: bid}},
			{Alias: "b", TypeRef: cfgType, Value: json.RawMessage(`2`), Backend: &hub.BackendInput{ID: bid}},
		}})
		wantContains(t, err, "disk full", `External backend "`+bid+`"`)
		if n := e.count(); n != before {
			t.Errorf("instances = %d, want %d", n, before)
		}
		created := f.called("OnCreate")
		deleted := f.called("OnDelete")
		if len(deleted) != 1 || strings.TrimPrefix(deleted[0], "OnDelete ") != strings.TrimPrefix(created[0], "OnCreate ") {
			t.Errorf("OnCreate calls %v, OnDelete calls %v: want the first create undone", created, deleted)
		}
	})
	t.Run("store transaction fails after the backend stored", func(t *testing.T) {
		e := newEnv(t)
		bid, f := e.addBackend("ext", true, "")
		e.takeNameDuringNextCreate(f, "taken")
		f.failOn("OnDelete", func(string) error { return errors.New("backend gone") })
		_, err := e.h.CreateInstances(e.ctx, hub.CreateRequest{Instances: []hub.NewInstance{
			{Alias: "a", TypeRef: cfgType, Name: "taken", Value: json.RawMessage(`1`), Backend: &hub.BackendInput{ID: bid}},
		}})
		wantCode(t, err, cairn.CodeAlreadyExists)
		wantContains(t, err, "rollback externally stored values", "backend gone")
	})
	t.Run("a taken name is refused before the backend is called", func(t *testing.T) {
		e := newEnv(t)
		bid, f := e.addBackend("ext", true, "")
		held := e.create(hub.NewInstance{TypeRef: cfgType, Name: "taken", Value: json.RawMessage(`1`), Backend: &hub.BackendInput{ID: bid}})
		before := len(f.called("OnCreate"))
		_, err := e.h.CreateInstances(e.ctx, hub.CreateRequest{Instances: []hub.NewInstance{
			{Alias: "a", TypeRef: cfgType, Name: "taken", Value: json.RawMessage(`2`), Backend: &hub.BackendInput{ID: bid}},
		}})
		wantCode(t, err, cairn.CodeAlreadyExists)
		wantContains(t, err, `"`+cfgType.Path+`/default/taken" already exists`)
		if calls := f.called("OnCreate"); len(calls) != before {
			t.Errorf("OnCreate calls %v: the backend was called for a taken name", calls[before:])
		}
		jsonEq(t, e.get(held).Latest.Value, `1`)
	})
}

func TestUpdate(t *testing.T) {
	e := newEnv(t)
	e.registerType(cfgType.Path, cfgType.Revision, cfgSchema)
	bid, _ := e.addBackend("ctx", true, `{"type":"object"}`)
	id := e.create(hub.NewInstance{TypeRef: cfgType, Value: json.RawMessage(`{"host":"a"}`),
		Attributes: []cairn.AttributeRef{{Path: "cap.attribute.x", Revision: "0.1.0"}},
		Backend:    &hub.BackendInput{ID: bid, Context: json.RawMessage(`{"k":"v"}`)}})

	// Only the value: context and attributes carry over.
	out, err := e.h.UpdateInstances(e.ctx, []hub.UpdateInstance{{ID: id, Value: json.RawMessage(`{"host":"b"}`)}})
	if err != nil {
		t.Fatal(err)
	}
	if out[0].Latest.ResourceVersion != 2 {
		t.Errorf("resource version = %d, want 2", out[0].Latest.ResourceVersion)
	}
	// Only attributes: value and context carry over.
	attrs := []cairn.AttributeRef{{Path: "cap.attribute.y", Revision: "0.2.0"}}
	if _, err := e.h.UpdateInstances(e.ctx, []hub.UpdateInstance{{ID: id, Attributes: &attrs, CreatedBy: "bot"}}); err != nil {
		t.Fatal(err)
	}
	rvs, err := e.h.ResourceVersions(e.ctx, id, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(rvs) != 3 {
		t.Fatalf("resource versions = %d, want 3", len(rvs))
	}
	jsonEq(t, rvs[0].Value, `{"host":"a"}`)
	jsonEq(t, rvs[1].Value, `{"host":"b"}`)
	jsonEq(t, rvs[2].Value, `{"host":"b"}`)
	for _, rv := range rvs {
		jsonEq(t, rv.Context, `{"k":"v"}`)
	}
	if !slices.Equal(rvs[1].Attributes, []cairn.AttributeRef{{Path: "cap.attribute.x", Revision: "0.1.0"}}) || !slices.Equal(rvs[2].Attributes, attrs) {
		t.Errorf("attributes = %v / %v", rvs[1].Attributes, rvs[2].Attributes)
	}
	if rvs[2].CreatedBy != "bot" || rvs[1].CreatedBy != "tester" {
		t.Errorf("createdBy = %q, %q", rvs[1].CreatedBy, rvs[2].CreatedBy)
	}

	// An invalid value is refused and nothing changes.
	_, err = e.h.UpdateInstances(e.ctx, []hub.UpdateInstance{{ID: id, Value: json.RawMessage(`{"host":1}`)}})
	wantCode(t, err, cairn.CodeInvalid)
	wantContains(t, err, "spec/value/host must be string")
	if got := e.get(id).Latest.ResourceVersion; got != 3 {
		t.Errorf("resource version after refused update = %d, want 3", got)
	}
}

func TestUpdateRefusals(t *testing.T) {
	e := newEnv(t)
	a := e.create(hub.NewInstance{TypeRef: cfgType, Name: "a", Value: json.RawMessage(`1`)})
	b := e.create(hub.NewInstance{TypeRef: cfgType, Name: "b", Value: json.RawMessage(`1`)})
	c := e.create(hub.NewInstance{TypeRef: cfgType, Name: "c", Value: json.RawMessage(`1`)})
	if err := e.h.LockInstances(e.ctx, []string{b, c}, "owner-1"); err != nil {
		t.Fatal(err)
	}
	missing := "6f1f2c3e-0000-4000-8000-000000000000"

	_, err := e.h.UpdateInstances(e.ctx, []hub.UpdateInstance{
		{ID: a, Value: json.RawMessage(`2`)},
		{ID: b, Value: json.RawMessage(`2`)},
		{ID: missing, Value: json.RawMessage(`2`)},
		{ID: c, Value: json.RawMessage(`2`), OwnerID: "someone-else"},
	})
	wantContains(t, err,
		fmt.Sprintf(`TypeInstances with IDs "%s" were not found`, missing),
		fmt.Sprintf(`TypeInstances with IDs "%s", "%s" are locked by different owner`, b, c))
	for _, id := range []string{a, b, c} {
		if rv := e.get(id).Latest.ResourceVersion; rv != 1 {
			t.Errorf("%s resource version = %d, want 1 (all or nothing)", id, rv)
		}
	}
	// The lock owner may update.
	if _, err := e.h.UpdateInstances(e.ctx, []hub.UpdateInstance{{ID: b, OwnerID: "owner-1", Value: json.RawMessage(`3`)}}); err != nil {
		t.Fatalf("update by the lock owner: %v", err)
	}
	jsonEq(t, e.get(b).Latest.Value, `3`)
}

func TestUpdateRollsBackExternalRevisions(t *testing.T) {
	e := newEnv(t)
	bid, f := e.addBackend("ext", true, "")
	x := e.create(hub.NewInstance{TypeRef: cfgType, Name: "x", Value: json.RawMessage(`1`), Backend: &hub.BackendInput{ID: bid}})
	y := e.create(hub.NewInstance{TypeRef: cfgType, Name: "y", Value: json.RawMessage(`1`), Backend: &hub.BackendInput{ID: bid}})
	f.failOn("OnUpdate", func(id string) error {
		if id == y {
			return errors.New("quota exceeded")
		}
		return nil
	})
	_, err := e.h.UpdateInstances(e.ctx, []hub.UpdateInstance{{ID: x, Value: json.RawMessage(`2`)}, {ID: y, Value: json.RawMessage(`2`)}})
	wantContains(t, err, "quota exceeded")
	if got := f.called("OnDeleteRevision"); !slices.Equal(got, []string{"OnDeleteRevision " + x}) {
		t.Errorf("OnDeleteRevision calls = %v, want the revision of %s undone", got, x)
	}
	if rv := e.get(x).Latest.ResourceVersion; rv != 1 {
		t.Errorf("x resource version = %d, want 1", rv)
	}
	// The backend no longer holds revision 2 of x: a retry succeeds.
	f.failOn("OnUpdate", nil)
	if _, err := e.h.UpdateInstances(e.ctx, []hub.UpdateInstance{{ID: x, Value: json.RawMessage(`2`)}, {ID: y, Value: json.RawMessage(`2`)}}); err != nil {
		t.Fatalf("retry: %v", err)
	}
	jsonEq(t, e.get(x).Latest.Value, `2`)
}

func TestConcurrentUpdatesLoseNothing(t *testing.T) {
	t.Run("built-in backend", func(t *testing.T) {
		e := newEnv(t)
		concurrentUpdates(t, e, e.create(hub.NewInstance{TypeRef: cfgType, Value: json.RawMessage(`0`)}))
	})
	t.Run("external backend", func(t *testing.T) {
		e := newEnv(t)
		bid, _ := e.addBackend("ext", true, "")
		concurrentUpdates(t, e, e.create(hub.NewInstance{TypeRef: cfgType, Value: json.RawMessage(`0`), Backend: &hub.BackendInput{ID: bid}}))
	})
}

func concurrentUpdates(t *testing.T, e *env, id string) {
	const n = 16
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := 1; i <= n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := e.h.UpdateInstances(e.ctx, []hub.UpdateInstance{{ID: id, Value: json.RawMessage(fmt.Sprint(i))}})
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("concurrent update: %v", err)
		}
	}
	rvs, err := e.h.ResourceVersions(e.ctx, id, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(rvs) != n+1 {
		t.Fatalf("resource versions = %d, want %d", len(rvs), n+1)
	}
	seen := map[string]bool{}
	for i, rv := range rvs {
		if rv.ResourceVersion != i+1 {
			t.Errorf("version %d has number %d: not gapless", i, rv.ResourceVersion)
		}
		seen[string(rv.Value)] = true
	}
	for i := 1; i <= n; i++ {
		if !seen[fmt.Sprint(i)] {
			t.Errorf("the update writing %d was lost", i)
		}
	}
}

func TestDelete(t *testing.T) {
	e := newEnv(t)
	bid, f := e.addBackend("ext", true, "")
	used := e.create(hub.NewInstance{TypeRef: cfgType, Name: "used", Value: json.RawMessage(`1`), Backend: &hub.BackendInput{ID: bid}})
	out, err := e.h.CreateInstances(e.ctx, hub.CreateRequest{
		Instances:     []hub.NewInstance{{Alias: "user", TypeRef: cfgType, Name: "user"}},
		UsesRelations: []hub.UsesRelation{{From: "user", To: used}},
	})
	if err != nil {
		t.Fatal(err)
	}
	user := out[0].ID

	err = e.h.DeleteInstance(e.ctx, used, "")
	wantCode(t, err, cairn.CodeUsedBy)
	wantContains(t, err, "is used by other TypeInstances, you must first remove", `"`+user+`" (default/user)`)

	if err := e.h.LockInstances(e.ctx, []string{user}, "alice"); err != nil {
		t.Fatal(err)
	}
	err = e.h.DeleteInstance(e.ctx, user, "bob")
	wantCode(t, err, cairn.CodeLocked)
	wantContains(t, err, "locked by different owner")

	if err := e.h.DeleteInstance(e.ctx, user, "alice"); err != nil {
		t.Fatalf("delete by the lock owner: %v", err)
	}
	if _, err := e.st.Value(e.ctx, user, 1); !cairn.HasCode(err, cairn.CodeNotFound) {
		t.Errorf("built-in value of a deleted instance: %v, want NotFound", err)
	}
	if _, err := e.h.UpdateInstances(e.ctx, []hub.UpdateInstance{{ID: used, Value: json.RawMessage(`2`)}}); err != nil {
		t.Fatal(err)
	}
	if err := e.h.DeleteInstance(e.ctx, used, ""); err != nil {
		t.Fatalf("delete once unused: %v", err)
	}
	if got := f.called("OnDelete " + used); len(got) != 1 {
		t.Errorf("OnDelete calls = %v", got)
	}
	if _, err := f.Backend.GetValue(e.ctx, cairn.GetValueRequest{InstanceID: used, ResourceVersion: 2}); !cairn.HasCode(err, cairn.CodeNotFound) {
		t.Errorf("external value after delete: %v, want NotFound", err)
	}
	if _, err := e.h.ResourceVersions(e.ctx, used, false); !cairn.HasCode(err, cairn.CodeNotFound) {
		t.Errorf("resource versions after delete: %v, want NotFound", err)
	}
	wantCode(t, e.h.DeleteInstance(e.ctx, used, ""), cairn.CodeNotFound)
	// The backend has no users left and can go.
	if err := e.h.DeleteInstance(e.ctx, bid, ""); err != nil {
		t.Errorf("delete unused backend: %v", err)
	}
}

func TestLockUnlock(t *testing.T) {
	e := newEnv(t)
	a := e.create(hub.NewInstance{TypeRef: cfgType, Name: "a"})
	b := e.create(hub.NewInstance{TypeRef: cfgType, Name: "b"})
	missing := "6f1f2c3e-0000-4000-8000-000000000001"

	steps := []struct {
		name   string
		lock   bool
		ids    []string
		owner  string
		code   cairn.Code
		msg    string
		lockA  string
		lockB  string
		filter string
		// writes: the step changes a lock, so it is a change (a new
		// metadata.resourceVersion); a step that changes no lock writes
		// nothing, or a client's next replace would conflict for nothing.
		writes bool
	}{
		{name: "lock both", lock: true, ids: []string{a, b}, owner: "alice", lockA: "alice", lockB: "alice", writes: true},
		{name: "relock by the same owner", lock: true, ids: []string{a}, owner: "alice", lockA: "alice", lockB: "alice"},
		{name: "lock by another owner", lock: true, ids: []string{a}, owner: "bob", code: cairn.CodeLocked, msg: "locked by different owner", lockA: "alice", lockB: "alice"},
		{name: "unlock by another owner", ids: []string{a, b}, owner: "bob", code: cairn.CodeLocked, lockA: "alice", lockB: "alice"},
		{name: "unlock with a missing id changes nothing", ids: []string{a, missing}, owner: "alice", code: cairn.CodeNotFound, msg: `TypeInstances with IDs "` + missing + `" were not found`, lockA: "alice", lockB: "alice"},
		{name: "unlock one", ids: []string{a}, owner: "alice", lockB: "alice", writes: true},
		{name: "lock all or nothing", lock: true, ids: []string{a, b}, owner: "bob", code: cairn.CodeLocked, lockB: "alice"},
		{name: "no owner", lock: true, ids: []string{a}, code: cairn.CodeInvalid, lockB: "alice"},
		{name: "unlock the locked and the unlocked", ids: []string{a, b}, owner: "alice", writes: true},
		// As Capact's Local Hub: unlocking what nobody locked succeeds.
		{name: "unlock what nobody locked", ids: []string{a, b}, owner: "bob"},
	}
	for _, s := range steps {
		seqA, seqB := e.get(a).Seq, e.get(b).Seq
		var err error
		if s.lock {
			err = e.h.LockInstances(e.ctx, s.ids, s.owner)
		} else {
			err = e.h.UnlockInstances(e.ctx, s.ids, s.owner)
		}
		if s.code == "" && err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if s.code != "" {
			if cairn.ErrorCode(err) != s.code {
				t.Fatalf("%s: error %v, want code %s", s.name, err, s.code)
			}
			if s.msg != "" && !strings.Contains(err.Error(), s.msg) {
				t.Fatalf("%s: error %q, want %q", s.name, err, s.msg)
			}
		}
		if got := e.get(a).LockedBy; got != s.lockA {
			t.Fatalf("%s: a locked by %q, want %q", s.name, got, s.lockA)
		}
		if got := e.get(b).LockedBy; got != s.lockB {
			t.Fatalf("%s: b locked by %q, want %q", s.name, got, s.lockB)
		}
		if wrote := e.get(a).Seq != seqA || e.get(b).Seq != seqB; wrote != s.writes {
			t.Fatalf("%s: wrote a change = %v, want %v", s.name, wrote, s.writes)
		}
	}
}

func TestLockExternalRefusalUndoesStore(t *testing.T) {
	e := newEnv(t)
	bid, f := e.addBackend("ext", true, "")
	local := e.create(hub.NewInstance{TypeRef: cfgType, Name: "local"})
	ext := e.create(hub.NewInstance{TypeRef: cfgType, Name: "ext", Value: json.RawMessage(`1`), Backend: &hub.BackendInput{ID: bid}})
	f.failOn("OnLock", func(string) error { return cairn.Errorf(cairn.CodeLocked, "locked by vault-admin") })
	err := e.h.LockInstances(e.ctx, []string{local, ext}, "alice")
	wantContains(t, err, "locked by vault-admin", bid)
	for _, id := range []string{local, ext} {
		if got := e.get(id).LockedBy; got != "" {
			t.Errorf("%s locked by %q after the backend refused, want unlocked", id, got)
		}
	}
	f.failOn("OnLock", nil)
	if err := e.h.LockInstances(e.ctx, []string{local, ext}, "alice"); err != nil {
		t.Fatal(err)
	}
	if owner, err := f.Backend.GetLockedBy(e.ctx, cairn.GetLockedByRequest{InstanceID: ext}); err != nil || owner != "alice" {
		t.Errorf("backend lock = %q, %v; want alice", owner, err)
	}
	if err := e.h.UnlockInstances(e.ctx, []string{local, ext}, "alice"); err != nil {
		t.Fatal(err)
	}
	if owner, _ := f.Backend.GetLockedBy(e.ctx, cairn.GetLockedByRequest{InstanceID: ext}); owner != "" {
		t.Errorf("backend lock after unlock = %q", owner)
	}
}

func TestListFiltersAndOrder(t *testing.T) {
	e := newEnv(t)
	mk := func(path, rev, name, ns, createdBy string, lbl map[string]string, attrs ...cairn.AttributeRef) string {
		return e.create(hub.NewInstance{TypeRef: cairn.TypeRef{Path: path, Revision: rev}, Name: name, Namespace: ns,
			CreatedBy: createdBy, Labels: lbl, Attributes: attrs})
	}
	attrX := cairn.AttributeRef{Path: "cap.attribute.x", Revision: "0.1.0"}
	awsOld := mk("cap.type.aws.rds", "0.9.0", "old", "default", "alice", map[string]string{"env": "prod"})
	awsNew := mk("cap.type.aws.rds", "0.10.0", "new", "default", "bob", map[string]string{"env": "dev"}, attrX)
	awsS3 := mk("cap.type.aws.s3", "0.1.0", "bucket", "team-a", "alice", nil, attrX)
	gcp := mk("cap.type.gcp.sql", "0.1.0", "sql", "team-a", "alice", map[string]string{"env": "prod", "tier": "db"})

	tests := []struct {
		name string
		f    store.InstanceFilter
		want []string
	}{
		{"type path, revision descending", store.InstanceFilter{TypePath: "cap.type.aws.rds"}, []string{awsNew, awsOld}},
		{"type path and revision", store.InstanceFilter{TypePath: "cap.type.aws.rds", TypeRevision: "0.9.0"}, []string{awsOld}},
		{"path pattern", store.InstanceFilter{TypePath: "cap.type.aws.*"}, []string{awsNew, awsOld, awsS3}},
		{"attribute include", store.InstanceFilter{Attributes: []store.AttributeFilter{{Path: "cap.attribute.x"}}}, []string{awsNew, awsS3}},
		{"attribute exclude", store.InstanceFilter{TypePath: "cap.type.*", Attributes: []store.AttributeFilter{{Path: "cap.attribute.x", Exclude: true}}}, []string{awsOld, gcp}},
		{"attribute with another revision", store.InstanceFilter{Attributes: []store.AttributeFilter{{Path: "cap.attribute.x", Revision: "0.2.0"}}}, nil},
		{"createdBy", store.InstanceFilter{CreatedBy: "bob"}, []string{awsNew}},
		{"namespace", store.InstanceFilter{Namespace: "team-a"}, []string{awsS3, gcp}},
		{"labels", store.InstanceFilter{Labels: mustSelector(t, "env=prod,tier")}, []string{gcp}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			list, err := e.h.ListInstances(e.ctx, tc.f, false)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, i := range list {
				got = append(got, i.ID)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestTypes(t *testing.T) {
	e := newEnv(t)
	e.registerType("cap.type.database.postgresql.config", "0.1.0", cfgSchema)
	e.registerType("cap.type.database.postgresql.config", "0.2.0", cfgSchema)
	if _, err := e.h.CreateType(e.ctx, cairn.Type{Path: "cap.type.helm.storage", Revision: "0.1.0", AdditionalRefs: []string{"cap.core.type.hub.storage"}}); err != nil {
		t.Fatal(err)
	}

	_, err := e.h.CreateType(e.ctx, cairn.Type{Path: "cap.type.database.postgresql.config", Revision: "0.1.0"})
	wantCode(t, err, cairn.CodeAlreadyExists)
	_, err = e.h.CreateType(e.ctx, cairn.Type{Path: "Bad Path", Revision: "one", JSONSchema: json.RawMessage(`{"type": 5}`)})
	wantCode(t, err, cairn.CodeInvalid)
	wantContains(t, err, "path", "revision", "jsonSchema")

	// ApplyType is idempotent and refuses a changed definition.
	if _, created, err := e.h.ApplyType(e.ctx, cairn.Type{Path: "cap.type.database.postgresql.config", Revision: "0.2.0", JSONSchema: json.RawMessage(cfgSchema)}); err != nil || created {
		t.Errorf("ApplyType same = created %v, %v", created, err)
	}
	_, _, err = e.h.ApplyType(e.ctx, cairn.Type{Path: "cap.type.database.postgresql.config", Revision: "0.2.0", JSONSchema: json.RawMessage(`{"type":"string"}`)})
	wantCode(t, err, cairn.CodeConflict)

	byPrefix, err := e.h.ListTypes(e.ctx, store.TypeFilter{PathPrefix: "cap.type.database.*"})
	if err != nil || len(byPrefix) != 2 || byPrefix[0].Revision != "0.2.0" {
		t.Errorf("by prefix = %v, %v", byPrefix, err)
	}
	byParent, err := e.h.ListTypes(e.ctx, store.TypeFilter{Parent: "cap.core.type.hub.storage"})
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, ty := range byParent {
		paths = append(paths, ty.Path)
	}
	if !slices.Contains(paths, "cap.type.helm.storage") || !slices.Contains(paths, "cap.core.type.hub.storage.sqlite") {
		t.Errorf("by parent = %v", paths)
	}

	ref := cairn.TypeRef{Path: "cap.type.database.postgresql.config", Revision: "0.1.0"}
	id := e.create(hub.NewInstance{TypeRef: ref, Value: json.RawMessage(`{"host":"x"}`)})
	err = e.h.DeleteType(e.ctx, ref)
	wantCode(t, err, cairn.CodeUsedBy)
	if err := e.h.DeleteInstance(e.ctx, id, ""); err != nil {
		t.Fatal(err)
	}
	if err := e.h.DeleteType(e.ctx, ref); err != nil {
		t.Fatalf("delete unused Type: %v", err)
	}
	_, err = e.h.GetType(e.ctx, ref)
	wantCode(t, err, cairn.CodeNotFound)
}

func TestDraft2020Schemas(t *testing.T) {
	e := newEnv(t)
	e.registerType("cap.type.flag", "0.1.0", `{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object",
		"properties":{"variants":{"type":"array","prefixItems":[{"type":"string"}]}}}`)
	ref := cairn.TypeRef{Path: "cap.type.flag", Revision: "0.1.0"}
	e.create(hub.NewInstance{TypeRef: ref, Value: json.RawMessage(`{"variants":["on"]}`)})
	_, err := e.h.CreateInstances(e.ctx, hub.CreateRequest{Instances: []hub.NewInstance{{TypeRef: ref, Value: json.RawMessage(`{"variants":[1]}`)}}})
	wantCode(t, err, cairn.CodeInvalid)
	wantContains(t, err, "spec/value/variants/0 must be string")
}

func TestContextOnlyBackend(t *testing.T) {
	e := newEnv(t)
	bid, _ := e.addBackend("helm-release", false, `{"type":"object","required":["name","namespace"],"properties":{"name":{"type":"string"},"namespace":{"type":"string"}}}`)
	id := e.create(hub.NewInstance{TypeRef: cairn.TypeRef{Path: "cap.type.helm.chart.release", Revision: "0.1.0"},
		Backend: &hub.BackendInput{ID: bid, Context: json.RawMessage(`{"name":"mattermost","namespace":"prod"}`)}})
	inst := e.get(id)
	jsonEq(t, inst.Latest.Context, `{"name":"mattermost","namespace":"prod"}`)
	// An update with only a context; no value travels to the backend.
	if _, err := e.h.UpdateInstances(e.ctx, []hub.UpdateInstance{{ID: id, Context: json.RawMessage(`{"name":"mattermost","namespace":"staging"}`)}}); err != nil {
		t.Fatal(err)
	}
	_, err := e.h.UpdateInstances(e.ctx, []hub.UpdateInstance{{ID: id, Value: json.RawMessage(`{}`)}})
	wantContains(t, err, "input value not allowed")
	_, err = e.h.UpdateInstances(e.ctx, []hub.UpdateInstance{{ID: id, Context: json.RawMessage(`{"name":"x"}`)}})
	wantContains(t, err, "context must have required property 'namespace'")
}

func mustSelector(t *testing.T, s string) labels.Selector {
	t.Helper()
	sel, err := labels.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return sel
}

// An update given the instance its caller read (Current) is checked again
// in its transaction: a Current outdated by another write, a lock or a
// delete since it was read is refused as the store's read would have it,
// and changes nothing.
func TestUpdateWithOutdatedCurrent(t *testing.T) {
	e := newEnv(t)
	val := func(s string) json.RawMessage { return json.RawMessage(`{"host":"` + s + `"}`) }
	id := e.create(hub.NewInstance{TypeRef: cfgType, Value: val("a")})
	read := e.get(id)
	up := func(v string) error {
		_, err := e.h.UpdateInstances(e.ctx, []hub.UpdateInstance{{ID: id, IfSeq: read.Seq, Current: &read, Value: val(v)}})
		return err
	}
	if err := up("b"); err != nil {
		t.Fatalf("update with a current Current: %v", err)
	}
	// read is now outdated: the instance has a new version.
	wantCode(t, up("c"), cairn.CodeConflict)
	if got := e.get(id); got.Latest.ResourceVersion != 2 {
		t.Fatalf("after the refused update: resource version %d, want 2", got.Latest.ResourceVersion)
	}

	// Locked since it was read (read shows it unlocked, with the Seq it
	// had): refused as locked.
	read = e.get(id)
	if err := e.h.LockInstances(e.ctx, []string{id}, "someone"); err != nil {
		t.Fatal(err)
	}
	stale := read
	stale.Seq = e.get(id).Seq // even with a matching Seq, the lock is checked again
	_, err := e.h.UpdateInstances(e.ctx, []hub.UpdateInstance{{ID: id, IfSeq: stale.Seq, Current: &stale, Value: val("d")}})
	wantCode(t, err, cairn.CodeLocked)

	// Deleted since it was read: not found.
	other := e.create(hub.NewInstance{TypeRef: cfgType, Value: val("x")})
	gone := e.get(other)
	if err := e.h.DeleteInstance(e.ctx, other, ""); err != nil {
		t.Fatal(err)
	}
	_, err = e.h.UpdateInstances(e.ctx, []hub.UpdateInstance{{ID: other, IfSeq: gone.Seq, Current: &gone, Value: val("y")}})
	wantCode(t, err, cairn.CodeNotFound)
	if got := e.get(id); got.Latest.ResourceVersion != 2 {
		t.Fatalf("after the refused updates: resource version %d, want 2", got.Latest.ResourceVersion)
	}
}

// DeleteInstances deletes a set of instances all or none: one that is
// locked by someone else or used from outside the set stops the whole
// set; instances of the set that use each other go together, external
// values with them.
func TestDeleteInstances(t *testing.T) {
	e := newEnv(t)
	bid, f := e.addBackend("ext", true, "")
	ext := e.create(hub.NewInstance{TypeRef: cfgType, Name: "ext", Value: json.RawMessage(`1`), Backend: &hub.BackendInput{ID: bid}})
	out, err := e.h.CreateInstances(e.ctx, hub.CreateRequest{
		Instances:     []hub.NewInstance{{Alias: "user", TypeRef: cfgType, Name: "user"}, {Alias: "outsider", TypeRef: cfgType, Name: "outsider"}},
		UsesRelations: []hub.UsesRelation{{From: "user", To: ext}},
	})
	if err != nil {
		t.Fatal(err)
	}
	user, outsider := out[0].ID, out[1].ID
	exists := func(ids ...string) {
		t.Helper()
		found, err := e.st.GetInstances(e.ctx, ids)
		if err != nil || len(found) != len(ids) {
			t.Fatalf("after a refused delete: %d of %d instances left (%v)", len(found), len(ids), err)
		}
	}

	// ext is used by user, outside the set: nothing goes.
	err = e.h.DeleteInstances(e.ctx, []string{outsider, ext}, "")
	wantCode(t, err, cairn.CodeUsedBy)
	wantContains(t, err, `"`+ext+`" (default/ext)`, user)
	exists(outsider, ext, user)
	// Locked by someone else: nothing goes.
	if err := e.h.LockInstances(e.ctx, []string{user}, "alice"); err != nil {
		t.Fatal(err)
	}
	err = e.h.DeleteInstances(e.ctx, []string{outsider, ext, user}, "bob")
	wantCode(t, err, cairn.CodeLocked)
	exists(outsider, ext, user)
	// The built-in backend cannot go, nor anything with it.
	wantCode(t, e.h.DeleteInstances(e.ctx, []string{outsider, cairn.BuiltinBackendID}, ""), cairn.CodeInvalid)
	exists(outsider)
	if got := f.called("OnDelete " + ext); len(got) != 0 {
		t.Errorf("OnDelete calls after refusals = %v", got)
	}

	// The lock owner deletes the set: user and the instance it uses go
	// together, whatever the order given.
	if err := e.h.DeleteInstances(e.ctx, []string{ext, user, outsider}, "alice"); err != nil {
		t.Fatalf("DeleteInstances: %v", err)
	}
	if found, _ := e.st.GetInstances(e.ctx, []string{ext, user, outsider}); len(found) != 0 {
		t.Errorf("%d instances left", len(found))
	}
	if got := f.called("OnDelete " + ext); len(got) != 1 {
		t.Errorf("OnDelete calls = %v", got)
	}
	// Ids already gone are no error (a delete in between).
	if err := e.h.DeleteInstances(e.ctx, []string{ext}, ""); err != nil {
		t.Errorf("DeleteInstances of a deleted id: %v", err)
	}
}
