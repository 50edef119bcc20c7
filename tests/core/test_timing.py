"""Where a request's time goes (``core.timing``): its access log line names the milliseconds in
PostgreSQL and in the embedding model, and the process counts both for ``/metrics``."""

from __future__ import annotations

import logging

import pytest

from core.timing import SPENT, ledger, spent
from tests.factories import Caller


def _counted(account: str) -> float:
    return SPENT.labels(account)._value.get()


def test_spent_adds_to_the_open_ledger_and_the_counter_even_when_the_block_raises() -> None:
    before = _counted("test")
    with ledger() as accounts:
        with spent("test"):
            pass
        with pytest.raises(RuntimeError), spent("test"):
            raise RuntimeError("boom")
    assert accounts["test"] > 0
    with spent("test"):  # no ledger open: the counter only
        pass
    assert _counted("test") > before + accounts["test"]


def test_the_access_line_names_database_and_embedding_time(
    alice: Caller, caplog: pytest.LogCaptureFixture
) -> None:
    """A search embeds its query on the request's thread and reads PostgreSQL: both show, and the
    embedding counter grows by at least what the line names."""
    embedded = _counted("embed")
    with caplog.at_level(logging.INFO, logger="engram.access"):
        response = alice.post("/api/v1/memories/search", {"query": "where does the load go?", "k": 3})
    assert response.status_code == 200, response.content
    [line] = [r for r in caplog.records if r.name == "engram.access"]
    assert 0 < line.db_ms < line.duration_ms  # type: ignore[attr-defined]
    assert 0 < line.embed_ms < line.duration_ms  # type: ignore[attr-defined]
    assert _counted("embed") - embedded >= line.embed_ms / 1000 * 0.999  # type: ignore[attr-defined]
    with caplog.at_level(logging.INFO, logger="engram.access"):
        alice.get("/api/v1/me")
    me = [r for r in caplog.records if r.name == "engram.access"][-1]
    assert me.embed_ms == 0  # type: ignore[attr-defined]
