package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hubproxy/hubproxy/internal/hubtest"
)

// s5cmdBinary is the s5cmd that `make s5cmd` builds into .tools/ and
// `make test` names in HUBPROXY_S5CMD. It is no module dependency: its
// go.mod's replace directives keep `go install` from building it.
func s5cmdBinary(t *testing.T) string {
	t.Helper()
	p := os.Getenv("HUBPROXY_S5CMD")
	if p == "" {
		t.Skip("HUBPROXY_S5CMD is not set; `make test` builds s5cmd (make s5cmd) and sets it")
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("HUBPROXY_S5CMD=%s: %v", p, err)
	}
	return p
}

// s5cmd runs the s5cmd binary against the S3 listener with args, in an
// environment of its own (no ~/.aws, no instance metadata) plus env, and
// returns its stdout and stderr.
func s5cmd(t *testing.T, bin, endpoint string, env []string, args ...string) (string, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{"--endpoint-url", endpoint, "--json", "--numworkers", "4"}, args...)...)
	home := t.TempDir()
	cmd.Env = append([]string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "AWS_REGION=us-east-1",
		"AWS_EC2_METADATA_DISABLED=true", "AWS_CONFIG_FILE=" + filepath.Join(home, "none"),
		"AWS_SHARED_CREDENTIALS_FILE=" + filepath.Join(home, "none")}, env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.String(), stderr.String(), err
}

// treeOf is every file under dir, by its slash-separated path, with its bytes.
func treeOf(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		b, err := os.ReadFile(p)
		out[filepath.ToSlash(rel)] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestS5cmd drives s5cmd, unchanged, against the S3 API: `ls` of a whole
// repo prefix lists every file of its nested folders with its size, and
// `cp` of it downloads every file, byte for byte the hub's; a gated repo is
// refused to an unsigned s5cmd and copied for a granted token.
func TestS5cmd(t *testing.T) {
	bin := s5cmdBinary(t)
	e, files, gated := newS3Env(t)
	anon := []string{}

	// ls: one JSON line per object.
	stdout, stderr, err := s5cmd(t, bin, e.S3.URL, anon, "--no-sign-request", "ls", "s3://models/org/s3model/*")
	if err != nil {
		t.Fatalf("s5cmd ls: %v\n%s%s", err, stdout, stderr)
	}
	var got, want []string
	sc := bufio.NewScanner(strings.NewReader(stdout))
	for sc.Scan() {
		var line struct {
			Key  string `json:"key"`
			Size int    `json:"size"`
			Type string `json:"type"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("s5cmd ls line %q: %v", sc.Text(), err)
		}
		got = append(got, line.Key+" "+strconv.Itoa(line.Size))
	}
	for _, f := range files {
		want = append(want, "s3://models/org/s3model/"+f.Path+" "+strconv.Itoa(len(f.Data)))
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("s5cmd ls:\n got %q\nwant %q\n(stderr %s)", got, want, stderr)
	}

	// cp of the whole prefix.
	dst := t.TempDir()
	stdout, stderr, err = s5cmd(t, bin, e.S3.URL, anon, "--no-sign-request", "cp", "s3://models/org/s3model/*", dst+"/")
	if err != nil {
		t.Fatalf("s5cmd cp: %v\n%s%s", err, stdout, stderr)
	}
	checkTree(t, "s5cmd cp", treeOf(t, dst), files)

	// The gated repo: unsigned, refused, nothing written.
	refused := t.TempDir()
	stdout, stderr, err = s5cmd(t, bin, e.S3.URL, anon, "--no-sign-request", "cp", "s3://models/org/s3gated/*", refused+"/")
	if err == nil || !strings.Contains(stdout+stderr, "AccessDenied") {
		t.Errorf("s5cmd cp of a gated repo, unsigned: %v; want an AccessDenied failure\n%s%s", err, stdout, stderr)
	}
	if tree := treeOf(t, refused); len(tree) != 0 {
		t.Errorf("the refused cp wrote %d files", len(tree))
	}
	// Signed with the granted token as its access key id: copied.
	grantedDst := t.TempDir()
	creds := []string{"AWS_ACCESS_KEY_ID=" + s3Granted, "AWS_SECRET_ACCESS_KEY=unused-secret"}
	stdout, stderr, err = s5cmd(t, bin, e.S3.URL, creds, "cp", "s3://models/org/s3gated/*", grantedDst+"/")
	if err != nil {
		t.Fatalf("s5cmd cp of a gated repo as the granted token: %v\n%s%s", err, stdout, stderr)
	}
	checkTree(t, "s5cmd cp as the granted token", treeOf(t, grantedDst), []hubtest.File{gated})
}

// checkTree fails unless tree holds exactly files, byte for byte.
func checkTree(t *testing.T, what string, tree map[string][]byte, files []hubtest.File) {
	t.Helper()
	for _, f := range files {
		b, ok := tree[f.Path]
		switch {
		case !ok:
			t.Errorf("%s: %s missing", what, f.Path)
		case !bytes.Equal(b, f.Data):
			t.Errorf("%s: %s is %d bytes (sha256 %s), want %d (%s)", what, f.Path, len(b), sha256Hex(b), len(f.Data), sha256Hex(f.Data))
		}
		delete(tree, f.Path)
	}
	for p := range tree {
		t.Errorf("%s: wrote %s, which the repo does not hold", what, p)
	}
}
