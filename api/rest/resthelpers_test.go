package rest_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/api/rest"
	"github.com/cairn-dev/cairn/hub"
	"github.com/cairn-dev/cairn/store/sqlite"
)

// The fixtures every REST test serves.
const (
	// flagsRD is a cup ResourceDefinition with two versions: v1alpha1 with a
	// strict schema, v1 with a loose one.
	flagsRD = `{"apiVersion": "cup.flipt.io/v1alpha1", "kind": "ResourceDefinition",
 "metadata": {"name": "flags.flipt.io"},
 "names": {"kind": "Flag", "singular": "flag", "plural": "flags", "shortNames": ["fl"]},
 "spec": {"group": "flipt.io", "versions": {
   "v1alpha1": {"type": "object", "required": ["key"], "additionalProperties": false,
     "properties": {
       "key": {"type": "string", "minLength": 1, "description": "The flag's key."},
       "enabled": {"type": "boolean"},
       "port": {"type": "integer", "minimum": 1, "maximum": 65535, "description": "A port the flag is served on."},
       "tags": {"type": "array", "items": {"type": "string", "maxLength": 3}}}},
   "v1": {"schema": {"type": "object", "properties": {"description": {"type": "string"}}}}}}}`

	// pgType is a cairn Type document (YAML) that declares REST names.
	pgType = `apiVersion: hub.cairn.dev/v1
kind: Type
metadata:
  name: cap.type.database.postgresql.config
spec:
  revision: 0.1.0
  jsonSchema:
    $schema: http://json-schema.org/draft-07/schema
    type: object
    required: [host, port]
    properties:
      host: {type: string}
      port: {type: integer, minimum: 1, maximum: 65535}
  rest:
    group: database.cairn.dev
    version: v1
    names:
      kind: PostgresConfig
      singular: postgresconfig
      plural: postgresconfigs
      shortNames: [pgc]
`

	flagsGV = "/apis/flipt.io/v1alpha1"
	hubGV   = "/apis/hub.cairn.dev/v1"
)

var flagType = cairn.TypeRef{Path: "io.flipt.flag", Revision: "1.0.0-alpha.1"}

// flagsIn is the collection of flags in a namespace.
func flagsIn(ns string) string { return flagsGV + "/namespaces/" + ns + "/flags" }

// flagPath is one flag.
func flagPath(ns, name string) string { return flagsIn(ns) + "/" + name }

// restEnv is a hub on a real SQLite file served by rest.New over real
// HTTP on loopback.
type restEnv struct {
	t       *testing.T
	ctx     context.Context
	h       *hub.Hub
	url     string
	client  *http.Client
	metrics *routeRecorder
}

type restOption func(*rest.Config)

func newRestEnv(t *testing.T, opts ...restOption) *restEnv {
	t.Helper()
	return newRestEnvWith(t, hub.Config{}, opts...)
}

