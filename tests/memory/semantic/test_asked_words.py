"""What a memory asks counts half of what it states (decision 0121, docs/explanation/retrieval.md):
its sentences ending in '?' are a field of their own in its lexical vector and postings, weighed
``ASKED_WEIGHT``, and search scales its cosine by ``1 - (1 - ASKED_WEIGHT) * asked_share``."""

from __future__ import annotations

import importlib

import pytest
from django.db import connection
from django_tenants.utils import tenant_context

from memory.semantic.differences import _mood
from memory.semantic.models import ASKED_WEIGHT, AVG_DOC_LEXEMES, BM25_B, BM25_K1, SemanticMemory
from memory.semantic.selectors import TEXT_WEIGHT
from tests.factories import Caller, remember, requires_model, search

pytestmark = [pytest.mark.django_db]

MIGRATION = importlib.import_module("memory.migrations.0039_asked_words_count_half")


def saturation(tf: int, dl: int) -> float:
    """BM25's term saturation with the stored constants (memory/sql/memory_bm25_saturation.sql)."""
    return tf * (BM25_K1 + 1) / (tf + BM25_K1 * (1 - BM25_B + BM25_B * dl / AVG_DOC_LEXEMES))


def postings(caller: Caller, content: str) -> dict[str, float]:
    with tenant_context(caller.tenant), connection.cursor() as cursor:
        cursor.execute(
            "SELECT p.lexeme, p.impact FROM memory_lexicalposting p "
            "JOIN memory_semanticmemory m ON m.id = p.memory_id WHERE m.content = %s",
            [content],
        )
        return dict(cursor.fetchall())


def stored(caller: Caller, content: str) -> tuple[float, dict[str, float]]:
    """``(asked_share, {lexeme: weight in lexical})`` of the memory holding ``content``."""
    with tenant_context(caller.tenant), connection.cursor() as cursor:
        cursor.execute(
            "SELECT m.asked_share, p.lexeme, -(m.lexical <#> "
            "(('{' || memory_lexeme_index(p.lexeme) || ':1}/1000000000')::sparsevec)) "
            "FROM memory_semanticmemory m JOIN memory_lexicalposting p ON p.memory_id = m.id "
            "WHERE m.content = %s",
            [content],
        )
        rows = cursor.fetchall()
    return (rows[0][0] if rows else 0.0), {lexeme: weight for _, lexeme, weight in rows}


def test_an_asked_word_weighs_half_a_stated_one(alice: Caller) -> None:
    text = "I paint landscapes. Do you paint portraits?"
    assert remember(alice, text).status_code == 201
    # stated: "I paint landscapes." (paint, landscap: 2 lexemes); asked: "Do you paint portraits?"
    # (paint, portrait), each field saturated against its own length
    one = saturation(1, 2)
    expected = {"paint": one + ASKED_WEIGHT * one, "landscap": one, "portrait": ASKED_WEIGHT * one}
    got = postings(alice, text)
    assert got.keys() == expected.keys()
    assert all(got[k] == pytest.approx(v) for k, v in expected.items()), got
    share, lexical = stored(alice, text)
    assert lexical.keys() == expected.keys()  # the vector search scores holds what the postings hold
    assert all(lexical[k] == pytest.approx(v, rel=1e-6) for k, v in expected.items()), lexical
    assert share == pytest.approx(4 / 7)  # Do you paint portraits: 4 of the 7 words


@pytest.mark.parametrize(
    ("text", "share"),
    [
        ("We went hiking in the Alps last week.", 0.0),
        ("I went hiking yesterday. Did you?", 2 / 6),
        ("Why? Because the trail was closed.", 1 / 6),
        ("What? Where? When?", 1.0),
        ("Is 3.5 km far? It is not.", 5 / 8),  # 3.5 ends no sentence, and is two runs of word characters
        ("Did you really quit?! I did.", 4 / 6),  # a question may end in ?!
        ('She asked "Did you quit?" Then she left.', 5 / 8),  # a closing quote ends the sentence too
        (
            "Did you go?\u00a0I did.",
            0.0,
        ),  # one sentence: only ASCII white space ends one (as in Python's rule)
    ],
)
def test_the_asked_share_is_the_share_of_words_in_questions(alice: Caller, text: str, share: float) -> None:
    assert remember(alice, text).status_code == 201
    with tenant_context(alice.tenant):
        assert SemanticMemory.objects.get(content=text).asked_share == pytest.approx(share)


