package graphql_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/api/graphql"
	"github.com/cairn-dev/cairn/hub"
)

// seedLarge creates n instances of cap.type.large whose values are about
// size bytes each, in one batch.
func seedLarge(t testing.TB, h *hub.Hub, n, size int) {
	t.Helper()
	var req hub.CreateRequest
	pad := strings.Repeat("x", size)
	for i := range n {
		req.Instances = append(req.Instances, hub.NewInstance{TypeRef: cairn.TypeRef{Path: "cap.type.large", Revision: "0.1.0"},
			Value: json.RawMessage(fmt.Sprintf(`{"i":%d,"pad":%q}`, i, pad))})
	}
	if _, err := h.CreateInstances(t.Context(), req); err != nil {
		t.Fatal(err)
	}
}

// aliases is a query of n aliases of the whole list with its values: under
// the complexity limit (4 per alias), hundreds of times the data.
func aliases(n int) string {
	var b strings.Builder
	b.WriteString("{")
	for i := range n {
		fmt.Fprintf(&b, " a%d: typeInstances(filter: {typeRef: {path: \"cap.type.large\"}}) { latestResourceVersion { spec { value } } }", i)
	}
	b.WriteString(" }")
	return b.String()
}

func heapAlloc() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestResponseSizeIsBounded: 200 aliases of a list of 400 values of 2 KB
// (160 MB unbounded) answer the limit's error, the heap stays within a
// bound of the limit while the request runs, and comes back after it; a
// query under the limit is answered in full.
func TestResponseSizeIsBounded(t *testing.T) {
	const limit = 4 << 20
	e := newEnv(t, func(_ *hub.Config, g *graphql.Config) { g.MaxResponseBytes = limit })
	seedLarge(t, e.h, 400, 2000)

	q := aliases(200)
	if len(q) > 24<<10 {
		t.Fatalf("the query is %d bytes", len(q))
	}
	runtime.GC()
	base := heapAlloc()
	var peak atomic.Uint64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			if h := heapAlloc(); h > peak.Load() {
				peak.Store(h)
			}
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	res := e.do(q, nil)
	close(stop)
	<-sampled
	t.Logf("heap: base %d MB, peak %d MB", base>>20, peak.Load()>>20)

	if len(res.Errors) != 1 || !strings.Contains(res.Errors[0].Message, fmt.Sprintf("larger than the limit of %d bytes (cairn serve --graphql-max-response-bytes)", limit)) {
		t.Fatalf("errors %+v, want the one limit error", res.Errors)
	}
	if string(res.Data) != "" && string(res.Data) != "null" {
		t.Errorf("data beside the limit error: %.200s", res.Data)
	}
	// The bound: what the limit lets through, the lists in flight, the
	// executor's trees and the test's own process, well below the 160 MB
	// the answer would have been.
	if grew := int64(peak.Load()) - int64(base); grew > 64<<20 {
		t.Errorf("the heap grew by %d MB while answering, want under 64 MB", grew>>20)
	}
	runtime.GC()
	if grew := int64(heapAlloc()) - int64(base); grew > 8<<20 {
		t.Errorf("after the request and a GC the heap is %d MB above where it was", grew>>20)
	}

	// A query under the limit is answered in full.
	var one struct {
		A0 []struct {
			LatestResourceVersion struct {
				Spec struct{ Value struct{ I int } }
			}
		}
	}
	e.ok(aliases(1), nil, &one)
	if len(one.A0) != 400 {
		t.Errorf("one alias answered %d instances, want 400", len(one.A0))
	}
	// And so is a query over several aliases that fits.
	res = e.do(aliases(2), nil)
	if len(res.Errors) > 0 || len(res.Data) < 2*400*2000 {
		t.Errorf("two aliases: %d bytes of data, errors %+v", len(res.Data), res.Errors)
	}
}

// BenchmarkResponseAccounting is the cost of bounding the response: the
// list of 100 instances with every field Capact's clients read, through a
// handler that accounts each field and one that does not (the same hub),
// alternated in one loop; accounted/bare is the ratio.
func BenchmarkResponseAccounting(b *testing.B) {
	e := newEnv(b)
	seed(e, 100)
	accounted := graphql.New(graphql.Config{Hub: e.h})
	bare := graphql.New(graphql.Config{Hub: e.h, MaxResponseBytes: -1})
	body, _ := json.Marshal(map[string]any{"query": listQuery})
	timed := func(h http.Handler) time.Duration {
		req := httptest.NewRequest("POST", "/graphql", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		t0 := time.Now()
		h.ServeHTTP(rec, req)
		d := time.Since(t0)
		if rec.Code != 200 || bytes.Contains(rec.Body.Bytes(), []byte(`"errors"`)) {
			b.Fatalf("%d %.300s", rec.Code, rec.Body)
		}
		return d
	}
	var withAcc, without time.Duration
	for i := 0; b.Loop(); i++ {
		if i%2 == 0 {
			without += timed(bare)
			withAcc += timed(accounted)
		} else {
			withAcc += timed(accounted)
			without += timed(bare)
		}
	}
	b.ReportMetric(float64(withAcc)/float64(without), "accounted/bare")
	b.ReportMetric(float64(without.Nanoseconds())/float64(b.N), "bare-ns/op")
	b.ReportMetric(float64(withAcc.Nanoseconds())/float64(b.N), "accounted-ns/op")
}
