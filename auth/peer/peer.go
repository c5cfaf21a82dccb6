// Package peer finds the OS user of the process at the other end of a
// loopback TCP connection, so that a server can trust local processes of
// its own user without a credential, as PostgreSQL's "peer" authentication
// does for Unix sockets. On Linux the client's socket is found in
// /proc/net/tcp and /proc/net/tcp6: the entry whose local address is the
// connection's remote address and whose remote address is the connection's
// local address; its uid column is the owner. Elsewhere the lookup is not
// supported (ErrUnsupported).
//
// The lookup reads the kernel's socket table, which grows with the number
// of sockets, so it runs at most once per connection and only when a
// request needs it (Conns).
package peer

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
)

// ErrUnsupported: peer lookup is not available on this platform.
var ErrUnsupported = errors.New("peer: looking up the owner of a TCP peer is supported on Linux only")

// ErrNotFound: no socket of this host has the connection's addresses (the
// peer is on another host, or already gone).
var ErrNotFound = errors.New("peer: no local socket matches the connection")

// Supported reports whether UID can work on this platform.
func Supported() bool { return supported }

// UID returns the uid owning the client end of the TCP connection between
// server (the address the server accepted on) and client (the remote
// address of the accepted connection).
func UID(server, client netip.AddrPort) (int, error) { return lookup(server, client) }

// ParseProcNet finds in the text of /proc/net/tcp or /proc/net/tcp6 the
// socket whose local address is local and whose remote address is remote,
// and returns its uid. IPv4-mapped IPv6 addresses match their IPv4 form.
func ParseProcNet(r io.Reader, local, remote netip.AddrPort) (uid int, found bool, err error) {
	local = netip.AddrPortFrom(local.Addr().Unmap(), local.Port())
	remote = netip.AddrPortFrom(remote.Addr().Unmap(), remote.Port())
	sc := bufio.NewScanner(r)
	first := true
	for sc.Scan() {
		if first { // the header
			first = false
			continue
		}
		f := strings.Fields(sc.Text())
		if len(f) < 8 {
			continue
		}
		l, err := parseAddr(f[1])
		if err != nil {
			return 0, false, err
		}
		if l != local {
			continue
		}
		rem, err := parseAddr(f[2])
		if err != nil {
			return 0, false, err
		}
		if rem != remote {
			continue
		}
		uid, err := strconv.Atoi(f[7])
		if err != nil {
			return 0, false, fmt.Errorf("peer: uid column %q: %w", f[7], err)
		}
		return uid, true, nil
	}
	return 0, false, sc.Err()
}

// parseAddr reads "0100007F:1F90" (IPv4) or 32 hex digits and a port
// (IPv6): the address as the kernel prints it, 32-bit words in the host's
// byte order, and the port in hex.
func parseAddr(s string) (netip.AddrPort, error) {
	hexIP, hexPort, ok := strings.Cut(s, ":")
	if !ok {
		return netip.AddrPort{}, fmt.Errorf("peer: address %q: no port", s)
	}
	port, err := strconv.ParseUint(hexPort, 16, 16)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("peer: address %q: port: %w", s, err)
	}
	raw, err := hex.DecodeString(hexIP)
	if err != nil || (len(raw) != 4 && len(raw) != 16) {
		return netip.AddrPort{}, fmt.Errorf("peer: address %q is not a /proc/net address", s)
	}
	// Each 32-bit word was printed as a number in host order: turn the
	// big-endian digits back into the bytes as they were in memory.
	for i := 0; i < len(raw); i += 4 {
		binary.NativeEndian.PutUint32(raw[i:], binary.BigEndian.Uint32(raw[i:]))
	}
	addr, _ := netip.AddrFromSlice(raw)
	return netip.AddrPortFrom(addr.Unmap(), uint16(port)), nil
}

// Conns looks up the peer of each connection of an http.Server at most
// once, on the first request that asks (UIDFrom): set ConnContext as the
// server's ConnContext.
type Conns struct {
	// Lookup defaults to UID.
	Lookup func(server, client netip.AddrPort) (int, error)
}

type connKey struct{}

// conn is one connection's lookup, done once.
type conn struct {
	lookup         func(server, client netip.AddrPort) (int, error)
	server, client net.Addr
	once           sync.Once
	uid            int
	err            error
}

// ConnContext is for http.Server.ConnContext.
func (c *Conns) ConnContext(ctx context.Context, nc net.Conn) context.Context {
	lookup := c.Lookup
	if lookup == nil {
		lookup = UID
	}
	return context.WithValue(ctx, connKey{}, &conn{lookup: lookup, server: nc.LocalAddr(), client: nc.RemoteAddr()})
}

// UIDFrom returns the uid of the process at the other end of the
// connection a request's context comes from (ConnContext), looking it up
// on the first call for the connection.
func UIDFrom(ctx context.Context) (int, error) {
	c, ok := ctx.Value(connKey{}).(*conn)
	if !ok {
		return 0, errors.New("peer: the request's context does not come from Conns.ConnContext")
	}
	c.once.Do(func() {
		s, err1 := addrPort(c.server)
		cl, err2 := addrPort(c.client)
		if err := errors.Join(err1, err2); err != nil {
			c.err = err
			return
		}
		c.uid, c.err = c.lookup(s, cl)
	})
	return c.uid, c.err
}

func addrPort(a net.Addr) (netip.AddrPort, error) {
	if t, ok := a.(*net.TCPAddr); ok {
		return t.AddrPort(), nil
	}
	ap, err := netip.ParseAddrPort(a.String())
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("peer: %s address %q: %w", a.Network(), a.String(), err)
	}
	return ap, nil
}
