"""Knowledge graph at 100k facts: assert throughput, Neo4j projection, recall and paths on both backends.

Not a test: it prints figures. Steps:

1. **Assert** ``--facts`` (default 100,000) facts into the tenant ``bench_kg`` one at a time through
   ``memory.knowledge.services.fact_assert`` (one transaction per fact, as the service runs them,
   including the on-commit Celery enqueue; no worker runs, the queue is purged afterwards). The
   graph is synthetic but shaped like a real one (fixed seed): ~20k entities (people, companies,
   cities, projects) with hub-heavy (Zipf) degrees; ``one`` predicates (``works_at``, ``lives_in``,
   ``headquartered_in``, ``owned_by`` and literal ``born_on``, ``title``, ``employee_count``, ...)
   and ``many`` ones (``knows``, ``member_of``, ``partners_with``); ~3% conflicting asserts (a
   different object on a ``one`` predicate: a disputed fact and an open contradiction) and ~1%
   repeats (reinforcements), from four agents. A rerun finds the tenant loaded and skips this step.
   Optionally (``--http-facts N``, default 20,000; 0 skips) the batch API path: ``POST
   /api/v1/facts`` with arrays of 500 into the tenant ``bench_kg_http`` (skipped once it holds
   facts), against a real gunicorn server (2 workers x 2 threads) from one client.
2. **Project** into Neo4j: drain the 100k-row outbox (``outbox_drain``, the Celery task's body) and
   time it, then time ``graph_rebuild`` for the tenant (what ``manage.py graph_rebuild --tenant
   bench_kg`` runs); check node and relationship counts against PostgreSQL.
3. **Recall** for ``--samples`` (300) random entities at depth 1 and 2, with ``PostgresGraph``
   (SQL on ``memory_fact``) and ``Neo4jGraph`` (Cypher): the neighbourhood query alone (one page,
   the default ``limit``), and the whole read of ``GET /api/v1/entities/{name}/facts?depth=N``
   without the JSON (at depth 2 ``selectors.entity_recall`` itself: entity lookup, direct facts,
   the page, its entities and edge facts; ``graph_ab.py`` also times the JSON, old code against new). Also depth 3 for the
   first ``--depth3-samples`` (50) of them, the 10 hubs (highest degree), shortest paths for
   ``--pairs`` (100) random pairs, and ``--no-path-pairs`` (3) searches for an entity without live
   facts. Both backends must agree: same distances and fact sets for every sampled neighbourhood,
   same hop count for every pair, and every returned path is a chain of live facts.

``--steps`` runs a subset (e.g. ``--steps project,read`` on a loaded tenant); ``--tenant`` picks
another tenant for a fresh load. The 1-minute load average is printed while asserting: on a shared
two-core machine, other work moves the figures.

Needs PostgreSQL, Redis and Neo4j; ``DATABASE_URL``, ``REDIS_URL`` and ``NEO4J_URI`` are read from
the environment (run from the project root; both servers share the machine with this script)::

    ENGRAM_NEO4J=1 ./engram services --profile kbench > /tmp/kbench-svc.log 2>&1 &
    eval "$(grep export /tmp/kbench-svc.log)"
    export DJANGO_SETTINGS_MODULE=config.settings.local
    .venv/bin/python manage.py migrate_schemas --noinput -v 0
    python -m benchmarks knowledge_graph [--facts 100000] [--samples 300] [--pairs 100]
    kill -TERM <pid of ./engram services>    # stops PostgreSQL, Redis and Neo4j
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import time
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any

from _common import bench_key, django_setup, mib, percentiles, web_server

from core.tenancy import current_schema

TENANT = "bench_kg"
AGENTS = ["kb-crm", "kb-hr", "kb-chat", "kb-research"]

# --- the synthetic world ----------------------------------------------------------------------------------
FIRST = (
    "Ana Ben Cai Dee Eli Fay Gus Hana Ivo Jade Kofi Lena Milo Nia Omar Pia Quinn Rosa Sami Tara Uma Viktor "
    "Wen Xavi Yara Zane Aiko Bjørn Chloé Dário Émile Freya Giulia Hiroshi Inês José Kateřina Łukasz Mei "
    "Noémie Olek Priya Ravi Søren Tomás Ülkü Valentina Wojciech Ximena Yusuf Zoë Ólafur Amara Bruno "
    "Carmen Dmitri Elif Farid Greta Hamza"
).split()
LAST = (
    "Silva Okafor Nguyen Müller Rossi Tanaka Kowalski García Dubois Novak Haddad Jensen Ivanova Kim "
    "Moreau Costa Schmidt Yilmaz Santos Lindqvist Nakamura Oliveira Petrov Fischer Romero Andersen "
    "Barros Chen Dvořák Eriksen Fernández Gallo Horváth Ibrahim Johansson Kaur Larsen Mendes Nilsson "
    "O'Brien Papadopoulos Quispe Reyes Sato Thompson Ueda Vargas Weber Xu Yamamoto Zielińska Abebe "
    "Brennan Castillo Delgado Eze Fontaine Grünwald Herrera Ishikawa"
).split()
CO_ROOTS = (
    "North Blue Iron Silver Bright Quantum Cedar Harbor Summit Atlas Nova Vertex Pioneer Granite Orbit "
    "Lumen Maple Falcon Crimson Delta Echo Polar Solar Terra Vivid Zenith Apex Coral Ember Frost"
).split()
CO_MIDS = ("wind stone bridge field point gate works line path craft forge wave spring peak light").split()
CO_KINDS = (
    "Systems Labs Logistics Foods Health Energy Capital Media Robotics Analytics Studio Partners".split()
)
CITY_ROOTS = (
    "Alder Birch Clay Dun Elm Fern Glen Hol Ash Kings Lang Mar Nor Oak Pen Quar Red Sand Thorn Ux Val "
    "Wes Yar Zel Brook Cold Dray Ever Fair Gold Hart Lind Mill Rock Stan Tarn Wick Ald Bel Cres"
).split()
CITY_SUFFIXES = "ton ville burg field ford haven port dale mouth wick".split()
CITY_PREFIXES = ["", "New ", "East ", "West ", "Port "]
ADJECTIVES = (
    "Amber Brisk Cobalt Daring Emerald Fabled Golden Hidden Ivory Jolly Keen Lunar Mighty Noble Onyx "
    "Proud Quiet Rapid Scarlet Tidal Umber Velvet Wild Young Zesty Bold Calm Dusty Eager Fierce"
).split()
NOUNS = (
    "Falcon Harbor Lantern Meadow Nimbus Otter Pylon Quarry Raven Sparrow Tundra Vessel Willow Yak "
    "Zephyr Anchor Beacon Comet Dune Ember Fjord Glacier Heron Iris Juniper Kestrel Lotus Mosaic"
).split()
TITLES = (
    "Software Engineer|Senior Engineer|Staff Engineer|Engineering Manager|Product Manager|Designer|"
    "Data Scientist|Sales Lead|Account Executive|Recruiter|CFO|CTO|CEO|Support Specialist|Analyst|"
    "Operations Manager|Researcher|Nurse|Teacher|Consultant"
).split("|")

ONE = ["works_at", "lives_in", "headquartered_in", "owned_by", "born_on", "title", "employee_count",
       "founded_on", "budget"]  # fmt: skip
MANY = ["knows", "member_of", "partners_with"]

# facts per 100k asserts (the rest: ~3,000 conflicting asserts and ~1,000 repeats)
SHARES = {
    "works_at": 14_000,
    "lives_in": 14_000,
    "headquartered_in": 2_000,
    "owned_by": 3_000,
    "founded_on": 2_000,
    "employee_count": 2_000,
    "budget": 3_000,
    "born_on": 7_000,
    "title": 5_000,
    "knows": 28_000,
    "member_of": 14_000,
    "partners_with": 2_000,
}
CONFLICT_SHARE = 0.03
REPEAT_SHARE = 0.01


def _zipf_cum(n: int, s: float) -> list[float]:
    cum, total = [], 0.0
    for i in range(n):
        total += 1.0 / (i + 1) ** s
        cum.append(total)
    return cum


def _unique(rng: random.Random, n: int, make: Any) -> list[str]:
    from memory.knowledge.models import entity_key

    seen: set[str] = set()
    out: list[str] = []
    while len(out) < n:
        name = make(rng, len(out))
        key = entity_key(name)
        if key not in seen:
            seen.add(key)
            out.append(name)
    return out


@dataclass
class Plan:
    items: list[tuple[int, Any]]  # (agent index, FactData)
    kinds: Counter[str]
    entities: dict[str, int]


def make_plan(n_facts: int, seed: int) -> Plan:
    """The ordered list of asserts: base facts shuffled, each conflict or repeat after its original."""
    from memory.knowledge.services import FactData, FactObject

    rng = random.Random(seed)
    scale = n_facts / 100_000
    quotas = {p: max(1, round(q * scale)) for p, q in SHARES.items()}
    n_conflicts = round(n_facts * CONFLICT_SHARE)
    n_repeats = n_facts - sum(quotas.values()) - n_conflicts
    people_n, companies_n = quotas["works_at"], quotas["headquartered_in"]
    projects_n, cities_n = quotas["owned_by"], max(50, round(1000 * scale))

    def person(r: random.Random, i: int) -> str:
        return f"{r.choice(FIRST)} {chr(65 + r.randrange(26))}. {r.choice(LAST)}"

    def company(r: random.Random, i: int) -> str:
        return f"{r.choice(CO_ROOTS)}{r.choice(CO_MIDS)} {r.choice(CO_KINDS)}"

    def city(r: random.Random, i: int) -> str:
        return f"{r.choice(CITY_PREFIXES)}{r.choice(CITY_ROOTS)}{r.choice(CITY_SUFFIXES)}"

    def project(r: random.Random, i: int) -> str:
        return f"Project {r.choice(ADJECTIVES)} {r.choice(NOUNS)} {1 + i // 800}"

    people = _unique(rng, people_n, person)
    companies = _unique(rng, companies_n, company)
    cities = _unique(rng, cities_n, city)
    projects = _unique(rng, projects_n, project)
    co_cum, city_cum = _zipf_cum(companies_n, 1.0), _zipf_cum(cities_n, 1.0)
    proj_cum, pop_cum = _zipf_cum(projects_n, 0.8), _zipf_cum(people_n, 1.0)

    def pick(names: list[str], cum: list[float]) -> str:
        return rng.choices(names, cum_weights=cum)[0]

    def when() -> datetime:
        return datetime(2015, 1, 1, tzinfo=UTC) + timedelta(seconds=rng.randrange(10 * 365 * 86400))

    def ent(name: str, kind: str) -> FactObject:
        return FactObject(entity=name, entity_type=kind)

    base: list[tuple[str, str, str, FactObject]] = []  # (subject, subject type, predicate, object)
    for p in people:
        base.append((p, "person", "works_at", ent(pick(companies, co_cum), "company")))
        base.append((p, "person", "lives_in", ent(pick(cities, city_cum), "city")))
    for c in companies:
        base.append((c, "company", "headquartered_in", ent(pick(cities, city_cum), "city")))
    for c in rng.sample(companies, quotas["founded_on"]):
        founded = date(1950, 1, 1) + timedelta(days=rng.randrange(70 * 365))
        base.append((c, "company", "founded_on", FactObject(literal_type="date", value=founded.isoformat())))
    for c in rng.sample(companies, quotas["employee_count"]):
        base.append(
            (c, "company", "employee_count", FactObject(literal_type="number", value=rng.randint(3, 90_000)))
        )
    for j in projects:
        base.append((j, "project", "owned_by", ent(pick(companies, co_cum), "company")))
    for j in rng.sample(projects, quotas["budget"]):
        budget = round(rng.lognormvariate(12, 1.2), 2)
        base.append((j, "project", "budget", FactObject(literal_type="number", value=budget)))
    for p in rng.sample(people, quotas["born_on"]):
        born = date(1955, 1, 1) + timedelta(days=rng.randrange(50 * 365))
        base.append((p, "person", "born_on", FactObject(literal_type="date", value=born.isoformat())))
    for p in rng.sample(people, quotas["title"]):
        base.append((p, "person", "title", FactObject(literal_type="string", value=rng.choice(TITLES))))
    for _ in range(quotas["knows"]):
        a = rng.choice(people)
        b = pick(people, pop_cum) if rng.random() < 0.3 else rng.choice(people)
        if a == b:
            b = rng.choice(people)
        base.append((a, "person", "knows", ent(b, "person")))
    for _ in range(quotas["member_of"]):
        base.append((rng.choice(people), "person", "member_of", ent(pick(projects, proj_cum), "project")))
    for _ in range(quotas["partners_with"]):
        a, b = rng.sample(companies, 2)
        base.append((a, "company", "partners_with", ent(b, "company")))
    rng.shuffle(base)

    conflictable = [
        i for i, b in enumerate(base) if b[2] in ("works_at", "lives_in", "title", "employee_count")
    ]
    keyed: list[tuple[float, int, tuple[str, str, str, FactObject]]] = []
    for i, item in enumerate(base):
        keyed.append((float(i), rng.randrange(len(AGENTS)), item))
    kinds: Counter[str] = Counter(b[2] for b in base)
    for _ in range(n_conflicts):
        i = rng.choice(conflictable)
        subject, stype, pred, obj = base[i]
        if pred == "works_at":
            other = ent(rng.choice(companies), "company")
        elif pred == "lives_in":
            other = ent(rng.choice(cities), "city")
        elif pred == "title":
            other = FactObject(literal_type="string", value=rng.choice(TITLES))
        else:
            other = FactObject(literal_type="number", value=rng.randint(3, 90_000))
        keyed.append(
            (rng.uniform(i + 0.5, len(base)), rng.randrange(len(AGENTS)), (subject, stype, pred, other))
        )
        kinds["conflicting " + pred] += 1
    for _ in range(n_repeats):
        i = rng.randrange(len(base))
        keyed.append((rng.uniform(i + 0.5, len(base)), rng.randrange(len(AGENTS)), base[i]))
        kinds["repeat"] += 1
    keyed.sort(key=lambda k: k[0])

    items = []
    for n, (_, agent, (subject, stype, pred, obj)) in enumerate(keyed):
        data = FactData(
            subject=subject,
            subject_type=stype,
            predicate=pred,
            object=obj,
            confidence=round(rng.uniform(0.6, 1.0), 2),
            valid_from=when(),
            session_id=f"kb-session-{n // 40}",
        )
        items.append((agent, data))
    sizes = {"person": people_n, "company": companies_n, "city": cities_n, "project": projects_n}
    return Plan(items, kinds, sizes)


def fact_json(data: Any) -> dict[str, Any]:
    obj = data.object
    body_obj = (
        {"entity": obj.entity, "type": obj.entity_type}
        if obj.entity is not None
        else {obj.literal_type: obj.value}
    )
    return {
        "subject": data.subject,
        "subject_type": data.subject_type,
        "predicate": data.predicate,
        "object": body_obj,
        "confidence": data.confidence,
        "valid_from": data.valid_from.isoformat(),
        "session_id": data.session_id,
    }


# --- step 1: asserting ------------------------------------------------------------------------------------
def set_cardinalities() -> None:
    """Predicates as an operator would set them up (a new predicate would default to ``one``)."""
    from memory.knowledge.models import Predicate

    for name in ONE + MANY:
        Predicate.objects.update_or_create(
            name=name, defaults={"cardinality": "many" if name in MANY else "one"}
        )


def load(tenant: Any, agents: dict[str, Any], plan: Plan) -> dict[str, Any] | None:
    from django.db import connection
    from django_tenants.utils import tenant_context

    from config.celery import app as celery_app
    from core.tenancy import maintenance
    from memory.knowledge.models import FactProvenance
    from memory.knowledge.services import fact_assert

    with tenant_context(tenant):
        have = FactProvenance.objects.count()
        if have == len(plan.items):
            print(f"  {tenant.schema_name} already holds {have:,} asserts: not reloading", flush=True)
            return None
        if have:
            raise SystemExit(
                f"{tenant.schema_name} holds {have:,} asserts, not {len(plan.items):,}: use --tenant NEW"
            )
        set_cardinalities()
        by_index = [agents[name] for name in AGENTS]
        latencies: list[float] = []
        outcomes: Counter[str] = Counter()
        windows: list[float] = []
        window = max(1, len(plan.items) // 10)
        print(f"  asserting {len(plan.items):,} facts one per transaction...", flush=True)
        t_start = t_win = time.perf_counter()
        for n, (agent, data) in enumerate(plan.items, 1):
            t0 = time.perf_counter()
            result = fact_assert(agent=by_index[agent], data=data)
            latencies.append((time.perf_counter() - t0) * 1000)
            outcomes[result.outcome] += 1
            if n % window == 0:
                now = time.perf_counter()
                windows.append(window / (now - t_win))
                t_win = now
                print(
                    f"    {n:,} ({windows[-1]:,.0f} facts/s over the last {window:,}; load {_load()})",
                    flush=True,
                )
        wall = time.perf_counter() - t_start
        with maintenance(), connection.cursor() as cursor:  # ANALYZE is the tables' owner's
            for table in ("memory_entity", "memory_fact", "memory_factprovenance", "memory_graphoutbox",
                          "memory_contradiction", "memory_predicate"):  # fmt: skip
                cursor.execute(f"ANALYZE {table}")
    purged = celery_app.control.purge()  # the on-commit tasks no worker consumed (our own Redis)
    return {"wall": wall, "latencies": latencies, "outcomes": outcomes, "windows": windows, "purged": purged}


def load_http(plan: Plan, n: int, slug: str, batch: int) -> dict[str, Any] | None:
    import httpx
    from django_tenants.utils import tenant_context

    from memory.knowledge.models import FactProvenance

    tenant, _, keys = bench_key(slug, AGENTS[:1])
    with tenant_context(tenant):
        if FactProvenance.objects.exists():
            print(f"  {slug} already holds facts: skipping the HTTP batch path (use --http-tenant NEW)")
            return None
        set_cardinalities()
    bodies = [fact_json(data) for _, data in plan.items[:n]]
    batches = [bodies[i : i + batch] for i in range(0, len(bodies), batch)]
    latencies: list[float] = []
    errors: list[str] = []
    with web_server("gunicorn", workers=2, threads=2) as server:
        headers = {"Authorization": f"Bearer {keys[AGENTS[0]]}"}
        with httpx.Client(base_url=server.url, headers=headers, timeout=600) as client:
            t_start = time.perf_counter()
            for body in batches:
                t0 = time.perf_counter()
                response = client.post("/api/v1/facts", json=body)
                latencies.append((time.perf_counter() - t0) * 1000)
                if response.status_code != 201:
                    errors.append(f"{response.status_code}: {response.text[:200]}")
            wall = time.perf_counter() - t_start
        server.rss.sample()
        rss = server.rss.peak_total
    from config.celery import app as celery_app

    celery_app.control.purge()
    return {"wall": wall, "facts": len(bodies), "latencies": latencies, "errors": errors, "rss": rss}


# --- step 2: projecting -----------------------------------------------------------------------------------
def neo4j_counts(driver: Any, tenant: str) -> tuple[int, int]:
    nodes = driver.execute_query("MATCH (n:Entity {tenant: $t}) RETURN count(n) AS c", t=tenant)[0][0]["c"]
    rels = driver.execute_query(
        "MATCH (:Entity {tenant: $t})-[r:FACT {tenant: $t}]->() RETURN count(r) AS c", t=tenant
    )[0][0]["c"]
    return int(nodes), int(rels)


def pg_graph_counts() -> tuple[int, int]:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*), count(DISTINCT subject_id) FROM memory_fact "
            "WHERE status IN ('active', 'disputed') AND object_entity_id IS NOT NULL"
        )
        rels, _ = cursor.fetchone()
        cursor.execute(
            "SELECT count(*) FROM (SELECT subject_id FROM memory_fact WHERE status IN ('active', 'disputed') "
            "AND object_entity_id IS NOT NULL UNION SELECT object_entity_id FROM memory_fact "
            "WHERE status IN ('active', 'disputed') AND object_entity_id IS NOT NULL) e"
        )
        nodes = cursor.fetchone()[0]
    return int(nodes), int(rels)


def project_all(tenant: Any) -> dict[str, Any]:
    from django_tenants.utils import tenant_context

    from core.neo4j import get_driver
    from memory.knowledge.models import GraphOutbox
    from memory.knowledge.projection import graph_rebuild, outbox_drain

    driver = get_driver()
    if driver is None:
        raise SystemExit("NEO4J_URI is not set: start the services with ENGRAM_NEO4J=1")
    out: dict[str, Any] = {}
    with tenant_context(tenant):
        schema = current_schema()
        pending = GraphOutbox.objects.filter(processed_at__isnull=True).count()
        if pending:
            print(f"  draining {pending:,} outbox rows into Neo4j...", flush=True)
            t0 = time.perf_counter()
            drained = outbox_drain()
            out["drain"] = (drained, time.perf_counter() - t0)
            out["after_drain"] = neo4j_counts(driver, schema)
        print("  graph_rebuild...", flush=True)
        t0 = time.perf_counter()
        projected = graph_rebuild()
        out["rebuild"] = (projected, time.perf_counter() - t0)
        out["neo4j"] = neo4j_counts(driver, schema)
        out["postgres"] = pg_graph_counts()
    return out


# --- step 3: reading --------------------------------------------------------------------------------------
def recall(backend: Any, name: str, depth: int) -> tuple[Any, int, int]:
    """What ``GET /api/v1/entities/{name}/facts?depth=N`` reads (JSON aside): at depth 2-3
    ``selectors.entity_recall`` itself; at depth 1 its steps and the neighbourhood too, so both
    backends are measured there as well."""
    from memory.knowledge import selectors

    if depth > 1:
        got = selectors.entity_recall(name=name, reader=backend, depth=depth)
        assert got.graph is not None
        return got.graph, len(got.facts), len(got.graph.facts)
    entity = selectors.entity_by_name(name)
    assert entity is not None, name
    direct = list(selectors.fact_list(entity=entity))
    return backend.neighbourhood(entity.pk, depth), len(direct), 0


def _load() -> str:
    """The 1-minute load average (the machine is shared: both servers and other work run on it)."""
    return f"{os.getloadavg()[0]:.1f}"


def timed(fn: Any, *args: Any) -> tuple[float, Any]:
    t0 = time.perf_counter()
    result = fn(*args)
    return (time.perf_counter() - t0) * 1000, result


def path_ok(path: Any, edges: dict[int, tuple[int, int]]) -> bool:
    """Every hop of ``path`` is a live entity-to-entity fact joining the two entities it sits between."""
    if path is None:
        return True
    for i, fact in enumerate(path.facts):
        ends = edges.get(fact)
        if ends is None or set(ends) != {path.entities[i], path.entities[i + 1]}:
            return False
    return len(set(path.entities)) == len(path.entities)


def measure(
    tenant: Any,
    samples: int,
    pairs: int,
    hubs: int,
    seed: int,
    path_timeout_s: int,
    no_path_pairs: int,
    depth3_samples: int,
) -> dict[str, Any]:
    from django.db import OperationalError, connection
    from django_tenants.utils import tenant_context

    from core.neo4j import get_driver
    from memory.knowledge.graph import GraphBackend, Neo4jGraph, PostgresGraph
    from memory.knowledge.models import Entity, Fact
    from memory.knowledge.services import entity_ensure

    rng = random.Random(seed)
    out: dict[str, Any] = {"rows": [], "agree": {}, "sizes": {}}
    with tenant_context(tenant):
        driver = get_driver()
        if driver is None:
            raise SystemExit("the graph benchmark needs Neo4j: set NEO4J_URI (or ENGRAM_NEO4J=1)")
        pg, neo = PostgresGraph(), Neo4jGraph(driver, current_schema())
        backends: list[GraphBackend] = [pg, neo]
        island = entity_ensure(name="Bench island (no facts)", entity_type="test")
        entities = list(Entity.objects.exclude(pk=island.pk).values_list("pk", "name"))
        names = dict(entities)
        sample = rng.sample(entities, samples)
        live = Fact.objects.filter(status__in=["active", "disputed"], object_entity__isnull=False)
        edges = {f: (s, o) for f, s, o in live.values_list("pk", "subject_id", "object_entity_id")}
        degree: Counter[int] = Counter()
        for s, o in edges.values():
            degree[s] += 1
            degree[o] += 1
        out["degree"] = degree
        top = [pk for pk, _ in degree.most_common(hubs)]
        warm = rng.sample(entities, 20)
        for backend in backends:  # warm caches and connections, not measured
            for _pk, name in warm:
                for depth in (1, 2):
                    recall(backend, name, depth)

        for depth in (1, 2):
            results: dict[str, list[Any]] = {}
            for backend in backends:
                hood_ms, recall_ms, got = [], [], []
                for pk, _ in sample:
                    ms, hood = timed(backend.neighbourhood, pk, depth)
                    hood_ms.append(ms)
                    got.append(hood)
                sizes = []
                for _pk, name in sample:
                    ms, (_, n_direct, n_edge) = timed(recall, backend, name, depth)
                    recall_ms.append(ms)
                    sizes.append((n_direct, n_edge))
                results[backend.name] = got
                out["rows"].append((f"neighbourhood d={depth}", backend.name, percentiles(hood_ms)))
                out["rows"].append((f"recall d={depth}", backend.name, percentiles(recall_ms)))
                out["sizes"][depth] = (
                    [len(h.distances) for h in got],
                    [len(h.facts) for h in got],
                    [s[0] for s in sizes],
                )
            same = sum(
                a.distances == b.distances and a.facts == b.facts
                for a, b in zip(results["postgresql"], results["neo4j"], strict=True)
            )
            out["agree"][f"neighbourhood d={depth}"] = (same, len(sample))

        # depth 3 (the API's limit) reaches a third of the graph: the neighbourhood alone, fewer roots
        deep = sample[:depth3_samples]
        got3: dict[str, list[Any]] = {}
        for backend in backends:
            times, got3[backend.name] = [], []
            for pk, _ in deep:
                ms, hood = timed(backend.neighbourhood, pk, 3)
                times.append(ms)
                got3[backend.name].append(hood)
            if deep:
                out["rows"].append(("neighbourhood d=3", backend.name, percentiles(times)))
        if deep:
            same = sum(
                a.distances == b.distances and a.facts == b.facts
                for a, b in zip(got3["postgresql"], got3["neo4j"], strict=True)
            )
            out["agree"]["neighbourhood d=3"] = (same, len(deep))
            hoods = got3["postgresql"]
            out["sizes"][3] = ([len(h.distances) for h in hoods], [len(h.facts) for h in hoods], [0])

        for depth in (1, 2):
            for backend in backends:
                times = [timed(backend.neighbourhood, pk, depth)[0] for pk in top]
                out["rows"].append(
                    (f"hubs ({hubs}) neighbourhood d={depth}", backend.name, percentiles(times))
                )
        out["hubs"] = [(names[pk], degree[pk]) for pk in top[:5]]

        pair_list = [tuple(rng.sample(entities, 2)) for _ in range(pairs)]
        pg_paths, neo_paths = [], []
        pg_ms, neo_ms = [], []
        timeouts = 0
        with connection.cursor() as cursor:
            cursor.execute(f"SET statement_timeout = '{int(path_timeout_s)}s'")
        try:
            for (a, _), (b, _) in pair_list:
                try:
                    ms, path = timed(pg.shortest_path, a, b)
                except OperationalError:
                    ms, path = path_timeout_s * 1000.0, "timeout"
                    timeouts += 1
                pg_ms.append(ms)
                pg_paths.append(path)
                ms, path = timed(neo.shortest_path, a, b)
                neo_ms.append(ms)
                neo_paths.append(path)
        finally:
            with connection.cursor() as cursor:
                cursor.execute("SET statement_timeout = 0")
        out["rows"].append(("shortest path (max 6)", "postgresql", percentiles(pg_ms)))
        out["rows"].append(("shortest path (max 6)", "neo4j", percentiles(neo_ms)))

        # no path: an entity without live facts (as after its facts were retracted) is a target no
        # search reaches, so each backend explores everything within 6 hops of the source
        no_path: dict[str, list[float]] = {"postgresql": [], "neo4j": []}
        for pk, _ in rng.sample(entities, no_path_pairs):
            for backend in backends:
                with connection.cursor() as cursor:
                    cursor.execute(f"SET statement_timeout = '{int(path_timeout_s)}s'")
                try:
                    ms, path = timed(backend.shortest_path, pk, island.pk)
                    assert path is None, path
                except OperationalError:
                    ms = path_timeout_s * 1000.0
                    timeouts += 1
                finally:
                    with connection.cursor() as cursor:
                        cursor.execute("SET statement_timeout = 0")
                no_path[backend.name].append(ms)
        if no_path_pairs:
            for name, times in no_path.items():
                out["rows"].append(("shortest path, no path", name, percentiles(times)))
        compared = [(p, q) for p, q in zip(pg_paths, neo_paths, strict=True) if p != "timeout"]
        same_hops = sum((p.hops if p else None) == (q.hops if q else None) for p, q in compared)
        valid = sum(path_ok(p, edges) and path_ok(q, edges) for p, q in compared)
        out["agree"]["shortest path hops"] = (same_hops, len(compared))
        out["agree"]["paths are chains of live facts"] = (valid, len(compared))
        out["path_timeouts"] = timeouts
        out["hops"] = Counter(q.hops if q else None for q in neo_paths)
    return out


# --- output -----------------------------------------------------------------------------------------------
def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--facts", type=int, default=100_000)
    parser.add_argument("--tenant", default=TENANT)
    parser.add_argument("--samples", type=int, default=300, help="random entities for recall")
    parser.add_argument("--pairs", type=int, default=100, help="random pairs for shortest paths")
    parser.add_argument("--hubs", type=int, default=10, help="highest-degree entities, measured apart")
    parser.add_argument(
        "--http-facts", type=int, default=20_000, help="facts for the batch API path (0: skip)"
    )
    parser.add_argument("--http-tenant", default="bench_kg_http")
    parser.add_argument("--depth3-samples", type=int, default=50, help="of the sample, also at depth 3")
    parser.add_argument("--no-path-pairs", type=int, default=3, help="pairs whose target has no live facts")
    parser.add_argument("--path-timeout", type=int, default=60, help="seconds per PostgreSQL path query")
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument(
        "--steps",
        default="assert,http,project,read",
        help="comma-separated subset of assert,http,project,read",
    )
    args = parser.parse_args()
    steps = set(args.steps.split(","))

    django_setup()
    import logging

    # the driver logs every server notification (e.g. "cartesian product" for the two index seeks of
    # a path query) as a warning; they would drown the figures
    logging.getLogger("neo4j").setLevel(logging.ERROR)
    from django.conf import settings

    if not settings.NEO4J_URI:
        raise SystemExit("NEO4J_URI is not set: start the services with ENGRAM_NEO4J=1 (see the docstring)")
    print(f"Knowledge graph benchmark: {args.facts:,} facts, tenant {args.tenant} (cpus: {os.cpu_count()})")
    t0 = time.perf_counter()
    plan = make_plan(args.facts, args.seed)
    print(f"  plan made in {time.perf_counter() - t0:.1f} s: entities {plan.entities}", flush=True)
    tenant, agents, _ = bench_key(args.tenant, AGENTS)

    loaded = load(tenant, agents, plan) if "assert" in steps else None
    http = None
    if args.http_facts and "http" in steps:
        http = load_http(plan, args.http_facts, args.http_tenant, 500)
    projection = project_all(tenant) if "project" in steps else None
    figures = None
    if "read" in steps:
        figures = measure(
            tenant,
            args.samples,
            args.pairs,
            args.hubs,
            args.seed,
            args.path_timeout,
            args.no_path_pairs,
            args.depth3_samples,
        )

    from django_tenants.utils import tenant_context

    from memory.knowledge.models import Contradiction, Entity, Fact

    with tenant_context(tenant):
        status = Counter(Fact.objects.values_list("status", flat=True))
        n_entities = Entity.objects.count()
        n_open = Contradiction.objects.filter(status="open").count()

    print("\n=== Knowledge graph benchmark ===")
    print(f"data: {len(plan.items):,} asserts, {n_entities:,} entities, facts by status {dict(status)}, "
          f"{n_open:,} open contradictions")  # fmt: skip
    print("plan: " + ", ".join(f"{k} {v:,}" for k, v in sorted(plan.kinds.items())))
    if loaded:
        lat = percentiles(loaded["latencies"])
        print("\nAssert (fact_assert, one transaction per fact, one client)")
        print(
            f"  {len(plan.items):,} facts in {loaded['wall']:,.1f} s = {len(plan.items) / loaded['wall']:,.0f} facts/s"
        )
        print(
            f"  per assert p50 {lat['p50']:.2f} ms  p95 {lat['p95']:.2f} ms  p99 {lat['p99']:.2f} ms  max {lat['max']:.0f} ms"
        )
        print(f"  rate per tenth of the run: first {loaded['windows'][0]:,.0f}, last {loaded['windows'][-1]:,.0f}, "
              f"min {min(loaded['windows']):,.0f} facts/s")  # fmt: skip
        print(f"  outcomes {dict(loaded['outcomes'])}; purged {loaded['purged']:,} queued Celery tasks")
    if http:
        lat = percentiles(http["latencies"])
        print("\nAssert over HTTP (POST /api/v1/facts, arrays of 500, one client, gunicorn 2x2)")
        print(f"  {http['facts']:,} facts in {http['wall']:,.1f} s = {http['facts'] / http['wall']:,.0f} facts/s; "
              f"per request p50 {lat['p50']:,.0f} ms p95 {lat['p95']:,.0f} ms; {len(http['errors'])} errors; "
              f"web peak RSS {mib(http['rss'])}")  # fmt: skip
        if http["errors"]:
            print(f"  first error: {http['errors'][0]}")
    if projection:
        print("\nProjection into Neo4j")
        if "drain" in projection:
            rows, secs = projection["drain"]
            print(f"  outbox_drain: {rows:,} outbox rows in {secs:,.1f} s = {rows / secs:,.0f} rows/s "
                  f"(nodes, rels after: {projection['after_drain']})")  # fmt: skip
        facts, secs = projection["rebuild"]
        print(
            f"  graph_rebuild: {facts:,} entity-to-entity facts in {secs:,.1f} s = {facts / secs:,.0f} facts/s"
        )
        print(f"  nodes, relationships: Neo4j {projection['neo4j']}, PostgreSQL {projection['postgres']}"
              f" -> {'same' if projection['neo4j'] == projection['postgres'] else 'DIFFERENT'}")  # fmt: skip
    if figures:
        degree = figures["degree"]
        print(f"\nGraph: degree median {statistics.median(degree.values()):.0f}, max {max(degree.values()):,}; "
              f"top hubs {figures['hubs']}")  # fmt: skip
        for depth, (nodes, rels, direct) in figures["sizes"].items():
            line = (f"  depth {depth} neighbourhood ({len(nodes)} roots): entities p50 {statistics.median(nodes):,.0f} "
                    f"max {max(nodes):,}; facts p50 {statistics.median(rels):,.0f} max {max(rels):,}")  # fmt: skip
            if depth < 3:
                line += f"; direct facts p50 {statistics.median(direct):.0f} max {max(direct):,}"
            print(line)
        print(
            f"  shortest path hops (Neo4j): {dict(sorted(figures['hops'].items(), key=lambda kv: (kv[0] is None, kv[0] or 0)))}"
        )

        print(f"\n{'query (ms)':<34}{'backend':<12}{'n':>5}{'p50':>9}{'p95':>9}{'p99':>9}{'max':>9}")
        for label, backend, st in figures["rows"]:
            print(
                f"{label:<34}{backend:<12}{st['n']:>5.0f}{st['p50']:>9.1f}{st['p95']:>9.1f}{st['p99']:>9.1f}{st['max']:>9.1f}"
            )
        print(
            "  (recall = entity lookup + direct facts + neighbourhood + names and edge facts at d>1, JSON aside)"
        )
        if figures["path_timeouts"]:
            print(f"  PostgreSQL path queries cancelled at {args.path_timeout} s: {figures['path_timeouts']}")
        print("\nAgreement PostgreSQL vs Neo4j")
        for label, (ok, n) in figures["agree"].items():
            print(f"  {label:<34}{ok}/{n} {'OK' if ok == n else 'MISMATCH'}")


if __name__ == "__main__":
    main()