@pytest.mark.parametrize(
    "text",
    [
        "Did you really quit?! I did.",
        'She asked "Did you quit?" Then she left.',
        "(Did you quit?) Fine.",
        "Did you go?\u00a0I did.",
        "Did you go?\u00a0",
        "Is 3.5 km far? It is not.",
        "What? Where? When?",
        "See https://acme.example/?page=2 for it.",
        "No question here.",
    ],
)
def test_the_update_rule_reads_questions_as_search_does(alice: Caller, text: str) -> None:
    # differences' question kind (Python) and the asked field (memory/sql/memory_lexical_weights.sql)
    # split and read sentences alike; brackets aside, which the update rule reads as neither
    asks, _ = _mood(text.replace("(Did you quit?) ", "Did you quit? "))
    with tenant_context(alice.tenant), connection.cursor() as cursor:
        cursor.execute("SELECT memory_asked_share(%s) > 0", [text])
        assert cursor.fetchone()[0] == asks


def test_a_memory_that_asks_nothing_keeps_one_field(alice: Caller) -> None:
    text = "Melanie painted the lake at sunrise, and the lake was calm."
    assert remember(alice, text).status_code == 201
    with tenant_context(alice.tenant), connection.cursor() as cursor:
        cursor.execute(
            "SELECT u.lexeme, memory_bm25_saturation(coalesce(array_length(u.positions, 1), 1), "
            "length(m.search)) FROM memory_semanticmemory m, unnest(m.search) u WHERE m.content = %s",
            [text],
        )
        single_field = dict(cursor.fetchall())
    assert postings(alice, text) == pytest.approx(single_field)
    assert stored(alice, text)[0] == 0.0


def test_an_erasure_scores_the_text_it_leaves(alice: Caller) -> None:
    text = "Do you still have the allergy?"
    assert remember(alice, text).status_code == 201
    with tenant_context(alice.tenant):
        memory = SemanticMemory.objects.get(content=text)
        SemanticMemory.objects.filter(pk=memory.pk).update(content="[redacted]")
        memory.refresh_from_db()
    assert memory.asked_share == 0.0
    assert postings(alice, "[redacted]").keys() == {"redact"}


@requires_model
def test_a_statement_outranks_the_question_of_the_same_words(alice: Caller) -> None:
    statement = "Caroline wants to pursue counseling for trans people."
    question = "Does Caroline want to pursue counseling for trans people?"
    for text, session in ((statement, "s1"), (question, "s2")):
        response = remember(alice, text, scope="shared", session_id=session)
        assert response.status_code == 201, response.content
    results = search(alice, "What does Caroline want to pursue?", k=5)
    by_text = {r["memory"]["content"]: r["components"] for r in results}
    assert list(by_text)[:2] == [statement, question], by_text
    for text, share in ((statement, 0.0), (question, 1.0)):
        c = by_text[text]
        stated = 1 - (1 - ASKED_WEIGHT) * share
        assert c["relevance"] == pytest.approx(
            TEXT_WEIGHT * c["text_relevance"] + (1 - TEXT_WEIGHT) * c["similarity"] * stated, abs=1e-6
        )
    # the same words, the question's at half their weight
    assert by_text[question]["text_relevance"] < by_text[statement]["text_relevance"]


def test_the_migration_scores_stored_memories_as_the_triggers_do(alice: Caller) -> None:
    texts = ["I paint landscapes. Do you paint portraits?", "Where did you go? The lake.", "No question."]
    for text in texts:
        assert remember(alice, text).status_code == 201
    written = {text: (stored(alice, text), postings(alice, text)) for text in texts}
    with tenant_context(alice.tenant), connection.cursor() as cursor:
        cursor.execute(MIGRATION.UNSCORE)  # backwards: one field, as before the rule
    assert postings(alice, texts[0]) == pytest.approx(
        {"paint": saturation(2, 3), "landscap": saturation(1, 3), "portrait": saturation(1, 3)}
    )
    with tenant_context(alice.tenant), connection.cursor() as cursor:
        cursor.execute("UPDATE memory_semanticmemory SET asked_share = 0")
        cursor.execute(MIGRATION.RESCORE)
    for text in texts:
        (share, lexical), post = written[text]
        again_share, again_lexical = stored(alice, text)
        assert again_share == pytest.approx(share)
        assert again_lexical == pytest.approx(lexical)
        assert postings(alice, text) == pytest.approx(post)
