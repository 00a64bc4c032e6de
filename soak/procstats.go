package soak

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// procStats is one look at a hubproxy process's resources.
type procStats struct {
	RSS, PeakRSS int64          // bytes (VmRSS, VmHWM)
	Threads      int            //
	FDs          int            // open file descriptors
	FDKinds      map[string]int // socket, pipe, blob, partial, deleted, other
	Goroutines   int
	profile      string // the goroutine profile (debug=1), to show a leak
}

func (s procStats) String() string {
	return fmt.Sprintf("RSS %s (peak %s), %d FDs %v, %d goroutines, %d threads",
		mib(s.RSS), mib(s.PeakRSS), s.FDs, s.FDKinds, s.Goroutines, s.Threads)
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// readProcStats reads pid's status and descriptors from /proc and its
// goroutines from the admin listener's pprof endpoint. cacheDir tells the
// cache's own files apart.
func readProcStats(pid int, admin, cacheDir string) (procStats, error) {
	var s procStats
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return s, err
	}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), ":")
		fields := strings.Fields(v)
		if len(fields) == 0 {
			continue
		}
		n, _ := strconv.ParseInt(fields[0], 10, 64)
		switch k {
		case "VmRSS":
			s.RSS = n << 10
		case "VmHWM":
			s.PeakRSS = n << 10
		case "Threads":
			s.Threads = int(n)
		}
	}
	f.Close()
	fdDir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, err := os.ReadDir(fdDir)
	if err != nil {
		return s, err
	}
	s.FDs = len(ents)
	s.FDKinds = map[string]int{}
	for _, e := range ents {
		target, err := os.Readlink(filepath.Join(fdDir, e.Name()))
		if err != nil {
			continue // closed meanwhile
		}
		s.FDKinds[fdKind(target, cacheDir)]++
	}
	s.profile, err = goroutineProfile(admin)
	if err != nil {
		return s, err
	}
	first, _, _ := strings.Cut(s.profile, "\n")
	if _, err := fmt.Sscanf(first, "goroutine profile: total %d", &s.Goroutines); err != nil {
		return s, fmt.Errorf("goroutine profile: %q: %w", first, err)
	}
	return s, nil
}

// fdKind classifies a descriptor's target.
func fdKind(target, cacheDir string) string {
	switch {
	case strings.HasSuffix(target, " (deleted)"):
		return "deleted"
	case strings.HasPrefix(target, "socket:"):
		return "socket"
	case strings.HasPrefix(target, "pipe:"):
		return "pipe"
	case strings.HasPrefix(target, "anon_inode:"):
		return "anon"
	case strings.HasPrefix(target, cacheDir) && strings.Contains(target, "/blobs/"):
		return "blob"
	case strings.HasPrefix(target, cacheDir):
		return "cache"
	}
	return "other"
}

// goroutineProfile fetches the goroutine profile on a connection of its
// own, closed after, so the measurement leaves nothing behind.
func goroutineProfile(admin string) (string, error) {
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Get("http://" + admin + "/debug/pprof/goroutine?debug=1")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("goroutine profile: %d %v", resp.StatusCode, err)
	}
	return string(b), nil
}
