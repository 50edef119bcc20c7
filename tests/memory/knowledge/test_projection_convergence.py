"""The Neo4j projection converges to PostgreSQL whatever the interleaving of writers and drains.

Writers assert and retract facts through the services while several drains run at the same time
in other threads (each with its own PostgreSQL connection), against the real Neo4j. When the outbox
is empty, Neo4j must hold exactly the live entity-to-entity facts of PostgreSQL, each with its
status, and the entities they join; nothing else.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from django.db import connection
from django_tenants.utils import tenant_context

from agents.services import agent_create
from memory.knowledge import services
from memory.knowledge.models import GraphOutbox
from memory.knowledge.projection import outbox_drain
from tenants.models import Tenant
from tests.factories import neo4j_projection, postgres_projection

WRITERS = 4
FACTS_PER_WRITER = 20
DRAINS = 3
ROUNDS = 10


def in_thread(tenant: Tenant, work: Callable[[], None], errors: list[BaseException]) -> threading.Thread:
    """A thread running ``work`` in ``tenant``'s schema on its own connection."""

    def run() -> None:
        try:
            connection.set_tenant(tenant)
            work()
        except BaseException as exc:  # reported by the test
            errors.append(exc)
        finally:
            connection.close()

    return threading.Thread(target=run)


def test_concurrent_drains_converge_to_postgresql(graph_tenant: Tenant, neo4j_driver) -> None:  # type: ignore[no-untyped-def]
    tenant = graph_tenant
    with tenant_context(tenant):
        agent = agent_create(by=None, name="racer")
    for round_no in range(ROUNDS):
        errors: list[BaseException] = []
        writers_done = threading.Event()

        def write(writer: int, round_no: int = round_no) -> None:
            # assert then at once retract two of every three facts: the assert's and the retraction's
            # outbox rows are claimed by different drains
            for k in range(FACTS_PER_WRITER):
                result = services.fact_assert(
                    agent=agent,
                    data=services.FactData(
                        subject=f"s{round_no}-{writer}-{k}",
                        predicate="knows",
                        object=services.FactObject(entity=f"o{round_no}-{writer}-{k}"),
                    ),
                )
                if k % 3:
                    services.fact_retract(agent=agent, fact_id=result.fact.pk)

        def drain(writers_done: threading.Event = writers_done) -> None:
            # small batches, so one fact's rows are spread over several drains; a drain that fails
            # (Neo4j refusing a concurrent change) leaves its rows for the next, as a worker would
            while True:
                finished = writers_done.is_set()
                try:
                    drained = outbox_drain(batch_size=4)
                except Exception:  # retried on the next pass
                    continue
                if not drained:
                    time.sleep(0.002)  # nothing to claim: let the writers have the cores
                if finished and not GraphOutbox.objects.filter(processed_at__isnull=True).exists():
                    return

        writers = [in_thread(tenant, lambda w=w: write(w), errors) for w in range(WRITERS)]
        drains = [in_thread(tenant, drain, errors) for _ in range(DRAINS)]
        for thread in writers + drains:
            thread.start()
        for thread in writers:
            thread.join()
        writers_done.set()
        for thread in drains:
            thread.join(120)
        assert not errors, errors
        with tenant_context(tenant):
            assert not GraphOutbox.objects.filter(processed_at__isnull=True).exists()
            expected = postgres_projection()
        actual = neo4j_projection(neo4j_driver, tenant.schema_name)
        wrong = sorted(actual[0] ^ expected[0])
        assert actual == expected, f"round {round_no}: {len(wrong)} facts differ, e.g. {wrong[:4]}"
