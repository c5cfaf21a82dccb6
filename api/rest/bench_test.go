package rest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/api/rest"
	"github.com/cairn-dev/cairn/hub"
	"github.com/cairn-dev/cairn/store/sqlite"
)

const benchRD = `{"apiVersion": "cup.flipt.io/v1alpha1", "kind": "ResourceDefinition",
 "metadata": {"name": "flags.flipt.io"},
 "names": {"kind": "Flag", "singular": "flag", "plural": "flags"},
 "spec": {"group": "flipt.io", "versions": {"v1alpha1": {"type": "object",
   "properties": {"enabled": {"type": "boolean"}, "description": {"type": "string"}, "variants": {"type": "array"}}}}}}`

// benchServer serves a hub with n flags over real HTTP on loopback.
func benchServer(b *testing.B, n int) (*httptest.Server, *http.Client) {
	b.Helper()
	srv, c, _ := benchHub(b, n)
	return srv, c
}

// benchHub is benchServer with its hub.
func benchHub(b *testing.B, n int) (*httptest.Server, *http.Client, *hub.Hub) {
	b.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "bench.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	h, err := hub.New(ctx, hub.Config{Store: st})
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(rest.New(rest.Config{Hub: h}))
	b.Cleanup(srv.Close)
	c := srv.Client()
	resp, err := c.Post(srv.URL+"/apis/hub.cairn.dev/v1/types", "application/json", bytes.NewBufferString(benchRD))
	if err != nil || resp.StatusCode != http.StatusCreated {
		b.Fatalf("register Type: %v %v", resp, err)
	}
	resp.Body.Close()
	ins := make([]hub.NewInstance, n)
	for i := range ins {
		ins[i] = hub.NewInstance{
			TypeRef: cairn.TypeRef{Path: "io.flipt.flag", Revision: "1.0.0-alpha.1"},
			Name:    fmt.Sprintf("flag-%04d", i),
			Labels:  map[string]string{"team": "platform"},
			Value:   json.RawMessage(`{"enabled":true,"description":"a flag used by the benchmarks of the REST API","variants":["on","off"]}`),
		}
	}
	if n == 0 {
		return srv, c, h
	}
	if _, err := h.CreateInstances(ctx, hub.CreateRequest{Instances: ins}); err != nil {
		b.Fatal(err)
	}
	return srv, c, h
}

func fetch(b *testing.B, c *http.Client, url string) int {
	resp, err := c.Get(url)
	if err != nil {
		b.Fatal(err)
	}
	n, _ := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b.Fatalf("GET %s: %s", url, resp.Status)
	}
	return int(n)
}

// fixedServer answers every request with the same bytes: the floor any
// HTTP JSON API pays on this machine.
func fixedServer(b *testing.B, body []byte) (*httptest.Server, *http.Client) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(body)
	}))
	b.Cleanup(srv.Close)
	return srv, srv.Client()
}

func benchPair(b *testing.B, n int, path string) {
	srv, c := benchServer(b, n)
	url := srv.URL + path
	resp, err := c.Get(url)
	if err != nil {
		b.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	b.Run("cairn", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			fetch(b, c, url)
		}
	})
	b.Run("bare", func(b *testing.B) {
		fsrv, fc := fixedServer(b, body)
		b.ReportAllocs()
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			fetch(b, fc, fsrv.URL)
		}
	})
}

// BenchmarkGet compares a GET of one flag through the whole stack (HTTP,
// routing, discovery lookup, hub, store, value) with a bare handler
// returning the same bytes.
func BenchmarkGet(b *testing.B) {
	benchPair(b, 1, "/apis/flipt.io/v1alpha1/namespaces/default/flags/flag-0000")
}

// BenchmarkList100 does the same for a list of 100 flags: a consistent
// list, answered with the body kept for the store's position.
func BenchmarkList100(b *testing.B) {
	benchPair(b, 100, "/apis/flipt.io/v1alpha1/namespaces/default/flags")
}

