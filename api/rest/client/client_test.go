package client_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/api/rest"
	"github.com/cairn-dev/cairn/api/rest/client"
	"github.com/cairn-dev/cairn/hub"
	"github.com/cairn-dev/cairn/store/sqlite"
)

const flagsRD = `{"apiVersion": "cup.flipt.io/v1alpha1", "kind": "ResourceDefinition",
 "metadata": {"name": "flags.flipt.io"},
 "names": {"kind": "Flag", "singular": "flag", "plural": "flags", "shortNames": ["fl"]},
 "spec": {"group": "flipt.io", "versions": {"v1alpha1": {"type": "object", "additionalProperties": false,
   "properties": {"enabled": {"type": "boolean"}}}}}}`

func setup(t *testing.T) (*client.Client, *hub.Hub) {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "c.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	h, err := hub.New(ctx, hub.Config{Store: st, PollInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(rest.New(rest.Config{Hub: h}))
	t.Cleanup(srv.Close)
	c, err := client.New(srv.URL, client.WithActor("alice"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Create(ctx, client.Types, "", json.RawMessage(flagsRD)); err != nil {
		t.Fatalf("create Type: %v", err)
	}
	return c, h
}

func flag(name string, enabled any) map[string]any {
	return map[string]any{"apiVersion": "flipt.io/v1alpha1", "kind": "Flag",
		"metadata": map[string]any{"name": name, "labels": map[string]string{"team": "a"}},
		"spec":     map[string]any{"enabled": enabled}}
}

func TestClientRoundTrip(t *testing.T) {
	c, h := setup(t)
	ctx := context.Background()
	for _, name := range []string{"flags", "flag", "fl", "Flag", "flags.flipt.io"} {
		if r, err := c.FindResource(ctx, name); err != nil || r.Plural != "flags" || !r.Namespaced {
			t.Errorf("FindResource(%q) = %+v, %v", name, r, err)
		}
	}
	if _, err := c.FindResource(ctx, "nope"); cairn.ErrorCode(err) != cairn.CodeNotFound {
		t.Errorf("FindResource(nope) = %v, want NotFound", err)
	}
	flags, _ := c.FindResource(ctx, "flags")

	created, err := c.Create(ctx, flags, "default", flag("a", true))
	if err != nil {
		t.Fatal(err)
	}
	var obj rest.Object
	if err := json.Unmarshal(created, &obj); err != nil || obj.Metadata.UID == "" || obj.Status.CreatedBy != "alice" {
		t.Fatalf("created = %s, %v", created, err)
	}
	_, err = c.Create(ctx, flags, "default", flag("a", true))
	if cairn.ErrorCode(err) != cairn.CodeAlreadyExists {
		t.Errorf("duplicate create = %v, want AlreadyExists", err)
	}
	_, err = c.Create(ctx, flags, "default", flag("bad", "yes"))
	if cairn.ErrorCode(err) != cairn.CodeInvalid || len(cairn.Causes(err)) != 1 || cairn.Causes(err)[0].Field != "spec.enabled" {
		t.Errorf("invalid create = %v (causes %v), want Invalid with a cause on spec.enabled", err, cairn.Causes(err))
	}

	// Stale replace: Conflict.
	stale := flag("a", false)
	stale["metadata"].(map[string]any)["resourceVersion"] = obj.Metadata.ResourceVersion
	if _, err := c.Patch(ctx, flags, "default", "a", client.MergePatch, []byte(`{"spec":{"enabled":false}}`), client.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Replace(ctx, flags, "default", "a", stale, client.WriteOptions{}); cairn.ErrorCode(err) != cairn.CodeConflict {
		t.Errorf("stale replace = %v, want Conflict", err)
	}

	// Locks: a write without the owner is refused with CodeLocked.
	if err := c.Lock(ctx, []string{obj.Metadata.UID}, "bob"); err != nil {
		t.Fatal(err)
	}
	_, err = c.Patch(ctx, flags, "default", "a", client.MergePatch, []byte(`{"spec":{"enabled":true}}`), client.WriteOptions{})
	if cairn.ErrorCode(err) != cairn.CodeLocked {
		t.Errorf("write of a locked flag = %v, want Locked", err)
	}
	if err := c.Unlock(ctx, []string{obj.Metadata.UID}, "carol"); cairn.ErrorCode(err) != cairn.CodeLocked {
		t.Errorf("unlock by another owner = %v, want Locked", err)
	}
	if err := c.Unlock(ctx, []string{obj.Metadata.UID}, "bob"); err != nil {
		t.Fatal(err)
	}
	if err := c.Lock(ctx, []string{"00000000-0000-4000-8000-000000000009"}, "bob"); cairn.ErrorCode(err) != cairn.CodeNotFound {
		t.Errorf("lock of a missing id = %v, want NotFound", err)
	}

	// Used by: the delete is refused with the user's id.
	out, err := h.CreateInstances(ctx, hub.CreateRequest{
		Instances:     []hub.NewInstance{{Alias: "u", TypeRef: cairn.TypeRef{Path: "cap.type.x", Revision: "0.1.0"}}},
		UsesRelations: []hub.UsesRelation{{From: "u", To: obj.Metadata.UID}},
	})
	if err != nil {
		t.Fatal(err)
	}
	err = c.Delete(ctx, flags, "default", "a", client.WriteOptions{})
	if cairn.ErrorCode(err) != cairn.CodeUsedBy || len(cairn.Errors(err)) == 0 || !strings.Contains(strings.Join(cairn.Errors(err)[0].IDs, ","), out[0].ID) {
		t.Errorf("delete of a used flag = %v, want UsedBy naming %s", err, out[0].ID)
	}

	// Paging and watch.
	for _, n := range []string{"b", "c", "d"} {
		if _, err := c.Create(ctx, flags, "default", flag(n, true)); err != nil {
			t.Fatal(err)
		}
	}
	all, err := c.ListAll(ctx, flags, "", client.ListOptions{Limit: 2, LabelSelector: "team=a"})
	if err != nil || len(all.Items) != 4 {
		t.Fatalf("ListAll = %d items, %v", len(all.Items), err)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	events, err := c.Watch(wctx, flags, "default", client.ListOptions{ResourceVersion: all.Metadata.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, flags, "default", "d", client.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-events:
		if ev.Type != "DELETED" || !strings.Contains(string(ev.Object), `"name":"d"`) {
			t.Errorf("event = %s %s, want DELETED d", ev.Type, ev.Object)
		}
	case <-wctx.Done():
		t.Fatal("no watch event")
	}
	if _, err := c.Get(ctx, flags, "default", "d"); cairn.ErrorCode(err) != cairn.CodeNotFound {
		t.Errorf("get after delete = %v, want NotFound", err)
	}
}

func TestClientUnreachable(t *testing.T) {
	c, err := client.New("http://127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Resources(context.Background())
	if cairn.ErrorCode(err) != cairn.CodeUnavailable || !strings.Contains(err.Error(), "cannot reach the cairn server") {
		t.Errorf("unreachable = %v, want Unavailable", err)
	}
	if _, err := client.New("127.0.0.1:8080"); cairn.ErrorCode(err) != cairn.CodeInvalid {
		t.Errorf("New without scheme = %v, want Invalid", err)
	}
}

// TestClientDryRun: a context with cairn.WithDryRun sends every write as
// dryRun=All; the server answers as the write would and changes nothing.
func TestClientDryRun(t *testing.T) {
	c, h := setup(t)
	ctx := context.Background()
	dry := cairn.WithDryRun(ctx)
	flags, _ := c.FindResource(ctx, "flags")
	if _, err := c.Create(ctx, flags, "default", flag("a", true)); err != nil {
		t.Fatal(err)
	}
	seq, err := h.LastSeq(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := c.Create(dry, flags, "default", flag("b", true)); err != nil || !strings.Contains(string(out), `"name":"b"`) {
		t.Errorf("dry-run create = %s, %v", out, err)
	}
	if _, err := c.Create(dry, flags, "default", flag("a", true)); cairn.ErrorCode(err) != cairn.CodeAlreadyExists {
		t.Errorf("dry-run create of a taken name = %v, want AlreadyExists", err)
	}
	if _, err := c.Patch(dry, flags, "default", "a", client.MergePatch, []byte(`{"spec":{"enabled":false}}`), client.WriteOptions{}); err != nil {
		t.Error(err)
	}
	if err := c.Delete(dry, flags, "default", "a", client.WriteOptions{}); err != nil {
		t.Error(err)
	}
	if after, _ := h.LastSeq(ctx); after != seq {
		t.Errorf("dry-run writes moved the change log from %d to %d", seq, after)
	}
	got, err := c.Get(dry, flags, "default", "a")
	if err != nil || !strings.Contains(string(got), `"enabled":true`) {
		t.Errorf("after the dry runs: %s, %v", got, err)
	}
	if _, err := c.Get(ctx, flags, "default", "b"); cairn.ErrorCode(err) != cairn.CodeNotFound {
		t.Errorf("dry-run create made b: %v", err)
	}
}

// A server that answers without a Kubernetes Status (not cairn, a proxy, a
// wrong URL) gets one line that says so and where, not its page.
func TestClientNotAStatus(t *testing.T) {
	page := "<!DOCTYPE html>\n<html>\n<body>\n<h1>404 Not Found</h1>\n</body>\n</html>\n"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/apis":
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, page)
		default:
			http.Error(w, "upstream connect error", http.StatusBadGateway)
		}
	}))
	t.Cleanup(srv.Close)
	c, err := client.New(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Resources(context.Background())
	want := "GET " + srv.URL + "/apis: the server answered 404 Not Found with text/html, not a Kubernetes Status: is " + srv.URL + " a cairn server?"
	if err == nil || err.Error() != want || cairn.ErrorCode(err) != cairn.CodeNotFound {
		t.Errorf("HTML 404 = %v (%s)\nwant %s", err, cairn.ErrorCode(err), want)
	}
	_, err = c.List(context.Background(), client.Types, "", client.ListOptions{})
	want = "GET " + srv.URL + "/apis/hub.cairn.dev/v1/types: the server answered 502 Bad Gateway: upstream connect error"
	if err == nil || err.Error() != want || cairn.ErrorCode(err) != cairn.CodeUnavailable {
		t.Errorf("plain 502 = %v (%s)\nwant %s", err, cairn.ErrorCode(err), want)
	}
}
