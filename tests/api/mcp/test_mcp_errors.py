"""A tool called with bad arguments answers as its REST operation does: a tool error whose text is
the API's error body ``{detail, code, errors}`` naming the argument, not the SDK's pydantic text.
Walked over every tool with the official SDK's client: each required argument left out, each argument
given a value of the wrong JSON type and (where it is not nullable) null, and an argument the tool
does not have."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from mcp.shared.memory import create_connected_server_and_client_session
from mcp.types import CallToolResult

from api.mcp import server
from tenants.models import Tenant
from tests.api.mcp.test_mcp_inputs import BASES
from tests.factories import make_caller, requires_model

pytestmark = requires_model

WRONG = {"string": [1], "integer": "one", "number": "one", "object": "one", "array": "one", "boolean": "one"}
"""A value of another JSON type for each declared type (one no REST field coerces)."""


def answer(result: CallToolResult) -> Any:
    """The result's text as JSON, or as it is when it is not JSON (the SDK's own error text)."""
    text = "".join(getattr(block, "text", "") for block in result.content)
    try:
        return json.loads(text)
    except ValueError:
        return text


def named(body: Any, argument: str) -> bool:
    """Whether ``body`` is the API's error body with an error at ``argument`` (or inside it)."""
    if not isinstance(body, dict) or set(body) < {"detail", "code", "errors"}:
        return False
    return any(
        path == argument or path.startswith((f"{argument}.", f"{argument}[")) for path in body["errors"]
    )


def test_every_bad_argument_of_every_tool_is_the_api_error_body(
    scratch_tenant: Tenant, django_db_blocker: Any
) -> None:
    with django_db_blocker.unblock():
        caller = make_caller(scratch_tenant, "errors-agent")
        mcp = server.build_server(lambda ctx: (caller.key, "localhost"))
        wrong: list[Any] = []

        async def walk() -> None:
            async with create_connected_server_and_client_session(mcp) as session:
                for tool in (await session.list_tools()).tools:
                    base = BASES[tool.name][0]
                    cases = [
                        ({k: v for k, v in base.items() if k != arg}, arg)
                        for arg in tool.inputSchema["required"]
                    ]
                    for arg, schema in tool.inputSchema["properties"].items():
                        declared = schema.get("type")
                        allowed = declared if isinstance(declared, list) else [declared]
                        if allowed[0] in WRONG:
                            cases.append(({**base, arg: WRONG[allowed[0]]}, arg))
                        if declared and "null" not in allowed:
                            cases.append(({**base, arg: None}, arg))
                    cases.append(({**base, "no_such_argument": 1}, "no_such_argument"))
                    for arguments, arg in cases:
                        result = await session.call_tool(tool.name, arguments)
                        body = answer(result)
                        if not (result.isError and named(body, arg)):
                            wrong.append((tool.name, arguments, result.isError, body))

        asyncio.run(walk())
    assert not wrong, "\n".join(map(repr, wrong))
