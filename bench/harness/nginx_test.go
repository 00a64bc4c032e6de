package harness

import (
	"strings"
	"testing"
)

func TestNginxConf(t *testing.T) {
	conf, err := renderNginxConf(nginxParams{
		Prefix: "/p", Port: 1001, InnerPort: 1002, HubAddr: "127.0.0.1:1003",
		SliceBytes: 8 << 20, Workers: "auto", User: "root", ErrorLog: "/p.log",
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"daemon off;", "pid /p/nginx.pid;", "error_log /p.log warn;", "user root;",
		"listen 127.0.0.1:1001;", "listen 127.0.0.1:1002;", "server 127.0.0.1:1003;",
		"slice 8388608;", "proxy_cache_key $uri$slice_range;", "proxy_set_header Range $slice_range;",
		"proxy_cache_lock on;", "error_page 301 302 303 307 308 = @follow;",
		`set $target "http://127.0.0.1:1003$target";`, "proxy_pass $target;",
	} {
		if !strings.Contains(conf, want) {
			t.Errorf("config lacks %q", want)
		}
	}
	// Only loopback: every listen names 127.0.0.1.
	for _, line := range strings.Split(conf, "\n") {
		if l := strings.TrimSpace(line); strings.HasPrefix(l, "listen ") && !strings.HasPrefix(l, "listen 127.0.0.1:") {
			t.Errorf("non-loopback listen: %s", l)
		}
	}
	noUser, _ := renderNginxConf(nginxParams{Prefix: "/p", Workers: "1"})
	if strings.Contains(noUser, "user ") {
		t.Error("a user directive without User")
	}
}
