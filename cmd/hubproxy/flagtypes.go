package main

import (
	"strings"
	"time"

	"github.com/hubproxy/hubproxy/internal/bytesize"
)

// Typed flag values for the client and maintenance commands, so that
// --help names what a flag takes ("duration", "size") rather than
// "string", shows defaults the way the README and the config file write
// them ("1h", "1GiB", not "1h0m0s"), and parses them exactly as the config
// file does (parseDuration, bytesize.Parse): one rule for a value wherever
// it is written.

// durationValue is a duration flag read by the config's parseDuration.
type durationValue struct{ d *time.Duration }

func (v *durationValue) Set(s string) error {
	d, err := parseDuration(s)
	if err != nil {
		return err
	}
	*v.d = d
	return nil
}

func (v *durationValue) Type() string { return "duration" }

func (v *durationValue) String() string {
	if v.d == nil {
		return "0"
	}
	return shortDuration(*v.d)
}

// shortDuration writes d as people do: "1h", "1m", "1h30m", not Go's
// "1h0m0s".
func shortDuration(d time.Duration) string {
	if d == 0 {
		return "0" // what pflag takes for "no default", and parseDuration reads
	}
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// sizeValue is a byte size flag read by bytesize.Parse ("100GiB", "1.5TB",
// or a plain byte count).
type sizeValue struct{ n *int64 }

func (v *sizeValue) Set(s string) error {
	n, err := bytesize.Parse(s)
	if err != nil {
		return err
	}
	*v.n = n
	return nil
}

func (v *sizeValue) Type() string { return "size" }

func (v *sizeValue) String() string {
	if v.n == nil {
		return "0"
	}
	return bytesize.Format(*v.n)
}
