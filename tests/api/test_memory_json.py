"""``memory_json`` (the memories' direct output: search hits, listings, one memory, writes) against
the DRF serializer it stands in for, ``MemoryOutputSerializer``, on memories of every shape."""

from __future__ import annotations

import math
from datetime import timedelta

from django.utils import timezone
from django_tenants.utils import tenant_context

from api.rest.memories import MemoryOutputSerializer, memories_out, memory_json
from memory.semantic import selectors
from memory.semantic.models import SemanticMemory
from tests.factories import Caller, remember, requires_model

pytestmark = requires_model


def test_memory_json_is_what_the_output_serializer_writes(alice: Caller, bob: Caller) -> None:
    bodies = [
        remember(alice, "Alice lives in Lisbon"),
        remember(
            alice,
            "The launch moved to March",
            scope="hierarchical",
            visible_to={"agents": ["bob"], "roles": ["critic"]},
            session_id="s-json",
            tags=["work", "plans"],
            importance=0.25,
            confidence=1,
            metadata={"source": "chat", "n": [1, 2.5, None, {"ü": True}]},
            data_subject="customer-7",
        ),
        remember(
            alice,
            "Zoltan lives in Quokkaville",
            memory_type="preference",
            scope="shared",
            fact={"subject": "Zoltan", "predicate": "lives_in", "object": {"entity": "Quokkaville"}},
        ),
        remember(
            alice,
            "Bob's number is 41",
            fact={"subject": "Bob", "predicate": "has_number", "object": {"number": 41}},
        ),
        remember(alice, "Written later", write="async"),
    ]
    for body in bodies:
        assert body.status_code in (201, 202), body.content
    ids = [body.json()["id"] for body in bodies]
    with tenant_context(alice.tenant):
        # one archived, one never read again for a long time: the dates and the forgetting curve
        SemanticMemory.objects.filter(pk=ids[0]).update(archived_at=timezone.now() - timedelta(days=2))
        memories = list(
            selectors.memory_list(agent=alice.agent, filters=selectors.MemoryFilters(include_archived=True))
        )
        assert sorted(str(m.id) for m in memories) == sorted(ids)
        names = selectors.agent_names(i for m in memories for i in m.visible_to_agents)
        assert names == {bob.agent.pk: "bob"}
        expected = [MemoryOutputSerializer(m, context={"agent_names": names}).data for m in memories]
        now = timezone.now()
        got = [memory_json(m, names=names, zone=timezone.get_current_timezone(), now=now) for m in memories]
        listed = memories_out(memories)
    for want, have, out in zip(expected, got, listed, strict=True):
        # computed at two instants a few milliseconds apart
        assert math.isclose(want.pop("recall_probability"), have.pop("recall_probability"), abs_tol=1e-5)
        out.pop("recall_probability")
        assert have == dict(want)
        assert out == have
        assert list(have) == list(want)  # the same keys in the same order (the documented body)
    by_id = {body["id"]: body for body in got}
    assert by_id[ids[1]]["visible_to"] == {"agents": ["bob"], "roles": ["critic"]}
    assert by_id[ids[0]]["archived_at"] is not None and by_id[ids[4]]["pending"] is True
    assert by_id[ids[2]]["fact"]["object"] == {"entity": "Quokkaville", "type": None}
