package schema

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// decodeInstance decodes a document to validate as jsonschema.UnmarshalJSON
// does (numbers as json.Number, objects as map[string]any, arrays as
// []any, a key given twice keeping its last value), without its
// json.Decoder: that decoder's buffers and reflection were most of what
// a create's value check allocated. Documents the scanner below does not
// take (strings with escapes, control or non-UTF-8 bytes, nesting past
// maxScanDepth, anything invalid) go through UnmarshalJSON, so its errors
// are the library's own.
func decodeInstance(doc []byte) (any, error) {
	d := instanceScanner{b: doc}
	if v, ok := d.value(0); ok {
		d.space()
		if d.i == len(d.b) {
			return v, nil
		}
	}
	return jsonschema.UnmarshalJSON(bytes.NewReader(doc))
}

// maxScanDepth bounds the scanner's recursion; deeper documents are
// decoded by the library, which has its own limit.
const maxScanDepth = 200

type instanceScanner struct {
	b []byte
	i int
}

func (d *instanceScanner) space() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

// value scans one value; false when the document is not one the scanner
// takes.
func (d *instanceScanner) value(depth int) (any, bool) {
	d.space()
	if d.i >= len(d.b) || depth > maxScanDepth {
		return nil, false
	}
	switch c := d.b[d.i]; {
	case c == '{':
		return d.object(depth)
	case c == '[':
		return d.array(depth)
	case c == '"':
		s, ok := d.str()
		return s, ok
	case c == 't':
		return true, d.literal("true")
	case c == 'f':
		return false, d.literal("false")
	case c == 'n':
		return nil, d.literal("null")
	case c == '-' || c >= '0' && c <= '9':
		return d.number()
	}
	return nil, false
}

func (d *instanceScanner) literal(lit string) bool {
	if !bytes.HasPrefix(d.b[d.i:], []byte(lit)) {
		return false
	}
	d.i += len(lit)
	return true
}

func (d *instanceScanner) object(depth int) (any, bool) {
	d.i++ // {
	m := map[string]any{}
	d.space()
	if d.i < len(d.b) && d.b[d.i] == '}' {
		d.i++
		return m, true
	}
	for {
		d.space()
		if d.i >= len(d.b) || d.b[d.i] != '"' {
			return nil, false
		}
		k, ok := d.str()
		if !ok {
			return nil, false
		}
		d.space()
		if d.i >= len(d.b) || d.b[d.i] != ':' {
			return nil, false
		}
		d.i++
		v, ok := d.value(depth + 1)
		if !ok {
			return nil, false
		}
		m[k] = v
		switch end, ok := d.next('}'); {
		case !ok:
			return nil, false
		case end:
			return m, true
		}
	}
}

func (d *instanceScanner) array(depth int) (any, bool) {
	d.i++ // [
	a := []any{}
	d.space()
	if d.i < len(d.b) && d.b[d.i] == ']' {
		d.i++
		return a, true
	}
	for {
		v, ok := d.value(depth + 1)
		if !ok {
			return nil, false
		}
		a = append(a, v)
		switch end, ok := d.next(']'); {
		case !ok:
			return nil, false
		case end:
			return a, true
		}
	}
}

// next reads what follows an element of an object or array: a comma
// (another element follows) or close (the end: end is true); anything
// else is not ok.
func (d *instanceScanner) next(close byte) (end, ok bool) {
	d.space()
	if d.i >= len(d.b) {
		return false, false
	}
	switch d.b[d.i] {
	case ',':
		d.i++
		return false, true
	case close:
		d.i++
		return true, true
	}
	return false, false
}

// str scans a string without escapes or control bytes, of valid UTF-8,
// which decodes to its bytes.
func (d *instanceScanner) str() (string, bool) {
	start := d.i + 1
	ascii := true
	for j := start; j < len(d.b); j++ {
		switch c := d.b[j]; {
		case c == '"':
			s := d.b[start:j]
			if !ascii && !utf8.Valid(s) {
				return "", false
			}
			d.i = j + 1
			return string(s), true
		case c == '\\' || c < 0x20:
			return "", false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return "", false
}

// number scans a number of the JSON grammar: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (d *instanceScanner) number() (any, bool) {
	b, start := d.b, d.i
	i := start
	if b[i] == '-' {
		i++
	}
	digits := func() bool {
		j := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		return i > j
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case !digits():
		return nil, false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if !digits() {
			return nil, false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if !digits() {
			return nil, false
		}
	}
	d.i = i
	return json.Number(b[start:i]), true
}
