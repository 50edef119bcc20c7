"""Model instances from the raw rows of a hand-written statement, with Django's field converters."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import connection


def row_loader(model: type[Any], skip: tuple[str, ...], alias: str) -> tuple[str, Any, int]:
    """The select list (``alias.column, ...``) of ``model``'s concrete fields but ``skip``, a
    function turning that slice of a raw row into an instance, with Django's converters (JSON,
    arrays), and the slice's length."""
    fields = [f for f in model._meta.concrete_fields if f.attname not in skip]
    # (position, converters, column) of the fields that have converters, built once
    converted = []
    for i, f in enumerate(fields):
        col = f.get_col(alias)
        fns = connection.ops.get_db_converters(col) + col.get_db_converters(connection)
        if fns:
            converted.append((i, fns, col))
    names = [f.attname for f in fields]
    select = ", ".join(f'{alias}."{f.column}"' for f in fields)

    def load(values: Sequence[Any]) -> Any:
        if len(values) != len(names):
            raise ValueError(f"{len(values)} values for {len(names)} fields of {model.__name__}")
        out = list(values)
        for i, fns, col in converted:
            value = out[i]
            for fn in fns:
                value = fn(value, col, connection)
            out[i] = value
        return model.from_db(connection.alias, names, out)

    return select, load, len(fields)
