"""What an MCP tool call costs over the REST call it wraps, both over HTTP against one uvicorn
process (``config.asgi``, 1 worker; DEBUG off).

Three operations, each timed as REST (one keep-alive httpx client) and as the MCP tool (the official
SDK's client over Streamable HTTP, one session): ``read_blackboard`` against ``GET
executions/{id}/blackboard`` (Redis only: the overhead stands out), ``restore_checkpoint`` against
``GET sessions/{id}/checkpoints/latest``, and ``recall`` (semantic) against ``POST memories/search``.
Prints p50/p95 per path and the difference of the medians.

    ./engram services --profile bench > /tmp/bench-svc.log 2>&1 &
    eval "$(grep export /tmp/bench-svc.log)"
    export DJANGO_SETTINGS_MODULE=config.settings.local
    .venv/bin/python manage.py migrate_schemas --noinput -v 0
    python -m benchmarks mcp_overhead --calls 300
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
from _common import bench_key, django_setup, percentiles, web_server


async def timed(call: Callable[[], Awaitable[Any]], n: int, warmup: int = 20) -> list[float]:
    for _ in range(warmup):
        await call()
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        await call()
        out.append((time.perf_counter() - t0) * 1000)
    return out


async def run(url: str, key: str, calls: int) -> None:
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    headers = {"Authorization": f"Bearer {key}"}
    async with httpx.AsyncClient(base_url=f"{url}/api/v1/", headers=headers, timeout=60) as rest:
        await rest.put("executions/bench-x/blackboard/city", json={"value": "Lisbon"})
        await rest.post(
            "sessions/bench-s/checkpoints",
            json={"step_index": int(time.time()), "idempotency_key": str(time.time()), "state": {"n": 1}},
        )
        await rest.post("memories", json={"content": "Alice works at Acme in Lisbon", "scope": "shared"})
        async with httpx.AsyncClient(headers=headers, timeout=60) as http:
            async with streamable_http_client(f"{url}/mcp", http_client=http) as (read, write, _):
                async with ClientSession(read, write) as mcp:
                    await mcp.initialize()
                    pairs: list[tuple[str, Callable[[], Awaitable[Any]], Callable[[], Awaitable[Any]]]] = [
                        (
                            "read_blackboard",
                            lambda: rest.get("executions/bench-x/blackboard"),
                            lambda: mcp.call_tool("read_blackboard", {"execution_id": "bench-x"}),
                        ),
                        (
                            "restore_checkpoint",
                            lambda: rest.get("sessions/bench-s/checkpoints/latest"),
                            lambda: mcp.call_tool("restore_checkpoint", {"session_id": "bench-s"}),
                        ),
                        (
                            "recall (semantic)",
                            lambda: rest.post(
                                "memories/search", json={"query": "Where does Alice work?", "k": 5}
                            ),
                            lambda: mcp.call_tool(
                                "recall", {"layer": "semantic", "query": "Where does Alice work?", "k": 5}
                            ),
                        ),
                    ]
                    for name, rest_call, tool_call in pairs:
                        r = percentiles(await timed(rest_call, calls))
                        t = percentiles(await timed(tool_call, calls))
                        print(
                            f"{name:20s} REST p50 {r['p50']:6.2f} ms p95 {r['p95']:6.2f} ms | "
                            f"MCP p50 {t['p50']:6.2f} ms p95 {t['p95']:6.2f} ms | "
                            f"overhead p50 {t['p50'] - r['p50']:+.2f} ms",
                            flush=True,
                        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=300)
    args = parser.parse_args()
    django_setup()
    _, _, keys = bench_key("bench_mcp", ["bench-mcp"])
    with web_server("uvicorn", workers=1) as server:
        asyncio.run(run(server.url, keys["bench-mcp"], args.calls))


if __name__ == "__main__":
    main()
