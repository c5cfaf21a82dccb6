package peer

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"

	"golang.org/x/sys/unix"
)

const supported = true

// lookup asks the kernel for the one socket with the connection's
// addresses (sock_diag, a hash lookup however many sockets there are);
// where sock_diag is not available it scans /proc/net/tcp{,6}, whose cost
// grows with the socket table.
func lookup(server, client netip.AddrPort) (int, error) {
	uid, err := diagLookup(server, client)
	if err == nil || errors.Is(err, ErrNotFound) {
		return uid, err
	}
	return procLookup(server, client)
}

// diagLookup sends an exact SOCK_DIAG_BY_FAMILY request for the client's
// socket: local address client, remote address server.
func diagLookup(server, client netip.AddrPort) (int, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG)
	if err != nil {
		return 0, fmt.Errorf("peer: sock_diag socket: %w", err)
	}
	defer unix.Close(fd)
	tv := unix.Timeval{Sec: 1}
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		return 0, fmt.Errorf("peer: sock_diag socket: %w", err)
	}
	if err := unix.Sendto(fd, diagRequest(client, server), 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return 0, fmt.Errorf("peer: sock_diag request: %w", err)
	}
	buf := make([]byte, 4096)
	n, _, err := unix.Recvfrom(fd, buf, 0)
	if err != nil {
		return 0, fmt.Errorf("peer: sock_diag reply: %w", err)
	}
	return parseDiagReply(buf[:n])
}

// Sizes of struct nlmsghdr, inet_diag_req_v2 and inet_diag_msg.
const (
	nlmsgHdrLen   = 16
	diagReqLen    = 56
	diagMsgLen    = 72
	diagMsgUIDOff = 64
)

// diagRequest is an nlmsghdr and an inet_diag_req_v2 asking for the TCP
// socket local -> remote in any state, without a cookie.
func diagRequest(local, remote netip.AddrPort) []byte {
	b := make([]byte, nlmsgHdrLen+diagReqLen)
	ne := binary.NativeEndian
	ne.PutUint32(b[0:], uint32(len(b)))
	ne.PutUint16(b[4:], unix.SOCK_DIAG_BY_FAMILY)
	ne.PutUint16(b[6:], unix.NLM_F_REQUEST)
	ne.PutUint32(b[8:], 1) // sequence number
	r := b[nlmsgHdrLen:]
	l, rem := local.Addr().Unmap(), remote.Addr().Unmap()
	r[0] = unix.AF_INET6
	if l.Is4() && rem.Is4() {
		r[0] = unix.AF_INET
	}
	r[1] = unix.IPPROTO_TCP
	ne.PutUint32(r[4:], ^uint32(0)) // every state
	id := r[8:]
	binary.BigEndian.PutUint16(id[0:], local.Port())
	binary.BigEndian.PutUint16(id[2:], remote.Port())
	putAddr(id[4:20], l)
	putAddr(id[20:36], rem)
	ne.PutUint32(id[40:], ^uint32(0)) // INET_DIAG_NOCOOKIE
	ne.PutUint32(id[44:], ^uint32(0))
	return b
}

func putAddr(dst []byte, a netip.Addr) {
	if a.Is4() {
		v4 := a.As4()
		copy(dst, v4[:])
		return
	}
	v6 := a.As16()
	copy(dst, v6[:])
}

// parseDiagReply reads the kernel's answer: an inet_diag_msg, whose
// idiag_uid is the owner, or an error (ENOENT: no such socket).
func parseDiagReply(b []byte) (int, error) {
	ne := binary.NativeEndian
	for len(b) >= nlmsgHdrLen {
		n := int(ne.Uint32(b[0:]))
		if n < nlmsgHdrLen || n > len(b) {
			return 0, fmt.Errorf("peer: sock_diag reply: a message of %d bytes in %d", n, len(b))
		}
		switch typ := ne.Uint16(b[4:]); typ {
		case unix.NLMSG_ERROR:
			if n < nlmsgHdrLen+4 {
				return 0, errors.New("peer: sock_diag reply: a short error message")
			}
			errno := unix.Errno(-int32(ne.Uint32(b[nlmsgHdrLen:])))
			if errno == unix.ENOENT {
				return 0, ErrNotFound
			}
			return 0, fmt.Errorf("peer: sock_diag: %w", errno)
		case unix.SOCK_DIAG_BY_FAMILY:
			if n < nlmsgHdrLen+diagMsgLen {
				return 0, fmt.Errorf("peer: sock_diag reply: an inet_diag_msg of %d bytes", n-nlmsgHdrLen)
			}
			return int(ne.Uint32(b[nlmsgHdrLen+diagMsgUIDOff:])), nil
		}
		b = b[(n+3)&^3:]
	}
	return 0, errors.New("peer: sock_diag reply: no answer in it")
}

// procLookup searches the table of the client's address family first; an
// IPv4 client of a dual-stack socket shows in tcp6 with a mapped address.
func procLookup(server, client netip.AddrPort) (int, error) {
	files := []string{"/proc/net/tcp", "/proc/net/tcp6"}
	if !client.Addr().Unmap().Is4() {
		files = []string{"/proc/net/tcp6"}
	}
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			if os.IsNotExist(err) {
				continue // no IPv6 in this kernel
			}
			return 0, fmt.Errorf("peer: %w", err)
		}
		uid, found, err := ParseProcNet(f, client, server)
		f.Close()
		if err != nil {
			return 0, fmt.Errorf("peer: %s: %w", name, err)
		}
		if found {
			return uid, nil
		}
	}
	return 0, ErrNotFound
}
