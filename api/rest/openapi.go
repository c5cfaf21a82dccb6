package rest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strings"

	openapiv2 "github.com/google/gnostic-models/openapiv2"
	"google.golang.org/protobuf/proto"

	stackctl "github.com/cairn-dev/cairn/controller/stack"
	"github.com/cairn-dev/cairn/hub"
)

// OpenAPI v3, as the Kubernetes API server publishes it: /openapi/v3 lists
// one document per group-version, each with the kinds' schemas (tagged with
// x-kubernetes-group-version-kind) built from the Types' JSON Schemas, so
// kubectl explain works, and with the fieldValidation parameter on writes so
// kubectl leaves validation to the server (which validates against the
// Type's full JSON Schema, not the OpenAPI subset).

const (
	objectMetaRef        = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
	managedFieldsRef     = "io.k8s.apimachinery.pkg.apis.meta.v1.ManagedFieldsEntry"
	ownerReferenceRef    = "io.k8s.apimachinery.pkg.apis.meta.v1.OwnerReference"
	componentSchemasPath = "#/components/schemas/"
)

func (s *Server) openAPIIndex(w http.ResponseWriter, r *http.Request) {
	all, err := s.resources(r.Context())
	if err != nil {
		writeStatus(w, errorStatus(err, target{}))
		return
	}
	groups, versions := groupVersions(all)
	paths := map[string]any{}
	for _, g := range groups {
		for _, v := range versions[g] {
			doc := openAPIDocument(all, g, v)
			b, _ := json.Marshal(doc)
			sum := sha256.Sum256(b)
			key := "apis/" + g + "/" + v
			paths[key] = map[string]string{"serverRelativeURL": "/openapi/v3/" + key + "?hash=" + strings.ToUpper(hex.EncodeToString(sum[:]))}
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"paths": paths})
}

func (s *Server) openAPIGroupVersion(w http.ResponseWriter, r *http.Request, gv []string) {
	if len(gv) != 2 {
		writeStatus(w, notFoundStatus("the server could not find the requested OpenAPI document"))
		return
	}
	all, err := s.resources(r.Context())
	if err != nil {
		writeStatus(w, errorStatus(err, target{}))
		return
	}
	doc := openAPIDocument(all, gv[0], gv[1])
	if doc == nil {
		writeStatus(w, notFoundStatus(fmt.Sprintf("no OpenAPI document for %s/%s", gv[0], gv[1])))
		return
	}
	writeJSON(w, http.StatusOK, doc)
}

// schemaName is the component name Kubernetes uses for a kind:
// the group's labels reversed, the version, the kind (io.flipt.v1alpha1.Flag).
func schemaName(group, version, kind string) string {
	labels := strings.Split(group, ".")
	slices.Reverse(labels)
	return strings.Join(labels, ".") + "." + version + "." + kind
}

func openAPIDocument(all []*resource, group, version string) map[string]any {
	schemas := metaSchemas()
	schemas["io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta"] = listMetaSchema()
	paths := map[string]any{}
	found := false
	for _, r := range all {
		if r.group != group || r.version != version {
			continue
		}
		found = true
		gvk := []map[string]string{{"group": group, "version": version, "kind": r.kind}}
		name := schemaName(group, version, r.kind)
		schemas[name] = kindSchema(r, gvk)
		schemas[name+"List"] = map[string]any{
			"type":        "object",
			"description": r.kind + "List is a list of " + r.kind + ".",
			"required":    []string{"items"},
			"properties": map[string]any{
				"apiVersion": map[string]any{"type": "string"},
				"kind":       map[string]any{"type": "string"},
				"metadata":   map[string]any{"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta"},
				"items":      map[string]any{"type": "array", "items": map[string]any{"$ref": "#/components/schemas/" + name}},
			},
			"x-kubernetes-group-version-kind": []map[string]string{{"group": group, "version": version, "kind": r.kind + "List"}},
		}
		for p, item := range resourcePaths(r, name, gvk) {
			paths[p] = item
		}
	}
	if !found {
		return nil
	}
	return map[string]any{
		"openapi":    "3.0.0",
		"info":       map[string]string{"title": "cairn", "version": group + "/" + version},
		"paths":      paths,
		"components": map[string]any{"schemas": schemas},
	}
}

