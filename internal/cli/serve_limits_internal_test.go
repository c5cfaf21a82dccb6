package cli

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestSlowClientsAreCutOff drives the server cairn serve builds, with its
// limits shortened, the way a slow or hostile client would: headers that
// never end, a body that never comes, a keep-alive connection left idle,
// and headers over the size limit.
func TestSlowClientsAreCutOff(t *testing.T) {
	if d := defaultLimits(); d != (connLimits{header: 10 * time.Second, request: 5 * time.Minute, idle: 2 * time.Minute, headerBytes: 1 << 20}) {
		t.Errorf("the limits docs/security.md states changed: %+v", d)
	}
	const short = 200 * time.Millisecond
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := newHTTPServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(r.Body); err != nil {
			return // the body did not arrive in time
		}
		io.WriteString(w, "ok")
	}), nil, connLimits{header: short, request: 2 * short, idle: short, headerBytes: 4 << 10})
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })

	// closedWithin sends what, then reads until the server closes the
	// connection, which it must do well before the test's own deadline.
	closedWithin := func(name, what string) string {
		t.Helper()
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		start := time.Now()
		c.SetDeadline(start.Add(5 * time.Second))
		if _, err := io.WriteString(c, what); err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(c)
		if took := time.Since(start); err != nil || took > 3*time.Second {
			t.Errorf("%s: the connection stayed open %s (%v)", name, took, err)
		}
		return string(b)
	}
	closedWithin("headers that never end", "GET / HTTP/1.1\r\nHost: x\r\nX-Slow: ")
	if out := closedWithin("a body that never comes", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc"); strings.Contains(out, "ok") {
		t.Errorf("a body that never comes was answered: %q", out)
	}
	// A keep-alive connection is answered, then closed when idle.
	if out := closedWithin("an idle keep-alive", "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); !strings.HasSuffix(out, "ok") {
		t.Errorf("the request before idling: %q", out)
	}
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\nX-Big: "+strings.Repeat("a", 64<<10)+"\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil || resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("headers over the limit: %v %v, want 431", resp, err)
	}
}
