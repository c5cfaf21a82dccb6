package graphql

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"sync/atomic"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/cairn-dev/cairn/api/graphql/model"
)

// A response's size is bounded while it is resolved, not after: complexity
// counts fields, not bytes, so 200 aliases of a list of large values stay
// under it and still answer hundreds of megabytes. Every resolved field adds
// what it will at least write (its key, punctuation, a leaf's bytes) to the
// request's budget; once over, nothing more is resolved, the request's
// context is cancelled so hub and backend reads stop, and the answer is one
// error with no data.

// budget is one request's response size account.
type budget struct {
	max    int64
	used   atomic.Int64
	over   atomic.Bool
	cancel context.CancelFunc
}

type budgetKey struct{}

func withBudget(ctx context.Context, b *budget) context.Context {
	return context.WithValue(ctx, budgetKey{}, b)
}

func budgetFrom(ctx context.Context) *budget {
	b, _ := ctx.Value(budgetKey{}).(*budget)
	return b
}

// add accounts n bytes and reports whether the budget still holds.
func (b *budget) add(n int64) bool {
	if b.used.Add(n) <= b.max {
		return true
	}
	if b.over.CompareAndSwap(false, true) {
		b.cancel()
	}
	return false
}

func (b *budget) err() *gqlerror.Error {
	return &gqlerror.Error{Message: fmt.Sprintf("the response is larger than the limit of %d bytes (%s): ask for fewer fields, aliases or instances (filter typeInstances)", b.max, MaxResponseFlag)}
}

// accountField is the field middleware: it resolves the field unless the
// budget is spent, and charges what the field will write.
func accountField(ctx context.Context, next graphql.Resolver) (any, error) {
	b := budgetFrom(ctx)
	if b == nil {
		return next(ctx)
	}
	if b.over.Load() {
		// Null, not an error: the response is replaced anyway, and an
		// error per skipped field would grow without bound.
		return graphql.Null, nil
	}
	res, err := next(ctx)
	n := int64(4) // "":, around the key
	if fc := graphql.GetFieldContext(ctx); fc != nil {
		n += int64(len(fc.Field.Alias))
	}
	if !b.add(n + leafSize(res)) {
		return graphql.Null, nil
	}
	return res, err
}

// leafSize is a lower bound of the bytes v is written as, without what its
// own fields will add (they are charged when they resolve).
func leafSize(v any) int64 {
	switch v := v.(type) {
	case nil:
		return 4
	case string:
		return int64(len(v)) + 2
	case *string:
		if v == nil {
			return 4
		}
		return int64(len(*v)) + 2
	case model.RawJSON:
		return int64(len(v))
	case json.RawMessage:
		return int64(len(v))
	case bool, *bool:
		return 4
	case int, int32, int64, float64, *int:
		return 1
	case time.Time, *time.Time:
		return 22
	}
	if rv := reflect.ValueOf(v); rv.Kind() == reflect.Slice {
		return 2 + int64(rv.Len()) // brackets, commas
	}
	return 2 // an object's braces
}

// aroundResponse replaces the response of a request that went over its
// budget by the one error.
func aroundResponse(ctx context.Context, next graphql.ResponseHandler) *graphql.Response {
	resp := next(ctx)
	if b := budgetFrom(ctx); b != nil && b.over.Load() {
		return &graphql.Response{Errors: gqlerror.List{b.err()}}
	}
	return resp
}

// rootSlots bounds how many root fields (aliases included) of one request
// resolve at once: each may load a whole list before any of it is charged,
// so 200 aliases started together would hold 200 lists.
type rootSlots struct{ ch chan struct{} }

func newRootSlots() *rootSlots { return &rootSlots{ch: make(chan struct{}, maxConcurrentRootFields)} }

const maxConcurrentRootFields = 4

type rootSlotsKey struct{}

func aroundRootField(ctx context.Context, next graphql.RootResolver) graphql.Marshaler {
	s, _ := ctx.Value(rootSlotsKey{}).(*rootSlots)
	if s == nil {
		return next(ctx)
	}
	select {
	case s.ch <- struct{}{}:
		defer func() { <-s.ch }()
	case <-ctx.Done():
		// Resolve anyway: the field reports the timeout, or the budget's
		// check below skips it.
	}
	if b := budgetFrom(ctx); b != nil && b.over.Load() {
		return graphql.Null
	}
	return next(ctx)
}
