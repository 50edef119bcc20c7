"""Reads of the knowledge layer: facts about an entity (optionally as of a time) with its graph
neighbourhood, shortest paths, contradictions, the outbox's state."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.db import connection
from django.db.models import Count, Exists, Max, OuterRef, Prefetch, Q, QuerySet, Subquery
from django.db.models.expressions import RawSQL
from django.db.models.functions import Coalesce

from agents.models import Agent
from agents.subjects import subject_asked, subject_filter_q, subject_visible_q
from core.errors import NotFound
from memory.episodic.models import Event

from .models import (
    LIVE_STATUSES,
    Cardinality,
    Contradiction,
    Entity,
    Fact,
    FactProvenance,
    FactStatus,
    GraphOutbox,
    Predicate,
    entity_key,
)

if TYPE_CHECKING:
    from .graph import GraphBackend, Neighbourhood


def entity_by_name(name: str) -> Entity | None:
    """The entity whose normalised key matches ``name`` (any spelling, case or width), or None."""
    return Entity.objects.filter(key=entity_key(name)).first()


ENTITY_COLUMNS = ("id", "name", "key", "entity_type", "aliases", "created_at")  # Entity's, in order
_ENTITY_SELECT_SQL = f"SELECT {', '.join(ENTITY_COLUMNS)} FROM {Entity._meta.db_table} WHERE key = ANY(%s)"


def entities_by_key(keys: list[str]) -> dict[str, Entity]:
    """The stored entities among ``keys``, by key, in one statement: the keys travel as one array
    parameter (an ``IN`` list binds, compiles and quotes a placeholder per key)."""
    with connection.cursor() as cursor:
        cursor.execute(_ENTITY_SELECT_SQL, [keys])
        rows = cursor.fetchall()
    alias = connection.alias
    return {row[2]: Entity.from_db(alias, ENTITY_COLUMNS, row) for row in rows}


def events_known(ids: Iterable[int | None]) -> set[int]:
    """Those of the event ids ``ids`` (``None`` ignored) that exist in the current tenant (no query
    for none)."""
    wanted = {pk for pk in ids if pk is not None}
    return set(Event.objects.filter(pk__in=wanted).values_list("pk", flat=True)) if wanted else set()


def facts_judged_against(
    *, subject_id: int, predicate_id: int, object_key: str, cardinality: str, retracted: bool
) -> list[Fact]:
    """The stored facts an assert of (subject, predicate, ``object_key``) is judged against
    (``services.rule.assert_judge``), oldest first (``recorded_at``, ``id``): the live fact with
    that object (at most one), with ``retracted`` its retracted ones too, and on a ``one``
    predicate the active facts with another object."""
    same = [*LIVE_STATUSES, FactStatus.RETRACTED] if retracted else list(LIVE_STATUSES)
    wanted = Q(object_key=object_key, status__in=same)
    if cardinality == Cardinality.ONE:
        wanted |= Q(status=FactStatus.ACTIVE)
    return list(
        Fact.objects.filter(wanted, subject_id=subject_id, predicate_id=predicate_id).order_by(
            "recorded_at", "id"
        )
    )


def facts_of_pairs(pairs: list[tuple[int, int]]) -> dict[tuple[int, int], list[Fact]]:
    """The live and retracted facts of each (subject id, predicate id) of ``pairs``, oldest first
    (``recorded_at``, ``id``): what a batch of asserts is judged against. One statement, one probe
    of ``fact_subject_pred_idx`` per pair (the pairs travel as two array parameters)."""
    in_pairs = RawSQL(
        "SELECT id FROM memory_fact WHERE (subject_id, predicate_id) IN "
        "(SELECT * FROM unnest(%s::bigint[], %s::bigint[]))",
        ([s for s, _ in pairs], [p for _, p in pairs]),
    )
    known: dict[tuple[int, int], list[Fact]] = {pair: [] for pair in pairs}
    for stored in Fact.objects.filter(
        pk__in=in_pairs, status__in=[*LIVE_STATUSES, FactStatus.RETRACTED]
    ).order_by("recorded_at", "id"):
        known[(stored.subject_id, stored.predicate_id)].append(stored)
    return known


MAX_NAME_WORDS = 4  # entity names in a query are matched as runs of 1 to 4 words


def _name_keys(text: str) -> set[str]:
    """The ``entity_key`` of every run of 1 to ``MAX_NAME_WORDS`` words of ``text``."""
    words = [w for w in re.split(r"[^\w'&.-]+", text) if w]
    words = [w.strip(".'") for w in words]
    grams = {
        entity_key(" ".join(words[i : i + n]))
        for n in range(1, MAX_NAME_WORDS + 1)
        for i in range(len(words) - n + 1)
    }
    grams.discard("")
    return grams


def entities_named_in(text: str, *, limit: int = 10) -> list[Entity]:
    """The entities whose name appears in ``text`` as a run of 1 to ``MAX_NAME_WORDS`` words
    (compared as ``entity_key``s, so case and width do not matter), longest names first; one
    indexed query on the unique ``key``."""
    grams = _name_keys(text)
    if not grams:
        return []
    found = list(Entity.objects.filter(key__in=grams)[: limit * 4])
    found.sort(key=lambda e: (-len(e.key), e.pk))
    return found[:limit]


def facts_about_named(text: str, *, entities: int, per_entity: int, acting_for: str = "") -> list[Fact]:
    """The live facts (``active`` or ``disputed``) about the ``entities`` first entities ``text``
    names (matched as in ``entities_named_in``: longest names first, then by id): for each, as
    subject or object, its first ``per_entity`` in ``fact_list``'s order (``valid_from``, id); a
    fact about two of them comes once, under the first. Subject, predicate and object entity are
    loaded. One query, however many entities: the entities and each one's facts (a lateral join
    over the subject and object indexes) are a subquery of the rows' own. ``acting_for``: an end
    user the reader acts for (``agents.subjects.subject_visible_q``: facts about them or no one).
    """
    keys = _name_keys(text)
    if not keys:
        return []
    chosen = RawSQL(
        f"""
        WITH ent AS (
            SELECT e.id FROM {Entity._meta.db_table} e WHERE e.key = ANY(%s)
            ORDER BY length(e.key) DESC, e.id LIMIT %s
        )
        SELECT f.id FROM ent CROSS JOIN LATERAL (
            SELECT f.id FROM {Fact._meta.db_table} f
            WHERE (f.subject_id = ent.id OR f.object_entity_id = ent.id) AND f.status = ANY(%s)
              AND (%s = '' OR f.data_subject IN ('', %s))
            ORDER BY f.valid_from, f.id LIMIT %s
        ) f
        """,
        [sorted(keys), entities, [str(s.value) for s in LIVE_STATUSES], acting_for, acting_for, per_entity],
    )
    rows = list(Fact.objects.select_related("subject", "predicate", "object_entity").filter(pk__in=chosen))
    # the entities' order again, from the rows: an entity named in ``text`` that is not among the
    # chosen ones ranks after all of them, and its facts here are theirs too (already placed)
    named: dict[int, Entity] = {}
    for fact in rows:
        for entity in (fact.subject, fact.object_entity):
            if entity is not None and entity.key in keys:
                named[entity.pk] = entity
    order = sorted(named.values(), key=lambda e: (-len(e.key), e.pk))
    out: list[Fact] = []
    seen: set[int] = set()
    for entity in order:
        about = sorted(
            (f for f in rows if entity.pk in (f.subject_id, f.object_entity_id)),
            key=lambda f: (f.valid_from, f.pk),
        )
        for fact in about[:per_entity]:
            if fact.pk not in seen:
                seen.add(fact.pk)
                out.append(fact)
    return out


def fact_list(
    *,
    entity: Entity | None = None,
    as_of: datetime | None = None,
    agent_name: str | None = None,
    last_sessions: int | None = None,
    select_entities: bool = True,
) -> QuerySet[Fact]:
    """Facts with ``entity`` as subject or object.

    Without ``as_of``: the live ones (``active`` and ``disputed``). With ``as_of``: what was held
    valid then in valid time — ``valid_from <= as_of < valid_to`` (open end: still valid) and not
    retracted; a fact superseded later is returned, its successor only from its ``valid_from`` on.
    (Facts are often learned after they began, so the time they were recorded does not filter.)
    ``agent_name`` keeps facts asserted (in any provenance row) by that agent; ``last_sessions=N``
    keeps facts asserted in the N sessions with the most recent assertions. ``select_entities=False``
    leaves the subject and object entities out of the query, for a caller that has them (see
    ``entity_recall``).
    """
    qs = _renderable(select_entities=select_entities)
    if entity is not None:
        qs = qs.filter(Q(subject=entity) | Q(object_entity=entity))
    if as_of is None:
        qs = qs.filter(status__in=LIVE_STATUSES)
    else:
        qs = (
            qs.filter(valid_from__lte=as_of)
            .filter(Q(valid_to__isnull=True) | Q(valid_to__gt=as_of))
            .exclude(status=FactStatus.RETRACTED)
        )
    # the provenance filters are semi-joins (EXISTS), so a fact comes once without a DISTINCT
    if agent_name is not None:
        qs = qs.filter(Exists(FactProvenance.objects.filter(fact=OuterRef("pk"), agent__name=agent_name)))
    if last_sessions is not None:
        sessions = (
            FactProvenance.objects.exclude(session_id="")
            .values("session_id")
            .annotate(latest=Max("asserted_at"))
            .order_by("-latest")
            .values_list("session_id", flat=True)[:last_sessions]
        )
        qs = qs.filter(
            Exists(FactProvenance.objects.filter(fact=OuterRef("pk"), session_id__in=list(sessions)))
        )
    return qs.order_by("valid_from", "id")


def _renderable(*, select_entities: bool = True) -> QuerySet[Fact]:
    """Facts with what their rendering needs: subject, predicate, object entity and agent loaded, and
    ``assertions`` (the number of provenance rows) annotated by a correlated count per fact: one
    probe of the provenance's fact index per fact, whatever the size of the tables."""
    related = (
        ("subject", "predicate", "object_entity", "agent") if select_entities else ("predicate", "agent")
    )
    return Fact.objects.select_related(*related).annotate(assertions=_assertions_of("pk"))


