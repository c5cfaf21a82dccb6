package rest_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/backend/gotemplate"
	"github.com/cairn-dev/cairn/hub"
)

// The BACKEND column names a backend other than the built-in one by its
// alias: the backends are read for a table that shows one.
func TestTableNamesBackendsByAlias(t *testing.T) {
	e := newRestEnv(t)
	ctx, err := json.Marshal(gotemplate.Context{Template: "greeting: hello", Variables: map[string]gotemplate.Variable{}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.h.CreateInstances(e.ctx, hub.CreateRequest{Instances: []hub.NewInstance{
		{Alias: "projected", Name: "projected", TypeRef: cairn.TypeRef{Path: "cap.type.greeting", Revision: "0.1.0"},
			Backend: &hub.BackendInput{ID: gotemplate.BackendID, Context: ctx}},
		{Alias: "stored", Name: "stored", TypeRef: cairn.TypeRef{Path: "cap.type.greeting", Revision: "0.1.0"}, Value: json.RawMessage(`{"greeting":"hi"}`)},
	}}); err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest("GET", e.url+hubGV+"/typeinstances", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	resp, err := e.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var table struct {
		ColumnDefinitions []struct{ Name string }
		Rows              []struct{ Cells []any }
	}
	if err := json.NewDecoder(resp.Body).Decode(&table); err != nil {
		t.Fatal(err)
	}
	col := -1
	for i, c := range table.ColumnDefinitions {
		if c.Name == "Backend" {
			col = i
		}
	}
	got := map[string]any{}
	for _, r := range table.Rows {
		got[r.Cells[0].(string)] = r.Cells[col]
	}
	if col < 0 || got["projected"] != "gotemplate" || got["stored"] != cairn.BuiltinBackendAlias {
		t.Errorf("Backend cells = %v (column %d), want projected: gotemplate, stored: %s", got, col, cairn.BuiltinBackendAlias)
	}
}
