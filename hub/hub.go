// Package hub is the one service with cairn's rules: Types, instances and
// their resource versions, uses relations, locks and delegated storage. Every
// façade (CLI, REST, GraphQL) is a client of it; none opens the store or
// calls a backend itself.
//
// A write that touches a backend and the store is atomic from the caller's
// side: backends are called before the store transaction, and when that
// transaction fails what they stored is undone (OnDelete, OnDeleteRevision),
// the error saying both what failed and what the rollback did. Values of
// instances in the abstract (built-in) backend are written inside the store
// transaction itself.
package hub

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairn-dev/cairn/auth/rbac"

	"github.com/google/uuid"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/backend/builtin"
	"github.com/cairn-dev/cairn/backend/gotemplate"
	"github.com/cairn-dev/cairn/hub/cache"
	"github.com/cairn-dev/cairn/schema"
	"github.com/cairn-dev/cairn/store"
)

// BackendOpener returns the client for a non-abstract storage backend
// instance (for example the gRPC adapter). It is called for every operation
// and may cache clients by backend id and resource version.
type BackendOpener interface {
	OpenBackend(ctx context.Context, sb cairn.StorageBackend) (cairn.Backend, error)
}

// BackendConfigChecker is implemented by backend openers that can check
// the settings a backend instance keeps in its value (a Git backend's url,
// mode, path templates) without connecting to it. The hub asks it when a
// storage backend instance is created or updated, so a backend that would
// refuse every call is refused itself instead of being stored.
type BackendConfigChecker interface {
	CheckBackendConfig(ctx context.Context, sb cairn.StorageBackend) error
}

// Config configures a Hub.
type Config struct {
	// Store is the metadata store. Required.
	Store store.Store
	// StoreKind names the store in the built-in backend's Type path,
	// cap.core.type.hub.storage.<StoreKind>. Default "sqlite".
	StoreKind string
	// Backends opens non-abstract backends. Nil: only the built-in backend
	// is usable and instances in other backends fail with a clear error.
	Backends BackendOpener
	// Strict refuses instances of Types that are not registered.
	Strict bool
	// CapactCompat follows Capact's Local Hub where cairn is deliberately
	// stricter (cairn serve --compat capact): an update may give a context
	// to an instance of the built-in backend, which keeps it; and the schema
	// of a Type without REST names and without "$schema" is draft-07 (AJV's
	// default) rather than 2020-12.
	CapactCompat bool
	// Logger receives operational logs; values are never logged.
	Logger *slog.Logger
	// SchemaCacheSize bounds the compiled JSON Schema cache. Default 1024.
	SchemaCacheSize int
	// Now returns the current time. Default time.Now.
	Now func() time.Time
	// PollInterval is how often watchers poll the store for changes made
	// by other processes. Default 1s. A store that tells of commits
	// (PostgreSQL's LISTEN/NOTIFY) wakes them at once; polling is then the
	// fallback for a lost listening connection.
	PollInterval time.Duration
	// NoReadCache reads every instance from the store instead of the
	// in-memory watch cache (hub/cache). Reads are consistent either way.
	NoReadCache bool
	// WarmReadCache starts loading the read cache when the hub starts,
	// in the background, instead of on the first read (which waits for
	// it: seconds on a store of 100,000 instances). Reads meanwhile are
	// answered from the store. The load runs under New's context, so a
	// context that ends early stops it. cairn serve sets it.
	WarmReadCache bool
	// RBAC is added to the default roles and bindings (rbac.Defaults);
	// bindings created through the API are added to both.
	RBAC rbac.Policy
	// SealedValues, when set, reports whether the store encrypts the
	// values of a Type path at rest (atrest.Config.Seals): the hub then
	// stores kubectl's last-applied annotation, a copy of the value in
	// metadata, without the value's contents, as for a Type marking its
	// whole value x-cairn-secret.
	SealedValues func(typePath string) bool
}

