package rest

import (
	"encoding/json"
	"reflect"
	"strings"
	"time"

	"github.com/cairn-dev/cairn/controller/install"
	"github.com/cairn-dev/cairn/policy"
)

// hubKindShapes are the Go types the hub's own kinds are served with: the
// OpenAPI schema of each is derived from them, so kubectl explain shows
// what an object of that kind holds (a nil status: the kind has none).
func hubKindShapes(hubKind string) (spec, status reflect.Type, ok bool) {
	switch hubKind {
	case "types":
		return reflect.TypeFor[TypeSpec](), nil, true
	case "backends":
		return reflect.TypeFor[BackendSpec](), nil, true
	case "lockrequests":
		return reflect.TypeFor[LockRequestSpec](), reflect.TypeFor[LockRequestStatus](), true
	case "policies":
		return reflect.TypeFor[policy.Policy](), nil, true
	case "stacks":
		return reflect.TypeFor[StackSpec](), nil, true
	case "plans":
		return reflect.TypeFor[install.Request](), reflect.TypeFor[PlanStatus](), true
	case "installs":
		return reflect.TypeFor[install.Request](), nil, true
	case "proposals":
		return reflect.TypeFor[ProposalSpec](), reflect.TypeFor[ProposalStatus](), true
	}
	return nil, nil, false
}

// hubFieldDescriptions explain the fields of the hub's kinds, by kind and
// path; a field not listed has none (kubectl prints <no description>).
var hubFieldDescriptions = map[string]string{
	"types.spec.path":                        "The Type's path, such as cap.type.database.postgresql.config.",
	"types.spec.revision":                    "The Type's revision, a semantic version; with the path it names the Type (<path>:<revision>), and is immutable.",
	"types.spec.additionalRefs":              "The parent nodes (abstract Types) this Type implements.",
	"types.spec.jsonSchema":                  "The JSON Schema every value of the Type is validated against.",
	"types.spec.rest":                        "The group, version, names and printer columns the Type's instances are served with as a Kubernetes kind; absent: served as TypeInstances only.",
	"backends.spec.typeRef":                  "The Type of the backend's storage (cap.core.type.hub.storage.*).",
	"backends.spec.alias":                    "The name the backend is known by in policies and tables.",
	"backends.spec.url":                      "Where the backend is reached (a gRPC address); empty for the hub's in-process backends.",
	"backends.spec.acceptValue":              "Whether the backend stores values given to it, rather than deriving them from its context.",
	"backends.spec.contextSchema":            "The JSON Schema of the context an instance stored in the backend carries.",
	"backends.spec.abstract":                 "True for the hub's built-in store, which keeps values itself.",
	"lockrequests.spec.action":               "lock (default) or unlock.",
	"lockrequests.spec.ids":                  "The ids of the TypeInstances, locked or unlocked all or none.",
	"lockrequests.spec.owner":                "The lock owner.",
	"lockrequests.status.succeeded":          "Whether every instance was locked or unlocked.",
	"stacks.spec.archive":                    "The package, a base64 gzipped tar; only read on create, never served.",
	"stacks.spec.digest":                     "The SHA-256 of the package's canonical archive.",
	"stacks.spec.installationType":           "The Type of the stack's installations.",
	"stacks.spec.manifest":                   "The package's stack.yaml.",
	"proposals.status.state":                 "open, merged or closed.",
	"proposals.spec.instances":               "The instances whose latest resource version carries the proposed change.",
	"installation.status.observedGeneration": "The installation's resource version (metadata.generation) the status describes.",
	"installation.status.conditions":         "Synced (the last reconcile applied the render), Ready (every child passes its readiness checks) and, during a deletion, Deleting.",
	"installation.status.outputs":            "The stack's outputs, from the parameters and the children as they are now.",
	"installation.status.stack":              "The stack version (name, version, digest) that rendered the children.",
	"installation.status.configuration":      "The configuration set whose children the last successful reconcile applied.",
	"installation.status.sharing":            "The installation interface's digest and the interface the stack provides (dependency resolution).",
	"installation.status.resources":          "Every child as the last reconcile saw it: its kind, name, backend, and whether it is synced and ready.",
	"installation.status.events":             "The last 10 things that happened (an apply that changed children, a failure, a deletion step), newest last.",
}

// goSchema is the OpenAPI schema of values of t as encoding/json writes
// them. seen guards against recursive types.
func goSchema(t reflect.Type, descKey string, seen map[reflect.Type]bool) map[string]any {
	s := goSchemaOf(t, descKey, seen)
	if d, ok := hubFieldDescriptions[descKey]; ok {
		s["description"] = d
	}
	return s
}

func goSchemaOf(t reflect.Type, descKey string, seen map[reflect.Type]bool) map[string]any {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t {
	case reflect.TypeFor[json.RawMessage](), reflect.TypeFor[any]():
		return map[string]any{"x-kubernetes-preserve-unknown-fields": true}
	case reflect.TypeFor[time.Time]():
		return map[string]any{"type": "string", "format": "date-time"}
	}
	switch t.Kind() {
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return map[string]any{"type": "integer"}
	case reflect.Float32, reflect.Float64:
		return map[string]any{"type": "number"}
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return map[string]any{"type": "string", "format": "byte"}
		}
		return map[string]any{"type": "array", "items": goSchema(t.Elem(), "", seen)}
	case reflect.Map:
		return map[string]any{"type": "object", "additionalProperties": goSchema(t.Elem(), "", seen)}
	case reflect.Struct:
		if seen[t] {
			return map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}
		}
		seen[t] = true
		defer delete(seen, t)
		props := map[string]any{}
		addStructFields(t, descKey, props, seen)
		return map[string]any{"type": "object", "properties": props}
	}
	return map[string]any{"x-kubernetes-preserve-unknown-fields": true}
}

// addStructFields adds t's JSON fields to props, those of embedded
// structs inline as encoding/json does.
func addStructFields(t reflect.Type, descKey string, props map[string]any, seen map[reflect.Type]bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" || (!f.IsExported() && !f.Anonymous) {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				addStructFields(ft, descKey, props, seen)
				continue
			}
		}
		if name == "" {
			name = f.Name
		}
		props[name] = goSchema(f.Type, descKey+"."+name, seen)
	}
}
