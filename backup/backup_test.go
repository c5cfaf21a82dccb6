package backup_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/backup"
	"github.com/cairn-dev/cairn/hub"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/postgres/pgtest"
	"github.com/cairn-dev/cairn/store/sqlite"
)

// backedStore is a store that supports backups and restores.
type backedStore interface {
	store.Store
	store.Snapshotter
}

type opener func(t *testing.T) backedStore

func openSQLite(t *testing.T) backedStore {
	t.Helper()
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "cairn.db"))
	if err != nil {
		t.Fatalf("open SQLite: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func openPostgres(t *testing.T) backedStore { return pgtest.Open(t) }

var stores = []struct {
	name string
	open opener
}{
	{"sqlite", openSQLite},
	{"postgres", openPostgres},
}

// populate fills st through the hub with every kind of state a backup must
// keep: Types, instances with several resource versions and values, labels,
// annotations, attributes, relations, a lock, a status, managed fields.
func populate(t *testing.T, st store.Store) {
	t.Helper()
	ctx := cairn.WithActor(t.Context(), "alice")
	h, err := hub.New(ctx, hub.Config{Store: st})
	if err != nil {
		t.Fatalf("hub.New: %v", err)
	}
	typ := cairn.TypeRef{Path: "cap.type.test.config", Revision: "0.1.0"}
	if _, err := h.CreateType(ctx, cairn.Type{Path: typ.Path, Revision: typ.Revision,
		JSONSchema: json.RawMessage(`{"type":"object"}`), AdditionalRefs: []string{"cap.core.type.generic"}}); err != nil {
		t.Fatalf("CreateType: %v", err)
	}
	created, err := h.CreateInstances(ctx, hub.CreateRequest{
		Instances: []hub.NewInstance{
			{Alias: "db", Name: "db", TypeRef: typ, Value: json.RawMessage(`{"host":"db.local","port":5432}`),
				Labels: map[string]string{"tier": "data"}, Annotations: map[string]string{"note": "primary"},
				Attributes: []cairn.AttributeRef{{Path: "cap.attribute.prod", Revision: "0.1.0"}}},
			{Alias: "app", Name: "app", Namespace: "team-a", TypeRef: typ, Value: json.RawMessage(`{"replicas":2}`)},
			{Alias: "empty", Name: "empty", TypeRef: cairn.TypeRef{Path: "cap.type.test.untyped", Revision: "0.1.0"}, Value: json.RawMessage(`null`)},
		},
		UsesRelations: []hub.UsesRelation{{From: "app", To: "db"}},
	})
	if err != nil {
		t.Fatalf("CreateInstances: %v", err)
	}
	db, app := created[0].ID, created[1].ID
	for i := range 3 {
		if _, err := h.UpdateInstances(ctx, []hub.UpdateInstance{{ID: db, Value: json.RawMessage(fmt.Sprintf(`{"host":"db.local","port":%d}`, 5433+i))}}); err != nil {
			t.Fatalf("UpdateInstances: %v", err)
		}
	}
	if err := h.LockInstances(ctx, []string{app}, "bob"); err != nil {
		t.Fatalf("LockInstances: %v", err)
	}
	// The value table's own lock records, which the built-in backend keeps
	// when it serves as an external backend (cairn backend serve).
	if err := st.Update(ctx, func(ctx context.Context, tx store.Tx) error {
		return tx.SetValueLock(ctx, db, "bob")
	}); err != nil {
		t.Fatalf("SetValueLock: %v", err)
	}
	if _, err := h.UpdateStatus(ctx, db, json.RawMessage(`{"conditions":[{"type":"Ready","status":"True"}]}`), 0); err != nil {
		t.Fatalf("UpdateStatus: %v", err)
	}
}

// state is everything a restore must bring back, read from one store.
type state struct {
	Types     []cairn.Type
	Instances []cairn.Instance
	Versions  map[string][]cairn.ResourceVersion
	Values    map[string]string
	Locks     map[string]string
}

// micro truncates every timestamp to microseconds, the precision the
// stores have in common.
func (s state) micro() state {
	tr := func(t *time.Time) { *t = t.Truncate(time.Microsecond) }
	for i := range s.Types {
		tr(&s.Types[i].CreatedAt)
	}
	for i := range s.Instances {
		tr(&s.Instances[i].CreatedAt)
		tr(&s.Instances[i].Latest.CreatedAt)
	}
	for _, vs := range s.Versions {
		for i := range vs {
			tr(&vs[i].CreatedAt)
		}
	}
	return s
}

func read(t *testing.T, r store.Reader) state {
	t.Helper()
	ctx := t.Context()
	var s state
	var err error
	if s.Types, err = r.ListTypes(ctx, store.TypeFilter{}); err != nil {
		t.Fatal(err)
	}
	if s.Instances, err = r.ListInstances(ctx, store.InstanceFilter{}); err != nil {
		t.Fatal(err)
	}
	ids := make([]string, len(s.Instances))
	for i, in := range s.Instances {
		ids[i] = in.ID
	}
	if s.Versions, err = r.ResourceVersionsOf(ctx, ids); err != nil {
		t.Fatal(err)
	}
	s.Values, s.Locks = map[string]string{}, map[string]string{}
	for id, vs := range s.Versions {
		for _, v := range vs {
			val, err := r.Value(ctx, id, v.ResourceVersion)
			if err == nil {
				s.Values[fmt.Sprintf("%s/%d", id, v.ResourceVersion)] = string(val)
			} else if !cairn.HasCode(err, cairn.CodeNotFound) {
				t.Fatal(err)
			}
		}
		lock, err := r.ValueLock(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if lock != "" {
			s.Locks[id] = lock
		}
	}
	return s
}

func write(t *testing.T, st backedStore) ([]byte, backup.Summary) {
	t.Helper()
	var buf bytes.Buffer
	sum, err := backup.Write(t.Context(), st, &buf, backup.Source{Store: "test", SchemaVersion: 1})
	if err != nil {
		t.Fatalf("Write: %v", err)
	}
	return buf.Bytes(), sum
}

func TestRoundTrip(t *testing.T) {
	for _, from := range stores {
		for _, to := range stores {
			t.Run(from.name+"-to-"+to.name, func(t *testing.T) {
				src := from.open(t)
				populate(t, src)
				want := read(t, src)
				pos, err := src.LastSeq(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				file, sum := write(t, src)
				if sum.Position != pos || sum.Instances != len(want.Instances) || sum.Types != len(want.Types) || sum.Values != len(want.Values) {
					t.Fatalf("summary %+v; the store has position %d, %d Types, %d instances, %d values", sum, pos, len(want.Types), len(want.Instances), len(want.Values))
				}

				dst := to.open(t)
				got, err := backup.Restore(t.Context(), dst, bytes.NewReader(file), backup.RestoreOptions{})
				if err != nil {
					t.Fatalf("Restore: %v", err)
				}
				have := read(t, dst)
				if from.name != to.name { // PostgreSQL keeps microseconds, SQLite nanoseconds
					have, want = have.micro(), want.micro()
				}
				if !reflect.DeepEqual(have, want) {
					t.Fatalf("restored state differs:\n got %+v\nwant %+v", have, want)
				}
				if len(want.Locks) == 0 || len(want.Values) < 6 {
					t.Fatalf("the fixture lost its point: %d value locks, %d values", len(want.Locks), len(want.Values))
				}

				// The change log restarts beyond the backup's position:
				// positions from before are gone, new changes come after.
				ctx := t.Context()
				if got.RestartedAt != pos+backup.DefaultBump {
					t.Fatalf("restarted at %d, want %d", got.RestartedAt, pos+backup.DefaultBump)
				}
				if last, err := dst.LastSeq(ctx); err != nil || last != got.RestartedAt {
					t.Fatalf("LastSeq after restore = %d, %v; want %d", last, err, got.RestartedAt)
				}
				for _, after := range []int64{0, pos, got.RestartedAt - 1} {
					if _, err := dst.Changes(ctx, after, 10); !cairn.HasCode(err, cairn.CodeGone) {
						t.Fatalf("Changes(%d) after restore: %v, want CodeGone", after, err)
					}
				}
				if ch, err := dst.Changes(ctx, got.RestartedAt, 10); err != nil || len(ch) != 0 {
					t.Fatalf("Changes(%d) = %v, %v; want none", got.RestartedAt, ch, err)
				}
				h, err := hub.New(cairn.WithActor(ctx, "carol"), hub.Config{Store: dst, StoreKind: "sqlite"})
				if err != nil {
					t.Fatalf("hub.New on the restored store: %v", err)
				}
				up, err := h.UpdateInstances(ctx, []hub.UpdateInstance{{ID: want.Instances[len(want.Instances)-1].ID, Value: json.RawMessage(`{"after":"restore"}`)}})
				if err != nil {
					t.Fatalf("update after restore: %v", err)
				}
				if up[0].Seq <= got.RestartedAt {
					t.Fatalf("a change after the restore got Seq %d, not beyond %d", up[0].Seq, got.RestartedAt)
				}
			})
		}
	}
}

func TestRestoreRefusesNonEmptyTarget(t *testing.T) {
	for _, s := range stores {
		t.Run(s.name, func(t *testing.T) {
			src := s.open(t)
			populate(t, src)
			file, _ := write(t, src)

			dst := s.open(t)
			ctx := t.Context()
			if _, err := hub.New(ctx, hub.Config{Store: dst}); err != nil { // registers the built-in backend
				t.Fatal(err)
			}
			before := read(t, dst)
			_, err := backup.Restore(ctx, dst, bytes.NewReader(file), backup.RestoreOptions{})
			if !cairn.HasCode(err, cairn.CodeAlreadyExists) || !strings.Contains(err.Error(), "--force") {
				t.Fatalf("Restore into a non-empty store: %v, want AlreadyExists naming --force", err)
			}
			if after := read(t, dst); !reflect.DeepEqual(after, before) {
				t.Fatal("a refused restore changed the target")
			}
			lastBefore, _ := dst.LastSeq(ctx)

			if _, err := backup.Restore(ctx, dst, bytes.NewReader(file), backup.RestoreOptions{Force: true}); err != nil {
				t.Fatalf("Restore --force: %v", err)
			}
			if got, want := read(t, dst), read(t, src); !reflect.DeepEqual(got, want) {
				t.Fatalf("forced restore differs:\n got %+v\nwant %+v", got, want)
			}
			if last, _ := dst.LastSeq(ctx); last <= lastBefore {
				t.Fatalf("a forced restore moved the change log back: %d, was %d", last, lastBefore)
			}
		})
	}
}

func TestRestoreRefusesDamagedFile(t *testing.T) {
	src := openSQLite(t)
	populate(t, src)
	file, _ := write(t, src)
	lines := bytes.SplitAfter(file, []byte("\n"))

	flip := bytes.Clone(file)
	i := bytes.Index(flip, []byte(`db.local`))
	flip[i] = 'D'
	cases := []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "empty"},
		{"not a backup", []byte("PRAGMA foo;\n"), "header"},
		{"flipped byte", flip, "checksum mismatch"},
		{"truncated at a line", bytes.Join(lines[:len(lines)-3], nil), "without its trailer"},
		{"truncated mid-line", file[:len(file)-10], "cut off"},
		{"record dropped", append(bytes.Join(lines[:2], nil), bytes.Join(lines[3:], nil)...), "checksum mismatch"},
		{"data after trailer", append(bytes.Clone(file), []byte(`{"type":{}}`+"\n")...), "after the trailer"},
		{"newer format", bytes.Replace(file, []byte(`"version":1`), []byte(`"version":9`), 1), "format version 9 is not supported"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dst := openSQLite(t)
			_, err := backup.Restore(t.Context(), dst, bytes.NewReader(c.data), backup.RestoreOptions{})
			if err == nil || !strings.Contains(err.Error(), c.want) || !cairn.HasCode(err, cairn.CodeInvalid) {
				t.Fatalf("Restore: %v; want Invalid containing %q", err, c.want)
			}
			if s := read(t, dst); len(s.Types)+len(s.Instances) != 0 {
				t.Fatalf("a refused restore wrote %d Types, %d instances", len(s.Types), len(s.Instances))
			}
			if last, _ := dst.LastSeq(t.Context()); last != 0 {
				t.Fatalf("a refused restore moved the change log to %d", last)
			}
		})
	}
}

// TestRestoreFailureChangesNothing corrupts a record in a way only the store
// notices (a gap in the resource versions, re-checksummed so the file
// verifies) and checks that the half-loaded restore rolled back, on a
// target that --force would have emptied.
func TestRestoreFailureChangesNothing(t *testing.T) {
	for _, s := range stores {
		t.Run(s.name, func(t *testing.T) {
			src := s.open(t)
			populate(t, src)
			file, _ := write(t, src)
			bad := rechecksum(t, bytes.Replace(file, []byte(`"resourceVersion":2,`), []byte(`"resourceVersion":7,`), 1))
			if _, err := backup.Verify(bytes.NewReader(bad)); err != nil {
				t.Fatalf("the doctored file should verify: %v", err)
			}
			dst := s.open(t)
			populate(t, dst)
			before := read(t, dst)
			_, err := backup.Restore(t.Context(), dst, bytes.NewReader(bad), backup.RestoreOptions{Force: true})
			if err == nil || !strings.Contains(err.Error(), "resource version 7") {
				t.Fatalf("Restore of a gapped history: %v", err)
			}
			if after := read(t, dst); !reflect.DeepEqual(after, before) {
				t.Fatal("a failed restore changed the target")
			}
		})
	}
}

// rechecksum rewrites the trailer of a doctored file so that it verifies.
func rechecksum(t *testing.T, file []byte) []byte {
	t.Helper()
	lines := bytes.SplitAfter(bytes.TrimSuffix(file, []byte("\n")), []byte("\n"))
	body := bytes.Join(lines[:len(lines)-1], nil)
	var end struct {
		End map[string]any `json:"end"`
	}
	if err := json.Unmarshal(lines[len(lines)-1], &end); err != nil {
		t.Fatal(err)
	}
	sum := sha256Hex(body)
	end.End["sha256"] = sum
	b, _ := json.Marshal(end)
	return append(body, append(b, '\n')...)
}

// TestBackupIsConsistentUnderWrites takes backups while writers create
// pairs of instances related in one transaction and update them; every
// backup must restore (a uses edge to an instance the snapshot lacks, or a
// gap in a history, would fail) and hold whole pairs only.
func TestBackupIsConsistentUnderWrites(t *testing.T) {
	for _, s := range stores {
		t.Run(s.name, func(t *testing.T) {
			src := s.open(t)
			ctx := cairn.WithActor(t.Context(), "writer")
			h, err := hub.New(ctx, hub.Config{Store: src})
			if err != nil {
				t.Fatal(err)
			}
			typ := cairn.TypeRef{Path: "cap.type.test.pair", Revision: "0.1.0"}
			stop := make(chan struct{})
			var wg sync.WaitGroup
			errs := make(chan error, 4)
			for w := range 2 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; ; i++ {
						select {
						case <-stop:
							return
						default:
						}
						c, err := h.CreateInstances(ctx, hub.CreateRequest{
							Instances: []hub.NewInstance{
								{Alias: "a", Name: fmt.Sprintf("a-%d-%d", w, i), TypeRef: typ, Value: json.RawMessage(`{"n":1}`)},
								{Alias: "b", Name: fmt.Sprintf("b-%d-%d", w, i), TypeRef: typ, Value: json.RawMessage(`{"n":1}`)},
							},
							UsesRelations: []hub.UsesRelation{{From: "a", To: "b"}},
						})
						if err == nil {
							_, err = h.UpdateInstances(ctx, []hub.UpdateInstance{{ID: c[1].ID, Value: json.RawMessage(`{"n":2}`)}})
						}
						if err != nil {
							errs <- err
							return
						}
					}
				}()
			}
			for range 4 {
				file, sum := write(t, src)
				dst := s.open(t)
				if _, err := backup.Restore(t.Context(), dst, bytes.NewReader(file), backup.RestoreOptions{}); err != nil {
					t.Fatalf("restore of a backup taken under writes (%d instances): %v", sum.Instances, err)
				}
				pairs, err := dst.ListInstances(t.Context(), store.InstanceFilter{TypePath: typ.Path})
				if err != nil {
					t.Fatal(err)
				}
				if len(pairs)%2 != 0 {
					t.Fatalf("backup holds %d instances of the pair Type: a pair was cut in half", len(pairs))
				}
			}
			close(stop)
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatalf("writer: %v", err)
			}
		})
	}
}

