package groupwrite_test

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/internal/groupwrite"
)

// slowWriter records each call; a call takes a while, so writes pile up.
type slowWriter struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	calls int
	busy  bool
	fail  bool
}

func (s *slowWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	if s.busy {
		s.mu.Unlock()
		panic("underlying writer called concurrently")
	}
	s.busy = true
	s.mu.Unlock()
	time.Sleep(200 * time.Microsecond)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.busy = false
	s.calls++
	if s.fail {
		return 0, errors.New("disk full")
	}
	return s.buf.Write(p)
}

func TestConcurrentLinesAllWrittenWhole(t *testing.T) {
	sw := &slowWriter{}
	g := groupwrite.New(sw)
	const writers, lines = 16, 200
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range lines {
				if _, err := fmt.Fprintf(g, "writer %d line %d %s\n", w, i, strings.Repeat("x", w*10)); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	if err := g.Flush(); err != nil {
		t.Fatal(err)
	}
	got := strings.Split(strings.TrimSuffix(sw.buf.String(), "\n"), "\n")
	if len(got) != writers*lines {
		t.Fatalf("%d lines written, want %d", len(got), writers*lines)
	}
	next := make([]int, writers)
	for _, l := range got {
		var w, i int
		if _, err := fmt.Sscanf(l, "writer %d line %d", &w, &i); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		pad := l[strings.LastIndexByte(l, ' ')+1:]
		if i != next[w] || len(pad) != w*10 {
			t.Fatalf("line %q out of order or torn (want line %d of writer %d)", l, next[w], w)
		}
		next[w]++
	}
	if sw.calls >= writers*lines {
		t.Errorf("%d calls for %d lines: nothing was grouped", sw.calls, writers*lines)
	}
}

func TestFlushWaitsForEveryLine(t *testing.T) {
	sw := &slowWriter{}
	g := groupwrite.New(sw)
	for i := range 3 {
		fmt.Fprintf(g, "line %d\n", i)
		if err := g.Flush(); err != nil {
			t.Fatal(err)
		}
		sw.mu.Lock()
		n := strings.Count(sw.buf.String(), "\n")
		sw.mu.Unlock()
		if n != i+1 {
			t.Fatalf("after write %d and Flush the writer holds %d lines", i, n)
		}
	}
}

func TestErrorReachesTheNextCaller(t *testing.T) {
	sw := &slowWriter{fail: true}
	g := groupwrite.New(sw)
	if _, err := g.Write([]byte("a\n")); err != nil {
		t.Fatalf("first write: %v", err)
	}
	if err := g.Flush(); err == nil || err.Error() != "disk full" {
		t.Fatalf("Flush = %v, want disk full", err)
	}
	g.Write([]byte("b\n"))
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		sw.mu.Lock()
		calls := sw.calls
		sw.mu.Unlock()
		if calls == 2 || time.Now().After(deadline) {
			break // the group holding b has been written (and failed)
		}
	}
	if _, err := g.Write([]byte("c\n")); err == nil || err.Error() != "disk full" {
		t.Fatalf("next write = %v, want disk full", err)
	}
}
