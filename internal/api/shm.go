package api

import (
	"fmt"
	"strconv"
	"strings"
)

// DefaultShmSize is a job's /dev/shm when resources.shmSize does not say:
// Azure ML's default for command jobs (2g).
const DefaultShmSize int64 = 2 << 30

// maxShmSize bounds resources.shmSize: /dev/shm is memory.
const maxShmSize int64 = 1 << 40

// ParseShmSize reads resources.shmSize as Docker's --shm-size does: a
// number of bytes with an optional unit b, k, m or g (1024-based, either
// case; "2g", "512m", "1073741824"). "" is DefaultShmSize.
func ParseShmSize(s string) (int64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	if t == "" {
		return DefaultShmSize, nil
	}
	mult := int64(1)
	if i := strings.IndexAny(t, "bkmg"); i >= 0 {
		switch t[i:] {
		case "b":
		case "k", "kb":
			mult = 1 << 10
		case "m", "mb":
			mult = 1 << 20
		case "g", "gb":
			mult = 1 << 30
		default:
			return 0, fmt.Errorf("shmSize %q: the unit is one of b, k, m, g (as in 2g or 512m)", s)
		}
		t = t[:i]
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("shmSize %q is not a positive size such as 2g or 512m", s)
	}
	if n > maxShmSize/mult {
		return 0, fmt.Errorf("shmSize %q is more than 1 TiB", s)
	}
	return n * mult, nil
}
