"""Latest-checkpoint restore latency, in the service layer and over HTTP, with 10k sessions stored.

The script makes the tenant ``bench_ckpt`` with one agent and a fresh API key, stores ``--sessions``
sessions (default 10,000) of ``--steps`` checkpoints each (default 3; state about 2 KiB of JSON, a
5-step plan) through ``checkpoint_save`` unless they are already there, then measures
``GET /api/v1/sessions/{id}/checkpoints/latest`` on random sessions:

- service layer (``checkpoint_latest`` in this process), warm (Redis) and cold (the Redis copy
  deleted just before each call, untimed: PostgreSQL read plus re-warm);
- HTTP against a real server process (``uvicorn config.asgi:application`` on a free port of
  127.0.0.1, DEBUG off, access log off), one keep-alive ``httpx`` client, sequential requests, warm
  and cold the same way. Latency is the client's wall time per request (send to body read).
  ``--interface wsgi`` serves ``config.wsgi:application`` through uvicorn's WSGI adapter instead,
  for comparison: Django's ASGI handler runs each request's sync middleware and view in a new
  thread, with a thread hop per middleware hook, which costs about 3 ms of CPU per request here.

It prints p50/p95/p99/max in milliseconds and checks the target HTTP p99 <= 15 ms (exit status 1 if
missed). Needs PostgreSQL and Redis; ``DATABASE_URL`` and ``REDIS_URL`` come from the environment::

    ./engram services --profile ckpt > /tmp/ckpt-svc.log 2>&1 &
    eval "$(grep export /tmp/ckpt-svc.log)"
    export DJANGO_SETTINGS_MODULE=config.settings.local
    .venv/bin/python manage.py migrate_schemas --noinput -v 0
    python -m benchmarks checkpoint_restore [--sessions 10000] [--requests 5000] [--interface wsgi]
    kill -TERM %1    # stops PostgreSQL and Redis again (the services command's job)
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from _common import percentiles, record

ROOT = Path(__file__).resolve().parent.parent
TENANT = "bench_ckpt"
AGENT = "bench-restorer"
TARGET_HTTP_P99_MS = 15.0


def django_setup() -> None:
    """Configure Django like a server would (DEBUG off: no per-query bookkeeping)."""
    if not os.environ.get("DATABASE_URL"):
        sys.exit("DATABASE_URL is not set: start the services first (see this script's docstring)")
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.local")
    os.environ["DJANGO_DEBUG"] = "false"
    import django

    django.setup()
    import logging

    for name in ("httpx", "httpcore"):
        logging.getLogger(name).setLevel(logging.WARNING)


def make_state(rng: random.Random, session_no: int, step: int) -> tuple[dict, list]:
    """A plausible agent state (~2 KiB of JSON) and a 5-step plan after ``step``."""
    notes = [f"observation {i}: " + " ".join(rng.choice(_WORDS) for _ in range(12)) for i in range(12)]
    state = {
        "task": f"reconcile invoices for customer {session_no}",
        "step": step,
        "variables": {"customer_id": session_no, "currency": "EUR", "threshold": 250.0, "retries": step % 3},
        "notes": notes,
        "open_questions": ["is the VAT id valid?", "which invoice is the duplicate?"],
        "tool_results": {"search": {"hits": rng.randint(0, 40)}, "sql": {"rows": rng.randint(0, 500)}},
    }
    plan = [
        {"id": i, "tool": tool, "done": i < step}
        for i, tool in enumerate(["search", "sql_query", "compare", "draft_email", "send_email"])
    ]
    return state, plan


_WORDS = "invoice customer total amount due paid refund vendor ledger entry match missing date".split()


def populate(sessions: int, steps: int) -> tuple[object, object, str, float | None]:
    """Ensure the tenant, agent and ``sessions`` x ``steps`` checkpoints; returns (tenant, agent,
    raw key, saves per second or ``None`` when the data was already there).
    """
    from django_tenants.utils import tenant_context

    from agents.models import Agent
    from agents.services import agent_create, api_key_create
    from memory.checkpoints.models import Checkpoint
    from memory.checkpoints.services import checkpoint_save
    from tenants.services import tenant_create

    tenant, _ = tenant_create(slug=TENANT, name="Benchmark checkpoints")
    policy = tenant.working_memory_policy
    with tenant_context(tenant):
        agent = Agent.objects.filter(name=AGENT).first() or agent_create(
            by=None, name=AGENT, role="benchmark"
        )
        _, raw_key = api_key_create(by=None, agent=agent, name="benchmark")
        have = set(
            Checkpoint.objects.filter(step_index=steps - 1).values_list("session_id", flat=True).iterator()
        )
        todo = [n for n in range(sessions) if session_name(n) not in have]
        if not todo:
            return tenant, agent, raw_key, None
        print(f"storing {len(todo)} sessions x {steps} checkpoints through checkpoint_save ...", flush=True)
        rng = random.Random(7)
        started, saved = time.perf_counter(), 0
        for n in todo:
            Checkpoint.objects.filter(session_id=session_name(n)).delete()  # a half-stored earlier run
            for step in range(steps):
                state, plan = make_state(rng, n, step)
                checkpoint_save(
                    agent=agent,
                    session_id=session_name(n),
                    step_index=step,
                    idempotency_key=f"{session_name(n)}-{step}",
                    state=state,
                    plan=plan,
                    policy=policy,
                )
                saved += 1
            if n % 1000 == 999:
                print(f"  {n + 1} sessions", flush=True)
        rate = saved / (time.perf_counter() - started)
    return tenant, agent, raw_key, rate


def session_name(n: int) -> str:
    return f"bench-session-{n:06d}"


def time_calls(
    call: Callable[[str], object], before: Callable[[str], object], names: list[str]
) -> list[float]:
    """Run ``before(name)`` (untimed) then ``call(name)`` (timed) for each name; milliseconds."""
    out = []
    for name in names:
        before(name)
        t0 = time.perf_counter()
        call(name)
        out.append((time.perf_counter() - t0) * 1000)
    return out


@contextlib.contextmanager
def uvicorn_server(workers: int, interface: str = "asgi") -> Iterator[str]:
    """uvicorn on a free port of 127.0.0.1 until the block ends: ``config.asgi:application``, or with
    ``interface="wsgi"`` ``config.wsgi:application`` behind uvicorn's WSGI adapter (a thread pool).
    """
    import httpx

    from devstack import free_port

    port = free_port()
    env = {**os.environ, "DJANGO_DEBUG": "false", "PYTHONUNBUFFERED": "1"}
    app = "config.wsgi:application" if interface == "wsgi" else "config.asgi:application"
    cmd = [
        sys.executable, "-m", "uvicorn", app, "--interface", "wsgi" if interface == "wsgi" else "asgi3",
        "--host", "127.0.0.1",
        "--port", str(port), "--workers", str(workers), "--log-level", "warning", "--no-access-log",
    ]  # fmt: skip
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(f"{url}/api/v1/me", timeout=2).status_code == 401:
                    break
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"uvicorn did not start on port {port}")
            time.sleep(0.2)
        yield url
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def report(label: str, values: list[float]) -> dict[str, float]:
    p = percentiles(values)
    print(
        f"{label:<28} n={int(p['n']):>5}  p50={p['p50']:6.2f}  p95={p['p95']:6.2f}  "
        f"p99={p['p99']:6.2f}  max={p['max']:7.2f}  (ms)",
        flush=True,
    )
    return p


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--steps", type=int, default=3, help="checkpoints per session")
    parser.add_argument("--requests", type=int, default=5000, help="restores per measurement")
    parser.add_argument("--warmup", type=int, default=300)
    parser.add_argument("--workers", type=int, default=1, help="uvicorn worker processes")
    parser.add_argument(
        "--interface",
        choices=["asgi", "wsgi"],
        default="asgi",
        help="serve config.asgi (the default, as ./engram up does) or config.wsgi through uvicorn",
    )
    args = parser.parse_args()

    django_setup()
    import httpx
    from django.db import connection
    from django_tenants.utils import tenant_context

    from core.redis import get_redis
    from memory.checkpoints.services import cache_key, checkpoint_latest

    tenant, agent, raw_key, rate = populate(args.sessions, args.steps)
    if rate is not None:
        print(f"saves through the service layer: {rate:,.0f} checkpoints/s (sequential, one process)")
    policy = tenant.working_memory_policy  # type: ignore[attr-defined]
    redis = get_redis()
    rng = random.Random(11)

    def sample(n: int) -> list[str]:
        return [session_name(rng.randrange(args.sessions)) for _ in range(n)]

    with tenant_context(tenant):
        keys = {session_name(n): cache_key(session_name(n), agent.pk) for n in range(args.sessions)}  # type: ignore[attr-defined]
    expected_step = args.steps - 1

    # --- service layer -----------------------------------------------------------------------------------
    results: dict[str, dict[str, float]] = {}
    with tenant_context(tenant):

        def restore(name: str, source: str) -> None:
            restored = checkpoint_latest(agent=agent, session_id=name, policy=policy)  # type: ignore[arg-type]
            assert restored.source == source, (name, restored.source)

        # every session's copy in Redis (also warms psycopg's prepared plans and the imports)
        for name in keys:
            checkpoint_latest(agent=agent, session_id=name, policy=policy)  # type: ignore[arg-type]

        results["service warm (redis)"] = report(
            "service warm (redis)",
            time_calls(lambda n: restore(n, "redis"), lambda n: None, sample(args.requests)),
        )
        results["service cold (postgres)"] = report(
            "service cold (postgres)",
            time_calls(
                lambda n: restore(n, "postgres"), lambda n: redis.delete(keys[n]), sample(args.requests)
            ),
        )
    connection.close()

    # --- HTTP -----------------------------------------------------------------------------------------------
    for name in keys:  # warm again: the cold run above deleted some copies
        with tenant_context(tenant):
            checkpoint_latest(agent=agent, session_id=name, policy=policy)  # type: ignore[arg-type]
    connection.close()
    with (
        uvicorn_server(args.workers, args.interface) as url,
        httpx.Client(base_url=url, headers={"Authorization": f"Bearer {raw_key}"}, timeout=10) as client,
    ):

        def get(name: str, source: str) -> None:
            response = client.get(f"/api/v1/sessions/{name}/checkpoints/latest")
            assert response.status_code == 200, response.text
            assert response.headers["Engram-Source"] == source, (name, response.headers)
            assert len(response.content) > 1000

        for name in sample(args.warmup):
            response = client.get(f"/api/v1/sessions/{name}/checkpoints/latest")
            assert response.status_code == 200 and response.json()["step_index"] == expected_step
        print(f"HTTP: uvicorn, {args.interface.upper()}, {args.workers} worker(s)")
        results["http warm (redis)"] = report(
            "http warm (redis)", time_calls(lambda n: get(n, "redis"), lambda n: None, sample(args.requests))
        )
        results["http cold (postgres)"] = report(
            "http cold (postgres)",
            time_calls(lambda n: get(n, "postgres"), lambda n: redis.delete(keys[n]), sample(args.requests)),
        )

    # the figures of --json (the docs' benchmarks page plots the distributions)
    record(sessions=args.sessions, requests=args.requests, latency_ms=results)
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"load average (1, 5, 15 min) at the end: {load} on {os.cpu_count()} CPUs")
    worst = max(results["http warm (redis)"]["p99"], results["http cold (postgres)"]["p99"])
    verdict = "met" if worst <= TARGET_HTTP_P99_MS else "MISSED"
    print(f"target HTTP p99 <= {TARGET_HTTP_P99_MS:.0f} ms: {verdict} (worst p99 {worst:.2f} ms)")
    return 0 if worst <= TARGET_HTTP_P99_MS else 1


if __name__ == "__main__":
    sys.exit(main())
