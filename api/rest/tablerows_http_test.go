package rest_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/backend/gotemplate"
	"github.com/cairn-dev/cairn/hub"
)

// tableRow is a Table row by column name, with its PartialObjectMetadata.
type tableRow struct {
	cells map[string]any
	meta  struct {
		Labels      map[string]string `json:"labels"`
		Annotations map[string]string `json:"annotations"`
	}
}

// getTable reads path as the Table kubectl get asks for: its rows by
// their first cell, and the body.
func getTable(t *testing.T, e *restEnv, path string) (map[string]tableRow, string) {
	t.Helper()
	req, err := http.NewRequest("GET", e.url+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io,application/json")
	resp, err := e.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body strings.Builder
	var table struct {
		ColumnDefinitions []struct{ Name string }
		Rows              []struct {
			Cells  []any
			Object struct{ Metadata json.RawMessage }
		}
	}
	if err := json.NewDecoder(io.TeeReader(resp.Body, &body)).Decode(&table); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s %v: %s", path, resp.Status, err, body.String())
	}
	rows := map[string]tableRow{}
	for _, r := range table.Rows {
		row := tableRow{cells: map[string]any{}}
		for i, c := range table.ColumnDefinitions {
			row.cells[c.Name] = r.Cells[i]
		}
		if err := json.Unmarshal(r.Object.Metadata, &row.meta); err != nil {
			t.Fatalf("GET %s: row metadata: %v: %s", path, err, body.String())
		}
		rows[r.Cells[0].(string)] = row
	}
	return rows, body.String()
}

