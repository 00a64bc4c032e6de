package harness

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ErrNoAria2 is wrapped when aria2c is missing and cannot be installed.
var ErrNoAria2 = errors.New("harness: aria2c is not installed")

// EnsureAria2c returns the path of aria2c, installing Debian's aria2 with
// apt-get when it is not on PATH, the harness runs as root and install is
// allowed.
func EnsureAria2c(ctx context.Context, install bool, log io.Writer) (string, error) {
	return ensureTool(ctx, []string{"aria2c"}, "aria2", install, log, ErrNoAria2)
}

// aria2Version is the version `aria2c --version` reports ("1.36.0"), or
// "unknown".
func aria2Version(bin string) string {
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		return "unknown"
	}
	first, _, _ := strings.Cut(string(out), "\n")
	if _, v, ok := strings.Cut(first, "version "); ok {
		return strings.TrimSpace(v)
	}
	return "unknown"
}

// aria2 is aria2c as a peer in scenario 1: a user who resolves the file at
// the hub (as `curl -I` or huggingface_hub does), then downloads the signed
// CDN URL over many connections into a local directory. It has no cache and
// no process between downloads.
type aria2 struct {
	bin     string
	procs   *procs
	workDir string
	hubURL  string
	conns   int
	split   int64

	n   int           // downloads so far, naming each one's directory
	cpu time.Duration // CPU time of the last download's aria2c process
}

func (a *aria2) name() string                  { return Aria2c }
func (a *aria2) restart(context.Context) error { a.cpu = 0; return nil }
func (a *aria2) baseURL() string               { return a.hubURL }
func (a *aria2) peakRSS() (int64, bool, error) { return 0, false, nil }
func (a *aria2) cpuTime() (time.Duration, bool, error) {
	return a.cpu, true, nil
}
func (a *aria2) stop() {}

// aria2Args is the aria2c command line for one download of u into dir/name:
// conns connections and splits, split as the minimum split size, no
// preallocation, no progress output (warnings and errors still reach the
// log), and no resuming or renaming of what an earlier run left.
func aria2Args(u, dir, name string, conns int, split int64) []string {
	n := strconv.Itoa(conns)
	return []string{
		"--no-conf=true",
		"--max-connection-per-server=" + n, // -x
		"--split=" + n,                     // -s
		"--min-split-size=" + strconv.FormatInt(split, 10), // -k
		"--file-allocation=none",
		"--dir=" + dir, "--out=" + name,
		"--allow-overwrite=true", "--auto-file-renaming=false", "--continue=false",
		"--auto-save-interval=0",
		"--console-log-level=warn", "--summary-interval=0",
		"--show-console-readout=false", "--download-result=hide",
		"--disable-ipv6=true", "--connect-timeout=10", "--timeout=60",
		u,
	}
}

// resolveCDN asks the hub where u's bytes are, without following the
// answer: the absolute Location of its 302, the signed CDN URL.
func resolveCDN(ctx context.Context, u string) (string, error) {
	c := &http.Client{
		Transport:     &http.Transport{Proxy: nil, DisableCompression: true},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	defer c.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodHead, u, nil)
	if err != nil {
		return "", err
	}
	resp, err := c.Do(req)
	if err != nil {
		return "", err
	}
	resp.Body.Close()
	loc, err := resp.Location()
	if resp.StatusCode != http.StatusFound || err != nil || !loc.IsAbs() {
		return "", &StatusError{URL: u, Status: resp.StatusCode, Want: http.StatusFound, Body: "want an absolute Location to the CDN"}
	}
	return loc.String(), nil
}

// fetch resolves u at the hub and runs aria2c on the CDN URL it gets. It
// returns once aria2c has exited, successfully, with the path of the file
// aria2c wrote; the caller checks it and removes its directory.
func (a *aria2) fetch(ctx context.Context, u string) (string, error) {
	cdn, err := resolveCDN(ctx, u)
	if err != nil {
		return "", err
	}
	a.n++
	dir := filepath.Join(a.workDir, fmt.Sprintf("aria2c-%d", a.n))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	const name = "download"
	p, err := a.procs.start(Aria2c, a.bin, aria2Args(cdn, dir, name, a.conns, a.split), childEnv(), dir+".log", syscall.SIGKILL)
	if err != nil {
		return "", err
	}
	select {
	case <-p.Done():
	case <-ctx.Done():
	}
	a.procs.stop(p, time.Second) // only reaps a child that has exited
	a.cpu = p.CPU()
	if err := ctx.Err(); err != nil {
		return "", err
	}
	if p.Err() != nil {
		return "", fmt.Errorf("%w: aria2c: %v; log: %s", ErrExited, p.Err(), logTail(p.logPath))
	}
	return filepath.Join(dir, name), nil
}

// checkFile checks path's length, and its sha256 when want is non-zero.
func checkFile(path string, size int64, want [32]byte) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if fi.Size() != size {
		return fmt.Errorf("%w: %s: %d bytes, want %d", ErrShort, path, fi.Size(), size)
	}
	if want == ([32]byte{}) {
		return nil
	}
	h := sha256.New()
	if _, err := io.CopyBuffer(h, f, make([]byte, 1<<20)); err != nil {
		return err
	}
	if !bytes.Equal(h.Sum(nil), want[:]) {
		return fmt.Errorf("%w: %s: sha256 mismatch", ErrShort, path)
	}
	return nil
}
