package atrest_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/atrest"
	"github.com/cairn-dev/cairn/hub"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/postgres"
	"github.com/cairn-dev/cairn/store/postgres/pgtest"
	"github.com/cairn-dev/cairn/store/sqlite"
)

func key(b byte, n int) string {
	return base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{b}, n))
}

// config returns an EncryptionConfiguration encrypting credentials Types
// with the given provider lines and leaving everything else in plaintext.
func config(t testing.TB, providers string) *atrest.Config {
	t.Helper()
	c, err := atrest.Parse([]byte(`apiVersion: apiserver.config.k8s.io/v1
kind: EncryptionConfiguration
resources:
  - resources: ["cap.type.*.credentials"]
    providers:
` + providers + `
  - resources: ["*"]
    providers:
      - identity: {}
`))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

var (
	gcm1 = "      - aesgcm: {keys: [{name: key1, secret: " + key(1, 32) + "}]}\n"
	gcm2 = "      - aesgcm: {keys: [{name: key2, secret: " + key(2, 32) + "}, {name: key1, secret: " + key(1, 32) + "}]}\n"
	box  = "      - secretbox: {keys: [{name: box1, secret: " + key(3, 32) + "}]}\n"
)

func TestParseErrors(t *testing.T) {
	secret := key(9, 32)
	for _, tc := range []struct {
		name, doc, want string
	}{
		{"kind", "apiVersion: v1\nkind: Config\nresources: []", `want "apiserver.config.k8s.io/v1"/"EncryptionConfiguration"`},
		{"no resources", "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\n", "resources: empty"},
		{"no patterns", hdr + "  - providers: [{identity: {}}]\n", "resources[0].resources: empty"},
		{"no providers", hdr + "  - resources: ['*']\n", "resources[0].providers: empty"},
		{"two in one", hdr + "  - resources: ['*']\n    providers: [{identity: {}, aesgcm: {keys: [{name: a, secret: " + secret + "}]}}]\n", "resources[0].providers[0]: want exactly one"},
		{"aescbc", hdr + "  - resources: ['*']\n    providers: [{aescbc: {keys: [{name: a, secret: " + secret + "}]}}]\n", "aescbc is not supported"},
		{"short key", hdr + "  - resources: ['*']\n    providers: [{aesgcm: {keys: [{name: a, secret: " + key(1, 7) + "}]}}]\n", "resources[0].providers[0].aesgcm.keys[0].secret (key \"a\"): aesgcm wants a 16, 24 or 32 byte key, got 7 bytes"},
		{"secretbox 16", hdr + "  - resources: ['*']\n    providers: [{secretbox: {keys: [{name: a, secret: " + key(1, 16) + "}]}}]\n", "secretbox wants a 32 byte key"},
		{"bad base64", hdr + "  - resources: ['*']\n    providers: [{aesgcm: {keys: [{name: a, secret: 'not*base64'}]}}]\n", `keys[0].secret (key "a"): not valid base64`},
		{"no name", hdr + "  - resources: ['*']\n    providers: [{aesgcm: {keys: [{secret: " + secret + "}]}}]\n", "keys[0].name"},
		{"no keys", hdr + "  - resources: ['*']\n    providers: [{aesgcm: {keys: []}}]\n", "aesgcm.keys: empty"},
		{"bad pattern", hdr + "  - resources: ['cap.[']\n    providers: [{identity: {}}]\n", `resources[0].resources[0]: "cap.[" is not a valid Type path pattern`},
		{"unknown field", hdr + "  - resources: ['*']\n    providers: [{identity: {}}]\n    extra: " + secret + "\n", "unknown field"},
		{"same name two secrets", hdr + "  - resources: ['a']\n    providers: [{aesgcm: {keys: [{name: k, secret: " + key(1, 32) + "}]}}]\n  - resources: ['b']\n    providers: [{aesgcm: {keys: [{name: k, secret: " + key(2, 32) + "}]}}]\n", `aesgcm key "k" is listed twice with different secrets`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := atrest.Parse([]byte(tc.doc))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
			if strings.Contains(err.Error(), secret) {
				t.Fatalf("the error quotes a key's secret: %v", err)
			}
		})
	}
}

const hdr = "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n"

