package hub

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/store"
)

// An update checks its value against its Type as a create does
// (createtypes.go): against the Type kept from an earlier create or update,
// and, in its transaction, one small query (store.TypeMatcher) proves the
// Type still has the schema and names the value was checked against. Any
// mismatch (the Type deleted and registered again with another schema by
// another process, or registered since the check when it was not) reads
// the Type there and checks the value again against it; a refusal by a
// kept Type is confirmed on the stored Type before it is returned. The
// verdict, message included, is the one a check on the Type as stored at
// the commit gives. Reading the Type from the store for every update cost
// 6–7 % of an update's CPU.
//
// Only on a store whose transactions match Types (SQLite's and
// PostgreSQL's do): on another an update reads the Type for its check
// outside its transaction and pins nothing.

// typeMatcher returns tx as a store.TypeMatcher, nil when it is not one.
func typeMatcher(tx store.Tx) store.TypeMatcher {
	m, _ := tx.(store.TypeMatcher)
	return m
}

// typeMatches asks m (nil: no matcher) whether Type ref is registered with
// jsonSchema and names as named says. It answers false when it is not, and
// when the store cannot tell: a wrapper (package atrest) over a store
// without TypeMatcher fails with errors.ErrUnsupported, and the caller then
// reads the Type. It records the store's first answer in h.typesMatch.
func (h *Hub) typeMatches(ctx context.Context, m store.TypeMatcher, ref cairn.TypeRef, jsonSchema json.RawMessage, named bool) (bool, error) {
	if m == nil || h.typesMatch.Load() < 0 {
		return false, nil
	}
	ok, err := m.TypeMatches(ctx, ref, jsonSchema, named)
	if errors.Is(err, errors.ErrUnsupported) {
		h.typesMatch.Store(-1)
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if h.typesMatch.Load() == 0 {
		h.typesMatch.Store(1)
	}
	return ok, nil
}

// checkUpdateValue checks an update's value of an instance of Type ref. It
// reports whether the transaction must pin the Type (pinUpdateTypes) and
// the kept Type the value was checked against (nil: not registered).
func (h *Hub) checkUpdateValue(ctx context.Context, subject string, ref cairn.TypeRef, value json.RawMessage) (pin bool, kt *keptType, err error) {
	if h.typesMatch.Load() <= 0 {
		return false, nil, h.checkValue(ctx, subject, ref, value)
	}
	kt, err = h.checkKeptValue(ctx, subject, ref, value)
	return true, kt, err
}

// typeRefusal is a value refused in an update's transaction by its Type as
// stored there: the error an update's staging gives for the same refusal,
// passed on as it is.
type typeRefusal struct{ err error }

func (e *typeRefusal) Error() string { return "failed to update TypeInstances: " + e.err.Error() }
func (e *typeRefusal) Unwrap() error { return e.err }

// isTypeRefusal reports whether err is a typeRefusal.
func isTypeRefusal(err error) bool {
	var r *typeRefusal
	return errors.As(err, &r)
}

// pinUpdateTypes pins, in the update's transaction, the Types the staged
// values were checked against (checkUpdateValue), and checks again against
// the Type as stored now each value checked against another version of it
// (or against none). Every refusal is returned, in the order of the batch,
// as staging returns them.
func (h *Hub) pinUpdateTypes(ctx context.Context, tx store.Tx, items []*staged) error {
	matcher := typeMatcher(tx)
	if matcher != nil && h.typesMatch.Load() == 0 && len(items) > 0 {
		// Nobody has asked the store yet (no create since start): ask it
		// once, so that the next updates check against kept Types where
		// it answers. The answer itself is not needed here.
		if _, err := h.typeMatches(ctx, matcher, items[0].inst.TypeRef, nil, false); err != nil {
			return err
		}
	}
	var (
		matched map[cairn.TypeRef]*keptType // proved current by TypeMatches
		current map[cairn.TypeRef]*keptType // read here; nil value: not registered
		errs    []error
	)
	for _, s := range items {
		if !s.pinType {
			continue
		}
		ref, kt := s.inst.TypeRef, s.checkedType
		if kt != nil && matched[ref] == kt {
			continue
		}
		cur, read := current[ref]
		if !read && kt != nil {
			ok, err := h.typeMatches(ctx, matcher, ref, kt.doc, kt.named)
			if err != nil {
				return err
			}
			if ok {
				if matched == nil {
					matched = make(map[cairn.TypeRef]*keptType, 1)
				}
				matched[ref] = kt
				continue
			}
		}
		if !read {
			t, err := tx.GetType(ctx, ref)
			switch {
			case cairn.HasCode(err, cairn.CodeNotFound):
			case err != nil:
				return fmt.Errorf("read Type %s: %w", ref, err)
			default:
				if h.matches(kt, t) {
					cur = kt
				} else if cur, err = h.keepType(ref, t, h.typesGen.Load()); err != nil {
					return err
				}
			}
			if current == nil {
				current = make(map[cairn.TypeRef]*keptType, 1)
			}
			current[ref] = cur
		}
		subject := subjectOf(s.inst.ID)
		var err error
		switch {
		case cur == nil:
			err = h.unregistered(subject, ref)
		case cur != kt:
			err = checkAgainst(cur.s, subject, ref, s.up.Value)
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return &typeRefusal{err: errors.Join(errs...)}
	}
	return nil
}
