package cli

import (
	"fmt"
	"strconv"
	"strings"
)

// byteSize is a flag of bytes written as 1073741824, 1GiB, 512MiB, 64KiB
// (or GB, MB, KB: powers of 1000).
type byteSize int64

func (b *byteSize) String() string { return strconv.FormatInt(int64(*b), 10) }

func (b *byteSize) Type() string { return "size" }

func (b *byteSize) Set(v string) error {
	units := []struct {
		suffix string
		n      int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"B", 1}}
	num, mult := strings.TrimSpace(v), int64(1)
	for _, u := range units {
		if rest, ok := strings.CutSuffix(num, u.suffix); ok {
			num, mult = strings.TrimSpace(rest), u.n
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mult {
		return fmt.Errorf("%q is not a size such as 1GiB, 512MiB or a number of bytes", v)
	}
	*b = byteSize(n * mult)
	return nil
}

// splitList splits a comma-separated setting (CUMULUS_LOCATIONS).
func splitList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// settingValue renders a server config value as its flag takes it: a
// YAML list (locations: [local, westeurope]) comma-separated.
func settingValue(v any) string {
	list, ok := v.([]any)
	if !ok {
		return fmt.Sprint(v)
	}
	items := make([]string, len(list))
	for i, x := range list {
		items[i] = fmt.Sprint(x)
	}
	return strings.Join(items, ",")
}
