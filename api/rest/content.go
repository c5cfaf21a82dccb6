package rest

import (
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
	if ct == "" {
		return nil
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
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
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
	switch v := r.URL.Query().Get("fieldValidation"); v {
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
func checkFields(w http.ResponseWriter, r *http.Request, body []byte, into any) error {
	mode, err := fieldValidation(r)
	if err != nil || mode == "Ignore" {
		return err
	}
	var unknown []string
	// Invalid JSON finds nothing here: the decoder reports it.
	walkUnknown(reflect.TypeOf(into), body, "", &unknown)
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

var rawMessageType = reflect.TypeOf(json.RawMessage(nil))

// walkUnknown appends to out the fields of doc (valid JSON) that type t
// does not know. Only objects and arrays where t has a struct or a slice
// are decoded (one level at a time); values t keeps whole (json.RawMessage,
// maps, scalars) are not looked into.
func walkUnknown(t reflect.Type, doc json.RawMessage, prefix string, out *[]string) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == rawMessageType {
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		var m map[string]json.RawMessage
		if json.Unmarshal(doc, &m) != nil {
			return // not an object
		}
		if len(m) == 0 {
			return
		}
		fields := make(map[string]reflect.Type, t.NumField())
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "" {
				name = f.Name
			}
			if name != "-" {
				fields[name] = f.Type
			}
		}
		for k, v := range m {
			ft, ok := fields[k]
			if !ok {
				*out = append(*out, prefix+k)
				continue
			}
			if looksInto(ft) {
				walkUnknown(ft, v, prefix+k+".", out)
			}
		}
	case reflect.Slice:
		var xs []json.RawMessage
		if json.Unmarshal(doc, &xs) != nil {
			return // not an array
		}
		for i, x := range xs {
			walkUnknown(t.Elem(), x, strings.TrimSuffix(prefix, ".")+"["+strconv.Itoa(i)+"].", out)
		}
	}
}

// looksInto reports whether walkUnknown finds fields in a value of type t.
func looksInto(t reflect.Type) bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == rawMessageType:
		return false
	case t.Kind() == reflect.Slice:
		return looksInto(t.Elem())
	}
	return t.Kind() == reflect.Struct
}
