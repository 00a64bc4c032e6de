package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hubproxy/hubproxy/internal/hubtest"
)

// debianPython is the interpreter with python3-boto3 (.ci/run installs
// it); a pyenv python3 on PATH has no boto3.
const debianPython = "/usr/bin/python3"

var s3ServingRE = regexp.MustCompile(`msg="S3 API serving" addr=(\S+)`)

// TestS3Boto3 runs `hubproxy serve --s3-listen` and drives its S3 API with
// boto3 (testdata/s3_boto3.py): the list paginator, head_object, ranged
// get_object and download_file's concurrent ranged transfer, every byte
// compared, and a gated repo refused and granted per token. The file
// download_file fetched in parts came from upstream once.
func TestS3Boto3(t *testing.T) {
	if _, err := os.Stat(debianPython); err != nil {
		t.Fatalf("%s is needed (apt-get install python3-boto3): %v", debianPython, err)
	}
	bin := buildBinary(t)
	h := hubtest.NewT(t, hubtest.Options{PageSize: 3})
	files := []hubtest.File{
		{Path: "config.json", Data: []byte(`{"model_type":"llama"}`)},
		{Path: "a/b/c.txt", Data: []byte("deep")},
		{Path: "weights/model-00001-of-00002.safetensors", Data: hubtest.RandomBytes(2, 300<<10)},
		{Path: "weights/model-00002-of-00002.safetensors", Data: hubtest.RandomBytes(3, 6<<20)},
		{Path: "with space/é.txt", Data: []byte("unicode")},
	}
	h.AddRepo(hubtest.RepoSpec{ID: "org/model", Files: files})
	gated := hubtest.RandomBytes(4, 200<<10)
	h.AddRepo(hubtest.RepoSpec{ID: "org/gated", Gated: true, ApprovedTokens: []string{"hf_granted"},
		Files: []hubtest.File{{Path: "model.safetensors", Data: gated}}})
	expect, work := t.TempDir(), t.TempDir()
	for _, f := range files {
		p := filepath.Join(expect, filepath.FromSlash(f.Path))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, f.Data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(work, "gated.bin"), gated, 0o644); err != nil {
		t.Fatal(err)
	}
	p := startServe(t, bin, nil, "--upstream", h.URL, "--cache-dir", t.TempDir(), "--cache-min-free-bytes", "0",
		"--admin-listen", "", "--s3-listen", "127.0.0.1:0")
	m := s3ServingRE.FindStringSubmatch(p.log())
	if m == nil {
		t.Fatalf("no S3 API serving line:\n%s", p.log())
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, debianPython, "testdata/s3_boto3.py", "http://"+m[1], "hf_granted", expect, work)
	cmd.Env = append(os.Environ(), "GRANTED_TOKEN=hf_granted", "DENIED_TOKEN=hf_denied",
		"AWS_EC2_METADATA_DISABLED=true", "AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null")
	out, err := cmd.Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("boto3: %v\n%s%s\nhubproxy:\n%s", err, out, stderr, p.log())
	}
	var rep struct {
		Listed, Pages                   int
		TransferRanges, TransferThreads int
	}
	line := strings.TrimSpace(string(out))
	if err := json.Unmarshal([]byte(line[strings.LastIndexByte(line, '\n')+1:]), &rep); err != nil {
		t.Fatalf("boto3 report %q: %v", out, err)
	}
	t.Logf("boto3: %+v", rep)
	if rep.Listed != len(files) || rep.Pages != (len(files)+1)/2 {
		t.Errorf("boto3 listed %d objects in %d pages", rep.Listed, rep.Pages)
	}
	// 6 MiB in 1 MiB parts: six ranged GETs, on more than one thread.
	if rep.TransferRanges < 6 || rep.TransferThreads < 2 {
		t.Errorf("download_file made %d ranged GETs on %d threads; want a concurrent ranged transfer", rep.TransferRanges, rep.TransferThreads)
	}
	big := "org/model/weights/model-00002-of-00002.safetensors"
	if got, size := h.Counters().BytesByPath[big], int64(6<<20); got != size {
		t.Errorf("upstream sent %d bytes of %s (%d bytes), read whole, ranged and by download_file: want each byte once", got, big, size)
	}
	// SIGTERM drains the S3 listener with the hub API's and exits 0.
	p.Signal(syscall.SIGTERM)
	select {
	case <-p.Done():
	case <-time.After(2 * time.Minute):
		t.Fatalf("no exit within 2 minutes of SIGTERM:\n%s", p.log())
	}
	if err := p.Err(); err != nil {
		t.Errorf("exit after SIGTERM: %v\n%s", err, p.log())
	}
}

// s3-listen is off by default and set alike by flag, variable and file;
// an address net.Listen would refuse stops the start, naming the key.
func TestS3ListenConfig(t *testing.T) {
	l, err := loadWith(t, "", nil)
	if err != nil || l.cfg.S3Listen != "" {
		t.Fatalf("default s3-listen %q, %v", l.cfg.S3Listen, err)
	}
	for name, c := range map[string]struct {
		file string
		env  map[string]string
		args []string
	}{
		"flag":     {args: []string{"--s3-listen", "127.0.0.1:9000"}},
		"variable": {env: map[string]string{"HUBPROXY_S3_LISTEN": "127.0.0.1:9000"}},
		"file":     {file: "s3-listen: 127.0.0.1:9000\n"},
	} {
		l, err := loadWith(t, c.file, c.env, c.args...)
		if err != nil || l.cfg.S3Listen != "127.0.0.1:9000" {
			t.Errorf("%s: s3-listen %q, %v", name, l.cfg.S3Listen, err)
		}
	}
	l, err = loadWith(t, "", nil, "--s3-listen", "9000")
	if err == nil {
		err = checkServe(l.cfg)
	}
	if err == nil || !strings.Contains(err.Error(), `s3-listen "9000"`) {
		t.Errorf("s3-listen 9000: %v", err)
	}
}