func TestWriteToFileAndVerify(t *testing.T) {
	src := openSQLite(t)
	populate(t, src)
	file, sum := write(t, src)
	path := filepath.Join(t.TempDir(), "b.bak")
	if err := os.WriteFile(path, file, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got, err := backup.Verify(f)
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if got.Counts != sum.Counts || got.Position != sum.Position || got.Format != backup.Format {
		t.Fatalf("Verify = %+v, Write said %+v", got, sum)
	}
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// The built-in backend's Type names the store (cap.core.type.hub.storage.
// sqlite or .postgresql). Moved to the other kind of store, the backend
// takes the target's Type, as a hub started there would have given it, so
// a lookup by that Type (Capact's clients, docs/operations.md) finds it.
func TestRestoreAcrossStoresRetypesTheBuiltinBackend(t *testing.T) {
	kinds := map[string]string{"sqlite": "sqlite", "postgres": "postgresql"}
	for _, from := range stores {
		for _, to := range stores {
			if from.name == to.name {
				continue
			}
			t.Run(from.name+"-to-"+to.name, func(t *testing.T) {
				ctx := t.Context()
				src := from.open(t)
				sh, err := hub.New(ctx, hub.Config{Store: src, StoreKind: kinds[from.name]})
				if err != nil {
					t.Fatal(err)
				}
				srcType := sh.BuiltinTypeRef()
				file, _ := write(t, src)

				dst := to.open(t)
				dh, err := hub.New(ctx, hub.Config{Store: dst, StoreKind: kinds[to.name]})
				if err != nil {
					t.Fatal(err)
				}
				want := dh.BuiltinTypeRef()
				if _, err := backup.Restore(ctx, dst, bytes.NewReader(file), backup.RestoreOptions{Force: true, BuiltinType: want}); err != nil {
					t.Fatalf("Restore: %v", err)
				}
				got, err := dst.GetInstances(ctx, []string{cairn.BuiltinBackendID})
				if err != nil || len(got) != 1 {
					t.Fatalf("the built-in backend after the restore: %v, %v", got, err)
				}
				if got[0].TypeRef != want {
					t.Errorf("the built-in backend's Type is %s, want %s", got[0].TypeRef, want)
				}
				typ, err := dst.GetType(ctx, want)
				if err != nil {
					t.Fatalf("Type %s after the restore: %v", want, err)
				}
				old, err := dst.GetType(ctx, srcType)
				if err != nil || !bytes.Equal(typ.JSONSchema, old.JSONSchema) {
					t.Errorf("Type %s has schema %s, the backup's %s has %s (%v)", want, typ.JSONSchema, srcType, old.JSONSchema, err)
				}
				if _, err := hub.New(ctx, hub.Config{Store: dst, StoreKind: kinds[to.name]}); err != nil {
					t.Fatalf("hub.New on the restored store: %v", err)
				}
			})
		}
	}
}

// TestRestoredLeasesAreReleased: a backup taken while a server runs holds
// the leases that server held (the recovery lease, the stack
// controller's). Restored as they were, they kept the restored store's own
// servers from recovery and stack reconciles until they expired, and made
// the store look served by a server that never ran on it. A restore brings
// every lease back released.
func TestRestoredLeasesAreReleased(t *testing.T) {
	ctx := t.Context()
	src := openSQLite(t)
	sh, err := hub.New(ctx, hub.Config{Store: src})
	if err != nil {
		t.Fatal(err)
	}
	if held, err := sh.AcquireLease(ctx, "cairn-recovery", "recovery@old-server", time.Hour); err != nil || !held {
		t.Fatalf("AcquireLease: %v, %v", held, err)
	}
	file, _ := write(t, src)

	dst := openSQLite(t)
	if _, err := backup.Restore(ctx, dst, bytes.NewReader(file), backup.RestoreOptions{LeaseType: hub.LeaseTypeRef().Path}); err != nil {
		t.Fatalf("Restore: %v", err)
	}
	l, err := hub.ReadLease(ctx, dst, "cairn-recovery")
	if err != nil {
		t.Fatal(err)
	}
	if l.HeldAt(time.Now()) {
		t.Errorf("the restored lease is held: %+v", l)
	}
	dh, err := hub.New(ctx, hub.Config{Store: dst})
	if err != nil {
		t.Fatal(err)
	}
	if held, err := dh.AcquireLease(ctx, "cairn-recovery", "recovery@new-server", time.Hour); err != nil || !held {
		t.Errorf("a server of the restored store cannot take the recovery lease: %v, %v", held, err)
	}
}
