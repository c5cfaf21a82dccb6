// Package manifest decodes the documents users write: cairn Types (and
// Capact OCF Type manifests) and TypeInstances, in YAML or JSON, one or many
// per source. It is shared by every façade that reads user files (the CLI
// now, REST and GraphQL later), so a document means the same everywhere.
//
// Decoding is strict: unknown fields, unknown kinds and apiVersions, wrong
// types and missing required fields are errors. Every error is a
// *cairn.Error with code Invalid whose Subject names the source, the
// document and its line, and whose Causes name each offending field.
// Rules about the values themselves (path syntax, schema validity, ...) are
// left to the hub, which applies them to every façade alike.
package manifest

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/hub"
)

// APIVersion is the apiVersion of cairn's own documents.
const APIVersion = "hub.cairn.dev/v1"

// Kind is the kind of a decoded document.
type Kind string

const (
	KindType         Kind = "Type"
	KindTypeInstance Kind = "TypeInstance"
	// KindList wraps other documents in "items"; Decode flattens it.
	KindList Kind = "List"
)

// Position locates a document in its source.
type Position struct {
	Source string
	// Index is the 0-based position of the document among the non-empty
	// documents of Source; messages show it 1-based.
	Index int
	// Item is the 0-based position inside a List document or a JSON array,
	// -1 for a document that stands alone.
	Item int
	// Line is the 1-based line where the document starts, 0 when unknown.
	Line int
}

func (p Position) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: document %d", p.Source, p.Index+1)
	if p.Item >= 0 {
		fmt.Fprintf(&b, ", item %d", p.Item+1)
	}
	if p.Line > 0 {
		fmt.Fprintf(&b, " (line %d)", p.Line)
	}
	return b.String()
}

// Document is one decoded document: exactly one of Type and Instance is set,
// as Kind says.
type Document struct {
	Pos      Position
	Kind     Kind
	Type     *cairn.Type
	Instance *Instance
}

// Instance is a TypeInstance document.
type Instance struct {
	// ID, when set, refers to an existing instance: applying the document
	// updates it.
	ID        string
	Alias     string
	Namespace string
	Name      string
	// TypeRef is zero when the document refers to an existing instance by
	// ID and leaves the Type out.
	TypeRef     cairn.TypeRef
	Labels      map[string]string
	Annotations map[string]string
	// Value is nil when the document has none (or value: null).
	Value      json.RawMessage
	Attributes []cairn.AttributeRef
	// Backend is nil when the document leaves the backend to the hub.
	Backend *Backend
	// Uses lists aliases of other documents of the same apply, or ids.
	Uses []string
	// Served is set when the document is in the form cairn serves a
	// TypeInstance in (kubectl get ti ID -o yaml) rather than the manifest
	// form; ID is then always set, and ResourceVersion is its
	// metadata.resourceVersion, if any.
	Served          bool
	ResourceVersion string
}

// Backend is spec.backend of a TypeInstance document.
type Backend struct {
	// ID is a backend instance id, or an alias a client resolves to one.
	ID string
	// Context is nil when not given.
	Context  json.RawMessage
	Abstract bool
}

// NewInstance maps the document to the hub's create input. Relations are
// left to the caller, which knows what the aliases of Uses resolve to.
func (in *Instance) NewInstance() hub.NewInstance {
	n := hub.NewInstance{
		Alias:       in.Alias,
		Namespace:   in.Namespace,
		Name:        in.Name,
		TypeRef:     in.TypeRef,
		Labels:      maps.Clone(in.Labels),
		Annotations: maps.Clone(in.Annotations),
		Attributes:  cloneAttrs(in.Attributes),
		Value:       in.Value,
	}
	if in.Backend != nil {
		n.Backend = &hub.BackendInput{ID: in.Backend.ID, Context: in.Backend.Context, Abstract: in.Backend.Abstract}
	}
	return n
}

// UpdateInstance maps the document to the hub's update input for the
// existing instance id. The document is the desired state: labels,
// annotations and attributes it leaves out are cleared, while a value or
// context it leaves out is carried over (a context-only backend owns its
// value, and a backend may rewrite the context it was given).
func (in *Instance) UpdateInstance(id, owner string) hub.UpdateInstance {
	attrs := cloneAttrs(in.Attributes)
	if attrs == nil {
		attrs = []cairn.AttributeRef{}
	}
	u := hub.UpdateInstance{
		ID:          id,
		OwnerID:     owner,
		Value:       in.Value,
		Attributes:  &attrs,
		Labels:      nonNil(in.Labels),
		Annotations: nonNil(in.Annotations),
	}
	if in.Backend != nil {
		u.Context = in.Backend.Context
	}
	return u
}

