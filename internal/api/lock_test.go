package api

import (
	"strings"
	"testing"
)

// Lock names that would read as another name, a path or an option are
// refused: "..", a right-to-left override, a byte that is not UTF-8, a
// leading "-", invisible characters; ordinary names are kept.
func TestCheckLockName(t *testing.T) {
	for _, ok := range []string{"keep", "do-not-delete", "Prod lock 1", "a.b", "ça-reste", "x_y"} {
		if err := CheckLockName(ok); err != nil {
			t.Errorf("CheckLockName(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"", "..", ".", "a..b", "keep.", "-rf", "--level", "evil\u202Etxt.exe", "a\xffb", "zero\u200Bwidth",
		"nb\u00A0sp", "a/b", "a:b", "tab\t", strings.Repeat("x", MaxLockNameLength+1)} {
		err := CheckLockName(bad)
		if err == nil {
			t.Errorf("CheckLockName(%q) accepted", bad)
			continue
		}
		if e, ok := err.(*Error); !ok || e.Status != 400 || e.Code != CodeInvalidName {
			t.Errorf("CheckLockName(%q) = %v, want a 400 InvalidName", bad, err)
		}
	}
}
