package capactcompat_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn"
)

const testingType = "cap.type.testing"

// fakeURL is the backend url of Capact's input validation tests: nothing
// listens there.
const fakeURL = "http://localhost:5000/fake"

func testingTypeRef() map[string]any {
	return map[string]any{"path": testingType, "revision": "0.1.0"}
}

// twice is Local Hub's answer to a create refused by an external backend:
// the refusal, then the same refusal reported by its rollback.
func twice(refusal string) string {
	return "failed to create TypeInstance: failed to create the TypeInstances: 2 error occurred:\n" +
		"\t* Error: " + refusal + "\n" +
		"\t* Error: rollback externally stored values: " + refusal
}

// TestExternalStorageInputValidation replays the input validation scenarios
// of Capact's Local Hub integration tests against `cairn serve --compat
// capact`: a backend registered with each storage spec, a create that the
// backend's rules refuse, the error text compared with ids masked.
func TestExternalStorageInputValidation(t *testing.T) {
	h := startHub(t, "--compat", "capact")
	_, addr := startDotenv(t)
	cs := schemaDoc(t, contextSchema)
	luke := map[string]any{"name": "Luke Skywalker"}

	tests := []struct {
		name    string
		spec    map[string]any
		value   any
		context any
		want    string
	}{
		{"value refused", map[string]any{"url": addr, "acceptValue": false}, luke, nil,
			twice(`External backend "MOCKED_ID": input value not allowed`)},
		{"context refused: no contextSchema", map[string]any{"url": addr, "acceptValue": false}, nil, luke,
			twice(`External backend "MOCKED_ID": input context not allowed`)},
		{"context not an object", map[string]any{"url": addr, "acceptValue": false, "contextSchema": cs}, nil, "Luke Skywalker",
			twice(`External backend "MOCKED_ID": invalid input: context must be object`)},
		{"context breaks the draft-07 schema", map[string]any{"url": addr, "acceptValue": false, "contextSchema": cs}, nil, map[string]any{"provider": true},
			twice(`External backend "MOCKED_ID": invalid input: context/provider must be string`)},
		{"value and context refused: the value first", map[string]any{"url": addr, "acceptValue": false}, luke, luke,
			twice(`External backend "MOCKED_ID": input value not allowed`)},
		{"backend without url", map[string]any{"acceptValue": false}, luke, nil,
			twice(`failed to resolve the TypeInstance's backend "MOCKED_ID": spec/value must have required property 'url'`)},
		{"backend without acceptValue", map[string]any{"url": addr}, luke, nil,
			twice(`failed to resolve the TypeInstance's backend "MOCKED_ID": spec/value must have required property 'acceptValue'`)},
		{"backend without url and acceptValue", map[string]any{"other-data": true}, luke, nil,
			twice(`failed to resolve the TypeInstance's backend "MOCKED_ID": spec/value must have required property 'url', spec/value must have required property 'acceptValue'`)},
		{"backend whose contextSchema is not an object", map[string]any{"url": addr, "acceptValue": false, "contextSchema": "yaml: true"}, luke, nil,
			twice(`failed to resolve the TypeInstance's backend "MOCKED_ID": spec/value/contextSchema must be object`)},

		// As Capact's integration tests register them: contextSchema a
		// string holding the schema's JSON (Local Hub's storage schema
		// declares a string), and a url nothing listens on, which Local Hub
		// never dials since the rules refuse first.
		{"Capact's form: value refused", map[string]any{"url": fakeURL, "acceptValue": false}, luke, nil,
			twice(`External backend "MOCKED_ID": input value not allowed`)},
		{"Capact's form: context refused", map[string]any{"url": fakeURL, "acceptValue": false}, nil, luke,
			twice(`External backend "MOCKED_ID": input context not allowed`)},
		{"Capact's form: context not an object", map[string]any{"url": fakeURL, "acceptValue": false, "contextSchema": contextSchema}, nil, "Luke Skywalker",
			twice(`External backend "MOCKED_ID": invalid input: context must be object`)},
		{"Capact's form: context breaks the schema", map[string]any{"url": fakeURL, "acceptValue": false, "contextSchema": contextSchema}, nil, map[string]any{"provider": true},
			twice(`External backend "MOCKED_ID": invalid input: context/provider must be string`)},
		{"Capact's form: value and context refused", map[string]any{"url": fakeURL, "acceptValue": false}, luke, luke,
			twice(`External backend "MOCKED_ID": input value not allowed`)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			backend := h.registerBackend(tc.spec)
			// Capact's client (gqlgen's structs, no omitempty) sends every
			// field, null when unset.
			in := map[string]any{"alias": nil, "createdBy": nil, "attributes": nil, "typeRef": testingTypeRef(),
				"value": tc.value, "backend": map[string]any{"id": backend, "context": tc.context}}
			_, msg := h.createTypeInstance(in)
			if got := mockIDs(msg); got != tc.want {
				t.Errorf("error\n%q\nwant\n%q", got, tc.want)
			}
			if !strings.Contains(msg, backend) {
				t.Errorf("error %q does not name the backend %s", msg, backend)
			}
		})
	}
	// Nothing was created by the refused requests.
	if got := h.list(map[string]any{"typeRef": testingTypeRef()}); len(got) != 0 {
		t.Errorf("%d TypeInstances of %s exist after refused creates, want 0", len(got), testingType)
	}
}

