"""A conversation turn's vector is the normalised sum of its own embedding and that of its context
(the turn before it in its session, within one call and across calls), while its memory keeps the
turn's own text: a reply that names no topic is found by the topic of the turn it answers."""

from __future__ import annotations

from datetime import datetime

import numpy as np
import pytest
from django_tenants.utils import tenant_context

from memory.conversations.services import Message, turn_content, turn_context_texts
from memory.embeddings import get_embedder
from memory.semantic.models import SemanticMemory
from tests.factories import Caller, requires_model, search

pytestmark = [pytest.mark.django_db, requires_model]

URL = "/api/v1/sessions/driving/messages"
ASKED = {
    "role": "user",
    "name": "Dana",
    "content": "Did you pass your driving test in the end?",
    "occurred_at": "2026-03-01T10:00:00Z",
}
REPLY = {
    "role": "assistant",
    "name": "Sam",
    "content": "Yes! Took it last week.",
    "occurred_at": "2026-03-01T10:00:05Z",
}
OTHER = [
    {"role": "user", "content": text, "occurred_at": "2026-03-01T09:00:00Z"}
    for text in ("Yes! It was great.", "Took the train last week to Porto.", "Yes, I took my medicine.")
]


def _stored_vector(caller: Caller, memory_id: str) -> np.ndarray:
    with tenant_context(caller.tenant):
        memory = SemanticMemory.objects.get(pk=memory_id)
        return np.asarray(memory.embedding, dtype=np.float32)


def _unit(vector: np.ndarray) -> np.ndarray:
    return vector / np.linalg.norm(vector)


def _at(message: dict) -> datetime:
    return datetime.fromisoformat(message["occurred_at"].replace("Z", "+00:00"))


OWN = "Sam (10:00 am on 1 March, 2026): Yes! Took it last week."


def test_the_context_texts_carry_the_turn_before_and_nothing_more() -> None:
    asked, reply = (
        Message(role=m["role"], content=m["content"], occurred_at=_at(m), name=m["name"])
        for m in (ASKED, REPLY)
    )
    texts = turn_context_texts([asked, reply])
    assert texts == [turn_content(asked), f"Dana: {ASKED['content']}\n{OWN}"]
    earlier = Message(role="user", content="Hello.", occurred_at=_at(ASKED))
    assert turn_context_texts([reply], before=[earlier, asked]) == [texts[1]]


@pytest.mark.parametrize("calls", [[[ASKED, REPLY]], [[ASKED], [REPLY]]], ids=["one call", "two calls"])
def test_a_reply_is_embedded_with_the_turn_it_answers(alice: Caller, calls: list[list[dict]]) -> None:
    assert alice.post("/api/v1/sessions/other/messages", {"messages": OTHER}).status_code == 201
    ids = []
    for messages in calls:
        response = alice.post(URL, {"messages": messages})
        assert response.status_code == 201, response.content
        ids += [m["id"] for m in response.json()["memories"]]
    reply_id = ids[-1]
    with tenant_context(alice.tenant):
        assert SemanticMemory.objects.get(pk=reply_id).content == OWN
    expected = _unit(get_embedder().embed([OWN, f"Dana: {ASKED['content']}\n{OWN}"]).sum(axis=0))
    assert np.allclose(_stored_vector(alice, reply_id), expected, atol=1e-5)
    hits = search(alice, "When did Sam take the driving test?", k=2)
    assert reply_id in [h["memory"]["id"] for h in hits]


def test_another_sessions_turns_are_no_context(alice: Caller) -> None:
    assert alice.post("/api/v1/sessions/other/messages", {"messages": [ASKED]}).status_code == 201
    reply_id = alice.post(URL, {"messages": [REPLY]}).json()["memories"][0]["id"]
    # no turn before it in its session: its context is its own memory, so the sum is its own vector
    alone = get_embedder().embed([OWN])[0]
    assert np.allclose(_stored_vector(alice, reply_id), alone, atol=1e-5)
