"""Page loads of the people's console against a seeded tenant: the home page of each role, the
timeline of a 1,000-event session and the contradiction queue with 1,000 open items (target p95
< 500 ms each).

The tenant (``--tenant``, default ``bench_console``) is seeded once through the product's services
and kept for later runs (a run finds the rows there and skips the seed; ``--drop`` removes it
afterwards): ``--contradictions`` open contradictions (two agents asserting different employers of
one person each, through ``fact_assert``), one session of ``--events`` events (messages, tool calls
answered by their results, decisions naming facts, through ``events_append``) with the first facts
asserted in it, erasure requests and hold releases waiting for a second officer, and holds whose
review is due. The people: two compliance officers (``olga`` asked for everything, ``pavel`` is the
second officer), an operator (``oscar``) and a staff user in no group (``nobody``).

Each page is fetched over HTTP from uvicorn (one worker, DEBUG off) on this machine, logged in as
the person, ``--warmup`` times and then ``--requests`` times in sequence (n >= 50 by default): the
figure is the time from the request to the last byte of the page (server time plus a loopback
round trip; the pages load no fragments lazily). The timeline is measured on its first page and
on later pages reached through its keyset cursor. Needs PostgreSQL and Redis::

    python -m devstack services --profile bench > /tmp/bench-svc.log 2>&1 &
    eval "$(grep export /tmp/bench-svc.log)"
    DJANGO_SETTINGS_MODULE=config.settings.local python manage.py migrate_schemas --noinput -v 0
    python -m benchmarks console_pages [--contradictions 1000] [--events 1000] [--requests 50] [--json]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from _common import ROOT, django_setup, percentiles, record

TARGET_P95_MS = 500.0
PASSWORD = "bench-pw-console-1"
SESSION = "s-long"
PEOPLE = {"olga": "compliance officer", "pavel": "compliance officer", "oscar": "operator", "nobody": ""}


def load() -> str:
    return "load average " + ", ".join(f"{x:.2f}" for x in os.getloadavg())


def host_of(slug: str) -> str:
    return f"{slug.replace('_', '-')}.localhost"


def _people() -> None:
    from django.contrib.auth.models import Group, User

    for name, group in PEOPLE.items():
        if User.objects.filter(username=name).exists():
            continue
        user = User.objects.create_user(name, f"{name}@example.com", PASSWORD, is_staff=True)
        if group:
            user.groups.add(Group.objects.get(name=group))


def _contradictions(alice: Any, bob: Any, count: int) -> None:
    """``count`` open contradictions; the first 30 asserted in the long session."""
    from memory.knowledge.models import Contradiction, ContradictionStatus
    from memory.knowledge.services import FactData, FactObject, fact_assert

    have = Contradiction.objects.filter(status=ContradictionStatus.OPEN).count()
    for i in range(have, count):
        session = SESSION if i < 30 else f"s-kg-{i % 40:02d}"
        for agent, employer, confidence in ((alice, f"Acme {i}", 0.7), (bob, f"Globex {i}", 0.9)):
            fact_assert(
                agent=agent,
                data=FactData(
                    subject=f"Person {i:04d}",
                    predicate="works_at",
                    object=FactObject(entity=employer),
                    confidence=confidence,
                    session_id=session,
                ),
            )


def _session(alice: Any, count: int) -> None:
    """The long session: ``count`` events in batches, a tool call answered by its result every few
    turns and a decision naming a fact every tenth event."""
    from memory.episodic.models import Event, EventKind
    from memory.episodic.services import EventData, events_append
    from memory.knowledge.models import Fact

    have = Event.objects.filter(session_id=SESSION).count()
    fact_ids: list[int | None] = [*Fact.objects.filter(session_id=SESSION).values_list("pk", flat=True)[:30]]
    fact_ids = fact_ids or [None]
    start = datetime.now(UTC) - timedelta(hours=2)
    batch: list[EventData] = []
    for i in range(have, count):
        at = start + timedelta(seconds=i * 3)
        payload: dict[str, Any]
        if i % 10 == 9:
            kind, payload = (
                EventKind.DECISION,
                {"fact_id": fact_ids[i % len(fact_ids)], "because": "newer source"},
            )
        elif i % 5 == 1:
            kind, payload = EventKind.TOOL_CALL, {"tool": "crm_lookup", "call_id": f"c{i}", "args": {"q": i}}
        elif i % 5 == 2:
            kind, payload = EventKind.TOOL_RESULT, {"call_id": f"c{i - 1}", "rows": i % 17}
        else:
            kind, payload = EventKind.MESSAGE, {}
        batch.append(
            EventData(
                session_id=SESSION,
                kind=kind,
                content=f"{kind} {i}: checked the customer's record against the order and noted the total",
                payload={k: v for k, v in payload.items() if v is not None},
                occurred_at=at,
                data_subject=f"cust-{i % 7}",
            )
        )
        if len(batch) == 200:
            events_append(agent=alice, events=batch)
            batch = []
    if batch:
        events_append(agent=alice, events=batch)


def _waiting(waiting: int) -> None:
    """Erasures and hold releases olga asked for (the second officer's), and holds whose review
    is due within 20 days."""
    from compliance import services
    from compliance.models import ErasureRequest, LegalHold

    for i in range(ErasureRequest.objects.count(), waiting):
        services.erasure_request(
            kind="subject", value=f"cust-gone-{i}", legal_basis="GDPR Art. 17(1)(a)", note="", username="olga"
        )
    for i in range(LegalHold.objects.count(), waiting):
        hold = services.hold_place(
            kind="subject", value=f"cust-held-{i}", reason="litigation", username="olga"
        )
        if i % 2 == 0:
            services.hold_release(hold=hold, username="olga", reason="case closed")
    today = datetime.now(UTC).date()
    for i in range(LegalHold.objects.filter(value__startswith="cust-due-").count(), waiting):
        services.hold_place(
            kind="subject",
            value=f"cust-due-{i}",
            reason="regulator's inquiry",
            username="pavel",
            review_by=today + timedelta(days=i % 20),
        )


def seed(slug: str, *, contradictions: int, events: int, waiting: int) -> float:
    """Seed tenant ``slug`` (what is there already is kept); the seconds it took."""
    from django_tenants.utils import tenant_context

    from agents.models import Agent
    from agents.services import agent_create
    from tenants.services import tenant_create

    t0 = time.perf_counter()
    tenant, _ = tenant_create(slug=slug, name=f"Benchmark {slug}", domain=host_of(slug))
    with tenant_context(tenant):
        _people()
        alice, bob = (
            Agent.objects.filter(name=name).first() or agent_create(by=None, name=name)
            for name in ("alice", "bob")
        )
        _contradictions(alice, bob, contradictions)
        _session(alice, events)
        _waiting(waiting)
    return time.perf_counter() - t0


def drop(slug: str) -> None:
    """Drop tenant ``slug`` once its holds are released (olga asks, pavel confirms)."""
    from _common import drop_tenant
    from django_tenants.utils import tenant_context

    from compliance import services
    from compliance.models import LegalHold
    from tenants.models import Tenant

    tenant = Tenant.objects.get(schema_name=slug)
    with tenant_context(tenant):
        for hold in LegalHold.objects.filter(released_at__isnull=True):
            if not hold.release_waiting:
                hold = services.hold_release(hold=hold, username="olga", reason="benchmark over")
            if hold.active:
                services.hold_release_confirm(hold=hold, username="pavel")
    drop_tenant(tenant)


def _client(base: str, host: str, username: str) -> Any:
    import httpx

    client = httpx.Client(base_url=base, headers={"Host": host}, timeout=60)
    page = client.get("/admin/login/")
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
    assert token, "no CSRF token on the login page"
    done = client.post(
        "/admin/login/",
        data={"username": username, "password": PASSWORD, "csrfmiddlewaretoken": token.group(1)},
        headers={"Referer": f"http://{host}/admin/login/"},
    )
    assert done.status_code == 302, (username, done.status_code, done.text[:300])
    return client


def timed(client: Any, urls: Callable[[int], str], *, warmup: int, n: int, expect: str) -> dict[str, float]:
    """``warmup`` + ``n`` sequential GETs of ``urls(i)``; percentiles of the last ``n`` (ms)."""
    latencies = []
    for i in range(warmup + n):
        t0 = time.perf_counter()
        page = client.get(urls(i))
        elapsed = (time.perf_counter() - t0) * 1000
        assert page.status_code == 200 and expect in page.text, (urls(i), page.status_code, page.text[:300])
        if i >= warmup:
            latencies.append(elapsed)
    return percentiles(latencies)


def timeline_pages(client: Any) -> list[str]:
    """The URLs of every page of the long session, first to last, through the keyset cursor."""
    pages = [f"/admin/sessions/?session={SESSION}"]
    while True:
        page = client.get(pages[-1])
        nxt = re.search(r'id="timeline-next" href="([^"]+)"', page.text)
        if not nxt or len(pages) > 500:
            return pages
        pages.append("/admin/sessions/" + nxt.group(1).replace("&amp;", "&"))


def measure(base: str, host: str, *, warmup: int, n: int) -> dict[str, dict[str, float]]:
    """Each page's percentiles, by name."""
    figures: dict[str, dict[str, float]] = {}
    clients = {name: _client(base, host, name) for name in PEOPLE}
    try:
        for name in PEOPLE:
            figures[f"home ({name})"] = timed(
                clients[name], lambda i: "/admin/", warmup=warmup, n=n, expect='id="site-name"'
            )
        olga = clients["olga"]
        pages = timeline_pages(olga)
        figures["timeline, first page"] = timed(olga, lambda i: pages[0], warmup=warmup, n=n, expect="tl-row")
        later = pages[1:] or pages
        figures[f"timeline, later pages ({len(later)})"] = timed(
            olga, lambda i: later[i % len(later)], warmup=warmup, n=n, expect="tl-row"
        )
        oscar = clients["oscar"]
        queue = "/admin/memory/contradiction/queue/"
        figures["contradiction queue"] = timed(oscar, lambda i: queue, warmup=warmup, n=n, expect="cq-")
        listing = "/admin/memory/contradiction/?status__exact=open"
        figures["contradictions list (open)"] = timed(
            oscar, lambda i: listing, warmup=warmup, n=n, expect="result_list"
        )
    finally:
        for client in clients.values():
            client.close()
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tenant", default="bench_console")
    parser.add_argument("--contradictions", type=int, default=1000)
    parser.add_argument("--events", type=int, default=1000)
    parser.add_argument("--waiting", type=int, default=20, help="erasures and holds waiting (each)")
    parser.add_argument("--requests", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--drop", action="store_true", help="drop the tenant at the end")
    args = parser.parse_args()
    django_setup()
    from devstack import free_port
    from devstack.web import uvicorn_command, wait_for_http

    print(f"start: {load()}", flush=True)
    seconds = seed(args.tenant, contradictions=args.contradictions, events=args.events, waiting=args.waiting)
    print(
        f"seed             {args.contradictions:,} open contradictions, a {args.events:,}-event session, "
        f"{args.waiting} erasures and holds waiting ({seconds:,.1f} s)",
        flush=True,
    )
    port = free_port()
    env = {**os.environ, "DJANGO_DEBUG": "false"}
    server = subprocess.Popen(uvicorn_command(port), cwd=ROOT, env=env, start_new_session=True)
    missed = []
    try:
        base = f"http://127.0.0.1:{port}"
        wait_for_http(f"{base}/api/v1/me", server, timeout=60)
        figures = measure(base, host_of(args.tenant), warmup=args.warmup, n=args.requests)
        for name, stats in figures.items():
            print(
                f"{name:<34} n={stats['n']:.0f}  p50 {stats['p50']:6.1f} ms  p95 {stats['p95']:6.1f} ms  "
                f"max {stats['max']:6.1f} ms"
            )
            if stats["p95"] >= TARGET_P95_MS:
                missed.append(name)
        record(pages=figures, target_p95_ms=TARGET_P95_MS, tenant=args.tenant, load=list(os.getloadavg()))
    finally:
        server.terminate()
        server.wait(20)
        if args.drop:
            drop(args.tenant)
    print(f"end: {load()}; targets missed: {', '.join(missed) or 'none'}")
    sys.exit(1 if missed else 0)


if __name__ == "__main__":
    main()
