"""HTTP to hubproxy: ranged GETs with a token, retries, and typed errors.

One persistent connection per thread (http.client), so a load of many
tensors does not pay a TCP handshake each. 5xx and 429 answers are retried
with backoff (honouring Retry-After, capped), except those that cannot
change on retry (InvalidSafetensors, LoopDetected); every other error answer
becomes its exception class (_errors.from_response).
"""
import http.client
import os
import re
import threading
import time
import urllib.parse

from ._errors import ProtocolError, UpstreamError, from_response

DEFAULT_ENDPOINT = "http://127.0.0.1:8080"
_NO_RETRY_CODES = {"InvalidSafetensors", "LoopDetected"}
_CONTENT_RANGE = re.compile(r"bytes (\d+)-(\d+)/(\d+|\*)")


def endpoint_of(endpoint):
    return (endpoint or os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")


def token_of(token):
    """token=None: HF_TOKEN from the environment; token=False: none."""
    if token is False:
        return None
    return token or os.environ.get("HF_TOKEN") or None


class Response:
    __slots__ = ("status", "headers", "body")

    def __init__(self, status, headers, body):
        self.status, self.headers, self.body = status, headers, body


class Client:
    """Requests to one hubproxy endpoint, with one token."""

    def __init__(self, endpoint=None, token=None, retries=4, timeout=300.0, backoff=0.25):
        self.endpoint = endpoint_of(endpoint)
        u = urllib.parse.urlsplit(self.endpoint)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise ValueError(f"endpoint {self.endpoint!r} is not an http(s) URL")
        self._scheme, self._netloc, self._base = u.scheme, u.netloc, u.path.rstrip("/")
        self.token = token_of(token)
        self.retries, self.timeout, self.backoff = retries, timeout, backoff
        self._local = threading.local()
        self._lock = threading.Lock()
        self._conns = set()  # every thread's, so close() ends them all

    def _conn(self):
        c = getattr(self._local, "conn", None)
        if c is None:
            cls = http.client.HTTPSConnection if self._scheme == "https" else http.client.HTTPConnection
            c = self._local.conn = cls(self._netloc, timeout=self.timeout)
            with self._lock:
                self._conns.add(c)
        return c

    def _drop(self):
        c = getattr(self._local, "conn", None)
        if c is not None:
            c.close()
            self._local.conn = None
            with self._lock:
                self._conns.discard(c)

    def close(self):
        """Closes every connection this client opened, in any thread."""
        with self._lock:
            conns, self._conns = self._conns, set()
        for c in conns:
            c.close()
        self._local = threading.local()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def url(self, path):
        return f"{self._scheme}://{self._netloc}{self._base}{path}"

    def _once(self, method, path, headers, into):
        """One request; the body is read into `into` (a writable memoryview
        of exactly the expected length) when given, else returned."""
        h = {"User-Agent": "hubproxy-python/1", **headers}
        if self.token:
            h["Authorization"] = f"Bearer {self.token}"
        try:
            conn = self._conn()
            conn.request(method, self._base + path, headers=h)
            resp = conn.getresponse()
        except (OSError, http.client.HTTPException):
            self._drop()  # a stale keep-alive connection: the retry opens a fresh one
            raise
        if into is not None and resp.status in (200, 206):
            n, view = 0, into
            while n < len(view):
                got = resp.readinto(view[n:])
                if not got:
                    break
                n += got
            extra = resp.read(1) if n == len(view) else b""
            if n != len(view) or extra:
                self._drop()
                raise ProtocolError(f"{method} {self.url(path)}: the answer held {'more' if extra else n} "
                                    f"bytes, {len(view)} expected", status=resp.status, url=self.url(path))
            return Response(resp.status, resp.headers, None)
        body = b"" if method == "HEAD" else resp.read()
        if resp.will_close:
            self._drop()
        return Response(resp.status, resp.headers, body)

    def request(self, method, path, headers=None, into=None, ok=(200, 206)):
        """The answer to method path, following redirects and retrying
        failures that may pass; raises the mapped exception otherwise."""
        headers = dict(headers or {})
        attempt = 0
        while True:
            try:
                r = self._once(method, path, headers, into)
            except (OSError, http.client.HTTPException) as e:
                if attempt >= self.retries:
                    raise UpstreamError(f"{method} {self.url(path)}: {e}", url=self.url(path)) from e
                attempt += 1
                time.sleep(self.backoff * attempt)
                continue
            if r.status in (301, 302, 303, 307, 308) and r.headers.get("Location"):
                loc = urllib.parse.urljoin(self.url(path), r.headers["Location"])
                u = urllib.parse.urlsplit(loc)
                if u.netloc != self._netloc:
                    raise ProtocolError(f"{method} {self.url(path)}: redirected off hubproxy to {loc}",
                                        status=r.status, url=self.url(path))
                path = u.path + (f"?{u.query}" if u.query else "")
                continue
            if r.status in ok:
                return r
            code = r.headers.get("X-Error-Code")
            retryable = (r.status >= 500 or r.status == 429) and code not in _NO_RETRY_CODES and r.status != 508
            if retryable and attempt < self.retries:
                attempt += 1
                time.sleep(self._delay(attempt, r.headers.get("Retry-After")))
                continue
            raise from_response(r.status, r.headers, r.body, url=self.url(path))

    def _delay(self, attempt, retry_after):
        d = self.backoff * (2 ** (attempt - 1))
        if retry_after and retry_after.strip().isdigit():
            d = max(d, float(retry_after))
        return min(d, 5.0)

    def read_range(self, path, start, end, into=None):
        """Bytes [start, end) of path, into `into` (len end-start) or as bytes."""
        n = end - start
        if n <= 0:
            return b""
        buf = into if into is not None else memoryview(bytearray(n))
        r = self.request("GET", path, {"Range": f"bytes={start}-{end - 1}"}, into=buf)
        if r.status == 206:
            m = _CONTENT_RANGE.fullmatch(r.headers.get("Content-Range", ""))
            if not m or int(m.group(1)) != start or int(m.group(2)) != end - 1:
                raise ProtocolError(f"GET {self.url(path)}: asked for bytes {start}-{end - 1}, "
                                    f"got Content-Range {r.headers.get('Content-Range')!r}", url=self.url(path))
        elif start != 0:
            raise ProtocolError(f"GET {self.url(path)}: a range was ignored", url=self.url(path))
        return buf.obj if into is None else into

    def prefix(self, path, n):
        """Up to the first n bytes of path, its total size and the answer's
        headers: one ranged GET (a file shorter than n comes whole)."""
        r = self.request("GET", path, {"Range": f"bytes=0-{n - 1}"})
        if r.status == 206:
            m = _CONTENT_RANGE.fullmatch(r.headers.get("Content-Range", ""))
            if not m or m.group(3) == "*" or int(m.group(1)) != 0:
                raise ProtocolError(f"GET {self.url(path)}: bad Content-Range "
                                    f"{r.headers.get('Content-Range')!r}", url=self.url(path))
            size = int(m.group(3))
        else:
            size = len(r.body)
        return r.body, size, r.headers


def quote_path(p):
    return urllib.parse.quote(p, safe="/")


def resolve_path(repo, revision, filename):
    """/{repo}/resolve/{revision}/{filename}, as huggingface_hub spells it."""
    return f"/{quote_path(repo)}/resolve/{urllib.parse.quote(revision, safe='')}/{quote_path(filename)}"