func TestSealOpen(t *testing.T) {
	value := json.RawMessage(`{"password":"hunter2-marker"}`)
	for _, tc := range []struct {
		name, providers, path string
		sealed                bool
	}{
		{"aesgcm", gcm1, "cap.type.database.postgresql.credentials", true},
		{"secretbox", box, "cap.type.database.postgresql.credentials", true},
		{"identity first", "      - identity: {}\n" + gcm1, "cap.type.x.credentials", false},
		{"no match falls to *", gcm1, "cap.type.database.postgresql.config", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := config(t, tc.providers)
			stored, err := c.Seal(tc.path, "id1", 3, value)
			if err != nil {
				t.Fatal(err)
			}
			if got := atrest.IsSealed(stored); got != tc.sealed {
				t.Fatalf("sealed = %v, want %v: %s", got, tc.sealed, stored)
			}
			if tc.sealed && bytes.Contains(stored, []byte("hunter2")) {
				t.Fatalf("plaintext in the sealed value: %s", stored)
			}
			if !json.Valid(stored) {
				t.Fatalf("stored value is not JSON: %s", stored)
			}
			got, err := c.Open("id1", 3, stored)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, value) {
				t.Fatalf("Open = %s, want %s", got, value)
			}
			if !c.Current(tc.path, stored) {
				t.Fatal("a freshly sealed value is not current")
			}
		})
	}
}

func TestOpenRefuses(t *testing.T) {
	c := config(t, gcm1)
	stored, err := c.Seal("cap.type.a.credentials", "id1", 1, json.RawMessage(`"s3cret"`))
	if err != nil {
		t.Fatal(err)
	}
	// Bound to its row: the same ciphertext under another id fails.
	if _, err := c.Open("id2", 1, stored); err == nil || !strings.Contains(err.Error(), "message authentication failed") {
		t.Fatalf("moved value: err = %v", err)
	}
	// A key the config no longer lists is named.
	other := config(t, box)
	if _, err := other.Open("id1", 1, stored); err == nil || !strings.Contains(err.Error(), `aesgcm key "key1", which the encryption config does not list`) {
		t.Fatalf("unknown key: err = %v", err)
	}
	// A second key in the list reads values of the first after rotation.
	rotated := config(t, gcm2)
	if _, err := rotated.Open("id1", 1, stored); err != nil {
		t.Fatalf("rotated config cannot read the old key: %v", err)
	}
	if rotated.Current("cap.type.a.credentials", stored) {
		t.Fatal("a value under the old key counts as current after rotation")
	}
}

type opened struct {
	st  store.Store
	raw func(t *testing.T) []byte // everything the database holds, as bytes
}

func openSQLite(t *testing.T) opened {
	path := filepath.Join(t.TempDir(), "cairn.db")
	st, err := sqlite.Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return opened{st: st, raw: func(t *testing.T) []byte {
		// The file and its write-ahead log, byte for byte.
		var all []byte
		for _, p := range []string{path, path + "-wal"} {
			b, err := os.ReadFile(p)
			if err != nil && !os.IsNotExist(err) {
				t.Fatal(err)
			}
			all = append(all, b...)
		}
		return all
	}}
}

