package peer_test

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/auth/peer"
)

// procNetTCP is /proc/net/tcp of a little-endian host: a server on
// 127.0.0.1:8080 (0x1F90) with two clients, uid 1000 from port 40000
// (0x9C40) and uid 1001 from port 40001 (0x9C41), and the server's own
// accepted socket for the first.
const procNetTCP = `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 100 1 0000000000000000 100 0 0 10 0
   1: 0100007F:1F90 0100007F:9C40 01 00000000:00000000 00:00000000 00000000  1000        0 101 1 0000000000000000 20 4 30 10 -1
   2: 0100007F:9C40 0100007F:1F90 01 00000000:00000000 00:00000000 00000000  1000        0 102 1 0000000000000000 20 4 30 10 -1
   3: 0100007F:9C41 0100007F:1F90 01 00000000:00000000 00:00000000 00000000  1001        0 103 1 0000000000000000 20 4 30 10 -1
`

// procNetTCP6: ::1 client of uid 1002, and an IPv4 client (uid 1003) of a
// dual-stack socket, shown with its IPv4-mapped address.
const procNetTCP6 = `  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000001000000:9C42 00000000000000000000000001000000:1F90 01 00000000:00000000 00:00000000 00000000  1002        0 104 1 0000000000000000 20 4 30 10 -1
   1: 0000000000000000FFFF00000100007F:9C43 0000000000000000FFFF00000100007F:1F90 01 00000000:00000000 00:00000000 00000000  1003        0 105 1 0000000000000000 20 4 30 10 -1
`

func littleEndian(t *testing.T) {
	if binary.NativeEndian.Uint16([]byte{1, 0}) != 1 {
		t.Skip("the fixtures are a little-endian host's /proc/net files")
	}
}

func TestParseProcNet(t *testing.T) {
	littleEndian(t)
	ap := netip.MustParseAddrPort
	server4, server6 := ap("127.0.0.1:8080"), ap("[::1]:8080")
	for _, tc := range []struct {
		name        string
		table       string
		client, srv netip.AddrPort
		uid         int
		found       bool
	}{
		{"the first client", procNetTCP, ap("127.0.0.1:40000"), server4, 1000, true},
		{"another user's client", procNetTCP, ap("127.0.0.1:40001"), server4, 1001, true},
		{"not the server's own socket", procNetTCP, ap("127.0.0.1:8080"), ap("127.0.0.1:40001"), 0, false},
		{"a port nobody has", procNetTCP, ap("127.0.0.1:40002"), server4, 0, false},
		{"the right port to another server", procNetTCP, ap("127.0.0.1:40000"), ap("127.0.0.1:9090"), 0, false},
		{"an IPv6 client", procNetTCP6, ap("[::1]:40002"), server6, 1002, true},
		{"an IPv4 client of a dual-stack socket", procNetTCP6, ap("127.0.0.1:40003"), server4, 1003, true},
		{"the same client given mapped", procNetTCP6, ap("[::ffff:127.0.0.1]:40003"), ap("[::ffff:127.0.0.1]:8080"), 1003, true},
	} {
		uid, found, err := peer.ParseProcNet(strings.NewReader(tc.table), tc.client, tc.srv)
		if err != nil || found != tc.found || uid != tc.uid {
			t.Errorf("%s: uid %d found %v err %v, want %d %v", tc.name, uid, found, err, tc.uid, tc.found)
		}
	}
	bad := "header\n   0: 0100007G:1F90 0100007F:9C40 01 0 0 0 1000 0 1\n"
	if _, _, err := peer.ParseProcNet(strings.NewReader(bad), ap("127.0.0.1:40000"), server4); err == nil || !strings.Contains(err.Error(), "0100007G:1F90") {
		t.Errorf("a malformed address: %v", err)
	}
}

