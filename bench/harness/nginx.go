package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"text/template"
)

// ErrNoNginx is wrapped when nginx is missing and cannot be installed.
var ErrNoNginx = errors.New("harness: nginx is not installed")

// EnsureNginx returns the path of an nginx binary, installing Debian's
// nginx-light with apt-get when none is on PATH, the harness runs as root
// and install is allowed. nginx-light has the proxy, proxy_cache and slice
// modules the comparison needs.
func EnsureNginx(ctx context.Context, install bool, log io.Writer) (string, error) {
	return ensureTool(ctx, []string{"nginx", "/usr/sbin/nginx"}, "nginx-light", install, log, ErrNoNginx)
}

// ensureTool returns the first of bins found on PATH, installing Debian's
// package pkg with apt-get when none is, the harness runs as root and
// install is allowed. Every failure wraps errMissing and names the command
// that would fix it.
func ensureTool(ctx context.Context, bins []string, pkg string, install bool, log io.Writer, errMissing error) (string, error) {
	find := func() (string, bool) {
		for _, p := range bins {
			if path, err := exec.LookPath(p); err == nil {
				return path, true
			}
		}
		return "", false
	}
	if path, ok := find(); ok {
		return path, nil
	}
	if !install {
		return "", fmt.Errorf("%w and install is disabled; run: apt-get install -y %s", errMissing, pkg)
	}
	if os.Geteuid() != 0 {
		return "", fmt.Errorf("%w and the harness is not root, so it cannot install it; run: sudo apt-get install -y %s", errMissing, pkg)
	}
	if _, err := exec.LookPath("apt-get"); err != nil {
		return "", fmt.Errorf("%w and apt-get is not available; install %s", errMissing, pkg)
	}
	fmt.Fprintf(log, "installing %s with apt-get\n", pkg)
	env := append(childEnv(), "DEBIAN_FRONTEND=noninteractive")
	// A package index that was never fetched (a fresh container) makes the
	// install fail; update once and retry.
	for i, args := range [][]string{
		{"install", "-y", "--no-install-recommends", pkg},
		{"update"},
		{"install", "-y", "--no-install-recommends", pkg},
	} {
		cmd := exec.CommandContext(ctx, "apt-get", args...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if err == nil && args[0] == "install" {
			break
		}
		if err != nil && i == 2 {
			return "", fmt.Errorf("%w: apt-get install %s: %v: %s", errMissing, pkg, err, tail(out))
		}
	}
	if path, ok := find(); ok {
		return path, nil
	}
	return "", fmt.Errorf("%w: apt-get installed %s but no %s binary was found", errMissing, pkg, bins[0])
}

func tail(b []byte) string {
	if len(b) > 1000 {
		b = b[len(b)-1000:]
	}
	return strings.TrimSpace(string(b))
}

// nginxVersion is the version `nginx -v` reports ("1.22.1"), or "unknown".
func nginxVersion(bin string) string {
	out, err := exec.Command(bin, "-v").CombinedOutput()
	if err != nil {
		return "unknown"
	}
	v := strings.TrimSpace(string(out))
	if _, after, ok := strings.Cut(v, "version: "); ok {
		v = after
	}
	return strings.TrimPrefix(v, "nginx/")
}

// nginxParams fill the configuration template.
type nginxParams struct {
	Prefix     string // nginx's own directory: pid, logs, temp files, cache
	Port       int    // the caching front clients use
	InnerPort  int    // the redirect-following origin behind it
	HubAddr    string // "127.0.0.1:port" of the fake hub
	SliceBytes int64
	Workers    string
	User       string // "root" when running as root, so workers can write Prefix
	ErrorLog   string // outside Prefix, so it survives the instance
}

// nginxTemplate is what an nginx user would write to cache the Hub: a
// caching front (slice + proxy_cache + proxy_cache_lock) that sees a plain
// range-capable origin, and behind it an origin server that asks the hub
// and follows its redirect: the absolute 302 to the CDN for LFS files, the
// relative one to /api/resolve-cache/ for regular files.
//
// Two servers because nginx does not follow redirects itself: the usual
// recipe (proxy_intercept_errors + error_page 302 = @follow) only works in a
// location without slice, since slice issues its subrequests to the
// request's URI. Cache keys leave out the signed query, which changes with
// every resolve. The hub is asked once per slice, as the redirect carries a
// short-lived signature.
const nginxTemplate = `# Written by bench/harness; see bench/README.md.
daemon off;
master_process on;
worker_processes {{.Workers}};
{{if .User}}user {{.User}};
{{end}}pid {{.Prefix}}/nginx.pid;
error_log {{.ErrorLog}} warn;

events {
    worker_connections 4096;
}

http {
    access_log off;
    sendfile on;
    tcp_nopush on;
    keepalive_requests 100000;
    keepalive_timeout 120s;
    client_body_temp_path {{.Prefix}}/tmp/body;
    proxy_temp_path {{.Prefix}}/tmp/proxy;
    fastcgi_temp_path {{.Prefix}}/tmp/fastcgi;
    uwsgi_temp_path {{.Prefix}}/tmp/uwsgi;
    scgi_temp_path {{.Prefix}}/tmp/scgi;

    proxy_cache_path {{.Prefix}}/cache levels=1:2 keys_zone=hub:64m inactive=7d max_size=1024g use_temp_path=off;

    upstream origin {
        server 127.0.0.1:{{.InnerPort}};
        keepalive 128;
    }
    upstream hub {
        server {{.HubAddr}};
        keepalive 64;
    }

    # The caching front.
    server {
        listen 127.0.0.1:{{.Port}};
        location / {
            slice {{.SliceBytes}};
            proxy_cache hub;
            proxy_cache_key $uri$slice_range;
            proxy_set_header Range $slice_range;
            proxy_cache_valid 200 206 7d;
            proxy_cache_lock on;
            proxy_cache_lock_timeout 60s;
            proxy_cache_lock_age 60s;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_pass http://origin;
        }
    }

    # The origin: the hub, with its redirects followed.
    server {
        listen 127.0.0.1:{{.InnerPort}};
        location / {
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_pass http://hub;
            proxy_intercept_errors on;
            error_page 301 302 303 307 308 = @follow;
        }
        location @follow {
            set $target $upstream_http_location;
            if ($target ~ "^/") {
                set $target "http://{{.HubAddr}}$target";
            }
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_pass $target;
        }
    }
}
`

var nginxConf = template.Must(template.New("nginx.conf").Parse(nginxTemplate))

// renderNginxConf is the configuration for p.
func renderNginxConf(p nginxParams) (string, error) {
	var b strings.Builder
	if err := nginxConf.Execute(&b, p); err != nil {
		return "", err
	}
	return b.String(), nil
}

// writeNginxPrefix creates p.Prefix with its temp directories and writes
// nginx.conf there; it returns the config's path.
func writeNginxPrefix(p nginxParams) (string, error) {
	for _, d := range []string{"tmp/body", "tmp/proxy", "tmp/fastcgi", "tmp/uwsgi", "tmp/scgi", "cache"} {
		if err := os.MkdirAll(filepath.Join(p.Prefix, d), 0o755); err != nil {
			return "", err
		}
	}
	conf, err := renderNginxConf(p)
	if err != nil {
		return "", err
	}
	path := filepath.Join(p.Prefix, "nginx.conf")
	return path, os.WriteFile(path, []byte(conf), 0o644)
}
