package grpc

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
)

// Target is where a backend's url points and whether it speaks TLS.
type Target struct {
	// Addr is host:port.
	Addr string
	// TLS is false only for a grpc:// url.
	TLS bool
}

// ParseURL reads a storage backend's url:
//
//	grpc://host:port, http://host:port    plaintext (the url says so)
//	grpcs://host:port, https://host:port  TLS
//	host:port                             TLS
//
// A url without a scheme means TLS because a backend holds values that may
// be secrets: plaintext must be asked for, never fallen into. Capact reads
// it the other way; see ParseCapactURL.
func ParseURL(raw string) (Target, error) { return parseURL(raw, true) }

// ParseCapactURL reads a url as Capact's Local Hub dials it (nice-grpc's
// createChannel): as ParseURL, except that a bare host:port is plaintext.
// Backends registered for Capact use that form for in-cluster services.
func ParseCapactURL(raw string) (Target, error) { return parseURL(raw, false) }

func parseURL(raw string, bareTLS bool) (Target, error) {
	if strings.TrimSpace(raw) == "" {
		return Target{}, fmt.Errorf("url is empty; want grpc://host:port (plaintext), grpcs://host:port or host:port (TLS)")
	}
	if !strings.Contains(raw, "://") {
		if err := checkHostPort(raw); err != nil {
			return Target{}, fmt.Errorf("url %q: %w", raw, err)
		}
		return Target{Addr: raw, TLS: bareTLS}, nil
	}
	u, err := url.Parse(raw)
	if err != nil {
		return Target{}, fmt.Errorf("url %q: %w", raw, err)
	}
	var t Target
	switch u.Scheme {
	case "grpc", "http":
	case "grpcs", "https":
		t.TLS = true
	default:
		return Target{}, fmt.Errorf("url %q: scheme %q is not supported; want grpc:// or http:// (plaintext), grpcs:// or https:// (TLS)", raw, u.Scheme)
	}
	if u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return Target{}, fmt.Errorf("url %q: want only %s://host:port, without user, path, query or fragment", raw, u.Scheme)
	}
	if err := checkHostPort(u.Host); err != nil {
		return Target{}, fmt.Errorf("url %q: %w", raw, err)
	}
	t.Addr = u.Host
	return t, nil
}

func checkHostPort(hp string) error {
	host, port, err := net.SplitHostPort(hp)
	if err != nil {
		return fmt.Errorf("want host:port: %w", err)
	}
	if host == "" {
		return fmt.Errorf("want host:port: the host is missing")
	}
	if port == "" {
		return fmt.Errorf("want host:port: the port is missing")
	}
	// A number, so that "unix:/path" or "unix-abstract:name" (host unix,
	// port the path) is no host:port: gRPC would read that scheme as its
	// unix resolver and dial a local socket.
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 {
		return fmt.Errorf("want host:port: port %q is not a number from 1 to 65535", port)
	}
	return nil
}
