package admin

import "github.com/hubproxy/hubproxy/internal/server"

// Routes are the operations of the admin listener, which is served only on
// a Unix socket or loopback (/debug/pprof/, opt-in, is Go's and left out).
// They are documented in the same api/openapi.yaml as server.Routes, and
// checked against it with them; this package's tests exercise them.
var Routes = []server.Route{
	{Method: "GET", Pattern: "/gpu/devices", Example: "/gpu/devices"},
	{Method: "POST", Pattern: "/gpu/stage", Example: "/gpu/stage"},
	{Method: "GET", Pattern: "/gpu/leases", Example: "/gpu/leases"},
	{Method: "DELETE", Pattern: "/gpu/leases/{id}", Example: "/gpu/leases/lease-1"},
	{Method: "POST", Pattern: "/gpu/leases/{id}/renew", Example: "/gpu/leases/lease-1/renew"},
	{Method: "GET", Pattern: "/cache/stats", Example: "/cache/stats"},
	{Method: "POST", Pattern: "/cache/prefetch", Example: "/cache/prefetch"},
	{Method: "GET", Pattern: "/transfers", Example: "/transfers"},
}
