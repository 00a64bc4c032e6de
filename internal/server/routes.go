package server

// Route is one operation hubproxy serves on its main listener.
type Route struct {
	// Method is the HTTP method, upper case.
	Method string `json:"method"`
	// Pattern is the operation's path template exactly as api/openapi.yaml
	// writes it.
	Pattern string `json:"path"`
	// Example is a concrete URL (path, optionally with a query) that
	// exercises the operation.
	Example string `json:"example"`
}

// Routes is the routing contract: every operation on hubproxy's main
// listener, each with the OpenAPI path it is documented under.
//
// The chi router cannot say this by itself. Hub repo ids are "name" or
// "ns/name", revisions may arrive as the unencoded "refs/pr/N", and file
// paths span segments, so a path template with one-segment parameters cannot
// route them. The router therefore registers catch-alls (/api/*, /models/*
// and /*) and the handlers split the escaped path on the literal markers
// (/resolve/, /raw/, /revision/, /tree/, /paths-info/, /xet-read-token/,
// /tensors, /safetensors) as docs/hub-protocol.md §0 requires. This table is kept
// in step with api/openapi.yaml by internal/app/http_openapi_test.go, which also checks that
// every Example is answered by a handler rather than by "no such route".
// Data only: nothing routes from it.
var Routes = []Route{
	{"GET", "/", "/"},
	{"GET", "/openapi.yaml", "/openapi.yaml"},
	{"GET", "/healthz", "/healthz"},
	{"GET", "/readyz", "/readyz"},
	{"GET", "/metrics", "/metrics"},

	// Hub-compatible file routes (models have no prefix).
	{"GET", "/{repo}/resolve/{revision}/{path}", "/org/model/resolve/main/config.json"},
	{"HEAD", "/{repo}/resolve/{revision}/{path}", "/org/model/resolve/main/model.safetensors"},
	{"GET", "/{repo}/raw/{revision}/{path}", "/org/model/raw/main/config.json"},
	{"HEAD", "/{repo}/raw/{revision}/{path}", "/org/model/raw/main/model.safetensors"},
	{"GET", "/datasets/{repo}/resolve/{revision}/{path}", "/datasets/org/dataset/resolve/main/data/train.csv"},
	{"HEAD", "/datasets/{repo}/resolve/{revision}/{path}", "/datasets/org/dataset/resolve/main/data/train.csv"},
	{"GET", "/datasets/{repo}/raw/{revision}/{path}", "/datasets/org/dataset/raw/main/data/train.csv"},
	{"HEAD", "/datasets/{repo}/raw/{revision}/{path}", "/datasets/org/dataset/raw/main/data/train.csv"},
	{"GET", "/spaces/{repo}/resolve/{revision}/{path}", "/spaces/org/space/resolve/main/app.py"},
	{"HEAD", "/spaces/{repo}/resolve/{revision}/{path}", "/spaces/org/space/resolve/main/app.py"},
	{"GET", "/spaces/{repo}/raw/{revision}/{path}", "/spaces/org/space/raw/main/app.py"},
	{"HEAD", "/spaces/{repo}/raw/{revision}/{path}", "/spaces/org/space/raw/main/app.py"},

	// Hub JSON API: cached per caller and revision, Xet fields removed.
	{"GET", "/api/{repoType}/{repo}", "/api/models/org/model"},
	{"HEAD", "/api/{repoType}/{repo}", "/api/models/org/model"},
	{"GET", "/api/{repoType}/{repo}/revision/{revision}", "/api/models/org/model/revision/main?expand=siblings"},
	{"HEAD", "/api/{repoType}/{repo}/revision/{revision}", "/api/datasets/org/dataset/revision/main"},
	{"GET", "/api/{repoType}/{repo}/tree/{revision}", "/api/models/org/model/tree/main?recursive=true&expand=false"},
	{"HEAD", "/api/{repoType}/{repo}/tree/{revision}", "/api/spaces/org/space/tree/main"},
	{"GET", "/api/{repoType}/{repo}/tree/{revision}/{path}", "/api/datasets/org/dataset/tree/main/data"},
	{"HEAD", "/api/{repoType}/{repo}/tree/{revision}/{path}", "/api/datasets/org/dataset/tree/main/data"},
	{"POST", "/api/{repoType}/{repo}/paths-info/{revision}", "/api/models/org/model/paths-info/main"},
	{"GET", "/api/{repoType}/{repo}/xet-read-token/{revision}", "/api/models/org/model/xet-read-token/main"},

	// Any other /api/ request is relayed upstream uncached.
	{"GET", "/api/{upstreamPath}", "/api/resolve-cache/models/gpt2/main/config.json"},
	{"HEAD", "/api/{upstreamPath}", "/api/resolve-cache/models/gpt2/main/config.json"},
	{"POST", "/api/{upstreamPath}", "/api/repos/create"},
	{"PUT", "/api/{upstreamPath}", "/api/models/org/model/settings"},
	{"PATCH", "/api/{upstreamPath}", "/api/models/org/model/settings"},
	{"DELETE", "/api/{upstreamPath}", "/api/repos/delete"},

	// Tensor API (models only).
	{"GET", "/models/{repo}/tensors", "/models/org/model/tensors?revision=main"},
	{"HEAD", "/models/{repo}/tensors", "/models/org/model/tensors"},
	{"GET", "/models/{repo}/tensors/{name}", "/models/org/model/tensors/embed.weight?slice=0:2"},
	{"HEAD", "/models/{repo}/tensors/{name}", "/models/org/model/tensors/lm_head.weight?shard=0:1/2"},
	{"GET", "/models/{repo}/safetensors", "/models/org/model/safetensors?name=embed.weight&prefix=lm_"},
	{"HEAD", "/models/{repo}/safetensors", "/models/org/model/safetensors?prefix=embed"},
}
