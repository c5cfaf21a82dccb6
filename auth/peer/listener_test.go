package peer_test

import (
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/auth/peer"
)

// TestListener: a server that authenticates nobody (a storage backend
// without client certificates) accepts only local processes of its own
// user; a connection of another user, or whose owner is not found, is
// closed before it is served, and reported.
func TestListener(t *testing.T) {
	if !peer.Supported() {
		t.Skip("peer lookup is Linux-only")
	}
	notFound := func(netip.AddrPort, netip.AddrPort) (int, error) { return 0, peer.ErrNotFound }
	for _, tc := range []struct {
		name   string
		uid    int
		lookup func(server, client netip.AddrPort) (int, error)
		refuse string // in the reported error; "": served
	}{
		{"a process of the server's user", os.Getuid(), nil, ""},
		{"a process of another user", os.Getuid() + 1, nil, "not the server's"},
		{"an owner not found", os.Getuid(), notFound, "no local socket"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ln, err := net.Listen("tcp4", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			var refused []error
			pl := &peer.Listener{Listener: ln, UID: tc.uid, Lookup: tc.lookup, Refused: func(_ net.Addr, err error) {
				mu.Lock()
				defer mu.Unlock()
				refused = append(refused, err)
			}}
			defer pl.Close()
			go func() {
				for {
					c, err := pl.Accept()
					if err != nil {
						return
					}
					c.Write([]byte("served"))
					c.Close()
				}
			}()
			c, err := net.Dial("tcp4", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			b, err := io.ReadAll(c)
			if err != nil && !errors.Is(err, net.ErrClosed) && !strings.Contains(err.Error(), "reset") {
				t.Fatal(err)
			}
			if served := string(b) == "served"; served != (tc.refuse == "") {
				t.Fatalf("got %q, want served %v", b, tc.refuse == "")
			}
			if tc.refuse == "" {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if len(refused) != 1 || !strings.Contains(refused[0].Error(), tc.refuse) {
				t.Errorf("reported %v, want one error with %q", refused, tc.refuse)
			}
		})
	}
}
