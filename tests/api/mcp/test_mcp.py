"""The MCP server with real clients over its real transports: the official SDK's client over
Streamable HTTP against a uvicorn process and over stdio against ``manage.py mcp``, and
``langchain-mcp-adapters`` loading the tools as LangChain tools. Every tool is listed with an object
input schema and called; errors carry the REST API's bodies; another tenant's key sees nothing."""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from collections.abc import Iterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from django.db import connection
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult

from tenants.models import Tenant
from tenants.services import tenant_create
from tests.factories import (
    BASE_DIR,
    Caller,
    asgi_server,
    make_caller,
    requires_model,
    skill_publish,
    skill_seed,
)
from tests.factories import (
    test_database_env as database_env,
)

pytestmark = requires_model

TOOLS = {
    "store_memory",
    "recall",
    "forget_memory",
    "append_events",
    "add_messages",
    "extraction_status",
    "assert_fact",
    "entity_facts",
    "find_skill",
    "read_blackboard",
    "write_blackboard",
    "save_checkpoint",
    "restore_checkpoint",
    "build_context",
}


@pytest.fixture
def other_tenant(django_db_setup, django_db_blocker) -> Iterator[Tenant]:  # type: ignore[no-untyped-def]
    """A second committed tenant (the outsider), dropped afterwards."""
    with django_db_blocker.unblock():
        tenant, _ = tenant_create(slug=f"outsider_{uuid.uuid4().hex[:8]}")
        connection.set_schema_to_public()
        try:
            yield tenant
        finally:
            connection.set_schema_to_public()
            tenant.auto_drop_schema = True
            tenant.delete(force_drop=True)


@pytest.fixture
def mcp_url(scratch_tenant: Tenant) -> Iterator[str]:
    with asgi_server() as port:
        yield f"http://127.0.0.1:{port}/mcp"


@asynccontextmanager
async def http_session(url: str, key: str):  # type: ignore[no-untyped-def]
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=60) as http:
        async with streamable_http_client(url, http_client=http) as (read, write, _):
            async with ClientSession(read, write) as session:
                await session.initialize()
                yield session


def payload(result: CallToolResult) -> Any:
    assert result.content, result
    return json.loads(result.content[0].text)  # type: ignore[union-attr]


async def ok(session: ClientSession, tool: str, **arguments: Any) -> Any:
    result = await session.call_tool(tool, arguments)
    assert not result.isError, (tool, result.content)
    return payload(result)


async def refused(session: ClientSession, tool: str, **arguments: Any) -> dict[str, Any]:
    result = await session.call_tool(tool, arguments)
    assert result.isError, (tool, result.content)
    return payload(result)