// Hub is the service. It is safe for concurrent use.
type Hub struct {
	st        store.Store
	storeKind string
	opener    BackendOpener
	builtin   cairn.Backend
	strict    bool
	capact    bool
	log       *slog.Logger
	schemas   *schema.Cache
	now       func() time.Time

	notify       *notifier
	listening    listening // the store's change listener, while watches run (listen.go)
	authz        authz
	pollInterval time.Duration
	// typesGen counts Type changes made through this hub, so façades can
	// cache what they derive from the Types.
	typesGen atomic.Int64

	// policy caches the parsed policy (policy.go); gotemplate is the
	// in-process projection backend (projection.go).
	policy     policyCache
	gotemplate *gotemplate.Backend

	// cache serves instance reads from memory; nil when disabled. warming
	// is set while WarmReadCache loads it: reads go to the store until the
	// load ends rather than wait for it (readCache).
	cache   *cache.Cache
	warming atomic.Bool
	// warmed is closed when the background load (Config.WarmReadCache)
	// has ended, or at once without one.
	warmed chan struct{}
	// backends keeps decoded backend instances by id and resource version;
	// kept keeps the resolved ones current through the change log
	// (backends.go), so resolving one reads no store row.
	backends decodedBackends
	kept     keptBackends
	// checkedTypes keeps the Types creates and updates checked values
	// against (createtypes.go); typesMatch records whether the store's
	// transactions answer store.TypeMatcher (1), cannot (-1), or nobody has
	// asked yet (0): updates check against kept Types only on a store that
	// answers (updatetypes.go).
	checkedTypes keptTypes
	typesMatch   atomic.Int32

	// deleting holds the ids of the instances this hub is deleting between
	// the external backend's delete and the store's (read.go: a list
	// racing such a delete leaves the instance out).
	deleting sync.Map
	// secretTypes keeps what RedactSecrets read of each Type (secrets.go).
	secretTypes sync.Map
	// sealedValues is Config.SealedValues (nil: nothing is).
	sealedValues func(typePath string) bool
}

// New returns a Hub on cfg.Store, registering the built-in backend instance
// and cairn's core Types on first start.
func New(ctx context.Context, cfg Config) (*Hub, error) {
	if cfg.Store == nil {
		return nil, errors.New("hub: Config.Store is required")
	}
	h := &Hub{
		st:        cfg.Store,
		storeKind: cfg.StoreKind,
		opener:    cfg.Backends,
		builtin:   builtin.New(cfg.Store),
		strict:    cfg.Strict,
		capact:    cfg.CapactCompat,
		log:       cfg.Logger,
		now:       cfg.Now,
		notify:    newNotifier(),
		warmed:    make(chan struct{}),

		sealedValues: cfg.SealedValues,

		pollInterval: cfg.PollInterval,
	}
	if h.pollInterval <= 0 {
		h.pollInterval = defaultPollInterval
	}
	if h.storeKind == "" {
		h.storeKind = "sqlite"
	}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	if h.now == nil {
		h.now = time.Now
	}
	size := cfg.SchemaCacheSize
	if size <= 0 {
		size = 1024
	}
	h.schemas = schema.NewCache(size)
	if !cfg.NoReadCache {
		h.cache = cache.New(cfg.Store)
		if cfg.WarmReadCache {
			h.warming.Store(true) // before anything below reads
			go h.warmInBackground(ctx)
		}
	}
	if h.cache == nil || !cfg.WarmReadCache {
		close(h.warmed)
	}
	h.gotemplate = gotemplate.New(hubSource{h})
	if err := h.bootstrap(ctx); err != nil {
		return nil, fmt.Errorf("hub: register the built-in backend: %w", err)
	}
	if err := h.bootstrapGotemplate(ctx); err != nil {
		return nil, fmt.Errorf("hub: register the gotemplate backend: %w", err)
	}
	h.authz.init(cfg.RBAC)
	if err := h.refreshRBAC(ctx, true); err != nil {
		return nil, fmt.Errorf("hub: %w", err)
	}
	if err := h.syncGroups(ctx, true); err != nil {
		return nil, fmt.Errorf("hub: %w", err)
	}
	return h, nil
}

// BuiltinTypeRef is the Type of the built-in backend instance.
func (h *Hub) BuiltinTypeRef() cairn.TypeRef { return BuiltinTypeRef(h.storeKind) }

// BuiltinTypeRef is the built-in backend's Type on a store of kind
// storeKind (Config.StoreKind; "" is "sqlite").
func BuiltinTypeRef(storeKind string) cairn.TypeRef {
	if storeKind == "" {
		storeKind = "sqlite"
	}
	return cairn.TypeRef{Path: cairn.StorageTypePrefix + "." + storeKind, Revision: cairn.CoreRevision}
}

