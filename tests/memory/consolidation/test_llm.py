"""With an OpenAI-compatible chat endpoint: fact extraction for memories without a hint, abstractive
summaries; responses replayed from ``recorded/chat.json`` by a local HTTP server (``tests.chat_replay``) (no network). Those
replies are hand-written in the shape of OpenAI's ``/chat/completions`` answers (no model can be
called where this is built): they test the requests, the parsing and the fallbacks, not what a
real model would extract or write. An
endpoint that is down: summaries fall back to the extractive summarizer, promotion fails its run
with a clear error (it cannot tell facts without the model) and promotes nothing."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from django.conf import settings
from django_tenants.utils import tenant_context

from devstack import free_port
from memory.consolidation.models import RunStatus, SummaryNode
from memory.consolidation.services.promotion import promotion_pass
from memory.consolidation.services.summaries import summaries_pass
from memory.knowledge.models import Fact
from tests.chat_replay import ChatReplay, chat_replay, recordings
from tests.factories import Caller, event, remember, requires_model

pytestmark = [pytest.mark.django_db, requires_model]

RECORDED = recordings(Path(__file__).parent / "recorded" / "chat.json")


@pytest.fixture
def chat_endpoint() -> Iterator[ChatReplay]:
    with chat_replay(RECORDED) as replay:
        yield replay


def test_the_extractor_turns_a_memory_into_a_fact(alice: Caller, chat_endpoint: ChatReplay) -> None:
    for _ in range(4):
        remember(alice, "Alice moved to Lisbon in May.", confidence=0.95)
    with tenant_context(alice.tenant):
        run = promotion_pass()
        assert run is not None and run.counts == {"examined": 1, "created": 1}
        promoted = Fact.objects.get()
        assert (promoted.subject.name, promoted.predicate.name, promoted.object_entity.name) == (
            "Alice",
            "lives_in",
            "Lisbon",
        )
    sent = chat_endpoint.requests[0]
    assert sent["temperature"] == 0 and sent["model"] == "gpt-4o-mini"


def test_summaries_are_abstractive_with_an_endpoint(alice: Caller, chat_endpoint: ChatReplay) -> None:
    rows = [
        ("message", "user", "We need to move the billing database from Frankfurt to Dublin."),
        ("message", "user", "The migration must finish before March 15, 2027."),
        ("tool_call", "assistant", "check_replication_lag"),
    ]
    body = [event(c, session_id="s-llm", kind=k, role=r) for k, r, c in rows]
    assert alice.post("/api/v1/events", body).status_code == 201
    with tenant_context(alice.tenant):
        summaries_pass()
        leaf = SummaryNode.objects.get(session_id="s-llm", level=1)
        assert leaf.method == "abstractive"
        assert "downtime at most 20 minutes" in leaf.content
        assert leaf.content.startswith("Summary of session s-llm, events #")
    prompt = chat_endpoint.requests[-1]["messages"][0]["content"]
    assert "constraint" in prompt and "decision" in prompt and "named entity" in prompt


def test_an_endpoint_that_is_down(alice: Caller) -> None:
    old = dict(settings.ENGRAM)
    settings.ENGRAM.update(LLM_BASE_URL=f"http://127.0.0.1:{free_port()}/v1", LLM_TIMEOUT=2.0)
    try:
        for _ in range(4):
            remember(alice, "Alice moved to Lisbon in May.", confidence=0.95)
        assert alice.post("/api/v1/events", event("We chose Dublin.", session_id="s-down")).status_code == 201
        with tenant_context(alice.tenant):
            run = promotion_pass()
            assert run is not None and run.status == RunStatus.FAILED
            assert "LLMUnavailable" in run.error and not Fact.objects.exists()
            summaries_pass()
            assert SummaryNode.objects.get(session_id="s-down").method == "extractive"
    finally:
        settings.ENGRAM.clear()
        settings.ENGRAM.update(old)