async def exercise(session: ClientSession, caller: Caller) -> set[str]:
    """Call every tool as an agent would; returns the names called."""
    tag = uuid.uuid4().hex[:8]
    session_id, execution = f"s-{tag}", f"x-{tag}"
    called = set()

    stored = await ok(session, "store_memory", content="Alice works at Acme Corp in Lisbon", scope="shared")
    assert stored["deduplicated"] is False
    hits = await ok(session, "recall", layer="semantic", query="Where does Alice work?", k=3)
    assert hits["results"][0]["memory"]["id"] == stored["id"]

    events = [
        {
            "session_id": session_id,
            "kind": "message",
            "role": "user",
            "content": "Alice moved to Lisbon",
            "occurred_at": "2026-03-01T10:00:00Z",
        },
    ]
    appended = await ok(session, "append_events", events=events)
    assert appended["count"] == 1
    episodic = await ok(session, "recall", layer="episodic", session_id=session_id)
    assert [e["content"] for e in episodic["results"]] == ["Alice moved to Lisbon"]

    turns = [
        {
            "role": "user",
            "name": "Carol",
            "content": "I prefer window seats.",
            "occurred_at": "2026-03-01T10:01:00Z",
        }
    ]
    added = await ok(
        session, "add_messages", session_id=f"{session_id}-chat", messages=turns, data_subject="carol"
    )
    assert [m["outcome"] for m in added["memories"]] == ["created"] and added["job"] is None
    missing = await refused(session, "extraction_status", job_id=str(uuid.uuid4()))
    assert missing["code"] == "not_found"

    asserted = await ok(
        session, "assert_fact", subject="Alice", predicate="works_at", object={"entity": "Acme"}
    )
    assert asserted["outcome"] == "created"
    facts = await ok(session, "entity_facts", name="alice")
    assert [f["predicate"] for f in facts["facts"]] == ["works_at"]
    assert (await ok(session, "recall", layer="facts", query="Acme"))["entity"]["name"] == "Acme"

    written = await ok(
        session, "write_blackboard", execution_id=execution, field="city", value={"name": "Lisbon"}
    )
    assert written["version"] == 1
    board = await ok(session, "read_blackboard", execution_id=execution)
    assert [f["field"] for f in board["results"]] == [f"{caller.agent.name}:city"]
    working = await ok(session, "recall", layer="working", execution_id=execution)
    assert working["blackboard"]["results"][0]["value"] == {"name": "Lisbon"}

    saved = await ok(
        session,
        "save_checkpoint",
        session_id=session_id,
        step_index=1,
        idempotency_key=f"k-{tag}",
        state={"step": "one"},
        plan=["two"],
    )
    assert saved["step_index"] == 1
    restored = await ok(session, "restore_checkpoint", session_id=session_id)
    assert restored["state"] == {"step": "one"} and restored["source"] in ("redis", "postgres")
    assert (await ok(session, "restore_checkpoint", session_id=session_id, step_index=1))["plan"] == ["two"]

    skills = await ok(session, "find_skill", intent="I forgot my password")
    assert skills["results"][0]["name"] == "reset-password"
    assert (await ok(session, "recall", layer="procedural", query="reset my password"))["results"]

    context = await ok(
        session,
        "build_context",
        session_id=session_id,
        execution_id=execution,
        query="Where does Alice work?",
        budget=300,
    )
    assert context["tokens_used"] <= 300
    assert {s["layer"] for s in context["sections"]} >= {"working", "semantic", "facts"}

    forgot = await ok(session, "forget_memory", memory_id=stored["id"])
    assert forgot["id"] == stored["id"]
    called |= {
        "store_memory",
        "recall",
        "append_events",
        "add_messages",
        "extraction_status",
        "assert_fact",
        "entity_facts",
        "write_blackboard",
        "read_blackboard",
        "save_checkpoint",
        "restore_checkpoint",
        "find_skill",
        "build_context",
        "forget_memory",
    }
    return called


def check_listing(tools: list[Any]) -> None:
    assert {t.name for t in tools} == TOOLS
    for tool in tools:
        schema = tool.inputSchema
        assert schema["type"] == "object", tool.name
        assert schema["properties"], tool.name
        assert isinstance(schema.get("required"), list) and schema["required"], tool.name
        assert "ctx" not in schema["properties"], tool.name
        assert len(tool.description or "") > 40, tool.name
        for name, prop in schema["properties"].items():
            assert prop.get("description"), (tool.name, name)


def test_the_sdk_client_lists_and_calls_every_tool_over_streamable_http(
    scratch_tenant: Tenant, mcp_url: str
) -> None:
    caller = make_caller(scratch_tenant, "mcp-agent")
    skill_seed(caller)
    skill_publish(scratch_tenant, "reset-password", 1)

    async def run() -> None:
        async with http_session(mcp_url, caller.key) as session:
            check_listing((await session.list_tools()).tools)
            assert await exercise(session, caller) == TOOLS

    asyncio.run(run())


