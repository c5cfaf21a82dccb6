package rest

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"sync"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/hub"
)

// encodedCache keeps the JSON of objects by (instance, change number), so
// an unchanged object is never encoded twice. Seq changes with everything
// of an instance except its users and the value of an external backend:
// the users are compared too, and external values are not cached.
type encodedCache struct {
	mu   sync.Mutex
	objs map[string]encodedObject
}

type encodedObject struct {
	seq        int64
	apiVersion string
	kind       string
	usedBy     []string
	json       []byte
}

// maxEncoded bounds the cache; past it the cache starts over.
const maxEncoded = 200_000

// encode returns obj's JSON (as json.Marshal writes it), from the cache
// when inst has not changed since it was encoded.
func (c *encodedCache) encode(inst cairn.Instance, obj Object) ([]byte, error) {
	// A list shows some values redacted and a read of the one instance
	// does not, at the same Seq: those are never cached.
	cacheable := inst.Backend.Abstract && len(obj.Metadata.OwnerReferences) == 0 && !hub.RedactsInLists(inst.TypeRef.Path)
	if cacheable {
		c.mu.Lock()
		e, ok := c.objs[inst.ID]
		c.mu.Unlock()
		if ok && e.seq == inst.Seq && e.apiVersion == obj.APIVersion && e.kind == obj.Kind && slices.Equal(e.usedBy, inst.UsedBy) {
			return e.json, nil
		}
	}
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	if cacheable {
		c.mu.Lock()
		if c.objs == nil || len(c.objs) >= maxEncoded {
			c.objs = map[string]encodedObject{}
		}
		c.objs[inst.ID] = encodedObject{seq: inst.Seq, apiVersion: obj.APIVersion, kind: obj.Kind, usedBy: slices.Clone(inst.UsedBy), json: b}
		c.mu.Unlock()
	}
	return b, nil
}

// writeList writes a list of objects whose JSON is at hand, byte for
// byte what writeJSON writes for a List.
func writeList(w http.ResponseWriter, apiVersion, kind string, meta ListMeta, items [][]byte) {
	n := 128
	for _, it := range items {
		n += len(it) + 1
	}
	var buf bytes.Buffer
	buf.Grow(n)
	av, _ := json.Marshal(apiVersion)
	k, _ := json.Marshal(kind)
	buf.WriteString(`{"apiVersion":`)
	buf.Write(av)
	buf.WriteString(`,"kind":`)
	buf.Write(k)
	buf.WriteString(`,"metadata":`)
	m, _ := json.Marshal(meta)
	buf.Write(m)
	buf.WriteString(`,"items":[`)
	for i, it := range items {
		if i > 0 {
			buf.WriteByte(',')
		}
		buf.Write(it)
	}
	buf.WriteString("]}\n")
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(buf.Bytes())
}

// plainJSON reports whether r asks for plain JSON, not a Table (a bad
// Accept is left to writeRead to refuse).
func plainJSON(r *http.Request) bool {
	tr, err := wantsTable(r)
	return err == nil && tr.version == ""
}
