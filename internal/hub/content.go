package hub

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"io"
)

// LFSPointer is the text git stores in place of an LFS file's content: what
// /raw/ answers for it, and what its git oid is the hash of.
func LFSPointer(sha256 string, size int64) []byte {
	return fmt.Appendf(nil, "version https://git-lfs.github.com/spec/v1\noid sha256:%s\nsize %d\n", sha256, size)
}

// GitBlobSHA1 is git's object id of content: sha1("blob <size>\x00" + content).
func GitBlobSHA1(content []byte) string {
	h := sha1.New()
	fmt.Fprintf(h, "blob %d\x00", len(content))
	h.Write(content)
	return hex.EncodeToString(h.Sum(nil))
}

// HashContent reads size bytes from r and returns their ETag of kind (see
// NewHash). It stops when ctx ends, so hashing a large file can be
// abandoned, and fails with io.ErrUnexpectedEOF if r holds fewer bytes.
func HashContent(ctx context.Context, r io.Reader, kind HashKind, size int64) (string, error) {
	h := NewHash(kind, size)
	n, err := io.Copy(h, ctxReader{ctx: ctx, r: io.LimitReader(r, size)})
	if err != nil {
		return "", err
	}
	if n != size {
		return "", io.ErrUnexpectedEOF
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// ctxReader stops a long read when ctx ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
