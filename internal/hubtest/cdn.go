package hubtest

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"
)

// signer presigns CDN URLs the way S3 presigned URLs work: an HMAC over the
// object and expiry, checked by the CDN. Rotating the key invalidates every
// outstanding URL at once.
type signer struct {
	mu  sync.Mutex // guards key
	key []byte
}

func (s *signer) rotate() {
	k := make([]byte, 32)
	_, _ = rand.Read(k) // never fails since Go 1.24
	s.mu.Lock()
	s.key = k
	s.mu.Unlock()
}

func (s *signer) sign(sha, file string, expires int64) string {
	s.mu.Lock()
	m := hmac.New(sha256.New, s.key)
	s.mu.Unlock()
	fmt.Fprintf(m, "%s\n%s\n%d", sha, file, expires)
	return hex.EncodeToString(m.Sum(nil))
}

// url is the presigned CDN URL for blob sha, served as file ("{repo}/{path}",
// carried in the URL so the CDN's byte counts know which file they serve).
func (s *signer) url(base, sha, file string, ttl time.Duration) string {
	exp := time.Now().Add(ttl).Unix()
	return fmt.Sprintf("%s/blobs/%s?Expires=%d&X-Amz-Expires=%d&X-Hub-File=%s&X-Amz-Signature=%s",
		base, sha, exp, int64(ttl/time.Second), url.QueryEscape(file), s.sign(sha, file, exp))
}

func (s *signer) valid(sha, file string, expires int64, sig string) bool {
	return hmac.Equal([]byte(sig), []byte(s.sign(sha, file, expires)))
}

// ExpireURLs makes every CDN URL handed out so far fail with 403, as if they
// had expired; new resolve answers carry working URLs again.
func (h *Hub) ExpireURLs() { h.signer.rotate() }

// serveCDN answers GET/HEAD /blobs/{sha256}?… like cas-bridge behind
// CloudFront: presigned, ranged, immutable, with its own ETag.
func (h *Hub) serveCDN(w http.ResponseWriter, r *http.Request) {
	h.stats.cdn.Add(1)
	hadAuth := r.Header.Get("Authorization") != ""
	if hadAuth {
		h.stats.authCDN.Add(1)
	}
	if h.faults.take(faultStatus5xx, classCDN, "") {
		w.Header().Set("Retry-After", "0")
		writeXMLError(w, r, http.StatusServiceUnavailable, "ServiceUnavailable", "Please reduce your request rate.")
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		writeXMLError(w, r, http.StatusMethodNotAllowed, "MethodNotAllowed", "The specified method is not allowed against this resource.")
		return
	}
	// A presigned URL is its own credential; S3 refuses a second one. This
	// is what proves a client never forwards the hub token here. On the hub's
	// own host the token is expected, and ignored.
	onHub := h.cdnOnHub && strings.HasPrefix(r.URL.Path, "/cdn/")
	if hadAuth && !onHub {
		writeXMLError(w, r, http.StatusBadRequest, "InvalidArgument",
			"Only one auth mechanism allowed; only the X-Amz-Algorithm query parameter, Signature query string parameter or the Authorization header should be specified")
		return
	}
	sha, ok := strings.CutPrefix(strings.TrimPrefix(r.URL.Path, "/cdn"), "/blobs/")
	q := r.URL.Query()
	file := q.Get("X-Hub-File")
	exp, err := strconv.ParseInt(q.Get("Expires"), 10, 64)
	if !ok || err != nil || !h.signer.valid(sha, file, exp, q.Get("X-Amz-Signature")) {
		writeXMLError(w, r, http.StatusForbidden, "AccessDenied", "Access denied")
		return
	}
	if time.Now().Unix() > exp {
		writeXMLError(w, r, http.StatusForbidden, "AccessDenied", "Request has expired")
		return
	}
	h.mu.RLock()
	b := h.blobs[sha]
	h.mu.RUnlock()
	if b == nil || !b.lfs || b.sha256 != sha {
		writeXMLError(w, r, http.StatusNotFound, "NoSuchKey", "The specified key does not exist.")
		return
	}
	name := path.Base(file)
	hd := w.Header()
	hd.Set("Content-Type", "binary/octet-stream")
	hd.Set("ETag", `"`+b.cdnETag+`"`)
	hd.Set("Cache-Control", "public, max-age=31536000")
	hd.Set("Content-Disposition", fmt.Sprintf(`inline; filename*=UTF-8''%s; filename="%s"`, url.PathEscape(name), name))
	hd.Set("X-Cache", "Hit from cloudfront")
	h.serveBytes(w, r, content{data: b.data, key: file, class: classCDN})
}

// writeXMLError answers in S3's error format.
func writeXMLError(w http.ResponseWriter, r *http.Request, status int, code, msg string) {
	body := fmt.Sprintf("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>%s</Code><Message>%s</Message></Error>", code, msg)
	hd := w.Header()
	hd.Set("Content-Type", "application/xml")
	hd.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	if r.Method != http.MethodHead {
		_, _ = w.Write([]byte(body))
	}
}

// serveForeign answers GET/HEAD /files/{etag} on the foreign host with the
// blob's bytes, recording whether the request carried credentials. Faults
// never apply here.
func (h *Hub) serveForeign(w http.ResponseWriter, r *http.Request) {
	h.stats.foreign.Add(1)
	if r.Header.Get("Authorization") != "" {
		h.stats.authForeign.Add(1)
	}
	etag, ok := strings.CutPrefix(r.URL.Path, "/files/")
	h.mu.RLock()
	b := h.blobs[etag]
	h.mu.RUnlock()
	if !ok || b == nil || (r.Method != http.MethodGet && r.Method != http.MethodHead) {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("ETag", `"`+etag+`"`)
	w.Header().Set("Content-Type", "application/octet-stream")
	h.serveBytes(w, r, content{data: b.data, class: classForeign})
}
