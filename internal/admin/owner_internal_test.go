package admin

import (
	"fmt"
	"testing"

	"github.com/hubproxy/hubproxy/internal/gpu"
)

// TestOwnersForgetLeasesThatEnded: leases that end inside the stager (their
// TTL ran out, a device reset dropped them) are never released through the
// admin API, so their owner records must not pile up: each staging prunes
// the records of leases no longer live, and keeps the live ones.
func TestOwnersForgetLeasesThatEnded(t *testing.T) {
	o := newOwners(0)
	alice := peer{known: true, uid: 1000}
	var live []gpu.Lease
	for i := range 1000 {
		id := fmt.Sprintf("lease-%d", i)
		live = []gpu.Lease{{ID: "kept"}, {ID: id}} // the previous one expired
		o.add(id, alice, func() []gpu.Lease { return live })
		if i == 0 {
			o.add("kept", alice, func() []gpu.Lease { return live })
		}
	}
	if n := len(o.of); n != 2 {
		t.Errorf("%d owner records for 2 live leases", n)
	}
	if !o.allows(alice, "kept") || o.allows(peer{known: true, uid: 1001}, "kept") {
		t.Error("the live lease's owner record was lost")
	}
}
