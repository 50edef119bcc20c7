"""Checkpoint put and get_tuple through ``EngramCheckpointSaver`` (over HTTP to one uvicorn process,
DEBUG off) against LangGraph's own ``PostgresSaver`` on the same PostgreSQL, the same payloads, in
one run with the rounds interleaved (the two savers alternate which goes first), so the ratio
holds even when the machine's load inflates both.

Each round saves the next checkpoint of one thread per saver (a LangGraph-shaped checkpoint: a
``messages`` channel that grows by one ~200-byte message a round up to ``--window`` messages, a
``step`` counter, channel versions and versions seen; every channel changes, so PostgresSaver
writes each blob) and then restores the thread's latest (``get_tuple`` without a checkpoint id).
PostgresSaver runs in its own schema (``langgraph_bench``) over one autocommit psycopg connection.
Prints p50/p99 in milliseconds per operation and saver, their ratio, and ``uptime``::

    ./engram services --profile bench > /tmp/bench-svc.log 2>&1 &
    eval "$(grep export /tmp/bench-svc.log)"
    export DJANGO_SETTINGS_MODULE=config.settings.local
    .venv/bin/python manage.py migrate_schemas --noinput -v 0
    python -m benchmarks langgraph_saver --rounds 300
"""

from __future__ import annotations

import argparse
import os
import subprocess
import time
import uuid
from datetime import UTC, datetime
from typing import Any

from _common import bench_key, django_setup, percentiles, web_server


def checkpoint(step: int, window: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """A checkpoint after ``step`` and its new channel versions (every channel changed)."""
    from langgraph.checkpoint.base.id import uuid6

    messages = [
        {"role": "user" if i % 2 else "assistant", "content": f"turn {i}: " + "lorem ipsum dolor " * 10}
        for i in range(max(0, step - window), step)
    ]
    versions = {"messages": step + 1, "step": step + 1}
    return (
        {
            "v": 1,
            "id": str(uuid6(clock_seq=step)),
            "ts": datetime.now(UTC).isoformat(),
            "channel_values": {"messages": messages, "step": step},
            "channel_versions": versions,
            "versions_seen": {"agent": {"messages": step}, "tools": {"step": step}},
            "updated_channels": ["messages", "step"],
        },
        versions,
    )


def run(url: str, key: str, rounds: int, window: int) -> None:
    import psycopg
    from engram_client.langgraph import EngramCheckpointSaver
    from langgraph.checkpoint.base import BaseCheckpointSaver
    from langgraph.checkpoint.postgres import PostgresSaver

    database_url = os.environ["DATABASE_URL"]
    with psycopg.connect(database_url, autocommit=True) as admin:
        admin.execute("CREATE SCHEMA IF NOT EXISTS langgraph_bench")
    conn = psycopg.connect(database_url, autocommit=True, options="-c search_path=langgraph_bench")
    postgres = PostgresSaver(conn)  # type: ignore[arg-type]  # a plain connection is what it documents
    postgres.setup()
    engram = EngramCheckpointSaver(url, key)
    threads = {"engram": f"bench-{uuid.uuid4().hex[:8]}", "postgres": f"bench-{uuid.uuid4().hex[:8]}"}
    savers: dict[str, BaseCheckpointSaver[Any]] = {"engram": engram, "postgres": postgres}
    parents: dict[str, str | None] = {"engram": None, "postgres": None}
    timings: dict[tuple[str, str], list[float]] = {(s, op): [] for s in savers for op in ("put", "get_tuple")}
    warmup = 20
    for n in range(rounds + warmup):
        cp, versions = checkpoint(n, window)
        order = ("engram", "postgres") if n % 2 == 0 else ("postgres", "engram")
        for name in order:
            saver = savers[name]
            config: dict[str, Any] = {"configurable": {"thread_id": threads[name], "checkpoint_ns": ""}}
            if parents[name]:
                config["configurable"]["checkpoint_id"] = parents[name]
            t0 = time.perf_counter()
            saved = saver.put(config, cp, {"source": "loop", "step": n, "parents": {}}, versions)  # type: ignore[arg-type]  # TypedDicts built as dicts
            t1 = time.perf_counter()
            got = saver.get_tuple({"configurable": {"thread_id": threads[name], "checkpoint_ns": ""}})
            t2 = time.perf_counter()
            assert got is not None and got.checkpoint["id"] == cp["id"], name
            assert got.checkpoint["channel_values"]["step"] == n
            parents[name] = saved["configurable"]["checkpoint_id"]
            if n >= warmup:
                timings[(name, "put")].append((t1 - t0) * 1000)
                timings[(name, "get_tuple")].append((t2 - t1) * 1000)
    engram.close()
    conn.close()

    print(f"rounds {rounds} (after {warmup} warm-up), window {window} messages, interleaved")
    for op in ("put", "get_tuple"):
        e, p = percentiles(timings[("engram", op)]), percentiles(timings[("postgres", op)])
        print(
            f"{op:10s} EngramCheckpointSaver p50 {e['p50']:6.2f} ms p99 {e['p99']:6.2f} ms | "
            f"PostgresSaver p50 {p['p50']:6.2f} ms p99 {p['p99']:6.2f} ms | "
            f"ratio p50 {e['p50'] / p['p50']:.2f}x p99 {e['p99'] / p['p99']:.2f}x",
            flush=True,
        )
    print("uptime:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--window", type=int, default=20, help="messages kept in the checkpoint")
    args = parser.parse_args()
    django_setup()
    _, _, keys = bench_key("bench_lg", ["bench-lg"])
    print("uptime:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    with web_server("uvicorn", workers=1) as server:
        run(server.url, keys["bench-lg"], args.rounds, args.window)


if __name__ == "__main__":
    main()