func openPostgres(t *testing.T) opened {
	sc := pgtest.NewSchema(t)
	st, err := postgres.Open(t.Context(), sc.DSN, postgres.WithSchema(sc.Name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return opened{st: st, raw: func(t *testing.T) []byte {
		conn, err := pgx.Connect(t.Context(), sc.DSN)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		// Every column of every table in the schema, as text.
		rows, err := conn.Query(t.Context(), `SELECT table_name FROM information_schema.tables WHERE table_schema = $1`, sc.Name)
		if err != nil {
			t.Fatal(err)
		}
		tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		if len(tables) == 0 {
			t.Fatal("no tables in the test schema")
		}
		var all []byte
		for _, tbl := range tables {
			rows, err := conn.Query(t.Context(), fmt.Sprintf(`SELECT t::text FROM %s t`, pgx.Identifier{sc.Name, tbl}.Sanitize()))
			if err != nil {
				t.Fatal(err)
			}
			texts, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range texts {
				all = append(all, s...)
			}
		}
		return all
	}}
}

// changeReader is the watch cache's optional store interface (hub/cache).
type changeReader interface {
	ChangesWithInstances(ctx context.Context, after int64, limit int) ([]store.Change, []cairn.Instance, error)
}

// TestNoPlaintextInTheDatabase writes secrets through the hub over an
// encrypting store and reads the database itself: the SQLite file and every
// PostgreSQL table hold no plaintext of an encrypted value, while a value of
// a Type left in plaintext is there, and the hub reads both back.
func TestNoPlaintextInTheDatabase(t *testing.T) {
	for name, open := range map[string]func(*testing.T) opened{"sqlite": openSQLite, "postgres": openPostgres} {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			db := open(t)
			c := config(t, gcm1)
			h, err := hub.New(ctx, hub.Config{Store: atrest.Wrap(db.st, c), SealedValues: c.Seals})
			if err != nil {
				t.Fatal(err)
			}
			const secret, plain = "pw-marker-7f3a", "cfg-marker-91bc"
			// kubectl apply's copy of the object, value and all, in an
			// annotation (metadata, which is not encrypted).
			applied := func(v string) map[string]string {
				return map[string]string{hub.LastAppliedAnnotation: `{"apiVersion":"hub.cairn.dev/v1","kind":"TypeInstance","spec":{"value":{"password":"` + v + `"}}}`}
			}
			created, err := h.CreateInstances(ctx, hub.CreateRequest{Instances: []hub.NewInstance{
				{Name: "creds", TypeRef: cairn.TypeRef{Path: "cap.type.database.postgresql.credentials", Revision: "0.1.0"},
					Value: json.RawMessage(`{"password":"` + secret + `-v1"}`), Annotations: applied(secret + "-v1")},
				{Name: "cfg", TypeRef: cairn.TypeRef{Path: "cap.type.database.postgresql.config", Revision: "0.1.0"},
					Value: json.RawMessage(`{"host":"` + plain + `"}`)},
			}})
			if err != nil {
				t.Fatal(err)
			}
			credsID := created[0].ID
			// A second version, and one that carries the value over.
			if _, err := h.UpdateInstances(ctx, []hub.UpdateInstance{{ID: credsID, Value: json.RawMessage(`{"password":"` + secret + `-v2"}`), Annotations: applied(secret + "-v2")}}); err != nil {
				t.Fatal(err)
			}
			if _, err := h.UpdateInstances(ctx, []hub.UpdateInstance{{ID: credsID, Labels: map[string]string{"a": "b"}}}); err != nil {
				t.Fatal(err)
			}
			raw := db.raw(t)
			if bytes.Contains(raw, []byte(secret)) {
				t.Fatal("the database holds plaintext of an encrypted value")
			}
			if !bytes.Contains(raw, []byte(plain)) {
				t.Fatal("the plaintext value of an unencrypted Type is not in what the test reads: the test reads the wrong thing")
			}
			if !bytes.Contains(raw, []byte("cairn:enc:aesgcm:v1:key1:")) {
				t.Fatal("no sealed value in the database")
			}
			got, err := h.GetInstance(ctx, credsID, true)
			if err != nil {
				t.Fatal(err)
			}
			if want := `{"password":"` + secret + `-v2"}`; string(got.Latest.Value) != want {
				t.Fatalf("value read back = %s, want %s (version %d)", got.Latest.Value, want, got.Latest.ResourceVersion)
			}
			if got.Latest.ResourceVersion != 3 {
				t.Fatalf("resource version = %d, want 3", got.Latest.ResourceVersion)
			}
			// The change log read with its instances (the watch cache's
			// source on PostgreSQL) opens the values too.
			if cr, ok := atrest.Wrap(db.st, c).(changeReader); ok {
				_, found, err := cr.ChangesWithInstances(ctx, 0, 1000)
				if err != nil {
					t.Fatal(err)
				}
				seen := false
				for _, in := range found {
					if in.ID == credsID {
						seen = true
						if want := `{"password":"` + secret + `-v2"}`; string(in.Latest.Value) != want {
							t.Fatalf("ChangesWithInstances: value %s, want %s", in.Latest.Value, want)
						}
					}
				}
				if !seen {
					t.Fatalf("ChangesWithInstances did not return %s", credsID)
				}
			} else if name == "postgres" {
				t.Fatal("the wrapped PostgreSQL store does not read changes with their instances")
			}
		})
	}
}

