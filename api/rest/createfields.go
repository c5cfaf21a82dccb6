package rest

import (
	"bytes"
	"encoding/json"
	"math"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"
)

// The managed fields of a create are what the field manager computes from
// an empty live object and the desired one: one entry, the request's
// manager owning every field of the object, stamped with the time. Which
// fields those are depends on the object's shape (the keys of its maps,
// the kinds of its scalars, its lists), not on its scalar values, so
// creates of one kind with one shape (the usual case: the same client
// writing objects alike) get the same entry but for its time. Computing it
// cost 8–10 % of a create's CPU; trackCreate keeps the encoded entry by
// (manager, shape) and only stamps the time.
//
// The shape keeps everything the computation reads other than scalar
// values: map keys, nesting, the JSON kind of each scalar (the typed
// conversion checks kinds against the schema), and lists whole (the
// elements of associative and set lists are keyed by their values). A
// create that gives its own managedFields is computed as before.

// createFieldsKept bounds the entries kept per resource, and
// maxShapeKey the shapes kept: objects larger than that are computed.
const (
	createFieldsKept = 256
	maxShapeKey      = 4096
)

// createFields keeps, per resource, the encoded managed fields of creates
// by the manager and shape of the object, split around the time.
type createFields struct {
	mu sync.Mutex
	m  map[string]stampedFields
}

// stampedFields is an encoded managedFields list with one time, which
// goes between before and after.
type stampedFields struct{ before, after []byte }

func (s stampedFields) at(t time.Time) json.RawMessage {
	out := make([]byte, 0, len(s.before)+len(time.RFC3339)+len(s.after))
	out = append(out, s.before...)
	out = t.UTC().AppendFormat(out, time.RFC3339)
	return append(out, s.after...)
}

// trackCreate returns the managed fields of a create of o, named name in
// namespace, as trackUpdate(r, res, nil, desiredObject(res, name,
// namespace, o)) does; the error is desiredObject's. A create of a shape
// kept before needs neither: its key is read off the request object as it
// came (createKey), the spec's JSON not decoded.
func (s *Server) trackCreate(r *http.Request, res *resource, name, namespace string, o inObject) (json.RawMessage, error) {
	full := func() (json.RawMessage, error) {
		desired, err := desiredObject(res, name, namespace, o)
		if err != nil {
			return nil, err
		}
		return s.trackUpdate(r, res, nil, desired), nil
	}
	if len(o.Metadata.ManagedFields) > 0 && string(o.Metadata.ManagedFields) != "null" {
		return full() // given: the field manager merges them
	}
	key := appendCreateKey(make([]byte, 0, 256), managerOf(r), o)
	if key == nil {
		return full()
	}
	c := &res.createFields
	c.mu.Lock()
	kept, ok := c.m[string(key)]
	c.mu.Unlock()
	if ok {
		return kept.at(time.Now()), nil
	}
	out, err := full()
	if err != nil {
		return nil, err
	}
	if st, ok := splitAtTime(out); ok {
		c.mu.Lock()
		if c.m == nil || len(c.m) >= createFieldsKept {
			c.m = map[string]stampedFields{}
		}
		c.m[string(key)] = st
		c.mu.Unlock()
	}
	return out, nil
}

// splitAtTime splits an encoded managedFields list of one entry around
// its time; false for any other list.
func splitAtTime(raw json.RawMessage) (stampedFields, bool) {
	var entries []struct {
		Time *string `json:"time"`
	}
	if len(raw) == 0 || json.Unmarshal(raw, &entries) != nil || len(entries) != 1 || entries[0].Time == nil {
		return stampedFields{}, false
	}
	if _, err := time.Parse(time.RFC3339, *entries[0].Time); err != nil {
		return stampedFields{}, false
	}
	stamp := []byte(`"time":"` + *entries[0].Time + `"`)
	if bytes.Count(raw, stamp) != 1 {
		return stampedFields{}, false
	}
	i := bytes.Index(raw, stamp) + len(`"time":"`)
	j := i + len(stamp) - len(`"time":""`)
	return stampedFields{before: bytes.Clone(raw[:i]), after: bytes.Clone(raw[j:])}, true
}

// appendCreateKey appends to b the key of (manager, shape of the object a
// create of o asks for): the label and annotation keys (their values are
// strings) and the spec's shape (rawShape); nil when the spec's shape is
// not read here (the caller computes the fields then) or the key would
// exceed maxShapeKey. The object's apiVersion, kind, name and namespace
// are strings of the resource: the same shape for every create of it.
func appendCreateKey(b []byte, manager string, o inObject) []byte {
	b = strconv.AppendQuote(b, manager)
	b = appendKeys(append(b, 'L'), o.Metadata.Labels)
	b = appendKeys(append(b, 'A'), storedAnnotations(o.Metadata.Annotations))
	b = append(b, 'S')
	if len(o.Spec) > 0 && string(o.Spec) != "null" {
		var ok bool
		if b, ok = appendRawShape(b, o.Spec); !ok {
			return nil
		}
	}
	if len(b) > maxShapeKey {
		return nil
	}
	return b
}

func appendKeys(b []byte, m map[string]string) []byte {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		b = append(strconv.AppendQuote(b, k), ',')
	}
	return b
}

// appendRawShape appends the shape of raw, valid JSON, as the field
// manager sees it once decoded: an object's keys sorted with their
// values' shapes, each scalar's kind (a number integral or not, as
// float64 holds it), lists whole (their elements are keyed by value).
// false when raw has an object with a key given twice (decoding keeps the
// last), a number float64 cannot hold (decoding refuses it), or nesting
// deeper than the key may grow.
func appendRawShape(b []byte, raw []byte) ([]byte, bool) {
	if len(b) > maxShapeKey {
		return b, false
	}
	raw = raw[skipSpace(raw, 0):]
	switch raw[0] {
	case '{':
		var small [8]member
		ms, _ := objectMembers(raw, small[:0])
		slices.SortFunc(ms, func(x, y member) int { return bytes.Compare(x.key, y.key) })
		b = append(b, '{')
		for i, m := range ms {
			if i > 0 && bytes.Equal(ms[i-1].key, m.key) {
				return b, false
			}
			b = append(strconv.AppendQuote(b, string(m.key)), ':')
			var ok bool
			if b, ok = appendRawShape(b, m.value); !ok {
				return b, false
			}
			b = append(b, ',')
		}
		return append(b, '}'), true
	case '[':
		raw = raw[:skipValue(raw, 0)]
		b = strconv.AppendInt(append(b, 'L'), int64(len(raw)), 10)
		return append(append(b, ':'), raw...), true
	case '"':
		return append(b, 's'), true
	case 't', 'f':
		return append(b, 'b'), true
	case 'n':
		return append(b, 'n'), true
	default:
		v, err := strconv.ParseFloat(string(raw[:skipValue(raw, 0)]), 64)
		if err != nil {
			return b, false
		}
		if v == math.Trunc(v) && !math.IsInf(v, 0) {
			return append(b, 'i'), true
		}
		return append(b, 'f'), true
	}
}
