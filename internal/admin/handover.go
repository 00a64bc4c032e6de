package admin

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/hubproxy/hubproxy/internal/gpu"
)

// A staging's answer that carries a file descriptor, or whose lease is
// held by the connection, needs the connection itself: the handler takes
// it over (Hijack), writes the HTTP answer by hand with the descriptor on
// its first byte (SCM_RIGHTS), and then either closes it or keeps it as
// the lease's holder.
//
// A held lease ends when the connection does. The consumer ends it by
// closing; if its process dies the kernel closes it. That is the signal
// the old design lacked: its leases ended on a timer, freeing memory under
// a consumer that was still using it, or outlived a consumer that had
// crashed. Peer credentials (SO_PEERCRED) name the holder in the log, and
// their uid owns the lease (owner.go); a pidfd would need the
// consumer's PID to be visible here, which is what the descriptor handover
// spares the pod (no shared PID namespace).

// handOver answers on the hijacked connection and reports whether the
// consumer has its lease. On failure the lease is released (nobody could
// use it) and, where the answer was not started yet, an error written.
func (a *admin) handOver(w http.ResponseWriter, r *http.Request, lease *gpu.Lease, out StageResponse) bool {
	var f *os.File
	if lease.Handover == gpu.HandoverFD {
		var err error
		if f, err = a.opts.Stager.ExportFD(lease.ID); err != nil {
			a.drop(lease.ID, "its file descriptor could not be exported")
			a.writeError(w, r, err)
			return false
		}
		defer f.Close() // the consumer has its own copy once it is sent
	}
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		a.drop(lease.ID, "its connection cannot be taken over")
		a.writeError(w, r, &requestError{`"hold" and the "fd" handover need an HTTP/1.1 connection to the admin socket`})
		return false
	}
	conn.SetDeadline(time.Time{}) // the server's, for the request, no longer apply
	answer, err := rawAnswer(w.Header().Get("X-Request-Id"), out, !lease.Held)
	if err == nil {
		err = sendWithFD(conn, answer, f)
	}
	if err != nil {
		conn.Close()
		a.drop(lease.ID, "its answer could not be delivered")
		return false
	}
	if !lease.Held {
		conn.Close()
		return true
	}
	peer := peerOf(r).String()
	if !peerOf(r).known {
		peer = conn.RemoteAddr().String()
	}
	a.log.Info("gpu: lease held by its consumer's connection", "lease", lease.ID, "peer", peer)
	go a.hold(conn, brw.Reader, lease.ID, peer)
	return true
}

// hold keeps a held lease until its connection ends. Whatever the
// consumer sends meanwhile is read and ignored: the lease ends with the
// connection, not with a message.
func (a *admin) hold(conn net.Conn, rd io.Reader, id, peer string) {
	defer conn.Close()
	_, err := io.Copy(io.Discard, rd)
	defer a.owners.forget(id)
	if rerr := a.opts.Stager.Release(id); rerr != nil {
		// Unknown: released through DELETE, or dropped by a device reset.
		a.log.Debug("gpu: held lease already gone", "lease", id, "err", rerr)
		return
	}
	a.log.Info("gpu: lease released: its holder's connection closed", "lease", id, "peer", peer, "err", err)
}

// rawAnswer is a 200 JSON answer as HTTP/1.1 writes it on the wire.
func rawAnswer(requestID string, v any, closing bool) ([]byte, error) {
	body, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return nil, err
	}
	body = append(body, '\n')
	resp := &http.Response{StatusCode: http.StatusOK, ProtoMajor: 1, ProtoMinor: 1, Header: http.Header{},
		ContentLength: int64(len(body)), Body: io.NopCloser(bytes.NewReader(body)), Close: closing}
	resp.Header.Set("Content-Type", "application/json")
	if requestID != "" {
		resp.Header.Set("X-Request-Id", requestID)
	}
	var buf bytes.Buffer
	if err := resp.Write(&buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
