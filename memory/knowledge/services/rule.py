"""The assert rule: what asserting a fact does against the facts already held for its subject,
predicate and end user (data subject). ``fact_assert`` and ``facts_assert_batch`` both decide by
``assert_judge``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from ..models import LIVE_STATUSES, Cardinality, Fact, FactStatus
from .data import FactRetracted


@dataclass(frozen=True)
class Judgement:
    """What an assert does. ``reinforced``: ``fact`` is the live fact it repeats; ``disputed``:
    ``fact`` is the active fact it contradicts; ``created``: ``fact`` is ``None``."""

    outcome: Literal["created", "reinforced", "disputed"]
    fact: Fact | None = None


def assert_judge(
    *,
    known: Sequence[Fact],
    object_key: str,
    cardinality: str,
    data_subject: str,
    refuse_retracted: bool,
) -> Judgement:
    """Judge an assert of ``object_key`` for a (subject, predicate) about the end user
    ``data_subject`` ("" for none) against ``known``, facts of that pair oldest first
    (``recorded_at``, ``id``; any statuses and end users, the others ignored). Only the facts of
    that same end user count: a fact is one end user's (another's repeat is another fact, and
    another's object is no contradiction), so an assert never answers with, nor reveals, another
    end user's fact (docs/decisions/0098):

    - ``refuse_retracted`` (background jobs) and a retracted fact with that object: raises
      ``FactRetracted`` (field ``object``): a job does not bring it back;
    - a live fact with that object: ``reinforced`` (the same fact again);
    - a ``one`` predicate (``cardinality``) with an active fact holding another object:
      ``disputed``, against the oldest such fact (which stays active);
    - otherwise ``created``.
    """
    known = [f for f in known if f.data_subject == data_subject]
    if refuse_retracted and any(
        f.status == FactStatus.RETRACTED and f.object_key == object_key for f in known
    ):
        raise FactRetracted("This fact was retracted.", field="object")
    same = next((f for f in known if f.object_key == object_key and f.status in LIVE_STATUSES), None)
    if same is not None:
        return Judgement("reinforced", same)
    if cardinality == Cardinality.ONE:
        holder = next(
            (f for f in known if f.status == FactStatus.ACTIVE and f.object_key != object_key), None
        )
        if holder is not None:
            return Judgement("disputed", holder)
    return Judgement("created")
