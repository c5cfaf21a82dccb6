package rest

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"strconv"

	jsonpatch "github.com/evanphx/json-patch/v5"

	"github.com/cairn-dev/cairn"
)

// A merge patch (RFC 7386) that changes the spec only, as most updates
// do ({"spec":{"description":"..."}}), leaves every other member of the
// object as served. It is applied to the spec alone: the object is not
// encoded, patched whole, decoded again and checked for unknown fields
// (the served members hold none, and spec takes any field). The result is
// the object the whole-document path gives (TestSpecMergePatchAsWhole).

// specMergePatch returns the spec member of a merge patch whose only
// member it is, when it is an object.
func specMergePatch(ct string, body []byte) (json.RawMessage, bool) {
	if ct != "application/merge-patch+json" {
		return nil, false
	}
	var members map[string]json.RawMessage
	if json.Unmarshal(body, &members) != nil || len(members) != 1 {
		return nil, false
	}
	p, ok := members["spec"]
	if !ok || len(p) == 0 || p[0] != '{' {
		return nil, false
	}
	return p, true
}

// patchSpec applies the spec merge patch p to cur as served as an object
// of res; ok is false when cur's value is not an object (the whole
// document is patched then).
func patchSpec(res *resource, cur cairn.Instance, p json.RawMessage) (o inObject, ok bool, err error) {
	v := cur.Latest.Value
	if len(v) == 0 || v[0] != '{' {
		return inObject{}, false, nil
	}
	// The value as the served object holds it: compacted, HTML-escaped.
	served, err := json.Marshal(v)
	if err != nil {
		return inObject{}, false, nil
	}
	spec, err := jsonpatch.MergePatch(served, p)
	if err != nil {
		return inObject{}, false, errStatus{newStatus(http.StatusUnprocessableEntity, "Invalid", fmt.Sprintf("the patch could not be applied: %v", err))}
	}
	o = inObject{APIVersion: res.apiVersion(), Kind: res.kind, Spec: spec}
	o.Metadata = inMeta{Name: cur.Name, Namespace: cur.Namespace, UID: cur.ID,
		ResourceVersion: strconv.FormatInt(cur.Seq, 10), ManagedFields: cur.ManagedFields}
	if len(cur.Labels) > 0 {
		o.Metadata.Labels = maps.Clone(cur.Labels)
	}
	if len(cur.Annotations) > 0 {
		o.Metadata.Annotations = maps.Clone(cur.Annotations)
	}
	return o, true, nil
}

// patchWhole applies a patch to the whole object cur as served.
func patchWhole(res *resource, cur cairn.Instance, apply func([]byte) ([]byte, error)) ([]byte, error) {
	doc, err := json.Marshal(toObject(res, cur))
	if err != nil {
		return nil, err
	}
	patched, err := apply(doc)
	if err != nil {
		return nil, errStatus{newStatus(http.StatusUnprocessableEntity, "Invalid", fmt.Sprintf("the patch could not be applied: %v", err))}
	}
	return patched, nil
}