// specDescription says what the spec of a kind holds, for kubectl explain.
func specDescription(r *resource) string {
	switch {
	case r.typ != nil:
	case r.hubKind == "types":
		return "The Type: its path, revision, additional refs, JSON Schema and REST names (rest)."
	case r.hubKind == "typeinstances":
		return "The instance: its Type (typeRef), namespace, name, alias, attributes, storage backend and value."
	case r.hubKind == "backends":
		return "The storage backend: its Type (typeRef), alias, url, whether it accepts values (acceptValue) and the schema of its context."
	case r.hubKind == "lockrequests":
		return "What to lock or unlock (action), which TypeInstances (ids) and for whom (owner)."
	case r.hubKind == "policies":
		return "The hub's policy: the rules that pick a new instance's storage backend (typeInstance) and an Interface's implementation (interface)."
	case r.hubKind == "stacks":
		return "A stack package version of the catalog: its name, version, digest, manifest and installation Type."
	case r.hubKind == "plans", r.hubKind == "installs":
		return "The stack installation to plan or make, with the dependencies it needs."
	case r.hubKind == "proposals":
		return "A change a backend proposed for review (a pull request): where, on which branch, for which instances."
	}
	return "The instance's value, validated against the Type's JSON Schema."
}

func kindSchema(r *resource, gvk []map[string]string) map[string]any {
	if r.hubKind == "rbac" {
		return rbacKindSchema(r, gvk)
	}
	spec := map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}
	desc := r.kind + " is served by cairn."
	if r.typ != nil {
		desc = fmt.Sprintf("%s is an instance of the cairn Type %s:%s.", r.kind, r.typ.Path, r.typ.Revision)
		if len(r.typ.JSONSchema) > 0 {
			var js any
			if json.Unmarshal(r.typ.JSONSchema, &js) == nil {
				if conv, ok := toOpenAPI(js, js, 0).(map[string]any); ok {
					spec = conv
				}
			}
		}
	}
	status := objectStatusSchema()
	if r.typ != nil && slices.Contains(r.typ.AdditionalRefs, hub.InstallationParent) {
		// A stack installation: what its controller reports (conditions,
		// outputs, children, events) beside the hub's fields.
		own := goSchema(reflect.TypeFor[stackctl.Status](), "installation.status", map[reflect.Type]bool{})
		props := status["properties"].(map[string]any)
		for k, v := range own["properties"].(map[string]any) {
			if _, taken := props[k]; !taken {
				props[k] = v
			}
		}
	}
	if r.hubKind == "typeinstances" {
		spec, status = typeInstanceSchemas()
	} else if specType, statusType, ok := hubKindShapes(r.hubKind); ok {
		// A hub kind is described by the Go types it is served with, not
		// as an instance of a Type (whose status the hub writes).
		spec, status = goSchema(specType, r.hubKind+".spec", map[reflect.Type]bool{}), nil
		if statusType != nil {
			status = goSchema(statusType, r.hubKind+".status", map[reflect.Type]bool{})
		}
	}
	if _, ok := spec["description"]; !ok {
		spec["description"] = specDescription(r)
	}
	props := map[string]any{
		"apiVersion": map[string]any{"type": "string", "description": "APIVersion defines the versioned schema of this representation of an object."},
		"kind":       map[string]any{"type": "string", "description": "Kind is a string value representing the REST resource this object represents."},
		"metadata":   map[string]any{"$ref": "#/components/schemas/" + objectMetaRef},
		"spec":       spec,
	}
	if status != nil {
		props["status"] = status
	}
	return map[string]any{
		"type":                            "object",
		"description":                     desc,
		"properties":                      props,
		"x-kubernetes-group-version-kind": gvk,
	}
}

