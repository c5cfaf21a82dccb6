// Package cairn holds the domain of the cairn state hub: Types, Instances,
// their resource versions, storage backends and the one error vocabulary that
// every layer speaks. It has no dependencies on storage, transport or CLI;
// those live in subpackages (hub, store/..., backend/..., cmd/cairn).
package cairn

import (
	"bytes"
	"encoding/json"
	"slices"
	"time"
)

// DefaultNamespace is the namespace of an instance created without one.
const DefaultNamespace = "default"

// Built-in storage backend: pre-registered on first start, abstract (the hub
// keeps its values in the metadata store itself) and never deletable.
const (
	// BuiltinBackendID is the fixed, documented id of the built-in backend instance.
	BuiltinBackendID = "a36ed738-dfe7-45ec-acd1-8e44e8db893b"
	// BuiltinBackendAlias is the alias of the built-in backend instance.
	BuiltinBackendAlias = "cairn-builtin"
	// StorageTypePrefix is the Type path node every storage backend Type hangs under.
	StorageTypePrefix = "cap.core.type.hub.storage"
	// StorageAttributePath marks an instance as a storage backend (seed 000).
	StorageAttributePath = "cap.core.attribute.hub.storage.backend"
	// CoreRevision is the revision of cairn's own core Types and attributes.
	CoreRevision = "0.1.0"
)

// TypeRef names one revision of a Type.
type TypeRef struct {
	Path     string `json:"path"`
	Revision string `json:"revision"`
}

func (r TypeRef) String() string {
	if r.Revision == "" {
		return r.Path
	}
	return r.Path + ":" + r.Revision
}

// Names are the REST names of a Type served at /apis/<group>/<version>.
type Names struct {
	Kind       string   `json:"kind"`
	Singular   string   `json:"singular,omitempty"`
	Plural     string   `json:"plural"`
	ShortNames []string `json:"shortNames,omitempty"`
	// Categories group resources for kubectl: `kubectl get <category>`
	// lists every resource in it ("all", "cairn").
	Categories []string `json:"categories,omitempty"`
}

// PrinterColumn is a column of the table `kubectl get` prints, in the form
// of a CustomResourceDefinition's additionalPrinterColumns.
type PrinterColumn struct {
	Name string `json:"name"`
	// Type is integer, number, string, boolean or date.
	Type        string `json:"type"`
	Format      string `json:"format,omitempty"`
	Description string `json:"description,omitempty"`
	// Priority 0 is shown by default, higher only by -o wide.
	Priority int32 `json:"priority,omitempty"`
	// JSONPath is a simple JSON path into the object as served
	// (.spec.enabled, .metadata.labels.team, .status.lockedBy).
	JSONPath string `json:"jsonPath"`
}

// Type is a named, revisioned JSON Schema.
type Type struct {
	Path           string          `json:"path"`
	Revision       string          `json:"revision"`
	JSONSchema     json.RawMessage `json:"jsonSchema,omitempty"`
	AdditionalRefs []string        `json:"additionalRefs,omitempty"`
	// Group, Version and Names are set when the Type is served over REST.
	Group   string `json:"group,omitempty"`
	Version string `json:"version,omitempty"`
	Names   *Names `json:"names,omitempty"`
	// PrinterColumns are the columns `kubectl get` shows for the Type's
	// instances besides NAME.
	PrinterColumns []PrinterColumn `json:"additionalPrinterColumns,omitempty"`
	CreatedAt      time.Time       `json:"createdAt"`
}

// Ref returns the reference to this Type revision.
func (t Type) Ref() TypeRef { return TypeRef{Path: t.Path, Revision: t.Revision} }

// Scope says whether a Type's instances live in a namespace.
type Scope string

const (
	// ScopeNamespaced: every instance has a namespace (the default).
	ScopeNamespaced Scope = "Namespaced"
	// ScopeCluster: instances have none (the empty namespace), as a
	// cluster-scoped CustomResourceDefinition's objects; today only a
	// stack's installation kind is (stack.yaml kind.scope: Cluster).
	ScopeCluster Scope = "Cluster"
)

// ScopeKey holds a Type's scope in its JSON Schema, where JSON Schema
// validation ignores it. Keeping it there rather than in a field of its own
// needs no store migration, and every path a Type travels (stores, backups,
// GraphQL, replicas) carries it; a Type revision is immutable, so is its
// scope.
const ScopeKey = "x-cairn-scope"

// Scope is the Type's scope: ScopeCluster when its JSON Schema says so,
// else ScopeNamespaced.
func (t Type) Scope() Scope { return SchemaScope(t.JSONSchema) }

// ClusterScoped reports whether the Type's instances have no namespace.
func (t Type) ClusterScoped() bool { return t.Scope() == ScopeCluster }

// SchemaScope reads ScopeKey of a JSON Schema: ScopeCluster only when it is
// "Cluster".
func SchemaScope(doc json.RawMessage) Scope {
	// Most schemas have no key: no need to decode them.
	if !bytes.Contains(doc, []byte(ScopeKey)) {
		return ScopeNamespaced
	}
	var s struct {
		Scope Scope `json:"x-cairn-scope"`
	}
	if json.Unmarshal(doc, &s) == nil && s.Scope == ScopeCluster {
		return ScopeCluster
	}
	return ScopeNamespaced
}

