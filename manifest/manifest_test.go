package manifest_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/hub"
	"github.com/cairn-dev/cairn/manifest"
)

const pgSchema = `{"type":"object","properties":{"port":{"type":"integer"}}}`

func TestDecodeTypes(t *testing.T) {
	want := cairn.Type{
		Path:           "cap.type.database.postgresql.config",
		Revision:       "0.1.0",
		AdditionalRefs: []string{"cap.core.type.database"},
		JSONSchema:     json.RawMessage(pgSchema),
	}
	withREST := want
	withREST.Group, withREST.Version = "example.com", "v1"
	withREST.Names = &cairn.Names{Kind: "PostgresConfig", Singular: "postgresconfig", Plural: "postgresconfigs", ShortNames: []string{"pgc"}}

	tests := []struct {
		name string
		in   string
		want cairn.Type
	}{
		{"cairn object schema", `
apiVersion: hub.cairn.dev/v1
kind: Type
metadata:
  name: cap.type.database.postgresql.config
spec:
  revision: 0.1.0
  additionalRefs: [cap.core.type.database]
  jsonSchema:
    type: object
    properties:
      port: {type: integer}
`, want},
		{"cairn spec.path and string schema", `
apiVersion: hub.cairn.dev/v1
kind: Type
spec:
  path: cap.type.database.postgresql.config
  revision: 0.1.0
  additionalRefs: [cap.core.type.database]
  jsonSchema: '` + pgSchema + `'
`, want},
		{"cairn OCF-style value wrapper and REST names", `
apiVersion: hub.cairn.dev/v1
kind: Type
metadata: {name: cap.type.database.postgresql.config}
spec:
  revision: 0.1.0
  additionalRefs: [cap.core.type.database]
  jsonSchema:
    value: |-
      ` + pgSchema + `
  rest:
    group: example.com
    version: v1
    names: {kind: PostgresConfig, singular: postgresconfig, plural: postgresconfigs, shortNames: [pgc]}
`, withREST},
		{"OCF path", `
ocfVersion: 0.0.1
revision: 0.1.0
kind: Type
metadata:
  path: cap.type.database.postgresql.config
  displayName: PostgreSQL config
  description: Defines configuration for PostgreSQL
  maintainers: [{email: dev@example.com, name: Dev}]
spec:
  additionalRefs: [cap.core.type.database]
  jsonSchema:
    value: |-
      {
        "type": "object",
        "properties": {"port": {"type": "integer"}}
      }
signature:
  och: eyJhbGciOiJSUzI1NiIsInR5cCI6IkpXVCJ9
`, want},
		{"OCF prefix and name", `
ocfVersion: 0.0.1
revision: 0.1.0
kind: Type
metadata: {prefix: cap.type.database.postgresql, name: config}
spec:
  additionalRefs: [cap.core.type.database]
  jsonSchema: {value: '` + pgSchema + `'}
`, want},
		{"JSON object", `{"apiVersion":"hub.cairn.dev/v1","kind":"Type","metadata":{"name":"cap.type.database.postgresql.config"},
"spec":{"revision":"0.1.0","additionalRefs":["cap.core.type.database"],"jsonSchema":` + pgSchema + `}}`, want},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			docs, err := manifest.Decode(strings.NewReader(tt.in), "t.yaml")
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if len(docs) != 1 || docs[0].Kind != manifest.KindType {
				t.Fatalf("got %d documents %+v, want one Type", len(docs), docs)
			}
			got := *docs[0].Type
			if !cairn.JSONEqual(got.JSONSchema, tt.want.JSONSchema) {
				t.Errorf("jsonSchema = %s, want %s", got.JSONSchema, tt.want.JSONSchema)
			}
			got.JSONSchema, tt.want.JSONSchema = nil, nil
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Type = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestDecodeInstance(t *testing.T) {
	docs, err := manifest.Decode(strings.NewReader(`
# leading comment
---
apiVersion: hub.cairn.dev/v1
kind: TypeInstance
metadata:
  name: db-config
  namespace: prod
  alias: db
  labels: {env: prod}
  annotations: {owner: team-a}
spec:
  typeRef: {path: cap.type.database.postgresql.config, revision: 0.1.0}
  value: {port: 5432, enabled: yes}
  attributes: [{path: cap.attribute.x, revision: 0.1.0}]
  backend:
    id: 3ef2e4ac-9070-4093-a3ce-142139fd4a16
    context: {name: release}
  uses: [db-server, 5f0d4c5e-5d0c-4d0e-9b7a-0c0e0b0a0d0f]
`), "i.yaml")
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	if len(docs) != 1 {
		t.Fatalf("got %d documents, want 1", len(docs))
	}
	d := docs[0]
	if d.Pos.Line != 4 || d.Pos.Index != 0 || d.Pos.Item != -1 {
		t.Errorf("Pos = %+v, want index 0, line 4", d.Pos)
	}
	in := d.Instance
	want := &manifest.Instance{
		Alias: "db", Namespace: "prod", Name: "db-config",
		TypeRef:     cairn.TypeRef{Path: "cap.type.database.postgresql.config", Revision: "0.1.0"},
		Labels:      map[string]string{"env": "prod"},
		Annotations: map[string]string{"owner": "team-a"},
		// YAML 1.1, as kubectl reads it: yes is true.
		Value:      json.RawMessage(`{"enabled":true,"port":5432}`),
		Attributes: []cairn.AttributeRef{{Path: "cap.attribute.x", Revision: "0.1.0"}},
		Backend:    &manifest.Backend{ID: "3ef2e4ac-9070-4093-a3ce-142139fd4a16", Context: json.RawMessage(`{"name":"release"}`)},
		Uses:       []string{"db-server", "5f0d4c5e-5d0c-4d0e-9b7a-0c0e0b0a0d0f"},
	}
	if !reflect.DeepEqual(in, want) {
		t.Errorf("Instance = %+v\nwant %+v", in, want)
	}

	n := in.NewInstance()
	if n.Alias != "db" || n.Backend == nil || n.Backend.ID != want.Backend.ID || string(n.Value) != string(want.Value) {
		t.Errorf("NewInstance = %+v", n)
	}
	if rels := in.UsesRelations("db"); !reflect.DeepEqual(rels, []hub.UsesRelation{{From: "db", To: "db-server"}, {From: "db", To: want.Uses[1]}}) {
		t.Errorf("UsesRelations = %+v", rels)
	}
	u := in.UpdateInstance("id-1", "owner")
	if u.ID != "id-1" || u.OwnerID != "owner" || u.Attributes == nil || len(*u.Attributes) != 1 || string(u.Context) != `{"name":"release"}` {
		t.Errorf("UpdateInstance = %+v", u)
	}
}

func TestUpdateInstanceClears(t *testing.T) {
	in := &manifest.Instance{TypeRef: cairn.TypeRef{Path: "a.b", Revision: "0.1.0"}}
	u := in.UpdateInstance("id", "")
	// Nil would mean "carry over" to the hub; the document says "none".
	if u.Labels == nil || u.Annotations == nil || u.Attributes == nil || len(*u.Attributes) != 0 {
		t.Errorf("UpdateInstance = %+v, want empty labels, annotations and attributes", u)
	}
	if u.Value != nil || u.Context != nil {
		t.Errorf("UpdateInstance = %+v, want value and context carried over", u)
	}
}

func TestDecodeMultiDocument(t *testing.T) {
	const typeDoc = `{"apiVersion":"hub.cairn.dev/v1","kind":"Type","metadata":{"name":"a.b"},"spec":{"revision":"0.1.0"}}`
	const instDoc = `{"apiVersion":"hub.cairn.dev/v1","kind":"TypeInstance","spec":{"typeRef":{"path":"a.b","revision":"0.1.0"},"value":1}}`
	tests := []struct {
		name  string
		in    string
		kinds []manifest.Kind
		lines []int
		items []int
	}{
		{"YAML stream", "apiVersion: hub.cairn.dev/v1\nkind: Type\nmetadata: {name: a.b}\nspec: {revision: 0.1.0}\n---\n---\n# empty\n---\napiVersion: hub.cairn.dev/v1\nkind: TypeInstance\nspec: {typeRef: {path: a.b, revision: 0.1.0}}\n...\n",
			[]manifest.Kind{manifest.KindType, manifest.KindTypeInstance}, []int{1, 9}, []int{-1, -1}},
		{"JSON array", "[\n" + typeDoc + ",\n" + instDoc + "\n]", []manifest.Kind{manifest.KindType, manifest.KindTypeInstance}, []int{1, 1}, []int{0, 1}},
		{"JSON stream", typeDoc + "\n\n" + instDoc, []manifest.Kind{manifest.KindType, manifest.KindTypeInstance}, []int{1, 3}, []int{-1, -1}},
		{"List", `{"apiVersion":"v1","kind":"List","items":[` + typeDoc + `,` + instDoc + `]}`, []manifest.Kind{manifest.KindType, manifest.KindTypeInstance}, []int{1, 1}, []int{0, 1}},
		{"YAML List", "apiVersion: hub.cairn.dev/v1\nkind: List\nitems:\n- " + typeDoc + "\n", []manifest.Kind{manifest.KindType}, []int{1}, []int{0}},
		{"YAML sequence", "- " + typeDoc + "\n- " + instDoc + "\n", []manifest.Kind{manifest.KindType, manifest.KindTypeInstance}, []int{1, 1}, []int{0, 1}},
		{"empty", "# nothing\n---\n", nil, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			docs, err := manifest.Decode(strings.NewReader(tt.in), "m")
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			var kinds []manifest.Kind
			var lines, items []int
			for _, d := range docs {
				kinds = append(kinds, d.Kind)
				lines = append(lines, d.Pos.Line)
				items = append(items, d.Pos.Item)
			}
			if !reflect.DeepEqual(kinds, tt.kinds) || !reflect.DeepEqual(lines, tt.lines) || !reflect.DeepEqual(items, tt.items) {
				t.Errorf("kinds %v lines %v items %v, want %v %v %v", kinds, lines, items, tt.kinds, tt.lines, tt.items)
			}
		})
	}
}

func TestDecodeErrors(t *testing.T) {
	const head = "apiVersion: hub.cairn.dev/v1\nkind: TypeInstance\n"
	tests := []struct {
		name    string
		in      string
		subject string   // the error's Subject
		causes  []string // every cause, as "<field> <message>"
		msg     string   // a fragment of the message, when there are no causes
	}{
		{"YAML syntax", "# c\n---\nb: [c\n\n", "f.yaml: document 1 (line 4)", nil, "invalid YAML: did not find expected ',' or ']'"},
		{"duplicate key", "kind: Type\nkind: Type\n", "f.yaml: document 1 (line 1)", nil, `key "kind" already set in map`},
		{"JSON syntax", "{\"kind\":\n\"Type\",}", "f.yaml: document 1 (line 2)", nil, "invalid JSON"},
		{"not an object", "just a string\n", "f.yaml: document 1 (line 1)", []string{"must be an object (a document with apiVersion, kind, metadata and spec)"}, ""},
		{"unknown kind", "apiVersion: hub.cairn.dev/v1\nkind: Thing\n", "f.yaml: document 1 (line 1)",
			[]string{`kind "Thing" is not a known kind (want Type, TypeInstance or List)`}, ""},
		{"missing kind and apiVersion", "metadata: {}\n", "f.yaml: document 1 (line 1)",
			[]string{"apiVersion is required (want hub.cairn.dev/v1)", "kind is required (want Type, TypeInstance or List)"}, ""},
		{"unknown apiVersion", "apiVersion: v2\nkind: Type\n", "f.yaml: document 1 (line 1)",
			[]string{`apiVersion "v2" is not supported (want hub.cairn.dev/v1)`}, ""},
		{"unknown fields", head + "state: {}\nspec:\n  typeRef: {path: a.b, revision: 0.1.0, rev: 1}\n  vaule: 1\n", "f.yaml: document 1 (line 1)",
			[]string{
				"state is not a known field (known: apiVersion, kind, metadata, spec)",
				"spec/vaule is not a known field (known: typeRef, value, attributes, backend, uses)",
				"spec/typeRef/rev is not a known field (known: path, revision)",
			}, ""},
		{"served form, uid not its name", head + "metadata: {name: a, uid: b, colour: red}\nspec: {name: x, typeRef: {path: a.b, revision: 0.1.0}}\nstatus: {}\n", "f.yaml: document 1 (line 1)",
			[]string{
				`metadata/colour is not a known field (known: name, uid, resourceVersion, generation, creationTimestamp, labels, annotations, managedFields)`,
				`metadata/uid "b" differs from metadata.name "a"; a served TypeInstance has its id in both`,
			}, ""},
		{"served form without its id", head + "metadata: {}\nspec: {namespace: default, uses: [a]}\n", "f.yaml: document 1 (line 1)",
			[]string{
				"metadata/name is required: the id of the TypeInstance, as kubectl get serves it",
				"spec/uses is not a known field (known: typeRef, namespace, name, alias, attributes, value, backend)",
			}, ""},
		{"missing required", "# c\n" + head + "metadata: {labels: {replicas: 3}}\nspec:\n  attributes: [{path: a.b}]\n  uses: [\"\"]\n", "f.yaml: document 1 (line 2)",
			[]string{
				"metadata/labels/replicas must be a string (got 3; quote it)",
				"spec/typeRef is required (unless metadata.id names an existing TypeInstance)",
				"spec/attributes/0/revision is required",
				"spec/uses/0 must not be empty",
			}, ""},
		{"wrong types", head + "metadata: {name: 1}\nspec: {typeRef: {path: a.b, revision: 0.1.0}, backend: {abstract: maybe}, uses: a}\n", "f.yaml: document 1 (line 1)",
			[]string{"metadata/name must be a string", "spec/backend/abstract must be a boolean", "spec/uses must be an array of strings"}, ""},
		{"spec missing", head + "metadata: {name: x}\n", "f.yaml: document 1 (line 1)", []string{"spec is required"}, ""},
		{"Type without path and revision", "apiVersion: hub.cairn.dev/v1\nkind: Type\nspec: {jsonSchema: 3}\n", "f.yaml: document 1 (line 1)",
			[]string{
				"metadata/name is required (the Type path; spec.path is also accepted)",
				"spec/revision is required",
				`spec/jsonSchema must be an object, a string holding JSON, or {value: "<JSON string>"}`,
			}, ""},
		{"Type schema string not JSON", "apiVersion: hub.cairn.dev/v1\nkind: Type\nmetadata: {name: a.b}\nspec: {revision: 0.1.0, jsonSchema: {value: '{nope'}}\n", "f.yaml: document 1 (line 1)",
			[]string{"spec/jsonSchema/value must hold valid JSON: invalid character 'n' looking for beginning of object key string"}, ""},
		{"OCF without path", "ocfVersion: 0.0.1\nkind: Type\nmetadata: {prefix: a}\n", "f.yaml: document 1 (line 1)",
			[]string{"revision is required", "metadata/path is required (or metadata.prefix and metadata.name)"}, ""},
		{"OCF Interface", "ocfVersion: 0.0.1\nkind: Interface\n", "f.yaml: document 1 (line 1)",
			[]string{`kind "Interface" is not supported in an OCF manifest (want Type)`}, ""},
		{"List without apiVersion", `{"kind":"List","items":{}}`, "f.yaml: document 1 (line 1)",
			[]string{"apiVersion is required (want v1 or hub.cairn.dev/v1)", "items must be an array of documents"}, ""},
		{"nested List", `{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"v1","kind":"List","items":[]}]}`, "f.yaml: document 1, item 1 (line 1)",
			[]string{"kind a List cannot hold another List"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := manifest.Decode(strings.NewReader(tt.in), "f.yaml")
			if err == nil {
				t.Fatal("Decode succeeded, want an error")
			}
			if code := cairn.ErrorCode(err); code != cairn.CodeInvalid {
				t.Errorf("code = %s, want Invalid", code)
			}
			errs := cairn.Errors(err)
			if len(errs) != 1 {
				t.Fatalf("got %d errors, want 1: %v", len(errs), err)
			}
			if errs[0].Subject != tt.subject {
				t.Errorf("subject = %q, want %q", errs[0].Subject, tt.subject)
			}
			var causes []string
			for _, c := range errs[0].Causes {
				causes = append(causes, c.String())
			}
			if !reflect.DeepEqual(causes, tt.causes) {
				t.Errorf("causes:\n  %s\nwant:\n  %s", strings.Join(causes, "\n  "), strings.Join(tt.causes, "\n  "))
			}
			if tt.msg != "" && !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("error %q does not contain %q", err, tt.msg)
			}
		})
	}
}

