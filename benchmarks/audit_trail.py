"""The compliance console at 1M events: verify_chain, export throughput with the worker's peak RSS,
and the session timeline page's latency.

The tenant ``bench_compliance`` is filled once with ``--events`` events (default 1,000,000) through
the real ``events_append`` in batches of ``--batch`` (default 5,000): ``--agents`` agents (20), each
session ``--session-events`` long (50), about one event in ten a decision; an anchor is signed at
the end. A later run finds the events there and skips the fill. Then:

1. ``verify_chain``: ``compliance.verification.trail_verify`` in this process, over every event
   (target < 60 s);
2. export of everything by a real Celery worker (``celery -A config worker --pool solo``, a child
   process), timed from the request to the archive written; the worker's RSS is sampled every 50 ms
   (target >= 20,000 events/s, peak RSS < 300 MB); the archive is checked with the offline
   verifier;
3. the session timeline (``/admin/sessions/?session=...``) over HTTP against uvicorn, logged in as a
   compliance officer, ``--requests`` pages (default 300) of random sessions (first pages, and
   later pages through the keyset cursor), sequential (target p95 <= 200 ms).

It prints the figures, the load average before and after, and exits 1 if a target is missed. Needs
PostgreSQL and Redis::

    ./engram services --profile bench > /tmp/bench-svc.log 2>&1 &
    eval "$(grep export /tmp/bench-svc.log)"
    export DJANGO_SETTINGS_MODULE=config.settings.local
    .venv/bin/python manage.py migrate_schemas --noinput -v 0
    python -m benchmarks audit_trail [--events 1000000] [--requests 300]
"""

from __future__ import annotations

import argparse
import os
import random
import re
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from _common import ROOT, RssSampler, django_setup, mib, percentiles

TENANT = "bench_compliance"
HOST = "bench-compliance.localhost"
TARGET_VERIFY_S = 60.0
TARGET_EXPORT_EPS = 20_000.0
TARGET_RSS_BYTES = 300 * 2**20
TARGET_TIMELINE_P95_MS = 200.0


def load() -> str:
    return "load average " + ", ".join(f"{x:.2f}" for x in os.getloadavg())


def signing_key_env() -> None:
    """A signing key for this benchmark (``var/bench/secrets``), unless one is configured."""
    if os.environ.get("ENGRAM_SIGNING_KEY") or os.environ.get("ENGRAM_SIGNING_KEY_FILE"):
        return
    sys.path.insert(0, str(ROOT))
    from devstack.web import private_signing_key

    os.environ["ENGRAM_SIGNING_KEY_FILE"] = str(
        private_signing_key(ROOT / "var" / "bench" / "secrets" / "signing-key.pem")
    )
    os.environ.setdefault("ENGRAM_EXPORT_DIR", str(ROOT / "var" / "bench" / "exports"))


def fill(events: int, batch: int, agents: int, session_events: int) -> tuple[int, float]:
    """Ensure ``events`` events in the tenant; returns (events there, seconds spent filling)."""
    from django_tenants.utils import tenant_context

    from agents.models import Agent
    from agents.services import agent_create
    from memory.episodic.models import Event, EventKind
    from memory.episodic.services import EventData, events_append
    from tenants.services import tenant_create

    tenant, _ = tenant_create(slug=TENANT, name="Benchmark compliance", domain=HOST)
    with tenant_context(tenant):
        have = Event.objects.count()
        if have >= events:
            return 0, 0.0
        crew = [
            Agent.objects.filter(name=f"agent-{i}").first() or agent_create(by=None, name=f"agent-{i}")
            for i in range(agents)
        ]
        rng = random.Random(7)
        start = datetime(2026, 1, 1, tzinfo=UTC)
        kinds = [EventKind.MESSAGE, EventKind.TOOL_CALL, EventKind.TOOL_RESULT, EventKind.OBSERVATION]
        t0 = time.perf_counter()
        n = have
        while n < events:
            size = min(batch, events - n)
            # one batch per agent turn: sessions are contiguous runs of session_events events
            agent = crew[(n // session_events) % agents]
            items = []
            for i in range(n, n + size):
                session = f"s-{i // session_events:06d}"
                kind = EventKind.DECISION if i % 10 == 9 else rng.choice(kinds)
                items.append(
                    EventData(
                        session_id=session,
                        kind=kind,
                        content=f"{kind} {i} of {session}: checked the invoice against the order and noted the total",
                        payload={"i": i, "tool": "sql_query", "rows": i % 17}
                        if kind != EventKind.MESSAGE
                        else {},
                        occurred_at=start + timedelta(seconds=i),
                    )
                )
            events_append(agent=agent, events=items)
            n += size
            if n % 100_000 < size:
                print(
                    f"  filled {n:,} events ({(n - have) / (time.perf_counter() - t0):,.0f} events/s)",
                    flush=True,
                )
        from compliance.services import anchor_head

        anchor_head()
        return n - have, time.perf_counter() - t0


def bench_verify(tenant: object) -> tuple[float, int, bool]:
    from django_tenants.utils import tenant_context

    from compliance.verification import trail_verify

    with tenant_context(tenant):
        t0 = time.perf_counter()
        report = trail_verify()
        return time.perf_counter() - t0, report.chain.checked, report.ok


def bench_export(tenant: object) -> tuple[float, int, int, int, str]:
    """Export everything through a real worker; (seconds, events, worker peak RSS, archive bytes, path)."""
    from django_tenants.utils import tenant_context

    from compliance.models import ExportStatus
    from compliance.services import export_request

    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "config", "worker", "--pool", "solo", "--loglevel", "WARNING"],
        cwd=ROOT,
        env=env,
        start_new_session=True,
    )
    try:
        time.sleep(6)  # the worker imports Django and connects to the broker
        sampler = RssSampler(worker.pid).start()
        with tenant_context(tenant):
            t0 = time.perf_counter()
            export = export_request(username="bench-officer", scope="all")
            while True:
                export.refresh_from_db()
                if export.is_done:
                    break
                if worker.poll() is not None:
                    raise SystemExit("the worker died")
                time.sleep(0.1)
            elapsed = time.perf_counter() - t0
        sampler.stop()
        if export.status != ExportStatus.DONE:
            raise SystemExit(f"export failed: {export.error}")
        return elapsed, int(export.events_done), sampler.peak_total, int(export.size or 0), export.path
    finally:
        worker.terminate()
        worker.wait(30)