// AttributeRef references an attribute (a Type-like node) of a resource version.
type AttributeRef struct {
	Path     string `json:"path"`
	Revision string `json:"revision"`
}

// SameAttributes reports whether a and b hold the same attributes, in any
// order: an instance's attributes are a set.
func SameAttributes(a, b []AttributeRef) bool {
	if len(a) != len(b) {
		return false
	}
	key := func(r AttributeRef) string { return r.Path + ":" + r.Revision }
	ka, kb := make([]string, len(a)), make([]string, len(b))
	for i, r := range a {
		ka[i] = key(r)
	}
	for i, r := range b {
		kb[i] = key(r)
	}
	slices.Sort(ka)
	slices.Sort(kb)
	return slices.Equal(ka, kb)
}

// BackendRef says which storage backend instance holds an instance's value.
type BackendRef struct {
	ID       string `json:"id"`
	Abstract bool   `json:"abstract"`
}

// Instance is one typed value with metadata, relations, lock and history.
type Instance struct {
	ID          string            `json:"id"`
	TypeRef     TypeRef           `json:"typeRef"`
	Namespace   string            `json:"namespace"`
	Name        string            `json:"name"`
	Alias       string            `json:"alias,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
	Backend     BackendRef        `json:"backend"`
	LockedBy    string            `json:"lockedBy,omitempty"`
	CreatedAt   time.Time         `json:"createdAt"`
	// Uses and UsedBy hold instance ids, sorted by type path ascending,
	// revision descending, createdAt descending.
	Uses   []string `json:"uses"`
	UsedBy []string `json:"usedBy"`
	// Seq is the store-wide sequence number of the instance's last change
	// (create, new resource version, metadata, lock). It orders changes
	// across all instances; the REST API serves it as
	// metadata.resourceVersion, the per-instance resource version as
	// metadata.generation.
	Seq int64 `json:"seq"`
	// Latest is the latest resource version. Its Value is filled only when
	// the caller asked for values.
	Latest ResourceVersion `json:"latestResourceVersion"`
	// Status is what the instance's controllers observe and report
	// (conditions, outputs, observedGeneration): a JSON object, or nil. It
	// is not versioned; writing it changes Seq but not the resource version.
	Status json.RawMessage `json:"status,omitempty"`
	// ManagedFields records which field manager owns which fields of the
	// value (server-side apply), in the Kubernetes managedFields form.
	ManagedFields json.RawMessage `json:"managedFields,omitempty"`
}

// IsStorageBackend reports whether the instance is a storage backend: its
// latest resource version carries the storage attribute (the built-in
// backend always is one).
func (in Instance) IsStorageBackend() bool {
	if in.ID == BuiltinBackendID {
		return true
	}
	for _, a := range in.Latest.Attributes {
		if a.Path == StorageAttributePath {
			return true
		}
	}
	return false
}

// ResourceVersion is one immutable revision of an instance.
type ResourceVersion struct {
	ResourceVersion int             `json:"resourceVersion"`
	CreatedBy       string          `json:"createdBy,omitempty"`
	CreatedAt       time.Time       `json:"createdAt"`
	Attributes      []AttributeRef  `json:"attributes,omitempty"`
	Value           json.RawMessage `json:"value,omitempty"`
	// Context is the backend context (backend.context) of this version.
	Context json.RawMessage `json:"context,omitempty"`
	// Redacted says that Value is not what is stored: its secret parts
	// were replaced by a marker, as lists and watches show them. Nothing
	// that keeps values by resource version may keep such a Value for
	// reads that show them.
	Redacted bool `json:"-"`
}

// StorageBackend is a storage backend instance as the hub sees it: the
// instance's identity plus its latest value decoded against the storage
// schema {url, acceptValue, contextSchema}.
type StorageBackend struct {
	ID            string
	Alias         string
	TypeRef       TypeRef
	Abstract      bool
	URL           string
	AcceptValue   bool
	ContextSchema json.RawMessage // nil when the backend takes no context
	// ResourceVersion is the backend instance's latest resource version; a
	// client cached for a backend is dropped when it changes.
	ResourceVersion int
	// Value is the backend instance's whole latest value: a backend may
	// keep its own settings beside url, acceptValue and contextSchema (the
	// Git backend's branch, paths, author, ...), read by its opener.
	Value json.RawMessage
}

// BackendHealth is what a health check of a storage backend found.
type BackendHealth struct {
	// Service is the service asked about: the storage service the hub
	// calls, or "" (the server as a whole).
	Service string `json:"service,omitempty"`
	// Status is SERVING, NOT_SERVING, ... (grpc.health.v1); SERVING for the
	// built-in backend.
	Status string `json:"status"`
	// Connect is the time of the first check, connection set-up included.
	Connect time.Duration `json:"connect"`
	// RoundTrip is the time of a second check on the open connection.
	RoundTrip time.Duration `json:"roundTrip"`
	// TLS says whether the connection is encrypted.
	TLS bool `json:"tls"`
	// PendingWrites counts the writes to this backend the hub's intent
	// journal holds: interrupted (a process died, or the backend did not
	// answer) and not yet finished by recovery.
	PendingWrites int `json:"pendingWrites,omitempty"`
	// RetryingWrites counts those recovery tried and could not finish;
	// LastError is the latest failure.
	RetryingWrites int    `json:"retryingWrites,omitempty"`
	LastError      string `json:"lastError,omitempty"`
}