// UsesRelations returns the relations "from uses each entry of Uses". The
// caller maps entries that are aliases of the same apply.
func (in *Instance) UsesRelations(from string) []hub.UsesRelation {
	out := make([]hub.UsesRelation, len(in.Uses))
	for i, u := range in.Uses {
		out[i] = hub.UsesRelation{From: from, To: u}
	}
	return out
}

func cloneAttrs(a []cairn.AttributeRef) []cairn.AttributeRef {
	if a == nil {
		return nil
	}
	return append([]cairn.AttributeRef(nil), a...)
}

// nonNil returns a copy of m that is never nil, because the hub reads a nil
// map as "carry over" and an empty one as "clear".
func nonNil(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return maps.Clone(m)
}

// Decode reads every document of r. source names r in errors (a file name,
// or "-" for standard input). It decodes every document it can and returns
// the documents that decoded with the errors of the others joined, so a user
// sees every mistake at once; callers should not act on a partial result.
// Lists and JSON arrays are flattened into their items (see Split).
func Decode(r io.Reader, source string) ([]Document, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, &cairn.Error{Code: cairn.CodeInvalid, Subject: source, Msg: "read: " + err.Error(), Err: err}
	}
	var docs []Document
	var errs []error
	// Document by document, so errors come in the order of the source.
	for i, raw := range splitSource(data) {
		pos := Position{Source: source, Index: i, Item: -1, Line: raw.line}
		if raw.err != nil {
			errs = append(errs, &cairn.Error{Code: cairn.CodeInvalid, Subject: pos.String(), Msg: raw.err.Error(), Err: raw.err})
			continue
		}
		raws, err := splitRaw(raw.json, pos)
		errs = append(errs, err)
		for _, r := range raws {
			ds, err := decodeOne(r.JSON, r.Pos)
			docs = append(docs, ds...)
			errs = append(errs, err)
		}
	}
	return docs, errors.Join(errs...)
}

// decodeOne decodes one document that is not a List: a cup
// ResourceDefinition (one Type per version), a cairn Type or TypeInstance,
// or a Capact OCF Type.
func decodeOne(raw json.RawMessage, pos Position) ([]Document, error) {
	d := &decoder{}
	top := d.object("", raw, nil)
	if top == nil {
		return nil, docError(pos, d.causes)
	}
	if v, _ := str(top["apiVersion"]); v == CupAPIVersion {
		docs, causes := decodeCup(top)
		if len(causes) > 0 {
			return nil, docError(pos, causes)
		}
		for i := range docs {
			docs[i].Pos = pos
		}
		return docs, nil
	}
	doc, causes := decodeDocument(top)
	if len(causes) > 0 {
		return nil, docError(pos, causes)
	}
	doc.Pos = pos
	return []Document{doc}, nil
}

func docError(pos Position, causes []cairn.Cause) error {
	parts := make([]string, len(causes))
	for i, c := range causes {
		parts[i] = c.String()
	}
	return &cairn.Error{Code: cairn.CodeInvalid, Subject: pos.String(), Causes: causes,
		Msg: "invalid document: " + strings.Join(parts, "; ")}
}

// decodeDocument dispatches on apiVersion/ocfVersion and kind.
func decodeDocument(top map[string]json.RawMessage) (Document, []cairn.Cause) {
	d := &decoder{}
	kind, kindOK := str(top["kind"])
	if _, ocf := top["ocfVersion"]; ocf {
		if _, ok := top["apiVersion"]; ok {
			return Document{}, []cairn.Cause{{Field: "apiVersion", Message: "must not be set together with ocfVersion"}}
		}
		if kind != string(KindType) {
			return Document{}, []cairn.Cause{{Field: "kind", Message: fmt.Sprintf("%q is not supported in an OCF manifest (want Type)", kind)}}
		}
		t := d.ocfType(top)
		return Document{Kind: KindType, Type: t}, d.causes
	}

	switch v, ok := top["apiVersion"]; {
	case !ok:
		d.add("apiVersion", "is required (want "+APIVersion+")")
	case string(v) != `"`+APIVersion+`"`:
		s, _ := str(v)
		d.add("apiVersion", fmt.Sprintf("%q is not supported (want %s)", s, APIVersion))
	}
	switch {
	case top["kind"] == nil:
		d.add("kind", "is required (want Type, TypeInstance or List)")
	case !kindOK:
		d.add("kind", "must be a string")
	case kind != string(KindType) && kind != string(KindTypeInstance):
		d.add("kind", fmt.Sprintf("%q is not a known kind (want Type, TypeInstance or List)", kind))
	}
	if len(d.causes) > 0 {
		return Document{}, d.causes
	}
	if kind == string(KindType) {
		t := d.cairnType(top)
		return Document{Kind: KindType, Type: t}, d.causes
	}
	in := d.instance(top)
	return Document{Kind: KindTypeInstance, Instance: in}, d.causes
}

