package app_test

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// reportModelFailure shrinks a failing history and reports it: the seed and
// how to replay it, the shortest history found that still breaks a property
// of the same kind, each of its operations with hubproxy's answer, and
// hubproxy's last log lines.
func reportModelFailure(t *testing.T, seed uint64, steps int, grace time.Duration, ops []modelOp, run modelRun) {
	t.Helper()
	first := run.verdicts[0]
	failing := ops[:run.failAt+1]
	shrunk := shrinkHistory(failing, *modelShrink, func(cand []modelOp) (int, bool) {
		dir, err := os.MkdirTemp("", "accessmodel-")
		if err != nil {
			return 0, false
		}
		defer os.RemoveAll(dir)
		r := runModel(dir, grace, cand, false)
		if r.err != nil || r.failAt < 0 {
			return 0, false
		}
		for _, v := range r.verdicts {
			if v.kind == first.kind && v.leak == first.leak {
				return r.failAt, true
			}
		}
		return 0, false
	})
	final := runModel(t.TempDir(), grace, shrunk, true)
	if final.failAt < 0 { // the shrunk history did not fail again: show the original
		shrunk, final = failing, runModel(t.TempDir(), grace, failing, true)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "access model, seed %d (outage-grace %s), operation #%d of %d:\n", seed, grace, run.failAt, steps)
	for _, v := range run.verdicts {
		fmt.Fprintf(&b, "  %s\n", v)
	}
	fmt.Fprintf(&b, "replay: go test -race -run 'TestAccessModel$' ./internal/app/ -args -model.seed=%d -model.steps=%d\n", seed, run.failAt+1)
	fmt.Fprintf(&b, "history, shrunk to %d of %d operations (access-ttl %s, public-ttl %s; the clock starts at t=0):\n",
		len(shrunk), len(failing), modelAccessTTL, modelPublicTTL)
	for _, line := range final.trace {
		fmt.Fprintf(&b, "  %s\n", line)
	}
	if final.failAt >= 0 {
		for _, v := range final.verdicts {
			fmt.Fprintf(&b, "  ↳ %s\n", v)
		}
	} else if final.err != nil {
		fmt.Fprintf(&b, "  (replay failed: %v)\n", final.err)
	} else {
		b.WriteString("  (this replay did not fail again: the failure depends on timing)\n")
	}
	b.WriteString("hubproxy's last log lines:\n")
	for _, l := range final.logTail {
		fmt.Fprintf(&b, "  %s\n", l)
	}
	t.Error(b.String())
}

// shrinkHistory removes operations from a failing history while it still
// fails (fails reports where), trying ever smaller chunks, within budget.
// Every candidate is replayed in a fresh world, so operations must not
// depend on one another's indices (ops name commits modulo what exists).
func shrinkHistory(ops []modelOp, budget time.Duration, fails func([]modelOp) (int, bool)) []modelOp {
	deadline := time.Now().Add(budget)
	chunk := max(len(ops)/2, 1)
	for time.Now().Before(deadline) {
		removed := false
		for i := 0; i < len(ops) && time.Now().Before(deadline); {
			end := min(i+chunk, len(ops))
			cand := append(append([]modelOp{}, ops[:i]...), ops[end:]...)
			if at, ok := fails(cand); ok {
				ops, removed = cand[:at+1], true
				continue // the same i now names the next chunk
			}
			i = end
		}
		if !removed {
			if chunk == 1 {
				break
			}
			chunk = max(chunk/2, 1)
		}
	}
	return ops
}
