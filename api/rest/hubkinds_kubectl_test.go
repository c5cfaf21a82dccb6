package rest_test

import (
	"strings"
	"testing"
)

// TestKubectlHubKinds writes cairn's own kinds (TypeInstance, Type, Policy)
// with kubectl's file commands, from files as kubectl get writes them, and
// kubectl's default validation
// (--validate=strict). Types and the policy take no PATCH, so kubectl finds
// no fieldValidation parameter for them in OpenAPI v3 and reads
// /openapi/v2; without that document every one of these commands stopped
// with "failed to download openapi" unless --validate=false was given.
// TypeInstances take PATCH (apply of a changed file, label, annotate,
// patch), and kubectl finds its parameter in v3 without falling back.
func TestKubectlHubKinds(t *testing.T) {
	kubectl := findKubectl(t)
	if testing.Short() {
		t.Skip("builds cairn and runs kubectl")
	}
	server := serveCairn(t, buildCairn(t))
	k := newKubectl(t, kubectl, server)

	k.file("type.yaml", `apiVersion: hub.cairn.dev/v1
kind: Type
metadata:
  name: cap.type.kubectl.note
spec:
  revision: 0.1.0
  jsonSchema:
    type: object
    additionalProperties: false
    properties:
      text: {type: string}
`)
	if out := k.ok("create", "-f", "type.yaml"); !strings.Contains(out, "type.hub.cairn.dev/cap.type.kubectl.note:0.1.0 created") {
		t.Errorf("create -f type.yaml = %q", out)
	}

	note := `apiVersion: hub.cairn.dev/v1
kind: TypeInstance
metadata:
  name: note
spec:
  typeRef: {path: cap.type.kubectl.note, revision: 0.1.0}
  value: {text: one}
`
	k.file("note.yaml", note)
	out := k.ok("create", "-f", "note.yaml", "-o", "jsonpath={.metadata.name}")
	id := strings.TrimSpace(out)
	if id == "" {
		t.Fatalf("create -f note.yaml printed no name")
	}

	// get -o yaml, change the value, replace: the round trip a user makes.
	served := k.ok("get", "ti", id, "-o", "yaml")
	k.file("note-v2.yaml", strings.Replace(served, "text: one", "text: two", 1))
	if out := k.ok("replace", "-f", "note-v2.yaml"); !strings.Contains(out, "typeinstance.hub.cairn.dev/"+id+" replaced") {
		t.Errorf("replace -f = %q", out)
	}
	if out := k.ok("get", "ti", id, "-o", "jsonpath={.spec.value.text}"); out != "two" {
		t.Errorf("value after replace = %q, want two", out)
	}
	// The commands that PATCH: label, annotate, patch, and apply of a
	// changed file. kubectl's field validation finds the PATCH operation
	// and its fieldValidation parameter in OpenAPI v3 and reads no v2.
	k.ok("label", "ti", id, "team=a")
	k.ok("annotate", "ti", id, "note=kept")
	k.ok("patch", "ti", id, "--type", "json", "-p", `[{"op":"replace","path":"/spec/value/text","value":"patched"}]`)
	if out := k.ok("get", "ti", id, "-o", `jsonpath={.metadata.labels.team} {.metadata.annotations.note} {.spec.value.text}`); out != "a kept patched" {
		t.Errorf("after label, annotate, patch: %q, want %q", out, "a kept patched")
	}
	// apply of the form kubectl get serves (named by id), changed.
	k.file("note-applied.yaml", strings.Replace(k.ok("get", "ti", id, "-o", "yaml"), "text: patched", "text: applied", 1))
	out, errOut, code := k.run("apply", "-f", "note-applied.yaml", "-v=8")
	if code != 0 || !strings.Contains(out, "configured") {
		t.Fatalf("apply -f of a changed TypeInstance: exit %d\n%s%s", code, out, errOut)
	}
	if strings.Contains(errOut, "falling back") {
		t.Errorf("apply -f of a TypeInstance: kubectl's field validation did not find TypeInstance's PATCH in OpenAPI v3:\n%s", errOut)
	}
	if out := k.ok("get", "ti", id, "-o", `jsonpath={.metadata.labels.team} {.spec.value.text}`); out != "a applied" {
		t.Errorf("after apply: %q, want %q", out, "a applied")
	}
	k.fails([]string{"strategic"}, "patch", "ti", id, "--type", "strategic", "-p", `{"spec":{"value":{"text":"x"}}}`)

	// replace --force deletes, then creates from the file: the served form
	// comes back under its id, with its value and labels, nothing lost.
	k.file("note-v3.yaml", strings.Replace(served, "text: one", "text: three", 1))
	if out := k.ok("replace", "--force", "-f", "note-v3.yaml"); !strings.Contains(out, "typeinstance.hub.cairn.dev/"+id+" replaced") {
		t.Errorf("replace --force -f = %q", out)
	}
	if out := k.ok("get", "ti", id, "-o", "jsonpath={.spec.value.text} {.spec.name}"); out != "three note" {
		t.Errorf("value and name after replace --force = %q, want three note", out)
	}
	// Created again while it exists: refused, as the API server does.
	k.fails([]string{"AlreadyExists", id, "already exists"}, "create", "-f", "note-v3.yaml")
	// Validation is the server's, and strict as kubectl asked.
	k.file("note-bad.yaml", strings.Replace(served, "metadata:", "metadata:\n  colour: red", 1))
	k.fails([]string{`strict decoding error: unknown field "metadata.colour"`}, "replace", "-f", "note-bad.yaml")

	// A TypeInstance's metadata.name is its id, and a field selector
	// takes it so: get --field-selector, and wait, which lists and
	// watches with fieldSelector=metadata.name=ID; spec.name selects by
	// name. explain shows the fields a TypeInstance is served with.
	if out := k.ok("get", "ti", "--field-selector", "metadata.name="+id, "-o", "name"); strings.TrimSpace(out) != "typeinstance.hub.cairn.dev/"+id {
		t.Errorf("get ti --field-selector metadata.name=%s = %q", id, out)
	}
	if out := k.ok("get", "ti", "--field-selector", "spec.name=note,spec.namespace=default", "-o", "name"); strings.TrimSpace(out) != "typeinstance.hub.cairn.dev/"+id {
		t.Errorf("get ti --field-selector spec.name=note = %q", out)
	}
	if out := k.ok("wait", "ti/"+id, "--for=jsonpath={.spec.value.text}=three", "--timeout=10s"); !strings.Contains(out, "condition met") {
		t.Errorf("wait ti/%s --for=jsonpath = %q", id, out)
	}
	if out := k.ok("explain", "ti.spec.typeRef"); !strings.Contains(out, "path") || !strings.Contains(out, "revision") {
		t.Errorf("explain ti.spec.typeRef = %q", out)
	}
	if out := k.ok("explain", "ti", "--recursive"); !strings.Contains(out, "resourceVersion\t<integer>") || !strings.Contains(out, "typeRef\t<Object>") {
		t.Errorf("explain ti --recursive:\n%s", out)
	}
	// Types and Backends are explained with their own fields, not with a
	// served instance's status (typeRef, backend, lockedBy, uses, ...).
	if out := k.ok("explain", "types.spec"); !strings.Contains(out, "revision\t<string>") || !strings.Contains(out, "jsonSchema\t<Object>") {
		t.Errorf("explain types.spec:\n%s", out)
	}
	if out := k.ok("explain", "backends", "--recursive"); !strings.Contains(out, "acceptValue\t<boolean>") || strings.Contains(out, "lockedBy") {
		t.Errorf("explain backends --recursive:\n%s", out)
	}
	k.fails([]string{`field "status" does not exist`}, "explain", "types.status")

	// A Type as kubectl gets it is created again from that file (another
	// hub, or after a delete): named <path>:<revision>, with a timestamp.
	k.file("note-type.yaml", k.ok("get", "type", "cap.type.kubectl.note:0.1.0", "-o", "yaml"))
	if out := k.ok("delete", "ti", id, "--wait", "--timeout=10s"); !strings.Contains(out, `"`+id+`" deleted`) {
		t.Errorf("delete ti %s --wait = %q", id, out)
	}
	k.ok("delete", "type", "cap.type.kubectl.note:0.1.0")
	if out := k.ok("create", "-f", "note-type.yaml"); !strings.Contains(out, "type.hub.cairn.dev/cap.type.kubectl.note:0.1.0 created") {
		t.Errorf("create -f of a served Type = %q", out)
	}

	policy := k.ok("get", "policy", "default", "-o", "yaml")
	k.file("policy.yaml", policy)
	if out := k.ok("replace", "-f", "policy.yaml"); !strings.Contains(out, "policy.hub.cairn.dev/default replaced") {
		t.Errorf("replace -f policy.yaml = %q", out)
	}
}
