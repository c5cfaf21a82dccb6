package rest_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/hub"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/postgres/pgtest"
	"github.com/cairn-dev/cairn/store/sqlite"
)

// TestPagedListOrder: a list paged with limit and continue comes in the
// order of the same list unpaged, the API server's key order (namespace,
// then name; typeinstances by metadata.name, their id), whichever serves
// it (the read cache, or the store itself) on SQLite and PostgreSQL; an
// object there from the first page to the last is listed once whatever
// is created and deleted between pages; kubectl --chunk-size prints what
// an unpaged kubectl get prints.
func TestPagedListOrder(t *testing.T) {
	kubectl, _ := exec.LookPath("kubectl")
	stores := []struct {
		name string
		open func(t *testing.T) store.Store
	}{
		{"sqlite", func(t *testing.T) store.Store {
			st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "cairn.db"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			return st
		}},
		{"postgresql", func(t *testing.T) store.Store { return pgtest.Open(t) }},
	}
	for _, sto := range stores {
		for _, noCache := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/read cache %v", sto.name, !noCache), func(t *testing.T) {
				e := newRestEnvOn(t, hub.Config{Store: sto.open(t), NoReadCache: noCache})
				e.mustDo("POST", hubGV+"/types", "application/json", flagsRD, http.StatusCreated)
				pagedListOrder(t, e)
				if !noCache {
					// What kubectl asks for is the same whichever serves it.
					chunkedKubectl(t, e, kubectl)
				}
			})
		}
	}
}

func pagedListOrder(t *testing.T, e *restEnv) {
	// Created in name order across both Type revisions of the kind: the
	// store's own order (revision, then newest first) is another.
	var ins []hub.NewInstance
	for _, ns := range []string{"a", "a-b", "b", "default"} {
		for i, name := range []string{"c", "c-1", "m", "x"} {
			in := hub.NewInstance{TypeRef: flagType, Namespace: ns, Name: name, Value: json.RawMessage(`{"key":"k"}`)}
			if i%2 == 1 {
				in.TypeRef.Revision, in.Value = "1.0.0", json.RawMessage(`{}`)
			}
			ins = append(ins, in)
		}
	}
	if _, err := e.h.CreateInstances(e.ctx, hub.CreateRequest{Instances: ins}); err != nil {
		t.Fatal(err)
	}
	// Namespace, then name: a space sorts before every character of them.
	key := func(o obj) string { return o.Metadata.Namespace + " " + o.Metadata.Name }
	list := func(path string, q url.Values) obj {
		t.Helper()
		return decodeObj(t, e.mustDo("GET", path+"?"+q.Encode(), "", nil, http.StatusOK))
	}
	// paged lists path limit at a time, calling between (when set) after
	// every page but the last.
	paged := func(path string, limit int, between func(page obj)) []obj {
		t.Helper()
		var items []obj
		q := url.Values{"limit": {strconv.Itoa(limit)}}
		for range 100 {
			page := list(path, q)
			items = append(items, page.Items...)
			if page.Metadata.Continue == "" {
				return items
			}
			if between != nil {
				between(page)
			}
			q.Set("continue", page.Metadata.Continue)
		}
		t.Fatalf("%s by %d: paging does not end", path, limit)
		return nil
	}
	keys := func(items []obj, k func(obj) string) []string {
		out := make([]string, len(items))
		for i, it := range items {
			out[i] = k(it)
		}
		return out
	}
	id := func(o obj) string { return o.Metadata.Name }

	for _, c := range []struct {
		path string
		key  func(obj) string
	}{
		{flagsGV + "/flags", key},
		{flagsIn("a"), key},
		{hubGV + "/typeinstances", id},
	} {
		whole := keys(list(c.path, nil).Items, c.key)
		if !slices.IsSorted(whole) || len(whole) < 4 {
			t.Errorf("%s unpaged: %q, not in key order", c.path, whole)
		}
		for _, limit := range []int{1, 2, 3, 5} {
			if got := keys(paged(c.path, limit, nil), c.key); !slices.Equal(got, whole) {
				t.Errorf("%s by %d:\n\t%q\nunpaged:\n\t%q", c.path, limit, got, whole)
			}
		}
	}

	n := 0 // names the objects created
	// Between pages, the page's last object and the one after it are
	// deleted, and objects sorting right before and right after the end
	// of the page are created.
	for _, c := range []struct {
		path string
		key  func(obj) string
	}{
		{flagsGV + "/flags", key},
		{hubGV + "/typeinstances", id},
	} {
		before := list(c.path, nil).Items
		throughout := map[string]bool{}
		for _, it := range before {
			throughout[it.Metadata.UID] = true
		}
		late := map[string]bool{}
		got := paged(c.path, 3, func(page obj) {
			last := page.Items[len(page.Items)-1]
			var gone []string
			if !system(last) {
				gone = append(gone, last.Metadata.UID)
			}
			for _, it := range before {
				if throughout[it.Metadata.UID] && c.key(it) > c.key(last) && !system(it) {
					gone = append(gone, it.Metadata.UID)
					break
				}
			}
			for _, uid := range gone {
				if err := e.h.DeleteInstance(e.ctx, uid, ""); err != nil {
					t.Fatalf("delete %s: %v", uid, err)
				}
				delete(throughout, uid)
			}
			n++
			ns, name := last.Metadata.Namespace, last.Metadata.Name
			if c.key(last) == id(last) {
				ns, _ = last.Spec["namespace"].(string)
				name, _ = last.Spec["name"].(string)
			}
			if system(last) {
				ns = "default"
			}
			made, err := e.h.CreateInstances(e.ctx, hub.CreateRequest{Instances: []hub.NewInstance{
				{TypeRef: flagType, Namespace: ns, Name: fmt.Sprintf("0-%d", n), Value: json.RawMessage(`{"key":"k"}`)},
				{TypeRef: flagType, Namespace: ns, Name: fmt.Sprintf("%s-0%d", name, n), Value: json.RawMessage(`{"key":"k"}`)},
			}})
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range made {
				k := m.Instance.Namespace + " " + m.Instance.Name
				if c.key(last) == id(last) {
					k = m.Instance.ID
				}
				if k > c.key(last) {
					late[m.Instance.ID] = true
				}
			}
		})
		seen := map[string]int{}
		for i, it := range got {
			seen[it.Metadata.UID]++
			if i > 0 && c.key(got[i-1]) >= c.key(it) {
				t.Errorf("%s: %s listed after %s", c.path, c.key(it), c.key(got[i-1]))
			}
		}
		for uid := range throughout {
			if seen[uid] != 1 {
				t.Errorf("%s: %s, there throughout, listed %d times", c.path, uid, seen[uid])
			}
		}
		for uid := range late {
			if seen[uid] != 1 {
				t.Errorf("%s: %s, created after the end of the page it sorts in, listed %d times", c.path, uid, seen[uid])
			}
		}
	}
}

