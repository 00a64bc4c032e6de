package app_test

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/hubproxy/hubproxy/internal/hubtest"
)

// modelVerdict is one property an answer broke. kind groups verdicts for
// shrinking: a shorter history must break the same kind.
type modelVerdict struct {
	leak bool   // a leak (the caller learnt what the hub refused it), else a wrong answer
	kind string // content, existence, gated, marker, header, redirect, oracle, answer
	what string
}

func (v modelVerdict) String() string {
	if v.leak {
		return "LEAK (" + v.kind + "): " + v.what
	}
	return "WRONG ANSWER (" + v.kind + "): " + v.what
}

func leak(kind, format string, args ...any) modelVerdict {
	return modelVerdict{leak: true, kind: kind, what: fmt.Sprintf(format, args...)}
}

func wrong(kind, format string, args ...any) modelVerdict {
	return modelVerdict{kind: kind, what: fmt.Sprintf(format, args...)}
}

// hubAnswer is one answer the hub could have given: a refusal, a missing
// revision or entry, or content (status 200) of commit c, in state st.
type hubAnswer struct {
	status int
	code   string
	c      *modelCommit
	st     *hubState
}

// hubAnswers is what the hub answers req in state st, by its order of
// checks: the repo (and for content its gate), then the revision, then the
// path; a branch may name any commit it has pointed to.
func (m *modelRef) hubAnswers(st *hubState, req *modelReq) []hubAnswer {
	if status, code := st.refusal(req.repo, req.tok, req.route.content()); status != 0 {
		return []hubAnswer{{status: status, code: code, st: st}}
	}
	cs := m.revCommits(st, req.repo, req.rev)
	if len(cs) == 0 {
		return []hubAnswer{{status: http.StatusNotFound, code: hubtest.CodeRevisionNotFound, st: st}}
	}
	var out []hubAnswer
	for _, c := range cs {
		a := hubAnswer{status: http.StatusOK, c: c, st: st}
		if missingIn(req, c) {
			a.status, a.code = http.StatusNotFound, hubtest.CodeEntryNotFound
		}
		out = append(out, a)
	}
	return out
}

// missingIn reports whether what req asks for is not in commit c.
func missingIn(req *modelReq, c *modelCommit) bool {
	switch req.route {
	case routeResolve, routeRaw:
		return c.files[req.path] == nil
	case routeTree:
		_, ok := c.listing(req.path)
		return !ok
	case routeTensor, routeSubset:
		for _, n := range req.names {
			if _, ok := c.files["model.safetensors"].tensors[n]; !ok {
				return true
			}
		}
	}
	return false
}

// window is how far back the hub's word may stand for hubproxy now: its
// access-ttl while the upstream answers; during an outage also what it
// trusts without asking (public-ttl, outage-grace).
func (w *modelWorld) window(down bool) time.Duration {
	if down {
		return max(modelAccessTTL, modelPublicTTL, w.cfg.OutageGrace)
	}
	return modelAccessTTL
}

// infoHeaders describe a file or tensor; an answer that serves none must not
// carry them.
var infoHeaders = []string{"Etag", "X-Linked-Etag", "X-Linked-Size", "Content-Range", "X-Tensor-Dtype", "X-Tensor-Shape", "X-Tensor-File"}

