"""``Idempotency-Key`` support for POST endpoints (the IETF httpapi idempotency-key draft).

The first response to a key is stored with a fingerprint of the request; a replay with the same
request returns that response (header ``Idempotent-Replayed: true``), the same key with a different
request is a 409. Requests that fail with an exception store nothing, so they can be retried.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from rest_framework.request import Request
from rest_framework.response import Response

from agents.models import IdempotencyRecord
from api.views import AgentRequest
from core.errors import Conflict, InvalidInput
from core.locks import advisory_xact_lock

HEADER = "Idempotency-Key"
MAX_KEY_LENGTH = 255

ViewMethod = Callable[..., Response]


def request_fingerprint(request: Request) -> str:
    """SHA-256 of method, path and the parsed JSON body in canonical form (key order ignored)."""
    body = json.dumps(request.data, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(f"{request.method}\n{request.path}\n{body}".encode()).hexdigest()


def idempotent(view_method: ViewMethod) -> ViewMethod:
    """Decorate a DRF view's ``post``: honour ``Idempotency-Key`` for the authenticated agent.

    Concurrent requests with the same key are serialised by a transaction-level advisory lock, so
    the second one waits and then replays the first one's response.
    """

    @functools.wraps(view_method)
    def wrapper(self: Any, request: AgentRequest, *args: Any, **kwargs: Any) -> Response:
        key = request.headers.get(HEADER)
        if key is None:
            return view_method(self, request, *args, **kwargs)
        if not key or len(key) > MAX_KEY_LENGTH or not key.isprintable():
            raise InvalidInput(f"{HEADER} must be 1 to {MAX_KEY_LENGTH} printable characters.", field=HEADER)
        fingerprint = request_fingerprint(request)
        agent = request.user
        with transaction.atomic():
            advisory_xact_lock("idem", agent.pk, key)
            record = IdempotencyRecord.objects.filter(agent=agent, key=key).first()
            ttl = timedelta(hours=settings.ENGRAM["IDEMPOTENCY_TTL_HOURS"])
            if record is not None and record.created_at < timezone.now() - ttl:
                record.delete()
                record = None
            if record is not None:
                if record.fingerprint != fingerprint:
                    raise Conflict(f"This {HEADER} was already used with a different request.", field=HEADER)
                replay = Response(record.response_body, status=record.response_status)
                replay["Idempotent-Replayed"] = "true"
                return replay
            response = view_method(self, request, *args, **kwargs)
            if response.status_code < 500:
                IdempotencyRecord.objects.create(
                    agent=agent,
                    key=key,
                    fingerprint=fingerprint,
                    response_status=response.status_code,
                    response_body=response.data,
                )
            return response

    return wrapper
