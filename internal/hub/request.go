package hub

import (
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
)

// FileRef names one file of a repo at a revision: what every file request,
// and every layer under it, is about. Rev is a branch, tag or commit as the
// caller wrote it until something pins it to a commit (At). The parsers
// (ParseFileURL, ParseTensorURL) produce it validated; code that builds one
// by hand must validate Rev and Path itself.
type FileRef struct {
	Repo Repo
	Rev  string
	Path string
}

// String is "ns/name@rev:path" (with the repo's type prefix, as Repo.String
// writes it), for logs and errors.
func (f FileRef) String() string { return f.Repo.String() + "@" + f.Rev + ":" + f.Path }

// At is the same file at revision rev: how a file resolved at a branch is
// pinned to the commit it resolved to, so a branch that moves meanwhile
// cannot swap the bytes read next.
func (f FileRef) At(rev string) FileRef {
	f.Rev = rev
	return f
}

// Caller is who asks: the credential a request came with, as its
// Authorization header carries it, and a hash of it computed once. What
// upstream answers (and whether it answers at all) depends on who asks, so
// everything kept from an answer is kept per caller, under ID, and never
// under the credential itself.
//
// The zero Caller is the anonymous one, equal to NewCaller(""). Caller is a
// comparable value: two Callers are equal exactly when their credentials
// are. String and LogValue name it without its credential, but fmt's %v of
// a struct that holds a Caller in an unexported field still prints the
// credential: log the Caller itself, not what holds it.
type Caller struct {
	auth string
	id   string // hex sha256 of auth; "" for the anonymous caller (ID fills it in)
}

// anonymousID is the ID of the anonymous caller: the sha256 of "" (a test
// checks it against credentialID("")).
const anonymousID = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

func credentialID(auth string) string {
	h := sha256.Sum256([]byte(auth))
	return hex.EncodeToString(h[:])
}

// NewCaller is the caller whose Authorization header value is auth ("" for
// none: the anonymous caller, the zero Caller).
func NewCaller(auth string) Caller {
	if auth == "" {
		return Caller{}
	}
	return Caller{auth: auth, id: credentialID(auth)}
}

// Auth is the raw Authorization value, to forward upstream with the
// requests made for this caller; nothing else should need it.
func (c Caller) Auth() string { return c.auth }

// ID identifies the caller without its credential: the hex sha256 of the
// Authorization value, whole (it decides who may have what, so nothing is
// truncated to collide with). Keys persisted by earlier versions were made
// with this very hash, so it must not change.
func (c Caller) ID() string {
	if c.id == "" {
		return anonymousID
	}
	return c.id
}

// Anonymous reports whether the caller sent no credential.
func (c Caller) Anonymous() bool { return c.auth == "" }

// String names the caller in logs and errors: "anonymous", or "token:"
// and the first 8 hex digits of ID. It never holds the credential.
func (c Caller) String() string {
	if c.Anonymous() {
		return "anonymous"
	}
	return "token:" + c.ID()[:8]
}

// GoString keeps %#v from printing the credential too.
func (c Caller) GoString() string { return "hub.Caller(" + c.String() + ")" }

// LogValue is String, for log/slog.
func (c Caller) LogValue() slog.Value { return slog.StringValue(c.String()) }
