"""What an MCP tool passes to its REST operation arrives as REST would receive it: every tool whose
operation has a path parameter is called with non-ASCII values in it (and every string argument with
a lone surrogate) and must answer what REST answers for the same request; and ``/mcp`` refuses the bodies REST refuses (not JSON, not UTF-8, too
deep, lone surrogates) with a 400, not a 500."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote, urlencode

import anyio.to_thread
import httpx
import pytest
from django.db import connections
from mcp.shared.memory import create_connected_server_and_client_session

from api.mcp import dispatch, server
from tenants.models import Tenant
from tests.api.test_input import MALFORMED_VALUES
from tests.factories import Caller, asgi_server, assert_fact, fact, make_caller, requires_model

pytestmark = requires_model

TEXT = ["Zürich", "北京"]
NOT_TEXT = "a\ud800"  # a lone surrogate: REST refuses it wherever it is, so must every tool
NON_ASCII = [*TEXT, NOT_TEXT]
# arguments each tool succeeds or fails with for a reason of its own; each string argument is then
# replaced by each non-ASCII value in turn (recall: one set per layer, each layer calls other paths)
BASES: dict[str, list[dict[str, Any]]] = {
    "store_memory": [{"content": "Lisbon is sunny"}],
    "recall": [
        {"layer": "facts", "query": "Earth"},
        {"layer": "working", "execution_id": "x1"},
        {"layer": "working", "session_id": "s1"},
        {"layer": "episodic", "session_id": "s1"},
        {"layer": "semantic", "query": "q"},
        {"layer": "procedural", "query": "q"},
    ],
    "forget_memory": [{"memory_id": str(uuid.uuid4())}],
    "append_events": [
        {
            "events": [
                {"session_id": "s1", "kind": "message", "content": "x", "occurred_at": "2026-03-01T10:00:00Z"}
            ]
        }
    ],
    "add_messages": [{"session_id": "s1", "messages": [{"role": "user", "content": "I live in Lisbon"}]}],
    "extraction_status": [{"job_id": str(uuid.uuid4())}],
    "assert_fact": [{"subject": "Earth", "predicate": "orbits", "object": {"entity": "Sun"}}],
    "entity_facts": [{"name": "Earth"}],
    "find_skill": [{"intent": "reset my password"}],
    "read_blackboard": [{"execution_id": "x1"}],
    "write_blackboard": [{"execution_id": "x1", "field": "f", "value": 1}],
    "save_checkpoint": [{"session_id": "s1", "step_index": 1, "idempotency_key": "k1", "state": {}}],
    "restore_checkpoint": [{"session_id": "s1"}],
    "build_context": [{"session_id": "s1", "query": "q", "budget": 100}],
}


def payload(result: Any) -> Any:
    return json.loads(result.content[0].text)


@pytest.fixture
def recorded(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[dict[str, Any]]]:
    """The REST requests tools send (``dispatch._call``'s arguments), as they are sent."""
    sent: list[dict[str, Any]] = []
    real = dispatch._call

    def call(**request: Any) -> dispatch.RestResult:
        sent.append(request)
        return real(**request)

    monkeypatch.setattr(dispatch, "_call", call)
    yield sent


def carries(request: dict[str, Any], value: str) -> bool:
    """Whether ``request`` has ``value`` in its path, or (for the value that is not text, which REST
    refuses wherever it is: asking REST again writes nothing) anywhere."""
    if value in request["path"]:
        return True
    if value != NOT_TEXT:
        return False
    stack: list[Any] = [request.get("query"), request.get("body")]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend([*item.keys(), *item.values()])
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, str) and value in item:
            return True
    return False


def rest_answer(caller: Caller, request: dict[str, Any]) -> tuple[int, Any]:
    """What REST answers for ``request`` sent over HTTP: the path percent-encoded as UTF-8. (Run in
    a worker thread: its database connection is closed at the end, or it would outlive the test.)"""
    try:
        return _rest_answer(caller, request)
    finally:
        connections.close_all()


def _rest_answer(caller: Caller, request: dict[str, Any]) -> tuple[int, Any]:
    target = quote(request["path"], errors="surrogatepass")
    query = {k: v for k, v in (request.get("query") or {}).items() if v is not None}
    if query:
        target += "?" + urlencode(query, doseq=True, errors="surrogatepass")
    body = request.get("body")
    response = caller.client.generic(
        request["method"],
        target,
        data=b"" if body is None else json.dumps(body).encode("ascii"),
        content_type="application/json",
    )
    return response.status_code, response.json() if response.content else None


def test_every_tool_passes_non_ascii_path_values_to_its_rest_operation(
    scratch_tenant: Tenant, django_db_blocker: Any, recorded: list[dict[str, Any]]
) -> None:
    with django_db_blocker.unblock():
        caller = make_caller(scratch_tenant, "unicode-agent")
        for name in TEXT:  # so an entity's facts answer 200 only when its name arrives whole
            assert_fact(caller, fact(name, "located_in", {"entity": "Earth"}))
        mcp = server.build_server(lambda ctx: (caller.key, "localhost"))
        calls: list[tuple[tuple[str, ...], Any, tuple[int, Any]]] = []

        async def walk() -> None:
            async with create_connected_server_and_client_session(mcp) as session:
                tools = {tool.name: tool for tool in (await session.list_tools()).tools}
                assert set(tools) == set(BASES), "each tool needs its arguments here"
                for name, tool in tools.items():
                    properties = tool.inputSchema["properties"]
                    strings = [arg for arg, schema in properties.items() if schema.get("type") == "string"]
                    for base in BASES[name]:
                        for arg in strings:
                            for value in NON_ASCII:
                                recorded.clear()
                                result = await session.call_tool(name, {**base, arg: value})
                                ours = [r for r in recorded if carries(r, value)]
                                if ours:  # the value went into a path: REST's answer is the oracle
                                    # (asked at once, before the walk writes more; Django off the loop)
                                    rest = await anyio.to_thread.run_sync(rest_answer, caller, ours[-1])
                                    calls.append(((name, arg, value, ours[-1]["path"]), result, rest))

        asyncio.run(walk())
        for where, result, (status, body) in calls:
            assert result.isError == (status >= 400), (*where, status, result.content)
            answer = payload(result)
            if status >= 400:
                assert answer == body, (*where, answer, body)
            else:
                assert {k: answer.get(k) for k in body} == body, (*where, answer, body)
    in_paths = {where[:2] for where, _, _ in calls}
    assert ("entity_facts", "name") in in_paths and ("recall", "query") in in_paths, in_paths
    assert len(in_paths) >= 8, in_paths


@pytest.fixture
def mcp_url(scratch_tenant: Tenant) -> Iterator[str]:
    with asgi_server() as port:
        yield f"http://127.0.0.1:{port}/mcp"


@pytest.mark.parametrize("value", MALFORMED_VALUES.values(), ids=MALFORMED_VALUES.keys())
def test_mcp_refuses_the_bodies_rest_refuses_with_a_400(
    scratch_tenant: Tenant, mcp_url: str, value: bytes
) -> None:
    caller = make_caller(scratch_tenant, "malformed-agent")
    body = (
        b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", '
        b'"params": {"name": "store_memory", "arguments": {"content": ' + value + b"}}}"
    )
    response = httpx.post(
        mcp_url,
        content=body,
        headers={
            "Authorization": f"Bearer {caller.key}",
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
        },
        timeout=30,
    )
    assert response.status_code == 400, (response.status_code, response.text[:300])
    error = response.json()["error"]
    assert error["code"] == -32700 and error["message"].startswith("Parse error"), error
