"""LoCoMo (Maharana et al. 2024) for ``locomo_ingest`` and ``locomo_eval``: pure parsing and metrics.

Nothing here touches the database, so tests can call every function directly.

The file is a JSON list of samples ``{"sample_id", "conversation", "qa", ...}``. A conversation holds
``speaker_a``, ``speaker_b`` and, for ``n = 1, 2, ...``, ``session_n`` (a list of turns) with its
``session_n_date_time`` (``"1:56 pm on 8 May, 2023"``). A turn is ``{"speaker", "dia_id", "text"}``
plus, for images, ``blip_caption`` (a caption of the image: the useful text) and ``query`` (the search
phrase used to find the image; it restates the answer, so it is never read here). A QA item is
``{"question", "answer" | "adversarial_answer", "evidence": [dia_id strings], "category": 1..5}``.

Metrics, for one question with gold turn ids ``G`` (cleaned, non-empty) and a ranked list of results
where result ``i`` stands for the set of turn ids ``R_i`` (one turn, or several when memory writes
merged near-duplicate turns into one memory):

- ``hit@k = 1`` if some ``R_i`` with ``i <= k`` meets ``G``, else 0;
- ``recall@k = len(G & (R_1 | ... | R_k)) / len(G)`` (sets);
- ``RR = 1 / i`` for the first ``i`` whose ``R_i`` meets ``G`` (0 if none in the list: the list is
  ``max(k)`` long, so the mean is MRR@max(k)).

Each is averaged over the questions of a group (a category, or the headline: categories 1-4).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

CATEGORY_NAMES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
HEADLINE_CATEGORIES = (1, 2, 3, 4)

_SESSION_KEY = re.compile(r"^session_(\d+)$")
_DIA_ID = re.compile(r"^D\s*:?\s*(\d+)\s*:\s*(\d+)$", re.IGNORECASE)
_EVIDENCE_SEPARATORS = re.compile(r"[;,]")
_DATE_TIME = re.compile(
    r"^\s*(\d{1,2}):(\d{2})\s*([ap]m)\s+on\s+(\d{1,2})\s+([A-Za-z]+),?\s+(\d{4})\s*$", re.IGNORECASE
)
_MONTHS = {
    name: number
    for number, name in enumerate(
        ("january february march april may june july august september october november december").split(),
        start=1,
    )
}


# --- conversations ------------------------------------------------------------------------------------


def parse_session_datetime(text: str) -> datetime:
    """``"1:56 pm on 8 May, 2023"`` -> ``datetime(2023, 5, 8, 13, 56, tzinfo=UTC)``.

    LoCoMo gives no time zone; the times are read as UTC. Raises ``ValueError`` for other shapes.
    """
    match = _DATE_TIME.match(text)
    if match is None:
        raise ValueError(f"unrecognised session date/time {text!r}")
    hour, minute, half, day, month_name, year = match.groups()
    month = _MONTHS.get(month_name.lower())
    if month is None:
        raise ValueError(f"unrecognised month in {text!r}")
    hour_24 = int(hour) % 12 + (12 if half.lower() == "pm" else 0)
    return datetime(int(year), month, int(day), hour_24, int(minute), tzinfo=UTC)


@dataclass(frozen=True)
class Turn:
    """One turn: ``session_key`` like ``"session_3"``, ``when`` the session's date/time as written."""

    sample_id: str
    session_key: str
    session_no: int
    when: str
    occurred_at: datetime
    index: int  # position within its session, from 0
    dia_id: str
    speaker: str
    text: str  # the spoken text plus, for an image, its caption (see ``turn_text``)


def turn_text(turn: Mapping[str, Any]) -> str:
    """The text worth indexing for a raw turn: its words, plus ``[shares a photo: <blip_caption>]``.

    Never the image ``query`` field: it was written from the answer and leaks it.
    """
    text = str(turn.get("text") or "").strip()
    caption = str(turn.get("blip_caption") or "").strip()
    if caption:
        text = f"{text} [shares a photo: {caption}]" if text else f"[shares a photo: {caption}]"
    return text


def iter_turns(sample: Mapping[str, Any]) -> Iterator[Turn]:
    """Every turn of ``sample`` in session order, then turn order. Sessions without turns are skipped."""
    conversation = sample["conversation"]
    sessions = sorted(
        (int(m.group(1)), key)
        for key in conversation
        if (m := _SESSION_KEY.match(key)) and isinstance(conversation[key], list)
    )
    for number, key in sessions:
        when = str(conversation.get(f"{key}_date_time") or "").strip()
        occurred_at = parse_session_datetime(when)
        for index, raw in enumerate(conversation[key]):
            yield Turn(
                sample_id=str(sample["sample_id"]),
                session_key=key,
                session_no=number,
                when=when,
                occurred_at=occurred_at,
                index=index,
                dia_id=str(raw["dia_id"]),
                speaker=str(raw.get("speaker") or ""),
                text=turn_text(raw),
            )


def memory_content(turn: Turn) -> str:
    """What a memory writer would store for a turn: ``"Caroline (1:56 pm on 8 May, 2023): <text>"``.

    The speaker says whose fact it is and the session date anchors relative times ("yesterday",
    "last week"): both are words the questions ask with ("When did Caroline ...").
    """
    return f"{turn.speaker} ({turn.when}): {turn.text}"


