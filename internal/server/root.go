package server

import (
	"context"
	"encoding/json"
	"html/template"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/hubproxy/hubproxy/internal/hub"
)

// RootInfo is the body of GET / for a client that asks for JSON: what this
// is, its state, its routes and what it is sending right now.
type RootInfo struct {
	Name        string    `json:"name"`
	Description string    `json:"description"`
	Version     string    `json:"version"`
	Status      Readiness `json:"status"` // as /readyz says it, upstream included
	OpenAPI     string    `json:"openapi"`
	Routes      []Route   `json:"routes"`
	// InFlight sums up the file and tensor responses in flight. Which
	// files they are is not shown here: a path names a repo, and the Hub
	// hides a private repo's existence from strangers, so the list is only
	// on the admin listener (Server.Transfers).
	InFlight InFlight `json:"in_flight"`
}

// InFlight sums up the responses in flight.
type InFlight struct {
	Transfers      int     `json:"transfers"`
	Bytes          int64   `json:"bytes"`            // body bytes sent so far, all of them
	BytesPerSecond float64 `json:"bytes_per_second"` // the sum of their average rates
}

// summarise adds up transfers for the root page.
func summarise(ts []Transfer) InFlight {
	var f InFlight
	for _, t := range ts {
		f.Transfers++
		f.Bytes += t.Bytes
		f.BytesPerSecond += t.BytesPerSecond
	}
	return f
}

// serveRoot answers GET /: a page for a person who opened the proxy's
// address in a browser, or the same as JSON (RootInfo) for a client that
// does not ask for HTML. Without it the address answers "no such route",
// which reads as a broken proxy.
func (s *Server) serveRoot(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Cache-Control", "no-store") // the transfers are of this moment
	h.Add("Vary", "Accept")
	if r.Method == http.MethodHead {
		// A downstream hubproxy's breaker probes its upstream with a HEAD
		// of the base URL: that must stay cheap, so it asks nothing of
		// readiness (which may itself probe upstream).
		if wantsHTML(r.Header.Get("Accept")) {
			h.Set("Content-Type", "text/html; charset=utf-8")
		} else {
			h.Set("Content-Type", "application/json")
		}
		return
	}
	info := RootInfo{
		Name:        "hubproxy",
		Description: "A caching proxy for the Hugging Face Hub, with a tensor API. Point HF_ENDPOINT at this address.",
		Version:     s.opts.Version,
		Status:      Readiness{Ready: true, Cache: "ok", Upstream: "unknown"},
		OpenAPI:     "/openapi.yaml",
		Routes:      Routes,
		InFlight:    summarise(s.Transfers()),
	}
	if info.Version == "" {
		info.Version = "(devel)"
	}
	if s.opts.Ready != nil {
		ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
		info.Status = s.opts.Ready(ctx)
		cancel()
	}
	if !wantsHTML(r.Header.Get("Accept")) {
		body, _ := json.Marshal(info)
		body = append(body, '\n')
		h.Set("Content-Type", "application/json")
		h.Set("Content-Length", strconv.Itoa(len(body)))
		w.Write(body)
		return
	}
	var b strings.Builder
	if err := s.root.Execute(&b, info); err != nil {
		s.writeError(w, r, err)
		return
	}
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Length", strconv.Itoa(b.Len()))
	io.WriteString(w, b.String())
}

// Transfers lists the file and tensor responses in flight, oldest first,
// for the admin listener, which only the operator reaches (the root page
// shows their sum).
// Their clock is the access log's (time.Now), not Options.Now: they are
// timed as the log times them.
func (s *Server) Transfers() []Transfer { return s.live.list(time.Now()) }

// wantsHTML reports whether an Accept header asks for HTML before JSON: a
// browser's does; curl's */* and a client's application/json get JSON.
func wantsHTML(accept string) bool {
	html := strings.Index(accept, "text/html")
	if html < 0 {
		return false
	}
	js := strings.Index(accept, "application/json")
	return js < 0 || html < js
}

// serveSpec answers /openapi.yaml with the contract this build ships.
func (s *Server) serveSpec(w http.ResponseWriter, r *http.Request) {
	if s.opts.Spec == nil {
		s.writeError(w, r, hub.ErrNoRoute)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/yaml") // RFC 9512
	h.Set("Content-Length", strconv.Itoa(len(s.opts.Spec)))
	if r.Method != http.MethodHead {
		w.Write(s.opts.Spec)
	}
}

// newRootPage parses the root page for a browser; html/template escapes
// every path it shows.
func newRootPage() *template.Template {
	return template.Must(template.New("root").Parse(rootHTML))
}

const rootHTML = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>hubproxy</title>
<style>body{font-family:sans-serif;margin:2em;max-width:60em}table{border-collapse:collapse}td,th{padding:.2em .8em;text-align:left;border-bottom:1px solid #ddd}code{font-size:.95em}</style>
</head><body>
<h1>hubproxy {{.Version}}</h1>
<p>{{.Description}}</p>
<h2>Status</h2>
<table>
<tr><th>ready</th><td>{{.Status.Ready}}</td></tr>
<tr><th>cache</th><td>{{.Status.Cache}}</td></tr>
<tr><th>upstream</th><td>{{.Status.Upstream}}{{with .Status.UpstreamReason}} ({{.}}){{end}}</td></tr>
{{with .Status.Store}}<tr><th>shared store</th><td>{{.}}</td></tr>{{end}}
</table>
<h2>Transfers in flight</h2>
<p>{{.InFlight.Transfers}} in flight, {{.InFlight.Bytes}} bytes sent so far, {{printf "%.0f" .InFlight.BytesPerSecond}} bytes/s.
Which files they are is listed on the admin API (<code>GET /transfers</code>), for the operator only.</p>
<h2>Routes</h2>
<p>The contract: <a href="{{.OpenAPI}}">{{.OpenAPI}}</a>.</p>
<table>
<tr><th>method</th><th>path</th><th>example</th></tr>
{{range .Routes}}<tr><td>{{.Method}}</td><td><code>{{.Pattern}}</code></td><td><code>{{.Example}}</code></td></tr>
{{end}}</table>
</body></html>
`