// check judges hubproxy's answer to req against every answer the hub could
// have given the caller within the window.
func (w *modelWorld) check(req *modelReq, ans *modelAnswer, down bool) []modelVerdict {
	states := w.ref.window(req.t, w.window(down))
	out := w.checkMarkers(req, ans, states)
	if ans.status == 0 {
		w.counts["no answer (transport failed)"]++
		return out
	}
	code := ans.header.Get("X-Error-Code")
	var hubs []hubAnswer
	admitted, visible := false, false
	for _, st := range states {
		hubs = append(hubs, w.ref.hubAnswers(st, req)...)
		s, _ := st.refusal(req.repo, req.tok, req.route.content())
		admitted = admitted || s == 0
		s, _ = st.refusal(req.repo, req.tok, false)
		visible = visible || s == 0
	}
	isContent := ans.status == http.StatusOK || ans.status == http.StatusPartialContent ||
		ans.status == http.StatusNotModified || ans.status == http.StatusRequestedRangeNotSatisfiable
	isEntry := ans.status == http.StatusNotFound && code == hubtest.CodeEntryNotFound
	if !isContent && !admitted && req.route != routePass {
		// A refusal or a failure that still names the file (its ETag,
		// size, commit) tells a refused caller what the hub would not.
		for _, k := range infoHeaders {
			if v := ans.header.Get(k); v != "" {
				out = append(out, leak("header", "a %d answer carries %s: %s", ans.status, k, v))
			}
		}
		if v := ans.header.Get("X-Repo-Commit"); v != "" && !isEntry {
			out = append(out, leak("header", "a %d %s answer carries X-Repo-Commit %s", ans.status, code, v))
		}
	}
	summary := func() string { return hubSummary(hubs) }
	switch {
	case ans.status >= 300 && ans.status < 400 && ans.status != http.StatusNotModified:
		out = append(out, leak("redirect", "a %d redirect to %q: hubproxy never sends clients upstream", ans.status, ans.header.Get("Location")))
	case req.route == routePass:
		w.counts["relayed"]++
	case isContent:
		var lastErr error
		matched, any := false, false
		for _, h := range hubs {
			if h.status != http.StatusOK {
				continue
			}
			any = true
			if ans.err != nil {
				matched = true // cut short: the caller was entitled to it, and the markers checked its bytes
				break
			}
			if lastErr = verifyContent(req, ans, h); lastErr == nil {
				matched = true
				break
			}
		}
		switch {
		case !any:
			out = append(out, leak("content", "a %d answer with content to a caller the hub refused throughout the window (%s)", ans.status, summary()))
		case !matched:
			out = append(out, wrong("content", "a %d answer matching nothing the hub could have served: %v", ans.status, lastErr))
		default:
			w.countContent(req)
		}
	case isEntry, ans.status == http.StatusNotFound && code == hubtest.CodeRevisionNotFound:
		commit := ans.header.Get("X-Repo-Commit")
		ok := false
		for _, h := range hubs {
			ok = ok || h.code == code && (commit == "" || h.c != nil && h.c.id == commit)
		}
		switch {
		case ok:
			w.counts["missing, as the hub says"]++
		case !admitted:
			out = append(out, leak("existence", "404 %s (X-Repo-Commit %q) to a caller the hub refused throughout the window (%s)", code, commit, summary()))
		default:
			out = append(out, wrong("answer", "404 %s (X-Repo-Commit %q), where the hub answered %s", code, commit, summary()))
		}
	case (ans.status == http.StatusUnauthorized || ans.status == http.StatusForbidden) && code == hubtest.CodeGatedRepo:
		ok := false
		for _, h := range hubs {
			ok = ok || h.code == code && h.status == ans.status
		}
		switch {
		case ok || visible && down:
			w.counts["refused, as the hub does"]++
		case !visible:
			out = append(out, leak("gated", "%d GatedRepo tells the caller a repo the hub hides from it exists (%s)", ans.status, summary()))
		default:
			out = append(out, wrong("answer", "%d GatedRepo, where the hub answered %s", ans.status, summary()))
		}
	case (ans.status == http.StatusUnauthorized || ans.status == http.StatusNotFound) && code == hubtest.CodeRepoNotFound:
		ok := down
		for _, h := range hubs {
			ok = ok || h.code == code && h.status == ans.status
		}
		if !ok {
			out = append(out, wrong("answer", "%d RepoNotFound, where the hub answered %s", ans.status, summary()))
		}
		w.counts["refused, as the hub does"]++
	case ans.status >= 500:
		state := w.up.String()
		if w.recovering {
			state += ", recovering"
		}
		w.counts["unavailable ("+strconv.Itoa(ans.status)+" "+code+") while "+state]++
	default:
		out = append(out, wrong("answer", "%d %s is none of the hub's answers (%s)", ans.status, code, summary()))
	}
	return out
}

func (w *modelWorld) countContent(req *modelReq) {
	st := w.ref.now()
	if st.gated[req.repo] || st.private[req.repo] {
		w.counts["served, gated or private repo"]++
	} else {
		w.counts["served, public repo"]++
	}
}

func hubSummary(hubs []hubAnswer) string {
	seen := map[string]bool{}
	var parts []string
	for _, h := range hubs {
		s := strconv.Itoa(h.status)
		if h.code != "" {
			s += " " + h.code
		}
		if h.c != nil {
			s += "@" + h.c.id[:8]
		}
		if !seen[s] {
			seen[s] = true
			parts = append(parts, s)
		}
	}
	if len(parts) > 6 {
		parts = append(parts[:6], "…")
	}
	return "the hub's answers in the window: " + strings.Join(parts, ", ")
}

