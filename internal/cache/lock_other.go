//go:build !unix

package cache

import "os"

// flock is a no-op where advisory locks are not available: there, running
// two processes on one cache directory is the operator's responsibility.
func flock(*os.File) error { return nil }