def test_tool_errors_carry_the_rest_apis_4xx_bodies(scratch_tenant: Tenant, mcp_url: str) -> None:
    caller = make_caller(scratch_tenant, "mcp-errors")
    reader = make_caller(scratch_tenant, "mcp-reader", scopes=("read",))

    cases: list[tuple[str, dict[str, Any], str | None]] = [
        ("build_context", {"session_id": "s1", "query": "q", "budget": 3}, "budget"),
        ("store_memory", {"content": "x", "importance": 7}, "importance"),
        (
            "append_events",
            {
                "events": [
                    {
                        "session_id": "s1",
                        "kind": "message",
                        "content": "x",
                        "occurred_at": "2026-03-01T10:00:00",
                    }
                ]
            },
            "events[0].occurred_at",
        ),
        ("assert_fact", {"subject": "A", "predicate": "Not Snake", "object": {"entity": "B"}}, "predicate"),
        ("recall", {"layer": "nowhere"}, "layer"),
        ("entity_facts", {"name": "a/b"}, "name"),
        ("restore_checkpoint", {"session_id": "never-saved"}, None),
    ]

    async def run() -> tuple[list[dict[str, Any]], dict[str, Any]]:
        async with http_session(mcp_url, caller.key) as session:
            bodies = [await refused(session, tool, **arguments) for tool, arguments, _ in cases]
        async with http_session(mcp_url, reader.key) as session:
            scope = await refused(session, "store_memory", content="a reader cannot write")
        return bodies, scope

    bodies, scope = asyncio.run(run())
    rest_paths = {
        "build_context": "context",
        "store_memory": "memories",
        "append_events": "events",
        "assert_fact": "facts",
    }
    for (tool, arguments, path), body in zip(cases, bodies, strict=True):
        assert set(body) >= {"detail", "code", "errors"}, body
        if path is not None:
            assert path in body["errors"], (tool, body)
        else:
            assert body["code"] == "not_found"
        if tool in rest_paths:  # word for word what the REST operation answers
            rest_body = arguments["events"] if tool == "append_events" else arguments
            assert body == caller.post(f"/api/v1/{rest_paths[tool]}", rest_body).json(), tool
    assert scope["code"] == "permission_denied" and "'write' scope" in scope["detail"]


def test_a_request_without_a_valid_key_is_a_401(scratch_tenant: Tenant, mcp_url: str) -> None:
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    }
    headers = {"Accept": "application/json, text/event-stream"}
    for auth in (None, "Bearer egm.nope.123.456", "Basic abc"):
        response = httpx.post(
            mcp_url, json=init, headers={**headers, **({"Authorization": auth} if auth else {})}
        )
        assert response.status_code == 401, (auth, response.text)
        assert set(response.json()) >= {"detail", "code", "errors"}
        assert response.headers["www-authenticate"] == "Bearer"


def test_another_tenants_key_sees_nothing_through_mcp(
    scratch_tenant: Tenant, other_tenant: Tenant, mcp_url: str
) -> None:
    owner = make_caller(scratch_tenant, "owner")
    outsider = make_caller(other_tenant, "outsider")
    tag = uuid.uuid4().hex[:8]

    async def run() -> None:
        async with http_session(mcp_url, owner.key) as session:
            stored = await ok(session, "store_memory", content="The vault code is 4512", scope="shared")
            await ok(
                session,
                "append_events",
                events=[
                    {
                        "session_id": f"s-{tag}",
                        "kind": "message",
                        "content": "the vault code is 4512",
                        "occurred_at": "2026-03-01T10:00:00Z",
                    }
                ],
            )
            await ok(session, "assert_fact", subject="Vault", predicate="has_code", object={"string": "4512"})
            await ok(session, "write_blackboard", execution_id=f"x-{tag}", field="code", value="4512")
            await ok(
                session,
                "save_checkpoint",
                session_id=f"s-{tag}",
                step_index=0,
                idempotency_key="k",
                state={"code": "4512"},
            )
        async with http_session(mcp_url, outsider.key) as session:
            hits = await ok(session, "recall", layer="semantic", query="vault code")
            assert hits["results"] == []
            assert (await ok(session, "recall", layer="episodic", session_id=f"s-{tag}"))["results"] == []
            assert (await refused(session, "entity_facts", name="Vault"))["code"] == "not_found"
            assert (await ok(session, "read_blackboard", execution_id=f"x-{tag}"))["results"] == []
            assert (await refused(session, "restore_checkpoint", session_id=f"s-{tag}"))[
                "code"
            ] == "not_found"
            assert (await refused(session, "forget_memory", memory_id=stored["id"]))["code"] == "not_found"
            context = await ok(
                session,
                "build_context",
                session_id=f"s-{tag}",
                execution_id=f"x-{tag}",
                query="vault code",
                budget=500,
            )
            assert context["sections"] == [] and "4512" not in context["text"]

    asyncio.run(run())


