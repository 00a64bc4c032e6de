"""hubproxy's loader: safetensors.torch.load_file and safe_open for hub repos
served by hubproxy (HF_ENDPOINT), from its cache by mmap when mounted, by
HTTP ranges of only the tensors asked for otherwise, and staged straight onto
the GPU by a co-located hubproxy for device="cuda:N".

    import hubproxy
    state = hubproxy.load_file("org/model", "model.safetensors", device="cuda:0")

Needs only the standard library and torch (plus cuda-python on the GPU path).
"""
from ._errors import (AccessError, BadRequestError, EntryNotFoundError, GatedRepoError, GPUDeviceFailedError,
                      GPUDriverError, GPUUnavailableError, HubproxyError, InternalServerError,
                      InvalidSafetensorsError, NotFoundError, ProtocolError, RangeNotSatisfiableError,
                      RateLimitedError, RepoNotAllowedError, RepositoryNotFoundError, RevisionNotFoundError,
                      TokenRequiredError, UnavailableError, UnsupportedDTypeError, UpstreamError)
from ._gpu import leases
from ._loader import load_file, safe_open

__all__ = [
    "load_file", "safe_open", "leases", "HubproxyError", "AccessError", "BadRequestError", "EntryNotFoundError",
    "GatedRepoError", "GPUDeviceFailedError", "GPUDriverError", "GPUUnavailableError", "InternalServerError",
    "InvalidSafetensorsError", "NotFoundError", "ProtocolError", "RangeNotSatisfiableError", "RateLimitedError",
    "RepoNotAllowedError", "RepositoryNotFoundError", "RevisionNotFoundError", "TokenRequiredError",
    "UnavailableError", "UnsupportedDTypeError", "UpstreamError",
]