def _attach_entities(facts: list[Fact], known: dict[int, Entity]) -> None:
    """Set each fact's subject and object entity from ``known`` (id → entity), loading any missing
    one (one query for all of them)."""
    wanted = {f.subject_id for f in facts} | {f.object_entity_id for f in facts if f.object_entity_id}
    missing = wanted - known.keys()
    if missing:
        known = {**known, **Entity.objects.in_bulk(list(missing))}
    for fact in facts:
        fact.subject = known[fact.subject_id]
        if fact.object_entity_id is not None:
            fact.object_entity = known[fact.object_entity_id]


def _fact_parts(side: str) -> list[str | Prefetch]:
    """The prefetch lookups of what a fact of a contradiction (``side``: ``existing_fact`` or
    ``new_fact``) is rendered with: subject, predicate, object entity, agent, source event."""
    return [
        f"{side}__subject",
        f"{side}__predicate",
        f"{side}__object_entity",
        f"{side}__agent",
        Prefetch(f"{side}__source_event", queryset=Event.objects.defer("search")),
    ]


def contradiction_list(*, status: str | None = None) -> QuerySet[Contradiction]:
    """Contradictions (oldest first) with both facts and their subjects, predicates, objects, agents
    and source events loaded: one query joining the two facts, then one per kind of related row
    (prefetched), whatever the page's length. One query joining all thirteen tables spends far
    longer in PostgreSQL's planner than in running (docs/decisions/0084-console-page-loads.md)."""
    qs = Contradiction.objects.select_related("existing_fact", "new_fact").prefetch_related(
        *_fact_parts("existing_fact"), *_fact_parts("new_fact")
    )
    if status is not None:
        qs = qs.filter(status=status)
    return qs.annotate(
        existing_assertions=_assertions_of("existing_fact"), new_assertions=_assertions_of("new_fact")
    ).order_by("created_at", "id")


