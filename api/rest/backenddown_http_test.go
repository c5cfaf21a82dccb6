package rest_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/api/rest"
	"github.com/cairn-dev/cairn/backend/file"
	grpcbackend "github.com/cairn-dev/cairn/backend/grpc"
	"github.com/cairn-dev/cairn/hub"
	"github.com/cairn-dev/cairn/sdk/storagebackend"
)

// portsType is a kind with a printer column on its value (.spec.port):
// its table needs the values.
const portsType = `apiVersion: hub.cairn.dev/v1
kind: Type
metadata:
  name: cap.type.test.port
spec:
  revision: 0.1.0
  jsonSchema: {type: object, properties: {port: {type: integer}}}
  rest:
    group: ports.cairn.dev
    version: v1
    names: {kind: Port, singular: port, plural: ports}
    additionalPrinterColumns:
    - {name: Port, type: integer, jsonPath: .spec.port}
`

// downEnv is a restEnv whose hub reaches external backends over gRPC, with
// the file backend registered (as "files") and then stopped: flag a and
// port p1 are in the built-in backend, flag b and port p2 in the stopped
// one.
type downEnv struct {
	*restEnv
	backendID string
	b         obj // flag b
}

func newDownEnv(t *testing.T) *downEnv {
	t.Helper()
	e := newGRPCRestEnv(t)
	e.mustDo("POST", hubGV+"/types", "application/yaml", portsType, http.StatusCreated)
	fb, err := file.New(file.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	id, stop := e.serveBackend(fb)
	d := &downEnv{restEnv: e, backendID: id}
	e.createFlag("default", "a", nil, `{"key": "a"}`)
	inBackend := map[string]string{rest.AnnotationBackend: d.backendID}
	fb2 := flag("b", nil, `{"key": "b"}`)
	fb2["metadata"].(map[string]any)["annotations"] = inBackend
	d.b = decodeObj(t, e.mustDo("POST", flagsIn("default"), "application/json", fb2, http.StatusCreated))
	port := func(name, spec string, ann map[string]string) {
		md := map[string]any{"name": name}
		if ann != nil {
			md["annotations"] = ann
		}
		e.mustDo("POST", "/apis/ports.cairn.dev/v1/namespaces/default/ports", "application/json",
			map[string]any{"apiVersion": "ports.cairn.dev/v1", "kind": "Port", "metadata": md, "spec": json.RawMessage(spec)}, http.StatusCreated)
	}
	port("p1", `{"port": 80}`, nil)
	port("p2", `{"port": 443}`, inBackend)
	stop()
	return d
}

// newGRPCRestEnv is a restEnv with the flags Type whose hub reaches
// external backends over gRPC, one attempt per read (a stopped backend
// refuses connections at once).
func newGRPCRestEnv(t *testing.T) *restEnv {
	t.Helper()
	backends, err := grpcbackend.New(grpcbackend.Config{Timeout: 5 * time.Second, ReadAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { backends.Close() })
	e := newRestEnvWith(t, hub.Config{Backends: backends})
	e.mustDo("POST", hubGV+"/types", "application/json", flagsRD, http.StatusCreated)
	return e
}

// serveBackend serves b over gRPC on loopback and registers it as the
// storage backend "files"; it returns the backend's id and a stop (also
// run at the test's end) that ends serving.
func (e *restEnv) serveBackend(b storagebackend.ValueBackend) (id string, stop func()) {
	e.t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = storagebackend.NewValueServer(b, storagebackend.Options{}).Serve(ctx, lis); close(done) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	e.t.Cleanup(stop)
	out, err := e.h.CreateInstances(e.ctx, hub.CreateRequest{Instances: []hub.NewInstance{{
		Alias: "files", Name: "files", Namespace: hub.SystemNamespace,
		TypeRef:    cairn.TypeRef{Path: "cap.type.cairn.storage.grpc", Revision: "0.1.0"},
		Value:      json.RawMessage(fmt.Sprintf(`{"url":"grpc://%s","acceptValue":true,"contextSchema":null}`, lis.Addr())),
		Attributes: []cairn.AttributeRef{{Path: cairn.StorageAttributePath, Revision: cairn.CoreRevision}},
	}}})
	if err != nil {
		e.t.Fatal(err)
	}
	return out[0].ID, stop
}

// getAccept is a GET with an Accept header.
func (e *restEnv) getAccept(path, accept string) response {
	e.t.Helper()
	req, err := http.NewRequestWithContext(e.ctx, "GET", e.url+path, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Accept", accept)
	resp, err := e.client.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	// A watch is read up to its first events only.
	for lines := 0; sc.Scan(); lines++ {
		b.Write(sc.Bytes())
		b.WriteByte('\n')
		if strings.Contains(path, "watch=true") && lines >= 1 {
			break
		}
	}
	return response{code: resp.StatusCode, header: resp.Header, body: []byte(b.String())}
}

const kubectlTable = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"

// tableNames are the first cells of a Table's rows.
func tableNames(t *testing.T, r response) []string {
	t.Helper()
	if r.code != http.StatusOK {
		t.Fatalf("table: %s", r)
	}
	var tab rest.Table
	if err := json.Unmarshal(r.body, &tab); err != nil {
		t.Fatalf("decode table %s: %v", r, err)
	}
	var out []string
	for _, row := range tab.Rows {
		out = append(out, fmt.Sprint(row.Cells[0]))
	}
	return out
}

// TestListsWhileAValueBackendIsDown: with an external backend down, what
// lists without values (tables whose columns do not read the value,
// ?values=false) still shows every instance, and what must show values
// fails with 503 naming the backend and the instance; it never shows an
// unreadable value as empty or leaves its instance out.
func TestListsWhileAValueBackendIsDown(t *testing.T) {
	e := newDownEnv(t)
	down := []string{`External backend "` + e.backendID + `"`, e.b.Metadata.UID, "io.flipt.flag default/b"}

	// Tables: every row, no value read.
	if got := tableNames(t, e.getAccept(flagsIn("default"), kubectlTable)); strings.Join(got, ",") != "a,b" {
		t.Errorf("kubectl get flags: rows %v, want a,b", got)
	}
	if got := tableNames(t, e.getAccept(flagsGV+"/flags", kubectlTable)); strings.Join(got, ",") != "a,b" {
		t.Errorf("kubectl get flags -A: rows %v, want a,b", got)
	}
	if got := tableNames(t, e.getAccept(hubGV+"/typeinstances?typePath=io.flipt.flag", kubectlTable)); len(got) != 2 {
		t.Errorf("kubectl get ti: rows %v, want 2", got)
	}
	// A table whose columns read values (a column on .spec) lists every
	// row: a value that cannot be read shows <unknown> (never an empty
	// cell, which would read as a value without that field), and a
	// warning, which kubectl prints, names the backend and the instance.
	for _, path := range []string{"/apis/ports.cairn.dev/v1/namespaces/default/ports", "/apis/ports.cairn.dev/v1/namespaces/default/ports?watch=true"} {
		r := e.getAccept(path, kubectlTable)
		if r.code != http.StatusOK {
			t.Fatalf("kubectl get ports, %s: %s", path, r)
		}
		cells := r.String()
		if !strings.Contains(cells, `"cells":["p1",80,`) || !strings.Contains(cells, `"cells":["p2","\u003cunknown\u003e",`) && !strings.Contains(cells, `"cells":["p2","<unknown>",`) {
			t.Errorf("kubectl get ports, %s: want p1 80 and p2 <unknown>:\n%s", path, cells)
		}
		warning := strings.Join(r.header.Values("Warning"), "\n")
		for _, want := range []string{"1 value could not be read", "cap.type.test.port default/p2", `External backend \"` + e.backendID + `\"`, "<unknown>"} {
			if !strings.Contains(warning, want) {
				t.Errorf("kubectl get ports, %s: warning %q does not say %q", path, warning, want)
			}
		}
	}
	// Whole objects cannot be shown without their values: 503.
	wantStatus(t, e.getAccept(flagsIn("default")+"?includeObject=Object", kubectlTable), 503, "ServiceUnavailable", down...)

	// JSON lists show values: 503, naming the backend and the instance,
	// saying how to list without values.
	for _, path := range []string{flagsIn("default"), flagsIn("default") + "?resourceVersion=0", flagsGV + "/flags"} {
		st := wantStatus(t, e.get(path), 503, "ServiceUnavailable", down...)
		if !strings.Contains(st.Message, "values=false") {
			t.Errorf("%s: message %q does not say how to list without values", path, st.Message)
		}
	}
	wantStatus(t, e.get(hubGV+"/typeinstances?typePath=io.flipt.flag"), 503, "ServiceUnavailable", `External backend "`+e.backendID+`"`, e.b.Metadata.UID)
	// ?values=false lists every item without its value.
	l := decodeObj(t, e.mustDo("GET", flagsIn("default")+"?values=false", "", nil, http.StatusOK))
	if strings.Join(names(l), ",") != "a,b" {
		t.Fatalf("values=false: %v", names(l))
	}
	for _, it := range l.Items {
		if it.Spec != nil || it.Status["backend"] == nil {
			t.Errorf("values=false: %s has spec %v, status %v; want no spec, a status", it.Metadata.Name, it.Spec, it.Status)
		}
	}
	var tis struct {
		Items []rest.TypeInstanceObject `json:"items"`
	}
	if err := json.Unmarshal(e.mustDo("GET", hubGV+"/typeinstances?typePath=io.flipt.flag&values=false", "", nil, http.StatusOK).body, &tis); err != nil {
		t.Fatal(err)
	}
	if len(tis.Items) != 2 || tis.Items[0].Spec.Value != nil || tis.Items[1].Spec.Value != nil || tis.Items[0].Spec.Name == "" {
		t.Errorf("typeinstances values=false: %+v", tis.Items)
	}

	// Watches as lists: a table or values=false streams every object, a
	// watch with values fails before it starts.
	w := e.getAccept(flagsIn("default")+"?watch=true", kubectlTable)
	if w.code != http.StatusOK || !strings.Contains(w.String(), `"cells":["a"`) || !strings.Contains(w.String(), `"cells":["b"`) {
		t.Errorf("kubectl get flags -w: %s", w)
	}
	w = e.getAccept(flagsIn("default")+"?watch=true&values=false", "application/json")
	if w.code != http.StatusOK || !strings.Contains(w.String(), `"name":"b"`) || strings.Contains(w.String(), `"spec"`) {
		t.Errorf("watch values=false: %s", w)
	}
	wantStatus(t, e.get(flagsIn("default")+"?watch=true"), 503, "ServiceUnavailable", down...)
}

// TestKubectlWhileAValueBackendIsDown: kubectl get (a table) lists every
// flag while the backend of one is down; -o yaml, which shows values,
// fails naming the instance and the backend, as does -o name, for which
// kubectl asks for whole objects too.
func TestKubectlWhileAValueBackendIsDown(t *testing.T) {
	kubectl := findKubectl(t)
	e := newDownEnv(t)
	k := newKubectl(t, kubectl, e.url)
	for _, args := range [][]string{{"get", "flags"}, {"get", "flags", "-o", "wide"}, {"get", "flags", "-A"}, {"get", "ti"}} {
		if out := k.ok(args...); !strings.Contains(out, "\nb ") && !strings.Contains(out, " b ") && !strings.Contains(out, "b-") {
			t.Errorf("kubectl %s lacks b:\n%s", strings.Join(args, " "), out)
		}
	}
	// A column on .spec: p2's cell shows <unknown>, kubectl prints why.
	out, stderr, _ := k.run("get", "ports")
	if !regexp.MustCompile(`(?m)^p1\s+80\s`).MatchString(out) || !regexp.MustCompile(`(?m)^p2\s+<unknown>\s`).MatchString(out) ||
		!strings.Contains(stderr, "Warning: 1 value could not be read and shows <unknown>: read the value of cap.type.test.port default/p2") {
		t.Errorf("kubectl get ports:\n%s\nstderr: %s", out, stderr)
	}
	// kubectl asks for whole objects for -o yaml, and for -o name too.
	for _, o := range []string{"yaml", "name"} {
		k.fails([]string{`External backend "` + e.backendID + `"`, "io.flipt.flag default/b", "values=false"}, "get", "flags", "-o", o)
	}
}

// TestDeleteWhileAValueBackendIsDown: a delete needs no value, and the
// hub finishes a delete whose backend is down through the intent journal
// (docs/reliability.md): DELETE answers 200 and the object is gone, where
// it was refused 503 because the handler read the value first.
func TestDeleteWhileAValueBackendIsDown(t *testing.T) {
	e := newDownEnv(t)
	e.mustDo("DELETE", flagPath("default", "b"), "", nil, http.StatusOK)
	wantStatus(t, e.get(flagPath("default", "b")), http.StatusNotFound, "NotFound")
	e.mustDo("DELETE", "/apis/ports.cairn.dev/v1/namespaces/default/ports/p2", "", nil, http.StatusOK)
	wantStatus(t, e.get("/apis/ports.cairn.dev/v1/namespaces/default/ports/p2"), http.StatusNotFound, "NotFound")
	e.mustDo("GET", flagPath("default", "a"), "", nil, http.StatusOK)
}
