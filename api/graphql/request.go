package graphql

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/errcode"
	"github.com/99designs/gqlgen/graphql/handler/transport"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
	"github.com/vektah/gqlparser/v2/parser"
)

// documentLimit looks at a document before the executor validates it.
//
// Validation costs more than linear time in a document's selections
// (overlapping fields are compared pairwise: 8000 copies of one field take
// minutes of CPU), while the depth and complexity limits are checked only
// after it. So the selections written in a document are counted first, in
// linear time, and a document with more than the complexity limit allows
// is refused before it is validated. A document that passes validation is
// cached by the executor and not parsed again here.
//
// It also says which operation to run when operationName does not, in
// words a client can act on (the executor says "operation  not found").
type documentLimit struct {
	max   int
	cache graphql.Cache[*ast.QueryDocument]
}

var _ interface {
	graphql.HandlerExtension
	graphql.OperationParameterMutator
} = documentLimit{}

func (documentLimit) ExtensionName() string                   { return "DocumentLimit" }
func (documentLimit) Validate(graphql.ExecutableSchema) error { return nil }

func (d documentLimit) MutateOperationParameters(ctx context.Context, p *graphql.RawParams) *gqlerror.Error {
	doc, ok := d.cache.Get(ctx, p.Query)
	if !ok {
		var err error
		doc, err = parser.ParseQuery(&ast.Source{Input: p.Query})
		if err != nil {
			return nil // the executor parses it again and reports the error with its code
		}
		if n := selections(doc); n > d.max {
			return invalid("the document has %d selections, more than the limit of %d: ask for fewer fields", n, d.max)
		}
	}
	return chooseOperation(doc.Operations, p.OperationName)
}

// selections counts the fields, fragment spreads and inline fragments
// written in doc, each fragment definition once.
func selections(doc *ast.QueryDocument) int {
	n := 0
	var walk func(ast.SelectionSet)
	walk = func(set ast.SelectionSet) {
		for _, sel := range set {
			n++
			switch s := sel.(type) {
			case *ast.Field:
				walk(s.SelectionSet)
			case *ast.InlineFragment:
				walk(s.SelectionSet)
			}
		}
	}
	for _, op := range doc.Operations {
		walk(op.SelectionSet)
	}
	for _, f := range doc.Fragments {
		walk(f.SelectionSet)
	}
	return n
}

// chooseOperation refuses an operationName that selects none of ops, as
// the GraphQL spec's GetOperation does. A document without operations is
// left to the executor.
func chooseOperation(ops ast.OperationList, name string) *gqlerror.Error {
	switch {
	case len(ops) == 0 || ops.ForName(name) != nil:
		return nil
	case name == "":
		return invalid("the document has %d operations (%s): operationName must name the one to run", len(ops), operationNames(ops))
	}
	return invalid("operationName %q names no operation of the document (%s)", name, operationNames(ops))
}

func operationNames(ops ast.OperationList) string {
	if len(ops) == 1 && ops[0].Name == "" {
		return "one anonymous operation"
	}
	const most = 10
	names := make([]string, 0, most+1)
	for i, op := range ops {
		if i == most {
			names = append(names, fmt.Sprintf("and %d more", len(ops)-most))
			break
		}
		if op.Name == "" {
			names = append(names, "an anonymous operation")
			continue
		}
		names = append(names, op.Name)
	}
	return strings.Join(names, ", ")
}

// invalid is a request error: answered with the validation errors' code
// and HTTP status, before anything runs.
func invalid(format string, args ...any) *gqlerror.Error {
	err := gqlerror.Errorf(format, args...)
	errcode.Set(err, errcode.ValidationFailed)
	return err
}

// getTransport serves queries over GET as gqlgen's transport does, but
// answers a mutation with 405 Method Not Allowed and Allow: POST, as the
// GraphQL-over-HTTP specification requires (gqlgen answers 406): GET must
// stay safe, since caches and prefetchers replay it.
type getTransport struct{ transport.GET }

func (t getTransport) Do(w http.ResponseWriter, r *http.Request, exec graphql.GraphExecutor) {
	q := r.URL.Query()
	if doc, err := parser.ParseQuery(&ast.Source{Input: q.Get("query")}); err == nil {
		if op := doc.Operations.ForName(q.Get("operationName")); op != nil && op.Operation != ast.Query {
			w.Header().Set("Allow", http.MethodPost)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusMethodNotAllowed)
			fmt.Fprintf(w, `{"errors":[{"message":"a %s cannot be sent with GET: POST it"}]}`, op.Operation)
			return
		}
	}
	t.GET.Do(w, r, exec)
}

// presentError presents a resolver's error with the location of its field
// in the document, as the GraphQL spec asks of a field error (gqlgen gives
// only its path). The errors of a request over its response budget are
// dropped: its answer is the budget's error.
func presentError(ctx context.Context, err error) *gqlerror.Error {
	if b := budgetFrom(ctx); b != nil && b.over.Load() {
		return nil
	}
	e := graphql.DefaultErrorPresenter(ctx, err)
	fc := graphql.GetFieldContext(ctx)
	if e == nil || len(e.Locations) > 0 || fc == nil || fc.Field.Field == nil || fc.Field.Position == nil {
		return e
	}
	e.Locations = []gqlerror.Location{{Line: fc.Field.Position.Line, Column: fc.Field.Position.Column}}
	return e
}
