"""The project's ASGI app plus ``GET /probe/handover`` (tests/core/test_tenant_roles.py): it borrows
a connection from the pool in a thread of its own and reports its state with the raw driver, before
anything of the backend runs on it: what the next request would inherit."""

from __future__ import annotations

from typing import Any

from asgiref.sync import sync_to_async
from django.db import connection
from django.http import JsonResponse

from config.asgi import application as engram  # first: sets Django up


def _handover() -> dict[str, object]:
    connection.ensure_connection()
    try:
        # the raw driver connection: nothing of the backend's runs before this statement
        row = connection.connection.execute(
            "SELECT current_user, session_user, current_setting('search_path'), pg_backend_pid()"
        ).fetchone()
    finally:
        connection.close()  # back to the pool
    assert row is not None
    return {"role": row[0], "login": row[1], "search_path": row[2], "pid": row[3]}


async def application(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """The project's ASGI app, plus ``GET /probe/handover``."""
    if scope["type"] == "http" and scope["path"] == "/probe/handover":
        body = JsonResponse(await sync_to_async(_handover, thread_sensitive=False)()).content
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"application/json")],
            }
        )
        await send({"type": "http.response.body", "body": body})
        return
    await engram(scope, receive, send)
