//go:build !linux

package main

import "net"

// peerPID is 0 (unknown): SO_PEERCRED is Linux's.
func peerPID(net.Conn) int { return 0 }
