package kafka

import (
	"net"
	"net/netip"
)

// What a connection that has not authenticated may hold, when authentication is on
// (Config.Auth). A stranger costs the node a socket, a connection slot, two goroutines
// and the frame being read; without bounds, sockets that never authenticate took every
// connection slot, and ones that declared a pre-authentication frame and stalled took
// the node's memory budget. So, until it authenticates, a connection:
//
//   - has AuthTimeout from its acceptance to finish SASL (the TLS handshake included),
//     else it is closed;
//   - sends frames of at most PreAuthMaxFrameBytes, and only ApiVersions and the SASL
//     requests (a larger size prefix closes it before anything is reserved);
//   - reserves those frames in a pool of their own, never in the node's budget, one
//     address at most one largest frame of it (a frame is let go of once served, so a
//     client holds the pool only while its frame is being read, and filling the pool
//     takes as many addresses as it holds frames);
//   - holds one of MaxUnauthenticated slots, and one of MaxUnauthenticatedPerHost of
//     its address's (an IPv6 client's /64, which one host commonly has whole), beside
//     its slot of MaxConnections: beyond them it is closed as it is accepted, so one
//     host cannot take the slots that keyed clients need to authenticate in.
//
// Once authenticated, it leaves both counts, and its frames are reserved in the node's
// budget, counted against its principal's share of bytes still arriving.

// Why a connection is refused as it is accepted (the refused metric's label).
const (
	refusedMax        = "max_connections"
	refusedUnauth     = "unauthenticated"
	refusedUnauthHost = "unauthenticated_per_host"
)

// refusalLocked says why a new connection from host is refused, or "".
func (s *Server) refusalLocked(host string) string {
	switch {
	case len(s.conns) >= s.cfg.MaxConnections:
		return refusedMax
	case !s.authRequired():
		return ""
	case s.unauth >= s.cfg.MaxUnauthenticated:
		return refusedUnauth
	case s.unauthByHost[host] >= s.cfg.MaxUnauthenticatedPerHost:
		return refusedUnauthHost
	}
	return ""
}

// leaveUnauthLocked takes c out of the counts of connections not yet authenticated,
// once.
func (s *Server) leaveUnauthLocked(c *conn) {
	if !c.unauthCounted {
		return
	}
	c.unauthCounted = false
	s.unauth--
	if n := s.unauthByHost[c.addrKey] - 1; n > 0 {
		s.unauthByHost[c.addrKey] = n
	} else {
		delete(s.unauthByHost, c.addrKey)
	}
}

// admitted is called once c has authenticated: its deadline is lifted and it leaves
// the counts of connections not yet authenticated.
func (c *conn) admitted() {
	c.stopAuthTimer()
	c.s.mu.Lock()
	c.s.leaveUnauthLocked(c)
	c.s.mu.Unlock()
}

// hostKey is what the per-address limit counts by: the client's IP address, or for
// IPv6 its /64 (an IPv4 address mapped into IPv6 counts as the IPv4 one).
func hostKey(a net.Addr) string {
	ap, err := netip.ParseAddrPort(a.String())
	if err != nil {
		return hostOf(a)
	}
	ip := ap.Addr().Unmap()
	if ip.Is4() {
		return ip.String()
	}
	p, err := ip.Prefix(64)
	if err != nil {
		return ip.String()
	}
	return p.String()
}

func (c *conn) stopAuthTimer() {
	c.mu.Lock()
	if c.authTimer != nil {
		c.authTimer.Stop()
	}
	c.mu.Unlock()
}

// authRequired says whether connections must authenticate before other requests (Auth
// set, not AuthOptional).
func (s *Server) authRequired() bool { return s.cfg.Auth != nil && !s.cfg.AuthOptional }
