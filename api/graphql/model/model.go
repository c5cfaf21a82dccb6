// Package model holds the Go types the GraphQL schema binds to. Output types
// carry the hub's own values (cairn.Instance, cairn.ResourceVersion) so the
// resolvers that need more (relations, values, versions) can load them
// lazily; inputs and enums are generated into models_gen.go.
package model

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/cairn-dev/cairn"
)

// RawJSON is the Any scalar: a JSON document passed through as bytes, so
// values reach the client exactly as the backend returned them (no float
// rounding of large numbers, no reordering).
type RawJSON json.RawMessage

// MarshalGQL writes the document as is; an empty one is null.
func (j RawJSON) MarshalGQL(w io.Writer) {
	if len(j) == 0 {
		_, _ = io.WriteString(w, "null")
		return
	}
	_, _ = w.Write(j)
}

// UnmarshalGQL takes whatever the GraphQL input carried (a literal or a
// variable, already decoded) and encodes it as JSON.
func (j *RawJSON) UnmarshalGQL(v any) error {
	if v == nil {
		*j = nil
		return nil
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("Any: %w", err)
	}
	*j = RawJSON(bytes.TrimRight(b.Bytes(), "\n"))
	return nil
}

// TypeInstance is an instance as the schema shows it; Instance is what the
// hub returned, for the resolvers of uses, usedBy and resource versions.
type TypeInstance struct {
	ID        string
	CreatedAt *time.Time
	LockedBy  *string
	TypeRef   TypeInstanceTypeReference
	Backend   TypeInstanceBackendReference
	Namespace string
	Name      string
	Labels    []Label
	Status    RawJSON
	Instance  cairn.Instance
}

// TypeInstanceTypeReference is a Type path and revision.
type TypeInstanceTypeReference struct {
	Path     string
	Revision string
}

// TypeInstanceBackendReference names the instance's backend; the cairn
// details (alias, url, ...) are resolved from the backend instance.
type TypeInstanceBackendReference struct {
	ID       string
	Abstract bool
}

// Label is one label.
type Label struct {
	Key   string
	Value string
}

// AttributeReference is one attribute of a resource version.
type AttributeReference struct {
	Path     string
	Revision string
}

// TypeInstanceResourceVersion is one resource version.
type TypeInstanceResourceVersion struct {
	ResourceVersion int
	CreatedBy       *string
	CreatedAt       *time.Time
	Metadata        TypeInstanceResourceVersionMetadata
	Spec            TypeInstanceResourceVersionSpec
}

// TypeInstanceResourceVersionMetadata holds the attributes.
type TypeInstanceResourceVersionMetadata struct {
	Attributes []AttributeReference
}

// TypeInstanceResourceVersionSpec is the spec; its value is resolved on
// demand (from the backend) for Instance at Version. Instrumentation is not
// implemented (as in Capact); its resolver returns null.
type TypeInstanceResourceVersionSpec struct {
	Backend  TypeInstanceResourceVersionSpecBackend
	Instance cairn.Instance
	Version  cairn.ResourceVersion
}

// TypeInstanceResourceVersionSpecBackend carries the backend context.
type TypeInstanceResourceVersionSpecBackend struct {
	Context RawJSON
}

// HubType is a Type revision (Go name apart from GraphQL introspection's __Type).
type HubType struct {
	Path           string
	Revision       string
	Name           string
	Prefix         string
	JSONSchema     RawJSON
	AdditionalRefs []string
	CreatedAt      *time.Time
}

// StorageBackend is a registered storage backend.
type StorageBackend struct {
	ID            string
	Alias         *string
	TypeRef       TypeInstanceTypeReference
	Abstract      bool
	URL           *string
	AcceptValue   bool
	ContextSchema RawJSON
	TypeInstance  TypeInstance
}
