package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/atrest"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/postgres"
	"github.com/cairn-dev/cairn/store/sqlite"
)

// EnvDatabase is the environment variable for --database.
const EnvDatabase = "CAIRN_DATABASE"

// EnvEncryptionConfig is the environment variable for --encryption-config.
const EnvEncryptionConfig = "CAIRN_ENCRYPTION_CONFIG"

// EnvSQLiteSynchronous is the environment variable for --sqlite-synchronous.
const EnvSQLiteSynchronous = "CAIRN_SQLITE_SYNCHRONOUS"

// addStoreFlags adds --database, which chooses the metadata store for every
// command: empty for the embedded SQLite file in --data-dir (the default),
// a postgres:// URL for PostgreSQL, which several replicas can share.
func (a *app) addStoreFlags(root *cobra.Command) {
	root.PersistentFlags().StringVar(&a.database, "database", a.env.Getenv(EnvDatabase),
		"PostgreSQL URL of the metadata store, postgres://USER:PASSWORD@HOST:PORT/DB?sslmode=...; empty: the embedded SQLite store in --data-dir [$"+EnvDatabase+"]")
	root.PersistentFlags().StringVar(&a.encryptionConfig, "encryption-config", a.env.Getenv(EnvEncryptionConfig),
		"EncryptionConfiguration file (apiserver.config.k8s.io/v1) encrypting the built-in backend's values at rest, per Type path pattern (see docs/secrets.md) [$"+EnvEncryptionConfig+"]")
	root.PersistentFlags().StringVar(&a.sqliteSync, "sqlite-synchronous", cmp.Or(a.env.Getenv(EnvSQLiteSynchronous), string(sqlite.SyncFull)),
		"when the embedded SQLite store acknowledges a commit: full (synced to disk first: survives a power loss; one sync per commit, shared by the writes committed together) or normal (in the write-ahead log: survives the process crashing, but a power loss may take the commits since the last checkpoint) [$"+EnvSQLiteSynchronous+"]")
}

// openedStore is the metadata store the flags select, migrated to the
// schema this binary knows.
type openedStore struct {
	store.Store
	// Kind is the hub's StoreKind: "sqlite" or "postgresql".
	Kind string
	// Where names the file, or the database without credentials.
	Where string
	// Version is the schema version.
	Version int
	// Raw is the store without encryption at rest (Store itself when there
	// is no --encryption-config); Encryption is that configuration.
	Raw        store.Store
	Encryption *atrest.Config
}

// openStore opens the metadata store the flags select and applies the
// schema migrations this binary has (on PostgreSQL under an advisory lock,
// so replicas starting together migrate once). A database migrated by a
// newer cairn is refused.
func (a *app) openStore(ctx context.Context, log *slog.Logger) (*openedStore, error) {
	return a.openStoreWith(ctx, log, false)
}

// openStoreAsIs opens the metadata store the flags select without creating
// or migrating it, for a backup, which must not change what it backs up: a
// missing store, or one at an older schema version (an older cairn serving
// it), is refused.
func (a *app) openStoreAsIs(ctx context.Context) (*openedStore, error) {
	return a.openStoreWith(ctx, nil, true)
}

func (a *app) openStoreWith(ctx context.Context, log *slog.Logger, asIs bool) (*openedStore, error) {
	var enc *atrest.Config
	if a.encryptionConfig != "" {
		c, err := atrest.Load(a.encryptionConfig)
		if err != nil {
			return nil, &cairn.Error{Code: cairn.CodeInvalid, Msg: "--encryption-config: " + err.Error(), Err: err}
		}
		enc = c
	}
	st, err := a.openRawStore(ctx, log, asIs)
	if err != nil {
		return nil, err
	}
	// Wrapped even without a config, so that values sealed earlier fail
	// with an error naming their key instead of reading as strings.
	st.Raw, st.Encryption = st.Store, enc
	st.Store = atrest.Wrap(st.Store, enc)
	return st, nil
}

// openRawStore opens the store; asIs: without creating or migrating it.
func (a *app) openRawStore(ctx context.Context, log *slog.Logger, asIs bool) (*openedStore, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	switch db := a.database; {
	case db == "":
		path := filepath.Join(a.dataDir, "cairn.db")
		sync, err := sqlite.ParseSync(a.sqliteSync)
		if err != nil {
			return nil, usageErrorf("--sqlite-synchronous: %v", err)
		}
		opts := []sqlite.Option{sqlite.WithLogger(log), sqlite.WithSync(sync)}
		if asIs {
			opts = append(opts, sqlite.WithoutMigrating())
		}
		st, err := sqlite.Open(ctx, path, opts...)
		if err != nil {
			return nil, storeError(fmt.Sprintf("open the store %s", path), err)
		}
		return &openedStore{Store: st, Kind: "sqlite", Where: path, Version: sqlite.SchemaVersion()}, nil
	case strings.HasPrefix(db, "postgres://"), strings.HasPrefix(db, "postgresql://"):
		opts := []postgres.Option{postgres.WithLogger(log)}
		if asIs {
			opts = append(opts, postgres.WithoutMigrating())
		}
		st, err := postgres.Open(ctx, db, opts...)
		if err != nil {
			return nil, storeError("open the PostgreSQL store", err)
		}
		return &openedStore{Store: st, Kind: "postgresql", Where: st.String(), Version: postgres.SchemaVersion()}, nil
	default:
		return nil, usageErrorf("--database: want a postgres:// or postgresql:// URL (leave it empty for the embedded SQLite store in --data-dir)")
	}
}

// storeError keeps a classified error's code (a malformed URL is Invalid)
// and makes anything else Unavailable.
func storeError(what string, err error) error {
	code := cairn.ErrorCode(err)
	switch {
	case errors.Is(err, postgres.ErrNoSchema), errors.Is(err, sqlite.ErrNoStore):
		code = cairn.CodeNotFound
	case code == cairn.CodeInternal, errors.Is(err, postgres.ErrSchemaTooNew), errors.Is(err, sqlite.ErrSchemaTooNew),
		errors.Is(err, postgres.ErrSchemaTooOld), errors.Is(err, sqlite.ErrSchemaTooOld):
		code = cairn.CodeUnavailable
	}
	return &cairn.Error{Code: code, Msg: fmt.Sprintf("%s: %v", what, err), Err: err}
}