def test_the_sdk_client_lists_and_calls_every_tool_over_stdio(scratch_tenant: Tenant) -> None:
    caller = make_caller(scratch_tenant, "desktop-agent")
    skill_seed(caller)
    skill_publish(scratch_tenant, "reset-password", 1)
    params = StdioServerParameters(
        command=sys.executable,
        args=["manage.py", "mcp", "--key", caller.key],
        env=database_env(),
        cwd=str(BASE_DIR),
    )

    async def run() -> None:
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                check_listing((await session.list_tools()).tools)
                assert await exercise(session, caller) == TOOLS

    asyncio.run(run())


def test_langchain_mcp_adapters_load_the_tools_as_langchain_tools(
    scratch_tenant: Tenant, mcp_url: str
) -> None:
    from langchain_mcp_adapters.client import MultiServerMCPClient

    caller = make_caller(scratch_tenant, "langchain-agent")
    client = MultiServerMCPClient(
        {
            "engram": {
                "transport": "streamable_http",
                "url": mcp_url,
                "headers": {"Authorization": f"Bearer {caller.key}"},
            }
        }
    )

    async def run() -> None:
        tools = {t.name: t for t in await client.get_tools()}
        assert set(tools) == TOOLS
        assert tools["store_memory"].args_schema["required"] == ["content"]  # type: ignore[index]
        stored = await tools["store_memory"].ainvoke({"content": "LangChain agents can store memories"})
        text = stored if isinstance(stored, str) else stored[0]["text"]
        assert json.loads(text)["content"] == "LangChain agents can store memories"
        hits = await tools["recall"].ainvoke({"layer": "semantic", "query": "LangChain memories"})
        text = hits if isinstance(hits, str) else hits[0]["text"]
        assert json.loads(text)["results"]

    asyncio.run(run())


def test_store_memory_takes_visible_to_for_a_hierarchical_memory(
    scratch_tenant: Tenant, mcp_url: str
) -> None:
    writer = make_caller(scratch_tenant, "mcp-writer")
    named = make_caller(scratch_tenant, "mcp-named")
    unnamed = make_caller(scratch_tenant, "mcp-unnamed")
    secret = f"The vault code rotates every {uuid.uuid4().hex[:6]} days"

    async def run() -> None:
        async with http_session(mcp_url, writer.key) as session:
            schema = next(
                t for t in (await session.list_tools()).tools if t.name == "store_memory"
            ).inputSchema
            assert set(schema["properties"]["visible_to"]["properties"]) == {"agents", "roles"}
            stored = await ok(
                session,
                "store_memory",
                content=secret,
                scope="hierarchical",
                visible_to={"agents": ["mcp-named"]},
            )
            assert stored["visible_to"] == {"agents": ["mcp-named"], "roles": []}
            bad = await refused(
                session, "store_memory", content="x", scope="hierarchical", visible_to={"agents": 3}
            )
            assert any(path.startswith("visible_to") for path in bad["errors"]), bad

    asyncio.run(run())
    assert [m["content"] for m in named.get("/api/v1/memories").json()["results"]] == [secret]
    assert unnamed.get("/api/v1/memories").json()["results"] == []
