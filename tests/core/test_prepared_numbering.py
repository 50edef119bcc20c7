"""``core.db.prepared._numbered``: a statement's placeholders numbered from its cached pieces."""

from __future__ import annotations

import pytest

from core.db import prepared


def test_numbering_is_the_same_on_every_call_and_values_are_never_carried_over() -> None:
    sql = "SELECT %s, %s::vector, '100%%', %s::vector, %s"
    first, second = "[" + "1," * 200 + "1]", "[" + "2," * 200 + "2]"
    assert prepared._numbered(sql, [1, first, first, "x"]) == (
        "SELECT $1, $2::vector, '100%', $2::vector, $3",
        [1, first, "x"],
        ["int8", "unknown", "unknown"],
    )
    # the cut is cached by text; which values share a number is decided anew on each call
    assert prepared._numbered(sql, [1, first, second, None]) == (
        "SELECT $1, $2::vector, '100%', $3::vector, $4",
        [1, first, second, None],
        ["int8", "unknown", "unknown", "unknown"],
    )


def test_a_statement_without_placeholders_keeps_its_text() -> None:
    assert prepared._numbered("SELECT '%%' || 'a'", []) == ("SELECT '%' || 'a'", [], [])


@pytest.mark.parametrize("params", [[1], [1, 2, 3]])
def test_parameters_must_match_the_placeholders_in_number(params: list[int]) -> None:
    with pytest.raises(ValueError, match="parameters for 2 placeholders"):
        prepared._numbered("SELECT %s, %s", params)


def test_the_name_follows_the_text_and_the_types() -> None:
    name = prepared._statement_name("SELECT $1", ("int8",))
    assert name.startswith("engram_") and name == prepared._statement_name("SELECT $1", ("int8",))
    assert name != prepared._statement_name("SELECT $1", ("unknown",))
    assert name != prepared._statement_name("SELECT $1 + 0", ("int8",))
