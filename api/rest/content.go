package rest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"
)

// bodyMediaTypes are what create, update and delete bodies may be, as on
// the API server (which adds protobuf and CBOR). PATCH has its own.
const bodyMediaTypes = "application/json, application/yaml"

// checkMediaType refuses a create, update or delete body of a media type
// other than JSON or YAML with 415. A body without a Content-Type is
// taken as JSON.
func checkMediaType(r *http.Request) error {
	ct := r.Header.Get("Content-Type")
	if ct == "" || ct == "application/json" {
		return nil // the common cases, without parsing
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err == nil && (mt == "application/json" || mt == "application/yaml") {
		return nil
	}
	return unsupportedMediaType(ct, bodyMediaTypes)
}

// bodyJSON returns a body checked by checkMediaType as JSON: YAML is
// converted (one document), JSON is returned as is.
func bodyJSON(r *http.Request, body []byte) ([]byte, error) {
	ct := r.Header.Get("Content-Type")
	if ct == "" || ct == "application/json" {
		return body, nil
	}
	mt, _, _ := mime.ParseMediaType(ct)
	if mt != "application/yaml" {
		return body, nil
	}
	out, err := yaml.YAMLToJSON(body)
	if err != nil {
		return nil, errStatus{badRequest("the request body is not valid YAML: %v", err)}
	}
	return out, nil
}

func unsupportedMediaType(got, accepted string) error {
	return errStatus{newStatus(http.StatusUnsupportedMediaType, "UnsupportedMediaType",
		fmt.Sprintf("the body of the request was in an unknown format - accepted media types include: %s (got %q)", accepted, got))}
}

// fieldValidation is the request's fieldValidation: Strict, Warn (the
// default, as on the API server) or Ignore.
func fieldValidation(r *http.Request) (string, error) {
	switch v := query(r).Get("fieldValidation"); v {
	case "":
		return "Warn", nil
	case "Strict", "Warn", "Ignore":
		return v, nil
	default:
		return "", errStatus{badRequest("fieldValidation %q is not supported: want Strict, Warn or Ignore", v)}
	}
}

// checkFields reports the fields of body that into (a struct type) does
// not know, as the API server does: refused under fieldValidation=Strict
// (400, "strict decoding error: unknown field ..."), a Warning header
// under Warn, nothing under Ignore. Values (json.RawMessage, maps) are
// not looked into: the Type's JSON Schema judges them.
func checkFields(w http.ResponseWriter, r *http.Request, body []byte, into *fieldTree) error {
	mode, err := fieldValidation(r)
	if err != nil || mode == "Ignore" {
		return err
	}
	var unknown []string
	// Invalid JSON finds nothing here: the decoder reports it.
	walkUnknown(into, body, "", &unknown)
	if len(unknown) == 0 {
		return nil
	}
	slices.Sort(unknown)
	msgs := make([]string, len(unknown))
	for i, f := range unknown {
		msgs[i] = fmt.Sprintf("unknown field %q", f)
	}
	if mode == "Strict" {
		return errStatus{badRequest("strict decoding error: %s", strings.Join(msgs, ", "))}
	}
	for _, m := range msgs {
		addWarning(w, m)
	}
	return nil
}

// addWarning adds an RFC 7234 Warning header as the API server sends them
// (code 299, agent "-"); kubectl prints them as "Warning: ...".
func addWarning(w http.ResponseWriter, msg string) {
	w.Header().Add("Warning", "299 - "+strconv.Quote(msg))
}

// answerHeaderKey keys the header of a write's answer in its request's
// context, for what learns of a warning deep in the write (warnAnswer).
type answerHeaderKey struct{}

func withAnswerHeader(ctx context.Context, h http.Header) context.Context {
	return context.WithValue(ctx, answerHeaderKey{}, h)
}

// warnAnswer adds a Warning to the answer of write request r (before it
// is written).
func warnAnswer(r *http.Request, msg string) {
	if h, ok := r.Context().Value(answerHeaderKey{}).(http.Header); ok {
		h.Add("Warning", "299 - "+strconv.Quote(msg))
	}
}

var rawMessageType = reflect.TypeOf(json.RawMessage(nil))

// fieldTree is what checkFields knows of a Go type a body decodes into:
// the fields of a struct by JSON name, or the element of a slice. Values
// the type keeps whole (json.RawMessage, maps, scalars) have none: nil.
type fieldTree struct {
	fields map[string]*fieldTree // a struct's; nil for a slice
	elem   *fieldTree            // a slice's element
}

// The types request bodies decode into, read once.
var (
	inObjectFields       = fieldTreeOf(reflect.TypeOf(inObject{}), nil)
	inTypeInstanceFields = fieldTreeOf(reflect.TypeOf(inTypeInstance{}), nil)
)

// fieldTreeOf reads type t; seen ties recursive types.
func fieldTreeOf(t reflect.Type, seen map[reflect.Type]*fieldTree) *fieldTree {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == rawMessageType {
		return nil
	}
	if ft, ok := seen[t]; ok {
		return ft
	}
	if seen == nil {
		seen = map[reflect.Type]*fieldTree{}
	}
	switch t.Kind() {
	case reflect.Struct:
		ft := &fieldTree{fields: map[string]*fieldTree{}}
		seen[t] = ft
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "" {
				name = f.Name
			}
			if name != "-" {
				ft.fields[name] = fieldTreeOf(f.Type, seen)
			}
		}
		return ft
	case reflect.Slice:
		elem := fieldTreeOf(t.Elem(), seen)
		if elem == nil {
			return nil
		}
		ft := &fieldTree{elem: elem}
		seen[t] = ft
		return ft
	}
	return nil
}