func resourcePaths(r *resource, schema string, gvk []map[string]string) map[string]any {
	ref := map[string]any{"$ref": "#/components/schemas/" + schema}
	op := func(id, desc string, params ...map[string]any) map[string]any {
		o := map[string]any{
			"operationId":                     id + r.kind,
			"description":                     desc,
			"x-kubernetes-group-version-kind": gvk[0],
			"responses": map[string]any{"200": map[string]any{"description": "OK",
				"content": map[string]any{"application/json": map[string]any{"schema": ref}}}},
		}
		if len(params) > 0 {
			o["parameters"] = params
		}
		return o
	}
	query := func(name, desc string) map[string]any {
		return map[string]any{"name": name, "in": "query", "description": desc, "schema": map[string]any{"type": "string"}, "uniqueItems": true}
	}
	fieldValidation := query("fieldValidation", "Strict refuses unknown fields; the spec is always validated against the Type's JSON Schema.")
	body := map[string]any{"required": true, "content": map[string]any{"application/json": map[string]any{"schema": ref}}}
	patchBody := map[string]any{"required": true, "content": map[string]any{
		"application/merge-patch+json": map[string]any{"schema": map[string]any{"type": "object"}},
		"application/json-patch+json":  map[string]any{"schema": map[string]any{"type": "array", "items": map[string]any{"type": "object"}}},
	}}
	base := "/apis/" + r.group + "/" + r.version + "/"
	if r.namespaced {
		base += "namespaces/{namespace}/"
	}
	collection := map[string]any{
		"get": op("list", "list or watch "+r.plural, query("labelSelector", "label selector"), query("fieldSelector", "field selector"),
			query("limit", "page size"), query("continue", "continue token"), query("watch", "watch for changes"), query("resourceVersion", "watch from here")),
	}
	item := map[string]any{
		"get":    op("read", "read the "+r.singular),
		"delete": op("delete", "delete the "+r.singular),
	}
	if slices.Contains(r.verbs, "create") {
		post := op("create", "create a "+r.singular, fieldValidation)
		post["requestBody"] = body
		collection["post"] = post
	}
	if slices.Contains(r.verbs, "update") {
		put := op("replace", "replace the "+r.singular, fieldValidation)
		put["requestBody"] = body
		item["put"] = put
	}
	if slices.Contains(r.verbs, "patch") {
		patch := op("patch", "patch the "+r.singular, fieldValidation)
		patch["requestBody"] = patchBody
		item["patch"] = patch
	}
	return map[string]any{base + r.plural: collection, base + r.plural + "/{name}": item}
}

// toOpenAPI converts a JSON Schema (draft 07 or 2020-12) to the OpenAPI 3.0
// schema subset: nullable instead of null types, enum instead of const,
// local $refs inlined (to a bounded depth), keywords OpenAPI 3.0 lacks
// dropped. The result describes the spec for explain; the hub still
// validates against the full JSON Schema.
func toOpenAPI(node, root any, depth int) any {
	m, ok := node.(map[string]any)
	if !ok {
		return node
	}
	if depth > 32 {
		return map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}
	}
	if ref, ok := m["$ref"].(string); ok {
		if target := resolveLocalRef(root, ref); target != nil {
			return toOpenAPI(target, root, depth+1)
		}
		return map[string]any{"x-kubernetes-preserve-unknown-fields": true}
	}
	out := map[string]any{}
	for k, v := range m {
		switch k {
		case "type":
			switch t := v.(type) {
			case string:
				if t != "null" {
					out["type"] = t
				}
			case []any:
				var kinds []string
				for _, x := range t {
					if s, ok := x.(string); ok && s != "null" {
						kinds = append(kinds, s)
					} else if s == "null" {
						out["nullable"] = true
					}
				}
				if len(kinds) == 1 {
					out["type"] = kinds[0]
				}
			}
		case "const":
			out["enum"] = []any{v}
		case "examples":
			if xs, ok := v.([]any); ok && len(xs) > 0 {
				out["example"] = xs[0]
			}
		case "exclusiveMinimum", "exclusiveMaximum":
			// Draft 6+ gives the bound; OpenAPI 3.0 a flag beside it.
			if n, ok := v.(float64); ok {
				bound := map[string]string{"exclusiveMinimum": "minimum", "exclusiveMaximum": "maximum"}[k]
				out[bound] = n
				out[k] = true
			}
		case "properties":
			if props, ok := v.(map[string]any); ok {
				conv := map[string]any{}
				for name, p := range props {
					conv[name] = toOpenAPI(p, root, depth+1)
				}
				out["properties"] = conv
			}
		case "items":
			if _, isList := v.([]any); !isList {
				out["items"] = toOpenAPI(v, root, depth+1)
			}
		case "additionalProperties", "not":
			if b, ok := v.(bool); ok {
				if k == "additionalProperties" {
					out[k] = b
				}
			} else {
				out[k] = toOpenAPI(v, root, depth+1)
			}
		case "allOf", "anyOf", "oneOf":
			if xs, ok := v.([]any); ok {
				conv := make([]any, len(xs))
				for i, x := range xs {
					conv[i] = toOpenAPI(x, root, depth+1)
				}
				out[k] = conv
			}
		case "title", "description", "required", "enum", "format", "pattern", "default",
			"minimum", "maximum", "multipleOf", "minLength", "maxLength", "minItems", "maxItems",
			"uniqueItems", "minProperties", "maxProperties", "readOnly", "writeOnly", "deprecated",
			// An extension, which OpenAPI allows: clients that read the
			// schema here (the web console, for a user who may not read
			// Types) learn which values are secret.
			"x-cairn-secret":
			out[k] = v
		}
	}
	return out
}

