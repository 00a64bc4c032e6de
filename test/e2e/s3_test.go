package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/hubproxy/hubproxy/internal/apptest"
	"github.com/hubproxy/hubproxy/internal/hubtest"
)

// The fake hub's tokens for the S3 tests: only s3Granted may read the gated repo.
const (
	s3Granted = "hf_s3_granted"
	s3Denied  = "hf_s3_denied"
)

// s3Expect is what s3client.mjs must see (E2E_S3_EXPECT).
type s3Expect struct {
	Bucket       string    `json:"bucket"`
	Prefix       string    `json:"prefix"`
	MaxKeys      int       `json:"maxKeys"`
	Files        []s3File  `json:"files"`
	Ranges       []s3Range `json:"ranges"`
	Gated        s3File    `json:"gated"`
	GrantedToken string    `json:"grantedToken"`
	DeniedToken  string    `json:"deniedToken"`
}

type s3File struct {
	Key    string `json:"key"`
	Size   int    `json:"size"`
	SHA256 string `json:"sha256"`
}

type s3Range struct {
	Key    string `json:"key"`
	Start  int    `json:"start"`
	End    int    `json:"end"`  // inclusive, as in a Range header
	Size   int    `json:"size"` // the whole file's
	SHA256 string `json:"sha256"`
}

// s3Repo is the model repo the S3 clients read: nested folders, LFS and
// plain files, one larger than a few cache blocks.
func s3Repo() []hubtest.File {
	lfs := true
	return []hubtest.File{
		{Path: "config.json", Data: []byte(`{"model_type":"llama"}`)},
		{Path: "README.md", Data: []byte("# a model\n")},
		{Path: "tokenizer/tokenizer.json", Data: hubtest.RandomBytes(11, 5000)},
		{Path: "tokenizer/special/map.json", Data: []byte(`{"bos":"<s>"}`)},
		{Path: "weights/model-00001-of-00002.safetensors", Data: hubtest.RandomBytes(12, 300<<10), LFS: &lfs},
		{Path: "weights/model-00002-of-00002.safetensors", Data: hubtest.RandomBytes(13, 1<<20+17), LFS: &lfs},
		{Path: "weights/index.json", Data: []byte(`{"weight_map":{}}`)},
	}
}

// newS3Env is a fake hub holding org/s3model and the gated org/s3gated, and
// a hubproxy over it with its S3 listener.
func newS3Env(t *testing.T) (*apptest.Env, []hubtest.File, hubtest.File) {
	t.Helper()
	e := apptest.New(t, hubtest.Options{PageSize: 3}, nil)
	files := s3Repo()
	e.Hub.AddRepo(hubtest.RepoSpec{ID: "org/s3model", Files: files})
	gated := hubtest.File{Path: "model.safetensors", Data: hubtest.RandomBytes(14, 200<<10)}
	e.Hub.AddRepo(hubtest.RepoSpec{ID: "org/s3gated", Gated: true, ApprovedTokens: []string{s3Granted},
		Files: []hubtest.File{gated}})
	return e, files, gated
}

// TestS3JSClient runs the published @aws-sdk/client-s3 against hubproxy's
// S3 API (s3client.mjs checks what it gets), then checks that the file
// bytes came from upstream at most once.
func TestS3JSClient(t *testing.T) {
	node := requireNode(t)
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	ensureNodeModules(ctx, t, dir)
	e, files, gated := newS3Env(t)

	exp := s3Expect{Bucket: "models", Prefix: "org/s3model/", MaxKeys: 2, GrantedToken: s3Granted, DeniedToken: s3Denied,
		Gated: s3File{Key: "org/s3gated/" + gated.Path, Size: len(gated.Data), SHA256: sha256Hex(gated.Data)}}
	for _, f := range files {
		exp.Files = append(exp.Files, s3File{Key: exp.Prefix + f.Path, Size: len(f.Data), SHA256: sha256Hex(f.Data)})
	}
	big := files[5]
	for _, r := range [][2]int{{0, 0}, {100, 70000}, {len(big.Data) - 1000, len(big.Data) - 1}, {65536, 65536 + 8<<10 - 1}} {
		exp.Ranges = append(exp.Ranges, s3Range{Key: exp.Prefix + big.Path, Start: r[0], End: r[1],
			Size: len(big.Data), SHA256: sha256Hex(big.Data[r[0] : r[1]+1])})
	}
	expectPath := filepath.Join(t.TempDir(), "s3expect.json")
	b, err := json.Marshal(exp)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(expectPath, b, 0o600); err != nil {
		t.Fatal(err)
	}

	e.Hub.ResetCounters()
	ctx, cancel := context.WithTimeoutCause(ctx, clientTimeout, fmt.Errorf("s3client.mjs ran longer than %v", clientTimeout))
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "s3client.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "HUBPROXY_S3_URL="+e.S3.URL, "E2E_S3_EXPECT="+expectPath)
	start := time.Now()
	if err := runStreaming(ctx, t, cmd, "node"); err != nil {
		t.Fatalf("s3client.mjs failed after %v: %v (its output is above)", time.Since(start).Round(time.Millisecond), err)
	}
	// Every file was read whole at least once, and the cache served the
	// rest: no file's bytes came from upstream more than once.
	c := e.Hub.Counters()
	for _, f := range files {
		if got := c.BytesByPath["org/s3model/"+f.Path]; got != int64(len(f.Data)) {
			t.Errorf("%s: %d bytes upstream; want its %d bytes once", f.Path, got, len(f.Data))
		}
	}
	if c.AuthSeenByCDN != 0 || c.AuthSeenByForeign != 0 {
		t.Errorf("credentials leaked to the CDN (%d) or a foreign host (%d)", c.AuthSeenByCDN, c.AuthSeenByForeign)
	}
}
