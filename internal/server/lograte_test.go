package server

import (
	"testing"
	"time"
)

func TestLogBudget(t *testing.T) {
	now := time.Unix(0, 0)
	b := newLogBudget(10, func() time.Time { return now })
	logged := 0
	for range 100 {
		if ok, _ := b.take(); ok {
			logged++
		}
	}
	if logged != 10 {
		t.Fatalf("a burst of 100 logged %d lines, want the 10 of one second's budget", logged)
	}
	now = now.Add(summaryEvery)
	ok, skipped := b.take()
	if !ok || skipped != 90 {
		t.Errorf("after the summary period: ok %v, skipped %d; want a line and a summary of 90", ok, skipped)
	}
	if ok, _ := (*logBudget)(nil).take(); !ok {
		t.Error("no budget must log everything")
	}
	if ok, _ := newLogBudget(0, time.Now).take(); !ok {
		t.Error("rate 0 must log everything")
	}
}
