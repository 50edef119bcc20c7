"""The duplicate rules of semantic memory: the key exact duplicates share (``normalise_text``,
``content_hash``) and the one place a near duplicate is decided (``dedup_plan``, with
``same_statement``); the stored side's candidates come from ``memory.semantic.near``."""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from memory.embeddings import Embedder
from tenants.models import RetrievalPolicy

from ..differences import differences
from ..near import NearCandidate, Owner, near_duplicates, vector_text

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


def same_statement(content: str, candidates: Sequence[NearCandidate]) -> NearCandidate | None:
    """The rule that makes a near duplicate a duplicate: the nearest of ``candidates`` (near
    memories, nearest first) whose text says what ``content`` says, i.e. differs from it in no
    negation, number, date, name, literal or opposite (``memory.semantic.differences``); None when
    each of them says something else (the write is an update: stored, never merged)."""
    for candidate in candidates:
        if not differences(content, candidate.content):
            return candidate
    return None


@dataclass(frozen=True)
class Match:
    """Item ``index`` of a batch duplicates ``memory_id`` (stored) or ``item`` (an earlier item)."""

    outcome: Literal["exact", "near"]
    similarity: float
    memory_id: Any = None
    item: int | None = None


def dedup_plan(
    *,
    owners: Sequence[Owner],
    vectors: Sequence[np.ndarray | None],
    contents: Sequence[str],
    embedder: Embedder,
    policy: RetrievalPolicy,
    skip: Sequence[bool] = (),
    texts: Sequence[str | None] = (),
) -> list[Match | None]:
    """The near-duplicate rule over a batch, as if its items were written one after another: item
    ``j`` (with a vector, not in ``skip``) duplicates the nearest of the stored memories of its
    owner, agent, scope and data subject (``near_duplicates``) and of the batch's earlier items of the same owner that
    are themselves new, among those whose cosine is at least ``policy.near_duplicate_threshold``
    and whose text says the same (``same_statement``: a near memory that differs in a negation,
    number, date, name, literal or opposite is no duplicate). The one place a near duplicate is
    decided: single writes, batches and the async worker's drain all come here. One statement for
    the stored side (a second, for the few items whose nearest memory says something else, looks
    at ``NEAR_CANDIDATES`` of them); the batch's side is a dot product of unit vectors (NumPy).
    ``contents``: the items' texts; ``texts``: the vectors' ``vector_text`` by position, when the
    caller has them."""
    n = len(vectors)
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

    plan: list[Match | None] = [None] * n
    unmatched = []
    for j, found in zip(todo, lookup(todo, 1), strict=True):
        same = same_statement(contents[j], found)
        if same is not None:
            plan[j] = Match("near", same.similarity, memory_id=same.memory_id)
        elif found:  # its nearest says something else: a farther one may still say the same
            unmatched.append(j)
    if unmatched:
        for j, found in zip(unmatched, lookup(unmatched, NEAR_CANDIDATES), strict=True):
            same = same_statement(contents[j], found)
            if same is not None:
                plan[j] = Match("near", same.similarity, memory_id=same.memory_id)
    if len(todo) > 1:
        matrix = np.stack([vectors[j] for j in todo])  # type: ignore[misc]
        cosines = matrix @ matrix.T
        # per item, the earlier items of its owner still new, compared as one row of the matrix
        group_of = {o: k for k, o in enumerate(dict.fromkeys(owners[j] for j in todo))}
        groups = np.array([group_of[owners[j]] for j in todo])
        is_new = np.zeros(len(todo), dtype=bool)
        for pos, j in enumerate(todo):
            best = None
            earlier = np.flatnonzero(is_new[:pos] & (groups[:pos] == groups[pos]))
            if earlier.size:
                sims = cosines[pos, earlier]
                near = earlier[sims >= policy.near_duplicate_threshold]
                # nearest first, the first of equals first (as written one after another)
                ordered = near[np.argsort(-cosines[pos, near], kind="stable")]
                same = same_statement(
                    contents[j],
                    [NearCandidate(int(k), float(cosines[pos, k]), contents[todo[k]]) for k in ordered],
                )
                if same is not None:
                    best = int(same.memory_id)
            current = plan[j]
            if best is not None and (current is None or cosines[pos, best] > current.similarity):
                plan[j] = Match("near", float(cosines[pos, best]), item=todo[best])
            if plan[j] is None:
                is_new[pos] = True
    return plan
