"""A conversation turn's speaker is a field of its own in search: a question that names the speaker
counts the name's IDF once more for that speaker's turns (docs/explanation/retrieval.md, step 4),
as BM25 counts a field holding the word once; a memory that is no turn has no speaker field, even
when its metadata holds a ``name``."""

from __future__ import annotations

import pytest

from tests.factories import Caller, remember, requires_model, search

pytestmark = [pytest.mark.django_db, requires_model]

TURNS = [
    {
        "role": "user",
        "name": "Caroline",
        "content": "I painted a sunset over the lake.",
        "occurred_at": "2026-03-01T10:00:00Z",
    },
    {
        "role": "assistant",
        "name": "Melanie",
        "content": "Caroline, I painted a sunset over the lake too.",
        "occurred_at": "2026-03-01T10:00:05Z",
    },
]


def test_the_turns_of_the_speaker_a_question_names_gain_the_names_idf(alice: Caller) -> None:
    for turn, session in zip(TURNS, ("studio", "lake"), strict=True):  # no neighbours: no context words
        assert alice.post(f"/api/v1/sessions/{session}/messages", {"messages": [turn]}).status_code == 201
    # a shorter memory holding the same query words, whose metadata names Caroline: no turn, so no
    # speaker field; by its words alone it scores above Caroline's turn (longer by the turn's time)
    plain = "Caroline told me she painted a sunset over the lake."
    assert remember(alice, plain, scope="shared", metadata={"name": "Caroline"}).status_code == 201
    results = search(alice, "Caroline sunset lake", k=3)
    relevance = {
        r["memory"]["metadata"].get("role", "none"): r["components"]["text_relevance"] for r in results
    }
    assert relevance["user"] == 1.0, relevance  # Caroline's turn: her name counts once more
    assert relevance["none"] < 1.0, relevance
