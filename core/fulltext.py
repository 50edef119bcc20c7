"""PostgreSQL full-text helpers shared by the layers that rank text (semantic recall, skill matching).

``query_lexemes`` turns the words of a query into the lexemes the ``english`` configuration indexes,
asking PostgreSQL once per word and process: the stemmer and stop words are the server's and never
change under a running process, so one cache serves every layer (a context assembly matches the
same query against memories and skills and pays for its words once).
"""

from __future__ import annotations

import re

from django.db import connection

WORD = re.compile(r"\w+", re.UNICODE)
# the characters an identifier continues with: "u1" is not in "u10", "menu1" or "u1@x.org"
_IDENTIFIER_CHARS = "A-Za-z0-9_.@-"


def identifier_pattern(needles: list[str]) -> re.Pattern[str] | None:
    """A pattern finding any of ``needles`` as a whole identifier (not inside a longer one: "u1" is
    not in "u10" or "menu1"); None for no needle. The rule every search of a person's identifier in
    a copy uses (Redis keys, replayed answers, archives, task results)."""
    forms = sorted({n for n in needles if n})
    if not forms:
        return None
    return re.compile(
        rf"(?<![{_IDENTIFIER_CHARS}])(?:"
        + "|".join(re.escape(f) for f in forms)
        + rf")(?![{_IDENTIFIER_CHARS}])"
    )


# word -> its lexemes under the ``english`` configuration
_LEXEMES: dict[str, tuple[str, ...]] = {}
_LEXEMES_MAX = 200_000  # words; the cache is emptied when full (a vocabulary is far smaller)


def query_lexemes(text: str) -> list[str]:
    """The distinct lexemes of the words of ``text`` under the ``english`` configuration (stemmed,
    stop words dropped: the terms a ``to_tsvector('english', ...)`` index holds), sorted. Words are
    taken one by one (``\\w+``) as PostgreSQL's parser would split them once separated by spaces; a
    word not seen before by this process costs one query for all such words of ``text``, a known
    one nothing."""
    # the same 'english' configuration as memory/sql/memory_lexical_set.sql and the generated search column
    words = sorted({w.lower() for w in WORD.findall(text)})
    unknown = [w for w in words if w not in _LEXEMES]
    if unknown:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT w, tsvector_to_array(to_tsvector('english', w)) FROM unnest(%s::text[]) AS w",
                [unknown],
            )
            found = {w: tuple(lex) for w, lex in cursor.fetchall()}
        if len(_LEXEMES) + len(found) > _LEXEMES_MAX:
            _LEXEMES.clear()
        _LEXEMES.update(found)
    else:
        found = {}
    return sorted({lex for w in words for lex in (_LEXEMES.get(w) or found.get(w, ()))})
