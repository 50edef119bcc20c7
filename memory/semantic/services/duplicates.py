"""The duplicate rules of semantic memory: the key exact duplicates share (``normalise_text``,
``content_hash``) and the one place a near duplicate is decided (``dedup_plan``, with
``same_statement``); the stored side's candidates come from ``memory.semantic.near``."""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from memory.embeddings import Embedder, vector_text
from tenants.models import RetrievalPolicy

from ..near import UPDATE_FLOOR, NearCandidate, Owner, near_duplicates
from ..updates import WORDING_BAND, Relation, relation

_SPACES = re.compile(r"\s+")


def normalise_text(text: str) -> str:
    """Unicode NFKC, case-folded, whitespace collapsed and trimmed: the form exact duplicates share."""
    return _SPACES.sub(" ", unicodedata.normalize("NFKC", text).casefold()).strip()


def content_hash(text: str) -> str:
    """Hex SHA-256 of ``normalise_text(text)``."""
    return hashlib.sha256(normalise_text(text).encode("utf-8")).hexdigest()


# how many near memories a write whose nearest one says something else is compared with: the
# nearest is looked up alone first (an iterative index scan for more rows than the agent has walks
# on to ``hnsw.max_scan_tuples``), the others only for such a write
NEAR_CANDIDATES = 5


def same_statement(
    content: str, candidates: Sequence[NearCandidate], threshold: float
) -> NearCandidate | None:
    """The rule that makes a near memory a duplicate: the nearest of ``candidates`` (near memories,
    nearest first) whose text says what ``content`` says (``updates.relation``: the same statement
    at its cosine, under the ``threshold`` of the tenant's policy); None when each of them says
    something else."""
    for candidate in candidates:
        if (
            relation(content, candidate.content, similarity=candidate.similarity, threshold=threshold)
            is Relation.SAME
        ):
            return candidate
    return None


def updated_statement(
    content: str, subject: str, candidates: Sequence[NearCandidate], threshold: float
) -> NearCandidate | None:
    """The rule that makes a near memory that says something else an update: the nearest of
    ``candidates`` of the same data ``subject`` that ``content`` restates with a new value about the
    same thing (``updates.relation``: an update, not a statement about someone or something else);
    None when there is none (the write is a memory of its own beside them)."""
    for candidate in candidates:
        if candidate.data_subject == subject and (
            relation(content, candidate.content, similarity=candidate.similarity, threshold=threshold)
            is Relation.UPDATE
        ):
            return candidate
    return None


@dataclass(frozen=True)
class Match:
    """Item ``index`` of a batch duplicates (``exact``, ``near``: reinforces) or updates
    (``update``: supersedes) ``memory_id`` (stored) or ``item`` (an earlier item)."""

    outcome: Literal["exact", "near", "update"]
    similarity: float
    memory_id: Any = None
    item: int | None = None


def _stored_side(
    todo: Sequence[int],
    contents: Sequence[str],
    subjects: Sequence[str],
    lookup: Callable[[Sequence[int], int], list[list[NearCandidate]]],
    threshold: float,
    nearest: Sequence[list[NearCandidate]] | None,
) -> dict[int, Match]:
    """``dedup_plan``'s matches among the stored memories: the nearest memory alone first
    (``nearest`` when the caller looked it up already), the ``NEAR_CANDIDATES`` nearest for the few
    items whose nearest says something else while near enough for a rewording or an update to be
    farther (a nearest of lower cosine about something else ends the search)."""
    plan: dict[int, Match] = {}
    unmatched = []
    for j, found in zip(todo, nearest if nearest is not None else lookup(todo, 1), strict=True):
        same = same_statement(contents[j], found, threshold)
        if same is not None:
            plan[j] = Match("near", same.similarity, memory_id=same.memory_id)
        elif found and (
            found[0].similarity >= threshold - WORDING_BAND
            or updated_statement(contents[j], subjects[j], found, threshold) is not None
        ):
            unmatched.append(j)
    if unmatched:
        for j, found in zip(unmatched, lookup(unmatched, NEAR_CANDIDATES), strict=True):
            same = same_statement(contents[j], found, threshold)
            if same is not None:
                plan[j] = Match("near", same.similarity, memory_id=same.memory_id)
                continue
            old = updated_statement(contents[j], subjects[j], found, threshold)
            if old is not None:
                plan[j] = Match("update", old.similarity, memory_id=old.memory_id)
    return plan


