"""Reads of the item store: one item, items under a namespace prefix matching a filter, namespaces.

Every read leaves expired items out (``live_q``), whether or not the sweep has deleted them yet.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from django.contrib.postgres.fields import ArrayField
from django.db.models import BooleanField, CharField, F, Func, Q, QuerySet
from django.db.models.expressions import Expression

from agents.models import Agent
from agents.subjects import subject_asked, subject_filter_q, subject_visible_q
from core.errors import InvalidInput

from .models import StoreItem

# LangGraph's filter operators (``BaseStore.search``); a key that starts with "$" is one of them
OPERATORS = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte")
_SQL_OPERATORS = {"$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}
MAX_FILTER_DEPTH = 8


def live_q(now: datetime) -> Q:
    """Items not expired at ``now`` (no TTL, or an expiry after ``now``)."""
    return Q(expires_at__isnull=True) | Q(expires_at__gt=now)


def readable_q(agent: Agent, now: datetime, data_subject: str | None = None) -> Q:
    """The items ``agent`` may read at ``now``: live (``live_q``) and, for an agent acting for one
    end user, of its subject or of none (``agents.subjects``); with ``data_subject``, only that end
    user's. Raises ``SubjectRefused`` (403) when ``agent`` acts for another subject than
    ``data_subject``."""
    subject = subject_asked(agent, data_subject)
    return live_q(now) & subject_visible_q(agent) & subject_filter_q(subject)


def namespace_prefix_q(prefix: Sequence[str]) -> Q:
    """Items whose namespace starts with ``prefix`` (every item for an empty one): the GIN index on
    ``namespace`` narrows by containment, the slice compares in order."""
    labels = list(prefix)
    if not labels:
        return Q()
    return Q(namespace__contains=labels) & Q(**{f"namespace__0_{len(labels)}": labels})


class _ValueTest(Func):
    """A condition on the JSON at ``path`` in an item's ``value`` (``value #> path``), in SQL:

    - ``$eq``: JSON equality (``=`` on jsonb: numbers by value, arrays element by element);
    - ``$ne``: ``IS DISTINCT FROM`` (a missing field differs from any value);
    - ``$gt`` ``$gte`` ``$lt`` ``$lte``: for a number, both sides as ``numeric``; for a string,
      both as text; a field of another type (or missing) never matches.
    """

    output_field = BooleanField()

    def __init__(self, path: Sequence[str], op: str, operand: Any) -> None:
        super().__init__(F("value"))
        self.path = list(path)
        self.op = op
        self.operand = operand

    def as_sql(self, compiler: Any, connection: Any, **extra: Any) -> tuple[str, list[Any]]:  # type: ignore[override]
        column, params = compiler.compile(self.source_expressions[0])
        at = f"({column} #> %s::text[])"
        args: list[Any] = [*params, self.path]
        if self.op == "$eq":
            return f"({at} = %s::jsonb)", [*args, json.dumps(self.operand)]
        if self.op == "$ne":
            return f"({at} IS DISTINCT FROM %s::jsonb)", [*args, json.dumps(self.operand)]
        sql_op = _SQL_OPERATORS[self.op]
        if isinstance(self.operand, str):
            return (
                f"(jsonb_typeof({at}) = 'string' AND ({column} #>> %s::text[]) {sql_op} %s)",
                [*args, *params, self.path, self.operand],
            )
        # numeric, not float8: a JSON number may be beyond a double's range (1e400)
        return (
            f"(jsonb_typeof({at}) = 'number' AND ({column} #>> %s::text[])::numeric {sql_op} %s::numeric)",
            [*args, *params, self.path, self.operand],
        )


def value_filter_q(conditions: Mapping[str, Any] | None, *, field: str = "filter") -> Q:
    """The ``Q`` of LangGraph's search ``filter`` on items' values: every key must match. A key's
    condition is a value (exact match), an object of operators (``{"$gte": 3, "$lt": 9}``, each
    must hold) or an object of keys (each matched below that key, recursively, as LangGraph's
    stores compare nested objects). Range operators take a number or a string (compared as text,
    so ISO dates order by time). Raises ``InvalidInput`` naming the key (``filter.a.b``) for an
    unknown operator, an operator mixed with plain keys, a non-number non-string range bound, or
    nesting deeper than ``MAX_FILTER_DEPTH``."""
    q = Q()
    for name, condition in (conditions or {}).items():
        q &= _condition_q([name], condition, field=f"{field}.{name}")
    return q


def _condition_q(path: list[str], condition: Any, *, field: str) -> Q:
    if len(path) > MAX_FILTER_DEPTH:
        raise InvalidInput(f"A filter nests at most {MAX_FILTER_DEPTH} keys.", field=field)
    if not isinstance(condition, dict):
        return Q(_ValueTest(path, "$eq", condition))
    operators = [k for k in condition if k.startswith("$")]
    if operators and len(operators) != len(condition):
        raise InvalidInput("Give either operators ($eq, $gt, ...) or keys, not both.", field=field)
    if not operators:
        if not condition:
            return Q(_ValueTest(path, "$eq", {}))
        q = Q()
        for name, inner in condition.items():
            q &= _condition_q([*path, name], inner, field=f"{field}.{name}")
        return q
    q = Q()
    for op, operand in condition.items():
        if op not in OPERATORS:
            raise InvalidInput(
                f"Unknown operator {op!r}; use one of {', '.join(OPERATORS)}.", field=f"{field}.{op}"
            )
        if op in _SQL_OPERATORS:
            number = isinstance(operand, int | float) and not isinstance(operand, bool)
            finite = not isinstance(operand, float) or math.isfinite(operand)
            if not (number or isinstance(operand, str)) or not finite:
                raise InvalidInput(f"{op} compares with a number or a string.", field=f"{field}.{op}")
        q &= Q(_ValueTest(path, op, operand))
    return q


def item_find(*, agent: Agent, namespace: Sequence[str], key: str, now: datetime) -> StoreItem | None:
    """The item at (``namespace``, ``key``) ``agent`` may read (``readable_q``), or None."""
    return (
        StoreItem.objects.select_related("created_by", "updated_by")
        .filter(readable_q(agent, now), namespace=list(namespace), key=key)
        .first()
    )


def items_matching(
    *,
    agent: Agent,
    namespace_prefix: Sequence[str],
    conditions: Mapping[str, Any] | None,
    now: datetime,
    data_subject: str | None = None,
) -> QuerySet[StoreItem]:
    """Items ``agent`` may read (``readable_q``, with ``data_subject``) under ``namespace_prefix``
    whose values match ``conditions`` (``value_filter_q``), newest change first (ties by namespace
    and key)."""
    return (
        StoreItem.objects.select_related("created_by", "updated_by")
        .filter(readable_q(agent, now, data_subject), namespace_prefix_q(namespace_prefix))
        .filter(value_filter_q(conditions))
        .order_by("-updated_at", "namespace", "key")
    )


class _LabelAt(Func):
    """The namespace label at 1-based position ``position`` (negative: from the end, -1 the last)."""

    output_field = CharField()

    def __init__(self, position: int) -> None:
        super().__init__(F("namespace"))
        self.position = int(position)

    def as_sql(self, compiler: Any, connection: Any, **extra: Any) -> tuple[str, list[Any]]:  # type: ignore[override]
        column, params = compiler.compile(self.source_expressions[0])
        if self.position > 0:
            return f"({column})[{self.position}]", list(params)
        return f"({column})[cardinality({column}) + {self.position + 1}]", [*params, *params]


class _Truncated(Func):
    """The namespace cut to its first ``depth`` labels."""

    output_field = ArrayField(CharField())

    def __init__(self, depth: int) -> None:
        super().__init__(F("namespace"))
        self.depth = int(depth)

    def as_sql(self, compiler: Any, connection: Any, **extra: Any) -> tuple[str, list[Any]]:  # type: ignore[override]
        column, params = compiler.compile(self.source_expressions[0])
        return f"({column})[1:{self.depth}]", list(params)


def _match_q(kind: str, path: Sequence[str]) -> Q:
    """Namespaces matching one of LangGraph's ``MatchCondition`` (``prefix`` or ``suffix``, "*" any
    label): at least as many labels as ``path``, each non-wildcard label equal."""
    q = Q(namespace__len__gte=len(path))
    for i, label in enumerate(path):
        if label == "*":
            continue
        position = i + 1 if kind == "prefix" else i - len(path)
        expression: Expression = _LabelAt(position)
        q &= Q(_Equals(expression, label))
    return q


class _Equals(Func):
    output_field = BooleanField()

    def __init__(self, expression: Expression, value: str) -> None:
        super().__init__(expression)
        self.value = value

    def as_sql(self, compiler: Any, connection: Any, **extra: Any) -> tuple[str, list[Any]]:  # type: ignore[override]
        sql, params = compiler.compile(self.source_expressions[0])
        return f"({sql} = %s)", [*params, self.value]


def namespaces_list(
    *,
    agent: Agent,
    data_subject: str | None = None,
    conditions: Sequence[tuple[str, Sequence[str]]],
    max_depth: int | None,
    limit: int,
    offset: int,
    now: datetime,
) -> list[list[str]]:
    """The distinct namespaces of the items ``agent`` may read (``readable_q``, with
    ``data_subject``) matching every ``(kind, path)`` of ``conditions`` (``_match_q``), each cut to
    ``max_depth`` labels when given (then distinct after the cut), sorted (label by label, a prefix
    before its extensions), ``offset`` then at most ``limit``."""
    qs = StoreItem.objects.filter(readable_q(agent, now, data_subject))
    for kind, path in conditions:
        qs = qs.filter(_match_q(kind, path))
    cut: Any = _Truncated(max_depth) if max_depth is not None else F("namespace")
    rows = qs.annotate(ns=cut).values_list("ns", flat=True).order_by("ns").distinct()
    return [list(ns) for ns in rows[offset : offset + limit]]
