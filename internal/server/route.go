package server

import (
	"github.com/hubproxy/hubproxy/internal/hub"
)

// Routing follows docs/hub-protocol.md §0: work on the *escaped* path, split on the
// literal markers, and only then unescape, so that "refs%2Fpr%2F1" and "%2F" in
// tree sub-paths stay unambiguous. Repo ids are never found by counting
// segments: "gpt2" and "org/name" are both valid.

// errNoRoute means the URL is not one of ours; the caller answers 404.
var errNoRoute = hub.ErrNoRoute
