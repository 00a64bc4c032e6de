package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/hubproxy/hubproxy/internal/admin"
	"github.com/hubproxy/hubproxy/internal/app"
	"github.com/hubproxy/hubproxy/internal/bytesize"
)

// pull --server fills the server's cache. Downloading every file to this
// machine to drop it works with any server but moves every byte twice; a
// hubproxy whose admin API this machine reaches does it server-side
// (POST /cache/prefetch), and pull only shows the progress it streams.

// adminTarget is where pull looks for the --server hubproxy's admin API:
// --admin, else, for a server on this machine only, HUBPROXY_ADMIN_LISTEN
// (as serve reads it) or serve's default socket. A local admin API says
// nothing of a remote server: prefetching through it would fill another
// hubproxy's cache and report success. "" means none to try, and why.
func adminTarget(flag, server string) (addr, why string) {
	if flag != "" {
		return flag, ""
	}
	u, err := url.Parse(server)
	if err != nil {
		return "", "the server's address is not a URL"
	}
	host := u.Hostname()
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return "", "the server is not on this machine; give --admin if its admin API is reachable from here"
	}
	if env := os.Getenv("HUBPROXY_ADMIN_LISTEN"); env != "" {
		return env, ""
	}
	return app.Defaults().AdminListen, ""
}

// adminClient reaches an admin API at addr: unix:///path or host:port (or
// http://host:port).
func adminClient(addr string) (*http.Client, string, error) {
	if path, ok := strings.CutPrefix(addr, "unix://"); ok {
		if path == "" {
			return nil, "", errors.New("unix:// names no socket path")
		}
		tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		}}
		return &http.Client{Transport: tr}, "http://hubproxy-admin", nil
	}
	base, err := serverURL(addr)
	if err != nil {
		return nil, "", err
	}
	return &http.Client{}, base, nil
}

// errNoPrefetch is a server that cannot prefetch (no admin API reachable,
// or one without the route): pull streams instead.
type errNoPrefetch struct{ why string }

func (e *errNoPrefetch) Error() string { return e.why }

// prefetchOnServer asks the admin API at addr to fill its cache with what o
// selects, and shows the progress it streams. An *errNoPrefetch says the
// server cannot, and nothing was done.
func prefetchOnServer(ctx context.Context, addr, token string, o pullOptions, out io.Writer) error {
	client, base, err := adminClient(addr)
	if err != nil {
		return &errNoPrefetch{fmt.Sprintf("admin API %q: %v", addr, err)}
	}
	body, _ := json.Marshal(admin.PrefetchRequest{Repo: o.repo.ID(), RepoType: string(o.repo.Type()), Revision: o.revision,
		Include: o.include, Exclude: o.exclude, Files: o.files, Jobs: o.jobs})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/cache/prefetch", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		why := unreachable(err)
		if why == "" {
			why = err.Error()
		}
		return &errNoPrefetch{fmt.Sprintf("no admin API at %s (%s)", addr, why)}
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound && resp.Header.Get("X-Error-Code") == "EntryNotFound" || resp.StatusCode == http.StatusMethodNotAllowed {
		// An older hubproxy: its admin API has no prefetch route.
		return &errNoPrefetch{fmt.Sprintf("the admin API at %s has no prefetch (an older hubproxy?)", addr)}
	}
	if resp.StatusCode/100 != 2 {
		return statusError("/cache/prefetch", resp)
	}
	return showPrefetch(resp.Body, o, addr, out)
}

// showPrefetch reads the prefetch's events into pull's progress display.
func showPrefetch(r io.Reader, o pullOptions, addr string, out io.Writer) error {
	var (
		prog  *progress
		seen  = map[string]int64{} // bytes reported so far per file
		errs  []string
		final *admin.PrefetchEvent
		start time.Time
	)
	stop := func() {}
	defer func() { stop() }()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var ev admin.PrefetchEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return fmt.Errorf("prefetch: reading the server's progress: %w", err)
		}
		if prog == nil && ev.Event != "start" {
			return fmt.Errorf("prefetch: the server's progress begins with %q, not start", ev.Event)
		}
		switch ev.Event {
		case "start":
			fmt.Fprintf(out, "pulling %s@%s (%s): %s, %s, server-side (admin API at %s)\n", o.repo, o.revision, ev.Commit[:min(12, len(ev.Commit))],
				plural(ev.Files, "file"), bytesize.Human(ev.Size), addr)
			prog = newProgress(out, o.progress, ev.Size)
			start = prog.start
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { defer close(done); prog.run(ctx) }()
			stop = func() { cancel(); <-done; prog.finish() }
		case "progress":
			if _, ok := seen[ev.Path]; !ok {
				prog.startFile(ev.Path, ev.Size)
			}
			prog.add(ev.Bytes - seen[ev.Path])
			seen[ev.Path] = ev.Bytes
		case "file":
			prog.add(ev.Bytes - seen[ev.Path])
			delete(seen, ev.Path)
			if ev.Error != "" {
				prog.abandonFile(ev.Path)
				errs = append(errs, ev.Path+": "+ev.Error)
				continue
			}
			came := ev.Cache
			if came == "fetched" {
				came = cameMiss
			}
			prog.finishFile(ev.Path, ev.Size, came)
		case "done":
			final = &ev
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("prefetch: the server's progress stopped: %w", err)
	}
	stop()
	stop = func() {}
	switch {
	case final == nil:
		return errors.New("prefetch: the server's progress ended before it said done (see its log)")
	case len(errs) > 0:
		return fmt.Errorf("prefetch: %s of %d failed: %s", plural(len(errs), "file"), final.Files, strings.Join(errs, "; "))
	}
	elapsed := time.Since(start).Round(time.Millisecond)
	fmt.Fprintf(out, "pulled %s (%s) of %s at %s in %s%s\n", plural(final.Files, "file"), bytesize.Human(final.Size), o.repo, final.Commit, elapsed,
		hitSummary(final.Hits, final.Files))
	return nil
}