# --- evidence ------------------------------------------------------------------------------------------


def normalise_dia_id(token: str) -> str | None:
    """A turn id in canonical form ``D<session>:<turn>`` (no leading zeros), or ``None`` if hopeless.

    ``"D:11:26"`` -> ``"D11:26"``, ``"D30:05"`` -> ``"D30:5"``, ``" d3:1 "`` -> ``"D3:1"``, ``"D"`` -> None.
    """
    match = _DIA_ID.match(token.strip())
    if match is None:
        return None
    return f"D{int(match.group(1))}:{int(match.group(2))}"


@dataclass
class EvidenceStats:
    """Counts of what ``clean_evidence`` had to fix, summed over questions with ``+=``."""

    questions: int = 0
    split: int = 0  # strings holding several ids ("D8:6; D9:17")
    repaired: int = 0  # ids rewritten to canonical form ("D:11:26", "D30:05")
    malformed: int = 0  # tokens that are no id at all, dropped ("D")
    unknown: int = 0  # well-formed ids of turns that do not exist in the conversation, dropped
    duplicates: int = 0  # repeated ids, dropped
    empty: int = 0  # questions left with no evidence: skipped for hit/recall/MRR

    def __iadd__(self, other: EvidenceStats) -> EvidenceStats:
        for name in self.__dataclass_fields__:
            setattr(self, name, getattr(self, name) + getattr(other, name))
        return self


def clean_evidence(raw: Iterable[Any] | None, known: set[str]) -> tuple[tuple[str, ...], EvidenceStats]:
    """Gold turn ids of one question: ``(ids in first-seen order, what was fixed)``.

    ``raw`` is the ``evidence`` list (or ``None``); ``known`` the canonical ids of the conversation's
    turns. Strings are split on ``;`` and ``,``, each token normalised by ``normalise_dia_id``; tokens
    that are no id, ids not in ``known`` and repeats are dropped and counted.
    """
    stats = EvidenceStats(questions=1)
    ids: list[str] = []
    for item in raw or ():
        parts = [p for p in _EVIDENCE_SEPARATORS.split(str(item)) if p.strip()]
        if len(parts) > 1:
            stats.split += 1
        for part in parts:
            dia_id = normalise_dia_id(part)
            if dia_id is None:
                stats.malformed += 1
                continue
            if dia_id != part.strip():
                stats.repaired += 1
            if dia_id not in known:
                stats.unknown += 1
            elif dia_id in ids:
                stats.duplicates += 1
            else:
                ids.append(dia_id)
    if not ids:
        stats.empty = 1
    return tuple(ids), stats


# --- metrics -------------------------------------------------------------------------------------------


def hit_at_k(ranked: Sequence[frozenset[str]], gold: set[str] | frozenset[str], k: int) -> float:
    """1.0 if any of the first ``k`` results stands for a gold id, else 0.0."""
    return 1.0 if any(r & gold for r in ranked[:k]) else 0.0


def recall_at_k(ranked: Sequence[frozenset[str]], gold: set[str] | frozenset[str], k: int) -> float:
    """Share of the gold ids that the first ``k`` results stand for (0.0 for empty ``gold``)."""
    if not gold:
        return 0.0
    covered: set[str] = set().union(*ranked[:k]) if ranked[:k] else set()
    return len(covered & gold) / len(gold)


def reciprocal_rank(ranked: Sequence[frozenset[str]], gold: set[str] | frozenset[str]) -> float:
    """``1 / i`` for the first result ``i`` (from 1) standing for a gold id; 0.0 if none does."""
    for i, result in enumerate(ranked, start=1):
        if result & gold:
            return 1.0 / i
    return 0.0


@dataclass
class GroupScores:
    """Sums over the questions of one group; ``mean(name)`` divides by ``n``."""

    n: int = 0
    sums: dict[str, float] = field(default_factory=dict)

    def add(self, values: Mapping[str, float]) -> None:
        self.n += 1
        for name, value in values.items():
            self.sums[name] = self.sums.get(name, 0.0) + value

    def mean(self, name: str) -> float:
        return self.sums.get(name, 0.0) / self.n if self.n else 0.0


def question_scores(
    ranked: Sequence[frozenset[str]], gold: Sequence[str], ks: Sequence[int]
) -> dict[str, float]:
    """``{"hit@k", "recall@k" for k in ks, "mrr"}`` for one question (see the module docstring)."""
    gold_set = frozenset(gold)
    scores: dict[str, float] = {}
    for k in ks:
        scores[f"hit@{k}"] = hit_at_k(ranked, gold_set, k)
        scores[f"recall@{k}"] = recall_at_k(ranked, gold_set, k)
    scores["mrr"] = reciprocal_rank(ranked, gold_set)
    return scores


def summarise(per_question: Iterable[tuple[int, Mapping[str, float]]]) -> dict[int | str, GroupScores]:
    """Group ``(category, scores)`` pairs: one ``GroupScores`` per category and ``"headline"`` (1-4)."""
    groups: dict[int | str, GroupScores] = {}
    for category, scores in per_question:
        groups.setdefault(category, GroupScores()).add(scores)
        if category in HEADLINE_CATEGORIES:
            groups.setdefault("headline", GroupScores()).add(scores)
    return groups


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0..100) by linear interpolation between order statistics."""
    if not values:
        return 0.0
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100.0
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)
