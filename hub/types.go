package hub

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/schema"
	"github.com/cairn-dev/cairn/store"
)

// CreateType registers a Type revision. Its JSON Schema (drafts 07 and
// 2020-12) must compile. A Type revision is immutable: creating one that
// exists fails with CodeAlreadyExists (see ApplyType for idempotent apply).
func (h *Hub) CreateType(ctx context.Context, t cairn.Type) (cairn.Type, error) {
	t, err := h.prepareType(t)
	if err != nil {
		return cairn.Type{}, err
	}
	err = h.write(ctx, func(ctx context.Context, tx store.Tx) error {
		return tx.CreateType(ctx, t)
	})
	if err != nil {
		return cairn.Type{}, fmt.Errorf("create Type %s: %w", t.Ref(), err)
	}
	if !isDryRun(ctx) {
		h.typesGen.Add(1)
	}
	return t, nil
}

// TypesGeneration changes whenever a Type is created or deleted through
// this hub. Façades cache what they derive from the Types under it (and for
// a short time only, since other processes may change Types too).
func (h *Hub) TypesGeneration() int64 { return h.typesGen.Load() }

// ApplyType creates a Type revision, or does nothing when an identical one
// exists. It reports whether it created the Type. A different definition
// under an existing revision is refused: publish a new revision instead.
func (h *Hub) ApplyType(ctx context.Context, t cairn.Type) (cairn.Type, bool, error) {
	t, err := h.prepareType(t)
	if err != nil {
		return cairn.Type{}, false, err
	}
	var created bool
	var out cairn.Type
	err = h.write(ctx, func(ctx context.Context, tx store.Tx) error {
		created = false
		old, err := tx.GetType(ctx, t.Ref())
		switch {
		case err == nil:
			if !sameType(old, t) {
				return cairn.Errorf(cairn.CodeConflict, "Type %s already exists with a different definition; Type revisions are immutable, publish a new revision", t.Ref())
			}
			out = old
			return nil
		case !cairn.HasCode(err, cairn.CodeNotFound):
			return err
		}
		created, out = true, t
		return tx.CreateType(ctx, t)
	})
	if cairn.HasCode(err, cairn.CodeAlreadyExists) {
		// Another replica created it between our read and our insert: what
		// it created decides, as if it had come first.
		old, gerr := h.st.GetType(ctx, t.Ref())
		switch {
		case gerr != nil:
			err = gerr
		case !sameType(old, t):
			err = cairn.Errorf(cairn.CodeConflict, "Type %s already exists with a different definition; Type revisions are immutable, publish a new revision", t.Ref())
		default:
			return old, false, nil
		}
	}
	if err != nil {
		return cairn.Type{}, false, fmt.Errorf("apply Type %s: %w", t.Ref(), err)
	}
	if created {
		if !isDryRun(ctx) {
			h.typesGen.Add(1)
		}
	}
	return out, created, nil
}

func (h *Hub) prepareType(t cairn.Type) (cairn.Type, error) {
	subject := fmt.Sprintf("Type %s", t.Ref())
	var causes []cairn.Cause
	if c := checkPath("path", t.Path); c != nil {
		causes = append(causes, *c)
	}
	if c := checkRevision("revision", t.Revision); c != nil {
		causes = append(causes, *c)
	}
	for i, ref := range t.AdditionalRefs {
		if c := checkPath(fmt.Sprintf("additionalRefs/%d", i), ref); c != nil {
			causes = append(causes, *c)
		}
	}
	causes = append(causes, checkREST(t)...)
	causes = append(causes, checkPrinterColumns(t.PrinterColumns)...)
	if len(t.JSONSchema) > 0 {
		compact, err := compactJSON(t.JSONSchema)
		if err != nil {
			causes = append(causes, cairn.Cause{Field: "jsonSchema", Message: "must be valid JSON: " + err.Error()})
		} else if _, err := schema.CompileDraft(compact, h.typeDraft(t)); err != nil {
			causes = append(causes, cairn.Cause{Field: "jsonSchema", Message: "must be a valid JSON Schema: " + err.Error()})
		} else {
			t.JSONSchema = compact
			causes = append(causes, checkScope(t)...)
		}
	}
	if err := invalid(subject, "invalid Type", causes); err != nil {
		return cairn.Type{}, err
	}
	if t.CreatedAt.IsZero() {
		t.CreatedAt = h.now().UTC()
	}
	return t, nil
}

// checkScope checks the scope a Type's JSON Schema declares (cairn.ScopeKey).
func checkScope(t cairn.Type) []cairn.Cause {
	if !bytes.Contains(t.JSONSchema, []byte(cairn.ScopeKey)) {
		return nil
	}
	var doc map[string]json.RawMessage
	if json.Unmarshal(t.JSONSchema, &doc) != nil {
		return nil // not an object: the schema's own checks say so
	}
	raw, ok := doc[cairn.ScopeKey]
	if !ok {
		return nil
	}
	field := "jsonSchema/" + cairn.ScopeKey
	var s cairn.Scope
	if json.Unmarshal(raw, &s) != nil || (s != cairn.ScopeNamespaced && s != cairn.ScopeCluster) {
		return []cairn.Cause{{Field: field, Message: fmt.Sprintf("%s must be Namespaced or Cluster", raw)}}
	}
	if s == cairn.ScopeCluster && t.Names == nil {
		// Only a REST kind has a way to be named without a namespace
		// (/apis/<group>/<version>/<plural>/<name>).
		return []cairn.Cause{{Field: field, Message: `"Cluster" needs a Type served over REST: give it group, version and names`}}
	}
	return nil
}

