// Package bytesize reads and writes byte quantities the ways operators write
// them: plain byte counts, binary units in IEC or Kubernetes spelling (64KiB,
// 64Ki), and decimal ones (10GB, 10G). One parser serves flags, environment
// variables, config files and commands, so a size means the same everywhere.
package bytesize

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// unit is a suffix and its multiplier.
type unit struct {
	suffix string
	mult   float64
}

// units are tried longest first, so "GiB" is not read as "G" + "iB".
var units = []unit{
	{"EiB", 1 << 60}, {"PiB", 1 << 50}, {"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10},
	{"Ei", 1 << 60}, {"Pi", 1 << 50}, {"Ti", 1 << 40}, {"Gi", 1 << 30}, {"Mi", 1 << 20}, {"Ki", 1 << 10},
	{"EB", 1e18}, {"PB", 1e15}, {"TB", 1e12}, {"GB", 1e9}, {"MB", 1e6}, {"KB", 1e3}, {"kB", 1e3},
	{"E", 1e18}, {"P", 1e15}, {"T", 1e12}, {"G", 1e9}, {"M", 1e6}, {"K", 1e3}, {"k", 1e3},
	{"B", 1},
}

// Parse reads a non-negative size: "1048576", "64KiB", "64Ki", "1.5GB",
// "10G", "2 MiB". Errors quote the value given and show accepted forms.
func Parse(s string) (int64, error) {
	bad := func() (int64, error) {
		return 0, fmt.Errorf("%q is not a size (examples: 100Gi, 100GiB, 10G, 64KiB, 1048576)", s)
	}
	num, mult := strings.TrimSpace(s), 1.0
	for _, u := range units {
		if rest, ok := strings.CutSuffix(num, u.suffix); ok {
			num, mult = strings.TrimSpace(rest), u.mult
			break
		}
	}
	if num == "" || strings.ContainsAny(num, "+-eE_xX") && num != "0" {
		return bad()
	}
	if n, err := strconv.ParseUint(num, 10, 63); err == nil {
		if mult != 1 && float64(n) > math.MaxInt64/mult {
			return bad()
		}
		return int64(n) * int64(mult), nil
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || f < 0 || math.IsInf(f, 0) || math.IsNaN(f) || f*mult >= math.MaxInt64 {
		return bad()
	}
	return int64(f * mult), nil
}

var binary = []unit{{"EiB", 1 << 60}, {"PiB", 1 << 50}, {"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}}

// Format writes n exactly, with the largest binary unit that divides it
// ("100GiB", "64KiB"), else as a plain byte count. Parse reads it back.
func Format(n int64) string {
	for _, u := range binary {
		if m := int64(u.mult); n >= m && n%m == 0 {
			return strconv.FormatInt(n/m, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10)
}

// Human writes n for people, to three significant figures in the largest
// binary unit not above it: "1.50 GiB", "512 B".
func Human(n int64) string {
	if n < 0 {
		return "-" + Human(-n)
	}
	for _, u := range binary {
		if v := float64(n) / u.mult; v >= 1 {
			switch {
			case v >= 100:
				return fmt.Sprintf("%.0f %s", v, u.suffix)
			case v >= 10:
				return fmt.Sprintf("%.1f %s", v, u.suffix)
			}
			return fmt.Sprintf("%.2f %s", v, u.suffix)
		}
	}
	return strconv.FormatInt(n, 10) + " B"
}