def dedup_plan(
    *,
    owners: Sequence[Owner],
    vectors: Sequence[np.ndarray | None],
    contents: Sequence[str],
    embedder: Embedder,
    policy: RetrievalPolicy,
    skip: Sequence[bool] = (),
    texts: Sequence[str | None] = (),
    subjects: Sequence[str] = (),
    nearest: Sequence[list[NearCandidate]] | None = None,
) -> list[Match | None]:
    """The near-duplicate rule over a batch, as if its items were written one after another: item
    ``j`` (with a vector, not in ``skip``) duplicates the nearest of the stored current memories of
    its owner, agent, scope and data subject (``near_duplicates``) and of the batch's earlier items
    of the same owner that are themselves new, among those whose cosine is at least
    ``policy.near_duplicate_threshold`` and whose text says the same (``same_statement``); when
    none says the same, it updates the nearest of them of its data subject that it restates with a
    new value (``updated_statement``: ``update``, the write is stored and supersedes it), else it is
    new (None). The one place a near duplicate or an update is decided: single writes, batches, the
    async worker's drain and consolidation all come here. One statement for the stored side (a
    second, for the few items whose nearest memory says something else, looks at
    ``NEAR_CANDIDATES`` of them); the batch's side is a dot product of unit vectors (NumPy).
    ``contents``: the items' texts; ``texts``: the vectors' ``vector_text`` by position, when the
    caller has them; ``subjects``: the items' data subjects (default: the owners'); ``nearest``:
    the stored side's first lookup (each item's nearest memory) when the caller made it (a single
    write's one-statement insert)."""
    n = len(vectors)
    subjects = list(subjects) or [o[2] for o in owners]
    todo = [j for j in range(n) if vectors[j] is not None and not (skip and skip[j])]

    def lookup(positions: Sequence[int], limit: int) -> list[list[NearCandidate]]:
        return near_duplicates(
            owners=[owners[j] for j in positions],
            vectors=[vectors[j] for j in positions],  # type: ignore[misc]
            embedder=embedder,
            policy=policy,
            texts=[texts[j] or vector_text(vectors[j]) for j in positions] if texts else None,  # type: ignore[arg-type]
            limit=limit,
        )

    stored = _stored_side(
        todo, contents, subjects, lookup, policy.near_duplicate_threshold, nearest if todo == [0] else None
    )
    plan: list[Match | None] = [stored.get(j) for j in range(n)]
    if len(todo) > 1:
        _batch_side(plan, todo, vectors, contents, owners, subjects, policy.near_duplicate_threshold)
    return plan


def _batch_side(
    plan: list[Match | None],
    todo: Sequence[int],
    vectors: Sequence[np.ndarray | None],
    contents: Sequence[str],
    owners: Sequence[Owner],
    subjects: Sequence[str],
    threshold: float,
) -> None:
    """``dedup_plan``'s matches among the batch's earlier new items, written into ``plan``: a
    same-statement item beats a stored match of lower cosine and any update; an update of an
    earlier item beats a stored update of lower cosine; a stored memory an earlier item updates is
    no longer current for the items after it (they compare with that item's memory instead), as
    if the batch were written in order."""
    matrix = np.stack([vectors[j] for j in todo])  # type: ignore[misc]
    cosines = matrix @ matrix.T
    # per item, the earlier items of its owner still new, compared as one row of the matrix
    group_of = {o: k for k, o in enumerate(dict.fromkeys(owners[j] for j in todo))}
    groups = np.array([group_of[owners[j]] for j in todo])
    is_new = np.zeros(len(todo), dtype=bool)
    position = {j: pos for pos, j in enumerate(todo)}
    claimed: dict[Any, int] = {}  # stored memory -> the first item updating it
    for pos, j in enumerate(todo):
        earlier = np.flatnonzero(is_new[:pos] & (groups[:pos] == groups[pos]))
        floor = min(UPDATE_FLOOR, threshold)
        near = earlier[cosines[pos, earlier] >= floor] if earlier.size else earlier
        # nearest first, the first of equals first (as written one after another); as many as the
        # stored side reads
        ordered = near[np.argsort(-cosines[pos, near], kind="stable")][:NEAR_CANDIDATES]
        candidates = [
            NearCandidate(int(k), float(cosines[pos, k]), contents[todo[k]], subjects[todo[k]])
            for k in ordered
        ]
        current = plan[j]
        if current is not None and current.memory_id in claimed:  # superseded by an earlier item
            current = plan[j] = None
        same = same_statement(contents[j], candidates, threshold)
        if same is not None and (
            current is None or current.outcome == "update" or same.similarity > current.similarity
        ):
            plan[j] = Match("near", same.similarity, item=todo[same.memory_id])
        elif same is None and (current is None or current.outcome == "update"):
            old = updated_statement(contents[j], subjects[j], candidates, threshold)
            if old is not None and (current is None or old.similarity > current.similarity):
                plan[j] = Match("update", old.similarity, item=todo[old.memory_id])
        current = plan[j]
        if current is not None and current.outcome == "update":
            if current.memory_id is not None:
                claimed[current.memory_id] = j
            elif current.item is not None:  # the earlier item it supersedes is current no more
                is_new[position[current.item]] = False
        if plan[j] is None or plan[j].outcome == "update":  # type: ignore[union-attr]
            is_new[pos] = True
