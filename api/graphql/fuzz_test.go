package graphql_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// FuzzRequest posts arbitrary GraphQL documents and variables to the
// handler over a real hub: every answer is JSON with data or errors (as
// the GraphQL over HTTP spec says), below 500, within its deadline.
func FuzzRequest(f *testing.F) {
	seeds := []struct{ query, vars string }{
		{`{ typeInstances { id typeRef { path revision } latestResourceVersion { resourceVersion spec { value } } } }`, `{}`},
		{`query($f: TypeInstanceFilter) { typeInstances(filter: $f) { id } }`, `{"f":{"pathPattern":"cap.*"}}`},
		{`mutation($in: [CreateTypeInstanceInput!]!) { createTypeInstances(in: {typeInstances: $in}) { id alias } }`,
			`{"in":[{"alias":"a","typeRef":{"path":"cap.type.a","revision":"0.1.0"},"value":{"a":1}}]}`},
		{`mutation { deleteTypeInstance(id: "x") }`, `null`},
		{`mutation($i: [String!]!) { lockTypeInstances(in: {ids: $i, ownerID: "o"}) }`, `{"i":["00000000-0000-4000-8000-000000000001"]}`},
		{`{ __schema { types { name fields { name } } } }`, `{}`},
		{`{ typeInstance(id: 1) { id } }`, `{"x": [}`},
		{`{ a: typeInstances { b: id ...F } } fragment F on TypeInstance { ...F }`, `{}`},
		{`{`, ``}, {`query { typeInstances(filter: {typeRef: {path: "` + "\x00" + `"}}) { id } }`, `{}`},
	}
	for _, s := range seeds {
		f.Add(s.query, []byte(s.vars))
	}
	e := newEnv(f)
	handler := http.DefaultClient
	f.Fuzz(func(t *testing.T, query string, vars []byte) {
		body, err := json.Marshal(map[string]any{"query": query, "variables": json.RawMessage(vars)})
		if err != nil { // variables that are not JSON: send them verbatim
			body = []byte(`{"query":` + string(mustJSON(query)) + `,"variables":` + string(vars) + `}`)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		req := httptest.NewRequestWithContext(ctx, "POST", e.url, bytes.NewReader(body))
		req.RequestURI = ""
		req.Header.Set("Content-Type", "application/json")
		res, err := handler.Do(req)
		if err != nil {
			t.Fatalf("POST: %v (hung: %v)", err, ctx.Err() != nil)
		}
		defer res.Body.Close()
		var out struct {
			Data   json.RawMessage `json:"data"`
			Errors []struct {
				Message string `json:"message"`
			} `json:"errors"`
		}
		if err := json.NewDecoder(res.Body).Decode(&out); err != nil {
			t.Fatalf("status %d: the answer is not JSON: %v", res.StatusCode, err)
		}
		if res.StatusCode >= 500 {
			t.Fatalf("status %d: %+v", res.StatusCode, out.Errors)
		}
		if out.Data == nil && len(out.Errors) == 0 {
			t.Fatalf("status %d: neither data nor errors", res.StatusCode)
		}
		for _, er := range out.Errors {
			if er.Message == "" {
				t.Fatal("an error without a message")
			}
		}
	})
}

func mustJSON(s string) []byte {
	b, _ := json.Marshal(s)
	return b
}
