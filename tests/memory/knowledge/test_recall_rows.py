"""A live recall reads its facts as rows (``selectors.FactRow``), not model instances: the JSON must be
what the model instances of ``fact_list`` and ``facts_by_id`` give, page by page, at depth 1 and 2,
for facts as subject and as object, literal objects, disputed facts, reinforced ones (assertion
counts) and a fact whose subject is its object."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from django_tenants.utils import tenant_context
from rest_framework.renderers import JSONRenderer

from api.rest.knowledge import EntityRecallSerializer, FactOutputSerializer
from memory.knowledge import selectors, services
from memory.knowledge.graph import PostgresGraph
from memory.knowledge.models import Entity, Fact, FactStatus, Predicate
from tests.factories import Caller

F, E = services.FactData, services.FactObject
T0 = datetime(2025, 1, 1, tzinfo=UTC)


def world(caller: Caller) -> None:
    Predicate.objects.get_or_create(name="links", defaults={"cardinality": "many"})
    facts = [F("Hub", "links", E(entity=f"n{i}"), valid_from=T0 + timedelta(days=i % 5)) for i in range(9)]
    facts += [F(f"m{i}", "links", E(entity="Hub"), valid_from=T0 + timedelta(days=i % 3)) for i in range(6)]
    facts += [F(f"n{i}", "links", E(entity=f"far{i}")) for i in range(4)]
    facts += [F("Hub", "links", E(entity="Hub"), valid_from=T0)]  # its own object: listed once
    facts += [
        F("Hub", "employee_count", E(literal_type="number", value=41), valid_from=T0),
        F(
            "Hub",
            "motto",
            E(literal_type="string", value="ünïcode & <tags>"),
            valid_from=T0 + timedelta(days=2),
        ),
        F("Hub", "founded", E(literal_type="date", value="2001-02-03"), valid_from=T0 + timedelta(days=2)),
        F(
            "Hub",
            "listed",
            E(literal_type="boolean", value=True),
            valid_from=T0 + timedelta(days=1),
            session_id="s1",
        ),
    ]
    services.facts_assert_batch(agent=caller.agent, facts=facts)
    services.facts_assert_batch(agent=caller.agent, facts=facts[:3])  # reinforced: 2 assertions
    Fact.objects.filter(pk=Fact.objects.filter(subject__name="m0").get().pk).update(
        status=FactStatus.DISPUTED
    )
    Fact.objects.filter(subject__name="m1").update(status=FactStatus.RETRACTED)  # not live: left out


def as_json(data: Any) -> Any:
    return JSONRenderer().render(data)


def test_live_recall_rows_render_as_the_model_instances(alice: Caller) -> None:
    with tenant_context(alice.tenant):
        world(alice)
        hub = Entity.objects.get(name="Hub")
        expected_all = list(selectors.fact_list(entity=hub))
        assert len(expected_all) == 9 + 5 + 1 + 4  # m1's retracted fact is not live
        for depth in (1, 2):
            seen: list[int] = []
            cursor = None
            while True:
                recall = selectors.entity_recall(
                    name="hub", reader=PostgresGraph(), depth=depth, facts_limit=4, facts_after=cursor
                )
                assert all(isinstance(f, selectors.FactRow) for f in recall.facts)
                expected = expected_all[len(seen) : len(seen) + 4]
                assert as_json(FactOutputSerializer(recall.facts, many=True).data) == as_json(
                    FactOutputSerializer(expected, many=True).data
                )
                if depth == 2:
                    assert recall.graph is not None
                    hood = PostgresGraph().neighbourhood(hub.pk, 2)
                    edges = sorted(
                        selectors.facts_by_id(hood.facts).values(), key=lambda f: (f.valid_from, f.pk)
                    )
                    assert len(edges) > 10
                    assert as_json(FactOutputSerializer(recall.graph.facts, many=True).data) == as_json(
                        FactOutputSerializer(edges, many=True).data
                    )
                    names = dict(Entity.objects.values_list("pk", "name"))
                    assert [(e.id, e.name, e.distance) for e in recall.graph.entities] == sorted(
                        ((pk, names[pk], d) for pk, d in hood.distances.items()), key=lambda e: (e[2], e[0])
                    )
                seen += [f.pk for f in recall.facts]
                # the whole response renders (entity, cursors) as before
                as_json(EntityRecallSerializer(recall, context={"graph_next": None, "facts_next": None}).data)
                cursor = recall.facts_next
                if cursor is None:
                    break
            assert seen == [f.pk for f in expected_all]
        # a filtered recall still reads model instances, with the same rules
        filtered = selectors.entity_recall(name="Hub", reader=PostgresGraph(), agent_name=alice.agent.name)
        assert [f.pk for f in filtered.facts] == [f.pk for f in expected_all]
        assert all(isinstance(f, Fact) for f in filtered.facts)
