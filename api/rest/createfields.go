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

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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

// trackCreate returns the managed fields of a create of desired, as
// trackUpdate(r, res, nil, desired) does.
func (s *Server) trackCreate(r *http.Request, res *resource, desired *unstructured.Unstructured) json.RawMessage {
	if md, _ := desired.Object["metadata"].(map[string]any); md != nil {
		if _, given := md["managedFields"]; given {
			return s.trackUpdate(r, res, nil, desired)
		}
	}
	manager := managerOf(r)
	key := appendShapeKey(make([]byte, 0, 256), manager, desired.Object)
	if key == nil {
		return s.trackUpdate(r, res, nil, desired)
	}
	c := &res.createFields
	c.mu.Lock()
	kept, ok := c.m[string(key)]
	c.mu.Unlock()
	if ok {
		return kept.at(time.Now())
	}
	out := s.trackUpdate(r, res, nil, desired)
	if st, ok := splitAtTime(out); ok {
		c.mu.Lock()
		if c.m == nil || len(c.m) >= createFieldsKept {
			c.m = map[string]stampedFields{}
		}
		c.m[string(key)] = st
		c.mu.Unlock()
	}
	return out
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

// appendShapeKey appends the key of (manager, shape of obj) to b; nil when
// obj holds a value of a kind JSON decoding does not make or the key would
// exceed maxShapeKey.
func appendShapeKey(b []byte, manager string, obj map[string]any) []byte {
	b = strconv.AppendQuote(b, manager)
	b, ok := appendShape(b, obj)
	if !ok || len(b) > maxShapeKey {
		return nil
	}
	return b
}

func appendShape(b []byte, v any) ([]byte, bool) {
	if len(b) > maxShapeKey {
		return b, false
	}
	switch v := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		b = append(b, '{')
		for _, k := range keys {
			b = strconv.AppendQuote(b, k)
			b = append(b, ':')
			var ok bool
			if b, ok = appendShape(b, v[k]); !ok {
				return b, false
			}
			b = append(b, ',')
		}
		return append(b, '}'), true
	case []any:
		raw, err := json.Marshal(v)
		if err != nil {
			return b, false
		}
		b = append(b, 'L')
		return append(b, raw...), true
	case string:
		return append(b, 's'), true
	case bool:
		return append(b, 'b'), true
	case nil:
		return append(b, 'n'), true
	case float64:
		if v == math.Trunc(v) && !math.IsInf(v, 0) {
			return append(b, 'i'), true
		}
		return append(b, 'f'), true
	case int64:
		return append(b, 'I'), true
	default:
		return b, false
	}
}
