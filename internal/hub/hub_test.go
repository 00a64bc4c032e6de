package hub

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
)

func TestParseRepo(t *testing.T) {
	ok := []string{"gpt2", "org/name", "Org-1/my_model.v2", "a/b", "bert-base-uncased"}
	for _, id := range ok {
		if _, err := ParseRepo(Model, id); err != nil {
			t.Errorf("ParseRepo(%q): %v", id, err)
		}
	}
	bad := []string{"", "/", "a/", "/a", "a/b/c", "../x", "a/..", "a--b/c", "a/b..c", ".a/b", "a/b.", "-a/b",
		"a b/c", "a/b\x00", strings.Repeat("x", 97), "a/" + strings.Repeat("y", 97), "a\\b"}
	for _, id := range bad {
		_, err := ParseRepo(Model, id)
		var inv *InvalidError
		if !errors.As(err, &inv) {
			t.Errorf("ParseRepo(%q) = %v, want *InvalidError", id, err)
		}
	}
	if _, err := ParseRepo("widget", "a/b"); err == nil {
		t.Error("unknown repo type accepted")
	}
}

func TestRepoNames(t *testing.T) {
	r := MustRepo(Dataset, "org/ds")
	if r.CacheDir() != "datasets--org--ds" || r.String() != "datasets/org/ds" || r.Type().Plural() != "datasets" {
		t.Errorf("names: %s %s %s", r.CacheDir(), r.String(), r.Type().Plural())
	}
	if m := (MustRepo(Model, "gpt2")); m.CacheDir() != "models--gpt2" || m.String() != "gpt2" {
		t.Errorf("model names: %s %s", m.CacheDir(), m.String())
	}
}

func TestValidRevision(t *testing.T) {
	for _, rev := range []string{"main", "v1.0", "refs/pr/1", "refs/convert/parquet", "0123456789abcdef0123456789abcdef01234567", "feature/x-y_z"} {
		if err := ValidRevision(rev); err != nil {
			t.Errorf("ValidRevision(%q): %v", rev, err)
		}
	}
	for _, rev := range []string{"", "..", "../main", "a/../b", "/main", "main/", "a//b", ".hidden", "x.lock", "a\x00b", "a b", "a:b", "-rf", strings.Repeat("r", MaxRevisionLen+1), "a\\b"} {
		if err := ValidRevision(rev); err == nil {
			t.Errorf("ValidRevision(%q) accepted", rev)
		}
	}
}

func TestValidPath(t *testing.T) {
	for _, p := range []string{"config.json", "a/b/c.safetensors", "dir x/fé.txt", ".gitattributes", "a/.hidden"} {
		if err := ValidPath(p); err != nil {
			t.Errorf("ValidPath(%q): %v", p, err)
		}
	}
	for _, p := range []string{"", "/etc/passwd", "../x", "a/../b", "a/./b", "a//b", "a/", "a\x00b", "a\\b", "a\nb", strings.Repeat("x", 256), strings.Repeat("a/", MaxPathLen)} {
		if err := ValidPath(p); err == nil {
			t.Errorf("ValidPath(%q) accepted", p)
		}
	}
}

func TestETags(t *testing.T) {
	sha := strings.Repeat("ab", 32)
	for in, want := range map[string]string{`"` + sha + `"`: sha, `W/"abc"`: "abc", ` "x" `: "x", "plain": "plain"} {
		if got := NormalizeETag(in); got != want {
			t.Errorf("NormalizeETag(%q) = %q, want %q", in, got, want)
		}
	}
	for etag, want := range map[string]HashKind{
		sha: HashSHA256, strings.Repeat("a1", 20): HashGitSHA1, "ABCDEF": HashUnknown, "../../x": HashUnknown,
		strings.ToUpper(sha): HashUnknown, sha + "-1": HashUnknown,
	} {
		if got := ETagKind(etag); got != want {
			t.Errorf("ETagKind(%q) = %v, want %v", etag, got, want)
		}
	}
	if !IsCommit(strings.Repeat("0f", 20)) || IsCommit("main") {
		t.Error("IsCommit")
	}
}

func TestContentIdentities(t *testing.T) {
	// git hash-object of "hello\n" and of the empty file.
	if got := GitBlobSHA1([]byte("hello\n")); got != "ce013625030ba8dba906f756967f9e9ca394464a" {
		t.Errorf("GitBlobSHA1(hello) = %s", got)
	}
	if got := GitBlobSHA1(nil); got != "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391" {
		t.Errorf("GitBlobSHA1(empty) = %s", got)
	}
	ptr := string(LFSPointer(strings.Repeat("a", 64), 42))
	if ptr != "version https://git-lfs.github.com/spec/v1\noid sha256:"+strings.Repeat("a", 64)+"\nsize 42\n" {
		t.Errorf("pointer %q", ptr)
	}
	sum, err := HashContent(context.Background(), strings.NewReader("hello\n"), HashGitSHA1, 6)
	if err != nil || sum != "ce013625030ba8dba906f756967f9e9ca394464a" {
		t.Errorf("HashContent = %s, %v", sum, err)
	}
	if _, err := HashContent(context.Background(), strings.NewReader("hi"), HashSHA256, 3); err != io.ErrUnexpectedEOF {
		t.Errorf("short content: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := HashContent(ctx, strings.NewReader("hi"), HashSHA256, 2); err == nil {
		t.Error("a cancelled hash finished")
	}
}