// storageTypeSchema is the JSON Schema of storage backend values (seed 000
// "Registering storage backends"): url, acceptValue and a nullable
// contextSchema.
const storageTypeSchema = `{
  "$schema": "http://json-schema.org/draft-07/schema",
  "type": "object",
  "properties": {
    "url": {"type": "string"},
    "acceptValue": {"type": "boolean"},
    "contextSchema": {"type": ["object", "null"]}
  }
}`

// bootstrap registers the built-in backend instance and its Type once. It is
// safe when several replicas start at the same time.
func (h *Hub) bootstrap(ctx context.Context) error {
	return h.registerSystemBackend(ctx, systemBackend{
		typeRef: h.BuiltinTypeRef(),
		schema:  json.RawMessage(storageTypeSchema),
		id:      cairn.BuiltinBackendID,
		name:    "builtin",
		alias:   cairn.BuiltinBackendAlias,
		value:   json.RawMessage(`{"acceptValue":true,"contextSchema":null}`),
	})
}

// systemBackend is a storage backend the hub registers itself, in
// SystemNamespace, with its value in the built-in backend.
type systemBackend struct {
	typeRef cairn.TypeRef
	schema  json.RawMessage // of the backend's Type
	id      string
	name    string
	alias   string
	value   json.RawMessage
}

// registerSystemBackend creates the backend's Type and instance unless they
// exist, in one transaction; safe when replicas start together.
func (h *Hub) registerSystemBackend(ctx context.Context, sb systemBackend) error {
	// Every start after the first finds it: a read, no write transaction.
	if found, err := h.st.GetInstancesBrief(ctx, []string{sb.id}); err == nil && len(found) == 1 {
		if _, err := h.st.GetType(ctx, sb.typeRef); err == nil {
			return nil
		}
	}
	now := h.now().UTC()
	schema, err := compactJSON(sb.schema)
	if err != nil {
		return fmt.Errorf("the schema of %s: %w", sb.typeRef, err)
	}
	value, err := compactJSON(sb.value)
	if err != nil {
		return fmt.Errorf("the value of %s: %w", sb.name, err)
	}
	err = h.st.Update(ctx, func(ctx context.Context, tx store.Tx) error {
		if _, err := tx.GetType(ctx, sb.typeRef); cairn.HasCode(err, cairn.CodeNotFound) {
			t := cairn.Type{Path: sb.typeRef.Path, Revision: sb.typeRef.Revision, JSONSchema: schema,
				AdditionalRefs: []string{cairn.StorageTypePrefix}, CreatedAt: now}
			if err := tx.CreateType(ctx, t); err != nil {
				return err
			}
		} else if err != nil {
			return err
		}
		found, err := tx.GetInstancesBrief(ctx, []string{sb.id})
		if err != nil || len(found) == 1 {
			return err
		}
		inst := cairn.Instance{
			ID:        sb.id,
			TypeRef:   sb.typeRef,
			Namespace: SystemNamespace,
			Name:      sb.name,
			Alias:     sb.alias,
			Labels:    map[string]string{"hub.cairn.dev/storage-backend": "true"},
			Backend:   cairn.BackendRef{ID: cairn.BuiltinBackendID, Abstract: true},
			CreatedAt: now,
			Latest: cairn.ResourceVersion{
				ResourceVersion: 1,
				CreatedBy:       SystemActor,
				CreatedAt:       now,
				Attributes:      []cairn.AttributeRef{{Path: cairn.StorageAttributePath, Revision: cairn.CoreRevision}},
			},
		}
		if err := tx.CreateInstance(ctx, inst); err != nil {
			return err
		}
		if err := tx.PutValue(ctx, inst.ID, 1, value); err != nil {
			return err
		}
		if sb.id == cairn.BuiltinBackendID {
			return nil // the built-in backend does not use itself
		}
		return tx.AddUses(ctx, inst.ID, cairn.BuiltinBackendID)
	})
	if cairn.HasCode(err, cairn.CodeAlreadyExists) {
		// Another replica registered it between our read and write.
		return nil
	}
	return err
}

// SystemNamespace holds the hub's own instances (the built-in backend).
const SystemNamespace = "cairn-system"

// SystemActor is the createdBy of what the hub registers itself.
const SystemActor = "cairn"

// newID returns a new instance id: a UUIDv7 (RFC 9562), time-ordered, so
// the store's tables and indexes keyed by instance id take a new instance
// at their end (one page per commit) rather than at a random leaf each.
// Ids are opaque otherwise; instances created with v4 ids keep them.
func newID() string { return uuid.Must(uuid.NewV7()).String() }