def _assertions_of(fact_field: str) -> Coalesce:
    """The number of provenance rows of the contradiction's ``fact_field`` (a correlated count)."""
    counts = (
        FactProvenance.objects.filter(fact=OuterRef(fact_field))
        .order_by()
        .values("fact")
        .annotate(n=Count("pk"))
        .values("n")
    )
    return Coalesce(Subquery(counts), 0)


def outbox_pending() -> bool:
    """Whether the current tenant's outbox has changes not yet projected into Neo4j (the partial
    index ``outbox_pending_idx`` holds just those rows, so this stays cheap however many were
    processed)."""
    return GraphOutbox.objects.filter(processed_at__isnull=True).exists()


def facts_by_id(ids: Iterable[int]) -> dict[int, Fact]:
    """Facts by id, whatever their status, with what their rendering needs loaded and ``assertions``
    (the number of provenance rows) annotated."""
    return {fact.pk: fact for fact in _renderable().filter(pk__in=list(ids))}


@dataclass(frozen=True, slots=True)
class EntityRow:
    """An entity as a recall renders it (``EntityOutputSerializer``): what a model instance would
    give for ``pk``, ``name`` and ``entity_type``, without building one."""

    pk: int
    name: str
    entity_type: str


@dataclass(frozen=True, slots=True)
class NamedRow:
    """A predicate or agent as a fact's rendering needs it: its ``name``."""

    name: str


