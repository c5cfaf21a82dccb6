package access

import (
	"net"
	"net/http"
	"slices"
	"strings"
)

// browserRefusal protects callers that are trusted without a credential
// (local peers, --allow-anonymous) from web pages their browser runs: it
// returns why r is refused, or "" to serve it. A request with a credential
// is not checked: a page cannot make the browser send one cairn accepts
// (tokens are not cookies; client certificates are not sent cross-site by
// fetch without the user choosing one, and CORS keeps the answer from the
// page).
//
//   - DNS rebinding: with HostCheck, the Host must be a loopback name or
//     address or the server's own, since a page of evil.example whose name
//     was rebound to 127.0.0.1 still sends Host: evil.example.
//   - Cross-site writes (CSRF): a write whose Sec-Fetch-Site is other than
//     same-origin or none (typed by the user), or whose Origin is not the
//     server's, is refused; reads are left to the same-origin policy. The
//     web console at /ui/ is same-origin. Clients that are not browsers
//     (curl, kubectl, the cairn CLI) send neither header.
func (g *Guard) browserRefusal(r *http.Request) string {
	if g.cfg.HostCheck && !g.localHost(r.Host) {
		return "forbidden: Host " + quote(r.Host) + " is not a loopback name or address of this server; a request without credentials must name it 127.0.0.1, [::1] or localhost" +
			g.alsoHosts() + " (protection against DNS rebinding), or present a credential"
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return ""
	}
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" && site != "none" {
		return "forbidden: a " + site + " request (Sec-Fetch-Site) without credentials may not write: a web page cannot act with the rights of local callers (protection against cross-site request forgery); present a credential"
	}
	if o := r.Header.Get("Origin"); o != "" && o != ownOrigin(r) {
		return "forbidden: a request from origin " + quote(o) + " without credentials may not write to " + ownOrigin(r) + ": a web page cannot act with the rights of local callers (protection against cross-site request forgery); present a credential"
	}
	return ""
}

func (g *Guard) localHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.ToLower(strings.TrimSuffix(strings.Trim(host, "[]"), "."))
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true // RFC 6761: browsers resolve these to loopback themselves
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return true
	}
	return host != "" && slices.ContainsFunc(g.cfg.ServerHosts, func(s string) bool { return strings.EqualFold(s, host) })
}

func (g *Guard) alsoHosts() string {
	if len(g.cfg.ServerHosts) == 0 {
		return ""
	}
	return " (or " + strings.Join(g.cfg.ServerHosts, ", ") + ")"
}

// ownOrigin is the origin a same-origin page of this server sends.
func ownOrigin(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + strings.ToLower(r.Host)
}

func quote(s string) string { return `"` + strings.ReplaceAll(s, `"`, `\"`) + `"` }