// resolveLocalRef follows "#/definitions/x" or "#/$defs/x" style pointers.
func resolveLocalRef(root any, ref string) any {
	p, ok := strings.CutPrefix(ref, "#/")
	if !ok {
		return nil
	}
	cur := root
	for _, tok := range strings.Split(p, "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[tok]
	}
	return cur
}

func objectMetaSchema() map[string]any {
	str := func(d string) map[string]any { return map[string]any{"type": "string", "description": d} }
	return map[string]any{
		"type":        "object",
		"description": "ObjectMeta is metadata that all persisted resources must have.",
		"properties": map[string]any{
			"name":              str("Name is unique within a namespace and Type. It defaults to the instance id."),
			"generateName":      str("GenerateName is a prefix the server completes to a unique name when name is empty."),
			"namespace":         str("Namespace of the instance; default is \"default\"."),
			"uid":               str("UID is the instance id (a UUID), immutable."),
			"resourceVersion":   str("ResourceVersion is the hub's change sequence number of the instance's last change; give it back on update for optimistic concurrency."),
			"generation":        map[string]any{"type": "integer", "format": "int64", "description": "Generation is the instance's resource version: 1, 2, ..."},
			"creationTimestamp": map[string]any{"type": "string", "format": "date-time", "description": "When the instance was created."},
			"labels": map[string]any{"type": "object", "additionalProperties": map[string]any{"type": "string"},
				"description": "Labels are indexed key/value pairs, usable in label selectors."},
			"annotations": map[string]any{"type": "object", "additionalProperties": map[string]any{"type": "string"},
				"description": "Annotations are key/value pairs for tools; hub.cairn.dev/backend and hub.cairn.dev/backend-context choose the backend at create."},
			"deletionTimestamp": map[string]any{"type": "string", "format": "date-time",
				"description": "Set while the deletion of a stack installation waits for its children to be deleted. Read-only."},
			"finalizers": map[string]any{"type": "array", "items": str(""), "x-kubernetes-list-type": "set",
				"description": "stacks.cairn.dev/children while the deletion of a stack installation waits for its children. Read-only."},
			"ownerReferences": map[string]any{"type": "array", "items": map[string]any{"$ref": componentSchemasPath + ownerReferenceRef},
				"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": []string{"uid"},
				"description": "The stack installation that owns the object, if one does. Read-only."},
			"managedFields": map[string]any{"type": "array", "items": map[string]any{"$ref": componentSchemasPath + managedFieldsRef},
				"description": "Which field manager owns which fields (server-side apply). Kept by the server."},
		},
	}
}