@dataclass(frozen=True, slots=True)
class FactRow:
    """A fact as ``FactOutputSerializer`` renders it, read as one row: the attributes it reads of a
    ``Fact`` with its subject, predicate, object entity and agent and the ``assertions`` count (the
    same values, the same JSON; tests/memory/knowledge/test_recall_rows.py)."""

    pk: int
    subject: EntityRow
    subject_id: int
    predicate: NamedRow
    object_entity: EntityRow | None
    object_entity_id: int | None
    literal_type: str
    literal_value: Any
    confidence: float
    status: str
    valid_from: datetime
    valid_to: datetime | None
    recorded_at: datetime
    agent: NamedRow
    session_id: str
    data_subject: str
    source_event_id: int | None
    assertions: int


#: a fact as a recall returns it: a model instance (filtered recalls) or a row (the live one)
RecalledFact = Fact | FactRow

_LIVE_SQL = "('active', 'disputed')"


def _recall_statement(
    entity: Entity, page: int, after: FactsCursor | None, edges: Iterable[int]
) -> tuple[str, list[Any]]:
    """``_recall_rows``' statement and its parameters: the page from two ordered ranges of the
    partial indexes ``fact_live_subject_page_idx`` and ``fact_live_object_page_idx`` (migration
    0022), merged, so a hub's thousands are not sorted; then every fact of the page and of
    ``edges`` with its entities, predicate, agent and provenance count (one probe of the
    provenance's fact index per fact), ``on_page`` first."""
    cursor_sql, cursor_params = "", list[Any]()
    if after is not None:
        cursor_sql, cursor_params = "AND (f.valid_from, f.id) > (%s, %s)", [after.valid_from, after.id]
    fact, ent = Fact._meta.db_table, Entity._meta.db_table
    sql = f"""
        WITH page AS (
            SELECT id FROM (
                (SELECT f.id, f.valid_from FROM {fact} f
                 WHERE f.subject_id = %s AND f.status IN {_LIVE_SQL} {cursor_sql}
                 ORDER BY f.valid_from, f.id LIMIT %s)
                UNION ALL
                (SELECT f.id, f.valid_from FROM {fact} f
                 WHERE f.object_entity_id = %s AND f.subject_id <> %s AND f.status IN {_LIVE_SQL} {cursor_sql}
                 ORDER BY f.valid_from, f.id LIMIT %s)
            ) both_ends ORDER BY valid_from, id LIMIT %s
        ), wanted AS (
            SELECT id, true AS on_page FROM page
            UNION ALL
            SELECT e.id, false FROM unnest(%s::bigint[]) AS e(id) WHERE e.id NOT IN (SELECT id FROM page)
        )
        SELECT w.on_page, f.id, f.subject_id, s.name, s.entity_type, p.name, f.object_entity_id, o.name,
               o.entity_type, f.literal_type, f.literal_value, f.confidence, f.status, f.valid_from,
               f.valid_to, f.recorded_at, a.name, f.session_id, f.data_subject, f.source_event_id,
               (SELECT count(*) FROM {FactProvenance._meta.db_table} v WHERE v.fact_id = f.id)
        FROM wanted w
        JOIN {fact} f ON f.id = w.id
        JOIN {ent} s ON s.id = f.subject_id
        JOIN {Predicate._meta.db_table} p ON p.id = f.predicate_id
        JOIN {Fact._meta.get_field("agent").related_model._meta.db_table} a ON a.id = f.agent_id
        LEFT JOIN {ent} o ON o.id = f.object_entity_id
        WHERE f.status IN {_LIVE_SQL}
        ORDER BY f.valid_from, f.id
    """
    pk = entity.pk
    return sql, [pk, *cursor_params, page, pk, pk, *cursor_params, page, page, list(edges)]