// Table rows are kept by (instance, change number, columns): every change
// shows in the next Table, including a value of an external backend,
// which changes without a change number of its own (a gotemplate
// projection of another instance), and through typeinstances.
func TestTableRowsShowChangesAtOnce(t *testing.T) {
	e := newRestEnv(t)
	typ, err := e.h.CreateType(e.ctx, cairn.Type{Path: "org.example.site", Revision: "0.1.0",
		JSONSchema: []byte(`{"type":"object","properties":{"host":{"type":"string"}}}`),
		Group:      "example.org", Version: "v1", Names: &cairn.Names{Kind: "Site", Plural: "sites"},
		PrinterColumns: []cairn.PrinterColumn{{Name: "Host", Type: "string", JSONPath: ".spec.host"},
			{Name: "Age", Type: "date", JSONPath: ".metadata.creationTimestamp"}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, err := json.Marshal(gotemplate.Context{Template: `host: "{{ .src.host }}.mirror"`,
		Variables: map[string]gotemplate.Variable{"src": {RelatedTypeInstanceAlias: "stored"}}})
	if err != nil {
		t.Fatal(err)
	}
	out, err := e.h.CreateInstances(e.ctx, hub.CreateRequest{Instances: []hub.NewInstance{
		{Alias: "stored", Name: "stored", Namespace: "default", TypeRef: typ.Ref(), Value: json.RawMessage(`{"host":"a.example"}`)},
		{Alias: "projected", Name: "projected", Namespace: "default", TypeRef: typ.Ref(),
			Backend: &hub.BackendInput{ID: gotemplate.BackendID, Context: ctx}},
	}, UsesRelations: []hub.UsesRelation{{From: "projected", To: "stored"}}})
	if err != nil {
		t.Fatal(err)
	}
	stored := out[0].ID
	const sites = "/apis/example.org/v1/namespaces/default/sites"
	want := func(step string, rows map[string]tableRow, name, col string, v any) {
		t.Helper()
		if got := rows[name].cells[col]; got != v {
			t.Errorf("%s: %s's %s = %v, want %v", step, name, col, got, v)
		}
	}
	// Rows computed without the values (the objects asked for without
	// them) are not kept for the Tables whose columns show them.
	rows, _ := getTable(t, e, sites+"?values=false&includeObject=Object")
	want("without values", rows, "stored", "Host", nil)
	for range 2 { // computed, then kept
		rows, _ := getTable(t, e, sites)
		want("created", rows, "stored", "Host", "a.example")
		want("created", rows, "projected", "Host", "a.example.mirror")
		want("created", rows, "stored", "Age", "0s")
	}
	if _, err := e.h.UpdateInstances(e.ctx, []hub.UpdateInstance{{ID: stored, Value: json.RawMessage(`{"host":"b.example"}`)}}); err != nil {
		t.Fatal(err)
	}
	rows, _ = getTable(t, e, sites)
	want("value updated", rows, "stored", "Host", "b.example")
	want("value updated", rows, "projected", "Host", "b.example.mirror")
	want("value updated", rows, "stored", "Revision", 2.0)

	if _, err := e.h.UpdateInstances(e.ctx, []hub.UpdateInstance{{ID: stored, Labels: map[string]string{"team": "web"}}}); err != nil {
		t.Fatal(err)
	}
	if rows, _ := getTable(t, e, sites); rows["stored"].meta.Labels["team"] != "web" {
		t.Errorf("labelled: stored's row metadata = %+v, want the label team=web (kubectl get -L)", rows["stored"].meta)
	}
	getTable(t, e, hubGV+"/typeinstances") // kept before the lock
	if err := e.h.LockInstances(e.ctx, []string{stored}, "deployer"); err != nil {
		t.Fatal(err)
	}
	rows, _ = getTable(t, e, sites)
	want("locked", rows, "stored", "Locked-By", "deployer")
	tis, _ := getTable(t, e, hubGV+"/typeinstances")
	want("locked, typeinstances", tis, "stored", "Locked-By", "deployer")
	want("locked, typeinstances", tis, "stored", "Backend", cairn.BuiltinBackendAlias)
	want("locked, typeinstances", tis, "projected", "Backend", "gotemplate")
}

// A row whose value was redacted for one caller is never kept for another:
// a list that reveals secrets (?values=true) and one that does not, in
// either order, with a column that reads the secret (Vault) and without
// one (Safe, whose rows show kubectl's last-applied annotation, which
// the hub stores redacted).
func TestTableRowsOfSecrets(t *testing.T) {
	const clear = "open-sesame-1234"
	for _, order := range [][]string{{"", "?values=true", "", "?values=true"}, {"?values=true", "", "?values=true", ""}} {
		t.Run(strings.Join(order, ","), func(t *testing.T) {
			e := newRestEnv(t)
			for _, kind := range []string{"Vault", "Safe"} {
				typ := cairn.Type{Path: "org.example." + strings.ToLower(kind), Revision: "0.1.0",
					JSONSchema: []byte(`{"type":"object","properties":{"user":{"type":"string"},"password":{"type":"string","x-cairn-secret":true}}}`),
					Group:      "example.org", Version: "v1", Names: &cairn.Names{Kind: kind, Plural: strings.ToLower(kind) + "s"}}
				if kind == "Vault" {
					typ.PrinterColumns = []cairn.PrinterColumn{{Name: "Password", Type: "string", JSONPath: ".spec.password"}}
				}
				if _, err := e.h.CreateType(e.ctx, typ); err != nil {
					t.Fatal(err)
				}
				if _, err := e.h.CreateInstances(e.ctx, hub.CreateRequest{Instances: []hub.NewInstance{{Name: "v1", Namespace: "default",
					TypeRef: typ.Ref(), Value: json.RawMessage(`{"user":"u","password":"` + clear + `"}`),
					Annotations: map[string]string{hub.LastAppliedAnnotation: `{"apiVersion":"example.org/v1","kind":"` + kind + `","spec":{"password":"` + clear + `","user":"u"}}`}}}}); err != nil {
					t.Fatal(err)
				}
			}
			for _, path := range []string{"/apis/example.org/v1/namespaces/default/vaults", "/apis/example.org/v1/safes"} {
				for _, step := range order {
					rows, body := getTable(t, e, path+step)
					if step == "" && strings.Contains(body, clear) {
						t.Errorf("GET %s: a list that does not reveal secrets shows the password: %s", path+step, body)
					}
					if pw, ok := rows["v1"].cells["Password"]; ok && step != "" && pw != clear {
						t.Errorf("GET %s: Password = %v, want %s", path+step, pw, clear)
					}
				}
			}
		})
	}
}
