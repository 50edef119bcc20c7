"""Engram's Python client: ``EngramClient`` (sync) and ``AsyncEngramClient`` over httpx, typed
request and response shapes (``engram_client.models``), errors carrying the API's ``code`` and
``errors`` (``engram_client.errors``)."""

from .client import AsyncEngramClient, Call, EngramClient, RetryPolicy
from .errors import (
    AuthenticationFailed,
    Conflict,
    EngramError,
    InvalidInput,
    NotFound,
    PayloadTooLarge,
    PermissionDenied,
    ServerError,
    ServiceUnavailable,
    TransportError,
)

__all__ = [
    "AsyncEngramClient",
    "AuthenticationFailed",
    "Call",
    "Conflict",
    "EngramClient",
    "EngramError",
    "InvalidInput",
    "NotFound",
    "PayloadTooLarge",
    "PermissionDenied",
    "RetryPolicy",
    "ServerError",
    "ServiceUnavailable",
    "TransportError",
]
