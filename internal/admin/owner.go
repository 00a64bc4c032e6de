package admin

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sync"

	"github.com/hubproxy/hubproxy/internal/gpu"
)

// Who may see and end a lease. Any process that can reach the admin socket
// can stage, but a lease is its stager's: only its owner lists, renews and
// releases it, so one consumer cannot free the GPU memory another is using.
//
// The owner is the uid the kernel reports for the staging connection's peer
// (SO_PEERCRED, read once when the connection is accepted, by
// ConnContext). Not the pid: across the containers of a pod the peer is
// usually in a PID namespace hubproxy cannot see (pid 0), and a consumer is
// often several processes (a launcher that stages and workers that renew, a
// script's successive curls); processes of one uid can signal and trace one
// another anyway, so the uid is the boundary the kernel already draws. Run
// consumers that must not touch each other's leases under different uids.
//
// The operator is hubproxy's own effective uid: a caller with it (an
// exec'd shell in hubproxy's container, a check run by the user that runs
// hubproxy) lists and ends every lease. Root is no exception to the rule: in
// another container it is just another consumer.
//
// A connection with no credential (a loopback TCP admin listener, where the
// peer cannot be told; or a handler served without ConnContext) is
// anonymous. Its leases belong to whoever holds their id: ids are 128 random
// bits (gpu.newLeaseID) that only the stager is told, so the id is the
// capability, and any caller with it may renew or release such a lease.
// Listing would hand those ids out, so an anonymous caller cannot list at
// all (400), and only the operator sees anonymous leases. An anonymous
// caller cannot touch a lease that has an owner.
//
// A lease that is not the caller's is, to the caller, a lease that does not
// exist: left out of the list, 404 LeaseNotFound to renew, and a release
// answers 204 as for any unknown id, freeing nothing.

// peer is the far end of an admin connection, as the kernel names it.
type peer struct {
	known bool   // a credential was read: a Unix socket
	uid   uint32 // effective uid when it connected
	pid   int32  // for logs only: 0 when its PID namespace is not visible here
}

func (p peer) String() string {
	if !p.known {
		return "anonymous"
	}
	return fmt.Sprintf("uid %d pid %d", p.uid, p.pid)
}

type peerKey struct{}

// ConnContext is the admin http.Server's ConnContext: it reads the
// connection's peer credentials once, as it is accepted, for the lease
// ownership rules above. Without it every caller is anonymous.
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	return withPeer(ctx, peerCred(c))
}

func withPeer(ctx context.Context, p peer) context.Context {
	return context.WithValue(ctx, peerKey{}, p)
}

// peerOf is the request's caller; anonymous where no credential was read.
func peerOf(r *http.Request) peer {
	p, _ := r.Context().Value(peerKey{}).(peer)
	return p
}

// owners records who staged each lease the admin API made. The stager
// knows nothing of callers; this is the admin API's own bookkeeping.
type owners struct {
	operator uint32
	mu       sync.Mutex
	// of maps a lease id to its stager. Leases that end inside the stager
	// (TTL, device reset) leave entries behind; prune drops them.
	of map[string]peer // guarded by mu
}

func newOwners(operator uint32) *owners {
	return &owners{operator: operator, of: map[string]peer{}}
}

func (o *owners) isOperator(p peer) bool { return p.known && p.uid == o.operator }

// may reports whether caller may renew or release a lease staged by owner.
func (o *owners) may(caller, owner peer) bool {
	switch {
	case o.isOperator(caller):
		return true
	case !owner.known:
		return true // the id is the capability
	default:
		return caller.known && caller.uid == owner.uid
	}
}

// sees reports whether caller's list shows a lease staged by owner: its own
// only, or everything for the operator. Anonymous leases are never shown to
// other callers, whose lists would hand out the ids that unlock them.
func (o *owners) sees(caller, owner peer) bool {
	return o.isOperator(caller) || caller.known && owner.known && caller.uid == owner.uid
}

// add records the owner of a lease just staged, and prunes the records of
// leases no longer live, so that stagings whose leases only ever expire do
// not grow the map. live is called under o.mu: a record added after the
// snapshot is of a lease that was live before it, so it is never pruned.
func (o *owners) add(id string, p peer, live func() []gpu.Lease) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.pruneLocked(live())
	o.of[id] = p
}

func (o *owners) forget(id string) {
	o.mu.Lock()
	delete(o.of, id)
	o.mu.Unlock()
}

func (o *owners) pruneLocked(live []gpu.Lease) {
	ids := make(map[string]struct{}, len(live))
	for _, l := range live {
		ids[l.ID] = struct{}{}
	}
	for id := range o.of {
		if _, ok := ids[id]; !ok {
			delete(o.of, id)
		}
	}
}

// visible returns the leases of live that caller's list shows, pruning
// records of leases that are gone.
func (o *owners) visible(caller peer, live []gpu.Lease) []gpu.Lease {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.pruneLocked(live)
	out := make([]gpu.Lease, 0, len(live))
	for _, l := range live {
		owner, recorded := o.of[l.ID]
		// A lease this API did not stage (the copier used in-process) has
		// no record: the operator's alone.
		if recorded && o.sees(caller, owner) || !recorded && o.isOperator(caller) {
			out = append(out, l)
		}
	}
	return out
}

// allows reports whether caller may renew or release the lease named id.
// An id with no record (unknown, gone, or a lease this API did not stage)
// is the operator's alone, whose call the stager answers; anyone else gets
// the answer for an unknown lease without the stager being asked.
func (o *owners) allows(caller peer, id string) bool {
	o.mu.Lock()
	owner, recorded := o.of[id]
	o.mu.Unlock()
	if !recorded {
		return o.isOperator(caller)
	}
	return o.may(caller, owner)
}

// notYours is the error for a lease that is not the caller's: word for
// word the stager's for an unknown id, so the answer reveals nothing.
func notYours(id string) error {
	return fmt.Errorf("%w: %q", gpu.ErrUnknownLease, id)
}
