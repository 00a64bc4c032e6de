"""Exceptions for every refusal hubproxy (or a file it serves) can give.

hubproxy answers errors with a status, an X-Error-Code header and a JSON body
{"error": message} (internal/server/errors.go); from_response maps those to
the classes below, in one place, so a caller can catch what it can act on
(GatedRepoError: ask for access; RangeNotSatisfiableError: a bug; ...).
"""
import json


class HubproxyError(Exception):
    """Base class. status and code are hubproxy's answer (None when the error
    was found here, e.g. in a header this package parsed itself)."""

    def __init__(self, message, status=None, code=None, url=None, request_id=None):
        super().__init__(message)
        self.message, self.status, self.code, self.url, self.request_id = message, status, code, url, request_id

    def __str__(self):
        parts = [self.message]
        if self.status is not None:
            parts.append(f"(HTTP {self.status}{' ' + self.code if self.code else ''}"
                         f"{' from ' + self.url if self.url else ''}"
                         f"{', request ' + self.request_id if self.request_id else ''})")
        return " ".join(parts)


class BadRequestError(HubproxyError, ValueError):
    """400: a malformed repo, revision, tensor name, shard or slice."""


class AccessError(HubproxyError, PermissionError):
    """401/403 without a more specific code (e.g. a bad token)."""


class GatedRepoError(AccessError):
    """401/403 GatedRepo: the repo is gated and this token is missing or not approved."""


class TokenRequiredError(AccessError):
    """401 TokenRequired: this hubproxy admits only callers with a token."""


class RepoNotAllowedError(AccessError):
    """403 RepoNotAllowed: hubproxy's allow list refuses this repo."""


class NotFoundError(HubproxyError, LookupError):
    """404: the base of the three below."""


class RepositoryNotFoundError(NotFoundError):
    """RepoNotFound: no such repo, or a private one this token cannot see."""


class RevisionNotFoundError(NotFoundError):
    """RevisionNotFound: no such branch, tag or commit."""


class EntryNotFoundError(NotFoundError, KeyError):
    """EntryNotFound: no such file or tensor (or no such route)."""

    __str__ = HubproxyError.__str__


class RangeNotSatisfiableError(HubproxyError):
    """416: a range past the end of the file, or too many ranges at once."""


class RateLimitedError(HubproxyError):
    """429 after this package's retries."""


class UnavailableError(HubproxyError):
    """503 after retries: hubproxy cannot check access (Unverifiable), is
    draining, or its GPU staging is unavailable (the subclasses)."""


class GPUUnavailableError(UnavailableError):
    """503 GPUUnavailable: this hubproxy has no CUDA staging."""


class GPUDeviceFailedError(UnavailableError):
    """503 GPUDeviceFailed: the device died of a sticky fault."""


class UpstreamError(HubproxyError):
    """502/504: the Hub failed, timed out, sent bad bytes, or hubproxy is offline."""


class InvalidSafetensorsError(HubproxyError, ValueError):
    """The file breaks the safetensors format. kind is the reference reader's
    error name (InvalidOffset, HeaderTooLarge, ...) when found here."""

    def __init__(self, message, kind=None, tensor=None, **kw):
        super().__init__(message, **kw)
        self.kind, self.tensor = kind, tensor


class UnsupportedDTypeError(HubproxyError, TypeError):
    """A safetensors dtype this torch build has no dtype for."""

    def __init__(self, dtype, tensor):
        super().__init__(f"tensor {tensor!r} has dtype {dtype}, which this torch build cannot represent; "
                         f"pass unsupported='raw' to get its bytes as uint8")
        self.dtype, self.tensor = dtype, tensor


class GPUDriverError(HubproxyError):
    """500 GPUDriver from hubproxy, or a failed CUDA call in this process."""


class InternalServerError(HubproxyError):
    """500 InternalError, or any status this package does not know."""


class ProtocolError(HubproxyError):
    """hubproxy's answer was not what the protocol says (short body, no header...)."""


_BY_CODE = {
    "GatedRepo": GatedRepoError,
    "TokenRequired": TokenRequiredError,
    "RepoNotAllowed": RepoNotAllowedError,
    "RepoNotFound": RepositoryNotFoundError,
    "RevisionNotFound": RevisionNotFoundError,
    "EntryNotFound": EntryNotFoundError,
    "RangeNotSatisfiable": RangeNotSatisfiableError,
    "InvalidSafetensors": InvalidSafetensorsError,
    "GPUUnavailable": GPUUnavailableError,
    "GPUDeviceFailed": GPUDeviceFailedError,
    "GPUDriver": GPUDriverError,
    "BadRequest": BadRequestError,
}

_BY_STATUS = {400: BadRequestError, 405: BadRequestError, 413: BadRequestError, 401: AccessError, 403: AccessError, 404: EntryNotFoundError,
              416: RangeNotSatisfiableError, 429: RateLimitedError, 503: UnavailableError,
              502: UpstreamError, 504: UpstreamError, 508: UpstreamError}


def from_response(status, headers, body, url=None):
    """The exception for an error answer. headers: a mapping with
    case-insensitive get (http.client's HTTPMessage) or a plain dict of
    lower-case names; body: the answer's bytes."""
    get = headers.get if hasattr(headers, "get") else (lambda k: None)
    code = get("X-Error-Code") or get("x-error-code") or None
    message = None
    try:
        doc = json.loads(body.decode("utf-8")) if body else None
        if isinstance(doc, dict) and isinstance(doc.get("error"), str):
            message = doc["error"]
    except (UnicodeDecodeError, ValueError):
        pass
    message = message or get("X-Error-Message") or get("x-error-message") or \
        (body.decode("utf-8", "replace").strip()[:512] if body else f"HTTP {status}")
    cls = _BY_CODE.get(code)
    if cls is RangeNotSatisfiableError and status != 416:
        cls = None
    if cls is None:
        # Any other 4xx is the Hub's own, relayed: the base class, with its code and message.
        cls = _BY_STATUS.get(status) or (HubproxyError if 400 <= status < 500 else
                                         UpstreamError if 500 < status < 600 else InternalServerError)
    rid = get("X-Request-Id") or get("x-request-id")
    return cls(message, status=status, code=code, url=url, request_id=rid)
