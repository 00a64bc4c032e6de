package admin

import (
	"context"
	"net"
)

// ConnAs is ConnContext for a test that plays a consumer running as
// uid: every connection is taken to come from that uid, as SO_PEERCRED
// would report a process of it (tests run as one uid, usually root, and
// cannot connect as another without privileges).
func ConnAs(uid uint32) func(context.Context, net.Conn) context.Context {
	return func(ctx context.Context, _ net.Conn) context.Context {
		return withPeer(ctx, peer{known: true, uid: uid, pid: 1})
	}
}