// newRestEnvWith is newRestEnv with a hub configured by hc (its Store is
// the env's SQLite file).
func newRestEnvWith(t *testing.T, hc hub.Config, opts ...restOption) *restEnv {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "cairn.db"))
	if err != nil {
		t.Fatalf("open SQLite store: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	hc.Store = st
	return newRestEnvOn(t, hc, opts...)
}

// newRestEnvOn is newRestEnv serving a hub of hc, on its Store (closed by
// the caller).
func newRestEnvOn(t *testing.T, hc hub.Config, opts ...restOption) *restEnv {
	t.Helper()
	ctx := context.Background()
	h, err := hub.New(ctx, hc)
	if err != nil {
		t.Fatalf("hub.New: %v", err)
	}
	rec := &routeRecorder{}
	cfg := rest.Config{Hub: h, Metrics: rec, Version: rest.Version{Major: "1", Minor: "32", GitVersion: "v1.32.0-cairn-test", GoVersion: "go", Platform: "test/test"}}
	for _, o := range opts {
		o(&cfg)
	}
	srv := httptest.NewUnstartedServer(rest.New(cfg))
	// Watch streams end with the base context, so Close never waits on them.
	base, cancel := context.WithCancel(ctx)
	srv.Config.BaseContext = func(net.Listener) context.Context { return base }
	srv.Start()
	t.Cleanup(srv.Close)
	t.Cleanup(cancel) // runs before srv.Close
	return &restEnv{t: t, ctx: ctx, h: h, url: srv.URL, client: srv.Client(), metrics: rec}
}

// with returns e reporting to t, for use in a subtest.
func (e *restEnv) with(t *testing.T) *restEnv {
	c := *e
	c.t = t
	return &c
}

// newFlagsEnv is a restEnv with the flags ResourceDefinition registered
// through the REST API.
func newFlagsEnv(t *testing.T, opts ...restOption) *restEnv {
	t.Helper()
	e := newRestEnv(t, opts...)
	e.mustDo("POST", hubGV+"/types", "application/json", flagsRD, http.StatusCreated)
	return e
}

// routeRecorder is a rest.Metrics that keeps every observation.
type routeRecorder struct {
	mu  sync.Mutex
	obs []string
}

func (r *routeRecorder) Observe(route, method string, status int, d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.obs = append(r.obs, fmt.Sprintf("%s %s %d", method, route, status))
}

func (r *routeRecorder) seen(s string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Contains(r.obs, s)
}

type response struct {
	code   int
	header http.Header
	body   []byte
}

func (r response) String() string { return fmt.Sprintf("%d %s", r.code, r.body) }

// do sends one request; body may be a string, []byte or a value to encode
// as JSON.
func (e *restEnv) do(method, path, contentType string, body any) response {
	e.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			e.t.Fatal(err)
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(e.ctx, method, e.url+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := e.client.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatalf("%s %s: read body: %v", method, path, err)
	}
	return response{code: resp.StatusCode, header: resp.Header, body: raw}
}

// mustDo is do that fails the test unless the status code is want.
func (e *restEnv) mustDo(method, path, contentType string, body any, want int) response {
	e.t.Helper()
	r := e.do(method, path, contentType, body)
	if r.code != want {
		e.t.Fatalf("%s %s = %s, want %d", method, path, r, want)
	}
	return r
}

func (e *restEnv) get(path string) response { e.t.Helper(); return e.do("GET", path, "", nil) }

// obj is a served object, decoded loosely.
type obj struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name              string            `json:"name"`
		Namespace         string            `json:"namespace"`
		UID               string            `json:"uid"`
		ResourceVersion   string            `json:"resourceVersion"`
		Generation        int64             `json:"generation"`
		CreationTimestamp string            `json:"creationTimestamp"`
		Labels            map[string]string `json:"labels"`
		Annotations       map[string]string `json:"annotations"`
		Continue          string            `json:"continue"`
	} `json:"metadata"`
	Spec   map[string]any  `json:"spec"`
	Status map[string]any  `json:"status"`
	Items  []obj           `json:"items"`
	Raw    json.RawMessage `json:"-"`
}

func decodeObj(t *testing.T, r response) obj {
	t.Helper()
	var o obj
	if err := json.Unmarshal(r.body, &o); err != nil {
		t.Fatalf("decode %s: %v", r, err)
	}
	o.Raw = r.body
	return o
}

// flag is a Flag object to send.
func flag(name string, labels map[string]string, spec string) map[string]any {
	md := map[string]any{"name": name}
	if labels != nil {
		md["labels"] = labels
	}
	return map[string]any{"apiVersion": "flipt.io/v1alpha1", "kind": "Flag", "metadata": md, "spec": json.RawMessage(spec)}
}

// createFlag creates a flag through the API and returns it as served.
func (e *restEnv) createFlag(ns, name string, labels map[string]string, spec string) obj {
	e.t.Helper()
	return decodeObj(e.t, e.mustDo("POST", flagsIn(ns), "application/json", flag(name, labels, spec), http.StatusCreated))
}

// reasonCodes are the HTTP codes that go with each Status reason, as in
// k8s.io/apimachinery/pkg/apis/meta/v1.
var reasonCodes = map[string]int{
	"BadRequest":            400,
	"Forbidden":             403,
	"NotFound":              404,
	"MethodNotAllowed":      405,
	"AlreadyExists":         409,
	"Conflict":              409,
	"Expired":               410,
	"Gone":                  410,
	"RequestEntityTooLarge": 413,
	"UnsupportedMediaType":  415,
	"Invalid":               422,
	"InternalError":         500,
	"ServiceUnavailable":    503,
}

