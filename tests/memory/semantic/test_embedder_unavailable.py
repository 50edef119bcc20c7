"""A dependency that is down gives a fast, clear JSON 503, never an HTML 500 (issue 7, item 9)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from devstack import free_port
from memory.embeddings import embed_query, get_embedder
from tests.factories import Caller


@pytest.fixture
def embedder_endpoint(settings) -> Iterator[callable]:  # type: ignore[no-untyped-def, valid-type]
    """Point the tenant's embedder at an OpenAI-compatible URL for the test; the process-wide
    embedder and the query cache are rebuilt before and after."""

    def use(url: str, *, timeout: float = 2.0) -> None:
        settings.ENGRAM = {
            **settings.ENGRAM,
            "EMBEDDER": "openai",
            "EMBEDDING_MODEL": "text-embedding-3-small",
            "OPENAI_BASE_URL": url,
            "EMBEDDING_TIMEOUT": timeout,
        }
        get_embedder.cache_clear()
        embed_query.cache_clear()

    yield use
    get_embedder.cache_clear()
    embed_query.cache_clear()


class _Failing(BaseHTTPRequestHandler):
    delay = 0.0

    def do_POST(self) -> None:
        time.sleep(self.delay)
        self.send_response(500)
        self.end_headers()
        self.wfile.write(b"upstream exploded")

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def failing_server() -> Iterator[type[_Failing]]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Failing)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _Failing.url = f"http://127.0.0.1:{server.server_address[1]}/v1"  # type: ignore[attr-defined]
    try:
        yield _Failing
    finally:
        _Failing.delay = 0.0
        server.shutdown()


def assert_503(response, started: float, limit: float) -> None:  # type: ignore[no-untyped-def]
    elapsed = time.monotonic() - started
    assert response.status_code == 503, response.content
    assert response["Content-Type"] == "application/json"
    assert response.json()["code"] == "embedder_unavailable"
    assert elapsed < limit, f"took {elapsed:.1f} s"


def test_search_and_store_with_an_unreachable_embedder_are_fast_503s(
    alice: Caller, embedder_endpoint
) -> None:  # type: ignore[no-untyped-def]
    embedder_endpoint(f"http://127.0.0.1:{free_port()}/v1")  # nothing listens there
    started = time.monotonic()
    assert_503(alice.post("/api/v1/memories/search", {"query": "where does Alice live?"}), started, 5)
    started = time.monotonic()
    assert_503(alice.post("/api/v1/memories", {"content": "Alice lives in Lisbon"}), started, 5)


def test_an_embedder_answering_errors_is_a_503(alice: Caller, embedder_endpoint, failing_server) -> None:  # type: ignore[no-untyped-def]
    embedder_endpoint(failing_server.url)
    started = time.monotonic()
    assert_503(alice.post("/api/v1/memories/search", {"query": "anything"}), started, 5)


def test_a_hanging_embedder_is_a_503_within_its_timeout(
    alice: Caller, embedder_endpoint, failing_server
) -> None:  # type: ignore[no-untyped-def]
    failing_server.delay = 30.0
    embedder_endpoint(failing_server.url, timeout=1.0)
    started = time.monotonic()
    assert_503(alice.post("/api/v1/memories/search", {"query": "anything"}), started, 6)


def test_a_broken_local_model_is_a_503(alice: Caller, embedder_endpoint, settings, tmp_path) -> None:  # type: ignore[no-untyped-def]
    settings.ENGRAM = {**settings.ENGRAM, "EMBEDDER": "fastembed", "EMBEDDING_MODEL_PATH": str(tmp_path)}
    get_embedder.cache_clear()
    embed_query.cache_clear()
    assert_503(alice.post("/api/v1/memories/search", {"query": "anything"}), time.monotonic(), 30)
