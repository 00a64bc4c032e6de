package repoapi

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"time"

	"github.com/hubproxy/hubproxy/internal/hub"
)

// envelope is a cached API answer: enough to replay it exactly. Its JSON
// form is what the cache holds, so changing it orphans cached answers.
type envelope struct {
	Stored time.Time         `json:"stored"`
	Status int               `json:"status"`
	Header map[string]string `json:"header"`
	Body   []byte            `json:"body"`
}

// keptHeaders are the upstream response headers a cached answer replays.
// Link is rewritten at serve time, since the public URL depends on the request.
var keptHeaders = []string{"Content-Type", "Link", "X-Repo-Commit", "X-Error-Code", "X-Error-Message", "ETag"}

// metaKey is the cache key of an answer: one per caller (its ID, the hash
// of its credential these keys have always held), method, path and query,
// and body.
func metaKey(c hub.Caller, method, pathAndQuery, contentType string, body []byte) string {
	b := sha256.Sum256(body)
	return "api\x00" + c.ID() + "\x00" + method + "\x00" + pathAndQuery + "\x00" + contentType + "\x00" + hex.EncodeToString(b[:])
}

func (s *Service) load(key string) (envelope, error) {
	data, err := s.opts.Store.GetMeta(key)
	if err != nil {
		return envelope{}, err
	}
	var env envelope
	if err := json.Unmarshal(data, &env); err != nil {
		return envelope{}, err
	}
	return env, nil
}

func (s *Service) store(key string, env envelope) {
	b, err := json.Marshal(env)
	if err == nil {
		err = s.opts.Store.PutMeta(key, b)
	}
	if err != nil {
		s.log.Warn("caching API answer", "err", err)
	}
}

// saysNotPublic reports whether a repo-info answer says the repo is private
// or gated. Absent fields say nothing (a projection).
func saysNotPublic(data []byte) bool {
	var info struct {
		Private *bool `json:"private"`
		Gated   any   `json:"gated"`
	}
	if json.Unmarshal(data, &info) != nil {
		return false
	}
	if info.Private != nil && *info.Private {
		return true
	}
	switch g := info.Gated.(type) {
	case nil:
		return false // absent (or null): not asked
	case bool:
		return g
	default:
		return true // "auto", "manual", or a form we do not know: the stricter meaning
	}
}

// stripXet removes every "xetHash" field (docs/hub-protocol.md §2): a client that
// sees one in a tree listing skips the proxy and talks to Xet directly. It
// also returns the top-level "sha", if any.
func stripXet(data []byte) ([]byte, string, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber() // keep numbers exactly as upstream wrote them
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, "", err
	}
	var walk func(any)
	walk = func(v any) {
		switch t := v.(type) {
		case map[string]any:
			delete(t, "xetHash")
			for _, c := range t {
				walk(c)
			}
		case []any:
			for _, c := range t {
				walk(c)
			}
		}
	}
	walk(v)
	sha := ""
	if m, ok := v.(map[string]any); ok {
		sha, _ = m["sha"].(string)
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, "", err
	}
	return bytes.TrimSuffix(out.Bytes(), []byte("\n")), sha, nil
}