// BenchmarkList100Any lists with resourceVersion=0: no position query and
// no kept body, the list assembled from the objects' kept encodings (what a
// consistent list costs after every write).
func BenchmarkList100Any(b *testing.B) {
	benchPair(b, 100, "/apis/flipt.io/v1alpha1/namespaces/default/flags?resourceVersion=0")
}

// BenchmarkListPage pages through 1,000 flags 100 at a time: the first
// page, and one from the middle of the list (its continue token read
// once), as kubectl get --chunk-size=100 asks for them.
func BenchmarkListPage(b *testing.B) {
	srv, c := benchServer(b, 1000)
	url := srv.URL + "/apis/flipt.io/v1alpha1/namespaces/default/flags?limit=100"
	cont := url
	for range 5 {
		resp, err := c.Get(cont)
		if err != nil {
			b.Fatal(err)
		}
		var l struct {
			Metadata struct {
				Continue string `json:"continue"`
			} `json:"metadata"`
		}
		err = json.NewDecoder(resp.Body).Decode(&l)
		resp.Body.Close()
		if err != nil || l.Metadata.Continue == "" {
			b.Fatalf("page: %v, continue %q", err, l.Metadata.Continue)
		}
		cont = url + "&continue=" + l.Metadata.Continue
	}
	for name, u := range map[string]string{"first": url, "middle": cont} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				fetch(b, c, u)
			}
		})
	}
}

// BenchmarkList100Table compares a list of 100 flags answered as the Table
// kubectl get asks for with the same list as JSON, in the same run: the
// ratio is what server-side printing costs.
func BenchmarkList100Table(b *testing.B) {
	srv, c := benchServer(b, 100)
	benchTable(b, c, srv.URL+"/apis/flipt.io/v1alpha1/namespaces/default/flags")
	// The same instances in the Table of kubectl get ti.
	b.Run("typeinstances", func(b *testing.B) {
		benchTable(b, c, srv.URL+"/apis/hub.cairn.dev/v1/typeinstances")
	})
}

// BenchmarkTypes100Table is BenchmarkList100Table for kubectl get types:
// 100 Types, each with a JSON Schema of about 2 KB.
func BenchmarkTypes100Table(b *testing.B) {
	srv, c, h := benchHub(b, 0)
	props := map[string]any{}
	for i := range 30 {
		props[fmt.Sprintf("field%02d", i)] = map[string]any{"type": "string", "description": "a field of the benchmarks' Types"}
	}
	schema, err := json.Marshal(map[string]any{"type": "object", "properties": props})
	if err != nil {
		b.Fatal(err)
	}
	for i := range 100 {
		if _, err := h.CreateType(context.Background(), cairn.Type{Path: fmt.Sprintf("cap.type.bench.t%03d", i), Revision: "0.1.0", JSONSchema: schema}); err != nil {
			b.Fatal(err)
		}
	}
	benchTable(b, c, srv.URL+"/apis/hub.cairn.dev/v1/types")
}

// benchTable measures url's Table (sub-benchmark table) and JSON (json).
func benchTable(b *testing.B, c *http.Client, url string) {
	get := func(b *testing.B, accept string) {
		req, err := http.NewRequest(http.MethodGet, url, nil)
		if err != nil {
			b.Fatal(err)
		}
		req.Header.Set("Accept", accept)
		resp, err := c.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("GET %s: %s", url, resp.Status)
		}
	}
	b.Run("table", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			get(b, "application/json;as=Table;v=v1;g=meta.k8s.io,application/json")
		}
	})
	b.Run("json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			get(b, "application/json")
		}
	})
}

