package authn

import (
	"net"
	"testing"
)

// TestLoopbackAsParseIP: loopback judges remote addresses as net.ParseIP
// and IP.IsLoopback did.
func TestLoopbackAsParseIP(t *testing.T) {
	for _, addr := range []string{
		"127.0.0.1:80", "127.1.2.3:1", "[::1]:443", "[::ffff:127.0.0.1]:80", "10.0.0.1:80", "[::2]:1", "[fe80::1%lo]:1",
		"[::1%lo]:1", "[127.0.0.1%x]:1", "127.0.0.1", "localhost:80", ":80", "", "[::1]", "1.2.3:4", "127.0.0.01:1", "[0:0:0:0:0:0:0:1]:5",
	} {
		host, _, err := net.SplitHostPort(addr)
		ip := net.ParseIP(host)
		want := err == nil && ip != nil && ip.IsLoopback()
		if got := loopback(addr); got != want {
			t.Errorf("%q: loopback %v, net.ParseIP says %v", addr, got, want)
		}
	}
}