// Every bad document is reported, not just the first, and the good ones
// still come back.
func TestDecodeReportsEveryDocument(t *testing.T) {
	in := "apiVersion: hub.cairn.dev/v1\nkind: Type\nmetadata: {name: a.b}\nspec: {revision: 0.1.0}\n---\nkind: X\n---\nb: [\n---\napiVersion: hub.cairn.dev/v1\nkind: Type\nmetadata: {name: a.c}\nspec: {revision: 0.1.0}\n"
	docs, err := manifest.Decode(strings.NewReader(in), "f.yaml")
	var subjects []string
	for _, e := range cairn.Errors(err) {
		subjects = append(subjects, e.Subject)
	}
	if want := []string{"f.yaml: document 2 (line 6)", "f.yaml: document 3 (line 8)"}; !reflect.DeepEqual(subjects, want) {
		t.Errorf("subjects = %q, want %q", subjects, want)
	}
	if len(docs) != 2 || docs[1].Pos.Index != 3 || docs[1].Pos.Line != 10 {
		t.Errorf("docs = %+v, want a.b and a.c (document 4, line 10)", docs)
	}
}

// The form cairn serves a TypeInstance in (kubectl get ti ID -o yaml)
// reads as a document of that instance: its id, its name, namespace and
// alias from spec, the instances it uses from status.uses without its
// backend, and what the server sets read over.
func TestDecodeServedInstance(t *testing.T) {
	docs, err := manifest.Decode(strings.NewReader(`apiVersion: hub.cairn.dev/v1
kind: TypeInstance
metadata:
  creationTimestamp: "2026-11-24T22:45:15Z"
  generation: 1
  labels: {env: dev}
  name: 01a20fbc-1a42-744f-973a-6fb6c5492801
  resourceVersion: "4"
  uid: 01a20fbc-1a42-744f-973a-6fb6c5492801
spec:
  alias: db-config
  backend: {abstract: true, id: a36ed738-dfe7-45ec-acd1-8e44e8db893b}
  name: db-config
  namespace: prod
  typeRef: {path: cap.type.database.postgresql.config, revision: 0.1.0}
  value: {port: 5432}
status:
  createdBy: root
  resourceVersion: 1
  uses: [01a20fbc-1a41-7b58-a023-782d087019e7, a36ed738-dfe7-45ec-acd1-8e44e8db893b]
`), "ti.yaml")
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	want := &manifest.Instance{
		ID: "01a20fbc-1a42-744f-973a-6fb6c5492801", Served: true, ResourceVersion: "4",
		Alias: "db-config", Namespace: "prod", Name: "db-config",
		TypeRef: cairn.TypeRef{Path: "cap.type.database.postgresql.config", Revision: "0.1.0"},
		Labels:  map[string]string{"env": "dev"},
		Value:   json.RawMessage(`{"port":5432}`),
		Backend: &manifest.Backend{ID: "a36ed738-dfe7-45ec-acd1-8e44e8db893b"},
		Uses:    []string{"01a20fbc-1a41-7b58-a023-782d087019e7"},
	}
	if len(docs) != 1 || !reflect.DeepEqual(docs[0].Instance, want) {
		t.Errorf("Instance = %+v\nwant %+v", docs[0].Instance, want)
	}
}
