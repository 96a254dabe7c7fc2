package api

import "testing"

func TestParseShmSize(t *testing.T) {
	for in, want := range map[string]int64{"": DefaultShmSize, "2g": 2 << 30, "512M": 512 << 20, "64mb": 64 << 20, "1048576": 1 << 20, "8k": 8 << 10, "100b": 100} {
		if got, err := ParseShmSize(in); err != nil || got != want {
			t.Errorf("ParseShmSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"-1g", "0", "2t", "g", "1.5g", "2gg", "99999999999g"} {
		if _, err := ParseShmSize(bad); err == nil {
			t.Errorf("ParseShmSize(%q) accepted", bad)
		}
	}
}
