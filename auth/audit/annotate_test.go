package audit_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/cairn-dev/cairn/auth/audit"
)

func TestAnnotations(t *testing.T) {
	audit.Annotate(context.Background(), "k", "v") // no event: nothing, no panic
	ctx, a := audit.WithAnnotations(context.Background())
	if a.Map() != nil {
		t.Fatal("annotations before any were added")
	}
	var wg sync.WaitGroup
	for i := range 25 {
		wg.Go(func() { audit.Annotate(ctx, "denied", "d"+strconv.Itoa(i)) })
	}
	wg.Wait()
	audit.Annotate(ctx, "one", "x")
	m := a.Map()
	if got := strings.Count(m["denied"], "; "); got != 10 || !strings.HasSuffix(m["denied"], "; and 15 more") {
		t.Errorf("25 values under one key: %q, want 10 of them and the count of the rest", m["denied"])
	}
	if m["one"] != "x" {
		t.Errorf("one value: %q", m["one"])
	}
}
