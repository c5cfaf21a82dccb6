package sops

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// jsonFormat reads and writes sops' JSON files: one document, a top-level
// object, members in file order (duplicates kept, as sops keeps them).
type jsonFormat struct{}

func (jsonFormat) load(in []byte) ([]branch, error) {
	dec := json.NewDecoder(bytes.NewReader(in))
	dec.UseNumber()
	t, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if t != json.Delim('{') {
		return nil, errors.New("sops reads JSON files with a top-level object only")
	}
	b, err := jsonObject(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("data after the top-level object")
	}
	return []branch{b}, nil
}

func jsonObject(dec *json.Decoder) (branch, error) {
	b := branch{}
	for {
		t, err := dec.Token()
		if err != nil {
			return nil, err
		}
		if t == json.Delim('}') {
			return b, nil
		}
		k, ok := t.(string)
		if !ok {
			return nil, fmt.Errorf("object key expected, found %T", t)
		}
		v, err := jsonValue(dec)
		if err != nil {
			return nil, err
		}
		b = append(b, item{key: k, value: v})
	}
}

func jsonValue(dec *json.Decoder) (any, error) {
	t, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t {
	case json.Delim('{'):
		return jsonObject(dec)
	case json.Delim('['):
		l := []any{}
		for dec.More() {
			v, err := jsonValue(dec)
			if err != nil {
				return nil, err
			}
			l = append(l, v)
		}
		_, err := dec.Token() // ]
		return l, err
	}
	if n, ok := t.(json.Number); ok {
		// sops' types: an int when the number is a 64-bit integer, else a
		// float (so 1.0 becomes 1).
		if i, err := n.Int64(); err == nil {
			return int(i), nil
		}
		f, err := n.Float64()
		if err != nil {
			return nil, errors.New("a number out of range") // not quoted: it may be a secret
		}
		return f, nil
	}
	return t, nil // string, bool or nil
}

// emit writes the documents as sops does: its own member order, then
// encoding/json's indentation with an empty indent (each member on its
// own line, unindented), as cairn has always written them.
func (jsonFormat) emit(docs []branch) ([]byte, error) {
	if len(docs) != 1 {
		return nil, fmt.Errorf("a JSON file holds one document, not %d", len(docs))
	}
	var compact bytes.Buffer
	if err := jsonEncode(&compact, docs[0]); err != nil {
		return nil, err
	}
	var out bytes.Buffer
	if err := json.Indent(&out, compact.Bytes(), "", ""); err != nil {
		return nil, err
	}
	out.WriteByte('\n')
	return out.Bytes(), nil
}

func jsonEncode(w *bytes.Buffer, v any) error {
	switch v := v.(type) {
	case branch:
		w.WriteByte('{')
		first := true
		for _, it := range v {
			k, ok := it.key.(string)
			if !ok {
				continue // a comment
			}
			if !first {
				w.WriteByte(',')
			}
			first = false
			kb, _ := json.Marshal(k)
			w.Write(kb)
			w.WriteString(": ")
			if err := jsonEncode(w, it.value); err != nil {
				return err
			}
		}
		w.WriteByte('}')
	case []any:
		w.WriteByte('[')
		first := true
		for _, e := range v {
			if _, ok := e.(comment); ok {
				continue
			}
			if !first {
				w.WriteByte(',')
			}
			first = false
			if err := jsonEncode(w, e); err != nil {
				return err
			}
		}
		w.WriteByte(']')
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		w.Write(b)
	}
	return nil
}
