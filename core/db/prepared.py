"""Prepared statements of a connection, by SQL: ``PREPARE`` once, then ``EXECUTE`` with the values.

Django's psycopg cursors bind parameters on the client (the statement text carries the values), so
PostgreSQL parses and plans every call anew; for a hot path's fixed statement that can cost more
than running it (a search's plan: a third of its database time at 100k memories; a checkpoint
restore's one-row read: 0.2-0.5 ms of planning against 0.06 ms of execution). ``execute_prepared``
keeps such statements prepared per connection with SQL ``PREPARE`` / ``EXECUTE``, through the
ordinary Django cursor (so the unit's role and search path, error wrapping and query logging are
the cursor's). psycopg's own protocol-level preparation is not used: psycopg answers every
rollback of a connection that holds its prepared statements with ``DEALLOCATE ALL``, which also
dropped these (a search inside a transaction after any rollback failed with "prepared statement
... does not exist").
"""

from __future__ import annotations

import functools
import hashlib
import re
import weakref
from collections import OrderedDict
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.db import DatabaseError

# Prepared statements per connection (psycopg connection -> statement names, least recently used
# first). PostgreSQL keeps them for the session whatever its transactions do (a rollback does not
# undo a PREPARE), re-parses one whenever the search path differs from its last use (another tenant's
# tables) and re-plans it after DDL or a new ANALYZE of its tables; privileges are checked on every
# execution, as the role in force then.
_prepared: weakref.WeakKeyDictionary[Any, OrderedDict[str, None]] = weakref.WeakKeyDictionary()
PREPARED_PER_CONNECTION = 64  # distinct (filter shape, k, dimensions) statements kept per connection
_PLACEHOLDER = re.compile(r"%[s%]")
_LONG_PARAM = 256  # characters: a text parameter this long (the query vector) is sent once


def _param_type(value: Any) -> str:
    """The declared type of a prepared statement's parameter: exact for numbers and instants, else
    ``unknown`` (PostgreSQL infers it where the statement first uses it: a column, a cast)."""
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "int8"
    if isinstance(value, float):
        return "float8"
    if isinstance(value, datetime):
        return "timestamptz"
    return "unknown"


@functools.lru_cache(maxsize=1024)
def _pieces(sql: str) -> tuple[str, ...]:
    """``sql`` cut at its ``%s`` placeholders, ``%%`` unescaped: n placeholders, n + 1 pieces.
    Cached by text (a hot path sends the same few statements; the cut cost ~20 µs a call)."""
    pieces, start, current = [], 0, []
    for m in _PLACEHOLDER.finditer(sql):
        current.append(sql[start : m.start()])
        start = m.end()
        if m.group() == "%%":
            current.append("%")
        else:
            pieces.append("".join(current))
            current = []
    current.append(sql[start:])
    pieces.append("".join(current))
    return tuple(pieces)


def _numbered(sql: str, params: Sequence[Any]) -> tuple[str, list[Any], list[str]]:
    """``sql`` with its ``%s`` placeholders numbered (``$1``, ...) and ``%%`` unescaped, the values
    of the numbers and their types (``_param_type``). Equal long text values (the query vector,
    used twice) share one number. Raises ``ValueError`` when the parameters do not match the
    placeholders in number."""
    pieces = _pieces(sql)
    if len(params) != len(pieces) - 1:
        raise ValueError(f"{len(params)} parameters for {len(pieces) - 1} placeholders")
    values: list[Any] = []
    shared: dict[str, int] = {}
    parts = [pieces[0]]
    for value, piece in zip(params, pieces[1:], strict=True):
        if isinstance(value, str) and len(value) >= _LONG_PARAM:
            number = shared.get(value)
            if number is None:
                values.append(value)
                number = shared[value] = len(values)
        else:
            values.append(value)
            number = len(values)
        parts.append(f"${number}")
        parts.append(piece)
    return "".join(parts), values, [_param_type(v) for v in values]


@functools.lru_cache(maxsize=1024)
def _statement_name(text: str, types: tuple[str, ...]) -> str:
    """``engram_`` and a digest of the numbered text and the parameter types (cached)."""
    return "engram_" + hashlib.blake2b(f"{text}\0{list(types)}".encode(), digest_size=10).hexdigest()


def _session_statements(cursor: Any) -> OrderedDict[str, None]:
    """The names of the statements this module prepared on ``cursor``'s connection, read from the
    server (``pg_prepared_statements``) the first time the process meets the connection."""
    raw = cursor.cursor.connection
    names = _prepared.get(raw)
    if names is None:
        cursor.execute("SELECT name FROM pg_prepared_statements WHERE name LIKE 'engram!_%' ESCAPE '!'")
        names = OrderedDict((row[0], None) for row in cursor.fetchall())
        _prepared[raw] = names
    return names


def execute_prepared(
    cursor: Any, sql: str, params: Sequence[Any], *, before: str = "", before_params: Sequence[Any] = ()
) -> None:
    """Run ``sql`` (``%s`` placeholders, one statement) on ``cursor`` (a Django cursor) as a
    prepared statement, after ``before`` (another statement, such as ``set_config``, or none) in the
    same round trip and implicit transaction; the cursor is left on ``sql``'s rows.

    The first call of a statement on a connection sends its ``PREPARE`` ahead of the ``EXECUTE``, in
    the same round trip; every call sends ``EXECUTE`` with the values as literals (Django's cursors
    bind client-side), so PostgreSQL neither parses the statement again nor, once its plan cache settles
    on the generic plan (after five custom plans, when the generic one is estimated no dearer),
    plans it. The name is ``engram_`` and a digest of the text and the parameter types
    (``_param_type``; the statement must cast any other value whose type its context does not
    tell, as in ``%s::vector(384)``). A connection keeps ``PREPARED_PER_CONNECTION`` of them (the
    least recently used one is deallocated). If the server lost one (a ``DEALLOCATE`` by someone
    else), the names are read again from the server and the call is retried once outside a
    transaction; inside one the error is raised (the transaction is aborted)."""
    text, values, types = _numbered(sql, params)
    name = _statement_name(text, tuple(types))
    call = f"EXECUTE {name}({', '.join(['%s'] * len(values))})" if values else f"EXECUTE {name}"
    for attempt in (0, 1):
        names = _session_statements(cursor)
        head = []
        if name not in names:
            if len(names) >= PREPARED_PER_CONNECTION:
                oldest, _ = names.popitem(last=False)
                head.append(f"DEALLOCATE {oldest}")
            declared = f" ({', '.join(types)})" if types else ""
            # the same round trip as the first call; its text escaped for the client-side binding
            head.append(f"PREPARE {name}{declared} AS {text.replace('%', '%%')}")
        if before:
            head.append(before)
        try:
            cursor.execute("; ".join([*head, call]), [*before_params, *values])
        except DatabaseError as exc:
            # A PREPARE or DEALLOCATE that ran before the failing statement is not undone with it:
            # what the session holds is read again from the server at the next call.
            _prepared.pop(cursor.cursor.connection, None)
            if getattr(exc.__cause__, "sqlstate", None) != "26000":  # invalid_sql_statement_name
                raise
            if attempt or cursor.db.in_atomic_block:
                raise
            continue
        for _ in head:
            cursor.cursor.nextset()  # past their results, to ``sql``'s rows
        names[name] = None
        names.move_to_end(name)
        return
