"""The HTTP client against a fake server: retries, error mapping, ranges."""
import http.server
import json
import threading
import unittest

import hubproxy
from hubproxy._http import Client


class Fake(http.server.ThreadingHTTPServer):
    """Answers from a script: a list of (status, headers, body) per request,
    the last repeated; records every request's path and Range."""

    daemon_threads = True

    def __init__(self, script):
        super().__init__(("127.0.0.1", 0), Handler)
        self.script, self.seen = list(script), []
        threading.Thread(target=self.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()

    @property
    def url(self):
        return f"http://127.0.0.1:{self.server_address[1]}"


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def do_GET(self):
        s = self.server
        s.seen.append((self.path, self.headers.get("Range"), self.headers.get("Authorization")))
        status, headers, body = s.script[0] if len(s.script) == 1 else s.script.pop(0)
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_HEAD = do_GET


def err(status, code, msg):
    h = {"Content-Type": "application/json", "Retry-After": "0"}
    if code:
        h["X-Error-Code"] = code
    return status, h, json.dumps({"error": msg}).encode()


class HTTP(unittest.TestCase):
    def serve(self, *script):
        f = Fake(script)
        self.addCleanup(f.server_close)
        self.addCleanup(f.shutdown)
        c = Client(f.url, token="hf_x", backoff=0.001)
        self.addCleanup(c.close)
        return f, c

    def test_retries_5xx_then_reads_the_range(self):
        f, c = self.serve(err(503, None, "busy"), err(502, "UpstreamError", "x"),
                          (206, {"Content-Range": "bytes 10-13/100"}, b"abcd"))
        self.assertEqual(c.read_range("/f", 10, 14), b"abcd")
        self.assertEqual(len(f.seen), 3)
        self.assertEqual(f.seen[-1], ("/f", "bytes=10-13", "Bearer hf_x"))

    def test_gives_up_after_retries(self):
        f, c = self.serve(err(429, None, "slow down"))
        with self.assertRaises(hubproxy.RateLimitedError) as cm:
            c.read_range("/f", 0, 4)
        self.assertEqual(len(f.seen), 1 + c.retries)
        self.assertIn("slow down", str(cm.exception))

    def test_permanent_5xx_is_not_retried(self):
        f, c = self.serve(err(502, "InvalidSafetensors", "model.safetensors: InvalidOffset"))
        with self.assertRaises(hubproxy.InvalidSafetensorsError) as cm:
            c.read_range("/f", 0, 4)
        self.assertEqual(len(f.seen), 1)
        self.assertEqual((cm.exception.status, cm.exception.code), (502, "InvalidSafetensors"))

    def test_error_classes(self):
        table = [
            ((401, "GatedRepo"), hubproxy.GatedRepoError), ((403, "GatedRepo"), hubproxy.GatedRepoError),
            ((401, "RepoNotFound"), hubproxy.RepositoryNotFoundError), ((401, None), hubproxy.AccessError),
            ((401, "TokenRequired"), hubproxy.TokenRequiredError), ((403, "RepoNotAllowed"), hubproxy.RepoNotAllowedError),
            ((404, "EntryNotFound"), hubproxy.EntryNotFoundError), ((404, "RevisionNotFound"), hubproxy.RevisionNotFoundError),
            ((404, "RepoNotFound"), hubproxy.RepositoryNotFoundError), ((404, None), hubproxy.EntryNotFoundError),
            ((400, "BadRequest"), hubproxy.BadRequestError), ((416, "RangeNotSatisfiable"), hubproxy.RangeNotSatisfiableError),
            ((416, None), hubproxy.RangeNotSatisfiableError), ((503, "Unverifiable"), hubproxy.UnavailableError),
            ((503, "GPUUnavailable"), hubproxy.GPUUnavailableError), ((504, "Offline"), hubproxy.UpstreamError),
            ((500, "InternalError"), hubproxy.InternalServerError), ((508, "LoopDetected"), hubproxy.UpstreamError),
            ((500, "GPUDriver"), hubproxy.GPUDriverError), ((405, "MethodNotAllowed"), hubproxy.BadRequestError),
            ((413, "BadRequest"), hubproxy.BadRequestError), ((410, None), hubproxy.HubproxyError),
            ((502, "UpstreamHashMismatch"), hubproxy.UpstreamError),
        ]
        for (status, code), cls in table:
            f, c = self.serve(err(status, code, f"msg {status} {code}"))
            c.retries = 0
            with self.assertRaises(hubproxy.HubproxyError) as cm:
                c.read_range("/f", 0, 4)
            self.assertIs(type(cm.exception), cls, (status, code))
            self.assertEqual(cm.exception.status, status)
            self.assertIn(f"msg {status} {code}", str(cm.exception))

    def test_wrong_content_range_is_refused(self):
        _, c = self.serve((206, {"Content-Range": "bytes 0-3/100"}, b"abcd"))
        with self.assertRaises(hubproxy.ProtocolError):
            c.read_range("/f", 10, 14)

    def test_short_body_is_refused(self):
        _, c = self.serve((206, {"Content-Range": "bytes 0-7/100", "Connection": "close"}, b"abcd"))
        c.retries = 0
        with self.assertRaises((hubproxy.ProtocolError, hubproxy.UpstreamError)):
            c.read_range("/f", 0, 8)

    def test_token_false_sends_none(self):
        f, _ = self.serve((200, {}, b"ok"))
        with Client(f.url, token=False) as c:
            c.request("GET", "/x")
        self.assertIsNone(f.seen[0][2])


if __name__ == "__main__":
    unittest.main()
