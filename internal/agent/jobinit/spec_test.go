package jobinit

import (
	"reflect"
	"testing"
)

// A spec reads back as written, whatever its strings hold (a command may
// hold anything but NUL, and the format needs no escaping); a spec that
// is cut short, has bytes left over or a field out of range is refused.
func TestSpecRoundTrip(t *testing.T) {
	for _, s := range []Spec{
		{Dir: "/w/jobs/j", Path: "/bin/sh", Args: []string{"-c", "echo '12:x' \"$HOME\"; printf '%s\\n' 3:abc"}},
		{Ready: true, Stdin: true, KillAll: true, User: &User{UID: 4294967295, GID: 7, Home: "/w/jobs/j"}, Mask: "/w", Tmp: "/w/tmp",
			ShmSize: 2 << 30, Dir: "/w/jobs/j", Path: "python", Args: []string{"", "ünï\tcode", "1:"}},
		{Path: "docker"},
	} {
		got, err := DecodeSpec(s.Encode())
		if err != nil {
			t.Fatalf("DecodeSpec(Encode(%+v)): %v", s, err)
		}
		if !reflect.DeepEqual(got, s) {
			t.Errorf("round trip: got %+v, want %+v", got, s)
		}
	}
	good := Spec{User: &User{UID: 1, GID: 1}, ShmSize: 1, Dir: "/d", Path: "/bin/sh", Args: []string{"-c", "true"}}.Encode()
	for name, b := range map[string][]byte{
		"empty":      nil,
		"cut short":  good[:len(good)-2],
		"extra":      append(append([]byte(nil), good...), "1:x"...),
		"version":    append([]byte("1:2"), good[3:]...),
		"huge field": []byte("99999:1"),
		"negative":   []byte("-1:"),
	} {
		if _, err := DecodeSpec(b); err == nil {
			t.Errorf("%s: a malformed spec was accepted", name)
		}
	}
}