// walkUnknown appends to out the fields of doc (JSON) that ft does not
// know; nothing when doc is not valid JSON. Only objects and arrays where
// ft has a struct or a slice are looked into; values kept whole are
// skipped unread.
func walkUnknown(ft *fieldTree, doc json.RawMessage, prefix string, out *[]string) {
	if ft != nil && json.Valid(doc) {
		walkValid(ft, doc, prefix, out)
	}
}

// walkValid is walkUnknown for valid JSON. An object's members are read
// in place (no map, no copies of their values): a key given twice counts
// once, its last value walked, as decoding into a map keeps it.
func walkValid(ft *fieldTree, doc []byte, prefix string, out *[]string) {
	switch {
	case ft == nil:
	case ft.fields != nil:
		var small [8]member
		ms, ok := objectMembers(doc, small[:0])
		if !ok {
			return // not an object
		}
		var last map[string]int // by key, for objects of many members
		if len(ms) > 16 {
			last = make(map[string]int, len(ms))
			for i, m := range ms {
				last[string(m.key)] = i
			}
		}
	members:
		for i, m := range ms {
			if last != nil {
				if last[string(m.key)] != i {
					continue
				}
			} else {
				for _, later := range ms[i+1:] {
					if bytes.Equal(later.key, m.key) {
						continue members
					}
				}
			}
			sub, ok := ft.fields[string(m.key)]
			if !ok {
				*out = append(*out, prefix+string(m.key))
				continue
			}
			if sub != nil {
				walkValid(sub, m.value, prefix+string(m.key)+".", out)
			}
		}
	default:
		var xs []json.RawMessage
		if json.Unmarshal(doc, &xs) != nil {
			return // not an array
		}
		for i, x := range xs {
			walkValid(ft.elem, x, strings.TrimSuffix(prefix, ".")+"["+strconv.Itoa(i)+"].", out)
		}
	}
}

// member is one member of a JSON object: its key as decoded and its value.
type member struct {
	key   []byte
	value []byte
}

// objectMembers appends the members of doc, valid JSON, to ms in order;
// false when doc is not an object.
func objectMembers(doc []byte, ms []member) ([]member, bool) {
	i := skipSpace(doc, 0)
	if i >= len(doc) || doc[i] != '{' {
		return nil, false
	}
	i = skipSpace(doc, i+1)
	if doc[i] == '}' {
		return ms, true
	}
	for {
		end := skipValue(doc, i) // the key, a string
		key := doc[i+1 : end-1]
		if bytes.IndexByte(key, '\\') >= 0 || !isASCII(key) {
			// Escapes or non-ASCII bytes: decoded as the decoder does
			// (invalid UTF-8 becomes U+FFFD).
			var k string
			_ = json.Unmarshal(doc[i:end], &k)
			key = []byte(k)
		}
		i = skipSpace(doc, skipSpace(doc, end)+1) // past the colon
		end = skipValue(doc, i)
		ms = append(ms, member{key: key, value: doc[i:end]})
		i = skipSpace(doc, end)
		if doc[i] == '}' {
			return ms, true
		}
		i = skipSpace(doc, i+1) // past the comma
	}
}

func isASCII(b []byte) bool {
	for _, c := range b {
		if c >= 0x80 {
			return false
		}
	}
	return true
}

func skipSpace(doc []byte, i int) int {
	for i < len(doc) && (doc[i] == ' ' || doc[i] == '\t' || doc[i] == '\n' || doc[i] == '\r') {
		i++
	}
	return i
}

// skipValue returns the end of the value of valid JSON doc starting at i.
func skipValue(doc []byte, i int) int {
	depth := 0
	for ; i < len(doc); i++ {
		switch doc[i] {
		case '"':
			for i++; doc[i] != '"'; i++ {
				if doc[i] == '\\' {
					i++
				}
			}
			if depth == 0 {
				return i + 1
			}
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				return i + 1
			}
			if depth < 0 {
				return i // the end of the enclosing value: a scalar ended here
			}
		case ',', ' ', '\t', '\n', '\r':
			if depth == 0 {
				return i
			}
		}
	}
	return i
}
