"""The API's errors as exceptions: every 4xx/5xx body is ``{"detail", "code", "errors"}``."""

from __future__ import annotations

from typing import Any


class EngramError(Exception):
    """An error answer of the Engram API.

    ``status``: the HTTP status; ``code``: the API's machine-readable code (``invalid``,
    ``not_found``, ``conflict``, ...); ``detail``: its sentence; ``errors``: ``{field path:
    [messages]}`` (``events[1].occurred_at``); ``body``: the whole body (extra members such as
    ``current_version`` of a stale blackboard write).
    """

    def __init__(self, status: int, body: dict[str, Any]) -> None:
        self.status = status
        self.body = body
        self.code: str = str(body.get("code", "error"))
        self.detail: str = str(body.get("detail", ""))
        self.errors: dict[str, list[str]] = dict(body.get("errors") or {})
        super().__init__(f"{status} {self.code}: {self.detail}")


class InvalidInput(EngramError):
    """400: bad input; ``errors`` names each field."""


class AuthenticationFailed(EngramError):
    """401: no key, or a malformed, unknown or revoked one."""


class PermissionDenied(EngramError):
    """403: the key lacks the scope, or the caller may not act on this object."""


class NotFound(EngramError):
    """404."""


class Conflict(EngramError):
    """409: a stale version, a used idempotency key with another body, a closed execution."""


class PayloadTooLarge(EngramError):
    """413."""


class ServiceUnavailable(EngramError):
    """503: a dependency of the server (Redis, the embedder) is down; retried by the client."""


class ServerError(EngramError):
    """Any other 5xx."""


class TransportError(Exception):
    """The server could not be reached (after the retries)."""


BY_STATUS: dict[int, type[EngramError]] = {
    400: InvalidInput,
    401: AuthenticationFailed,
    403: PermissionDenied,
    404: NotFound,
    409: Conflict,
    413: PayloadTooLarge,
    503: ServiceUnavailable,
}


def error_for(status: int, body: Any) -> EngramError:
    """The exception for an error answer (a body that is not the API's becomes ``detail``)."""
    if not isinstance(body, dict):
        body = {"detail": str(body)[:500], "code": "error", "errors": {}}
    cls = BY_STATUS.get(status, ServerError if status >= 500 else EngramError)
    return cls(status, body)
