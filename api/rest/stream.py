"""``GET /api/v1/executions/{id}/stream``: Server-Sent Events of an execution's blackboard writes.

An async view (served under ASGI, e.g. uvicorn): it subscribes to the execution's tenant-prefixed
Redis channel and forwards each write as ``event: blackboard`` with the field's JSON document as
``data`` and ``<field>@<version>`` as ``id``. A comment line is sent every ``KEEPALIVE_SECONDS`` so
proxies keep the connection open.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import redis.asyncio as aioredis
from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import close_old_connections
from django.http import HttpRequest, StreamingHttpResponse
from django.http.response import HttpResponseBase
from django.views.decorators.csrf import csrf_exempt
from rest_framework import exceptions

from agents.authentication import parse_bearer, resolve_api_key
from api.exceptions import domain_error_response, error_response
from core.db.availability import database_errors
from core.errors import DomainError
from core.redis import UNAVAILABLE_MESSAGE, check_id
from memory.working.services import updates_channel

KEEPALIVE_SECONDS = 15.0


def _authenticate(header: str | None, execution_id: str) -> tuple[str, str]:
    """Sync part: key → (schema name, agent name); raises DRF/DomainError exceptions."""
    try:
        raw = parse_bearer(header)
        if raw is None:
            raise exceptions.NotAuthenticated("Authentication credentials were not provided.")
        with database_errors():  # PostgreSQL down: a 503 (DatabaseUnavailable), not a 500
            tenant, agent, api_key = resolve_api_key(raw)
        if not api_key.has_scope("read"):
            raise exceptions.PermissionDenied("This API key lacks the 'read' scope.")
        check_id(execution_id, field="execution_id")
        return tenant.schema_name, agent.name
    finally:
        close_old_connections()


@csrf_exempt  # an API endpoint authenticated by key, never by a browser session
async def execution_stream(request: HttpRequest, execution_id: str) -> HttpResponseBase:
    """Stream blackboard writes of ``execution_id`` to the caller until it disconnects."""
    if request.method != "GET":
        response = error_response(
            f"Method {request.method} not allowed; use GET.", "method_not_allowed", status=405
        )
        response["Allow"] = "GET"
        return response
    try:
        schema_name, _agent = await sync_to_async(_authenticate)(
            request.headers.get("Authorization"), execution_id
        )
    except (exceptions.NotAuthenticated, exceptions.AuthenticationFailed) as exc:
        response = error_response(str(exc.detail), "not_authenticated", status=401)
        response["WWW-Authenticate"] = "Bearer"
        return response
    except exceptions.PermissionDenied as exc:
        return error_response(str(exc.detail), "permission_denied", status=403)
    except DomainError as exc:
        return domain_error_response(exc)

    client = aioredis.from_url(settings.REDIS_URL, socket_connect_timeout=0.5)
    pubsub = client.pubsub()
    try:
        await pubsub.subscribe(updates_channel(execution_id, schema_name))
    except (aioredis.ConnectionError, aioredis.TimeoutError):
        await client.aclose()
        return error_response(UNAVAILABLE_MESSAGE, "unavailable", status=503)

    async def events() -> AsyncIterator[str]:
        try:
            yield f"retry: 3000\n: following execution {execution_id}\n\n"
            while True:
                message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=KEEPALIVE_SECONDS)
                if message is None:
                    yield ": keep-alive\n\n"
                    continue
                data = message["data"].decode()
                doc = json.loads(data)
                yield f"event: blackboard\nid: {doc['field']}@{doc['version']}\ndata: {data}\n\n"
        finally:
            await pubsub.aclose()
            await client.aclose()

    stream = StreamingHttpResponse(events(), content_type="text/event-stream")
    stream["Cache-Control"] = "no-cache"
    stream["X-Accel-Buffering"] = "no"
    return stream
