package rest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/api/rest"
	"github.com/cairn-dev/cairn/hub"
	"github.com/cairn-dev/cairn/store/sqlite"
)

// Lists and objects are served from kept bodies while nothing changes; a write through
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
	getOne := func(name string) string {
		t.Helper()
		resp, err := http.Get(srv.URL + "/apis/example.org/v1/namespaces/default/gadgets/" + name)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var o struct{ Spec json.RawMessage }
		if err := json.NewDecoder(resp.Body).Decode(&o); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("get %s: %d %v", name, resp.StatusCode, err)
		}
		return string(o.Spec)
	}
	for range 2 { // the second from the kept body
		if got := getOne("g2"); got != `{"n":1}` {
			t.Fatalf("get g2 = %s", got)
		}
	}
	if _, err := a.UpdateInstances(ctx, []hub.UpdateInstance{{ID: g2, Value: json.RawMessage(`{"n":2}`), Labels: map[string]string{"team": "a"}}}); err != nil {
		t.Fatal(err)
	}
	if got := getOne("g2"); got != `{"n":2}` {
		t.Fatalf("get g2 after an update through the other replica = %s", got)
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

// A list's resourceVersion as Kubernetes reads it: "0" answers from the
// read cache as it is (another replica's write may not be in it yet), "N"
// is not older than N (the write is in it once N is its position), unset
// is the most recent; a position the store has not reached is 504.
func TestListResourceVersionSemantics(t *testing.T) {
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
	get := func(query string, wantCode int) (names []string, rv string) {
		t.Helper()
		resp, err := http.Get(srv.URL + "/apis/example.org/v1/namespaces/default/gadgets" + query)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != wantCode {
			t.Fatalf("list%s: %d %s, want %d", query, resp.StatusCode, body, wantCode)
		}
		var l struct {
			Metadata struct{ ResourceVersion string }
			Items    []struct{ Metadata struct{ Name string } }
		}
		if err := json.Unmarshal(body, &l); err != nil {
			t.Fatal(err)
		}
		for _, it := range l.Items {
			names = append(names, it.Metadata.Name)
		}
		return names, l.Metadata.ResourceVersion
	}
	create := func(name string) int64 {
		t.Helper()
		c, err := a.CreateInstances(ctx, hub.CreateRequest{Instances: []hub.NewInstance{{Alias: name, Name: name, Namespace: "default",
			TypeRef: typ.Ref(), Value: json.RawMessage(`{}`)}}})
		if err != nil {
			t.Fatal(err)
		}
		return c[0].Instance.Seq
	}
	create("g1")
	if names, _ := get("", 200); !slices.Equal(names, []string{"g1"}) {
		t.Fatalf("consistent list: %v", names)
	}
	seq := create("g2") // through the other replica: this one's cache has not seen it
	names, rv := get("?resourceVersion=0", 200)
	if !slices.Equal(names, []string{"g1"}) || rv == "" {
		t.Fatalf(`resourceVersion "0" answered %v at %q: want the cache as it was (g1 only), without asking the store`, names, rv)
	}
	names, rv = get(fmt.Sprintf("?resourceVersion=%d", seq), 200)
	if !slices.Equal(names, []string{"g1", "g2"}) || rv != fmt.Sprint(seq) {
		t.Fatalf("resourceVersion %d (not older than) answered %v at %s", seq, names, rv)
	}
	if names, _ := get(fmt.Sprintf("?resourceVersion=%d&resourceVersionMatch=NotOlderThan", seq-1), 200); !slices.Equal(names, []string{"g1", "g2"}) {
		t.Fatalf("not older than %d: %v", seq-1, names)
	}
	create("g3")
	if names, _ := get("", 200); !slices.Equal(names, []string{"g1", "g2", "g3"}) {
		t.Fatalf("consistent list after another write: %v", names)
	}
	for _, c := range []struct {
		query string
		code  int
	}{
		{fmt.Sprintf("?resourceVersion=%d", seq+1000), http.StatusGatewayTimeout},
		{"?resourceVersion=1&resourceVersionMatch=Exact", http.StatusUnprocessableEntity},
		{"?resourceVersionMatch=NotOlderThan", http.StatusUnprocessableEntity},
		{"?resourceVersion=abc", http.StatusBadRequest},
		{"?resourceVersion=5&continue=abc", http.StatusBadRequest},
	} {
		resp, err := http.Get(srv.URL + "/apis/example.org/v1/namespaces/default/gadgets" + c.query)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.code || !strings.Contains(string(body), `"kind":"Status"`) {
			t.Errorf("list%s: %d %s, want %d and a Status", c.query, resp.StatusCode, body, c.code)
		}
		if c.code == http.StatusGatewayTimeout && !strings.Contains(string(body), "Too large resource version") {
			t.Errorf("list%s: %s", c.query, body)
		}
	}
}
