package rest_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"testing"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/api/rest"
	"github.com/cairn-dev/cairn/hub"
	"github.com/cairn-dev/cairn/store/sqlite"
)

// Lists are served from kept bodies while nothing changes; a write through
// another replica (another hub on the same store) is in the very next list
// through this one, with no wait: the kept body is tied to the change-log
// position, which the write moved.
func TestListBodiesFollowWritesOfAnotherReplica(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "cairn.db")
	open := func() *hub.Hub {
		st, err := sqlite.Open(ctx, path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		h, err := hub.New(ctx, hub.Config{Store: st})
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	a, b := open(), open()
	typ, err := a.CreateType(ctx, cairn.Type{Path: "org.example.gadget", Revision: "0.1.0", JSONSchema: []byte(`{"type":"object"}`),
		Group: "example.org", Version: "v1", Names: &cairn.Names{Kind: "Gadget", Plural: "gadgets"}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(rest.New(rest.Config{Hub: b}))
	t.Cleanup(srv.Close)
	type list struct {
		Metadata struct{ ResourceVersion string }
		Items    []struct {
			Metadata struct {
				Name   string
				Labels map[string]string
			}
			Spec json.RawMessage
		}
	}
	get := func(query string) (list, string) {
		t.Helper()
		resp, err := http.Get(srv.URL + "/apis/example.org/v1/namespaces/default/gadgets" + query)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("list%s: %d %s", query, resp.StatusCode, body)
		}
		var l list
		if err := json.Unmarshal(body, &l); err != nil {
			t.Fatal(err)
		}
		return l, string(body)
	}
	names := func(l list) []string {
		var out []string
		for _, it := range l.Items {
			out = append(out, it.Metadata.Name+"="+string(it.Spec))
		}
		return out
	}
	create := func(name string, labels map[string]string) string {
		t.Helper()
		c, err := a.CreateInstances(ctx, hub.CreateRequest{Instances: []hub.NewInstance{{Alias: name, Name: name, Namespace: "default",
			TypeRef: typ.Ref(), Labels: labels, Value: json.RawMessage(`{"n":1}`)}}})
		if err != nil {
			t.Fatal(err)
		}
		return c[0].Instance.ID
	}

	g1 := create("g1", map[string]string{"team": "a"})
	first, firstBody := get("")
	again, againBody := get("")
	if againBody != firstBody || len(again.Items) != 1 {
		t.Fatalf("an unchanged list changed:\n%s\n%s", firstBody, againBody)
	}

	g2 := create("g2", map[string]string{"team": "b"})
	l, _ := get("")
	if got := names(l); !slices.Equal(got, []string{`g1={"n":1}`, `g2={"n":1}`}) || l.Metadata.ResourceVersion == first.Metadata.ResourceVersion {
		t.Fatalf("after a create through the other replica: %v at %s (before %s)", got, l.Metadata.ResourceVersion, first.Metadata.ResourceVersion)
	}

	if sel, _ := get("?labelSelector=team%3Db"); !slices.Equal(names(sel), []string{`g2={"n":1}`}) {
		t.Fatalf("team=b: %v", names(sel))
	}
	if _, err := a.UpdateInstances(ctx, []hub.UpdateInstance{{ID: g2, Value: json.RawMessage(`{"n":2}`), Labels: map[string]string{"team": "a"}}}); err != nil {
		t.Fatal(err)
	}
	if sel, _ := get("?labelSelector=team%3Db"); len(sel.Items) != 0 {
		t.Fatalf("team=b after relabelling g2: %v", names(sel))
	}
	if l, _ := get(""); !slices.Equal(names(l), []string{`g1={"n":1}`, `g2={"n":2}`}) {
		t.Fatalf("after an update through the other replica: %v", names(l))
	}

	if err := a.DeleteInstance(ctx, g1, ""); err != nil {
		t.Fatal(err)
	}
	if l, _ := get(""); !slices.Equal(names(l), []string{`g2={"n":2}`}) {
		t.Fatalf("after a delete through the other replica: %v", names(l))
	}
}