// cairnType decodes a kind: Type document of apiVersion hub.cairn.dev/v1.
func (d *decoder) cairnType(top map[string]json.RawMessage) *cairn.Type {
	d.known("", top, "apiVersion", "kind", "metadata", "spec")
	t := &cairn.Type{}
	// creationTimestamp: a Type as the server serves it (get types -o
	// yaml) has one; set by the hub, it is ignored here, as the API server
	// ignores it on create.
	meta := d.object("metadata", top["metadata"], []string{"name", "creationTimestamp"})
	spec := d.object("spec", top["spec"], []string{"path", "revision", "additionalRefs", "jsonSchema", "rest"})
	name := d.optStr("metadata/name", meta["name"])
	path := d.optStr("spec/path", spec["path"])
	// The server names a Type <path>:<revision>, with both in its spec.
	if p, rev, ok := strings.Cut(name, ":"); ok && path != "" {
		if specRev, _ := str(spec["revision"]); p != path || rev != specRev {
			d.add("metadata/name", fmt.Sprintf("%q is not spec.path:spec.revision %q", name, path+":"+specRev))
		}
		name = path
	}
	switch {
	case name == "" && path == "":
		d.add("metadata/name", "is required (the Type path; spec.path is also accepted)")
	case name != "" && path != "" && name != path:
		d.add("spec/path", fmt.Sprintf("%q differs from metadata.name %q; give the path once", path, name))
	case name != "":
		t.Path = name
	default:
		t.Path = path
	}
	t.Revision = d.reqStr("spec/revision", spec["revision"])
	t.AdditionalRefs = d.strList("spec/additionalRefs", spec["additionalRefs"])
	t.JSONSchema = d.jsonSchema("spec/jsonSchema", spec["jsonSchema"])
	if rest := d.object("spec/rest", spec["rest"], []string{"group", "version", "names", "additionalPrinterColumns"}); rest != nil {
		t.Group = d.optStr("spec/rest/group", rest["group"])
		t.Version = d.optStr("spec/rest/version", rest["version"])
		if names := d.object("spec/rest/names", rest["names"], []string{"kind", "singular", "plural", "shortNames", "categories"}); names != nil {
			t.Names = &cairn.Names{
				Kind:       d.optStr("spec/rest/names/kind", names["kind"]),
				Singular:   d.optStr("spec/rest/names/singular", names["singular"]),
				Plural:     d.optStr("spec/rest/names/plural", names["plural"]),
				ShortNames: d.strList("spec/rest/names/shortNames", names["shortNames"]),
				Categories: d.strList("spec/rest/names/categories", names["categories"]),
			}
		}
		t.PrinterColumns = d.printerColumns("spec/rest/additionalPrinterColumns", rest["additionalPrinterColumns"])
	}
	return t
}

// ocfType decodes a Capact OCF Type manifest. Its descriptive metadata
// (displayName, maintainers, ...) has no place in a cairn Type and is
// accepted and dropped, so Capact's published manifests load unchanged.
func (d *decoder) ocfType(top map[string]json.RawMessage) *cairn.Type {
	d.known("", top, "ocfVersion", "revision", "kind", "metadata", "spec", "signature")
	t := &cairn.Type{}
	d.reqStr("ocfVersion", top["ocfVersion"])
	t.Revision = d.reqStr("revision", top["revision"])
	meta := d.object("metadata", top["metadata"], []string{"path", "prefix", "name", "displayName", "description",
		"documentationURL", "supportURL", "iconURL", "maintainers", "attributes"})
	path := d.optStr("metadata/path", meta["path"])
	prefix := d.optStr("metadata/prefix", meta["prefix"])
	name := d.optStr("metadata/name", meta["name"])
	joined := ""
	if prefix != "" && name != "" {
		joined = prefix + "." + name
	}
	switch {
	case path != "" && joined != "" && path != joined:
		d.add("metadata/path", fmt.Sprintf("%q differs from metadata.prefix + \".\" + metadata.name %q", path, joined))
	case path != "":
		t.Path = path
	case joined != "":
		t.Path = joined
	default:
		d.add("metadata/path", "is required (or metadata.prefix and metadata.name)")
	}
	spec := d.object("spec", top["spec"], []string{"additionalRefs", "jsonSchema"})
	t.AdditionalRefs = d.strList("spec/additionalRefs", spec["additionalRefs"])
	t.JSONSchema = d.jsonSchema("spec/jsonSchema", spec["jsonSchema"])
	return t
}

