package hub

import (
	"net/url"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"
)

// TensorKind is which tensor route a URL names.
type TensorKind int

const (
	TensorList   TensorKind = iota // /models/{repo}/tensors: every tensor, from headers only
	TensorOne                      // /models/{repo}/tensors/{name}: one tensor's bytes
	TensorSubset                   // /models/{repo}/safetensors: a file of just some tensors
)

// MaxTensorName bounds tensor names taken from URLs.
const MaxTensorName = 1024

// TensorURL is a parsed tensor-API URL. Its FileRef is what the tensor
// service reads: Rev is "main" when the query names none, and Path, from
// the query's "file", is the safetensors file or index to use, or "" to
// let the service find the repo's own.
type TensorURL struct {
	FileRef
	Kind TensorKind
	Name string // TensorOne's tensor name, unescaped
}

// ParseTensorURL parses the escaped path and the query of a tensor-API URL
// (the routes under /models/ that end in /tensors, /tensors/{name} or
// /safetensors). ErrNoRoute means it is not one: the path may still be a
// file of a model whose namespace is "models". Like the file routes it
// works on the escaped path and splits on the route's markers before
// unescaping anything.
func ParseTensorURL(escaped string, q url.Values) (TensorURL, error) {
	p, ok := strings.CutPrefix(escaped, "/models/")
	if !ok {
		return TensorURL{}, ErrNoRoute
	}
	var tu TensorURL
	var repoEsc, nameEsc string
	switch {
	case strings.HasSuffix(p, "/tensors"):
		repoEsc, tu.Kind = strings.TrimSuffix(p, "/tensors"), TensorList
	case strings.HasSuffix(p, "/safetensors"):
		repoEsc, tu.Kind = strings.TrimSuffix(p, "/safetensors"), TensorSubset
	case strings.Contains(p, "/tensors/"):
		repoEsc, nameEsc, _ = strings.Cut(p, "/tensors/")
		tu.Kind = TensorOne
	default:
		return TensorURL{}, ErrNoRoute
	}
	repo, err := ParseEscapedRepo(Model, repoEsc)
	if err != nil {
		return TensorURL{}, err
	}
	tu.Repo = repo
	if err := knownParams(q, tensorParams[tu.Kind]); err != nil {
		return TensorURL{}, err
	}
	if tu.Kind == TensorOne {
		if tu.Name, err = Unescape("tensor name", nameEsc); err != nil {
			return TensorURL{}, err
		}
		if tu.Name == "" || len(tu.Name) > MaxTensorName || !utf8.ValidString(tu.Name) ||
			strings.ContainsFunc(tu.Name, func(c rune) bool { return c < 0x20 || c == 0x7f }) {
			return TensorURL{}, &InvalidError{Field: "tensor name", Value: tu.Name, Reason: "must be 1 to 1024 bytes of UTF-8 without control characters"}
		}
	}
	if tu.Rev = q.Get("revision"); tu.Rev == "" {
		tu.Rev = "main"
	}
	if err := ValidRevision(tu.Rev); err != nil {
		return TensorURL{}, err
	}
	if tu.Path = q.Get("file"); tu.Path != "" {
		if err := ValidPath(tu.Path); err != nil {
			return TensorURL{}, err
		}
		// Anything else is the caller's mistake, not a broken file
		// upstream: config.json read as safetensors would otherwise be
		// answered 502 InvalidSafetensors.
		if !strings.HasSuffix(tu.Path, ".safetensors") && !strings.HasSuffix(tu.Path, ".safetensors.index.json") {
			return TensorURL{}, &InvalidError{Field: "file", Value: tu.Path, Reason: "must be a .safetensors file or a .safetensors.index.json index"}
		}
	}
	return tu, nil
}

// tensorParams are the query parameters each tensor route takes
// (api/openapi.yaml).
var tensorParams = map[TensorKind][]string{
	TensorList:   {"revision", "file"},
	TensorOne:    {"revision", "file", "shard", "slice"},
	TensorSubset: {"revision", "file", "name", "prefix"},
}

// knownParams refuses query parameters a tensor route does not take. These
// routes are hubproxy's own, so a typo is a client bug worth an answer:
// ?shards=0:0/4 ignored would serve the whole tensor, world times the bytes
// the loader expects. The Hub's own routes (resolve, raw, /api/) never get
// this check: the Hub ignores unknown parameters there and real clients
// send some (?download=true), so hubproxy must too.
func knownParams(q url.Values, known []string) error {
	var unknown []string
	for k := range q {
		if !slices.Contains(known, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	sort.Strings(unknown)
	field := "query parameter"
	if len(unknown) > 1 {
		field += "s"
	}
	reason := "this route takes only " + strings.Join(known, ", ")
	for _, u := range unknown {
		if m := closest(u, known); m != "" {
			reason += "; did you mean " + m + " for " + u + "?"
		}
	}
	return &InvalidError{Field: field, Value: strings.Join(unknown, ", "), Reason: reason}
}

// closest is the name in known within two edits of s (case ignored), or "".
func closest(s string, known []string) string {
	best, bestD := "", 3
	for _, k := range known {
		if d := editDistance(strings.ToLower(s), k); d < bestD {
			best, bestD = k, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b, in bytes; the
// names compared are short ASCII words, and a long one only costs time
// proportional to its length times a known name's.
func editDistance(a, b string) int {
	if len(a) > 64 {
		return len(a) // no typo of a short name
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// PassThroughRepo finds the repo an /api/ path that no route of ours knows
// names, if any: /api/{models,datasets,spaces}/{ns}/{name}/… . Best effort,
// and read as a two-segment id (admission also checks the one-segment
// reading against deny patterns).
func PassThroughRepo(escaped string) (Repo, bool) {
	rest, ok := strings.CutPrefix(escaped, "/api/")
	if !ok {
		return Repo{}, false
	}
	segs := strings.SplitN(rest, "/", 4)
	if len(segs) < 3 {
		return Repo{}, false
	}
	typ, ok := ParseRepoType(segs[0])
	if !ok {
		return Repo{}, false
	}
	if repo, err := ParseEscapedRepo(typ, segs[1]+"/"+segs[2]); err == nil {
		return repo, true
	}
	return Repo{}, false
}