// chunkedKubectl: kubectl get --chunk-size=2 prints what an unpaged list
// holds, in its order.
func chunkedKubectl(t *testing.T, e *restEnv, kubectl string) {
	if kubectl == "" {
		findKubectl(t) // fails under CI, skips loudly otherwise
		return
	}
	unpaged := func(path string, key func(o obj) string) []string {
		var out []string
		for _, it := range decodeObj(t, e.mustDo("GET", path, "", nil, http.StatusOK)).Items {
			out = append(out, key(it))
		}
		return out
	}
	flags := unpaged(flagsGV+"/flags", func(o obj) string { return o.Metadata.Namespace + " " + o.Metadata.Name })
	tis := unpaged(hubGV+"/typeinstances", func(o obj) string { return o.Metadata.Name + " " + o.Spec["namespace"].(string) })
	// kubectl pages 500 at a time; --chunk-size=2 makes every page show.
	k := newKubectl(t, kubectl, e.url)
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"get", "flags", "-A"}, append([]string{"NAMESPACE NAME"}, flags...)}, // a server-side Table
		{[]string{"get", "typeinstances", "-o", "custom-columns=ID:.metadata.name,NS:.spec.namespace", "--no-headers"}, tis},
	} {
		if got := rows(k.ok(append(c.args, "--chunk-size=2")...)); !slices.Equal(got, c.want) {
			t.Errorf("kubectl %s --chunk-size=2:\n\t%q\nunpaged:\n\t%q", strings.Join(c.args, " "), got, c.want)
		}
	}
}

// rows are kubectl's output lines with their columns' padding and the AGE
// column (which may differ from one run to the next) left out.
func rows(out string) []string {
	var rs []string
	for line := range strings.Lines(out) {
		f := strings.Fields(line)
		if len(f) > 2 {
			f = f[:2]
		}
		rs = append(rs, strings.Join(f, " "))
	}
	return rs
}

// system says whether o is one of the hub's own instances (the built-in
// backends), which the test leaves alone.
func system(o obj) bool {
	return o.Metadata.Namespace == hub.SystemNamespace || o.Spec["namespace"] == hub.SystemNamespace
}