class _RowParts:
    """The entities and names of one recall's rows, one ``EntityRow`` per entity and one
    ``NamedRow`` per name (as many facts share them)."""

    def __init__(self) -> None:
        self.entities: dict[int, EntityRow] = {}
        self.names: dict[str, NamedRow] = {}

    def entity(self, pk: int, name: str, entity_type: str) -> EntityRow:
        found = self.entities.get(pk)
        if found is None:
            found = self.entities[pk] = EntityRow(pk, name, entity_type)
        return found

    def named(self, name: str) -> NamedRow:
        found = self.names.get(name)
        if found is None:
            found = self.names[name] = NamedRow(name)
        return found


def _recall_rows(
    entity: Entity, page: int, after: FactsCursor | None, edges: Iterable[int]
) -> tuple[list[FactRow], list[FactRow]]:
    """The first ``page`` live facts about ``entity`` (subject or object, ``fact_list`` order, after
    ``after``) and the live facts ``edges`` (same order), as rows, in one statement
    (``_recall_statement``)."""
    edges = list(edges)
    sql, params = _recall_statement(entity, page, after, edges)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    parts = _RowParts()
    on_page: list[FactRow] = []
    others: list[FactRow] = []
    for (
        first, pk, subject_id, s_name, s_type, predicate, object_id, o_name, o_type, literal_type,
        literal_value, confidence, status, valid_from, valid_to, recorded_at, agent, session_id,
        data_subject, source_event_id, assertions,
    ) in rows:  # fmt: skip
        if isinstance(literal_value, str):  # jsonb comes as text, as for ``JSONField.from_db_value``
            literal_value = json.loads(literal_value)
        row = FactRow(
            pk,
            parts.entity(subject_id, s_name, s_type),
            subject_id,
            parts.named(predicate),
            None if object_id is None else parts.entity(object_id, o_name, o_type),
            object_id,
            literal_type,
            literal_value,
            confidence,
            status,
            valid_from,
            valid_to,
            recorded_at,
            parts.named(agent),
            session_id,
            data_subject,
            source_event_id,
            assertions,
        )
        (on_page if first else others).append(row)
    # a fact of the page that is also an edge is an edge too
    wanted = set(edges)
    return on_page, sorted(
        [*others, *(r for r in on_page if r.pk in wanted)], key=lambda r: (r.valid_from, r.pk)
    )


@dataclass(frozen=True)
class EntityDistance:
    """An entity of a neighbourhood and its distance from the root, in hops."""

    id: int
    name: str | None
    distance: int


@dataclass(frozen=True)
class GraphSlice:
    """A page of an entity's neighbourhood (``graph.Neighbourhood``): ``backend`` is the one that
    answered; ``limit`` the most entities a page holds besides the root and ``fanout`` the most
    facts its walk follows from one entity; ``truncated`` whether those caps left entities out;
    ``next_after`` the cursor of the next page (None on the last)."""

    backend: str
    depth: int
    entities: list[EntityDistance]
    facts: list[RecalledFact]
    limit: int
    fanout: int
    truncated: bool
    next_after: int | None


#: direct facts of an entity per recall page: default and bound of ``facts_limit``
FACTS_LIMIT = 100
MAX_FACTS_LIMIT = 500


@dataclass(frozen=True)
class FactsCursor:
    """Where a page of an entity's direct facts resumes: after the fact ``(valid_from, id)`` in
    ``fact_list``'s order."""

    valid_from: datetime
    id: int


