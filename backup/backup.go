// Package backup writes a cairn metadata store to a file and restores it.
//
// A backup is logical, not a copy of database files: the Types, every
// instance with all its resource versions, relations and locks, the values
// of the built-in backend and the change-log position, read in one
// consistent snapshot of a running store (store.Snapshotter: a read
// transaction on SQLite's WAL, REPEATABLE READ on PostgreSQL). So one format
// serves both stores, a SQLite backup restores into PostgreSQL and back, and
// the file does not depend on the database's version or page layout.
//
// The file is JSON lines: a header naming the format and its version, one
// record per Type or instance, and a trailer with the counts and the SHA-256
// of every byte before it. Restore reads the whole file and checks all of it
// before it writes anything, then loads it in one transaction, so a corrupt
// or partial file changes nothing.
//
// After a restore the change log starts well beyond any position the
// backed-up store handed out (see DefaultBump), as etcd's restore with
// --bump-revision and --mark-compacted does: a client that resumes a watch
// with a resourceVersion from before gets 410 Gone and lists again, instead
// of missing the changes the restore undid.
package backup

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"time"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/store"
)

// Format is the header's format name; Version is the format version this
// package writes and the newest it reads.
const (
	Format  = "cairn-backup"
	Version = 1
)

// DefaultBump is how far beyond the backup's change-log position (or the
// target's, when it is further) a restore starts the change log: far more
// changes than a store makes between a backup and its restore, so no
// resourceVersion a client saw before can be valid after it.
const DefaultBump int64 = 1_000_000_000

// pageSize is how many instances a backup reads per query.
const pageSize = 500

// Header is the first line of a backup.
type Header struct {
	Format  string `json:"format"`
	Version int    `json:"version"`
	// CreatedAt is when the snapshot was taken.
	CreatedAt time.Time `json:"createdAt"`
	// Store and SchemaVersion describe the store the backup was taken of.
	Store         string `json:"store"`
	SchemaVersion int    `json:"schemaVersion"`
	// Position is the change-log position (store.LastSeq) of the snapshot.
	Position int64 `json:"position"`
}

// Counts says what a backup holds.
type Counts struct {
	Types            int `json:"types"`
	Instances        int `json:"instances"`
	ResourceVersions int `json:"resourceVersions"`
	Values           int `json:"values"`
}

// trailer is the last line: the counts, and the SHA-256 (hex) of every byte
// of the file before the trailer's line.
type trailer struct {
	Counts
	SHA256 string `json:"sha256"`
}

// record is one line after the header: exactly one field is set.
type record struct {
	Type     *cairn.Type     `json:"type,omitempty"`
	Instance *instanceRecord `json:"instance,omitempty"`
	End      *trailer        `json:"end,omitempty"`
}

// instanceRecord is an instance with its whole history. Versions carry the
// built-in backend's value of each version that has one.
type instanceRecord struct {
	ID            string                  `json:"id"`
	TypeRef       cairn.TypeRef           `json:"typeRef"`
	Namespace     string                  `json:"namespace"`
	Name          string                  `json:"name"`
	Alias         string                  `json:"alias,omitempty"`
	Labels        map[string]string       `json:"labels,omitempty"`
	Annotations   map[string]string       `json:"annotations,omitempty"`
	Backend       cairn.BackendRef        `json:"backend"`
	LockedBy      string                  `json:"lockedBy,omitempty"`
	CreatedAt     time.Time               `json:"createdAt"`
	Seq           int64                   `json:"seq"`
	Status        json.RawMessage         `json:"status,omitempty"`
	ManagedFields json.RawMessage         `json:"managedFields,omitempty"`
	Uses          []string                `json:"uses,omitempty"`
	Versions      []cairn.ResourceVersion `json:"versions"`
	// ValueLock is the built-in backend's lock record of the instance.
	ValueLock string `json:"valueLock,omitempty"`
}

// Summary describes a backup written or restored.
type Summary struct {
	Header
	Counts
	// RestartedAt is, after a restore, the change-log position the restored
	// store starts from; watches from earlier positions get 410 Gone.
	RestartedAt int64 `json:"restartedAt,omitempty"`
}

// Source describes the store being backed up, for the header.
type Source struct {
	Store         string
	SchemaVersion int
}

