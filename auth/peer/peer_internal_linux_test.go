package peer

import (
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// reply builds a kernel answer: an inet_diag_msg owned by uid, or an
// NLMSG_ERROR with errno.
func reply(uid uint32, errno unix.Errno) []byte {
	ne := binary.NativeEndian
	if errno != 0 {
		b := make([]byte, nlmsgHdrLen+4+nlmsgHdrLen)
		ne.PutUint32(b[0:], uint32(len(b)))
		ne.PutUint16(b[4:], unix.NLMSG_ERROR)
		ne.PutUint32(b[nlmsgHdrLen:], uint32(-int32(errno)))
		return b
	}
	b := make([]byte, nlmsgHdrLen+diagMsgLen)
	ne.PutUint32(b[0:], uint32(len(b)))
	ne.PutUint16(b[4:], unix.SOCK_DIAG_BY_FAMILY)
	ne.PutUint32(b[nlmsgHdrLen+diagMsgUIDOff:], uid)
	return b
}

// TestParseDiagReply simulates the kernel naming another user as the
// owner, and the refusals.
func TestParseDiagReply(t *testing.T) {
	for _, tc := range []struct {
		name string
		b    []byte
		uid  int
		err  error
	}{
		{"another user's socket", reply(1001, 0), 1001, nil},
		{"root's socket", reply(0, 0), 0, nil},
		{"no such socket", reply(0, unix.ENOENT), 0, ErrNotFound},
		{"not allowed", reply(0, unix.EPERM), 0, unix.EPERM},
		{"a truncated message", reply(1001, 0)[:40], 0, nil},
	} {
		uid, err := parseDiagReply(tc.b)
		switch {
		case tc.name == "a truncated message":
			if err == nil {
				t.Errorf("%s: no error", tc.name)
			}
		case uid != tc.uid || !errors.Is(err, tc.err):
			t.Errorf("%s: %d %v, want %d %v", tc.name, uid, err, tc.uid, tc.err)
		}
	}
}

// TestBothLookups: sock_diag and the /proc scan find our own client.
func TestBothLookups(t *testing.T) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cl, err := net.Dial("tcp4", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	srv, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	s, c := srv.LocalAddr().(*net.TCPAddr).AddrPort(), srv.RemoteAddr().(*net.TCPAddr).AddrPort()
	for name, fn := range map[string]func(server, client netip.AddrPort) (int, error){"sock_diag": diagLookup, "/proc": procLookup} {
		if uid, err := fn(s, c); err != nil || uid != os.Getuid() {
			t.Errorf("%s: %d %v, want %d", name, uid, err, os.Getuid())
		}
		if _, err := fn(s, netip.AddrPortFrom(c.Addr(), 1)); !errors.Is(err, ErrNotFound) {
			t.Errorf("%s of a connection that does not exist: %v", name, err)
		}
	}
}
