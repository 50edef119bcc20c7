"""The search statement builds the query's IDF vector inline (``selectors._QUERY_VECTOR_SQL``); it must
equal ``memory_lexical_query`` (migration 0014), the function the memories' side was built with."""

from __future__ import annotations

from django.db import connection
from django_tenants.utils import tenant_context

from memory.semantic import selectors
from tests.factories import Caller


def test_inline_query_vector_equals_the_sql_function(alice: Caller) -> None:
    cases = [
        ([], []),
        (["kayak"], [2.5]),
        (["alic", "eat", "pari", "like", "2023"], [1.5, 0.25, 3.75, 1.0, 0.125]),
        (["same", "same"], [1.0, 2.0]),  # one lexeme twice: its weights add up, as in the function
    ]
    with tenant_context(alice.tenant), connection.cursor() as cursor:
        for lexemes, weights in cases:
            cursor.execute(
                f"WITH ql AS ({selectors._QUERY_LEXEMES_SQL}) SELECT ({selectors._QUERY_VECTOR_SQL})::text, "
                "memory_lexical_query(%s::text[], %s::float8[])::text",
                [lexemes, weights, lexemes, weights],
            )
            inline, function = cursor.fetchone()
            assert inline == function, (lexemes, inline, function)
