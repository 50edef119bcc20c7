"""Domain errors raised by services and selectors, mapped to HTTP by one exception handler.

Services never import DRF; the API layer (``api.exceptions``) turns these into responses.
"""

from __future__ import annotations


class DomainError(Exception):
    """Base class. ``status`` is the HTTP status the API answers with; ``field`` names the input;
    ``errors`` (``{path: [message, ...]}``) names several inputs at once, e.g. a compiler's findings;
    ``extra`` adds keys to the error body."""

    status: int = 400
    code: str = "invalid"

    def __init__(
        self,
        message: str,
        *,
        field: str | None = None,
        errors: dict[str, list[str]] | None = None,
        extra: dict[str, object] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.field = field
        self.errors = errors
        self.extra = extra or {}


class InvalidInput(DomainError):
    status = 400
    code = "invalid"


class PermissionDenied(DomainError):
    """The agent is authenticated but a rule of the resource forbids the action (e.g. only the
    agent that started an execution may close it); the message names the rule."""

    status = 403
    code = "permission_denied"


class NotFound(DomainError):
    status = 404
    code = "not_found"


class Conflict(DomainError):
    status = 409
    code = "conflict"


class EmbeddingMismatch(DomainError):
    """A vector from another embedding model or of another dimension than the configured one: a
    conflict with the tenant's stored vectors (409), not malformed input."""

    status = 409
    code = "embedding_mismatch"


class PayloadTooLarge(DomainError):
    status = 413
    code = "too_large"


class ServiceUnavailable(DomainError):
    """A backing service (Redis for working memory) cannot be reached; retry later. ``retry_after``:
    the seconds to wait, when known (the ``Retry-After`` header)."""

    status = 503
    code = "unavailable"
    retry_after: int | None = None


#: seconds a process keeps a tenant's row (``agents.authentication``): a change to it, a move's
#: pause, reaches every process within; the ``Retry-After`` of a moving tenant's 503
TENANT_CACHE_SECONDS = 10


class TenantMoving(ServiceUnavailable):
    """The tenant is being moved to another PostgreSQL server (``compliance.services.move``): its
    row says so, or its unit lock is held by the move (``core.locks.unit_lock_sql``). 503 with
    ``Retry-After`` until the switch (decisions 0071, 0090)."""

    retry_after = TENANT_CACHE_SECONDS

    def __init__(self, schema: str | None = None) -> None:
        super().__init__("This tenant is being moved to another database server; retry shortly.")
        #: the tenant's schema when the backend refused its unit (the process's view of its row is
        #: stale: ``api.exceptions`` has it read again)
        self.schema = schema


class DatabaseUnavailable(ServiceUnavailable):
    """PostgreSQL cannot be reached or cannot take the request now (``core.db.availability``)."""

    def __init__(self, *, retry_after: int) -> None:
        super().__init__("The database (PostgreSQL) is unavailable right now; retry later.")
        self.retry_after = retry_after