// pair returns both ends of a real TCP connection on network/addr.
func pair(t testing.TB, network, addr, dial string) (server, client net.Conn) {
	t.Helper()
	ln, err := net.Listen(network, addr)
	if err != nil {
		t.Skipf("listen %s %s: %v", network, addr, err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	client, err = net.Dial("tcp", net.JoinHostPort(dial, itoa(port)))
	if err != nil {
		t.Fatal(err)
	}
	server, err = ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	return server, client
}

func itoa(n int) string {
	return netip.AddrPortFrom(netip.IPv4Unspecified(), uint16(n)).String()[len("0.0.0.0:"):]
}

// TestUIDRealSocket looks up the client of real loopback connections,
// which this process owns: the answer is our uid.
func TestUIDRealSocket(t *testing.T) {
	if !peer.Supported() {
		if _, err := peer.UID(netip.MustParseAddrPort("127.0.0.1:1"), netip.MustParseAddrPort("127.0.0.1:2")); !errors.Is(err, peer.ErrUnsupported) {
			t.Fatalf("unsupported platform: %v", err)
		}
		t.Skip("peer lookup is Linux-only")
	}
	for _, tc := range []struct{ name, network, listen, dial string }{
		{"IPv4", "tcp4", "127.0.0.1:0", "127.0.0.1"},
		{"IPv6", "tcp6", "[::1]:0", "::1"},
		{"IPv4 to a dual-stack socket", "tcp", "[::]:0", "127.0.0.1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, cl := pair(t, tc.network, tc.listen, tc.dial)
			defer srv.Close()
			defer cl.Close()
			s, c := srv.LocalAddr().(*net.TCPAddr).AddrPort(), srv.RemoteAddr().(*net.TCPAddr).AddrPort()
			uid, err := peer.UID(s, c)
			if err != nil || uid != os.Getuid() {
				t.Fatalf("UID(%s, %s) = %d, %v; want %d", s, c, uid, err, os.Getuid())
			}
			// Once the client is gone, there is nobody to find.
			cl.Close()
			time.Sleep(10 * time.Millisecond)
			if _, err := peer.UID(netip.AddrPortFrom(s.Addr(), 1), c); !errors.Is(err, peer.ErrNotFound) {
				t.Errorf("a connection that does not exist: %v", err)
			}
		})
	}
}

// TestConnsOnce: the lookup runs once per connection, on first use.
func TestConnsOnce(t *testing.T) {
	calls := 0
	conns := &peer.Conns{Lookup: func(server, client netip.AddrPort) (int, error) {
		calls++
		return 4242, nil
	}}
	srv, cl := pair(t, "tcp4", "127.0.0.1:0", "127.0.0.1")
	defer srv.Close()
	defer cl.Close()
	ctx := conns.ConnContext(context.Background(), srv)
	if calls != 0 {
		t.Fatal("looked up at accept; want on first use")
	}
	for range 3 {
		if uid, err := peer.UIDFrom(ctx); uid != 4242 || err != nil {
			t.Fatalf("UIDFrom: %d %v", uid, err)
		}
	}
	if calls != 1 {
		t.Errorf("%d lookups for one connection, want 1", calls)
	}
	if _, err := peer.UIDFrom(context.Background()); err == nil {
		t.Error("UIDFrom a context without a connection")
	}
}

// BenchmarkConnSetup compares setting up a loopback connection (dial,
// accept, close) with and without the peer lookup, alternated in one loop;
// the ratio is what peer authentication adds to a new connection (a
// request without credentials on a kept-alive connection pays nothing).
func BenchmarkConnSetup(b *testing.B) {
	if !peer.Supported() {
		b.Skip("peer lookup is Linux-only")
	}
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	addr := ln.Addr().String()
	setup := func(lookup bool) time.Duration {
		t0 := time.Now()
		cl, err := net.Dial("tcp4", addr)
		if err != nil {
			b.Fatal(err)
		}
		srv, err := ln.Accept()
		if err != nil {
			b.Fatal(err)
		}
		if lookup {
			uid, err := peer.UID(srv.LocalAddr().(*net.TCPAddr).AddrPort(), srv.RemoteAddr().(*net.TCPAddr).AddrPort())
			if err != nil || uid != os.Getuid() {
				b.Fatalf("UID: %d %v", uid, err)
			}
		}
		cl.Close()
		srv.Close()
		return time.Since(t0)
	}
	var bare, peered time.Duration
	for i := 0; b.Loop(); i++ {
		if i%2 == 0 {
			bare += setup(false)
			peered += setup(true)
		} else {
			peered += setup(true)
			bare += setup(false)
		}
	}
	b.ReportMetric(float64(peered)/float64(bare), "peer/bare")
	b.ReportMetric(float64(bare.Nanoseconds())/float64(b.N), "bare-ns/op")
	b.ReportMetric(float64(peered.Nanoseconds())/float64(b.N), "peer-ns/op")
}
