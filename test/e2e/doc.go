// Package e2e holds hubproxy's end-to-end tests: real third-party hub clients
// talking to a hubproxy that fronts the fake hub in internal/hubtest.
//
// The JS side is the published npm package @huggingface/hub, pinned exactly in
// package.json / package-lock.json and driven by client.mjs. The Go test
// (e2e_test.go) builds the repositories, writes what the client must see into
// an expectations file, runs `node client.mjs` twice against the proxy, and
// checks from the fake hub's counters that nothing bypassed the proxy and that
// the second run was served from the cache.
//
// The S3 API has two real clients here: the npm package @aws-sdk/client-s3,
// driven by s3client.mjs (s3_test.go), and the s5cmd binary that `make s5cmd`
// builds and `make test` names in HUBPROXY_S5CMD (s5cmd_test.go).
//
// Running it needs node (>= 20) on PATH; node_modules is installed with
// `npm ci` on first use when it is missing.
package e2e
