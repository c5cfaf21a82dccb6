package rest_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/api/rest"
	stackctl "github.com/cairn-dev/cairn/controller/stack"
	"github.com/cairn-dev/cairn/stack"
)

func TestStatusSubresource(t *testing.T) {
	e := newFlagsEnv(t)
	e.createFlag("default", "f1", nil, `{"key":"f1"}`)
	path := flagPath("default", "f1")

	// PUT of the resource ignores status, as Kubernetes does.
	o := decodeObj(t, e.get(path))
	body := map[string]any{"apiVersion": "flipt.io/v1alpha1", "kind": "Flag", "metadata": map[string]any{"name": "f1"},
		"spec": map[string]any{"key": "f1", "enabled": true}, "status": map[string]any{"phase": "ignored"}}
	e.mustDo("PUT", path, "application/json", body, http.StatusOK)
	if o2 := decodeObj(t, e.get(path)); o2.Status["phase"] != nil || o2.Status["typeRef"] == nil {
		t.Fatalf("PUT of the resource wrote status: %v", o2.Status)
	}

	// PUT .../status writes the status, keeps the spec and the hub's keys.
	body["status"] = map[string]any{"conditions": []any{map[string]any{"type": "Ready", "status": "False"}}, "typeRef": map[string]any{"path": "forged"}}
	body["spec"] = map[string]any{"key": "changed"}
	r := e.mustDo("PUT", path+"/status", "application/json", body, http.StatusOK)
	got := decodeObj(t, r)
	if got.Spec["key"] != "f1" {
		t.Errorf("status PUT changed the spec: %v", got.Spec)
	}
	tr, _ := got.Status["typeRef"].(map[string]any)
	if tr["path"] != "io.flipt.flag" || got.Status["conditions"] == nil {
		t.Errorf("status after PUT = %v", got.Status)
	}
	if got.Metadata.Generation != o.Metadata.Generation+1 {
		t.Errorf("generation %d: a status write must not add a resource version (was %d, one spec PUT since)", got.Metadata.Generation, o.Metadata.Generation)
	}

	// PATCH merge and JSON patch on the status subresource.
	e.mustDo("PATCH", path+"/status", "application/merge-patch+json", `{"status":{"observedGeneration":2}}`, http.StatusOK)
	e.mustDo("PATCH", path+"/status", "application/json-patch+json", `[{"op":"replace","path":"/status/conditions/0/status","value":"True"}]`, http.StatusOK)
	got = decodeObj(t, e.get(path+"/status"))
	conds, _ := got.Status["conditions"].([]any)
	if len(conds) != 1 || conds[0].(map[string]any)["status"] != "True" || got.Status["observedGeneration"] != float64(2) {
		t.Errorf("status after patches = %v", got.Status)
	}
	// A stale resourceVersion is a conflict.
	body["metadata"] = map[string]any{"name": "f1", "resourceVersion": o.Metadata.ResourceVersion}
	wantStatus(t, e.do("PUT", path+"/status", "application/json", body), http.StatusConflict, "Conflict")
	// An unknown subresource is not found.
	wantStatus(t, e.do("GET", path+"/scale", "", nil), http.StatusNotFound, "NotFound")
}

func repoDir(parts ...string) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(append([]string{filepath.Dir(file), "..", ".."}, parts...)...)
}

