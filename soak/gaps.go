package soak

import (
	"io"
	"time"
)

// A client's view of an answer's pace: how long it waited for the first
// byte of the body (from sending the request: hubproxy reads a file's first
// byte before it answers, so the headers' wait is part of it) and the
// longest it then went without a byte. huggingface_hub gives up on a read
// after 10 s without one, so a proxy that keeps a client waiting that long
// has failed it even if the bytes would have come. The slow-owner phase
// (slowowner.go) bounds both for the readers of nodes that wait on a slow
// node's chunks.

// gapMeter follows the arrival of a body's bytes.
type gapMeter struct {
	last      time.Time     // when the last byte (or, before any, the request) went or came
	firstByte time.Duration // zero until a byte came
	maxGap    time.Duration // the longest wait between bytes after the first
	got       bool
}

func newGapMeter(sent time.Time) *gapMeter { return &gapMeter{last: sent} }

// note takes a read of n bytes that returned at now.
func (g *gapMeter) note(n int, now time.Time) {
	if n <= 0 {
		return
	}
	wait := now.Sub(g.last)
	if !g.got {
		g.got, g.firstByte = true, wait
	} else {
		g.maxGap = max(g.maxGap, wait)
	}
	g.last = now
}

// stall is the longest the client went without a byte: the wait for the
// first one included, and, for a body that ended short of its bytes or was
// never begun, the wait up to when it ended (end).
func (g *gapMeter) stall(end time.Time, complete bool) time.Duration {
	s := max(g.firstByte, g.maxGap)
	if !complete || !g.got {
		s = max(s, end.Sub(g.last))
	}
	return s
}

// gapReader times the reads of a body.
type gapReader struct {
	r   io.Reader
	g   *gapMeter
	now func() time.Time
}

func (r *gapReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	r.g.note(n, r.now())
	return n, err
}
