package access

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"

	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/parser"

	"github.com/cairn-dev/cairn/auth/rbac"
)

// maxGraphQLBody bounds what the guard reads to classify a GraphQL request.
const maxGraphQLBody = 8 << 20

// graphqlAttributes gates GraphQL as a whole: queries need to list
// TypeInstances in every namespace, mutations to create, update and delete
// them there. GraphQL's instances are not namespaced, so nothing narrower
// than the cluster scope can be granted for them.
func (g *Guard) graphqlAttributes(r *http.Request) []rbac.Attributes {
	ti := func(verb string) rbac.Attributes {
		return rbac.Attributes{Verb: verb, ResourceRequest: true, APIGroup: "hub.cairn.dev", Resource: "typeinstances"}
	}
	read := []rbac.Attributes{ti("list")}
	if r.Method != http.MethodPost || r.Body == nil {
		return read
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxGraphQLBody+1))
	r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body), r.Body))
	if err != nil || len(body) > maxGraphQLBody {
		return append(read, ti("create"), ti("update"), ti("delete"))
	}
	var one struct {
		Query string `json:"query"`
	}
	var batch []struct {
		Query string `json:"query"`
	}
	var queries []string
	if json.Unmarshal(body, &batch) == nil {
		for _, q := range batch {
			queries = append(queries, q.Query)
		}
	} else if json.Unmarshal(body, &one) == nil {
		queries = []string{one.Query}
	}
	for _, q := range queries {
		doc, err := parser.ParseQuery(&ast.Source{Input: q})
		if err != nil {
			continue // GraphQL itself answers the syntax error
		}
		for _, op := range doc.Operations {
			if op.Operation != ast.Query {
				return append(read, ti("create"), ti("update"), ti("delete"))
			}
		}
	}
	return read
}
