"""Entity aliases are bounded: an entity records at most 16 other spellings (the first ones seen)."""

from __future__ import annotations

import itertools

from django_tenants.utils import tenant_context

from memory.knowledge.models import Entity
from tests.factories import Caller, assert_fact, fact

ALIAS_BOUND = 16  # memory.knowledge.models.MAX_ALIASES, as documented


def spellings(name: str, count: int) -> list[str]:
    """``count`` distinct case variants of ``name`` (all with the same entity key), the name first."""
    variants = (
        "".join(c.upper() if up else c for c, up in zip(name, mask, strict=True))
        for mask in itertools.product((False, True), repeat=len(name))
    )
    return list(itertools.islice(variants, count))


def test_aliases_stop_at_the_bound_and_every_spelling_still_resolves(alice: Caller) -> None:
    names = spellings("alexandria", 60)
    assert_fact(alice, [fact(n, f"p{i}", {"entity": "Home"}) for i, n in enumerate(names[:30])])
    for i, name in enumerate(names[30:]):  # one transaction each: the bound holds across requests too
        assert_fact(alice, fact("Friend", f"q{i}", {"entity": name}))
    with tenant_context(alice.tenant):
        entity = Entity.objects.get(key="alexandria")
        assert entity.name == names[0]
        assert entity.aliases == names[1 : ALIAS_BOUND + 1]  # the first spellings seen, in order
    # a spelling that was not recorded still finds the entity
    recalled = alice.get(f"/api/v1/entities/{names[-1]}/facts").json()
    assert recalled["entity"]["id"] == entity.pk and len(recalled["facts"]) == 60


def test_invisible_characters_do_not_make_a_second_entity(alice: Caller) -> None:
    alice.post("/api/v1/facts", {"subject": "Alice", "predicate": "p", "object": {"string": "x"}})
    alice.post("/api/v1/facts", {"subject": "Al\u200bice\u202e", "predicate": "p", "object": {"string": "y"}})
    with tenant_context(alice.tenant):
        assert Entity.objects.count() == 1
