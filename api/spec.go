// Package api holds hubproxy's REST contract, openapi.yaml, and ships it in
// the binary: the server serves it at /openapi.yaml, so a client can read
// the contract of the very build it talks to.
package api

import _ "embed"

// spec is openapi.yaml as built; go:embed needs a package variable.
//
//go:embed openapi.yaml
var spec []byte

// Spec returns the OpenAPI document. The slice is shared: do not modify it.
func Spec() []byte { return spec }