def bench_timeline(requests: int, sessions: int) -> dict[str, float]:
    import httpx
    from django.contrib.auth.models import Group, User
    from django_tenants.utils import schema_context

    from devstack import free_port
    from devstack.web import uvicorn_command, wait_for_http

    with schema_context(TENANT):
        user = User.objects.filter(username="bench-officer").first()
        if user is None:
            user = User.objects.create_user("bench-officer", "", "bench-pw-12345", is_staff=True)
            user.groups.add(Group.objects.get(name="compliance officer"))
    port = free_port()
    env = {**os.environ, "DJANGO_DEBUG": "false"}
    server = subprocess.Popen(uvicorn_command(port), cwd=ROOT, env=env, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for_http(f"{base}/api/v1/me", server, timeout=60)
        with httpx.Client(base_url=base, headers={"Host": HOST}, timeout=30) as client:
            login = client.get("/admin/login/")
            token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', login.text)
            assert token, "no CSRF token on the login page"
            done = client.post(
                "/admin/login/",
                data={
                    "username": "bench-officer",
                    "password": "bench-pw-12345",
                    "csrfmiddlewaretoken": token.group(1),
                },
                headers={"Referer": f"http://{HOST}/admin/login/"},
            )
            assert done.status_code == 302, done.text[:500]
            rng = random.Random(11)
            latencies = []
            for i in range(requests + 10):
                session = f"s-{rng.randrange(sessions):06d}"
                params = {"session": session}
                t0 = time.perf_counter()
                page = client.get("/admin/sessions/", params=params)
                elapsed = (time.perf_counter() - t0) * 1000
                assert page.status_code == 200 and "tl-row" in page.text, page.status_code
                nxt = re.search(r'id="timeline-next" href="([^"]+)"', page.text)
                if i >= 10:
                    latencies.append(elapsed)
                if nxt and i % 3 == 0:  # a later page through the keyset cursor
                    url = "/admin/sessions/" + nxt.group(1).replace("&amp;", "&")
                    t0 = time.perf_counter()
                    later = client.get(url)
                    if i >= 10:
                        latencies.append((time.perf_counter() - t0) * 1000)
                    assert later.status_code == 200
        return percentiles(latencies)
    finally:
        server.terminate()
        server.wait(20)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--batch", type=int, default=5_000)
    parser.add_argument("--agents", type=int, default=20)
    parser.add_argument("--session-events", type=int, default=50)
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--skip", choices=["verify", "export", "timeline"], action="append", default=[])
    args = parser.parse_args()
    signing_key_env()
    django_setup()
    from django_tenants.utils import tenant_context

    from memory.episodic.models import Event
    from tenants.models import Tenant

    print(f"start: {load()}", flush=True)
    added, fill_s = fill(args.events, args.batch, args.agents, args.session_events)
    tenant = Tenant.objects.get(schema_name=TENANT)
    with tenant_context(tenant):
        have = Event.objects.count()
    if fill_s:
        print(
            f"fill             {added:,} events appended in {fill_s:,.0f} s ({added / fill_s:,.0f} events/s, "
            f"events_append in batches of {args.batch:,}); {have:,} in the tenant"
        )
    else:
        print(f"fill             {have:,} events already there")
    missed = []
    if "verify" not in args.skip:
        seconds, checked, ok = bench_verify(tenant)
        print(
            f"verify_chain     {checked:,} events in {seconds:.1f} s ({checked / seconds:,.0f} events/s), intact: {ok}  [{load()}]"
        )
        if seconds >= TARGET_VERIFY_S or not ok:
            missed.append("verify_chain")
    if "export" not in args.skip:
        seconds, events, rss, size, path = bench_export(tenant)
        print(
            f"export (all)     {events:,} events in {seconds:.1f} s ({events / seconds:,.0f} events/s), "
            f"archive {mib(size)}, worker peak RSS {mib(rss)}  [{load()}]"
        )
        from compliance import verify_export

        t0 = time.perf_counter()
        report = verify_export.verify(path)
        print(
            f"offline verify   {'OK' if report.ok else report.failures[:3]} in {time.perf_counter() - t0:.1f} s"
        )
        if events / seconds < TARGET_EXPORT_EPS or rss >= TARGET_RSS_BYTES or not report.ok:
            missed.append("export")
        Path(path).unlink(missing_ok=True)
    if "timeline" not in args.skip:
        stats = bench_timeline(args.requests, have // args.session_events)
        print(
            f"timeline page    n={stats['n']:.0f} p50 {stats['p50']:.1f} ms  p95 {stats['p95']:.1f} ms  "
            f"p99 {stats['p99']:.1f} ms  max {stats['max']:.1f} ms  [{load()}]"
        )
        if stats["p95"] > TARGET_TIMELINE_P95_MS:
            missed.append("timeline")
    print(f"end: {load()}; targets missed: {', '.join(missed) or 'none'}")
    sys.exit(1 if missed else 0)


if __name__ == "__main__":
    main()