// TestBuiltinBackendByCapactPath: Capact's SDK and CLI find the built-in
// backend by cap.core.type.hub.storage.neo4j 0.1.0; with --compat capact
// cairn's built-in backend answers to it, by default it does not.
func TestBuiltinBackendByCapactPath(t *testing.T) {
	filter := map[string]any{"typeRef": map[string]any{"path": "cap.core.type.hub.storage.neo4j", "revision": "0.1.0"}}

	h := startHub(t, "--compat", "capact")
	got := h.list(filter)
	if len(got) != 1 {
		t.Fatalf("--compat capact: %d TypeInstances of the neo4j storage Type, want 1 (the built-in backend)", len(got))
	}
	b := got[0]
	if b.ID != cairn.BuiltinBackendID || b.TypeRef.Path != "cap.core.type.hub.storage.neo4j" || b.TypeRef.Revision != "0.1.0" || !b.Backend.Abstract {
		t.Errorf("built-in backend = id %s typeRef %s:%s abstract %t; want %s, cap.core.type.hub.storage.neo4j:0.1.0, abstract",
			b.ID, b.TypeRef.Path, b.TypeRef.Revision, b.Backend.Abstract, cairn.BuiltinBackendID)
	}
	// Capact's upgrade then stores values in it by id.
	id, msg := h.createTypeInstance(map[string]any{"typeRef": testingTypeRef(), "value": map[string]any{"a": 1}, "backend": map[string]any{"id": b.ID}})
	if msg != "" {
		t.Fatalf("create in the built-in backend found by its Capact Type: %s", msg)
	}
	if ti := h.find(id); ti == nil || ti.Backend.ID != cairn.BuiltinBackendID || !jsonEq(string(ti.Latest.Spec.Value), `{"a":1}`) {
		t.Errorf("created TypeInstance = %+v; want value {\"a\":1} in the built-in backend", ti)
	}

	plain := startHub(t)
	if got := plain.list(filter); len(got) != 0 {
		t.Errorf("default mode: %d TypeInstances of the neo4j storage Type, want 0 (cairn names its store)", len(got))
	}
}

