package agent

import (
	"fmt"
	"os"
	"path/filepath"
)

// maxSocketPath is the longest path a unix socket's address takes here
// (sun_path is 108 bytes with its terminating NUL; a little to spare).
const maxSocketPath = 100

// socketAddr is an address for the unix socket at path that fits a socket
// address however long path is (a data dir under a long temporary folder
// passes 108 bytes): a long one is reached through a descriptor of its
// folder, /proc/self/fd/N/name, open until release is called. Bind and
// connect with the address before release.
func socketAddr(path string) (addr string, release func(), err error) {
	if len(path) <= maxSocketPath {
		return path, func() {}, nil
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return "", nil, err
	}
	return fmt.Sprintf("/proc/self/fd/%d/%s", d.Fd(), filepath.Base(path)), func() { d.Close() }, nil
}
