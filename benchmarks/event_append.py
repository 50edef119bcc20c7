"""Episodic event append throughput over HTTP, against a real web server process.

Each request is ``POST /api/v1/events`` with a JSON array of ``--batch`` events (default 100), sent
by ``--clients`` concurrent keep-alive ``httpx`` clients (default 2). The script starts the server
itself (gunicorn ``config.wsgi`` with gthread workers, or uvicorn ``config.asgi``; 2 workers, DEBUG
off) on a free port of 127.0.0.1, creates the tenant ``bench_events`` with an agent and a fresh API
key through the services, and prints events/s, per-batch latency percentiles and the peak RSS of the
web server (master plus workers, sampled every 50 ms).

Needs PostgreSQL and Redis: ``DATABASE_URL`` and ``REDIS_URL`` are read from the environment::

    ./engram services --profile bench > /tmp/bench-svc.log 2>&1 &
    eval "$(grep export /tmp/bench-svc.log)"
    export DJANGO_SETTINGS_MODULE=config.settings.local
    .venv/bin/python manage.py migrate_schemas --noinput -v 0
    python -m benchmarks event_append [--batches 300] [--clients 2] [--server uvicorn]
"""

from __future__ import annotations

import argparse
import random
import threading
import time
from datetime import UTC, datetime, timedelta

import httpx
from _common import bench_key, default_server, django_setup, mib, percentiles, web_server

TENANT = "bench_events"
AGENT = "bench-writer"

_TOOLS = ["search_web", "read_file", "sql_query", "send_email", "calendar_lookup", "run_python"]
_TOPICS = ["the quarterly report", "a refund request", "the deployment", "travel plans", "an invoice"]
_SENTENCES = [
    "The user asked about {topic} and wants an answer by Friday.",
    "I will check {topic} with {tool} before replying.",
    "Result from {tool}: 3 matching records for {topic}.",
    "Decided to escalate {topic} to a human reviewer.",
    "Observed that {topic} mentions a deadline that has already passed.",
]


def make_batch(rng: random.Random, size: int, session: str, start: datetime) -> list[dict]:
    """``size`` plausible agent events (messages, tool calls and results, decisions) of one session."""
    kinds = ["message", "tool_call", "tool_result", "decision", "observation"]
    roles = {"message": "user", "tool_call": "assistant", "tool_result": "tool", "decision": "assistant"}
    events = []
    for i in range(size):
        kind = rng.choice(kinds)
        tool, topic = rng.choice(_TOOLS), rng.choice(_TOPICS)
        payload = {"tool": tool, "args": {"q": topic, "limit": rng.randint(1, 50)}} if "tool" in kind else {}
        events.append(
            {
                "session_id": session,
                "execution_id": f"{session}-run",
                "role": roles.get(kind, "system"),
                "kind": kind,
                "content": rng.choice(_SENTENCES).format(topic=topic, tool=tool),
                "payload": payload,
                "occurred_at": (start + timedelta(milliseconds=i)).isoformat(),
            }
        )
    return events


def run_client(
    url: str, key: str, batches: list[list[dict]], latencies: list[float], errors: list[str]
) -> None:
    headers = {"Authorization": f"Bearer {key}"}
    with httpx.Client(base_url=url, headers=headers, timeout=60) as client:
        for batch in batches:
            t0 = time.perf_counter()
            response = client.post("/api/v1/events", json=batch)
            elapsed = (time.perf_counter() - t0) * 1000
            if response.status_code != 201:
                errors.append(f"{response.status_code}: {response.text[:200]}")
                continue
            latencies.append(elapsed)


def run_round(url: str, key: str, per_client: list[list[list[dict]]]) -> tuple[float, list[float], list[str]]:
    latencies: list[float] = []
    errors: list[str] = []
    threads = [
        threading.Thread(target=run_client, args=(url, key, batches, latencies, errors))
        for batches in per_client
    ]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.perf_counter() - t0, latencies, errors


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--batches", type=int, default=300, help="measured batches in total (default 300)")
    parser.add_argument("--batch", type=int, default=100, help="events per request (default 100)")
    parser.add_argument("--clients", type=int, default=2, help="concurrent keep-alive clients (default 2)")
    parser.add_argument("--warmup", type=int, default=10, help="batches per client before measuring")
    parser.add_argument("--server", choices=["gunicorn", "uvicorn"], default=default_server())
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2, help="gthread threads per gunicorn worker")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()

    django_setup()
    _, _, keys = bench_key(TENANT, [AGENT])
    key = keys[AGENT]
    rng = random.Random(args.seed)
    start = datetime.now(UTC)

    def plan(n_per_client: int, tag: str) -> list[list[list[dict]]]:
        return [
            [make_batch(rng, args.batch, f"{tag}-c{c}-s{b // 10}", start) for b in range(n_per_client)]
            for c in range(args.clients)
        ]

    per_client = max(1, args.batches // args.clients)
    warm, measured = plan(args.warmup, "warm"), plan(per_client, "bench")

    with web_server(args.server, workers=args.workers, threads=args.threads) as server:
        _, _, warm_errors = run_round(server.url, key, warm)
        if warm_errors:
            raise SystemExit(f"warm-up failed: {warm_errors[0]}")
        wall, latencies, errors = run_round(server.url, key, measured)
        server.rss.sample()
        peak_total, peak_single = server.rss.peak_total, server.rss.peak_single

    events = len(latencies) * args.batch
    stats = percentiles(latencies)
    workers = f"{args.workers} workers" + (f" x {args.threads} threads" if args.server == "gunicorn" else "")
    print(f"\nEvent append over HTTP: {args.server} ({workers}), {args.clients} keep-alive clients")
    print(f"  batches          {len(latencies)} x {args.batch} events ({len(errors)} failed)")
    print(f"  throughput       {events / wall:,.0f} events/s  ({len(latencies) / wall:,.1f} batches/s)")
    print(
        f"  per batch        p50 {stats['p50']:.1f} ms   p95 {stats['p95']:.1f} ms   "
        f"p99 {stats['p99']:.1f} ms   max {stats['max']:.1f} ms"
    )
    print(f"  web peak RSS     {mib(peak_total)} (master + workers; largest process {mib(peak_single)})")
    if errors:
        print(f"  first error      {errors[0]}")


if __name__ == "__main__":
    main()
