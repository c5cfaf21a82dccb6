package rest

import (
	"bytes"
	"encoding/json"
)

// decodeObjectPlain decodes body as json.Unmarshal decodes it into an
// inObject, without reflection, when body is plain: valid JSON, an object
// whose members, and those of its metadata, are each given once under the
// exact name of a field, their strings printable ASCII without escapes,
// labels and annotations objects of such strings. Anything else (a name
// in other case, an unknown or repeated member, a null, a string to
// unescape) is false: the caller decodes with json.Unmarshal. A create's
// body is decoded at every create (json.Unmarshal: 1.8 % of its CPU).
func decodeObjectPlain(body []byte) (o inObject, ok bool) {
	if !json.Valid(body) {
		return o, false
	}
	var small [8]member
	ms, ok := plainMembers(body, small[:0])
	if !ok {
		return o, false
	}
	for _, m := range ms {
		switch string(m.key) {
		case "apiVersion":
			o.APIVersion, ok = plainString(m.value)
		case "kind":
			o.Kind, ok = plainString(m.value)
		case "metadata":
			o.Metadata, ok = decodeMetaPlain(m.value)
		case "spec":
			o.Spec = bytes.Clone(m.value)
		case "status":
			o.Status = bytes.Clone(m.value)
		default:
			ok = false
		}
		if !ok {
			return inObject{}, false
		}
	}
	return o, true
}

func decodeMetaPlain(doc []byte) (md inMeta, ok bool) {
	var small [8]member
	ms, ok := plainMembers(doc, small[:0])
	if !ok {
		return md, false
	}
	for _, m := range ms {
		ok = true
		switch string(m.key) {
		case "name":
			md.Name, ok = plainString(m.value)
		case "generateName":
			md.GenerateName, ok = plainString(m.value)
		case "namespace":
			md.Namespace, ok = plainString(m.value)
		case "uid":
			md.UID, ok = plainString(m.value)
		case "resourceVersion":
			md.ResourceVersion, ok = plainString(m.value)
		case "labels":
			md.Labels, ok = plainStringMap(m.value)
		case "annotations":
			md.Annotations, ok = plainStringMap(m.value)
		case "generation":
			md.Generation = bytes.Clone(m.value)
		case "creationTimestamp":
			md.CreationTimestamp = bytes.Clone(m.value)
		case "deletionTimestamp":
			md.DeletionTimestamp = bytes.Clone(m.value)
		case "deletionGracePeriodSeconds":
			md.DeletionGracePeriodSeconds = bytes.Clone(m.value)
		case "ownerReferences":
			md.OwnerReferences = bytes.Clone(m.value)
		case "finalizers":
			md.Finalizers = bytes.Clone(m.value)
		case "managedFields":
			md.ManagedFields = bytes.Clone(m.value)
		case "selfLink":
			md.SelfLink = bytes.Clone(m.value)
		default:
			ok = false
		}
		if !ok {
			return inMeta{}, false
		}
	}
	return md, true
}

// plainMembers appends the members of doc, valid JSON, to ms: false when
// doc is not an object, has more than 64 members or gives a key twice.
func plainMembers(doc []byte, ms []member) ([]member, bool) {
	ms, ok := objectMembers(doc, ms)
	if !ok || len(ms) > 64 || repeated(ms) {
		return nil, false
	}
	return ms, true
}

// repeated reports whether a key is given twice (plainMembers bounds the
// members to keep this quadratic walk short).
func repeated(ms []member) bool {
	for i, m := range ms {
		for _, later := range ms[i+1:] {
			if bytes.Equal(m.key, later.key) {
				return true
			}
		}
	}
	return false
}

// plainString is the JSON string v when it is printable ASCII without
// escapes, as json.Unmarshal decodes it.
func plainString(v []byte) (string, bool) {
	if len(v) < 2 || v[0] != '"' {
		return "", false
	}
	in := v[1 : len(v)-1]
	for _, c := range in {
		if c < 0x20 || c > 0x7e || c == '\\' {
			return "", false
		}
	}
	return string(in), true
}

// plainStringMap is the JSON object v of plain strings (plainString),
// each key given once, as json.Unmarshal decodes it into a map.
func plainStringMap(v []byte) (map[string]string, bool) {
	var small [8]member
	ms, ok := plainMembers(v, small[:0])
	if !ok {
		return nil, false
	}
	out := make(map[string]string, len(ms))
	for _, m := range ms {
		s, ok := plainString(m.value)
		if !ok {
			return nil, false
		}
		out[string(m.key)] = s
	}
	return out, true
}
