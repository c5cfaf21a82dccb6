package rest_test

import (
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"
)

// tablesRD declares printer columns (one for -o wide only) and a category.
const tablesRD = `{"apiVersion": "cup.flipt.io/v1alpha1", "kind": "ResourceDefinition",
 "metadata": {"name": "flags.flipt.io"},
 "names": {"kind": "Flag", "singular": "flag", "plural": "flags", "shortNames": ["fl"], "categories": ["toggles"]},
 "spec": {"group": "flipt.io", "versions": {"v1alpha1": {
   "schema": {"type": "object", "properties": {"key": {"type": "string"}, "enabled": {"type": "boolean"}, "port": {"type": "integer"}}},
   "additionalPrinterColumns": [
     {"name": "Enabled", "type": "boolean", "jsonPath": ".spec.enabled"},
     {"name": "Port", "type": "integer", "jsonPath": ".spec.port"},
     {"name": "Key", "type": "string", "jsonPath": ".spec.key", "priority": 1}]}}}}`

func header(out string) []string {
	first, _, _ := strings.Cut(out, "\n")
	return strings.Fields(first)
}

// TestKubectlTables drives kubectl get against server-side Tables.
func TestKubectlTables(t *testing.T) {
	kubectl := findKubectl(t)
	e := newRestEnv(t)
	e.mustDo("POST", hubGV+"/types", "application/json", tablesRD, http.StatusCreated)
	k := newKubectl(t, kubectl, e.url)
	k.file("flags.yaml", `apiVersion: flipt.io/v1alpha1
kind: Flag
metadata: {name: zeta}
spec: {key: z, enabled: true, port: 8080}
---
apiVersion: flipt.io/v1alpha1
kind: Flag
metadata: {name: alpha, namespace: other}
spec: {key: a, enabled: false}
---
apiVersion: flipt.io/v1alpha1
kind: Flag
metadata: {name: beta}
spec: {key: b}
`)
	k.ok("create", "-f", "flags.yaml")

	// The declared columns, in name order; empty for a missing value.
	out := k.ok("get", "fl")
	if got := strings.Join(header(out), " "); got != "NAME ENABLED PORT" {
		t.Errorf("get fl header = %q, want NAME ENABLED PORT\n%s", got, out)
	}
	if !regexp.MustCompile(`(?s)beta\s*\nzeta\s+true\s+8080`).MatchString(out) {
		t.Errorf("get fl rows:\n%s", out)
	}
	// -o wide adds the priority-1 columns: the declared one and cairn's.
	out = k.ok("get", "flags", "-o", "wide")
	if got := strings.Join(header(out), " "); got != "NAME ENABLED PORT KEY REVISION BACKEND LOCKED-BY" {
		t.Errorf("get flags -o wide header = %q\n%s", got, out)
	}
	if !regexp.MustCompile(`zeta\s+true\s+8080\s+z\s+1\s+cairn-builtin`).MatchString(out) {
		t.Errorf("get flags -o wide rows:\n%s", out)
	}
	// -A adds NAMESPACE from the rows' metadata; every namespace in order.
	out = k.ok("get", "fl", "-A")
	if !regexp.MustCompile(`(?s)default\s+beta.*default\s+zeta.*other\s+alpha`).MatchString(out) {
		t.Errorf("get fl -A:\n%s", out)
	}
	// --show-labels and -L use the row's object.
	k.ok("label", "flag", "zeta", "team=a")
	if out := k.ok("get", "fl", "-L", "team"); !regexp.MustCompile(`zeta\s+true\s+8080\s+a`).MatchString(out) {
		t.Errorf("get fl -L team:\n%s", out)
	}
	// One object, and -o name / json still get the objects themselves.
	if out := k.ok("get", "flag", "zeta"); !regexp.MustCompile(`zeta\s+true\s+8080`).MatchString(out) {
		t.Errorf("get flag zeta:\n%s", out)
	}
	if out := k.ok("get", "fl", "-o", "name"); out != "flag.flipt.io/beta\nflag.flipt.io/zeta\n" {
		t.Errorf("get fl -o name = %q, want name order", out)
	}

	// get -w prints the same columns for the listed objects and changes.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	watch := k.command(ctx, "get", "fl", "-w")
	var wout lockedBuffer
	watch.Stdout, watch.Stderr = &wout, &wout
	if err := watch.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor := func(re string) {
		t.Helper()
		for !regexp.MustCompile(re).MatchString(wout.String()) {
			if ctx.Err() != nil {
				t.Fatalf("kubectl get fl -w printed no %s:\n%s", re, wout.String())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitFor(`(?s)NAME\s+ENABLED\s+PORT.*zeta\s+true\s+8080`)
	k.ok("patch", "flag", "zeta", "--type", "merge", "-p", `{"spec":{"port":9090}}`)
	waitFor(`zeta\s+true\s+9090`)
	cancel()
	_ = watch.Wait()

	// Categories: all, cairn and the declared one.
	for _, cat := range []string{"all", "cairn"} {
		if out := k.ok("get", cat); !strings.Contains(out, "flag.flipt.io/zeta") {
			t.Errorf("get %s lacks the flags:\n%s", cat, out)
		}
	}
	if out := k.ok("get", "toggles"); !regexp.MustCompile(`zeta\s+true\s+9090`).MatchString(out) {
		t.Errorf("get toggles (the declared category) lacks the flags:\n%s", out)
	}
	if out := k.ok("get", "all"); !strings.Contains(out, "typeinstance.hub.cairn.dev/zeta") {
		t.Errorf("get all lacks the typeinstances:\n%s", out)
	}

	// TypeInstances: readable names and cairn's columns; -o wide more.
	out = k.ok("get", "ti")
	if got := strings.Join(header(out), " "); got != "NAME TYPE REVISION BACKEND LOCKED-BY AGE" {
		t.Errorf("get ti header = %q\n%s", got, out)
	}
	if !regexp.MustCompile(`(?m)^zeta\s+io\.flipt\.flag\s+3\s+cairn-builtin\s+`).MatchString(out) {
		t.Errorf("get ti rows:\n%s", out)
	}
	out = k.ok("get", "ti", "-o", "wide")
	if got := strings.Join(header(out), " "); got != "NAME TYPE REVISION BACKEND LOCKED-BY AGE NAMESPACE ALIAS TYPE-REVISION CREATED-BY ID" {
		t.Errorf("get ti -o wide header = %q\n%s", got, out)
	}
	// A TypeInstance is found by its readable name as by its id.
	var byName struct{ Metadata struct{ UID string } }
	if err := json.Unmarshal([]byte(k.ok("get", "ti", "zeta", "-o", "json")), &byName); err != nil || byName.Metadata.UID == "" {
		t.Fatalf("get ti zeta: %v", err)
	}
	if out := k.ok("get", "ti", byName.Metadata.UID, "-o", "jsonpath={.spec.name}"); out != "zeta" {
		t.Errorf("get ti <id> = %q", out)
	}

	if out := k.ok("get", "types"); !regexp.MustCompile(`io\.flipt\.flag:1\.0\.0-alpha\.1\s+Flag\s+flipt\.io/v1alpha1\s`).MatchString(out) {
		t.Errorf("get types:\n%s", out)
	}
	if out := k.ok("get", "backends"); !regexp.MustCompile(`(?m)^a36ed738-dfe7-45ec-acd1-8e44e8db893b\s+cairn-builtin\s+cap\.core\.type\.hub\.storage\.sqlite\s+true\s`).MatchString(out) {
		t.Errorf("get backends:\n%s", out)
	}

	// Namespaces.
	out = k.ok("get", "namespaces")
	if !regexp.MustCompile(`(?s)NAME\s+STATUS\s+AGE.*default\s+Active.*other\s+Active`).MatchString(out) {
		t.Errorf("get namespaces:\n%s", out)
	}
	k.ok("get", "ns", "other")
	k.fails([]string{"NotFound"}, "get", "ns", "nowhere")

	// A client that does not ask for a Table gets the list.
	if r := e.get(flagsIn("default")); !strings.Contains(string(r.body), `"kind":"FlagList"`) {
		t.Errorf("plain list = %s", r)
	}
	r := e.do("GET", flagsIn("default")+"?includeObject=Everything", "", nil)
	if r.code != http.StatusOK {
		t.Errorf("includeObject without a Table request = %s, want it ignored", r)
	}
}

// TestTableSchemaColumns: columns a Type keeps in its JSON Schema (what
// stack installation kinds declare: READY, SYNCED) are printed, then AGE.
func TestTableSchemaColumns(t *testing.T) {
	e := newRestEnv(t)
	e.mustDo("POST", hubGV+"/types", "application/yaml", `apiVersion: hub.cairn.dev/v1
kind: Type
metadata: {name: dev.cairn.stacks.env}
spec:
  revision: 1.0.0
  jsonSchema:
    type: object
    x-cairn-printer-columns:
    - {name: Ready, type: string, jsonPath: ".status.conditions[?(@.type==\"Ready\")].status"}
  rest:
    group: stacks.cairn.dev
    version: v1
    names: {kind: Env, plural: envs}
`, http.StatusCreated)
	e.mustDo("POST", "/apis/stacks.cairn.dev/v1/namespaces/default/envs", "application/json",
		`{"metadata":{"name":"dev"},"spec":{}}`, http.StatusCreated)
	e.mustDo("PUT", "/apis/stacks.cairn.dev/v1/namespaces/default/envs/dev/status", "application/json",
		`{"metadata":{"name":"dev"},"status":{"conditions":[{"type":"Ready","status":"True"}]}}`, http.StatusOK)
	req, err := http.NewRequest(http.MethodGet, e.url+"/apis/stacks.cairn.dev/v1/namespaces/default/envs", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	resp, err := e.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var tbl struct {
		ColumnDefinitions []struct{ Name string }
		Rows              []struct{ Cells []any }
	}
	if err := json.NewDecoder(resp.Body).Decode(&tbl); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range tbl.ColumnDefinitions {
		names = append(names, c.Name)
	}
	if got := strings.Join(names, ","); !strings.HasPrefix(got, "Name,Ready,Age") {
		t.Errorf("columns = %s, want Name,Ready,Age first", got)
	}
	if len(tbl.Rows) != 1 || tbl.Rows[0].Cells[1] != "True" {
		t.Errorf("rows = %+v, want dev with Ready True", tbl.Rows)
	}
}