// jsonSchema accepts a schema as an object (or boolean), as a string that
// holds JSON, or in Capact's OCF form {value: "<JSON string>"}.
func (d *decoder) jsonSchema(field string, raw json.RawMessage) json.RawMessage {
	if raw == nil || isNull(raw) {
		return nil
	}
	switch first(raw) {
	case '{':
		var m map[string]json.RawMessage
		if err := json.Unmarshal(raw, &m); err == nil && len(m) == 1 && first(m["value"]) == '"' {
			return d.embeddedJSON(field+"/value", m["value"])
		}
		return raw
	case '"':
		return d.embeddedJSON(field, raw)
	case 't', 'f':
		return raw
	}
	d.add(field, `must be an object, a string holding JSON, or {value: "<JSON string>"}`)
	return nil
}

func (d *decoder) embeddedJSON(field string, raw json.RawMessage) json.RawMessage {
	s, _ := str(raw)
	if !json.Valid([]byte(s)) {
		var v any
		err := json.Unmarshal([]byte(s), &v)
		d.add(field, "must hold valid JSON: "+err.Error())
		return nil
	}
	return json.RawMessage(s)
}

// instance decodes a kind: TypeInstance document.
func (d *decoder) instance(top map[string]json.RawMessage) *Instance {
	if isServed(top) {
		return d.servedInstance(top)
	}
	d.known("", top, "apiVersion", "kind", "metadata", "spec")
	in := &Instance{}
	if meta := d.object("metadata", top["metadata"], []string{"name", "namespace", "alias", "id", "labels", "annotations"}); meta != nil {
		in.Name = d.optStr("metadata/name", meta["name"])
		in.Namespace = d.optStr("metadata/namespace", meta["namespace"])
		in.Alias = d.optStr("metadata/alias", meta["alias"])
		in.ID = d.optStr("metadata/id", meta["id"])
		in.Labels = d.strMap("metadata/labels", meta["labels"])
		in.Annotations = d.strMap("metadata/annotations", meta["annotations"])
	}
	spec := d.object("spec", top["spec"], []string{"typeRef", "value", "attributes", "backend", "uses"})
	if spec == nil && top["spec"] == nil {
		d.add("spec", "is required")
		return in
	}
	if tr, ok := spec["typeRef"]; !ok || isNull(tr) {
		if in.ID == "" {
			d.add("spec/typeRef", "is required (unless metadata.id names an existing TypeInstance)")
		}
	}
	d.instanceSpec(in, spec)
	in.Uses = d.strList("spec/uses", spec["uses"])
	for i, u := range in.Uses {
		if u == "" {
			d.add(fmt.Sprintf("spec/uses/%d", i), "must not be empty")
		}
	}
	return in
}

// isServed reports whether a TypeInstance document is in the form cairn
// serves (kubectl get ti ID -o yaml) rather than the manifest form: it has
// a status, a metadata.uid, or the spec.name and spec.namespace the served
// form moves out of metadata.
func isServed(top map[string]json.RawMessage) bool {
	if _, ok := top["status"]; ok {
		return true
	}
	has := func(part string, keys ...string) bool {
		var m map[string]json.RawMessage
		if first(top[part]) != '{' || json.Unmarshal(top[part], &m) != nil {
			return false // the manifest form's decoder names the mistake
		}
		return slices.ContainsFunc(keys, func(k string) bool { _, ok := m[k]; return ok })
	}
	return has("metadata", "uid") || has("spec", "name", "namespace")
}

