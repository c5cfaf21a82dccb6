package manifest

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/cairn-dev/cairn"
)

// Raw is one document of a source as JSON, before its kind is interpreted.
// Clients that pass documents on to a server (the CLI in client mode) need
// the documents of kinds this package does not know (instances of user
// Types, served objects) as they were written, read the same way Decode
// reads YAML and JSON so that a file means the same in both modes.
type Raw struct {
	Pos  Position
	JSON json.RawMessage
	// APIVersion and Kind are the document's top-level fields, "" when
	// absent; an OCF manifest has ocfVersion instead of apiVersion.
	APIVersion string
	Kind       string
	OCF        bool
}

// Split reads every document of r as a JSON object, flattening Lists
// (kind List, apiVersion v1 or hub.cairn.dev/v1) and JSON arrays into their
// items, as Decode does. Like Decode it returns the documents that read
// with the errors of the others joined; callers should not act on a partial
// result.
func Split(r io.Reader, source string) ([]Raw, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, &cairn.Error{Code: cairn.CodeInvalid, Subject: source, Msg: "read: " + err.Error(), Err: err}
	}
	var out []Raw
	var errs []error
	for i, raw := range splitSource(data) {
		pos := Position{Source: source, Index: i, Item: -1, Line: raw.line}
		if raw.err != nil {
			errs = append(errs, &cairn.Error{Code: cairn.CodeInvalid, Subject: pos.String(), Msg: raw.err.Error(), Err: raw.err})
			continue
		}
		docs, err := splitRaw(raw.json, pos)
		out = append(out, docs...)
		if err != nil {
			errs = append(errs, err)
		}
	}
	return out, errors.Join(errs...)
}

func splitRaw(raw json.RawMessage, pos Position) ([]Raw, error) {
	if first(raw) == '[' {
		var items []json.RawMessage
		if err := json.Unmarshal(raw, &items); err != nil {
			return nil, docError(pos, []cairn.Cause{{Message: "must be an object or an array of objects: " + err.Error()}})
		}
		return splitItems(items, pos)
	}
	d := &decoder{}
	top := d.object("", raw, nil)
	if top == nil {
		return nil, docError(pos, d.causes)
	}
	doc := Raw{Pos: pos, JSON: raw}
	doc.APIVersion, _ = str(top["apiVersion"])
	doc.Kind, _ = str(top["kind"])
	_, doc.OCF = top["ocfVersion"]
	if doc.Kind != string(KindList) {
		return []Raw{doc}, nil
	}
	if pos.Item >= 0 {
		return nil, docError(pos, []cairn.Cause{{Field: "kind", Message: "a List cannot hold another List"}})
	}
	d.object("", raw, []string{"apiVersion", "kind", "metadata", "items"})
	if top["apiVersion"] == nil {
		d.add("apiVersion", "is required (want v1 or "+APIVersion+")")
	} else if v := d.optStr("apiVersion", top["apiVersion"]); v != "v1" && v != APIVersion {
		d.add("apiVersion", fmt.Sprintf("%q is not supported for kind List (want v1 or %s)", v, APIVersion))
	}
	var items []json.RawMessage
	if it, ok := top["items"]; !ok {
		d.add("items", "is required")
	} else if err := json.Unmarshal(it, &items); err != nil || first(it) != '[' {
		d.add("items", "must be an array of documents")
	}
	if len(d.causes) > 0 {
		return nil, docError(pos, d.causes)
	}
	return splitItems(items, pos)
}

func splitItems(items []json.RawMessage, pos Position) ([]Raw, error) {
	var out []Raw
	var errs []error
	for i, it := range items {
		p := pos
		p.Item = i
		if first(it) == '[' {
			errs = append(errs, docError(p, []cairn.Cause{{Message: "must be an object; lists do not nest"}}))
			continue
		}
		docs, err := splitRaw(it, p)
		out = append(out, docs...)
		if err != nil {
			errs = append(errs, err)
		}
	}
	return out, errors.Join(errs...)
}

// DecodeRaw decodes one document read by Split as Decode would, keeping its
// position.
func DecodeRaw(r Raw) ([]Document, error) {
	return decodeOne(r.JSON, r.Pos)
}
