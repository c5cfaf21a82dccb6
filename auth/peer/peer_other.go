//go:build !linux

package peer

import "net/netip"

const supported = false

func lookup(netip.AddrPort, netip.AddrPort) (int, error) { return 0, ErrUnsupported }
