package rest

import (
	"bytes"
	"cmp"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
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

// cacheable reports whether inst's object may come from the cache: its
// value is the built-in backend's (an external value can change without a
// change number) and it has no owner reference, which objects() adds from
// another instance (the installation using it). Terraform's state and
// sensitive outputs, which lists always redact, are never cached either;
// values a list redacted are not kept as encodings (encodable).
func cacheable(inst *cairn.Instance) bool {
	if !inst.Backend.Abstract || hub.RedactsInLists(inst.TypeRef.Path) {
		return false
	}
	uid := inst.Labels[hub.LabelInstallationUID]
	return uid == "" || !slices.Contains(inst.UsedBy, uid)
}

// encodable reports whether inst's encoding may be kept and shared by
// every read at its change number: not when its value is a list's, with
// secrets replaced by the marker (the same Seq read by name shows them, and
// a list must never show what a read by name kept).
func encodable(inst *cairn.Instance) bool {
	return cacheable(inst) && !inst.Latest.Redacted
}

// cached returns inst's JSON as an object of apiVersion and kind when it
// was encoded at inst's change number with the same users; no Object has
// to be built to ask.
func (c *encodedCache) cached(inst *cairn.Instance, apiVersion, kind string) ([]byte, bool) {
	if !encodable(inst) {
		return nil, false
	}
	c.mu.Lock()
	e, ok := c.objs[inst.ID]
	c.mu.Unlock()
	if ok && e.seq == inst.Seq && e.apiVersion == apiVersion && e.kind == kind && slices.Equal(e.usedBy, inst.UsedBy) {
		return e.json, true
	}
	return nil, false
}

// encode returns obj's JSON (as json.Marshal writes it), from the cache
// when inst has not changed since it was encoded. The bytes are shared:
// callers must not write to them (nor append to them).
func (c *encodedCache) encode(inst cairn.Instance, obj Object) ([]byte, error) {
	if b, ok := c.cached(&inst, obj.APIVersion, obj.Kind); ok && len(obj.Metadata.OwnerReferences) == 0 {
		return b, nil
	}
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	b = slices.Clip(b) // an append by a reader copies instead of writing into the cache
	if encodable(&inst) && len(obj.Metadata.OwnerReferences) == 0 {
		c.mu.Lock()
		if c.objs == nil || len(c.objs) >= maxEncoded {
			c.objs = map[string]encodedObject{}
		}
		c.objs[inst.ID] = encodedObject{seq: inst.Seq, apiVersion: obj.APIVersion, kind: obj.Kind, usedBy: slices.Clone(inst.UsedBy), json: b}
		c.mu.Unlock()
	}
	return b, nil
}

// listBuffers keeps the buffers lists are assembled in: a list of 100
// objects is ~80 KB, which the garbage collector would otherwise clear
// and collect at every request.
var listBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// writeList writes a list of objects whose JSON is at hand, byte for
// byte what writeJSON writes for a List.
func writeList(w http.ResponseWriter, apiVersion, kind string, meta ListMeta, items [][]byte) {
	buf := listBuffers.Get().(*bytes.Buffer)
	appendList(buf, apiVersion, kind, meta, items)
	writeBody(w, buf.Bytes())
	if buf.Cap() <= 4<<20 { // a huge list's buffer is left to the collector
		listBuffers.Put(buf)
	}
}

func appendList(buf *bytes.Buffer, apiVersion, kind string, meta ListMeta, items [][]byte) {
	n := 128 + len(meta.Continue)
	for _, it := range items {
		n += len(it) + 1
	}
	buf.Reset()
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
}

// writeBody writes a JSON body that is complete at hand.
func writeBody(w http.ResponseWriter, b []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
}

// listCache keeps whole plain-JSON list (and object) bodies by request (resource, path
// and query), with the change-log position the list was current with. A
// list is a function of the store at a position: when the store's
// position, read after the request began, is still the body's, nothing
// was committed since, and the body is the answer byte for byte
// (resourceVersion included). Lists with an object the encoded cache would
// not keep (an external backend's value, an owner reference) are not kept.
type listCache struct {
	// maxBodies and maxBytes bound the cache (0: maxListBodies and
	// maxListBytes); past them, bodies are dropped to make room.
	maxBodies, maxBytes int

	mu     sync.Mutex
	bodies map[listKey]listBody
	bytes  int
}

type listKey struct {
	res         *resource
	path, query string
}

type listBody struct {
	seq  int64
	body []byte
}

const (
	maxListBodies = 256
	maxListBytes  = 64 << 20
	maxListBody   = 8 << 20
)

func (c *listCache) get(k listKey, seq int64) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b, ok := c.bodies[k]
	if !ok || b.seq != seq {
		return nil, false
	}
	return b.body, true
}

func (c *listCache) put(k listKey, seq int64, body []byte) {
	if len(body) > maxListBody {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.bodies == nil {
		c.bodies = map[listKey]listBody{}
	}
	if old, ok := c.bodies[k]; ok {
		if old.seq >= seq {
			return // a list at least as new is there
		}
		c.bytes -= len(old.body)
		delete(c.bodies, k)
	}
	maxBodies, maxBytes := cmp.Or(c.maxBodies, maxListBodies), cmp.Or(c.maxBytes, maxListBytes)
	for k := range c.bodies { // full: make room, oldest first would cost a list
		if len(c.bodies) < maxBodies && c.bytes+len(body) <= maxBytes {
			break
		}
		c.bytes -= len(c.bodies[k].body)
		delete(c.bodies, k)
	}
	c.bodies[k] = listBody{seq: seq, body: body}
	c.bytes += len(body)
}

// writeObject writes one object's JSON as writeJSON does.
func writeObject(w http.ResponseWriter, b []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)+1))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
	_, _ = w.Write(newline)
}

var newline = []byte{'\n'}

// plainJSON reports whether r asks for plain JSON, not a Table (a bad
// Accept is left to writeRead to refuse).
func plainJSON(r *http.Request) bool {
	tr, err := wantsTable(r)
	return err == nil && tr.version == ""
}
