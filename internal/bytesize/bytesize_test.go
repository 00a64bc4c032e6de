package bytesize

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for in, want := range map[string]int64{
		"0": 0, "1048576": 1 << 20, "64KiB": 64 << 10, "64Ki": 64 << 10, "100GiB": 100 << 30, "100Gi": 100 << 30,
		"1.5GB": 1_500_000_000, "10G": 10_000_000_000, "10k": 10_000, "2 MiB": 2 << 20, "7B": 7, "1Ti": 1 << 40,
		"0.5Mi": 512 << 10, " 3M ": 3_000_000,
	} {
		if got, err := Parse(in); err != nil || got != want {
			t.Errorf("Parse(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "-1", "x", "1XB", "99999999999TiB", "GiB", "1e9", "0x10", "1_000", "+5", "NaN", "Inf", "10 GB ish", "1.5.2G"} {
		_, err := Parse(in)
		if err == nil {
			t.Errorf("Parse(%q) accepted", in)
		} else if !strings.Contains(err.Error(), `"`+in+`"`) {
			t.Errorf("Parse(%q): error %q does not quote the value", in, err)
		}
	}
}

func TestFormatRoundTrips(t *testing.T) {
	for _, n := range []int64{0, 1, 1023, 1 << 10, 64 << 10, 100 << 30, 1<<40 + 1, 3 << 50} {
		got, err := Parse(Format(n))
		if err != nil || got != n {
			t.Errorf("Parse(Format(%d) = %q) = %d, %v", n, Format(n), got, err)
		}
	}
	if Format(100<<30) != "100GiB" || Format(12345) != "12345" {
		t.Errorf("Format: %q %q", Format(100<<30), Format(12345))
	}
}

func TestHuman(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 512: "512 B", 1536: "1.50 KiB", 100 << 30: "100 GiB", 15 << 20: "15.0 MiB"} {
		if got := Human(n); got != want {
			t.Errorf("Human(%d) = %q, want %q", n, got, want)
		}
	}
}