// Write writes a backup of st to w, read in one snapshot while writers go
// on. w receives the bytes as they are produced; the caller makes the file
// durable (and removes it when Write fails).
func Write(ctx context.Context, st store.Snapshotter, w io.Writer, src Source) (Summary, error) {
	var sum Summary
	err := st.Snapshot(ctx, func(ctx context.Context, r store.Reader) error {
		pos, err := r.LastSeq(ctx)
		if err != nil {
			return fmt.Errorf("backup: read the change-log position: %w", err)
		}
		sum = Summary{Header: Header{Format: Format, Version: Version, CreatedAt: time.Now().UTC(),
			Store: src.Store, SchemaVersion: src.SchemaVersion, Position: pos}}
		enc := newEncoder(w)
		if err := enc.line(sum.Header); err != nil {
			return err
		}
		types, err := r.ListTypes(ctx, store.TypeFilter{})
		if err != nil {
			return fmt.Errorf("backup: list Types: %w", err)
		}
		for i := range types {
			if err := enc.line(record{Type: &types[i]}); err != nil {
				return err
			}
			sum.Types++
		}
		f := store.InstanceFilter{Limit: pageSize}
		for {
			page, err := r.ListInstances(ctx, f)
			if err != nil {
				return fmt.Errorf("backup: list instances: %w", err)
			}
			if err := writeInstances(ctx, r, enc, page, &sum.Counts); err != nil {
				return err
			}
			if len(page) < pageSize {
				break
			}
			f.After = &page[len(page)-1]
		}
		return enc.end(sum.Counts)
	})
	if err != nil {
		return Summary{}, err
	}
	return sum, nil
}

func writeInstances(ctx context.Context, r store.Reader, enc *encoder, page []cairn.Instance, c *Counts) error {
	ids := make([]string, len(page))
	for i, in := range page {
		ids[i] = in.ID
	}
	history, err := r.ResourceVersionsOf(ctx, ids)
	if err != nil {
		return fmt.Errorf("backup: read resource versions: %w", err)
	}
	for _, in := range page {
		versions := history[in.ID]
		if len(versions) == 0 {
			return fmt.Errorf("backup: instance %q has no resource versions", in.ID)
		}
		for i := range versions {
			v, err := r.Value(ctx, in.ID, versions[i].ResourceVersion)
			switch {
			case err == nil:
				versions[i].Value = v
				c.Values++
			case !cairn.HasCode(err, cairn.CodeNotFound):
				return fmt.Errorf("backup: read the value of %s resource version %d: %w", in.ID, versions[i].ResourceVersion, err)
			}
		}
		lock, err := r.ValueLock(ctx, in.ID)
		if err != nil {
			return fmt.Errorf("backup: read the value lock of %s: %w", in.ID, err)
		}
		rec := instanceRecord{
			ID: in.ID, TypeRef: in.TypeRef, Namespace: in.Namespace, Name: in.Name, Alias: in.Alias,
			Labels: in.Labels, Annotations: in.Annotations, Backend: in.Backend, LockedBy: in.LockedBy,
			CreatedAt: in.CreatedAt, Seq: in.Seq, Status: in.Status, ManagedFields: in.ManagedFields,
			Uses: in.Uses, Versions: versions, ValueLock: lock,
		}
		if err := enc.line(record{Instance: &rec}); err != nil {
			return err
		}
		c.Instances++
		c.ResourceVersions += len(versions)
	}
	return nil
}

// encoder writes lines and hashes them.
type encoder struct {
	w   io.Writer
	sum hash.Hash
}

func newEncoder(w io.Writer) *encoder {
	return &encoder{w: w, sum: sha256.New()}
}

func (e *encoder) line(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("backup: encode: %w", err)
	}
	b = append(b, '\n')
	e.sum.Write(b)
	if _, err := e.w.Write(b); err != nil {
		return fmt.Errorf("backup: write: %w", err)
	}
	return nil
}

func (e *encoder) end(c Counts) error {
	b, err := json.Marshal(record{End: &trailer{Counts: c, SHA256: hex.EncodeToString(e.sum.Sum(nil))}})
	if err != nil {
		return fmt.Errorf("backup: encode: %w", err)
	}
	if _, err := e.w.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("backup: write: %w", err)
	}
	return nil
}

// ErrCorrupt marks a file that is not a complete, intact backup.
var ErrCorrupt = errors.New("not a complete cairn backup")