// servedInstance decodes a TypeInstance in the form cairn serves it:
// metadata.name (and uid) is its id, spec carries its name, namespace and
// alias, status what the hub tracks. It reads as a document of that
// instance (ID set, Served true), so a file saved with kubectl get -o yaml
// can be applied or, after the instance was deleted, created again
// (kubectl replace --force). What the server sets is read over: uid,
// creationTimestamp, generation, managedFields, spec.backend.abstract and
// status, but for status.uses, whose entries other than the backend are
// the instances it uses; resourceVersion is kept for a replace's
// precondition.
func (d *decoder) servedInstance(top map[string]json.RawMessage) *Instance {
	d.known("", top, "apiVersion", "kind", "metadata", "spec", "status")
	in := &Instance{Served: true}
	if meta := d.object("metadata", top["metadata"], []string{"name", "uid", "resourceVersion", "generation", "creationTimestamp", "labels", "annotations", "managedFields"}); meta != nil {
		in.ID = d.optStr("metadata/name", meta["name"])
		uid := d.optStr("metadata/uid", meta["uid"])
		switch {
		case in.ID == "" && uid == "":
			d.add("metadata/name", "is required: the id of the TypeInstance, as kubectl get serves it")
		case in.ID == "":
			in.ID = uid
		case uid != "" && uid != in.ID:
			d.add("metadata/uid", fmt.Sprintf("%q differs from metadata.name %q; a served TypeInstance has its id in both", uid, in.ID))
		}
		in.ResourceVersion = d.optStr("metadata/resourceVersion", meta["resourceVersion"])
		in.Labels = d.strMap("metadata/labels", meta["labels"])
		in.Annotations = d.strMap("metadata/annotations", meta["annotations"])
	}
	spec := d.object("spec", top["spec"], []string{"typeRef", "namespace", "name", "alias", "attributes", "value", "backend"})
	if spec == nil {
		if top["spec"] == nil {
			d.add("spec", "is required")
		}
		return in
	}
	in.Name = d.optStr("spec/name", spec["name"])
	in.Namespace = d.optStr("spec/namespace", spec["namespace"])
	in.Alias = d.optStr("spec/alias", spec["alias"])
	d.instanceSpec(in, spec)
	if in.Backend != nil {
		in.Backend.Abstract = false // served: it marks the built-in backend, named by its id
	}
	if st := d.object("status", top["status"], nil); st != nil {
		for _, u := range d.strList("status/uses", st["uses"]) {
			if u != "" && (in.Backend == nil || u != in.Backend.ID) {
				in.Uses = append(in.Uses, u)
			}
		}
	}
	return in
}

// instanceSpec decodes the fields both forms of a TypeInstance share:
// spec.typeRef, value, attributes and backend.
func (d *decoder) instanceSpec(in *Instance, spec map[string]json.RawMessage) {
	if tr, ok := spec["typeRef"]; ok && !isNull(tr) {
		m := d.object("spec/typeRef", tr, []string{"path", "revision"})
		if m != nil {
			in.TypeRef.Path = d.reqStr("spec/typeRef/path", m["path"])
			in.TypeRef.Revision = d.reqStr("spec/typeRef/revision", m["revision"])
		}
	}
	if v, ok := spec["value"]; ok && !isNull(v) {
		in.Value = v
	}
	if a, ok := spec["attributes"]; ok && !isNull(a) {
		var items []json.RawMessage
		if err := json.Unmarshal(a, &items); err != nil || first(a) != '[' {
			d.add("spec/attributes", "must be an array of {path, revision}")
		}
		for i, it := range items {
			f := fmt.Sprintf("spec/attributes/%d", i)
			if m := d.object(f, it, []string{"path", "revision"}); m != nil {
				in.Attributes = append(in.Attributes, cairn.AttributeRef{
					Path:     d.reqStr(f+"/path", m["path"]),
					Revision: d.reqStr(f+"/revision", m["revision"]),
				})
			}
		}
	}
	if b := d.object("spec/backend", spec["backend"], []string{"id", "context", "abstract"}); b != nil {
		in.Backend = &Backend{ID: d.optStr("spec/backend/id", b["id"])}
		if c, ok := b["context"]; ok && !isNull(c) {
			in.Backend.Context = c
		}
		if a, ok := b["abstract"]; ok && !isNull(a) {
			if err := json.Unmarshal(a, &in.Backend.Abstract); err != nil {
				d.add("spec/backend/abstract", "must be a boolean")
			}
		}
	}
}
