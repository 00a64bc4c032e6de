package main

import (
	"testing"

	"github.com/hubproxy/hubproxy/bench/harness"
)

func TestParseSize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
	}{
		{"2GiB", 2 * harness.GiB}, {"512MiB", 512 * harness.MiB}, {"64KiB", 64 * harness.KiB},
		{"1.5G", 3 * harness.GiB / 2}, {" 8M ", 8 * harness.MiB}, {"4096", 4096}, {"0", 0},
	} {
		if got, err := parseSize(tc.in); err != nil || got != tc.want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "GiB", "-1MiB", "2TB", "x"} {
		if _, err := parseSize(bad); err == nil {
			t.Errorf("parseSize(%q) succeeded", bad)
		}
	}
	for _, n := range []int64{2 * harness.GiB, 50 * harness.MiB, 4 * harness.KiB, 1000} {
		if got, err := parseSize(sizeString(n)); err != nil || got != n {
			t.Errorf("parseSize(sizeString(%d)) = %d, %v", n, got, err)
		}
	}
}

func TestFlagsReachTheConfig(t *testing.T) {
	if err := run([]string{"-reps", "0"}); err == nil {
		t.Error("an invalid config was accepted")
	}
	if err := run([]string{"-large", "lots"}); err == nil {
		t.Error("a bad size was accepted")
	}
}

func TestParseInts(t *testing.T) {
	if got, err := parseInts(joinInts([]int{8, 16})); err != nil || len(got) != 2 || got[0] != 8 || got[1] != 16 {
		t.Errorf("parseInts(joinInts(8, 16)) = %v, %v", got, err)
	}
	if got, err := parseInts(" 4 , 32"); err != nil || len(got) != 2 || got[0] != 4 || got[1] != 32 {
		t.Errorf("parseInts(\" 4 , 32\") = %v, %v", got, err)
	}
	for _, bad := range []string{"", "8,", "0", "-1", "x", "8;16"} {
		if _, err := parseInts(bad); err == nil {
			t.Errorf("parseInts(%q) succeeded", bad)
		}
	}
}
