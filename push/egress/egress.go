// Package egress is the push role's outbound safety (issue 36): which targets a push
// subscription may call. An operator lists hosts and CIDRs (--push-allow); loopback,
// link-local, private and other special addresses are refused unless a CIDR lists
// them; plain HTTP needs --push-allow-insecure. The check runs twice: on the URL when
// a subscription is written (the broker core refuses it with a 4xx), and on every
// address actually dialled (a net.Dialer Control func), so a name that resolves to a
// private address later (DNS rebinding) is refused at the dial.
package egress

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"
)

// ErrNotAllowed: a target the policy refuses.
var ErrNotAllowed = errors.New("push target not allowed")

// Policy is the operator's allow-list. The zero Policy allows nothing.
type Policy struct {
	hosts    map[string]bool // lower-case host names, exact
	suffixes []string        // "*.example.com" as ".example.com"
	prefixes []netip.Prefix
	// Insecure allows plain http:// targets.
	Insecure bool
}

// Parse builds a Policy from entries: host names ("hooks.example.com"), wildcard
// domains ("*.example.com"), IP addresses and CIDRs ("10.0.0.0/8", "127.0.0.1").
func Parse(entries []string, insecure bool) (*Policy, error) {
	p := &Policy{hosts: map[string]bool{}, Insecure: insecure}
	for _, e := range entries {
		e = strings.ToLower(strings.TrimSpace(e))
		switch {
		case e == "":
			continue
		case strings.Contains(e, "/"):
			pr, err := netip.ParsePrefix(e)
			if err != nil {
				return nil, fmt.Errorf("push allow %q: %w", e, err)
			}
			p.prefixes = append(p.prefixes, pr.Masked())
		case strings.HasPrefix(e, "*."):
			p.suffixes = append(p.suffixes, e[1:])
		default:
			if a, err := netip.ParseAddr(e); err == nil {
				p.prefixes = append(p.prefixes, netip.PrefixFrom(a, a.BitLen()))
				continue
			}
			p.hosts[e] = true
		}
	}
	return p, nil
}

func (p *Policy) hostListed(h string) bool {
	h = strings.ToLower(strings.TrimSuffix(h, "."))
	if p.hosts[h] {
		return true
	}
	for _, s := range p.suffixes {
		if strings.HasSuffix(h, s) {
			return true
		}
	}
	return false
}

func (p *Policy) addrListed(a netip.Addr) bool {
	for _, pr := range p.prefixes {
		if pr.Contains(a) {
			return true
		}
	}
	return false
}

// special answers whether a is an address no target may have unless a CIDR lists it.
func special(a netip.Addr) bool {
	return a.IsLoopback() || a.IsPrivate() || a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() ||
		a.IsMulticast() || a.IsUnspecified() || a.IsInterfaceLocalMulticast() ||
		netip.MustParsePrefix("100.64.0.0/10").Contains(a) || // carrier-grade NAT
		netip.MustParsePrefix("fc00::/7").Contains(a)
}

// CheckURL checks a target URL as written: https (or http with Insecure), no user
// info, and a host the list names (by name, or an IP address a CIDR covers).
func (p *Policy) CheckURL(raw string) error {
	if p == nil {
		return fmt.Errorf("%w: this node allows no push targets (--push-allow)", ErrNotAllowed)
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || !u.IsAbs() {
		return fmt.Errorf("%w: %q is not an absolute URL", ErrNotAllowed, raw)
	}
	switch {
	case u.Scheme == "http" && !p.Insecure:
		return fmt.Errorf("%w: %q is plain HTTP; use https (or start the node with --push-allow-insecure)", ErrNotAllowed, raw)
	case u.Scheme != "https" && u.Scheme != "http":
		return fmt.Errorf("%w: scheme %q: want https", ErrNotAllowed, u.Scheme)
	case u.User != nil:
		return fmt.Errorf("%w: a URL with credentials in it", ErrNotAllowed)
	}
	h := u.Hostname()
	if a, err := netip.ParseAddr(h); err == nil {
		if !p.addrListed(a.Unmap()) {
			return fmt.Errorf("%w: address %s is not in --push-allow", ErrNotAllowed, a)
		}
		return nil
	}
	if !p.hostListed(h) {
		return fmt.Errorf("%w: host %q is not in --push-allow", ErrNotAllowed, h)
	}
	return nil
}

// CheckAddr checks an address about to be dialled: a listed CIDR allows it; else a
// special address is refused, and any other is allowed (its host name was checked).
func (p *Policy) CheckAddr(a netip.Addr) error {
	a = a.Unmap()
	if p.addrListed(a) {
		return nil
	}
	if special(a) {
		return fmt.Errorf("%w: dialled address %s is loopback, link-local or private and not in --push-allow", ErrNotAllowed, a)
	}
	return nil
}

// control is the dialer's Control func: the check on the address actually dialled.
func (p *Policy) control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: dialled address %q: %v", ErrNotAllowed, address, err)
	}
	return p.CheckAddr(ap.Addr())
}

// MaxAnswer bounds the bytes of an answer a call reads.
const MaxAnswer = 64 << 10

// Client is an HTTP client for push calls under p: every dial checked, TLS verified
// (the default), redirects refused, no proxy from the environment (the dial check
// would see the proxy's address).
func (p *Policy) Client() *http.Client {
	d := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second, Control: p.control}
	tr := &http.Transport{
		Proxy:                 nil,
		DialContext:           d.DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          256,
		MaxIdleConnsPerHost:   64,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	return &http.Client{
		Transport: tr,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse // a redirect is the answer, never followed
		},
	}
}

// ReadAnswer reads up to MaxAnswer bytes of an answer's body and drains (bounded) the
// rest so the connection can be reused.
func ReadAnswer(r io.ReadCloser) []byte {
	defer r.Close()
	b, _ := io.ReadAll(io.LimitReader(r, MaxAnswer))
	_, _ = io.Copy(io.Discard, io.LimitReader(r, MaxAnswer))
	return b
}