func TestStacksOverREST(t *testing.T) {
	e := newRestEnv(t)
	s, err := stack.Load(context.Background(), repoDir("controller", "stack", "testdata", "db"))
	if err != nil {
		t.Fatal(err)
	}
	archive, err := s.Archive()
	if err != nil {
		t.Fatal(err)
	}
	add := map[string]any{"apiVersion": "hub.cairn.dev/v1", "kind": "Stack", "spec": map[string]any{"archive": archive}}
	r := e.mustDo("POST", hubGV+"/stacks", "application/json", add, http.StatusCreated)
	if !strings.Contains(string(r.body), s.Digest) {
		t.Fatalf("POST stacks = %s", r)
	}
	e.mustDo("POST", hubGV+"/stacks", "application/json", add, http.StatusOK) // the same package: no change
	wantStatus(t, e.do("POST", hubGV+"/stacks", "application/json", map[string]any{"spec": map[string]any{"archive": []byte("not a tarball")}}),
		http.StatusUnprocessableEntity, "Invalid")
	if l := e.mustDo("GET", hubGV+"/stacks", "", nil, http.StatusOK); !strings.Contains(string(l.body), `"db@0.1.0"`) {
		t.Fatalf("GET stacks = %s", l)
	}
	// Every form carries when the version was added (kubectl get stacks
	// shows its AGE).
	for _, p := range []string{"/stacks", "/stacks/db", "/stacks/db@0.1.0"} {
		if b := e.mustDo("GET", hubGV+p, "", nil, http.StatusOK).body; !strings.Contains(string(b), `"creationTimestamp":"20`) {
			t.Errorf("GET %s carries no creationTimestamp: %s", p, b)
		}
	}
	if b := r.body; !strings.Contains(string(b), `"creationTimestamp":"20`) {
		t.Errorf("POST stacks carries no creationTimestamp: %s", b)
	}
	wantStatus(t, e.do("GET", hubGV+"/stacks/db@9.9.9", "", nil), http.StatusNotFound, "NotFound")
	// kubectl get stacks shows what cairn stack list shows: the version,
	// the kind and its apiVersion (-o wide: the digest, the description).
	sreq, _ := http.NewRequest("GET", e.url+hubGV+"/stacks", nil)
	sreq.Header.Set("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io,application/json")
	sresp, err := e.client.Do(sreq)
	if err != nil {
		t.Fatal(err)
	}
	var stbl rest.Table
	err = json.NewDecoder(sresp.Body).Decode(&stbl)
	sresp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	var scols []string
	for _, c := range stbl.ColumnDefinitions {
		scols = append(scols, fmt.Sprintf("%s/%d", c.Name, c.Priority))
	}
	if got, want := strings.Join(scols, " "), "Name/0 Version/0 Kind/0 API-Version/0 Age/0 Digest/1 Description/1"; got != want || len(stbl.Rows) != 1 {
		t.Fatalf("stacks table columns %s, want %s; rows %+v", got, want, stbl.Rows)
	}
	if cells := fmt.Sprint(stbl.Rows[0].Cells[:4]); cells != "[db@0.1.0 0.1.0 DB db.test.cairn.dev/v1]" {
		t.Errorf("stacks table row = %s", cells)
	}

	// An installation, reconciled once: its children name it as their
	// owner, and kubectl's Table shows READY and SYNCED.
	dbs := "/apis/db.test.cairn.dev/v1/namespaces/default/dbs"
	e.mustDo("POST", dbs, "application/json", `{"apiVersion":"db.test.cairn.dev/v1","kind":"DB","metadata":{"name":"orders"},"spec":{}}`, http.StatusCreated)
	inst := decodeObj(t, e.get(dbs+"/orders"))
	c := stackctl.New(stackctl.Config{Hub: e.h})
	if _, err := c.Reconcile(context.Background(), inst.Metadata.UID); err != nil {
		t.Fatal(err)
	}
	child := e.get("/apis/example.org/v1/namespaces/default/databases/orders-main")
	var co struct {
		Metadata struct {
			OwnerReferences []map[string]any `json:"ownerReferences"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(child.body, &co); err != nil {
		t.Fatal(err)
	}
	if len(co.Metadata.OwnerReferences) != 1 || co.Metadata.OwnerReferences[0]["uid"] != inst.Metadata.UID ||
		co.Metadata.OwnerReferences[0]["kind"] != "DB" || co.Metadata.OwnerReferences[0]["controller"] != true {
		t.Fatalf("ownerReferences = %v", co.Metadata.OwnerReferences)
	}
	req, _ := http.NewRequest("GET", e.url+dbs, nil)
	req.Header.Set("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io,application/json")
	resp, err := e.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var tbl struct {
		Kind    string `json:"kind"`
		Columns []struct {
			Name     string `json:"name"`
			Priority int    `json:"priority"`
		} `json:"columnDefinitions"`
		Rows []struct {
			Cells []any `json:"cells"`
		} `json:"rows"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&tbl); err != nil {
		t.Fatal(err)
	}
	// NAME READY SYNCED AGE by default; cairn's own columns only with -o wide.
	shown := 0
	for _, c := range tbl.Columns {
		if c.Priority == 0 {
			shown++
		}
	}
	if tbl.Kind != "Table" || shown != 4 || tbl.Columns[1].Name != "READY" || tbl.Columns[2].Name != "SYNCED" || tbl.Columns[3].Name != "Age" || len(tbl.Rows) != 1 {
		t.Fatalf("table = %+v", tbl)
	}
	// The Database has no Ready condition yet: the installation is Synced,
	// not Ready.
	if cells := tbl.Rows[0].Cells; cells[0] != "orders" || cells[1] != "False" || cells[2] != "True" {
		t.Errorf("row = %v", cells)
	}

	// kubectl get -w prints the same columns: its first event is a Table
	// with READY and SYNCED filled in.
	wreq, _ := http.NewRequestWithContext(e.ctx, "GET", e.url+dbs+"?watch=true", nil)
	wreq.Header.Set("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io,application/json")
	wresp, err := e.client.Do(wreq)
	if err != nil {
		t.Fatal(err)
	}
	first, err := bufio.NewReader(wresp.Body).ReadString('\n')
	wresp.Body.Close()
	if err != nil || !strings.Contains(first, `"name":"READY"`) || !strings.Contains(first, `"cells":["orders","False","True"`) {
		t.Errorf("kubectl get -w, first event: %v %s", err, first)
	}

	// kubectl delete --cascade=orphan asks to keep the children; cairn
	// always deletes an installation's children first, so it refuses
	// rather than delete what the caller asked to keep, and changes
	// nothing. A propagationPolicy the API server does not know is
	// refused as it refuses it.
	for _, c := range []struct{ body, query, want string }{
		{body: `{"propagationPolicy":"Orphan"}`, want: `propagationPolicy: Unsupported value: "Orphan": DB "orders" owns 2 children, which cairn deletes before it`},
		{query: "?propagationPolicy=Orphan", want: `propagationPolicy: Unsupported value: "Orphan"`},
		{body: `{"orphanDependents":true}`, want: `orphanDependents: Unsupported value: true: DB "orders" owns 2 children, which cairn deletes before it`},
		{body: `{"propagationPolicy":"Sideways"}`, want: `propagationPolicy: Unsupported value: "Sideways": supported values: "Foreground", "Background", "Orphan"`},
		{body: `{"propagationPolicy":"Orphan","orphanDependents":false}`, want: "orphanDependents and deletionPropagation cannot be both set"},
	} {
		wantStatus(t, e.do("DELETE", dbs+"/orders"+c.query, "application/json", c.body), http.StatusUnprocessableEntity, "Invalid", c.want)
	}
	wantStatus(t, e.do("DELETE", hubGV+"/typeinstances/"+inst.Metadata.UID, "application/json", `{"propagationPolicy":"Orphan"}`),
		http.StatusUnprocessableEntity, "Invalid", `TypeInstance "`+inst.Metadata.UID+`" owns 2 children`)
	wantStatus(t, e.do("DELETE", "/apis/db.test.cairn.dev/v1/namespaces/default/dbs", "application/json", `{"propagationPolicy":"Orphan"}`),
		http.StatusUnprocessableEntity, "Invalid", `DB "orders" owns 2 children, which cairn deletes before it`)
	if b := e.mustDo("GET", dbs+"/orders", "", nil, http.StatusOK).body; strings.Contains(string(b), "deletionTimestamp") {
		t.Fatalf("a refused orphan delete requested the deletion: %s", b)
	}
	e.mustDo("GET", "/apis/example.org/v1/namespaces/default/databases/orders-main", "", nil, http.StatusOK)

	// Deleting the installation over REST hands over to the controller:
	// it stays, with a deletionTimestamp, until its children are gone
	// (kubectl delete --cascade=foreground, as the API server's
	// foreground deletion).
	e.mustDo("DELETE", dbs+"/orders", "application/json", `{"propagationPolicy":"Foreground"}`, http.StatusOK)
	var pending struct {
		Metadata struct {
			DeletionTimestamp string   `json:"deletionTimestamp"`
			Finalizers        []string `json:"finalizers"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(e.mustDo("GET", dbs+"/orders", "", nil, http.StatusOK).body, &pending); err != nil {
		t.Fatal(err)
	}
	if pending.Metadata.DeletionTimestamp == "" || len(pending.Metadata.Finalizers) != 1 {
		t.Fatalf("installation being deleted: %+v", pending.Metadata)
	}
	for range 5 {
		if _, err := c.Reconcile(context.Background(), inst.Metadata.UID); err != nil {
			t.Fatal(err)
		}
	}
	wantStatus(t, e.do("GET", dbs+"/orders", "", nil), http.StatusNotFound, "NotFound")
	wantStatus(t, e.do("GET", "/apis/example.org/v1/namespaces/default/databases/orders-main", "", nil), http.StatusNotFound, "NotFound")

	// With no children there is nothing to orphan: the delete is made.
	e.mustDo("POST", dbs, "application/json", `{"apiVersion":"db.test.cairn.dev/v1","kind":"DB","metadata":{"name":"spare"},"spec":{}}`, http.StatusCreated)
	e.mustDo("DELETE", dbs+"/spare", "application/json", `{"propagationPolicy":"Orphan"}`, http.StatusOK)
	wantStatus(t, e.do("GET", dbs+"/spare", "", nil), http.StatusNotFound, "NotFound")
}
