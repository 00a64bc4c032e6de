package repoapi

import (
	"context"
	"net/http"
	"strings"
)

// hopHeaders are never copied from an upstream answer: hop-by-hop headers
// (RFC 9110 §7.6.1), lengths the server recomputes, and every Xet signal.
var hopHeaders = map[string]bool{
	"Connection": true, "Keep-Alive": true, "Proxy-Authenticate": true, "Proxy-Authorization": true,
	"Te": true, "Trailer": true, "Transfer-Encoding": true, "Upgrade": true,
	"Content-Length": true, "Content-Encoding": true, "Alt-Svc": true, "Strict-Transport-Security": true,
}

// relay passes any other /api/ request through uncached, rewriting Link and
// Location so pagination and relative moves stay on the proxy.
func (s *Service) relay(ctx context.Context, req Request) (*Response, error) {
	hdr := http.Header{}
	if req.ContentType != "" {
		hdr.Set("Content-Type", req.ContentType)
	}
	resp, err := s.opts.Upstream.Relay(ctx, req.Method, req.PathAndQuery, req.Caller.Auth(), hdr, req.Body)
	if err != nil {
		return nil, err
	}
	up := s.opts.Upstream.Upstream().String()
	out := http.Header{}
	for k, vs := range resp.Header {
		if hopHeaders[k] || strings.HasPrefix(k, "X-Xet-") || k == "X-Request-Id" {
			continue
		}
		for _, v := range vs {
			switch k {
			case "Link":
				v = RewriteLinks(v, up, req.PublicBase)
			case "Location":
				v = RewriteURL(v, up, req.PublicBase)
			}
			out.Add(k, v)
		}
	}
	return &Response{Status: resp.StatusCode, Header: out, Body: resp.Body, Source: Pass}, nil
}
