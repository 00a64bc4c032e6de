package cache

import (
	"context"
	"errors"
	"io"
	"os"
	"testing"

	"github.com/hubproxy/hubproxy/internal/hub"
)

// readAll reads [0, size) of h sequentially and returns the first error.
func readAll(h *Handle) error {
	buf := make([]byte, 32<<10)
	for pos := int64(0); pos < h.Size(); {
		n, err := h.ReadAt(buf, pos)
		pos += int64(n)
		if err != nil && !(errors.Is(err, io.EOF) && pos == h.Size()) {
			return err
		}
	}
	return nil
}

// A corrupt upstream file is never promoted: the full read ends in
// *VerifyError, the partial is deleted, and a later Open refetches it.
func TestCorruptUpstreamNeverPromoted(t *testing.T) {
	data := genData(2<<20+7, 9)
	bad := 1<<20 + 5
	o := &fakeOrigin{data: data, wrap: corruptAt(int64(bad))}
	s := newStore(t, Options{ChunkSize: 512 << 10})
	f := fileFor("a.bin", data)

	// A ranged reader that reads only the head, before verification.
	ranged, err := s.Open(context.Background(), f, o)
	if err != nil {
		t.Fatal(err)
	}
	defer ranged.Close()
	if err := readSeq(ranged, 0, 1000, 1000, data); err != nil {
		t.Fatal(err)
	}

	h, err := s.Open(context.Background(), f, o)
	if err != nil {
		t.Fatal(err)
	}
	h.Expect(0, f.Size)
	err = readAll(h)
	corrupt := append([]byte(nil), data...)
	corrupt[bad] ^= 0xff
	var ve *VerifyError
	if !errors.As(err, &ve) || ve.ETag != f.ETag || ve.Got != sha256Hex(corrupt) {
		t.Fatalf("full read of a corrupt file: err = %v, want *VerifyError{%s, %s}", err, f.ETag, sha256Hex(corrupt))
	}
	h.Close()
	if _, err := ranged.ReadAt(make([]byte, 10), 0); !errors.As(err, &ve) {
		t.Errorf("read of a failed file: err = %v, want *VerifyError", err)
	}

	if st := s.Stats(); st.VerifyFailures != 1 || st.Blobs != 0 || st.Partials != 0 || st.Promotions != 0 {
		t.Errorf("Stats = %+v, want one verify failure and nothing stored", st)
	}
	for _, name := range []string{
		s.paths.blob(testRepo, f.ETag),
		s.paths.partialData(testRepo, f.ETag),
		s.paths.sidecar(testRepo, f.ETag),
		s.paths.snapshot(testRepo, testCommit, f.Path),
	} {
		if _, err := os.Lstat(name); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s exists after a verify failure (err %v)", name, err)
		}
	}
	if _, _, err := s.Stat(testRepo, testCommit, f.Path); !errors.Is(err, ErrNotCached) {
		t.Errorf("Stat = %v, want ErrNotCached", err)
	}

	// The upstream is fixed: a new Open fetches again and succeeds.
	o.wrap = nil
	before := o.bytes.Load()
	openRead(t, s, f, o)
	if got := o.bytes.Load() - before; got != f.Size {
		t.Errorf("refetch cost %d bytes, want %d", got, f.Size)
	}
	if st := s.Stats(); st.Promotions != 1 || st.Blobs != 1 {
		t.Errorf("Stats = %+v, want the refetched file promoted", st)
	}
}

// Small (non-LFS) files are verified by their git blob sha1.
func TestGitSHA1ETag(t *testing.T) {
	data := []byte(`{"architectures": ["Test"]}` + "\n")
	s := newStore(t, Options{})
	f := File{Repo: testRepo, Commit: testCommit, Path: "config.json", ETag: gitSHA1Hex(data), Size: int64(len(data))}
	openRead(t, s, f, &fakeOrigin{data: data})
	if st := s.Stats(); st.Promotions != 1 {
		t.Fatalf("Stats = %+v, want a promotion", st)
	}

	other := append([]byte(nil), data...)
	other[0] = '['
	f2 := File{Repo: testRepo, Commit: testCommit, Path: "other.json", ETag: gitSHA1Hex(other), Size: int64(len(data))}
	h, err := s.Open(context.Background(), f2, &fakeOrigin{data: data})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	var ve *VerifyError
	if err := readAll(h); !errors.As(err, &ve) || ve.Got != gitSHA1Hex(data) {
		t.Fatalf("err = %v, want *VerifyError with the git sha1 of the served bytes", err)
	}
}

