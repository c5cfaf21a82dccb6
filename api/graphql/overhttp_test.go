package graphql_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/api/graphql"
	"github.com/cairn-dev/cairn/hub"
)

// rawResponse is a /graphql answer as a generic GraphQL client sees it.
type rawResponse struct {
	code   int
	header http.Header
	body   string
}

// raw sends method to /graphql: a GET carries params in the URL, a POST as
// a JSON body.
func (e *env) raw(method string, params map[string]any, accept string) rawResponse {
	e.t.Helper()
	u, body := e.url, io.Reader(nil)
	if method == http.MethodGet {
		q := url.Values{}
		for k, v := range params {
			q.Set(k, v.(string))
		}
		u += "?" + q.Encode()
	} else {
		b, err := json.Marshal(params)
		if err != nil {
			e.t.Fatal(err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(e.ctx, method, u, body)
	if err != nil {
		e.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return rawResponse{code: res.StatusCode, header: res.Header, body: string(b)}
}

// TestOverHTTP walks what the GraphQL-over-HTTP specification asks of a
// server, as generic clients (GraphiQL, Apollo, graphql-request, curl) rely
// on it.
func TestOverHTTP(t *testing.T) {
	e := newEnv(t)
	const twoOps = `query A { types { path } } query B { storageBackends { id } }`
	tests := []struct {
		name           string
		method         string
		params         map[string]any
		accept         string
		code           int
		header, hvalue string // a header the answer must carry
		body           string // what the body must contain
	}{
		{name: "a query over GET", method: http.MethodGet, params: map[string]any{"query": `{ types { path } }`},
			code: 200, body: `{"data":{"types":[`},
		// The spec: a mutation over GET MUST be answered 405 Method Not
		// Allowed (GET is safe; caches and prefetchers replay it).
		{name: "a mutation over GET", method: http.MethodGet, params: map[string]any{"query": `mutation { lockTypeInstances(in: {ids: ["x"], ownerID: "o"}) }`},
			code: 405, header: "Allow", hvalue: "POST",
			body: `{"errors":[{"message":"a mutation cannot be sent with GET: POST it"}]}`},
		{name: "the mutation of several, chosen over GET", method: http.MethodGet, params: map[string]any{"query": `query Q { types { path } } mutation M { lockTypeInstances(in: {ids: ["x"], ownerID: "o"}) }`, "operationName": "M"},
			code: 405, header: "Allow", hvalue: "POST", body: `a mutation cannot be sent with GET`},
		{name: "the query of several, chosen over GET", method: http.MethodGet, params: map[string]any{"query": `query Q { types { path } } mutation M { lockTypeInstances(in: {ids: ["x"], ownerID: "o"}) }`, "operationName": "Q"},
			code: 200, body: `{"data":{"types":[`},
		{name: "several operations, one named", method: http.MethodPost, params: map[string]any{"query": twoOps, "operationName": "B"},
			code: 200, body: `{"data":{"storageBackends":[`},
		{name: "several operations, none named", method: http.MethodPost, params: map[string]any{"query": twoOps},
			code: 422, body: `"message":"the document has 2 operations (A, B): operationName must name the one to run"`},
		{name: "several operations, none named (graphql-response+json)", method: http.MethodPost, params: map[string]any{"query": twoOps}, accept: "application/graphql-response+json",
			code: 400, header: "Content-Type", hvalue: "application/graphql-response+json", body: `operationName must name the one to run`},
		{name: "an operationName the document lacks", method: http.MethodPost, params: map[string]any{"query": twoOps, "operationName": "C"},
			code: 422, body: `"message":"operationName \"C\" names no operation of the document (A, B)"`},
		{name: "an operationName for a document of one anonymous operation", method: http.MethodPost, params: map[string]any{"query": `{ types { path } }`, "operationName": "C"},
			code: 422, body: `"message":"operationName \"C\" names no operation of the document (one anonymous operation)"`},
		// Apollo Client's persisted-query link first sends only a hash; told
		// PersistedQueryNotSupported it sends the query from then on (any
		// other answer fails the application's request).
		{name: "an automatic persisted query by hash", method: http.MethodPost, params: map[string]any{"extensions": map[string]any{"persistedQuery": map[string]any{"version": 1, "sha256Hash": strings.Repeat("ab", 32)}}},
			code: 200, body: `{"errors":[{"message":"PersistedQueryNotSupported","extensions":{"code":"PERSISTED_QUERY_NOT_SUPPORTED"}}]`},
		{name: "an automatic persisted query by hash over GET", method: http.MethodGet, params: map[string]any{"extensions": `{"persistedQuery": {"version": 1, "sha256Hash": "abab"}}`},
			code: 200, body: `{"errors":[{"message":"PersistedQueryNotSupported","extensions":{"code":"PERSISTED_QUERY_NOT_SUPPORTED"}}]`},
		{name: "an automatic persisted query with its query", method: http.MethodPost, params: map[string]any{"query": `{ types { path } }`, "extensions": map[string]any{"persistedQuery": map[string]any{"version": 1, "sha256Hash": strings.Repeat("ab", 32)}}},
			code: 200, body: `{"data":{"types":[`},
		// A field error points at the field in the document, as the GraphQL
		// spec asks (locations) and Apollo's Local Hub answers.
		{name: "a field error has locations and path", method: http.MethodPost, params: map[string]any{"query": "mutation {\n  lockTypeInstances(in: {ids: [\"nope\"], ownerID: \"o\"})\n}"},
			code: 200, body: `"path":["lockTypeInstances"],"locations":[{"line":2,"column":3}]`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := e.raw(tc.method, tc.params, tc.accept)
			if got.code != tc.code || !strings.Contains(got.body, tc.body) {
				t.Errorf("got %d %.400s\nwant %d containing %s", got.code, got.body, tc.code, tc.body)
			}
			if tc.header != "" && got.header.Get(tc.header) != tc.hvalue {
				t.Errorf("%s: %q, want %q", tc.header, got.header.Get(tc.header), tc.hvalue)
			}
		})
	}
}

// TestFullIntrospection: the introspection query GraphiQL, Apollo and
// graphql-codegen send (graphql-js getIntrospectionQuery with every
// option) runs within the default limits.
func TestFullIntrospection(t *testing.T) {
	e := newEnv(t)
	q, err := os.ReadFile("testdata/introspection.graphql")
	if err != nil {
		t.Fatal(err)
	}
	got := e.raw(http.MethodPost, map[string]any{"query": string(q), "operationName": "IntrospectionQuery"}, "")
	var res response
	if err := json.Unmarshal([]byte(got.body), &res); err != nil || got.code != 200 || len(res.Errors) > 0 {
		t.Fatalf("HTTP %d %.500s (%v)", got.code, got.body, err)
	}
	if !strings.Contains(string(res.Data), `"queryType":{"name":"Query","kind":"OBJECT"}`) {
		t.Errorf("no query type in %.300s", res.Data)
	}
}

// TestValidationCostIsBounded: validating a document costs more than
// linear time in its selections (overlapping fields are compared pairwise:
// 8000 copies of one field took minutes of CPU), and the depth and
// complexity limits are checked only after validation. So a document's
// selections are counted first, in linear time, and one with more than the
// complexity limit allows is refused before it is validated.
func TestValidationCostIsBounded(t *testing.T) {
	e := newEnv(t)
	tests := []struct {
		name, query, want string
	}{
		{"one field repeated", `{ types { ` + strings.Repeat("path ", 4000) + `} }`,
			"the document has 4001 selections, more than the limit of 1000: ask for fewer fields"},
		{"one root field repeated", `{ ` + strings.Repeat("types { path } ", 3000) + `}`,
			"the document has 6000 selections, more than the limit of 1000: ask for fewer fields"},
		// Within the limit of 15000 tokens, so their selections are counted.
		{"many operations", strings.Repeat(`query { types { path } } `, 2000),
			"the document has 4000 selections, more than the limit of 1000: ask for fewer fields"},
		{"many fragments and spreads", `{ ...F } fragment F on Query { ` + strings.Repeat(`... on Query { types { path } } `, 1500) + `}`,
			"the document has 4501 selections, more than the limit of 1000: ask for fewer fields"},
		{"many operations, more tokens", strings.Repeat(`query { types { path } } `, 3000),
			"the document has more than 15000 tokens (names, punctuation, values), the limit: send a shorter one"},
		// Parsing is recursive: a document nested this deep took seconds of
		// CPU to parse (twice) before the selections were counted.
		{"nested 340,000 deep (1 MB)", deepDocument(340_000),
			"the document has more than 15000 tokens (names, punctuation, values), the limit: send a shorter one"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			got := e.raw(http.MethodPost, map[string]any{"query": tc.query}, "")
			var res response
			if err := json.Unmarshal([]byte(got.body), &res); err != nil {
				t.Fatalf("HTTP %d %.300s: %v", got.code, got.body, err)
			}
			if got.code != 422 || len(res.Errors) != 1 || res.Errors[0].Message != tc.want {
				t.Errorf("HTTP %d %+.300v\nwant 422 and %q", got.code, res.Errors, tc.want)
			}
			// Refused before validation, it costs about what parsing costs;
			// validated, such documents take from seconds to minutes.
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("took %v", d)
			}
		})
	}
}

// deepDocument is a query nested n levels deep, 3 bytes a level.
func deepDocument(n int) string {
	return "{" + strings.Repeat("a{", n) + "a" + strings.Repeat("}", n) + "}"
}

// BenchmarkDeepDocumentRefused: what a 1 MB document nested 340,000 levels
// deep costs the server before it is refused (TestValidationCostIsBounded).
func BenchmarkDeepDocumentRefused(b *testing.B) {
	e := newEnv(b)
	params := map[string]any{"query": deepDocument(340_000)}
	for b.Loop() {
		if got := e.raw(http.MethodPost, params, ""); got.code != 422 {
			b.Fatalf("HTTP %d %.300s", got.code, got.body)
		}
	}
}

// TestRequestBodies: a POST that is not one GraphQL request in JSON is
// refused with the HTTP status that says why and a message naming what is
// wrong, without echoing the body (which may hold a value meant to be
// secret) or Go's type names.
func TestRequestBodies(t *testing.T) {
	e := newEnv(t, func(_ *hub.Config, g *graphql.Config) { g.MaxBodyBytes = 4096 })
	tests := []struct {
		name, method, contentType, body string
		code                            int
		header, hvalue                  string
		want                            string // the one error's message
	}{
		{name: "a request", method: "POST", contentType: "application/json", body: `{"query": "{ types { path } }", "variables": null, "operationName": null, "extensions": null}`, code: 200},
		{name: "a body over the limit", method: "POST", contentType: "application/json", body: `{"query": "{ types { path } }` + strings.Repeat(" ", 5000) + `"}`,
			code: 413, want: "could not read request body: http: request body too large"},
		{name: "a batch", method: "POST", contentType: "application/json", body: ` [{"query": "{ types { path } }"}, {"query": "{ storageBackends { id } }"}]`,
			code: 400, want: "batched requests (a JSON array) are not supported: send one request per operation"},
		{name: "not JSON", method: "POST", contentType: "application/json", body: `{"query": "{ types { path } }", "variables": {"password": "hunter2hunter2"`,
			code: 400, want: "the request body is not JSON: unexpected end of JSON input"},
		{name: "not an object", method: "POST", contentType: "application/json", body: `"{ types { path } }"`,
			code: 400, want: "the request body must be a JSON object {query, operationName, variables, extensions}, not a string"},
		{name: "a query that is not a string", method: "POST", contentType: "application/json", body: `{"query": 1}`,
			code: 400, want: `"query" must be a string, not a number`},
		{name: "an operationName that is not a string", method: "POST", contentType: "application/json", body: `{"query": "{ types { path } }", "operationName": ["A"]}`,
			code: 400, want: `"operationName" must be a string or null, not an array`},
		{name: "variables that are not an object", method: "POST", contentType: "application/json", body: `{"query": "{ types { path } }", "variables": "{\"password\": \"hunter2hunter2\"}"}`,
			code: 400, want: `"variables" must be a JSON object or null, not a string`},
		{name: "extensions that are not an object", method: "POST", contentType: "application/json", body: `{"query": "{ types { path } }", "extensions": []}`,
			code: 400, want: `"extensions" must be a JSON object or null, not an array`},
		{name: "another media type", method: "POST", contentType: "text/plain", body: `{"query": "{ types { path } }"}`,
			code: 415, header: "Accept-Post", hvalue: "application/json", want: `POST /graphql needs Content-Type application/json, not "text/plain"`},
		{name: "no media type", method: "POST", body: `{"query": "{ types { path } }"}`,
			code: 415, header: "Accept-Post", hvalue: "application/json", want: `POST /graphql needs Content-Type application/json, not ""`},
		{name: "another method", method: "PUT", contentType: "application/json", body: `{"query": "{ types { path } }"}`,
			code: 405, header: "Allow", hvalue: "GET, POST, OPTIONS", want: "/graphql answers GET (queries) and POST, not PUT"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(e.ctx, tc.method, e.url, strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			if tc.contentType != "" {
				req.Header.Set("Content-Type", tc.contentType)
			}
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			b, _ := io.ReadAll(res.Body)
			var got response
			if err := json.Unmarshal(b, &got); err != nil {
				t.Fatalf("HTTP %d %s %.300s: %v", res.StatusCode, res.Header.Get("Content-Type"), b, err)
			}
			if res.StatusCode != tc.code || res.Header.Get("Content-Type") != "application/json" {
				t.Errorf("HTTP %d %s, want %d application/json", res.StatusCode, res.Header.Get("Content-Type"), tc.code)
			}
			switch {
			case tc.want == "" && len(got.Errors) > 0:
				t.Errorf("errors: %+v", got.Errors)
			case tc.want != "" && (len(got.Errors) != 1 || got.Errors[0].Message != tc.want):
				t.Errorf("errors %+v, want %q", got.Errors, tc.want)
			}
			if tc.header != "" && res.Header.Get(tc.header) != tc.hvalue {
				t.Errorf("%s: %q, want %q", tc.header, res.Header.Get(tc.header), tc.hvalue)
			}
			if strings.Contains(string(b), "hunter2") {
				t.Errorf("the answer echoes the body: %s", b)
			}
		})
	}
}

// TestRequestErrorsAreBounded: a document refused before it runs answers at
// most 100 errors and says how many it left out, as graphql-js does, so a
// request of 1 MiB cannot make an answer many times its size (3000
// repeated directives made 2999 errors).
func TestRequestErrorsAreBounded(t *testing.T) {
	e := newEnv(t)
	got := e.raw(http.MethodPost, map[string]any{"query": `{ types { path ` + strings.Repeat(`@skip(if: false) `, 900) + `} }`}, "")
	var res response
	if err := json.Unmarshal([]byte(got.body), &res); err != nil {
		t.Fatalf("HTTP %d %.300s: %v", got.code, got.body, err)
	}
	if got.code != 422 || len(res.Errors) != 101 {
		t.Fatalf("HTTP %d, %d errors, want 422 and 101", got.code, len(res.Errors))
	}
	if first := res.Errors[0].Message; first != `The directive "@skip" can only be used once at this location.` {
		t.Errorf("first error %q", first)
	}
	if last := res.Errors[100].Message; last != "too many errors: 799 more are not shown" {
		t.Errorf("last error %q", last)
	}
}

// TestGETCountsTokensBeforeParsing: a query sent with GET is held to the
// token limit before anything parses it, as a POST is. The GET transport
// parsed every query first (to refuse mutations) and a document nested
// 140,000 levels deep, in the 1 MiB of a URL, cost seconds of CPU before
// the limit refused it; now it costs what counting 15,000 tokens costs.
func TestGETCountsTokensBeforeParsing(t *testing.T) {
	e := newEnv(t)
	h := graphql.New(graphql.Config{Hub: e.h})
	u := "/graphql?" + url.Values{"query": {deepDocument(140_000)}}.Encode()
	var rec *httptest.ResponseRecorder
	allocs := testing.AllocsPerRun(1, func() {
		rec = httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, u, nil))
	})
	want := "the document has more than 15000 tokens (names, punctuation, values), the limit: send a shorter one"
	if rec.Code != 422 || !strings.Contains(rec.Body.String(), want) {
		t.Errorf("HTTP %d %.300s\nwant 422 and %q", rec.Code, rec.Body, want)
	}
	// Parsing allocates several objects a level; counting tokens, none.
	if allocs > 20_000 {
		t.Errorf("refusing the GET allocated %.0f times: the document was parsed", allocs)
	}
}
