package capactcompat_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/internal/cli"
	"github.com/cairn-dev/cairn/sdk/storagebackend"
)

// hub is a `cairn serve` running in-process (the CLI's own wiring: store,
// gRPC backend opener, hub, HTTP mux) on a loopback port of its own.
type hub struct {
	t       *testing.T
	graphql string // http://host:port/graphql
	http    *http.Client
}

// addrWriter watches the server's stdout for the address it serves on.
type addrWriter struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	addr chan string
	sent bool
}

var servingRE = regexp.MustCompile(`cairn serving on http://(\S+)`)

func (w *addrWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if m := servingRE.FindStringSubmatch(w.buf.String()); m != nil && !w.sent {
		w.sent = true
		w.addr <- m[1]
	}
	return len(p), nil
}

// syncBuffer collects the server's logs for a failing test to show.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// startHub runs `cairn --data-dir <tmp> serve --addr 127.0.0.1:0 [flags...]`
// until the test ends.
func startHub(t *testing.T, flags ...string) *hub {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out := &addrWriter{addr: make(chan string, 1)}
	logs := &syncBuffer{}
	args := append([]string{"--data-dir", t.TempDir(), "serve", "--allow-anonymous", "--addr", "127.0.0.1:0"}, flags...)
	done := make(chan int, 1)
	go func() {
		done <- cli.Main(ctx, args, cli.Env{Stdout: out, Stderr: logs, Getenv: func(string) string { return "" }})
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case code := <-done:
			if code != 0 {
				t.Errorf("cairn serve exited with %d; logs:\n%s", code, logs.String())
			}
		case <-time.After(30 * time.Second):
			t.Errorf("cairn serve did not stop within 30s")
		}
	})
	select {
	case addr := <-out.addr:
		return &hub{t: t, graphql: "http://" + addr + "/graphql", http: &http.Client{Timeout: 30 * time.Second}}
	case code := <-done:
		t.Fatalf("cairn serve exited with %d before serving; logs:\n%s", code, logs.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("cairn serve did not start within 30s; logs:\n%s", logs.String())
	}
	return nil
}