// A zero-byte file is complete at once, after checking its etag is the hash
// of nothing.
func TestEmptyFile(t *testing.T) {
	s := newStore(t, Options{})
	for _, etag := range []string{sha256Hex(nil), gitSHA1Hex(nil)} {
		f := File{Repo: testRepo, Commit: testCommit, Path: "empty-" + etag[:4], ETag: etag}
		h, err := s.Open(context.Background(), f, &fakeOrigin{})
		if err != nil {
			t.Fatal(err)
		}
		if !h.Complete() || h.Size() != 0 {
			t.Errorf("empty file: Complete %v Size %d", h.Complete(), h.Size())
		}
		if n, err := h.ReadAt(make([]byte, 1), 0); n != 0 || err != io.EOF {
			t.Errorf("ReadAt = %d, %v; want 0, EOF", n, err)
		}
		h.Close()
		if got, complete, err := s.Stat(testRepo, testCommit, f.Path); err != nil || !complete || got.ETag != etag {
			t.Errorf("Stat = %+v, %v, %v", got, complete, err)
		}
	}
	f := File{Repo: testRepo, Commit: testCommit, Path: "x", ETag: sha256Hex([]byte("x"))}
	var ve *VerifyError
	if _, err := s.Open(context.Background(), f, &fakeOrigin{}); !errors.As(err, &ve) {
		t.Errorf("empty file with a non-empty etag: err = %v, want *VerifyError", err)
	}
}

// Open refuses identifiers that could escape the tree or cannot be verified.
func TestOpenRejectsHostileFiles(t *testing.T) {
	s := newStore(t, Options{})
	good := fileFor("a.bin", []byte("abc"))
	var inv *hub.InvalidError
	tests := []struct {
		name  string
		edit  func(*File)
		check func(error) bool
	}{
		{"dotdot path", func(f *File) { f.Path = "../../etc/passwd" }, func(err error) bool { return errors.As(err, &inv) }},
		{"absolute path", func(f *File) { f.Path = "/etc/passwd" }, func(err error) bool { return errors.As(err, &inv) }},
		{"no repo", func(f *File) { f.Repo = hub.Repo{} }, func(err error) bool { return errors.As(err, &inv) }},
		{"bad commit", func(f *File) { f.Commit = "main" }, func(err error) bool { return errors.As(err, &inv) }},
		{"etag path", func(f *File) { f.ETag = "../../x" }, func(err error) bool { return errors.Is(err, ErrUncacheable) }},
		{"xet etag", func(f *File) { f.ETag = "abc123" }, func(err error) bool { return errors.Is(err, ErrUncacheable) }},
		{"negative size", func(f *File) { f.Size = -1 }, func(err error) bool { return errors.Is(err, ErrUncacheable) }},
	}
	for _, tt := range tests {
		f := good
		tt.edit(&f)
		h, err := s.Open(context.Background(), f, &fakeOrigin{})
		if err == nil {
			h.Close()
		}
		if !tt.check(err) {
			t.Errorf("%s: Open error = %v", tt.name, err)
		}
	}

	// The same etag with another size is inconsistent: serve it uncached.
	h, err := s.Open(context.Background(), good, &fakeOrigin{data: []byte("abc")})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	f := good
	f.Size = 4
	if _, err := s.Open(context.Background(), f, &fakeOrigin{}); !errors.Is(err, ErrUncacheable) {
		t.Errorf("size mismatch: err = %v, want ErrUncacheable", err)
	}
}