// corrupt reports what is wrong with the file and where.
func corrupt(line int, format string, a ...any) error {
	return &cairn.Error{Code: cairn.CodeInvalid, Err: ErrCorrupt,
		Msg: fmt.Sprintf("backup file line %d: %s; the file is damaged or incomplete (%v), nothing was restored", line, fmt.Sprintf(format, a...), ErrCorrupt)}
}

// decoder reads a backup line by line, checking its structure as it goes.
type decoder struct {
	r    *bufio.Reader
	sum  hash.Hash
	line int
	hdr  Header
	end  *trailer
	seen Counts
}

func newDecoder(r io.Reader) (*decoder, error) {
	d := &decoder{r: bufio.NewReaderSize(r, 1<<16), sum: sha256.New()}
	b, err := d.next()
	if err != nil {
		return nil, err
	}
	if b == nil {
		return nil, corrupt(1, "the file is empty")
	}
	if err := strict(b, &d.hdr); err != nil || d.hdr.Format != Format {
		return nil, corrupt(1, "no %s header", Format)
	}
	if d.hdr.Version < 1 || d.hdr.Version > Version {
		return nil, &cairn.Error{Code: cairn.CodeInvalid,
			Msg: fmt.Sprintf("backup file: format version %d is not supported by this cairn (it reads versions 1 to %d); use the cairn that wrote it, or a newer one", d.hdr.Version, Version)}
	}
	d.sum.Write(b)
	return d, nil
}

// next returns the next line, nil at the end of the file.
func (d *decoder) next() ([]byte, error) {
	b, err := d.r.ReadBytes('\n')
	if len(b) > 0 {
		d.line++
	}
	switch {
	case err == io.EOF && len(b) == 0:
		return nil, nil
	case err == io.EOF:
		return nil, corrupt(d.line, "the last line is cut off")
	case err != nil:
		return nil, fmt.Errorf("backup: read line %d: %w", d.line+1, err)
	}
	return b, nil
}

// record returns the next Type or instance record, nil after the trailer,
// which it checks against what came before.
func (d *decoder) record() (*record, error) {
	b, err := d.next()
	if err != nil {
		return nil, err
	}
	if b == nil {
		return nil, corrupt(d.line, "the file ends without its trailer")
	}
	var rec record
	if err := strict(b, &rec); err != nil {
		return nil, corrupt(d.line, "not a backup record: %v", err)
	}
	set := 0
	for _, ok := range []bool{rec.Type != nil, rec.Instance != nil, rec.End != nil} {
		if ok {
			set++
		}
	}
	if set != 1 {
		return nil, corrupt(d.line, "a record must hold exactly one of type, instance, end")
	}
	if rec.End == nil {
		d.sum.Write(b)
		switch {
		case rec.Type != nil:
			d.seen.Types++
		default:
			d.seen.Instances++
			d.seen.ResourceVersions += len(rec.Instance.Versions)
			for _, v := range rec.Instance.Versions {
				if len(v.Value) > 0 {
					d.seen.Values++
				}
			}
		}
		return &rec, nil
	}
	if got := hex.EncodeToString(d.sum.Sum(nil)); got != rec.End.SHA256 {
		return nil, corrupt(d.line, "checksum mismatch: the trailer says sha256 %s, the content hashes to %s", rec.End.SHA256, got)
	}
	if rec.End.Counts != d.seen {
		return nil, corrupt(d.line, "the trailer counts %+v, the file holds %+v", rec.End.Counts, d.seen)
	}
	if more, err := d.r.Peek(1); len(more) > 0 || (err != nil && err != io.EOF) {
		return nil, corrupt(d.line+1, "data after the trailer")
	}
	d.end = rec.End
	return nil, nil
}

// strict decodes one JSON document, refusing unknown fields.
func strict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("more than one JSON document on the line")
	}
	return nil
}

// Verify reads a whole backup and checks its header, every record's shape,
// the counts and the checksum, returning what it holds.
func Verify(r io.Reader) (Summary, error) {
	d, err := newDecoder(r)
	if err != nil {
		return Summary{}, err
	}
	for {
		rec, err := d.record()
		if err != nil {
			return Summary{}, err
		}
		if rec == nil {
			return Summary{Header: d.hdr, Counts: d.end.Counts}, nil
		}
	}
}
