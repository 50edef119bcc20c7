"""Liveness and readiness probes (issue 36, item 1), on a real uvicorn process whose PostgreSQL,
Redis and Neo4j are reached through TCP proxies of this process that forward, refuse (the server
stopped) or accept and never answer (the server hung): ``/readyz`` names what is down within its
bound, ``/healthz`` answers whatever the dependencies do, and neither needs a tenant's host or a key.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from urllib.parse import urlsplit

import httpx
import pytest
from django.db import connection

from devstack import free_port
from tests.core.test_database_down import PostgresProxy, postgres_target
from tests.factories import asgi_server

#: seconds a readiness answer may take: ENGRAM_READINESS_TIMEOUT (1 s) and the server's own time
READY_LIMIT = 2.0


@pytest.fixture
def proxies() -> Iterator[dict[str, PostgresProxy]]:
    redis = urlsplit(os.environ["REDIS_URL"])
    made = {
        "postgresql": PostgresProxy(postgres_target()),
        "redis": PostgresProxy((redis.hostname or "127.0.0.1", redis.port or 6379)),
    }
    try:
        yield made
    finally:
        for proxy in made.values():
            proxy.close()


def probe(port: int, path: str) -> tuple[httpx.Response, float]:
    started = time.monotonic()
    # a bare IP as the host: probes carry no tenant's host name (and none of ALLOWED_HOSTS)
    response = httpx.get(f"http://127.0.0.1:{port}{path}", headers={"Host": "10.1.2.3:8000"}, timeout=30)
    return response, time.monotonic() - started


def server_env(proxies: dict[str, PostgresProxy], **extra: str) -> dict[str, str]:
    settings = connection.settings_dict
    pg = proxies["postgresql"].port
    return {
        "DATABASE_URL": f"postgres://{settings['USER']}@127.0.0.1:{pg}/{settings['NAME']}",
        "REDIS_URL": f"redis://127.0.0.1:{proxies['redis'].port}/0",
        "DATABASE_CONNECT_TIMEOUT": "2",
        "ENGRAM_READINESS_TIMEOUT": "1",
        **extra,
    }


def test_readiness_names_each_dependency_down_within_its_bound_and_liveness_never_asks(
    django_db_setup, proxies: dict[str, PostgresProxy], capsys: pytest.CaptureFixture[str]
) -> None:
    neo4j = PostgresProxy(("127.0.0.1", free_port()))  # nothing behind it: Neo4j is down throughout
    neo4j.set("refuse")
    timings: dict[str, float] = {}
    env = server_env(proxies, NEO4J_URI=f"bolt://127.0.0.1:{neo4j.port}", NEO4J_CONNECTION_TIMEOUT="1")
    try:
        with asgi_server(**env) as port:
            ready, timings["all up"] = probe(port, "/readyz")
            assert ready.status_code == 200, ready.text
            body = ready.json()
            assert body["status"] == "ready"
            assert body["checks"]["postgresql"]["ok"] and body["checks"]["redis"]["ok"]
            # Neo4j is optional by default: reported down, the process stays ready
            assert body["checks"]["neo4j"] == {**body["checks"]["neo4j"], "ok": False, "required": False}
            schema = httpx.get(f"http://127.0.0.1:{port}/api/v1/schema", timeout=30)
            assert schema.status_code == 200 and "/api/v1/memories" in schema.text
            assert "/readyz" not in schema.text and "/healthz" not in schema.text  # not the agents' API

            for name, label in (("postgresql", "PostgreSQL"), ("redis", "Redis")):
                for mode in ("refuse", "hang"):
                    proxies[name].set(mode)
                    response, timings[f"{name} {mode}"] = probe(port, "/readyz")
                    assert response.status_code == 503, (name, mode, response.text)
                    assert response.headers["Retry-After"] == "1"
                    body = response.json()
                    assert body["code"] == "unavailable"
                    assert body["detail"] == f"Not ready: {label} is unavailable.", body
                    assert body["checks"][name]["ok"] is False
                    other = "redis" if name == "postgresql" else "postgresql"
                    assert body["checks"][other]["ok"] is True, body
                    assert timings[f"{name} {mode}"] < READY_LIMIT, timings
                    alive, timings[f"liveness, {name} {mode}"] = probe(port, "/healthz")
                    assert alive.status_code == 200 and alive.json() == {"status": "ok"}
                    assert timings[f"liveness, {name} {mode}"] < 0.5, timings
                proxies[name].set("forward")
                deadline = time.monotonic() + 10
                while probe(port, "/readyz")[0].status_code != 200:  # back once the server is
                    assert time.monotonic() < deadline, f"not ready again after {name} came back"
                    time.sleep(0.3)

            proxies["postgresql"].set("refuse")
            proxies["redis"].set("refuse")
            both, timings["both refused"] = probe(port, "/readyz")
            assert both.status_code == 503
            assert both.json()["detail"] == "Not ready: PostgreSQL and Redis are unavailable."
            assert timings["both refused"] < READY_LIMIT
            assert httpx.post(f"http://127.0.0.1:{port}/readyz", timeout=30).status_code == 405
            proxies["postgresql"].set("forward")
            proxies["redis"].set("forward")

        with asgi_server(**env, ENGRAM_READINESS_NEO4J_REQUIRED="1") as port:
            response, timings["neo4j required, refused"] = probe(port, "/readyz")
            assert response.status_code == 503, response.text
            assert response.json()["detail"] == "Not ready: Neo4j is unavailable."
            assert timings["neo4j required, refused"] < READY_LIMIT
    finally:
        neo4j.close()
    with capsys.disabled():
        print("\n/readyz and /healthz seconds: " + ", ".join(f"{k} {v:.3f}" for k, v in timings.items()))


def test_liveness_answers_while_every_request_thread_is_busy(django_db_setup) -> None:  # type: ignore[no-untyped-def]
    """``/healthz`` is answered on the event loop: with both of Django's threads held by slow
    requests it still answers at once (a probe queued behind them would restart a busy process)."""
    import threading

    with asgi_server("tests.core.slow_asgi:application", ENGRAM_WSGI_THREADS="2") as port:
        slow = [
            threading.Thread(
                target=httpx.get, args=(f"http://127.0.0.1:{port}/slow?seconds=4",), kwargs={"timeout": 30}
            )
            for _ in range(2)
        ]
        for thread in slow:
            thread.start()
        time.sleep(1.0)
        alive, seconds = probe(port, "/healthz")
        assert alive.status_code == 200 and alive.json() == {"status": "ok"}
        assert alive.headers["Cache-Control"] == "no-store"
        assert seconds < 0.5, seconds
        _, waited = probe(port, "/api/v1/me")  # a Django request waits for a thread
        assert waited > 1.0, waited
        for thread in slow:
            thread.join(30)
