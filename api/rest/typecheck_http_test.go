package rest_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/api/rest"
	"github.com/cairn-dev/cairn/auth/rbac"
	"github.com/cairn-dev/cairn/backend/file"
)

// TestValueReadBackMustMatchItsType: a flag whose backend answers a value
// the flags Type refuses (a field it does not have) is served by no REST
// read: the GET, the list with values and the typeinstance answer 500
// naming the instance, the backend and the violation, without the value;
// the list without values still shows the flag.
func TestValueReadBackMustMatchItsType(t *testing.T) {
	e := newGRPCRestEnv(t)
	dir := t.TempDir()
	fb, err := file.New(file.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	bid, _ := e.serveBackend(fb)
	f := flag("b", nil, `{"key": "b"}`)
	f["metadata"].(map[string]any)["annotations"] = map[string]string{rest.AnnotationBackend: bid}
	b := decodeObj(t, e.mustDo("POST", flagsIn("default"), "application/json", f, http.StatusCreated))
	const leaked = "hunter2-from-another-shape"
	if err := os.WriteFile(filepath.Join(dir, b.Metadata.UID, "1.json"), []byte(`{"key":"b","token":"`+leaked+`"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{flagsIn("default") + "/b", flagsIn("default"), hubGV + "/typeinstances/" + b.Metadata.UID} {
		r := e.get(path)
		if r.code != http.StatusInternalServerError || strings.Contains(string(r.body), leaked) ||
			!strings.Contains(string(r.body), b.Metadata.UID) || !strings.Contains(string(r.body), bid) || !strings.Contains(string(r.body), "must NOT have additional properties") {
			t.Errorf("GET %s = %s; want 500 naming the instance, the backend and the violation, not the value", path, r)
		}
	}
	if r := e.get(hubGV + "/typeinstances?values=false"); r.code != http.StatusOK || !strings.Contains(string(r.body), b.Metadata.UID) {
		t.Errorf("list without values = %s", r)
	}
}

// TestTableHidesBackendAliasFromNonListers: a table's BACKEND column names
// an external backend by its alias, a setting of the backend: a caller who
// may not list backends (a viewer of one namespace) gets the id the
// instance holds, never the alias.
func TestTableHidesBackendAliasFromNonListers(t *testing.T) {
	e := newGRPCRestEnv(t)
	fb, err := file.New(file.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	bid, _ := e.serveBackend(fb)
	f := flag("b", nil, `{"key": "b"}`)
	f["metadata"].(map[string]any)["annotations"] = map[string]string{rest.AnnotationBackend: bid}
	e.mustDo("POST", flagsIn("default"), "application/json", f, http.StatusCreated)
	if _, err := e.h.CreateRBAC(e.ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "view", Namespace: "default"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: rbac.ViewerRole},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: "vic"}}}); err != nil {
		t.Fatal(err)
	}
	// The same hub served to vic, as the access guard serves it.
	srv := httptest.NewUnstartedServer(rest.New(rest.Config{Hub: e.h}))
	srv.Config.BaseContext = func(net.Listener) context.Context {
		return cairn.WithUser(context.Background(), cairn.User{Name: "vic", Groups: []string{cairn.Authenticated}})
	}
	srv.Start()
	t.Cleanup(srv.Close)
	cell := func(base string) any {
		req, err := http.NewRequest("GET", base+flagsIn("default"), nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var table struct {
			ColumnDefinitions []struct{ Name string }
			Rows              []struct{ Cells []any }
		}
		if err := json.NewDecoder(resp.Body).Decode(&table); err != nil || len(table.Rows) != 1 {
			t.Fatalf("table from %s: %v, %+v", base, err, table)
		}
		for i, c := range table.ColumnDefinitions {
			if c.Name == "Backend" {
				return table.Rows[0].Cells[i]
			}
		}
		t.Fatalf("no Backend column: %+v", table.ColumnDefinitions)
		return nil
	}
	if got := cell(e.url); got != "files" {
		t.Errorf("admin's Backend cell = %v, want files", got)
	}
	if got := cell(srv.URL); got != bid {
		t.Errorf("viewer's Backend cell = %v, want the id %s", got, bid)
	}
}
