package rest_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/api/rest"
	"github.com/cairn-dev/cairn/hub"
	"github.com/cairn-dev/cairn/store/sqlite"
)

// A Type registered through another replica (another hub on the same
// store) is served at once by this one, not after its resource cache
// expires: a request for an unknown resource reloads the cache.
func TestTypeFromAnotherReplicaIsServed(t *testing.T) {
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
	srv := httptest.NewServer(rest.New(rest.Config{Hub: b}))
	t.Cleanup(srv.Close)
	get := func(p string) int {
		resp, err := http.Get(srv.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	const list = "/apis/example.org/v1/namespaces/default/gadgets"
	if code := get(list); code != http.StatusNotFound {
		t.Fatalf("GET %s before the Type exists = %d, want 404", list, code)
	}
	if _, err := a.CreateType(ctx, cairn.Type{Path: "org.example.gadget", Revision: "0.1.0", JSONSchema: []byte(`{"type":"object"}`),
		Group: "example.org", Version: "v1", Names: &cairn.Names{Kind: "Gadget", Plural: "gadgets"}}); err != nil {
		t.Fatal(err)
	}
	// Past the reload interval of a miss, well inside the cache's lifetime.
	time.Sleep(300 * time.Millisecond)
	if code := get(list); code != http.StatusOK {
		t.Fatalf("GET %s after another replica registered the Type = %d, want 200", list, code)
	}
}
