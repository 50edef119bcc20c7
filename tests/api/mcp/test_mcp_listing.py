"""The MCP tool listing is the one recorded in ``tools.json``: each tool's name, title, description,
input and output schemas and annotations, in the order the server lists them. A change to a tool's
contract shows in review as a diff of that file; to record an intended one, run this module with
``ENGRAM_MCP_LISTING=write`` and commit the file."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

from mcp.shared.memory import create_connected_server_and_client_session

from api.mcp import server

RECORDED = Path(__file__).with_name("tools.json")


def listing() -> list[dict[str, Any]]:
    """What an MCP client is told by ``tools/list``, as JSON."""
    mcp = server.build_server(lambda ctx: ("no-key", "localhost"))

    async def run() -> list[dict[str, Any]]:
        async with create_connected_server_and_client_session(mcp) as session:
            tools = (await session.list_tools()).tools
            return [tool.model_dump(mode="json", exclude_none=True) for tool in tools]

    return asyncio.run(run())


def test_the_tool_listing_is_the_recorded_one() -> None:
    tools = listing()
    if os.environ.get("ENGRAM_MCP_LISTING") == "write":
        RECORDED.write_text(json.dumps(tools, indent=2, ensure_ascii=False) + "\n")
    assert len(tools) == 14, [tool["name"] for tool in tools]
    assert tools == json.loads(RECORDED.read_text()), (
        "the tool listing changed; if intended, rerun with ENGRAM_MCP_LISTING=write and commit tools.json"
    )