@dataclass(frozen=True)
class EntityRecall:
    """What is known about an entity: its facts (subject or object) and, at depth 2 or more, its
    graph neighbourhood."""

    entity: Entity
    facts: list[RecalledFact]
    graph: GraphSlice | None = None
    #: the most direct facts a page holds, and where the next page starts (None on the last)
    facts_limit: int = FACTS_LIMIT
    facts_next: FactsCursor | None = None


def entity_recall(
    *,
    name: str,
    reader: GraphBackend,
    agent: Agent | None = None,
    data_subject: str | None = None,
    as_of: datetime | None = None,
    agent_name: str | None = None,
    last_sessions: int | None = None,
    depth: int = 1,
    limit: int = 100,  # graph.DEFAULT_LIMIT (graph sits above selectors)
    after: int | None = None,
    facts_limit: int = FACTS_LIMIT,
    facts_after: FactsCursor | None = None,
) -> EntityRecall:
    """One page of the facts about the entity ``name`` (``fact_list`` rules and order: at most
    ``facts_limit``, after ``facts_after``; ``facts_next`` resumes) and, for ``depth`` 2 to
    ``graph.MAX_DEPTH``, one page of its neighbourhood from ``reader`` (at most ``limit`` entities,
    after the direct neighbour ``after``: see ``graph``). The facts ``agent`` may read
    (``agents.subjects``: for an agent acting for one end user, about them or no one; the
    neighbourhood then keeps the entities its facts reach), ``data_subject``: only that end user's.
    Without a subject rule, ``as_of``, ``agent_name`` and ``last_sessions`` the facts are rows read
    in one statement with the page's (``_live_recall``); else ``Fact`` instances (``fact_list``).
    Both render the same (``FactOutputSerializer``). Raises ``NotFound`` (field ``name``),
    ``SubjectRefused`` (403), ``ValueError`` for a ``facts_limit`` outside 1 to ``MAX_FACTS_LIMIT``."""
    if (
        isinstance(facts_limit, bool)
        or not isinstance(facts_limit, int)
        or not 1 <= facts_limit <= MAX_FACTS_LIMIT
    ):
        raise ValueError(f"facts_limit must be an integer from 1 to {MAX_FACTS_LIMIT}")
    subject = None if agent is None else subject_asked(agent, data_subject)
    restricted = subject is not None or bool(agent is not None and agent.acting_for)
    readable = Q() if agent is None else subject_visible_q(agent) & subject_filter_q(subject)
    entity = entity_by_name(name)
    if entity is None:
        raise NotFound(f"No entity named {name!r}.", field="name")
    if as_of is None and agent_name is None and last_sessions is None and not restricted:
        return _live_recall(entity, reader, depth, limit, after, facts_limit, facts_after)
    qs = fact_list(entity=entity, as_of=as_of, agent_name=agent_name, last_sessions=last_sessions)
    qs = qs.filter(readable)
    if facts_after is not None:
        qs = qs.filter(
            Q(valid_from__gt=facts_after.valid_from)
            | Q(valid_from=facts_after.valid_from, pk__gt=facts_after.id)
        )
    facts: list[RecalledFact] = list(qs[: facts_limit + 1])  # one more tells whether a next page exists
    facts_next = None
    if len(facts) > facts_limit:
        facts = facts[:facts_limit]
        facts_next = FactsCursor(facts[-1].valid_from, facts[-1].pk)
    if depth <= 1:
        return EntityRecall(entity, facts, facts_limit=facts_limit, facts_next=facts_next)
    hood = reader.neighbourhood(entity.pk, depth, limit, after)
    edges = list(fact_list(select_entities=False).filter(readable, pk__in=hood.facts))
    if restricted:  # only the entities the readable facts reach
        reached = {entity.pk, *(e for f in edges for e in (f.subject_id, f.object_entity_id) if e)}
        hood = replace(hood, distances={k: v for k, v in hood.distances.items() if k in reached})
    # the page's entities are its facts' ends: loaded once, by primary key, for both (joined into
    # the facts' query instead, twice over, the planner hashed the whole entity table for them)
    known = Entity.objects.in_bulk(list(hood.distances))
    entities = sorted(
        (EntityDistance(pk, known[pk].name if pk in known else None, d) for pk, d in hood.distances.items()),
        key=lambda e: (e.distance, e.id),
    )
    _attach_entities(edges, known)
    return EntityRecall(
        entity,
        facts,
        _graph_slice(reader, depth, entities, list(edges), hood),
        facts_limit=facts_limit,
        facts_next=facts_next,
    )