// checkMarkers looks for any file's marker in the body: content of a repo
// version that the hub refused the caller throughout the window, or that
// existed only after, is a leak, whatever the route and status; content of
// another repo is a wrong answer.
func (w *modelWorld) checkMarkers(req *modelReq, ans *modelAnswer, states []*hubState) []modelVerdict {
	var out []modelVerdict
	seen := map[[2]int]bool{}
	for rest := ans.body; ; {
		i := bytes.Index(rest, []byte("MARK:"))
		if i < 0 {
			break
		}
		rest = rest[i+5:]
		var r, v int
		if n, _ := fmt.Sscanf(string(rest[:min(len(rest), 24)]), "%d:%d:", &r, &v); n != 2 || r < 0 || r >= len(modelRepoSpecs) || seen[[2]int{r, v}] {
			continue
		}
		seen[[2]int{r, v}] = true
		ok := false
		for _, st := range states {
			s, _ := st.refusal(r, req.tok, true)
			ok = ok || s == 0 && v < st.commits[r]
		}
		switch {
		case !ok:
			out = append(out, leak("marker", "the body carries %s's content (version %d), which the hub did not let the caller read at any moment of the window", modelRepoSpecs[r].id, v))
		case r != req.repo:
			out = append(out, wrong("marker", "the body carries another repo's content (%s)", modelRepoSpecs[r].id))
		}
	}
	// A tensor's bytes carry no marker, but each version's are its own.
	if req.route == routeTensor && ans.status == http.StatusOK && len(ans.body) > 0 {
		if r, v, name, found := w.ref.tensorOf(ans.body); found {
			ok := false
			for _, st := range states {
				s, _ := st.refusal(r, req.tok, true)
				ok = ok || s == 0 && v < st.commits[r]
			}
			switch {
			case !ok:
				out = append(out, leak("marker", "the body is tensor %s of %s (version %d), which the hub did not let the caller read at any moment of the window", name, modelRepoSpecs[r].id, v))
			case r != req.repo:
				out = append(out, wrong("marker", "the body is another repo's tensor (%s of %s)", name, modelRepoSpecs[r].id))
			}
		}
	}
	return out
}

// tensorOf names the repo, version and tensor whose bytes are data.
func (m *modelRef) tensorOf(data []byte) (r, v int, name string, found bool) {
	for r, cs := range m.commits {
		for v, c := range cs {
			if f := c.files["model.safetensors"]; f != nil {
				for n, t := range f.tensors {
					if bytes.Equal(t.data, data) {
						return r, v, n, true
					}
				}
			}
		}
	}
	return 0, 0, "", false
}

// pairKey is what a stranger can tell apart in an answer. Failures without
// a code (502, 504, a cut connection) are one class: which of them a
// request meets depends on the upstream breaker's state when it is sent,
// not on the repo.
func pairKey(a *modelAnswer) string {
	code := a.header.Get("X-Error-Code")
	if a.status == 0 || a.status >= 500 && code == "" {
		return "failed"
	}
	return strconv.Itoa(a.status) + " " + code
}

// parseSafetensors reads a safetensors file's tensors, nil if it is not one.
func parseSafetensors(data []byte) map[string]modelTensor {
	if len(data) < 8 {
		return nil
	}
	n := binary.LittleEndian.Uint64(data)
	if n > uint64(len(data)-8) {
		return nil
	}
	var hdr map[string]json.RawMessage
	if json.Unmarshal(data[8:8+n], &hdr) != nil {
		return nil
	}
	body := data[8+n:]
	out := map[string]modelTensor{}
	for name, raw := range hdr {
		if name == "__metadata__" {
			continue
		}
		var t struct {
			DType   string   `json:"dtype"`
			Shape   []int64  `json:"shape"`
			Offsets []uint64 `json:"data_offsets"`
		}
		if json.Unmarshal(raw, &t) != nil || len(t.Offsets) != 2 || t.Offsets[0] > t.Offsets[1] || t.Offsets[1] > uint64(len(body)) {
			return nil
		}
		out[name] = modelTensor{dtype: t.DType, shape: t.Shape, data: body[t.Offsets[0]:t.Offsets[1]]}
	}
	return out
}
