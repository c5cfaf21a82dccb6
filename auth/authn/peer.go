package authn

import (
	"net"
	"net/http"
	"net/netip"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/auth/peer"
)

// PeersGroup holds the callers Peer authenticates.
const PeersGroup = "cairn:local-peers"

// Peer authenticates a request that presents no credential when it comes
// over a loopback connection from a process running as the server's own OS
// user, as PostgreSQL's peer authentication does: such a process can read
// the server's admin token anyway, so this grants it nothing new, and other
// local users get nothing. The server must set peer.Conns' ConnContext,
// which looks the peer up once per connection.
type Peer struct {
	// UID is the server's uid (os.Getuid()).
	UID int
	// User is who a matching caller is: the OS user's name, in PeersGroup.
	User cairn.User
}

// Authenticate reports the peer user, or false when the connection is not
// from a loopback process of uid p.UID (or the lookup failed).
func (p *Peer) Authenticate(r *http.Request) (cairn.User, bool) {
	if !loopback(r.RemoteAddr) {
		return cairn.User{}, false
	}
	uid, err := peer.UIDFrom(r.Context())
	if err != nil || uid != p.UID {
		return cairn.User{}, false
	}
	return p.User, true
}

// loopback reports whether addr (host:port) is a loopback address, as
// net.ParseIP and IP.IsLoopback judge it (no zone), without the slice
// ParseIP allocates: this runs for every request.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Zone() == "" && ip.IsLoopback()
}

// Presented reports whether a request carries a credential: an
// Authorization header (bearer or basic) or a TLS client certificate.
// A request without one is served, if at all, as anonymous or as a peer.
func Presented(r *http.Request) bool {
	return r.Header.Get("Authorization") != "" || (r.TLS != nil && len(r.TLS.PeerCertificates) > 0)
}
