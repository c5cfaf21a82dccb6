package manifest

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/cairn-dev/cairn"
)

// CupAPIVersion is the apiVersion of flipt cup's ResourceDefinition.
const CupAPIVersion = "cup.flipt.io/v1alpha1"

// KindResourceDefinition is cup's resource definition kind.
const KindResourceDefinition = "ResourceDefinition"

// decodeCup decodes a cup ResourceDefinition into one Type per version,
// named by cairn.PathForGroupKind and cairn.RevisionForVersion:
//
//	{"apiVersion": "cup.flipt.io/v1alpha1", "kind": "ResourceDefinition",
//	 "metadata": {"name": "flags.flipt.io"},
//	 "names": {"kind": "Flag", "singular": "flag", "plural": "flags"},
//	 "spec": {"group": "flipt.io", "versions": {"v1alpha1": <JSON Schema>}}}
//
// A version's value is the JSON Schema of spec, or {"schema": <JSON Schema>}
// as in cup's own examples; that form may also declare the columns kubectl
// prints, as a CRD version does: {"schema": ..., "additionalPrinterColumns":
// [{name, type, jsonPath, ...}]}. names.categories groups the kind for
// `kubectl get <category>`, as a CRD's does.
func decodeCup(top map[string]json.RawMessage) ([]Document, []cairn.Cause) {
	d := &decoder{}
	d.known("", top, "apiVersion", "kind", "metadata", "names", "spec")
	if k, _ := str(top["kind"]); k != KindResourceDefinition {
		d.add("kind", fmt.Sprintf("%q is not supported for apiVersion %s (want %s)%s", k, CupAPIVersion, KindResourceDefinition, cupCounterpart(k, top)))
		return nil, d.causes
	}
	meta := d.object("metadata", top["metadata"], []string{"name", "labels", "annotations"})
	name := d.reqStr("metadata/name", meta["name"])
	names := d.object("names", top["names"], []string{"kind", "singular", "plural", "shortNames", "categories"})
	n := cairn.Names{
		Kind:       d.reqStr("names/kind", names["kind"]),
		Singular:   d.optStr("names/singular", names["singular"]),
		Plural:     d.reqStr("names/plural", names["plural"]),
		ShortNames: d.strList("names/shortNames", names["shortNames"]),
		Categories: d.strList("names/categories", names["categories"]),
	}
	spec := d.object("spec", top["spec"], []string{"group", "versions", "controller"})
	group := d.reqStr("spec/group", spec["group"])
	if name != "" && n.Plural != "" && group != "" && name != n.Plural+"."+group {
		d.add("metadata/name", fmt.Sprintf("%q must be <names.plural>.<spec.group> = %q", name, n.Plural+"."+group))
	}
	raw := spec["versions"]
	versions := d.object("spec/versions", raw, nil)
	if len(versions) == 0 && (raw == nil || isNull(raw) || versions != nil) {
		// Missing too: a definition without versions would register
		// nothing, and apply would say nothing.
		d.add("spec/versions", "must list at least one version")
	}
	if len(d.causes) > 0 {
		return nil, d.causes
	}
	var docs []Document
	for _, v := range slices.Sorted(maps.Keys(versions)) {
		field := "spec/versions/" + v
		rev, err := cairn.RevisionForVersion(v)
		if err != nil {
			d.add(field, err.Error())
			continue
		}
		schema := versions[v]
		var columns []cairn.PrinterColumn
		var wrapper map[string]json.RawMessage
		if json.Unmarshal(schema, &wrapper) == nil && wrapper["schema"] != nil && isVersionWrapper(wrapper) {
			columns = d.printerColumns(field+"/additionalPrinterColumns", wrapper["additionalPrinterColumns"])
			schema, field = wrapper["schema"], field+"/schema"
		}
		t := &cairn.Type{
			Path:       cairn.PathForGroupKind(group, n.Kind),
			Revision:   rev,
			JSONSchema: d.jsonSchema(field, schema),
			Group:      group,
			Version:    v,
			Names:      &n,

			PrinterColumns: columns,
		}
		docs = append(docs, Document{Kind: KindType, Type: t})
	}
	if len(d.causes) > 0 {
		return nil, d.causes
	}
	return docs, nil
}

// cupCounterpart says what cupd's other configuration documents are in
// cairn, for someone bringing a cup configuration: a Controller (with
// cupd's source) is a Git backend, a Binding a policy rule. Neither
// translates by itself: a Controller does not name its repository.
func cupCounterpart(kind string, top map[string]json.RawMessage) string {
	switch kind {
	case "Controller":
		var spec struct {
			Type string `json:"type"`
		}
		_ = json.Unmarshal(top["spec"], &spec) // a spec that is no object reads as the template one
		if spec.Type == "wasm" {
			return ": a cup WASM Controller is a Git backend whose controller.wasm.module is the controller's module (docs/git.md, docs/wasm.md)"
		}
		return ": a cup Controller is a Git backend (an instance of cap.core.type.hub.storage.git); the template controller's path_template is its paths.resource and directory_template its paths.list (docs/git.md)"
	case "Binding":
		return ": a cup Binding is a policy rule in cairn, sending the Types of its resources to a backend (typeInstance.rules, docs/policy.md)"
	}
	return ""
}

// isVersionWrapper reports whether a version's value is the
// {"schema", "additionalPrinterColumns"} form rather than a JSON Schema.
func isVersionWrapper(m map[string]json.RawMessage) bool {
	for k := range m {
		if k != "schema" && k != "additionalPrinterColumns" {
			return false
		}
	}
	return true
}
