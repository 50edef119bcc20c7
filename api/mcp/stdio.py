"""The MCP server over stdio, for desktop clients (``./engram mcp --key <api key>``): one process,
one agent, the key given at start."""

from __future__ import annotations

from typing import Any

import anyio
from mcp.server.fastmcp import Context

from agents.authentication import resolve_api_key
from core.tenancy import activate_public

from .server import build_server


def run_stdio(key: str, *, host: str = "localhost") -> None:
    """Serve MCP on stdin/stdout as the agent of ``key`` until stdin closes. Raises
    ``AuthenticationFailed`` at once for a key the API would refuse (before reading stdin)."""
    resolve_api_key(key)
    activate_public()

    def key_source(ctx: Context[Any, Any, Any]) -> tuple[str, str]:
        return key, host

    anyio.run(build_server(key_source).run_stdio_async)
