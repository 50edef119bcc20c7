"""Writes to the knowledge layer, one module per topic, the names callers use re-exported here:

- ``data``: what a fact write takes and answers (``FactData``, ``FactObject``, ``AssertResult``);
- ``names``: entities and predicates, found or created, and a predicate changed in the admin;
- ``rule``: the assert rule (``assert_judge``) both assert paths decide by;
- ``asserting``: ``fact_assert`` (one) and ``facts_assert_batch`` (many, one transaction);
- ``disputes``: ``fact_retract``, ``contradiction_resolve`` and the disputed facts settled after;
- ``erase``: facts erased for good (``facts_erase``);
- ``outbox``: the projection's side of every change.

Every change to a fact adds a ``GraphOutbox`` row in the same transaction and queues the Celery task
that projects it into Neo4j once the transaction commits (best effort: see ``core.tasks``).
"""

from .asserting import fact_assert, facts_assert, facts_assert_batch
from .data import (
    MAX_LITERAL_CHARS,
    OBJECT_KINDS,
    AssertResult,
    FactData,
    FactObject,
    FactRetracted,
    literal_canonical,
)
from .disputes import contradiction_resolve, fact_retract
from .erase import FactsErased, facts_erase
from .names import MAX_NAME_CHARS, entity_ensure, predicate_ensure, predicate_save
from .outbox import projection_state

__all__ = [
    "MAX_LITERAL_CHARS",
    "MAX_NAME_CHARS",
    "OBJECT_KINDS",
    "AssertResult",
    "FactData",
    "FactObject",
    "FactRetracted",
    "FactsErased",
    "contradiction_resolve",
    "entity_ensure",
    "fact_assert",
    "fact_retract",
    "facts_assert",
    "facts_assert_batch",
    "facts_erase",
    "literal_canonical",
    "predicate_ensure",
    "predicate_save",
    "projection_state",
]