// metaSchemas are the meta/v1 schemas every kind's document refers to.
func metaSchemas() map[string]any {
	str := func(d string) map[string]any { return map[string]any{"type": "string", "description": d} }
	boolean := func(d string) map[string]any { return map[string]any{"type": "boolean", "description": d} }
	return map[string]any{
		objectMetaRef: objectMetaSchema(),
		managedFieldsRef: map[string]any{"type": "object",
			"description": "The fields one field manager owns, by one operation.",
			"properties": map[string]any{
				"manager":     str("The field manager: fieldManager, else the client's User-Agent product (kubectl-edit, ...)."),
				"operation":   str("Apply or Update."),
				"apiVersion":  str("The version of the fields' schema."),
				"time":        map[string]any{"type": "string", "format": "date-time", "description": "When the manager last changed these fields."},
				"fieldsType":  str("FieldsV1."),
				"fieldsV1":    map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true, "description": "The fields, as a trie."},
				"subresource": str("The subresource written, if any."),
			}},
		ownerReferenceRef: map[string]any{"type": "object",
			"description": "OwnerReference names the stack installation that owns the object.",
			"required":    []string{"apiVersion", "kind", "name", "uid"},
			"properties": map[string]any{
				"apiVersion":         str("The owner's API version."),
				"kind":               str("The owner's kind."),
				"name":               str("The owner's name."),
				"uid":                str("The owner's uid."),
				"controller":         boolean("Always true: the installation's stack controller manages the object."),
				"blockOwnerDeletion": boolean("Always true: the owner is deleted only after the object."),
			}},
	}
}

func listMetaSchema() map[string]any {
	return map[string]any{
		"type": "object",
		"properties": map[string]any{
			"resourceVersion": map[string]any{"type": "string"},
			"continue":        map[string]any{"type": "string"},
		},
	}
}

// rbacKindSchema describes a Role, ClusterRole or binding: no spec, but
// rules, or roleRef and subjects, at the top, as in Kubernetes.
func rbacKindSchema(r *resource, gvk []map[string]string) map[string]any {
	anyList := func(desc string) map[string]any {
		return map[string]any{"type": "array", "description": desc,
			"items": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}}
	}
	props := map[string]any{
		"apiVersion": map[string]any{"type": "string"},
		"kind":       map[string]any{"type": "string"},
		"metadata":   map[string]any{"$ref": "#/components/schemas/" + objectMetaRef},
	}
	if strings.HasSuffix(r.kind, "Binding") {
		props["roleRef"] = map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true,
			"description": "The Role or ClusterRole granted; it cannot change."}
		props["subjects"] = anyList("The users, groups and service accounts the role is granted to.")
	} else {
		props["rules"] = anyList("What the role grants: verbs on API groups and resources, or on paths.")
		if r.kind == "ClusterRole" {
			props["aggregationRule"] = map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true,
				"description": "Not supported by cairn."}
		}
	}
	return map[string]any{"type": "object", "description": r.kind + " of rbac.authorization.k8s.io/v1, held by the hub.",
		"properties": props, "x-kubernetes-group-version-kind": gvk}
}

// openAPIV2MediaType is the protobuf encoding of a Swagger 2.0 document as
// the API server labels it: clients ask for ...spec.v2@v1.0+protobuf, but a
// response naming that is refused by their media type parser ('@').
const openAPIV2MediaType = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"

// openAPIV2 serves a Swagger 2.0 document with no paths or definitions:
// cairn describes its kinds in OpenAPI v3 only. kubectl still reads
// /openapi/v2 when it looks for the fieldValidation parameter on a kind's
// PATCH operation in v3 and finds none (a kind that takes no PATCH, as
// Types and the policy), and without the document it stops
// every create, replace or apply -f of such a kind with "failed to download
// openapi". Finding no such kind here, it leaves validation to the server,
// which validates every write.
func (s *Server) openAPIV2(w http.ResponseWriter, r *http.Request) {
	doc := &openapiv2.Document{Swagger: "2.0", Info: &openapiv2.Info{Title: "cairn", Version: s.version.GitVersion}, Paths: &openapiv2.Paths{}}
	if strings.Contains(r.Header.Get("Accept"), "protobuf") {
		b, err := proto.Marshal(doc)
		if err != nil {
			writeStatus(w, errorStatus(fmt.Errorf("encode the OpenAPI v2 document: %w", err), target{}))
			return
		}
		w.Header().Set("Content-Type", openAPIV2MediaType)
		_, _ = w.Write(b)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"swagger": doc.Swagger, "info": map[string]string{"title": doc.Info.Title, "version": doc.Info.Version}, "paths": map[string]any{}})
}

