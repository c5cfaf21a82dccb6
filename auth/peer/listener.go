package peer

import (
	"fmt"
	"net"
	"net/netip"
)

// Listener accepts only connections from local processes of UID: one from
// another host or another user, or whose owner is not found, is closed
// before anything is read from it, and reported to Refused. It is for
// servers that authenticate nobody themselves (a storage backend without
// client certificates) bound to loopback: without it every user of the
// machine could call them, with whatever rights they hold.
type Listener struct {
	net.Listener
	UID int
	// Lookup defaults to UID.
	Lookup func(server, client netip.AddrPort) (int, error)
	// Refused, if set, is told of each connection closed and why.
	Refused func(client net.Addr, err error)
}

// Accept returns the next connection of a process of l.UID.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if err := l.check(c); err != nil {
			// Reported before the close, so the refusal is on record by
			// the time the client sees its connection end.
			if l.Refused != nil {
				l.Refused(c.RemoteAddr(), err)
			}
			c.Close()
			continue
		}
		return c, nil
	}
}

func (l *Listener) check(c net.Conn) error {
	server, err := addrPort(c.LocalAddr())
	if err != nil {
		return err
	}
	client, err := addrPort(c.RemoteAddr())
	if err != nil {
		return err
	}
	if !client.Addr().Unmap().IsLoopback() {
		return fmt.Errorf("peer: %s is not a loopback address: only local processes of uid %d are served", client.Addr(), l.UID)
	}
	lookup := l.Lookup
	if lookup == nil {
		lookup = UID
	}
	uid, err := lookup(server, client)
	if err != nil {
		return err
	}
	if uid != l.UID {
		return fmt.Errorf("peer: the process at %s runs as uid %d, not the server's uid %d", client, uid, l.UID)
	}
	return nil
}
