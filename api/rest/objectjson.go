package rest

import (
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"sync"
)

// appendObjectJSON appends o's JSON, byte for byte what json.Marshal
// writes for it, without reflection: a write's answer is encoded at every
// create, replace and patch (json.Marshal cost 3–5 % of a create's CPU,
// much of it validating and compacting the raw spec and managed fields
// through their Marshaler). ok is false when o holds something written
// here only by json.Marshal's rules this does not follow (strings to
// escape, raw JSON with whitespace between tokens, bytes outside ASCII,
// owner references, a status the instance reported): the caller marshals
// then.
func appendObjectJSON(b []byte, o *Object) (_ []byte, ok bool) {
	m := &o.Metadata
	st := o.Status
	if len(m.OwnerReferences) > 0 || (st != nil && len(st.Reported) > 0) {
		return b, false
	}
	w := jsonWriter{b: b, ok: true}
	w.raw(`{"apiVersion":`)
	w.str(o.APIVersion)
	w.raw(`,"kind":`)
	w.str(o.Kind)
	w.raw(`,"metadata":{"name":`)
	w.str(m.Name)
	w.optStr(`,"namespace":`, m.Namespace)
	w.optStr(`,"uid":`, m.UID)
	w.optStr(`,"resourceVersion":`, m.ResourceVersion)
	if m.Generation != 0 {
		w.raw(`,"generation":`)
		w.b = strconv.AppendInt(w.b, m.Generation, 10)
	}
	w.optStr(`,"creationTimestamp":`, m.CreationTimestamp)
	w.strMap(`,"labels":`, m.Labels)
	w.strMap(`,"annotations":`, m.Annotations)
	w.optStr(`,"deletionTimestamp":`, m.DeletionTimestamp)
	w.strList(`,"finalizers":`, m.Finalizers)
	w.optJSON(`,"managedFields":`, m.ManagedFields)
	w.raw(`}`)
	w.optJSON(`,"spec":`, o.Spec)
	if st != nil {
		w.raw(`,"status":{"typeRef":{"path":`)
		w.str(st.TypeRef.Path)
		w.raw(`,"revision":`)
		w.str(st.TypeRef.Revision)
		w.raw(`}`)
		w.optStr(`,"alias":`, st.Alias)
		w.raw(`,"backend":{"id":`)
		w.str(st.Backend.ID)
		if st.Backend.Abstract {
			w.raw(`,"abstract":true`)
		}
		w.optJSON(`,"context":`, st.Backend.Context)
		w.raw(`}`)
		w.optStr(`,"lockedBy":`, st.LockedBy)
		w.optStr(`,"createdBy":`, st.CreatedBy)
		w.strList(`,"uses":`, st.Uses)
		w.strList(`,"usedBy":`, st.UsedBy)
		w.raw(`}`)
	}
	w.raw(`}`)
	return w.b, w.ok
}

// jsonWriter appends JSON; ok turns false at the first value it cannot
// write as json.Marshal would.
type jsonWriter struct {
	b  []byte
	ok bool
}

func (w *jsonWriter) raw(s string) { w.b = append(w.b, s...) }

// str writes s quoted when json.Marshal would write it verbatim between
// quotes: printable ASCII other than the quote, the backslash and the
// characters it escapes for HTML (<, >, &).
func (w *jsonWriter) str(s string) {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			w.ok = false
			return
		}
	}
	w.b = append(w.b, '"')
	w.b = append(w.b, s...)
	w.b = append(w.b, '"')
}

// optStr writes key and s unless s is empty (omitempty).
func (w *jsonWriter) optStr(key, s string) {
	if s != "" {
		w.raw(key)
		w.str(s)
	}
}

// strMap writes key and m, keys sorted, unless m is empty (omitempty).
func (w *jsonWriter) strMap(key string, m map[string]string) {
	if len(m) == 0 {
		return
	}
	w.raw(key)
	w.b = append(w.b, '{')
	keys := make([]string, 0, 8)
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for i, k := range keys {
		if i > 0 {
			w.b = append(w.b, ',')
		}
		w.str(k)
		w.b = append(w.b, ':')
		w.str(m[k])
	}
	w.b = append(w.b, '}')
}

// strList writes key and l unless l is empty (omitempty).
func (w *jsonWriter) strList(key string, l []string) {
	if len(l) == 0 {
		return
	}
	w.raw(key)
	w.b = append(w.b, '[')
	for i, s := range l {
		if i > 0 {
			w.b = append(w.b, ',')
		}
		w.str(s)
	}
	w.b = append(w.b, ']')
}

// optJSON writes key and raw unless raw is empty (omitempty), when
// json.Marshal would write raw unchanged: valid, compact (no whitespace
// between tokens) and ASCII without the characters escaped for HTML.
func (w *jsonWriter) optJSON(key string, raw json.RawMessage) {
	if len(raw) == 0 {
		return
	}
	inString, escaped := false, false
	for _, c := range raw {
		switch {
		case c > 0x7e || c == '<' || c == '>' || c == '&':
			w.ok = false
			return
		case escaped:
			escaped = false
		case inString:
			if c == '\\' {
				escaped = true
			} else if c == '"' {
				inString = false
			}
		case c == '"':
			inString = true
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			w.ok = false
			return
		}
	}
	if !json.Valid(raw) {
		w.ok = false
		return
	}
	w.raw(key)
	w.b = append(w.b, raw...)
}

// objectBuffers keeps the buffers write answers are encoded in.
var objectBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 2048); return &b }}

// writeObjectJSON answers with o as writeJSON does (the same bytes and
// headers), encoding it with appendObjectJSON when it can.
func writeObjectJSON(w http.ResponseWriter, code int, o Object) {
	bp := objectBuffers.Get().(*[]byte)
	b, ok := appendObjectJSON((*bp)[:0], &o)
	if !ok {
		objectBuffers.Put(bp)
		writeJSON(w, code, o)
		return
	}
	b = append(b, '\n') // as json.Encoder ends a value
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(b)
	if cap(b) <= 64<<10 {
		*bp = b
		objectBuffers.Put(bp)
	}
}
