package hub

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

func TestCallerID(t *testing.T) {
	for _, auth := range []string{"", "Bearer hf_secret", "Basic dXNlcjpwYXNz"} {
		h := sha256.Sum256([]byte(auth))
		want := hex.EncodeToString(h[:])
		c := NewCaller(auth)
		if c.ID() != want {
			t.Errorf("NewCaller(%q).ID() = %s, want %s", auth, c.ID(), want)
		}
		if c.Auth() != auth || c.Anonymous() != (auth == "") {
			t.Errorf("NewCaller(%q): Auth %q, Anonymous %v", auth, c.Auth(), c.Anonymous())
		}
	}
	// Keys persisted by earlier versions hold this very hash of "".
	if got := (Caller{}).ID(); got != "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" {
		t.Errorf("anonymous ID = %s", got)
	}
}

func TestZeroCallerIsAnonymous(t *testing.T) {
	var zero Caller
	anon := NewCaller("")
	if zero != anon {
		t.Fatalf("Caller{} = %#v, NewCaller(\"\") = %#v: not equal", zero, anon)
	}
	if !zero.Anonymous() || zero.Auth() != "" || zero.ID() != anon.ID() || zero.String() != "anonymous" {
		t.Errorf("zero Caller: Anonymous %v, Auth %q, ID %s, String %s", zero.Anonymous(), zero.Auth(), zero.ID(), zero)
	}
	if NewCaller("Bearer a") == zero || NewCaller("Bearer a") != NewCaller("Bearer a") || NewCaller("Bearer a") == NewCaller("Bearer b") {
		t.Error("Callers compare other than by credential")
	}
}

// No way of printing or logging a Caller shows its credential.
func TestCallerNeverShowsToken(t *testing.T) {
	const token = "hf_verysecrettoken"
	c := NewCaller("Bearer " + token)
	want := "token:" + c.ID()[:8]
	if c.String() != want {
		t.Errorf("String() = %q, want %q", c.String(), want)
	}
	var logged bytes.Buffer
	slog.New(slog.NewTextHandler(&logged, nil)).Info("x", "caller", c)
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("x", "caller", c)
	for _, s := range []string{
		c.String(), c.GoString(), fmt.Sprint(c), fmt.Sprintf("%v %+v %#v %s %q", c, c, c, c, c),
		fmt.Sprintf("%v %+v", struct{ C Caller }{c}, &struct{ C Caller }{c}), logged.String(),
	} {
		if strings.Contains(s, token) {
			t.Errorf("%q shows the token", s)
		}
	}
	if !strings.Contains(logged.String(), want) {
		t.Errorf("log %q does not name the caller as %s", logged.String(), want)
	}
}

func TestFileRef(t *testing.T) {
	f := FileRef{Repo: MustRepo(Dataset, "org/ds"), Rev: "main", Path: "data/x.parquet"}
	if got := f.String(); got != "datasets/org/ds@main:data/x.parquet" {
		t.Errorf("String() = %q", got)
	}
	const commit = "0123456789abcdef0123456789abcdef01234567"
	pinned := f.At(commit)
	if pinned.Rev != commit || pinned.Repo != f.Repo || pinned.Path != f.Path || f.Rev != "main" {
		t.Errorf("At: %v from %v", pinned, f)
	}
	fu, err := ParseFileURL("/datasets/org/ds/resolve/main/data/x.parquet")
	if err != nil || fu.FileRef != f {
		t.Errorf("ParseFileURL: %+v, %v; want %v", fu.FileRef, err, f)
	}
}
