package api

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// ParseDuration reads an ISO-8601 duration as ARM uses it (PT5M, PT120S,
// P1DT2H, PT1.5S). Years and months are refused: they have no fixed length.
func ParseDuration(s string) (time.Duration, error) {
	orig := s
	if !strings.HasPrefix(s, "P") || len(s) < 3 {
		return 0, fmt.Errorf("%q is not an ISO-8601 duration such as PT5M or PT120S", orig)
	}
	s = s[1:]
	var total float64
	inTime := false
	seen := false
	for len(s) > 0 {
		if s[0] == 'T' {
			if inTime {
				return 0, fmt.Errorf("%q is not an ISO-8601 duration: T appears twice", orig)
			}
			inTime = true
			s = s[1:]
			if len(s) == 0 {
				return 0, fmt.Errorf("%q is not an ISO-8601 duration: nothing after T", orig)
			}
			continue
		}
		i := 0
		for i < len(s) && (s[i] >= '0' && s[i] <= '9' || s[i] == '.') {
			i++
		}
		if i == 0 || i == len(s) {
			return 0, fmt.Errorf("%q is not an ISO-8601 duration such as PT5M or PT120S", orig)
		}
		n, err := strconv.ParseFloat(s[:i], 64)
		if err != nil {
			return 0, fmt.Errorf("%q is not an ISO-8601 duration: bad number %q", orig, s[:i])
		}
		var unit float64
		switch u := s[i]; {
		case !inTime && u == 'W':
			unit = 7 * 24 * 3600
		case !inTime && u == 'D':
			unit = 24 * 3600
		case inTime && u == 'H':
			unit = 3600
		case inTime && u == 'M':
			unit = 60
		case inTime && u == 'S':
			unit = 1
		default:
			return 0, fmt.Errorf("%q is not an ISO-8601 duration: unit %q not allowed here (years and months are not supported)", orig, string(u))
		}
		total += n * unit
		seen = true
		s = s[i+1:]
	}
	if !seen {
		return 0, fmt.Errorf("%q is not an ISO-8601 duration such as PT5M or PT120S", orig)
	}
	if total > float64(100*365*24*3600) {
		return 0, fmt.Errorf("%q is longer than 100 years", orig)
	}
	return time.Duration(math.Round(total * float64(time.Second))), nil
}

// FormatDuration writes d as an ISO-8601 duration (PT2M, PT1H30M, PT0S).
func FormatDuration(d time.Duration) string {
	if d <= 0 {
		return "PT0S"
	}
	var b strings.Builder
	b.WriteString("P")
	days := d / (24 * time.Hour)
	d -= days * 24 * time.Hour
	if days > 0 {
		fmt.Fprintf(&b, "%dD", days)
	}
	if d == 0 {
		return b.String()
	}
	b.WriteString("T")
	if h := d / time.Hour; h > 0 {
		fmt.Fprintf(&b, "%dH", h)
		d -= h * time.Hour
	}
	if m := d / time.Minute; m > 0 {
		fmt.Fprintf(&b, "%dM", m)
		d -= m * time.Minute
	}
	if d > 0 {
		secs, frac := d/time.Second, d%time.Second
		b.WriteString(strconv.FormatInt(int64(secs), 10))
		if frac > 0 {
			b.WriteString(strings.TrimRight(fmt.Sprintf(".%09d", frac), "0"))
		}
		b.WriteString("S")
	}
	return b.String()
}
