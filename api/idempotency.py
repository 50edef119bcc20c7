"""``Idempotency-Key`` support for POST endpoints (the IETF httpapi idempotency-key draft).

The first request with a key is recorded with a fingerprint; the same key with a different request
is a 409. A write's first answer is stored and a replay with the same request returns it (header
``Idempotent-Replayed: true``). A read sent as a POST (recall, search, context: ``idempotent_read``)
stores no answer: a replay runs it again, on what is there now (an answer quoting other agents'
memories must not outlive them). An erasure withdraws the stored answers
(``agents.services.replay_answers_withdraw``): a replay of a withdrawn write is a 409 saying it was
applied. Requests that fail with an exception record nothing, so they can be retried.
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
from agents.services import REPLAY_LOCK
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
    """Decorate a DRF view's ``post`` that writes: honour ``Idempotency-Key`` for the authenticated
    agent, storing the first answer for replays (see the module docstring)."""
    return _keyed(view_method, store=True)


def idempotent_read(view_method: ViewMethod) -> ViewMethod:
    """Decorate a DRF view's ``post`` that only reads: the key is recorded with its request (a
    different request with it is a 409), the answer never; a replay runs the read again."""
    return _keyed(view_method, store=False)


def _keyed(view_method: ViewMethod, *, store: bool) -> ViewMethod:
    """Concurrent requests with the same key are serialised by a transaction-level advisory lock, so
    the second one waits and then replays the first one's answer. A write stores its answer under
    the shared ``REPLAY_LOCK``, which an erasure's withdrawal takes exclusively."""

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
            if store:
                advisory_xact_lock(REPLAY_LOCK, shared=True)
            advisory_xact_lock("idem", agent.pk, key)
            # per end user too: another subject's key must not replay (nor learn of) this answer
            record = IdempotencyRecord.objects.filter(
                agent=agent, data_subject=agent.acting_for, key=key
            ).first()
            ttl = timedelta(hours=settings.ENGRAM["IDEMPOTENCY_TTL_HOURS"])
            if record is not None and record.created_at < timezone.now() - ttl:
                record.delete()
                record = None
            if record is not None:
                if record.fingerprint != fingerprint:
                    raise Conflict(f"This {HEADER} was already used with a different request.", field=HEADER)
                if record.withdrawn_at is not None:
                    raise Conflict(
                        f"The request with this {HEADER} was applied; its answer was withdrawn by an "
                        "erasure (it may have held erased data). Read the current state instead.",
                        field=HEADER,
                    )
                if record.response_body is None:  # a read: run it again
                    return view_method(self, request, *args, **kwargs)
                replay = Response(record.response_body, status=record.response_status)
                replay["Idempotent-Replayed"] = "true"
                return replay
            response = view_method(self, request, *args, **kwargs)
            if response.status_code < 500:
                IdempotencyRecord.objects.create(
                    agent=agent,
                    data_subject=agent.acting_for,
                    key=key,
                    fingerprint=fingerprint,
                    response_status=response.status_code,
                    response_body=response.data if store else None,
                )
            return response

    return wrapper