// run sends one GraphQL request as Capact's client does (machinebox/graphql:
// a JSON body {query, variables} POSTed to /graphql) and decodes data into
// out. It returns the first error's message, "" when there is none.
func (h *hub) run(query string, vars map[string]any, out any) string {
	h.t.Helper()
	body, err := json.Marshal(map[string]any{"query": query, "variables": vars})
	if err != nil {
		h.t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, h.graphql, bytes.NewReader(body))
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json; charset=utf-8")
	req.Header.Set("Accept", "application/json; charset=utf-8")
	resp, err := h.http.Do(req)
	if err != nil {
		h.t.Fatalf("POST %s: %v", h.graphql, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		h.t.Fatal(err)
	}
	var gr struct {
		Data   json.RawMessage `json:"data"`
		Errors []struct {
			Message string `json:"message"`
		} `json:"errors"`
	}
	if err := json.Unmarshal(raw, &gr); err != nil {
		h.t.Fatalf("answer is not a GraphQL response (HTTP %d): %s", resp.StatusCode, raw)
	}
	if len(gr.Errors) > 0 {
		return gr.Errors[0].Message
	}
	if out != nil {
		if err := json.Unmarshal(gr.Data, out); err != nil {
			h.t.Fatalf("decode %s: %v", gr.Data, err)
		}
	}
	return ""
}

// ok is run for a request that must succeed.
func (h *hub) ok(query string, vars map[string]any, out any) {
	h.t.Helper()
	if msg := h.run(query, vars, out); msg != "" {
		h.t.Fatalf("GraphQL error: %s", msg)
	}
}

// The documents of Capact's Go client for Local Hub (pkg/hub/client/local),
// with the TypeInstance fields it asks for by default.
const (
	resourceVersionFields = `
		resourceVersion
		createdBy
		metadata { attributes { path revision } }
		spec { value backend { context } }`

	typeInstanceFields = `
		id
		lockedBy
		typeRef { path revision }
		backend { id abstract }
		latestResourceVersion {` + resourceVersionFields + `}
		firstResourceVersion {` + resourceVersionFields + `}
		previousResourceVersion {` + resourceVersionFields + `}
		resourceVersions {` + resourceVersionFields + `}
		resourceVersion(resourceVersion: 1) {` + resourceVersionFields + `}`

	createTypeInstanceDoc = `mutation CreateTypeInstance($in: CreateTypeInstanceInput!) {
		createTypeInstance(in: $in)
	}`
	createTypeInstancesDoc = `mutation CreateTypeInstances($in: CreateTypeInstancesInput!) {
		createTypeInstances(in: $in) { alias id }
	}`
	updateTypeInstancesDoc = `mutation UpdateTypeInstances($in: [UpdateTypeInstancesInput]!) {
		updateTypeInstances(in: $in) {` + typeInstanceFields + `}
	}`
	findTypeInstanceDoc = `query FindTypeInstance($id: ID!) {
		typeInstance(id: $id) {` + typeInstanceFields + `
			uses { id }
			usedBy { id }
		}
	}`
	listTypeInstancesDoc = `query ListTypeInstances($filter: TypeInstanceFilter) {
		typeInstances(filter: $filter) {` + typeInstanceFields + `}
	}`
	deleteTypeInstanceDoc = `mutation DeleteTypeInstance($id: ID!) {
		deleteTypeInstance(id: $id)
	}`
	lockTypeInstancesDoc = `mutation LockTypeInstances($in: LockTypeInstancesInput!) {
		lockTypeInstances(in: $in)
	}`
	unlockTypeInstancesDoc = `mutation UnlockTypeInstances($in: UnlockTypeInstancesInput!) {
		unlockTypeInstances(in: $in)
	}`
)

// typeInstance is the part of Local Hub's TypeInstance the tests read.
type typeInstance struct {
	ID       string  `json:"id"`
	LockedBy *string `json:"lockedBy"`
	TypeRef  struct {
		Path     string `json:"path"`
		Revision string `json:"revision"`
	} `json:"typeRef"`
	Backend struct {
		ID       string `json:"id"`
		Abstract bool   `json:"abstract"`
	} `json:"backend"`
	Latest           resourceVersion   `json:"latestResourceVersion"`
	First            *resourceVersion  `json:"firstResourceVersion"`
	Previous         *resourceVersion  `json:"previousResourceVersion"`
	ResourceVersions []resourceVersion `json:"resourceVersions"`
	Uses             []struct {
		ID string `json:"id"`
	} `json:"uses"`
}

type resourceVersion struct {
	ResourceVersion int    `json:"resourceVersion"`
	CreatedBy       string `json:"createdBy"`
	Spec            struct {
		Value   json.RawMessage `json:"value"`
		Backend struct {
			Context json.RawMessage `json:"context"`
		} `json:"backend"`
	} `json:"spec"`
}

// createTypeInstance is Capact's client CreateTypeInstance: the new id.
func (h *hub) createTypeInstance(in map[string]any) (string, string) {
	h.t.Helper()
	var out struct {
		ID string `json:"createTypeInstance"`
	}
	msg := h.run(createTypeInstanceDoc, map[string]any{"in": in}, &out)
	return out.ID, msg
}

func (h *hub) find(id string) *typeInstance {
	h.t.Helper()
	var out struct {
		TI *typeInstance `json:"typeInstance"`
	}
	h.ok(findTypeInstanceDoc, map[string]any{"id": id}, &out)
	return out.TI
}

func (h *hub) list(filter map[string]any) []typeInstance {
	h.t.Helper()
	var out struct {
		TIs []typeInstance `json:"typeInstances"`
	}
	h.ok(listTypeInstancesDoc, map[string]any{"filter": filter}, &out)
	return out.TIs
}

// startDotenv serves a dotenv backend over plaintext gRPC on loopback and
// returns it with its bare host:port.
func startDotenv(t *testing.T) (*dotenv, string) {
	t.Helper()
	d := &dotenv{dir: t.TempDir()}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := storagebackend.NewValueServer(d, storagebackend.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, lis) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("dotenv backend: %v", err)
		}
	})
	return d, lis.Addr().String()
}

// contextSchema is how Capact's backends describe their context: no
// "$schema" (AJV's default, draft-07), "$id" fragments that are JSON
// pointers, which draft 2020-12 forbids.
const contextSchema = `{
	"$id": "#/properties/contextSchema",
	"type": "object",
	"properties": {
		"provider": {
			"$id": "#/properties/contextSchema/properties/name",
			"type": "string"
		}
	},
	"additionalProperties": false
}`

// registerBackend creates a storage backend TypeInstance as Capact's
// integration tests do: a TypeInstance of the backend's Type with the given
// value, in the built-in backend.
func (h *hub) registerBackend(value map[string]any) string {
	h.t.Helper()
	id, msg := h.createTypeInstance(map[string]any{
		"typeRef": map[string]any{"path": "cap.type.example.filesystem.storage", "revision": "0.1.0"},
		"value":   value,
	})
	if msg != "" {
		h.t.Fatalf("register a storage backend: %s", msg)
	}
	return id
}

func schemaDoc(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// uuidRE matches the ids Capact's tests replace by MOCKED_ID.
var uuidRE = regexp.MustCompile(`\w{8}-\w{4}-\w{4}-\w{4}-\w{12}`)

func mockIDs(s string) string { return uuidRE.ReplaceAllString(s, "MOCKED_ID") }

func jsonEq(a, b string) bool {
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}

func quoteIDs(ids ...string) string {
	q := make([]string, len(ids))
	for i, id := range ids {
		q[i] = fmt.Sprintf("%q", id)
	}
	return strings.Join(q, ", ")
}
