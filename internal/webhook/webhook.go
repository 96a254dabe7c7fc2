// Package webhook says where the control plane may send a webhook (a
// budget's notice) and posts it there. A webhook's URL is written by a
// workspace's Contributor, yet the POST leaves from the control plane's own
// machine: without a policy it reaches the control plane's loopback
// services, the cloud's metadata endpoint and the private network behind
// it. So loopback, link-local (with the metadata address 169.254.169.254),
// private, shared and reserved ranges are refused unless the operator
// allows a range (cumulus serve --webhook-allow); the address checked is
// the one actually dialled (a name that resolves to a refused address is
// refused when dialled, whatever it resolved to before), no proxy is used,
// redirects are not followed, and every POST has a deadline.
package webhook

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"
)

// DefaultTimeout bounds one webhook POST (Policy.Timeout): connecting,
// sending, and the answer.
const DefaultTimeout = 10 * time.Second

// ErrRefused is a destination the policy refuses.
var ErrRefused = errors.New("webhook destination refused")

// refused are the ranges a webhook may not reach unless allowed: not the
// public internet. IPv4-mapped IPv6 addresses are checked as IPv4.
var refused = mustPrefixes(
	"0.0.0.0/8",       // "this network": 0.0.0.0 reaches the local host
	"10.0.0.0/8",      // private
	"100.64.0.0/10",   // shared address space (carrier-grade NAT)
	"127.0.0.0/8",     // loopback
	"169.254.0.0/16",  // link-local, with the cloud metadata address 169.254.169.254
	"172.16.0.0/12",   // private
	"192.0.0.0/24",    // IETF protocol assignments
	"192.168.0.0/16",  // private
	"198.18.0.0/15",   // benchmarking
	"224.0.0.0/4",     // multicast
	"240.0.0.0/4",     // reserved, and the broadcast address
	"::/128",          // unspecified
	"::1/128",         // loopback
	"64:ff9b::/96",    // NAT64: an IPv4 address, any of the above included
	"64:ff9b:1::/48",  // local-use NAT64
	"2002::/16",       // 6to4: an IPv4 address inside
	"fc00::/7",        // unique local, with fd00:ec2::254 (a cloud metadata address)
	"fe80::/10",       // link-local
	"ff00::/8",        // multicast
	"100::/64",        // discard-only
	"2001:db8::/32",   // documentation
	"2001::/32",       // Teredo: an IPv4 address inside
	"::ffff:0:0:0/96", // IPv4-translated
)

func mustPrefixes(ss ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParsePrefix(s)
	}
	return out
}

// Policy is where webhooks may go: the public internet, and the ranges
// the operator allows besides.
type Policy struct {
	Allow []netip.Prefix
	// Timeout bounds one POST (0: DefaultTimeout).
	Timeout time.Duration
}

// ParseAllow reads the operator's allowed ranges: CIDRs (10.0.0.0/8,
// fd00::/8) or single addresses (127.0.0.1).
func ParseAllow(ss []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range ss {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if p, err := netip.ParsePrefix(s); err == nil {
			if p.Addr().Is4In6() {
				return nil, fmt.Errorf("webhook range %q: write an IPv4 range as IPv4", s)
			}
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(s)
		if err != nil {
			return nil, fmt.Errorf("webhook range %q is not a CIDR such as 10.0.0.0/8 or an address", s)
		}
		a = a.Unmap()
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, nil
}

// CheckAddr says whether a webhook may reach addr: nil, or ErrRefused
// wrapped with why.
func (p Policy) CheckAddr(addr netip.Addr) error {
	addr = addr.Unmap().WithZone("")
	for _, a := range p.Allow {
		if a.Contains(addr) {
			return nil
		}
	}
	for _, r := range refused {
		if r.Contains(addr) {
			return fmt.Errorf("%w: %s is in %s, which webhooks may not reach (loopback, link-local and metadata, private and reserved ranges); an operator may allow a range with 'cumulus serve --webhook-allow CIDR'", ErrRefused, addr, r)
		}
	}
	return nil
}

// CheckURL checks a webhook URL when it is written: an http or https URL
// with a host and no user name or password, whose host, if an address or
// a name of the local host, the policy allows. A name is checked again,
// by address, each time it is dialled.
func (p Policy) CheckURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Hostname() == "" {
		return fmt.Errorf("webhook must be an http or https URL, got %q", raw)
	}
	if u.User != nil {
		return fmt.Errorf("%w: a webhook URL may not carry a user name or password (put a secret in the path or query)", ErrRefused)
	}
	host := u.Hostname()
	if a, err := netip.ParseAddr(host); err == nil {
		return p.CheckAddr(a)
	}
	h := strings.TrimSuffix(strings.ToLower(host), ".")
	if h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return p.CheckAddr(netip.MustParseAddr("127.0.0.1"))
	}
	return nil
}

// control is the dialer's check of the address about to be connected to:
// the name was resolved already, so this is where the webhook really goes.
func (p Policy) control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: cannot read the dialled address %q", ErrRefused, address)
	}
	return p.CheckAddr(ap.Addr())
}

// Client is an HTTP client that reaches only what the policy allows: every
// connection's address is checked as it is dialled, no proxy is used, no
// redirect is followed (the answer is the 3xx itself), and a POST takes
// at most the policy's Timeout.
func (p Policy) Client() *http.Client {
	timeout := p.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	d := &net.Dialer{Timeout: timeout, Control: p.control}
	tr := &http.Transport{
		Proxy:                 nil,
		DialContext:           d.DialContext,
		TLSHandshakeTimeout:   timeout,
		ResponseHeaderTimeout: timeout,
		MaxIdleConns:          4,
		IdleConnTimeout:       30 * time.Second,
		DisableKeepAlives:     true,
	}
	return &http.Client{Transport: tr, Timeout: timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// Post sends body (JSON) to url through c once; an answer other than 2xx
// is an error (a redirect included: it is not followed).
func Post(ctx context.Context, c *http.Client, url string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := c.Do(req)
	if err != nil {
		return err
	}
	res.Body.Close()
	if res.StatusCode < 200 || res.StatusCode >= 300 {
		return fmt.Errorf("answered %s (redirects are not followed)", res.Status)
	}
	return nil
}