// TestBuiltinBackendContext: Capact stores a context given on update to an
// instance of the built-in backend; cairn does with --compat capact and
// refuses it by default.
func TestBuiltinBackendContext(t *testing.T) {
	update := func(h *hub, id string) ([]typeInstance, string) {
		var out struct {
			TIs []typeInstance `json:"updateTypeInstances"`
		}
		msg := h.run(updateTypeInstancesDoc, map[string]any{"in": []any{map[string]any{
			"id": id, "typeInstance": map[string]any{"backend": map[string]any{"context": map[string]any{"updated": "context 1"}}},
		}}}, &out)
		return out.TIs, msg
	}

	h := startHub(t, "--compat", "capact")
	id, msg := h.createTypeInstance(map[string]any{"typeRef": testingTypeRef(), "value": map[string]any{"a": 1}})
	if msg != "" {
		t.Fatal(msg)
	}
	got, msg := update(h, id)
	if msg != "" {
		t.Fatalf("--compat capact: update with a context: %s", msg)
	}
	if len(got) != 1 || !jsonEq(string(got[0].Latest.Spec.Backend.Context), `{"updated":"context 1"}`) {
		t.Errorf("update answered %+v; want the new context", got)
	}
	ti := h.find(id)
	if ti.Latest.ResourceVersion != 2 || !jsonEq(string(ti.Latest.Spec.Backend.Context), `{"updated":"context 1"}`) || !jsonEq(string(ti.Latest.Spec.Value), `{"a":1}`) {
		t.Errorf("read back: rv %d context %s value %s; want rv 2, the context, the value carried over",
			ti.Latest.ResourceVersion, ti.Latest.Spec.Backend.Context, ti.Latest.Spec.Value)
	}

	plain := startHub(t)
	id, msg = plain.createTypeInstance(map[string]any{"typeRef": testingTypeRef(), "value": map[string]any{"a": 1}})
	if msg != "" {
		t.Fatal(msg)
	}
	_, msg = update(plain, id)
	want := "failed to update TypeInstances: 1 error occurred:\n\t* Error: External backend \"" + cairn.BuiltinBackendID + "\": input context not allowed"
	if msg != want {
		t.Errorf("default mode: error\n%q\nwant\n%q", msg, want)
	}
}

// TestUpdateErrors pins Local Hub's update errors in their multierror form.
func TestUpdateErrors(t *testing.T) {
	h := startHub(t, "--compat", "capact")
	var ids []string
	for range 2 {
		id, msg := h.createTypeInstance(map[string]any{"typeRef": testingTypeRef(), "value": 1})
		if msg != "" {
			t.Fatal(msg)
		}
		ids = append(ids, id)
	}
	h.ok(lockTypeInstancesDoc, map[string]any{"in": map[string]any{"ids": ids, "ownerID": "default/other"}}, nil)
	const missing = "6f0f0e47-0000-4000-8000-00000000000a"
	up := func(id string) map[string]any {
		return map[string]any{"id": id, "typeInstance": map[string]any{"value": 2}}
	}
	tests := []struct {
		name string
		in   []any
		want string
	}{
		{"locked by different owner", []any{up(ids[0]), up(ids[1])},
			"failed to update TypeInstances: 1 error occurred:\n\t* Error: TypeInstances with IDs " + quoteIDs(ids...) + " are locked by different owner"},
		{"not found", []any{up(missing)},
			"failed to update TypeInstances: 1 error occurred:\n\t* Error: TypeInstances with IDs " + quoteIDs(missing) + " were not found"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := h.run(updateTypeInstancesDoc, map[string]any{"in": tc.in}, nil); got != tc.want {
				t.Errorf("error\n%q\nwant\n%q", got, tc.want)
			}
		})
	}
}