// wantStatus checks that r is a Kubernetes Status object for the failure
// (code, reason) whose message contains every one of msgs, and returns it.
func wantStatus(t *testing.T, r response, code int, reason string, msgs ...string) rest.Status {
	t.Helper()
	if r.code != code {
		t.Fatalf("response = %s, want %d %s", r, code, reason)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type of a Status = %q, want application/json", ct)
	}
	var wire map[string]any
	if err := json.Unmarshal(r.body, &wire); err != nil {
		t.Fatalf("Status body is not JSON: %v\n%s", err, r.body)
	}
	var st rest.Status
	if err := json.Unmarshal(r.body, &st); err != nil {
		t.Fatal(err)
	}
	if wire["kind"] != "Status" || wire["apiVersion"] != "v1" || wire["status"] != "Failure" {
		t.Errorf("Status envelope = kind %v apiVersion %v status %v, want Status v1 Failure", wire["kind"], wire["apiVersion"], wire["status"])
	}
	if _, ok := wire["metadata"].(map[string]any); !ok {
		t.Errorf("Status has no metadata object: %s", r.body)
	}
	if st.Code != code {
		t.Errorf("Status.code = %d, HTTP status %d", st.Code, code)
	}
	if st.Reason != reason {
		t.Errorf("Status.reason = %q, want %q (message %q)", st.Reason, reason, st.Message)
	}
	if c, ok := reasonCodes[st.Reason]; !ok || c != code {
		t.Errorf("reason %q does not go with code %d", st.Reason, code)
	}
	if st.Message == "" {
		t.Error("Status has no message")
	}
	for _, m := range msgs {
		if !strings.Contains(st.Message, m) {
			t.Errorf("Status message %q does not contain %q", st.Message, m)
		}
	}
	return st
}

// names lists the names of a list's items, sorted.
func names(l obj) []string {
	var out []string
	for _, it := range l.Items {
		out = append(out, it.Metadata.Name)
	}
	slices.Sort(out)
	return out
}

// event is one watch event.
type event struct {
	Type   string          `json:"type"`
	Object json.RawMessage `json:"object"`
	obj    obj
}

// watcher reads a watch stream.
type watcher struct {
	t      *testing.T
	events chan event
	done   chan error
	cancel context.CancelFunc
	code   int
}

// watch starts GET path (with watch=true added) and returns its events as
// they arrive. The stream ends with the test.
func (e *restEnv) watch(path string) *watcher {
	e.t.Helper()
	ctx, cancel := context.WithCancel(e.ctx)
	sep := "?"
	if strings.Contains(path, "?") {
		sep = "&"
	}
	req, err := http.NewRequestWithContext(ctx, "GET", e.url+path+sep+"watch=true", nil)
	if err != nil {
		e.t.Fatal(err)
	}
	resp, err := e.client.Do(req)
	if err != nil {
		cancel()
		e.t.Fatalf("watch %s: %v", path, err)
	}
	w := &watcher{t: e.t, events: make(chan event, 64), done: make(chan error, 1), cancel: cancel, code: resp.StatusCode}
	e.t.Cleanup(func() {
		cancel()
		<-w.done
	})
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		w.done <- fmt.Errorf("watch %s: %d %s", path, resp.StatusCode, body)
		close(w.events)
		return w
	}
	go func() {
		defer resp.Body.Close()
		defer close(w.events)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var ev event
			if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
				w.done <- fmt.Errorf("watch event is not JSON: %v: %s", err, sc.Bytes())
				return
			}
			_ = json.Unmarshal(ev.Object, &ev.obj)
			select {
			case w.events <- ev:
			case <-ctx.Done():
				w.done <- nil
				return
			}
		}
		w.done <- sc.Err()
	}()
	return w
}

// eventTimeout bounds the wait for one watch event.
const eventTimeout = 10 * time.Second

// next returns the next event, failing the test when none comes in time or
// the stream ends.
func (w *watcher) next() event {
	w.t.Helper()
	select {
	case ev, ok := <-w.events:
		if !ok {
			w.t.Fatal("the watch stream ended before the expected event")
		}
		return ev
	case <-time.After(eventTimeout):
		w.t.Fatalf("no watch event within %s", eventTimeout)
	}
	return event{}
}

// expect reads the next events and checks their type and object name.
func (w *watcher) expect(want ...string) []event {
	w.t.Helper()
	var got []event
	for _, x := range want {
		typ, name, _ := strings.Cut(x, " ")
		ev := w.next()
		if ev.Type != typ || ev.obj.Metadata.Name != name {
			w.t.Fatalf("event %d = %s %s, want %s", len(got), ev.Type, ev.obj.Metadata.Name, x)
		}
		got = append(got, ev)
	}
	return got
}
