// Command floorsrv is the benchmark's net/http floor (bench/floor): it
// answers byte ranges of one file with the response headers it is given.
// hubbench builds and starts it; it is not part of hubproxy.
//
//	floorsrv -listen 127.0.0.1:9000 -file BLOB -header 'ETag: "…"' …
package main

import (
	"flag"
	"fmt"
	"net/http"
	"os"
	"strings"

	"github.com/hubproxy/hubproxy/bench/floor"
)

type headers http.Header

func (h headers) String() string { return fmt.Sprint(http.Header(h)) }

func (h headers) Set(v string) error {
	k, val, ok := strings.Cut(v, ":")
	if !ok {
		return fmt.Errorf("%q is not Name: value", v)
	}
	http.Header(h).Add(strings.TrimSpace(k), strings.TrimSpace(val))
	return nil
}

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address to listen on")
	file := flag.String("file", "", "file whose ranges are served")
	hdr := headers{}
	flag.Var(hdr, "header", "a response header, 'Name: value' (repeatable)")
	flag.Parse()
	if *file == "" {
		fmt.Fprintln(os.Stderr, "floorsrv: -file is required")
		os.Exit(2)
	}
	s, err := floor.Open(*file, http.Header(hdr))
	if err != nil {
		fmt.Fprintln(os.Stderr, "floorsrv:", err)
		os.Exit(1)
	}
	defer s.Close()
	if err := http.ListenAndServe(*listen, s); err != nil {
		fmt.Fprintln(os.Stderr, "floorsrv:", err)
		os.Exit(1)
	}
}
