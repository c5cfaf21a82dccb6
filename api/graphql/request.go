package graphql

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/errcode"
	"github.com/99designs/gqlgen/graphql/handler/transport"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
	"github.com/vektah/gqlparser/v2/lexer"
	"github.com/vektah/gqlparser/v2/parser"
)

// documentLimit looks at a document before the executor validates it.
//
// Its tokens are counted first, by the lexer alone, which stops once they
// pass the limit: parsing is recursive, and a 1 MiB document nested 340,000
// levels deep took seconds of CPU to parse (twice: here and by the
// executor) before anything could look at its depth.
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
// words a client can act on (the executor says "operation  not found"),
// and that automatic persisted queries are not supported.
type documentLimit struct {
	max, tokens int
	cache       graphql.Cache[*ast.QueryDocument]
}

var _ interface {
	graphql.HandlerExtension
	graphql.OperationParameterMutator
} = documentLimit{}

func (documentLimit) ExtensionName() string                   { return "DocumentLimit" }
func (documentLimit) Validate(graphql.ExecutableSchema) error { return nil }

func (d documentLimit) MutateOperationParameters(ctx context.Context, p *graphql.RawParams) *gqlerror.Error {
	if _, hashed := p.Extensions["persistedQuery"]; hashed && p.Query == "" {
		// Apollo's persisted-query link sends a hash first and, told this
		// (Apollo Server's words), sends the query from then on.
		return &gqlerror.Error{Message: "PersistedQueryNotSupported", Extensions: map[string]any{"code": "PERSISTED_QUERY_NOT_SUPPORTED"}}
	}
	doc, ok := d.cache.Get(ctx, p.Query)
	if !ok {
		if tooMany(p.Query, d.tokens) {
			return invalid("the document has more than %d tokens (names, punctuation, values), the limit: send a shorter one", d.tokens)
		}
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

// tooMany reports whether query has more than limit tokens, comments
// left out as the parser counts them. A lexical error stops the count: the
// parser stops there too, and reports it.
func tooMany(query string, limit int) bool {
	lex := lexer.New(&ast.Source{Input: query})
	for n := 0; ; {
		tok, err := lex.ReadToken()
		if err != nil || tok.Kind == lexer.EOF {
			return false
		}
		if tok.Kind == lexer.Comment {
			continue
		}
		if n++; n > limit {
			return true
		}
	}
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
// stay safe, since caches and prefetchers replay it. A query over the token
// limit is not parsed here (parsing is recursive: a URL's megabyte nested
// 140,000 deep cost seconds); documentLimit refuses it.
type getTransport struct {
	transport.GET
	tokens int
}

func (t getTransport) Do(w http.ResponseWriter, r *http.Request, exec graphql.GraphExecutor) {
	q := r.URL.Query()
	if tooMany(q.Get("query"), t.tokens) {
		t.GET.Do(w, r, exec)
		return
	}
	if doc, err := parser.ParseQuery(&ast.Source{Input: q.Get("query")}); err == nil {
		if op := doc.Operations.ForName(q.Get("operationName")); op != nil && op.Operation != ast.Query {
			w.Header().Set("Allow", http.MethodPost)
			writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("a %s cannot be sent with GET: POST it", op.Operation))
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

// postTransport serves POST as gqlgen's transport does, but refuses a body
// that is not one GraphQL request in JSON with a message naming what is
// wrong (gqlgen's names Go types and echoes the whole body, which may hold
// values meant to be secret), a batch with one saying batches are not
// supported, and a body over the limit with 413 (gqlgen answers 200).
type postTransport struct{ transport.POST }

func (t postTransport) Do(w http.ResponseWriter, r *http.Request, exec graphql.GraphExecutor) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		code := http.StatusBadRequest
		if tooLarge := (*http.MaxBytesError)(nil); errors.As(err, &tooLarge) {
			code = http.StatusRequestEntityTooLarge
		}
		writeError(w, code, "could not read request body: "+err.Error())
		return
	}
	if msg := requestShape(body); msg != "" {
		writeError(w, http.StatusBadRequest, msg)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	t.POST.Do(w, r, exec)
}

// requestShape says what keeps body from being a GraphQL request
// {query, operationName, variables, extensions}, or "".
func requestShape(body []byte) string {
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	if len(trimmed) > 0 && trimmed[0] == '[' {
		return "batched requests (a JSON array) are not supported: send one request per operation"
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil {
		var syntax *json.SyntaxError
		if errors.As(err, &syntax) {
			return "the request body is not JSON: " + err.Error()
		}
		return "the request body must be a JSON object {query, operationName, variables, extensions}, not " + jsonKind(trimmed)
	}
	for _, f := range []struct {
		name, want string
		ok         func(kind string) bool
	}{
		{"query", "a string", func(k string) bool { return k == "a string" || k == "null" }},
		{"operationName", "a string or null", func(k string) bool { return k == "a string" || k == "null" }},
		{"variables", "a JSON object or null", func(k string) bool { return k == "an object" || k == "null" }},
		{"extensions", "a JSON object or null", func(k string) bool { return k == "an object" || k == "null" }},
	} {
		if v, ok := fields[f.name]; ok && !f.ok(jsonKind(v)) {
			return fmt.Sprintf("%q must be %s, not %s", f.name, f.want, jsonKind(v))
		}
	}
	return ""
}

// jsonKind names the kind of the valid JSON value v.
func jsonKind(v []byte) string {
	v = bytes.TrimLeft(v, " \t\r\n")
	if len(v) == 0 {
		return "nothing"
	}
	switch v[0] {
	case '"':
		return "a string"
	case '{':
		return "an object"
	case '[':
		return "an array"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// checkMethod answers a request no transport serves, with the status that
// says why; it reports whether it did.
func checkMethod(w http.ResponseWriter, r *http.Request) bool {
	switch r.Method {
	case http.MethodGet, http.MethodOptions, http.MethodHead:
		return false
	case http.MethodPost:
		ct := r.Header.Get("Content-Type")
		if mt, _, err := mime.ParseMediaType(ct); err == nil && mt == "application/json" {
			return false
		}
		w.Header().Set("Accept-Post", "application/json")
		writeError(w, http.StatusUnsupportedMediaType, fmt.Sprintf("POST /graphql needs Content-Type application/json, not %q", ct))
		return true
	}
	w.Header().Set("Allow", "GET, POST, OPTIONS")
	writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("/graphql answers GET (queries) and POST, not %s", r.Method))
	return true
}

// writeError answers a request refused before it reached the executor.
func writeError(w http.ResponseWriter, code int, msg string) {
	b, err := json.Marshal(map[string]any{"errors": []map[string]string{{"message": msg}}})
	if err != nil {
		code, b = http.StatusInternalServerError, []byte(`{"errors":[{"message":"internal server error"}]}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	w.Write(b) //nolint:errcheck // the client is gone
}

// maxRequestErrors bounds the errors of a request refused before it ran,
// as graphql-js bounds validation errors: each costs the client a few
// bytes of document and the server a hundred of answer.
const maxRequestErrors = 100

// boundErrors keeps the first maxRequestErrors errors of a request that
// did not run (no data) and says how many more there were.
func boundErrors(ctx context.Context, next graphql.ResponseHandler) *graphql.Response {
	resp := next(ctx)
	if resp == nil || resp.Data != nil || len(resp.Errors) <= maxRequestErrors {
		return resp
	}
	more := len(resp.Errors) - maxRequestErrors
	resp.Errors = append(resp.Errors[:maxRequestErrors:maxRequestErrors], gqlerror.Errorf("too many errors: %d more are not shown", more))
	return resp
}
