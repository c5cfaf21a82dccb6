package manifest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/cairn-dev/cairn"
)

// decoder walks a document's JSON and collects every problem as a cause
// (fields slash-separated, as in the hub's causes) instead of stopping at the
// first. encoding/json's DisallowUnknownFields is not used because its error
// names neither the path of the field nor the fields that are allowed, and
// it matches field names case-insensitively.
type decoder struct {
	causes []cairn.Cause
}

func (d *decoder) add(field, msg string) {
	d.causes = append(d.causes, cairn.Cause{Field: field, Message: msg})
}

// object decodes raw as a JSON object. Absent or null gives nil silently;
// anything else that is not an object records a cause. When known is not
// nil, keys outside it are reported.
func (d *decoder) object(field string, raw json.RawMessage, known []string) map[string]json.RawMessage {
	if raw == nil || isNull(raw) {
		return nil
	}
	var m map[string]json.RawMessage
	if first(raw) != '{' || json.Unmarshal(raw, &m) != nil {
		if field == "" {
			d.add("", "must be an object (a document with apiVersion, kind, metadata and spec)")
		} else {
			d.add(field, "must be an object")
		}
		return nil
	}
	if known != nil {
		d.known(field, m, known...)
	}
	return m
}

// known reports the keys of m that are not in known, in sorted order.
func (d *decoder) known(field string, m map[string]json.RawMessage, known ...string) {
	var unknown []string
	for k := range m {
		if !slices.Contains(known, k) {
			unknown = append(unknown, k)
		}
	}
	slices.Sort(unknown)
	for _, k := range unknown {
		d.add(join(field, k), fmt.Sprintf("is not a known field (known: %s)", strings.Join(known, ", ")))
	}
}

func join(field, key string) string {
	if field == "" {
		return key
	}
	return field + "/" + key
}

// str returns raw as a string and whether it is one.
func str(raw json.RawMessage) (string, bool) {
	var s string
	if first(raw) != '"' || json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

// optStr decodes an optional string field.
func (d *decoder) optStr(field string, raw json.RawMessage) string {
	if raw == nil || isNull(raw) {
		return ""
	}
	s, ok := str(raw)
	if !ok {
		d.add(field, "must be a string")
	}
	return s
}

// reqStr decodes a required, non-empty string field.
func (d *decoder) reqStr(field string, raw json.RawMessage) string {
	if raw == nil || isNull(raw) {
		d.add(field, "is required")
		return ""
	}
	s := d.optStr(field, raw)
	if _, ok := str(raw); ok && s == "" {
		d.add(field, "must not be empty")
	}
	return s
}

func (d *decoder) strList(field string, raw json.RawMessage) []string {
	if raw == nil || isNull(raw) {
		return nil
	}
	var out []string
	if first(raw) != '[' || json.Unmarshal(raw, &out) != nil {
		d.add(field, "must be an array of strings")
		return nil
	}
	return out
}

func (d *decoder) strMap(field string, raw json.RawMessage) map[string]string {
	if raw == nil || isNull(raw) {
		return nil
	}
	m := d.object(field, raw, nil)
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		s, ok := str(v)
		if !ok {
			// YAML reads `env: true` or `replicas: 3` as non-strings; say how to fix it.
			d.add(join(field, k), fmt.Sprintf("must be a string (got %s; quote it)", v))
			continue
		}
		out[k] = s
	}
	return out
}

func first(raw json.RawMessage) byte {
	t := bytes.TrimLeft(raw, " \t\r\n")
	if len(t) == 0 {
		return 0
	}
	return t[0]
}

func isNull(raw json.RawMessage) bool {
	return string(bytes.TrimSpace(raw)) == "null"
}

// printerColumns decodes additionalPrinterColumns in the form of a
// CustomResourceDefinition's: [{name, type, jsonPath, description,
// priority, format}].
func (d *decoder) printerColumns(field string, raw json.RawMessage) []cairn.PrinterColumn {
	if raw == nil || isNull(raw) {
		return nil
	}
	var items []json.RawMessage
	if first(raw) != '[' || json.Unmarshal(raw, &items) != nil {
		d.add(field, "must be an array of columns ({name, type, jsonPath, description, priority, format})")
		return nil
	}
	out := make([]cairn.PrinterColumn, 0, len(items))
	for i, it := range items {
		f := fmt.Sprintf("%s/%d", field, i)
		m := d.object(f, it, []string{"name", "type", "jsonPath", "description", "priority", "format"})
		if m == nil {
			if isNull(it) {
				d.add(f, "must be an object")
			}
			continue
		}
		c := cairn.PrinterColumn{
			Name:        d.reqStr(f+"/name", m["name"]),
			Type:        d.reqStr(f+"/type", m["type"]),
			JSONPath:    d.reqStr(f+"/jsonPath", m["jsonPath"]),
			Description: d.optStr(f+"/description", m["description"]),
			Format:      d.optStr(f+"/format", m["format"]),
		}
		if p := m["priority"]; p != nil && !isNull(p) {
			if json.Unmarshal(p, &c.Priority) != nil || c.Priority < 0 {
				d.add(f+"/priority", "must be a non-negative integer")
			}
		}
		out = append(out, c)
	}
	return out
}