// typeInstanceSchemas are the spec and status of a TypeInstance as it is
// served (TypeInstanceSpec, TypeInstanceStatus), for kubectl explain.
func typeInstanceSchemas() (spec, status map[string]any) {
	str := func(d string) map[string]any { return map[string]any{"type": "string", "description": d} }
	obj := func(d string, props map[string]any) map[string]any {
		return map[string]any{"type": "object", "description": d, "properties": props}
	}
	ids := func(d string) map[string]any {
		return map[string]any{"type": "array", "items": str(""), "description": d}
	}
	typeRef := func(d string) map[string]any {
		return obj(d, map[string]any{"path": str("The Type's path."), "revision": str("The Type's revision.")})
	}
	spec = obj("", map[string]any{
		"typeRef":   typeRef("The Type of the instance."),
		"namespace": str("The namespace the instance lives in."),
		"name":      str("The instance's name, unique per Type path and namespace."),
		"alias":     str("The instance's alias."),
		"attributes": map[string]any{"type": "array", "description": "The attributes of the latest resource version.",
			"items": typeRef("An attribute: a Type path and revision.")},
		"value": map[string]any{"x-kubernetes-preserve-unknown-fields": true,
			"description": "The instance's value, from its backend, validated against the Type's JSON Schema."},
		"backend": obj("The storage backend that holds the value.", map[string]any{
			"id":       str("The backend's TypeInstance id."),
			"abstract": map[string]any{"type": "boolean", "description": "True when the hub itself stores the value."},
			"context":  map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true, "description": "What the backend keeps about the value."},
		}),
	})
	delete(spec, "description") // specDescription's
	status = obj("What the hub tracks beside the value (read-only).", map[string]any{
		"lockedBy":        str("Who holds the instance's lock."),
		"createdBy":       str("Who created the latest resource version."),
		"resourceVersion": map[string]any{"type": "integer", "description": "The instance's resource version (1, 2, ...)."},
		"uses":            ids("The ids of the instances this one uses."),
		"usedBy":          ids("The ids of the instances that use this one."),
	})
	return spec, status
}

// objectStatusSchema is the hub's part of an object's status
// (ObjectStatus); what the instance's controllers report is served beside
// it, so other fields are kept.
func objectStatusSchema() map[string]any {
	str := func(d string) map[string]any { return map[string]any{"type": "string", "description": d} }
	ids := func(d string) map[string]any {
		return map[string]any{"type": "array", "items": str(""), "description": d}
	}
	return map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true,
		"description": "What the hub knows beyond the value: type, backend, lock, relations (read-only), and what the instance's controllers report.",
		"properties": map[string]any{
			"typeRef": map[string]any{"type": "object", "description": "The Type of the instance.",
				"properties": map[string]any{"path": str("The Type's path."), "revision": str("The Type's revision.")}},
			"alias": str("The instance's alias."),
			"backend": map[string]any{"type": "object", "description": "The storage backend that holds the value.",
				"properties": map[string]any{
					"id":       str("The backend's TypeInstance id."),
					"abstract": map[string]any{"type": "boolean", "description": "True when the hub itself stores the value."},
					"context":  map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true, "description": "What the backend keeps about the value."},
				}},
			"lockedBy":  str("Who holds the instance's lock."),
			"createdBy": str("Who created the instance."),
			"uses":      ids("The ids of the instances this one uses."),
			"usedBy":    ids("The ids of the instances that use this one."),
		}}
}
