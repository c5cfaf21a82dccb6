package rest

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/hub"
)

// tableRows keeps the rows of Tables, what kubectl get asks for at every
// call. A row is computed from its object encoded to JSON and decoded
// into a map for the column paths (asMap): 25 times the cost of the JSON
// list the Table is built from. Like the encoded objects (encodedCache),
// a row is a function of its instance at a change number (Seq), with its
// users, and of the columns: rows are kept by (instance, columns) with
// the Seq and users they were computed at, and served again only while
// both are the same. A kept row holds each cell as the object gives it,
// not as shown: a date column keeps the parsed time and a Backend column
// the backend's id, which printColumn.show turns into an age at the
// request's time and into the backend's current alias. The row's
// PartialObjectMetadata (includeObject=Metadata, kubectl's default) is
// kept encoded.
//
// Rows the encoded cache would refuse are computed every time
// (rowKeepable): an instance owned by an installation, whose owner
// reference comes from another instance; one whose value or annotations
// were redacted for this caller (the same change number shows them to
// another); and, when a column reads the value, one whose value is an
// external backend's (it can change without a change number) or was not
// read. Without such a column, a row does not depend on the value, so
// the instances of external backends are kept too. Past maxRows
// rows or maxRowBytes the cache starts over.
type tableRows struct {
	mu    sync.Mutex
	rows  map[rowKey]keptRow
	bytes int
	// hits counts the rows served from the cache, for tests.
	hits int
}

type rowKey struct {
	id string
	// cols is tableKey's: the resource and its columns.
	cols string
}

type keptRow struct {
	seq    int64
	usedBy []string
	// cells are cellOf's, to be shown by printColumn.show; shared, never
	// written.
	cells []any
	// meta is the row's PartialObjectMetadata as JSON.
	meta []byte
}

const (
	maxRows     = 100_000
	maxRowBytes = 64 << 20
)

func (c *tableRows) get(inst *cairn.Instance, cols string) (keptRow, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	kr, ok := c.rows[rowKey{id: inst.ID, cols: cols}]
	if !ok || kr.seq != inst.Seq || !slices.Equal(kr.usedBy, inst.UsedBy) {
		return keptRow{}, false
	}
	c.hits++
	return kr, true
}

func (c *tableRows) put(inst *cairn.Instance, cols string, kr keptRow) {
	kr.seq, kr.usedBy = inst.Seq, slices.Clone(inst.UsedBy)
	size := rowSize(inst.ID, kr)
	k := rowKey{id: inst.ID, cols: cols}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.rows[k]; ok {
		c.bytes -= rowSize(inst.ID, old)
	}
	if c.rows == nil || len(c.rows) >= maxRows || c.bytes+size > maxRowBytes {
		c.rows, c.bytes = map[rowKey]keptRow{}, 0
	}
	c.rows[k] = kr
	c.bytes += size
}

// rowSize estimates the memory a kept row holds (its key's columns are
// shared by every row of the resource).
func rowSize(id string, kr keptRow) int {
	n := 128 + len(id) + len(kr.meta) + 16*len(kr.usedBy) + 16*len(kr.cells)
	for _, u := range kr.usedBy {
		n += len(u)
	}
	for _, cell := range kr.cells {
		if s, ok := cell.(string); ok {
			n += len(s)
		}
	}
	return n
}

// tableKey is the key of res's rows under cols: everything a cell depends
// on besides the object.
func tableKey(res *resource, cols []printColumn) string {
	var b strings.Builder
	b.WriteString(res.apiVersion())
	b.WriteByte(0)
	b.WriteString(res.kind)
	b.WriteByte(0)
	b.WriteString(res.hubKind)
	for _, c := range cols {
		b.WriteByte(0)
		b.WriteString(c.def.Name)
		b.WriteByte(1)
		b.WriteString(c.def.Type)
		b.WriteByte(1)
		b.WriteString(c.def.Format)
		b.WriteByte(1)
		b.WriteString(c.src)
		if c.cell != nil {
			b.WriteString("\x01cell")
		}
	}
	return b.String()
}

// rowKeepable reports whether inst's row under cols may be kept by its
// change number. values says whether the list read the values.
func rowKeepable(inst *cairn.Instance, cols []printColumn, values bool) bool {
	if inst.Latest.Redacted || hub.RedactsInLists(inst.TypeRef.Path) {
		return false // the value or kubectl's last-applied annotation, as this caller may see them
	}
	if uid := inst.Labels[hub.LabelInstallationUID]; uid != "" && slices.Contains(inst.UsedBy, uid) {
		return false // an owner reference, from the installation
	}
	if !slices.ContainsFunc(cols, func(c printColumn) bool { return c.value }) {
		return true
	}
	return values && inst.Backend.Abstract
}

// writeRows answers with the Table of insts of res (read with their
// values or not), from and into the kept rows. Only the objects of rows
// not kept are built (by object), unless the rows show them
// (includeObject=Object).
func (s *Server) writeRows(w http.ResponseWriter, tr tableRequest, cols []printColumn, res *resource, meta ListMeta,
	insts []cairn.Instance, values bool, object func([]cairn.Instance) ([]any, error)) error {
	key := tableKey(res, cols)
	items := make([]tableItem, len(insts))
	var missed []cairn.Instance
	var missedAt []int
	for i := range insts {
		inst := &insts[i]
		if rowKeepable(inst, cols, values) {
			items[i].inst = inst
			if tr.includeObject != "Object" {
				if kr, ok := s.rows.get(inst, key); ok {
					items[i].row = &kr
					continue
				}
			}
		}
		missed = append(missed, *inst)
		missedAt = append(missedAt, i)
	}
	if len(missed) > 0 {
		objs, err := object(missed)
		if err != nil {
			return err
		}
		for j, o := range objs {
			items[missedAt[j]].obj = o
		}
	}
	writeTableJSON(w, buildTable(tr, cols, meta, items, &s.rows, key, time.Now()))
	return nil
}

// writeTableJSON writes t byte for byte as writeJSON does, without
// checking and compacting again each row's encoded metadata (which
// json.Marshal wrote): a fifth of a kept 100-row Table's time.
func writeTableJSON(w http.ResponseWriter, t Table) {
	buf := listBuffers.Get().(*bytes.Buffer)
	buf.Reset()
	if err := appendTable(buf, t); err != nil {
		writeJSON(w, http.StatusOK, t)
	} else {
		writeBody(w, buf.Bytes())
	}
	if buf.Cap() <= 4<<20 {
		listBuffers.Put(buf)
	}
}

func appendTable(buf *bytes.Buffer, t Table) error {
	put := func(prefix string, v any) error {
		buf.WriteString(prefix)
		if raw, ok := v.(json.RawMessage); ok {
			buf.Write(raw)
			return nil
		}
		b, err := json.Marshal(v)
		buf.Write(b)
		return err
	}
	for _, f := range []struct {
		prefix string
		v      any
	}{{`{"kind":`, t.Kind}, {`,"apiVersion":`, t.APIVersion}, {`,"metadata":`, t.Metadata}, {`,"columnDefinitions":`, t.ColumnDefinitions}} {
		if err := put(f.prefix, f.v); err != nil {
			return err
		}
	}
	buf.WriteString(`,"rows":[`)
	for i, r := range t.Rows {
		if i > 0 {
			buf.WriteByte(',')
		}
		if err := put(`{"cells":`, r.Cells); err != nil {
			return err
		}
		if r.Object != nil {
			if err := put(`,"object":`, r.Object); err != nil {
				return err
			}
		}
		buf.WriteByte('}')
	}
	buf.WriteString("]}\n")
	return nil
}
