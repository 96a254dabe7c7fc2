package agent

import (
	"net"
	"strings"
	"testing"
)

// A node in a subnet is told its subnet's range and takes its address in
// it, whatever order its interfaces come in; a node told nothing takes
// its first address that is not loopback.
func TestPickAddress(t *testing.T) {
	ipn := func(s string) net.Addr {
		ip, nw, err := net.ParseCIDR(s)
		if err != nil {
			t.Fatal(err)
		}
		nw.IP = ip
		return nw
	}
	addrs := []net.Addr{ipn("127.0.0.1/8"), ipn("fd00::2/64"), ipn("10.233.7.2/24"), ipn("10.232.7.3/24")}
	for _, c := range []struct{ within, want, err string }{
		{"10.232.7.0/24", "10.232.7.3", ""},
		{"", "10.233.7.2", ""},
		{"10.99.0.0/16", "", "no address in that range"},
		{"10.232.7", "", "neither an IP address nor a range"},
	} {
		got, err := pickAddress(addrs, c.within)
		if got != c.want || (c.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.err)) {
			t.Errorf("pickAddress(%q) = %q, %v; want %q, error with %q", c.within, got, err, c.want, c.err)
		}
	}
	if got, _ := pickAddress([]net.Addr{ipn("127.0.0.1/8")}, ""); got != "127.0.0.1" {
		t.Errorf("a machine with only loopback: %q", got)
	}
}
