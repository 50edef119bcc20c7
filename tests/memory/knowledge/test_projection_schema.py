"""The projection's constraint and index in Neo4j: each process (web, every Celery worker) makes
them on its first write, so on a fresh Neo4j several make them at once."""

from __future__ import annotations

import threading

import neo4j
from django.conf import settings

from memory.knowledge import projection
from memory.knowledge.projection import SCHEMA_STATEMENTS, ensure_schema

PROCESSES = 6


def test_processes_making_the_graph_schema_at_once_all_succeed(neo4j_driver) -> None:  # type: ignore[no-untyped-def]
    auth = (settings.NEO4J_USER, settings.NEO4J_PASSWORD) if settings.NEO4J_USER else None
    drivers = [neo4j.GraphDatabase.driver(settings.NEO4J_URI, auth=auth) for _ in range(PROCESSES)]
    errors: list[BaseException] = []
    try:
        for round_no in range(5):  # the race is narrow: a few rounds make it likely
            neo4j_driver.execute_query("DROP CONSTRAINT engram_entity_key IF EXISTS")
            neo4j_driver.execute_query("DROP INDEX engram_fact_key IF EXISTS")
            start = threading.Barrier(PROCESSES)

            def first_write(driver: neo4j.Driver, start: threading.Barrier = start) -> None:
                start.wait(10)
                try:
                    ensure_schema(driver)
                except Exception as exc:  # collected and asserted below
                    errors.append(exc)

            threads = [threading.Thread(target=first_write, args=(d,)) for d in drivers]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(60)
            assert not errors, [f"round {round_no}: {getattr(e, 'code', e)!r}: {e}" for e in errors]
            projection._schema_ready.difference_update(id(d) for d in drivers)  # made again next round
    finally:
        for statement in SCHEMA_STATEMENTS:  # the suite's other tests rely on them
            neo4j_driver.execute_query(statement)
        for driver in drivers:
            driver.close()
    names = {r["name"] for r in neo4j_driver.execute_query("SHOW CONSTRAINTS YIELD name")[0]}
    assert "engram_entity_key" in names