def _graph_slice(
    reader: GraphBackend,
    depth: int,
    entities: list[EntityDistance],
    edges: list[RecalledFact],
    hood: Neighbourhood,
) -> GraphSlice:
    return GraphSlice(
        reader.name,
        depth,
        entities,
        edges,
        limit=hood.limit,
        fanout=hood.fanout,
        truncated=hood.truncated,
        next_after=hood.next_after,
    )


def _live_recall(
    entity: Entity,
    reader: GraphBackend,
    depth: int,
    limit: int,
    after: int | None,
    facts_limit: int,
    facts_after: FactsCursor | None,
) -> EntityRecall:
    """``entity_recall`` without filters (the live facts): the neighbourhood first, then the page of
    direct facts and the neighbourhood's facts in one statement, as rows (``_recall_rows``); the
    neighbourhood's entity names from those rows (every entity of a page but the root is an end of
    one of its facts), any missing one read by primary key. Statements: the entity, the graph's
    (two in PostgreSQL, two Cypher queries in Neo4j, at depth 2), the rows."""
    hood = reader.neighbourhood(entity.pk, depth, limit, after) if depth > 1 else None
    facts, edges = _recall_rows(entity, facts_limit + 1, facts_after, hood.facts if hood else ())
    facts_next = None
    if len(facts) > facts_limit:  # one more tells whether a next page exists
        facts = facts[:facts_limit]
        facts_next = FactsCursor(facts[-1].valid_from, facts[-1].pk)
    if hood is None:
        return EntityRecall(entity, list(facts), facts_limit=facts_limit, facts_next=facts_next)
    names: dict[int, str | None] = {entity.pk: entity.name}
    for fact in edges:
        names[fact.subject_id] = fact.subject.name
        if fact.object_entity is not None:
            names[fact.object_entity.pk] = fact.object_entity.name
    missing = [pk for pk in hood.distances if pk not in names]
    if missing:
        names.update(Entity.objects.filter(pk__in=missing).values_list("pk", "name"))
    entities = sorted(
        (EntityDistance(pk, names.get(pk), d) for pk, d in hood.distances.items()),
        key=lambda e: (e.distance, e.id),
    )
    return EntityRecall(
        entity,
        list(facts),
        _graph_slice(reader, depth, entities, list(edges), hood),
        facts_limit=facts_limit,
        facts_next=facts_next,
    )


@dataclass(frozen=True)
class PathFound:
    """A shortest chain of facts: ``entities`` from source to target, ``facts`` one per hop."""

    backend: str
    entities: list[Entity]
    facts: list[Fact]

    @property
    def hops(self) -> int:
        return len(self.entities) - 1


def graph_path(*, source: str, target: str, max_depth: int, reader: GraphBackend) -> PathFound:
    """A shortest path between the entities ``source`` and ``target`` from ``reader``. Raises
    ``NotFound`` for an unknown entity (field ``source`` or ``target``) or no path within
    ``max_depth`` hops (field ``target``; ``backend`` in the body: a "no path" from an up-to-date
    backend)."""
    ends = []
    for field_name, entity_name in (("source", source), ("target", target)):
        entity = entity_by_name(entity_name)
        if entity is None:
            raise NotFound(f"No entity named {entity_name!r}.", field=field_name)
        ends.append(entity)
    path = reader.shortest_path(ends[0].pk, ends[1].pk, max_depth)
    if path is None:
        raise NotFound(f"No path within {max_depth} hops.", field="target", extra={"backend": reader.name})
    entities = {e.pk: e for e in Entity.objects.filter(pk__in=path.entities)}
    facts = facts_by_id(path.facts)
    return PathFound(
        reader.name, [entities[i] for i in path.entities], [facts[i] for i in path.facts if i in facts]
    )
