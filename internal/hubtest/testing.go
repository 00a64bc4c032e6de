package hubtest

import "testing"

// NewT starts a hub for a test or benchmark and closes it when tb ends. It is
// the only part of the package that imports testing.
func NewT(tb testing.TB, opts Options) *Hub {
	tb.Helper()
	h, err := New(opts)
	if err != nil {
		tb.Fatalf("hubtest.New: %v", err)
	}
	tb.Cleanup(h.Close)
	return h
}