// BenchmarkApply compares a server-side apply that changes a value (the
// field manager merges and records ownership) with a merge patch making
// the same change (the field manager records the update), in one run.
func BenchmarkApply(b *testing.B) {
	srv, c := benchServer(b, 1)
	url := srv.URL + "/apis/flipt.io/v1alpha1/namespaces/default/flags/flag-0000"
	// force: the flag was made without managed fields, so its fields
	// belong to "before-first-apply" until the first apply takes them.
	send := func(b *testing.B, ct, body string) {
		req, err := http.NewRequest(http.MethodPatch, url+"?fieldManager=bench&force=true", bytes.NewBufferString(body))
		if err != nil {
			b.Fatal(err)
		}
		req.Header.Set("Content-Type", ct)
		resp, err := c.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("PATCH %s: %s: %s", ct, resp.Status, out)
		}
	}
	b.Run("apply", func(b *testing.B) {
		i := 0
		for b.Loop() {
			i++
			send(b, "application/apply-patch+yaml", fmt.Sprintf("apiVersion: flipt.io/v1alpha1\nkind: Flag\nmetadata: {name: flag-0000}\nspec: {enabled: true, description: d%d}\n", i))
		}
	})
	b.Run("merge-patch", func(b *testing.B) {
		i := 0
		for b.Loop() {
			i++
			send(b, "application/merge-patch+json", fmt.Sprintf(`{"spec":{"description":"m%d"}}`, i))
		}
	})
}

// BenchmarkCreate is a POST of a new flag through the whole stack (HTTP,
// body checks, managed fields, hub, store transaction, response), one
// client at a time, as a create of scripts/bench sends it.
func BenchmarkCreate(b *testing.B) {
	srv, c := benchServer(b, 1)
	url := srv.URL + "/apis/flipt.io/v1alpha1/namespaces/default/flags"
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		resp, err := c.Post(url, "application/json", bytes.NewBufferString(fmt.Sprintf(
			`{"apiVersion":"flipt.io/v1alpha1","kind":"Flag","metadata":{"name":"c-%d"},"spec":{"enabled":true}}`, i)))
		if err != nil {
			b.Fatal(err)
		}
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			b.Fatalf("POST: %s: %s", resp.Status, out)
		}
	}
}

// BenchmarkPatchCollide sends merge patches from 16 clients over 100
// flags two ways in one run: "apart", each client patching objects no
// other client patches at the time, and "collide", pairs of clients
// patching the same object at the same moment (as wrk's two threads of
// scripts/bench do). A colliding patch waits for the other's turn
// (patchQueue) instead of failing its conditional write and doing the
// update again, so the two cost about the same per patch.
func BenchmarkPatchCollide(b *testing.B) {
	srv, c := benchServer(b, 100)
	c.Transport.(*http.Transport).MaxIdleConnsPerHost = 16
	send := func(b *testing.B, obj, n int) {
		req, err := http.NewRequest(http.MethodPatch, fmt.Sprintf("%s/apis/flipt.io/v1alpha1/namespaces/default/flags/flag-%04d", srv.URL, obj),
			bytes.NewBufferString(fmt.Sprintf(`{"spec":{"description":"u%d"}}`, n)))
		if err != nil {
			b.Error(err)
			return
		}
		req.Header.Set("Content-Type", "application/merge-patch+json")
		resp, err := c.Do(req)
		if err != nil {
			b.Error(err)
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Errorf("PATCH: %s", resp.Status)
		}
	}
	for _, mode := range []string{"apart", "collide"} {
		b.Run(mode, func(b *testing.B) {
			var next atomic.Int64
			b.SetParallelism(8) // 16 clients on 2 cores
			cpu0 := processCPU(b)
			b.RunParallel(func(pb *testing.PB) {
				client := int(next.Add(1))
				for n := 0; pb.Next(); n++ {
					obj := (client*6 + n) % 100 // apart: each client its own run of objects
					if mode == "collide" {
						obj = (client/2*6 + n) % 100 // two clients per run
					}
					send(b, obj, n)
				}
			})
			// Wall time per patch moves with the machine's other load; the
			// process's CPU time per patch (server and clients) less so.
			b.ReportMetric(float64((processCPU(b)-cpu0).Microseconds())/float64(b.N), "cpu-us/op")
		})
	}
}

// processCPU is the user and system CPU time this process has used.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
