"""Many rows of one model in one statement, sent as one JSON document.

Django's ``bulk_create`` binds one placeholder per field and row, and Django's psycopg cursors bind
client-side, so the work of building and quoting the statement grows with rows times fields (7,000
placeholders for 500 facts). Here the rows travel as one ``jsonb`` parameter that
``jsonb_to_recordset`` turns back into typed columns (each field's own database type), so the
statement's size in placeholders does not grow with the rows (decision 0040).
"""

from __future__ import annotations

import datetime
import decimal
import json
import uuid
from collections.abc import Sequence
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections, models
from psycopg.types.json import Jsonb


def _json_value(value: Any) -> Any:
    """A value from ``Field.get_db_prep_save`` as JSON that the column's input function reads back
    as that value: datetimes in ISO 8601 (offset and microseconds kept), UUIDs and decimals as
    text, ``Jsonb`` unwrapped (a ``jsonb`` column takes the JSON value itself; JSON ``null`` is SQL
    NULL, as Django stores ``None``), arrays element by element."""
    if value is None or isinstance(value, str | bool | int | float):
        return value
    if isinstance(value, datetime.datetime | datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, uuid.UUID | decimal.Decimal):
        return str(value)
    if isinstance(value, Jsonb):
        return value.obj
    if isinstance(value, list | tuple):
        return [_json_value(v) for v in value]
    raise TypeError(f"cannot send {type(value).__name__} through jsonb_to_recordset")


def rows_insert(objs: Sequence[models.Model]) -> None:
    """INSERT ``objs`` (unsaved instances of one model, in order) in one statement; an auto primary
    key comes back into each instance (``RETURNING``, ordered by it: a sequence numbers one
    statement's rows in insertion order) and every instance is marked saved. Generated columns are
    left to the database; defaults and ``pre_save`` apply as in ``save`` (``Field.pre_save`` with
    ``add``). Raises what the INSERT raises (``IntegrityError`` for a constraint)."""
    if not objs:
        return
    model = type(objs[0])
    meta = model._meta
    pk = meta.pk
    assert pk is not None
    auto_pk = isinstance(pk, models.AutoField | models.BigAutoField | models.SmallAutoField)
    fields = [
        f
        for f in meta.concrete_fields
        if not isinstance(f, models.GeneratedField) and not (auto_pk and f is pk)
    ]
    # the wrapper itself: each field's conversion reads it, and the ``connection`` proxy costs a
    # thread-local lookup per read (8,600 of them for a batch of 500 facts)
    connection = connections[DEFAULT_DB_ALIAS]
    # a foreign key to an object saved since it was assigned takes its id now (as ``save`` does)
    relations = [f for f in fields if isinstance(f, models.ForeignKey)]
    for obj in objs:
        for f in relations:
            if getattr(obj, f.attname) is None and f.is_cached(obj):
                related = f.get_cached_value(obj)
                if related is not None:
                    setattr(obj, f.attname, related.pk)
    rows = [
        [_json_value(f.get_db_prep_save(f.pre_save(obj, True), connection)) for f in fields] for obj in objs
    ]
    qn = connection.ops.quote_name
    columns = ", ".join(qn(str(f.column)) for f in fields)
    # r's columns are named by position: a model's column names need no quoting rules of their own
    typed = ", ".join(f"c{i} {f.db_type(connection)}" for i, f in enumerate(fields))
    values = ", ".join(f"r.c{i}" for i in range(len(fields)))
    names = ", ".join(f"c{i}" for i in range(len(fields)))
    sql = (
        f"INSERT INTO {qn(meta.db_table)} ({columns}) SELECT {values} "
        f"FROM ROWS FROM (jsonb_to_recordset(%s::jsonb) AS ({typed})) WITH ORDINALITY AS r({names}, n) "
        "ORDER BY r.n"
    )
    document = json.dumps([{f"c{i}": v for i, v in enumerate(row)} for row in rows])
    with connection.cursor() as cursor:
        if auto_pk:
            cursor.execute(
                f"WITH ins AS ({sql} RETURNING {qn(str(pk.column))}) SELECT * FROM ins ORDER BY 1", [document]
            )
            for obj, (key,) in zip(objs, cursor.fetchall(), strict=True):
                obj.pk = key
        else:
            cursor.execute(sql, [document])
    for obj in objs:
        obj._state.adding = False
        obj._state.db = connection.alias