// TestExternalStorageRoundTrip runs a TypeInstance through its life in a
// dotenv backend registered the Capact way (bare host:port, draft-07 context
// schema): create, update with a context, lock, unlock, an update rolled
// back (the backend deletes the revision it stored), delete.
func TestExternalStorageRoundTrip(t *testing.T) {
	h := startHub(t, "--compat", "capact")
	d, addr := startDotenv(t)
	// Registered as Capact's TestExternalStorage does: the context schema
	// a string holding its JSON.
	backend := h.registerBackend(map[string]any{"url": addr, "acceptValue": true, "contextSchema": contextSchema})

	// Create, as Capact's engine uploads outputs: createTypeInstances with
	// the uses relation to the backend.
	var created struct {
		Out []struct {
			Alias string `json:"alias"`
			ID    string `json:"id"`
		} `json:"createTypeInstances"`
	}
	h.ok(createTypeInstancesDoc, map[string]any{"in": map[string]any{
		"typeInstances": []any{
			map[string]any{"alias": "secret", "typeRef": testingTypeRef(), "value": map[string]any{"key": "v1"},
				"backend": map[string]any{"id": backend, "context": map[string]any{"provider": "dotenv"}}},
			map[string]any{"alias": "other", "typeRef": testingTypeRef(), "value": map[string]any{"key": "o1"},
				"backend": map[string]any{"id": backend}},
		},
		"usesRelations": []any{map[string]any{"from": "secret", "to": backend}},
	}}, &created)
	byAlias := map[string]string{}
	for _, c := range created.Out {
		byAlias[c.Alias] = c.ID
	}
	id, other := byAlias["secret"], byAlias["other"]
	if id == "" || other == "" {
		t.Fatalf("createTypeInstances answered %+v", created.Out)
	}
	ti := h.find(id)
	if ti.Backend.ID != backend || ti.Backend.Abstract || !jsonEq(string(ti.Latest.Spec.Value), `{"key":"v1"}`) ||
		!jsonEq(string(ti.Latest.Spec.Backend.Context), `{"provider":"dotenv"}`) {
		t.Fatalf("created: backend %s value %s context %s; want %s, {\"key\":\"v1\"}, {\"provider\":\"dotenv\"}",
			ti.Backend.ID, ti.Latest.Spec.Value, ti.Latest.Spec.Backend.Context, backend)
	}
	if !slices.ContainsFunc(ti.Uses, func(u struct {
		ID string `json:"id"`
	}) bool {
		return u.ID == backend
	}) {
		t.Errorf("created TypeInstance uses %v, want the backend %s", ti.Uses, backend)
	}
	if !d.called("OnCreate "+id) || !slices.Equal(d.versions(id), []int{1}) {
		t.Errorf("backend: OnCreate called %t, versions %v; want called, [1]", d.called("OnCreate "+id), d.versions(id))
	}

	// Update with a new value and context.
	h.ok(updateTypeInstancesDoc, map[string]any{"in": []any{map[string]any{"id": id, "typeInstance": map[string]any{
		"value": map[string]any{"key": "v2"}, "backend": map[string]any{"context": map[string]any{"provider": "dotenv-2"}},
	}}}}, nil)
	ti = h.find(id)
	if ti.Latest.ResourceVersion != 2 || !jsonEq(string(ti.Latest.Spec.Value), `{"key":"v2"}`) ||
		!jsonEq(string(ti.Latest.Spec.Backend.Context), `{"provider":"dotenv-2"}`) ||
		ti.First == nil || !jsonEq(string(ti.First.Spec.Value), `{"key":"v1"}`) || len(ti.ResourceVersions) != 2 {
		t.Fatalf("updated: %+v; want rv 2 with value v2 and context dotenv-2, rv 1 kept", ti)
	}
	if !slices.Equal(d.versions(id), []int{1, 2}) {
		t.Errorf("backend versions after update = %v, want [1 2]", d.versions(id))
	}

	// Lock: the backend keeps the lock, Local Hub reports it and refuses
	// updates by others.
	const owner = "default/act-1"
	h.ok(lockTypeInstancesDoc, map[string]any{"in": map[string]any{"ids": []string{id}, "ownerID": owner}}, nil)
	if ti = h.find(id); ti.LockedBy == nil || *ti.LockedBy != owner {
		t.Fatalf("lockedBy = %v, want %s", ti.LockedBy, owner)
	}
	if b, err := os.ReadFile(filepath.Join(d.dir, id, "lock")); err != nil || string(b) != owner {
		t.Errorf("backend lock file = %q, %v; want %s", b, err, owner)
	}
	msg := h.run(updateTypeInstancesDoc, map[string]any{"in": []any{map[string]any{"id": id, "typeInstance": map[string]any{"value": 3}}}}, nil)
	if want := "failed to update TypeInstances: 1 error occurred:\n\t* Error: TypeInstances with IDs " + quoteIDs(id) + " are locked by different owner"; msg != want {
		t.Errorf("update of a locked TypeInstance: error\n%q\nwant\n%q", msg, want)
	}

	// Unlock.
	h.ok(unlockTypeInstancesDoc, map[string]any{"in": map[string]any{"ids": []string{id}, "ownerID": owner}}, nil)
	if ti = h.find(id); ti.LockedBy != nil {
		t.Fatalf("lockedBy after unlock = %q, want null", *ti.LockedBy)
	}
	if _, err := os.Stat(filepath.Join(d.dir, id, "lock")); !os.IsNotExist(err) {
		t.Errorf("backend lock file after unlock: %v, want it gone", err)
	}

	// An update of two TypeInstances whose second the backend refuses: the
	// hub deletes the revision the backend stored for the first.
	msg = h.run(updateTypeInstancesDoc, map[string]any{"in": []any{
		map[string]any{"id": id, "typeInstance": map[string]any{"value": map[string]any{"key": "v3"}}},
		map[string]any{"id": other, "typeInstance": map[string]any{"value": map[string]any{"refuse": true}}},
	}}, nil)
	if !strings.HasPrefix(msg, "failed to update TypeInstances: 1 error occurred:\n\t* Error: ") || !strings.Contains(msg, "value refused on request") {
		t.Errorf("refused update: error %q", msg)
	}
	if !d.called("OnDeleteRevision " + id + " 3") {
		t.Errorf("backend calls %v: no OnDeleteRevision of %s version 3", d.log(), id)
	}
	if !slices.Equal(d.versions(id), []int{1, 2}) {
		t.Errorf("backend versions after the rollback = %v, want [1 2]", d.versions(id))
	}
	if ti = h.find(id); ti.Latest.ResourceVersion != 2 || !jsonEq(string(ti.Latest.Spec.Value), `{"key":"v2"}`) {
		t.Errorf("after the rolled back update: rv %d value %s; want rv 2, v2", ti.Latest.ResourceVersion, ti.Latest.Spec.Value)
	}

	// Delete.
	var deleted struct {
		ID string `json:"deleteTypeInstance"`
	}
	h.ok(deleteTypeInstanceDoc, map[string]any{"id": id}, &deleted)
	if deleted.ID != id || !d.called("OnDelete "+id) {
		t.Errorf("delete answered %q, backend OnDelete called %t; want %s, true", deleted.ID, d.called("OnDelete "+id), id)
	}
	if _, err := os.Stat(filepath.Join(d.dir, id)); !os.IsNotExist(err) {
		t.Errorf("backend files after delete: %v, want them gone", err)
	}
	if ti = h.find(id); ti != nil {
		t.Errorf("typeInstance(%s) after delete = %+v, want null", id, ti)
	}
	var raw json.RawMessage
	h.ok(`query { typeInstance(id: "`+other+`") { id } }`, nil, &raw)
	if !strings.Contains(string(raw), other) {
		t.Errorf("the other TypeInstance is gone: %s", raw)
	}
}