func sameType(a, b cairn.Type) bool {
	return a.Path == b.Path && a.Revision == b.Revision &&
		cairn.JSONEqual(a.JSONSchema, b.JSONSchema) &&
		slices.Equal(a.AdditionalRefs, b.AdditionalRefs) &&
		a.Group == b.Group && a.Version == b.Version &&
		namesEqual(a.Names, b.Names) &&
		slices.Equal(a.PrinterColumns, b.PrinterColumns)
}

func namesEqual(a, b *cairn.Names) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Kind == b.Kind && a.Singular == b.Singular && a.Plural == b.Plural && slices.Equal(a.ShortNames, b.ShortNames) && slices.Equal(a.Categories, b.Categories)
}

// GetType returns one Type revision.
func (h *Hub) GetType(ctx context.Context, ref cairn.TypeRef) (cairn.Type, error) {
	t, err := h.st.GetType(ctx, ref)
	if err != nil {
		return cairn.Type{}, fmt.Errorf("get Type %s: %w", ref, err)
	}
	return t, nil
}

// ListTypes lists Types by path prefix, additionalRefs parent or REST group.
func (h *Hub) ListTypes(ctx context.Context, f store.TypeFilter) ([]cairn.Type, error) {
	ts, err := h.st.ListTypes(ctx, f)
	if err != nil {
		return nil, fmt.Errorf("list Types: %w", err)
	}
	return ts, nil
}

// DeleteType removes a Type revision that no instance uses.
func (h *Hub) DeleteType(ctx context.Context, ref cairn.TypeRef) error {
	if ref == h.BuiltinTypeRef() {
		return cairn.Errorf(cairn.CodeInvalid, "Type %s is the built-in backend's Type and cannot be deleted", ref)
	}
	err := h.write(ctx, func(ctx context.Context, tx store.Tx) error {
		n, err := tx.CountInstances(ctx, ref)
		if err != nil {
			return err
		}
		if n > 0 {
			return cairn.Errorf(cairn.CodeUsedBy, "Type %s has %d instance(s); delete them first", ref, n)
		}
		return tx.DeleteType(ctx, ref)
	})
	if err != nil {
		return fmt.Errorf("delete Type %s: %w", ref, err)
	}
	if !isDryRun(ctx) {
		h.typesGen.Add(1)
	}
	return nil
}

// typeSchema returns the compiled schema of a Type revision, nil when the
// Type has no schema. It reports whether the Type is registered.
func (h *Hub) typeSchema(ctx context.Context, r store.Reader, ref cairn.TypeRef) (*schema.Schema, bool, error) {
	t, err := r.GetType(ctx, ref)
	if cairn.HasCode(err, cairn.CodeNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("get Type %s: %w", ref, err)
	}
	s, err := h.compiledSchema(ref, t)
	return s, true, err
}

// compiledSchema returns the compiled JSON Schema of Type t, read as ref,
// nil when it has none.
func (h *Hub) compiledSchema(ref cairn.TypeRef, t cairn.Type) (*schema.Schema, error) {
	if len(t.JSONSchema) == 0 {
		return nil, nil
	}
	// The schema's hash is part of the key so a Type deleted and registered
	// again with another schema is compiled afresh, whatever the clocks of
	// this and other replicas say.
	sum := sha256.Sum256(t.JSONSchema)
	key := fmt.Sprintf("type:%s:%s:%x", t.Path, t.Revision, sum[:12])
	s, err := h.schemas.GetDraft(key, t.JSONSchema, h.typeDraft(t))
	if err != nil {
		return nil, fmt.Errorf("compile the JSON Schema of Type %s: %w", ref, err)
	}
	return s, nil
}

// checkValue validates a value against its Type. Unregistered Types pass
// unless the hub is strict.
func (h *Hub) checkValue(ctx context.Context, subject string, ref cairn.TypeRef, value json.RawMessage) error {
	s, registered, err := h.typeSchema(ctx, h.st, ref)
	if err != nil {
		return err
	}
	if !registered {
		return h.unregistered(subject, ref)
	}
	return checkAgainst(s, subject, ref, value)
}

// unregistered is the verdict on a value of an unregistered Type: refused
// by a strict hub only.
func (h *Hub) unregistered(subject string, ref cairn.TypeRef) error {
	if h.strict {
		return &cairn.Error{Code: cairn.CodeInvalid, Subject: subject,
			Msg: fmt.Sprintf("Type %s is not registered and the hub runs in strict mode", ref)}
	}
	return nil
}

// checkAgainst validates a value (nil: none given) against the compiled
// schema of Type ref (nil: the Type has none).
func checkAgainst(s *schema.Schema, subject string, ref cairn.TypeRef, value json.RawMessage) error {
	if s == nil || value == nil {
		return nil
	}
	// The allowed values of an enum are named (spec.tier: must be equal to
	// one of the allowed values: "dev", "prod"): Local Hub validates no
	// values against Types, so no Capact client compares this text.
	if causes := s.ValidateShowingValues("spec/value", value); len(causes) > 0 {
		return &cairn.Error{Code: cairn.CodeInvalid, Subject: subject, Causes: causes,
			Msg: fmt.Sprintf("value does not match Type %s: %s", ref, joinCauses(causes))}
	}
	return nil
}

func compactJSON(raw json.RawMessage) (json.RawMessage, error) {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// trimPattern strips a trailing ".*" from a path pattern.
func trimPattern(p string) string { return strings.TrimSuffix(p, ".*") }

// typeDraft is the draft of a Type's schema that names none: 2020-12, or
// under Capact compatibility draft-07 (AJV's default) for a Type without REST
// names, which is how Capact's own Types are written.
func (h *Hub) typeDraft(t cairn.Type) schema.Draft {
	if h.capact && t.Names == nil {
		return schema.Draft07
	}
	return schema.Draft2020
}
