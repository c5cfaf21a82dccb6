package hub

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/schema"
)

// A create checks each value against its Type before it calls any backend,
// and reads the Type again in its transaction (pinTypes), where it counts.
// Reading it from the store for the first check too cost a create 6–7 % of
// its CPU, so the first check uses the Type as the last create read it
// (keptTypes) and the transaction compares: when the Type it reads is not
// the one the value was checked against (deleted and registered again with
// another schema, by this or another process), the value is checked again
// there, against the Type the instance is created with (in that race a
// value already sent to an external backend is taken back, as after any
// failed transaction). A refusal by a kept Type is confirmed on the Type
// as stored before it is returned, so a stale Type never refuses a value.
// Either way the verdict, its message included, is the one a check on the
// current Type gives.

// keptType is what a create's check used of a registered Type revision.
type keptType struct {
	gen   int64           // h.typesGen when read
	doc   json.RawMessage // the Type's JSON Schema as read
	draft schema.Draft
	s     *schema.Schema // nil: the Type has no schema
	// named: the Type as read has Names (which, with doc, decides the
	// draft: pinTypes checks both).
	named bool
	// scope is the Type's scope (doc's cairn.ScopeKey).
	scope cairn.Scope
	// kind is the Type's REST kind, "" when it has none.
	kind string
}

// keptTypes holds the Types creates checked values against, by reference.
// Only registered Types are kept: an unregistered one is read every time,
// so a strict hub sees it registered at once.
type keptTypes struct {
	mu sync.Mutex
	m  map[cairn.TypeRef]*keptType
}

// maxKeptTypes bounds keptTypes; when full it starts again.
const maxKeptTypes = 1024

func (k *keptTypes) get(ref cairn.TypeRef, gen int64) *keptType {
	k.mu.Lock()
	defer k.mu.Unlock()
	if t := k.m[ref]; t != nil && t.gen == gen {
		return t
	}
	return nil
}

func (k *keptTypes) put(ref cairn.TypeRef, t *keptType) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.m == nil || len(k.m) >= maxKeptTypes {
		k.m = map[cairn.TypeRef]*keptType{}
	}
	k.m[ref] = t
}

// matches reports whether Type t, as read now, checks values as kt does.
func (h *Hub) matches(kt *keptType, t cairn.Type) bool {
	return kt != nil && bytes.Equal(kt.doc, t.JSONSchema) && kt.draft == h.typeDraft(t)
}

// keepType compiles a Type read as ref and keeps it for the next creates.
func (h *Hub) keepType(ref cairn.TypeRef, t cairn.Type, gen int64) (*keptType, error) {
	s, err := h.compiledSchema(ref, t)
	if err != nil {
		return nil, err
	}
	kt := &keptType{gen: gen, doc: t.JSONSchema, draft: h.typeDraft(t), s: s, named: t.Names != nil, scope: t.Scope()}
	if t.Names != nil {
		kt.kind = t.Names.Kind
	}
	h.checkedTypes.put(ref, kt)
	return kt, nil
}

// readCreateType reads Type ref from the store for a create's check; nil
// when it is not registered.
func (h *Hub) readCreateType(ctx context.Context, ref cairn.TypeRef) (*keptType, error) {
	gen := h.typesGen.Load()
	t, err := h.st.GetType(ctx, ref)
	if cairn.HasCode(err, cairn.CodeNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get Type %s: %w", ref, err)
	}
	return h.keepType(ref, t, gen)
}

// createType is Type ref as a create reads it: kept from an earlier create,
// else read from the store; nil when it is not registered.
func (h *Hub) createType(ctx context.Context, ref cairn.TypeRef) (*keptType, error) {
	if kt := h.checkedTypes.get(ref, h.typesGen.Load()); kt != nil {
		return kt, nil
	}
	return h.readCreateType(ctx, ref)
}

// checkKeptValue is checkValue for a new instance's value (or an update's,
// updatetypes.go), against the Type kept from an earlier create or update
// when there is one. It returns the Type it checked against (nil: not
// registered) for the transaction to compare.
func (h *Hub) checkKeptValue(ctx context.Context, subject string, ref cairn.TypeRef, value json.RawMessage) (*keptType, error) {
	if kt := h.checkedTypes.get(ref, h.typesGen.Load()); kt != nil {
		err := checkAgainst(kt.s, subject, ref, value)
		if err == nil {
			return kt, nil
		}
		// Refused: say so only if the Type as stored refuses it too.
	}
	kt, err := h.readCreateType(ctx, ref)
	if err != nil {
		return nil, err
	}
	if kt == nil {
		return nil, h.unregistered(subject, ref)
	}
	return kt, checkAgainst(kt.s, subject, ref, value)
}

// recheckValues checks again, in the create's transaction, the values of
// the batch's instances of Type t (read there as ref) that were checked
// against another version of it. Every refusal is returned, as
// prepareCreate returns them.
func (h *Hub) recheckValues(ref cairn.TypeRef, t cairn.Type, items []*pending) error {
	var kt *keptType
	var errs []error
	for _, p := range items {
		if p.inst.TypeRef != ref || h.matches(p.checkedType, t) {
			continue
		}
		if kt == nil {
			var err error
			if kt, err = h.keepType(ref, t, h.typesGen.Load()); err != nil {
				return err
			}
		}
		if err := checkAgainst(kt.s, subjectOf(p.in.Alias), ref, p.checkedValue); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