// TestDefaultModeURLs: without --compat capact a bare host:port means TLS,
// so a plaintext backend registered the Capact way is not reached (the
// error says why); http:// reaches it in every mode.
func TestDefaultModeURLs(t *testing.T) {
	h := startHub(t)
	_, addr := startDotenv(t)
	create := func(backend string) string {
		_, msg := h.createTypeInstance(map[string]any{"typeRef": testingTypeRef(), "value": map[string]any{"k": 1}, "backend": map[string]any{"id": backend}})
		return msg
	}
	bare := h.registerBackend(map[string]any{"url": addr, "acceptValue": true})
	if msg := create(bare); !strings.Contains(msg, "tls: first record does not look like a TLS handshake") {
		t.Errorf("default mode, bare host:port: error %q, want the TLS handshake failure", msg)
	}
	explicit := h.registerBackend(map[string]any{"url": "http://" + addr, "acceptValue": true})
	if msg := create(explicit); msg != "" {
		t.Errorf("default mode, http://host:port: %s", msg)
	}
}

// TestE2EMockBackend: Capact's end-to-end tests register a Helm storage
// backend at e2e-test-backend-mock-url:50051, where nothing is deployed,
// and run Actions that store TypeInstances in it. Local Hub never dials
// that url: writes, locks and deletes skip the backend and a read answers
// {"key": "<backend id>"}. cairn does the same under --compat capact; by
// default the url is a host like any other.
func TestE2EMockBackend(t *testing.T) {
	// As Capact's test/e2e/action_test.go registers it.
	helm := map[string]any{"url": "e2e-test-backend-mock-url:50051", "acceptValue": true, "contextSchema": `{
		"$id": "#/properties/contextSchema",
		"type": "object",
		"required": ["name", "namespace"],
		"properties": {
			"name": {"$id": "#/properties/contextSchema/properties/name", "type": "string"},
			"namespace": {"$id": "#/properties/contextSchema/properties/namespace", "type": "string"}
		},
		"additionalProperties": false
	}`}
	in := func(backend string) map[string]any {
		return map[string]any{"typeRef": map[string]any{"path": "cap.type.capactio.capact.validation.upload", "revision": "0.1.0"},
			"value":   map[string]any{"key": "Implementation A"},
			"backend": map[string]any{"id": backend, "context": map[string]any{"name": "release", "namespace": "default"}}}
	}

	h := startHub(t, "--compat", "capact")
	backend := h.registerBackend(helm)
	id, msg := h.createTypeInstance(in(backend))
	if msg != "" {
		t.Fatalf("--compat capact: create in the mock backend: %s", msg)
	}
	ti := h.find(id)
	if ti == nil || ti.Backend.ID != backend || ti.Backend.Abstract || !jsonEq(string(ti.Latest.Spec.Value), `{"key":"`+backend+`"}`) {
		t.Fatalf("read back = %+v; want the value Local Hub gives for its mock backend, {\"key\": %q}", ti, backend)
	}
	h.ok(updateTypeInstancesDoc, map[string]any{"in": []any{map[string]any{"id": id, "typeInstance": map[string]any{"value": map[string]any{"key": "B"}}}}}, nil)
	h.ok(lockTypeInstancesDoc, map[string]any{"in": map[string]any{"ids": []string{id}, "ownerID": "action"}}, nil)
	h.ok(unlockTypeInstancesDoc, map[string]any{"in": map[string]any{"ids": []string{id}, "ownerID": "action"}}, nil)
	if ti := h.find(id); ti.Latest.ResourceVersion != 2 || ti.LockedBy != nil || !jsonEq(string(ti.Latest.Spec.Value), `{"key":"`+backend+`"}`) {
		t.Errorf("after update, lock and unlock: rv %d lockedBy %v value %s", ti.Latest.ResourceVersion, ti.LockedBy, ti.Latest.Spec.Value)
	}
	h.ok(deleteTypeInstanceDoc, map[string]any{"id": id}, nil)
	// The hub's rules still hold: the context is checked against the schema.
	if _, msg := h.createTypeInstance(map[string]any{"typeRef": testingTypeRef(), "value": map[string]any{"a": 1},
		"backend": map[string]any{"id": backend, "context": map[string]any{"name": "x"}}}); !strings.Contains(msg, "namespace") {
		t.Errorf("a context the schema refuses: %q, want the refusal naming namespace", msg)
	}

	plain := startHub(t, "--backend-timeout", "2s")
	backend = plain.registerBackend(helm)
	if _, msg := plain.createTypeInstance(in(backend)); !strings.Contains(msg, "e2e-test-backend-mock-url:50051") {
		t.Errorf("default mode: create = %q; want the backend's url unreachable", msg)
	}
}