// TestReencrypt stores plaintext, then turns encryption on and rotates the
// key, re-encrypting in small batches; an interrupted run resumes.
func TestReencrypt(t *testing.T) {
	for name, open := range map[string]func(*testing.T) opened{"sqlite": openSQLite, "postgres": openPostgres} {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			db := open(t)
			h, err := hub.New(ctx, hub.Config{Store: db.st}) // no encryption yet
			if err != nil {
				t.Fatal(err)
			}
			const secret = "rotate-marker-5d1e"
			var in []hub.NewInstance
			for i := range 7 {
				in = append(in, hub.NewInstance{Name: fmt.Sprintf("c%d", i),
					TypeRef: cairn.TypeRef{Path: "cap.type.app.credentials", Revision: "0.1.0"},
					Value:   json.RawMessage(fmt.Sprintf(`{"password":"%s-%d"}`, secret, i))})
			}
			created, err := h.CreateInstances(ctx, hub.CreateRequest{Instances: in})
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Contains(db.raw(t), []byte(secret)) {
				t.Fatal("setup: the plaintext is not in the database")
			}

			// Turn encryption on: an interrupted run (cancelled after its
			// first batch) leaves some values in plaintext; running again
			// finishes and rewrites only what was left.
			c1 := config(t, gcm1)
			cctx, cancel := context.WithCancel(ctx)
			p, err := atrest.Reencrypt(cctx, db.st, c1, 3, func(atrest.Progress) { cancel() })
			if err == nil {
				t.Fatal("the cancelled run did not stop")
			}
			if p.Rewritten == 0 || p.Rewritten >= 7 {
				t.Fatalf("interrupted run rewrote %d values, want some but not all", p.Rewritten)
			}
			first := p.Rewritten
			p, err = atrest.Reencrypt(ctx, db.st, c1, 3, nil)
			if err != nil {
				t.Fatal(err)
			}
			if p.Rewritten != 7-first {
				t.Fatalf("resumed run rewrote %d values, want %d", p.Rewritten, 7-first)
			}
			raw := db.raw(t)
			if bytes.Contains(raw, []byte(secret)) {
				t.Fatal("plaintext left after re-encryption")
			}

			// Rotate: key2 first, key1 still read.
			c2 := config(t, gcm2)
			p, err = atrest.Reencrypt(ctx, db.st, c2, 3, nil)
			if err != nil {
				t.Fatal(err)
			}
			if p.Rewritten != 7 {
				t.Fatalf("rotation rewrote %d values, want 7", p.Rewritten)
			}
			if raw := db.raw(t); bytes.Contains(raw, []byte("aesgcm:v1:key1:")) {
				t.Fatal("a value is still under key1 after rotation")
			}
			// key1 can now go: a config with key2 only reads everything.
			only2 := config(t, "      - aesgcm: {keys: [{name: key2, secret: "+key(2, 32)+"}]}\n")
			h2, err := hub.New(ctx, hub.Config{Store: atrest.Wrap(db.st, only2)})
			if err != nil {
				t.Fatal(err)
			}
			for i, cr := range created {
				got, err := h2.GetInstance(ctx, cr.ID, true)
				if err != nil {
					t.Fatal(err)
				}
				if want := fmt.Sprintf(`{"password":"%s-%d"}`, secret, i); string(got.Latest.Value) != want {
					t.Fatalf("value %d = %s, want %s", i, got.Latest.Value, want)
				}
			}
			// Running again changes nothing.
			if p, err = atrest.Reencrypt(ctx, db.st, only2, 3, nil); err != nil || p.Rewritten != 0 || p.Values < 7 {
				t.Fatalf("idempotent run: %+v, %v", p, err)
			}
		})
	}
}

// The wrapper keeps the optional interface the hub looks for beside
// store.Store: without it, replicas on PostgreSQL would fall back to
// polling for each other's commits.
func TestWrapKeepsChangeListener(t *testing.T) {
	type listener interface {
		ListenChanges(ctx context.Context, ready func(), changed func(seq int64)) error
	}
	for _, tc := range []struct {
		name string
		open func(t *testing.T) opened
		want bool
	}{
		{"sqlite", openSQLite, false},
		{"postgresql", openPostgres, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.open(t)
			_, raw := o.st.(listener)
			_, wrapped := atrest.Wrap(o.st, config(t, gcm1)).(listener)
			if raw != tc.want || wrapped != tc.want {
				t.Errorf("ListenChanges: raw store %v, wrapped %v; want %v for both", raw, wrapped, tc.want)
			}
			_, raw = o.st.(changeReader)
			_, wrapped = atrest.Wrap(o.st, config(t, gcm1)).(changeReader)
			if raw != tc.want || wrapped != tc.want {
				t.Errorf("ChangesWithInstances: raw store %v, wrapped %v; want %v for both", raw, wrapped, tc.want)
			}
		})
	}
}
