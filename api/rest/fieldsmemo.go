package rest

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// fieldsMemo remembers the managed fields updates of a resource recorded,
// by everything the field manager's result depends on, so that an update
// like one before (the same manager changing the same fields of an object
// whose managed fields are the same, within the same second) does not
// run the field manager again: a controller or client writing one field
// over and over.
//
// The field manager decodes the live managed fields, compares the live
// and the desired object as typed by the resource's schema (which fields
// were added, changed, removed; the schema checks each value's kind),
// gives the changed fields to the manager, takes them from the others and
// stamps the manager's entry with the time, in seconds. The key holds
// what that reads: the manager, the second, the live managed fields, and
// the two objects' fields with the kind of each value and, where both
// have one, whether they are equal; a resource's memo is its schema's.
// Values whose equality the field manager judges by its own rules are
// not keyed: an object holding a list, or a number on both sides of a
// field, is computed every time (TestFieldsMemoAsComputed).
type fieldsMemo struct {
	mu sync.Mutex
	m  map[string]json.RawMessage
	// hits counts the answers from the memo, for tests.
	hits int
}

// maxFieldsMemo bounds a resource's memo; past it, it starts over.
const maxFieldsMemo = 512

// key returns the memo key of an update by manager of live, whose managed
// fields were raw, into desired, both as handed to the field manager (the
// managed fields moved to desired); "" when the update is not memoized.
// It reads the clock: the key is valid in the current second only.
func (m *fieldsMemo) key(manager string, raw json.RawMessage, live, desired *unstructured.Unstructured) string {
	now := time.Now()
	if now.Nanosecond() == 0 {
		// The manager's entry sorts by its time against entries of the
		// same second: at .0 it ties with them.
		return ""
	}
	var b strings.Builder
	b.Grow(len(raw) + len(manager) + 256)
	b.WriteString(manager)
	b.WriteByte(0)
	b.WriteString(strconv.FormatInt(now.Unix(), 10))
	b.WriteByte(0)
	b.Write(raw)
	b.WriteByte(0)
	if !shape(&b, live.Object, desired.Object, true, true, 0, false) {
		return ""
	}
	return b.String()
}

func (m *fieldsMemo) get(key string) (json.RawMessage, bool) {
	if key == "" {
		return nil, false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	mf, ok := m.m[key]
	if ok {
		m.hits++
	}
	return mf, ok
}

// put remembers mf for key when the second of the key is still the
// current one (the field manager stamped this second).
func (m *fieldsMemo) put(key string, mf json.RawMessage) {
	if key == "" || mf == nil {
		return
	}
	if _, rest, _ := strings.Cut(key, "\x00"); !strings.HasPrefix(rest, strconv.FormatInt(time.Now().Unix(), 10)+"\x00") {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.m == nil || len(m.m) >= maxFieldsMemo {
		m.m = map[string]json.RawMessage{}
	}
	m.m[key] = mf
}

// shape writes the fields of a (live) and b (desired) with their kinds
// and, where both have a field, whether the values are equal; ok is false
// for a value it does not key (a list, numbers on both sides, an object
// on one side and another value on the other). hasA and hasB say whether
// each side has the value at all; meta that they are the metadata, whose
// managed fields (keyed by their bytes) are left out.
func shape(w *strings.Builder, a, b any, hasA, hasB bool, depth int, meta bool) bool {
	if depth > 64 {
		return false
	}
	ma, okA := a.(map[string]any)
	mb, okB := b.(map[string]any)
	if (okA || !hasA) && (okB || !hasB) && (okA || okB) {
		keys := make([]string, 0, len(ma)+len(mb))
		for k := range ma {
			keys = append(keys, k)
		}
		for k := range mb {
			if _, dup := ma[k]; !dup {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		w.WriteString(kindTag(hasA, okA) + kindTag(hasB, okB) + "{")
		for _, k := range keys {
			if meta && k == "managedFields" {
				continue
			}
			va, inA := ma[k]
			vb, inB := mb[k]
			w.WriteString(strconv.Quote(k))
			w.WriteByte(':')
			if !shape(w, va, vb, inA, inB, depth+1, depth == 0 && k == "metadata") {
				return false
			}
			w.WriteByte(',')
		}
		w.WriteByte('}')
		return true
	}
	ka, kb := kind(a, hasA), kind(b, hasB)
	if ka == "" || kb == "" || ka == "m" || kb == "m" || (ka == "n" && kb == "n") {
		return false
	}
	w.WriteString(ka)
	w.WriteString(kb)
	if hasA && hasB {
		if a == b {
			w.WriteByte('=')
		} else {
			w.WriteByte('~')
		}
	}
	return true
}

func kindTag(has, isMap bool) string {
	switch {
	case !has:
		return "-"
	case isMap:
		return "m"
	}
	return "x"
}

// kind names the kind of a decoded value: "-" absent, "s" string, "b"
// boolean, "0" null, "n" number, "m" object; "" for what is not keyed.
func kind(v any, has bool) string {
	if !has {
		return "-"
	}
	switch v.(type) {
	case string:
		return "s"
	case bool:
		return "b"
	case nil:
		return "0"
	case int64, float64:
		return "n"
	case map[string]any:
		return "m"
	}
	return ""
}
