package rest

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/hub"
)

// TestTableRowsKeptAndAged: a kept row is served as a row computed at the
// same time would be, its age as of each request; a change of the
// instance (change number, users) or of the columns computes it again.
func TestTableRowsKeptAndAged(t *testing.T) {
	res := &resource{group: "flipt.io", version: "v1alpha1", kind: "Flag"}
	t0 := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	inst := cairn.Instance{ID: "id-1", Name: "f1", Namespace: "default", Seq: 7, CreatedAt: t0,
		Backend: cairn.BackendRef{ID: "backend-1", Abstract: true}, Labels: map[string]string{"team": "<a>"},
		Latest: cairn.ResourceVersion{ResourceVersion: 1}}
	alias := "first"
	cols := userColumns(nil, func(id string) string { return alias + ":" + id })
	tr := tableRequest{version: "v1", includeObject: "Metadata"}
	var rows tableRows
	hits := 0
	// build returns the Table of inst at now from the kept rows, after
	// checking it against the Table computed.
	build := func(inst cairn.Instance, cols []printColumn, now time.Time, hit bool) Table {
		t.Helper()
		items := []tableItem{{obj: toObject(res, inst), inst: &inst}}
		got := buildTable(tr, cols, ListMeta{}, items, &rows, tableKey(res, cols), now)
		if hit {
			hits++
		}
		if rows.hits != hits {
			t.Fatalf("%d rows served from the cache, want %d", rows.hits, hits)
		}
		items[0].inst = nil
		want := buildTable(tr, cols, ListMeta{}, items, nil, "", now)
		g, _ := json.Marshal(got)
		w, _ := json.Marshal(want)
		if !bytes.Equal(g, w) {
			t.Fatalf("kept Table\n%s\ncomputed\n%s", g, w)
		}
		return got
	}
	age := func(tb Table) any { return tb.Rows[0].Cells[1] }

	if a := age(build(inst, cols, t0.Add(90*time.Second), false)); a != "90s" {
		t.Errorf("age = %v, want 90s", a)
	}
	if a := age(build(inst, cols, t0.Add(3*time.Hour), true)); a != "3h" {
		t.Errorf("age of the kept row 3h later = %v, want 3h", a)
	}
	alias = "renamed" // the Backend column names the backend as of the request
	if b := build(inst, cols, t0, true).Rows[0].Cells[3]; b != "renamed:backend-1" {
		t.Errorf("Backend = %v, want renamed:backend-1", b)
	}
	changed := inst
	changed.Seq, changed.Labels = 8, map[string]string{"team": "b"}
	build(changed, cols, t0, false)
	build(changed, cols, t0, true)
	changed.UsedBy = []string{"user-1"}
	build(changed, cols, t0, false)
	wide := append(cols[:len(cols):len(cols)], newColumn(cairn.PrinterColumn{Name: "Labels", Type: "string", JSONPath: ".metadata.labels.team"}))
	if l := build(changed, wide, t0, false).Rows[0].Cells[len(wide)-1]; l != "b" {
		t.Errorf("new column = %v, want b", l)
	}
	build(changed, cols, t0, true) // both column sets are kept
}

// TestRowKeepable: the rows kept are those whose cells and metadata are a
// function of the instance's change number and users.
func TestRowKeepable(t *testing.T) {
	plain := userColumns(nil, func(string) string { return "" })
	withValue := append(plain[:len(plain):len(plain)], valueColumn(cairn.PrinterColumn{Name: "Port", Type: "integer", JSONPath: ".spec.port"}))
	builtin := cairn.Instance{ID: "i", Seq: 1, TypeRef: cairn.TypeRef{Path: "io.flipt.flag", Revision: "1.0.0"},
		Backend: cairn.BackendRef{ID: cairn.BuiltinBackendID, Abstract: true}}
	external := builtin
	external.Backend = cairn.BackendRef{ID: "vault", Abstract: false}
	redacted := builtin
	redacted.Latest.Redacted = true
	terraform := builtin
	terraform.TypeRef.Path = hub.TerraformStatePath
	owned := builtin
	owned.Labels = map[string]string{hub.LabelInstallationUID: "install-1"}
	owned.UsedBy = []string{"install-1"}
	for _, c := range []struct {
		name   string
		inst   cairn.Instance
		cols   []printColumn
		values bool
		want   bool
	}{
		{"built-in", builtin, plain, false, true},
		{"built-in, value column", builtin, withValue, true, true},
		{"value column, values not read", builtin, withValue, false, false},
		{"external backend, value column", external, withValue, true, false},
		{"external backend, no value column", external, plain, false, true},
		{"redacted", redacted, plain, true, false},
		{"redacted, value column", redacted, withValue, true, false},
		{"terraform state", terraform, plain, false, false},
		{"owned by an installation", owned, plain, false, false},
	} {
		if got := rowKeepable(&c.inst, c.cols, c.values); got != c.want {
			t.Errorf("%s: rowKeepable = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestWriteTableJSON: a Table written from kept rows is byte for byte
// what writeJSON writes.
func TestWriteTableJSON(t *testing.T) {
	meta, _ := json.Marshal(map[string]any{"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
		"metadata": map[string]any{"name": "a<b>", "labels": map[string]any{"x": "&"}}})
	for _, tb := range []Table{
		{Kind: "Table", APIVersion: "meta.k8s.io/v1", Metadata: ListMeta{ResourceVersion: "3", Continue: "c"},
			ColumnDefinitions: []TableColumn{{Name: "Name", Type: "string", Format: "name"}, {Name: "N", Type: "integer"}},
			Rows: []TableRow{{Cells: []any{"a<b>", int64(3)}, Object: json.RawMessage(meta)},
				{Cells: []any{"c", nil}, Object: map[string]any{"metadata": map[string]any{"name": "c"}}},
				{Cells: []any{"d", 1.5}}}},
		{Kind: "Table", APIVersion: "meta.k8s.io/v1beta1", Rows: []TableRow{}},
	} {
		got, want := httptest.NewRecorder(), httptest.NewRecorder()
		writeTableJSON(got, tb)
		writeJSON(want, 200, tb)
		if !bytes.Equal(got.Body.Bytes(), want.Body.Bytes()) || got.Header().Get("Content-Type") != "application/json" {
			t.Errorf("writeTableJSON wrote\n%s\nwriteJSON writes\n%s", got.Body.Bytes(), want.Body.Bytes())
		}
	}
}
