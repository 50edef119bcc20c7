"""MADial-Bench (English, He et al. 2025) for ``madial_eval``: pure parsing of the memory-recall task.

Nothing here touches the database, so tests can call every function directly. The metrics are
LoCoMo's (``benchmarks.locomo``: hit@k, recall@k, reciprocal rank over sets of ids), applied to
memory ids instead of turn ids.

Files (JSON Lines): the archive ``{"<id>": {"time", "scene", "emotion", "event"}}`` per line (the
memory's text is ``event``), and the dialogues ``{"dialogue": [turn, ...], "test-turn": [i, ...],
"relevant-id": [id, ...]}`` per line, each turn a string such as ``'<Bart>: "..."\\n'``.

Protocol (the benchmark's ``embedding_top_20`` recall task): the query of a dialogue is
``"".join(dialogue[:test_turn[0]])`` as is (speaker tags and ``<BOD>`` included); the archive is
ranked, top 20; relevance is ``relevant-id``. Reported per dialogue and averaged: hit@1, hit@5,
recall@5, recall@10 and MRR@20.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MEMORY_FILE = "madial-en-dev-memory.jsonl"
DIALOGUE_FILE = "madial-en-dev-dialogue.jsonl"
DEPTH = 20  # the protocol ranks the top 20
KS = (1, 5, 10, 20)
HEADLINE = ("hit@1", "hit@5", "recall@5", "recall@10", "mrr")


@dataclass(frozen=True)
class ArchiveMemory:
    """One memory of the archive: ``id`` as written in the file (a string of digits)."""

    id: str
    time: str
    scene: str
    emotion: str
    event: str


@dataclass(frozen=True)
class Dialogue:
    """One dialogue's recall question: ``query`` per the protocol, ``relevant`` the archive ids."""

    number: int
    query: str
    relevant: tuple[str, ...]


def _lines(path: Path) -> Iterator[Any]:
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                yield json.loads(line)


def load_archive(folder: Path) -> list[ArchiveMemory]:
    """The memories of ``folder / MEMORY_FILE`` in file order. Raises ``OSError``/``ValueError``."""
    out = []
    for row in _lines(folder / MEMORY_FILE):
        for key, value in row.items():
            out.append(
                ArchiveMemory(
                    id=str(key),
                    time=str(value.get("time", "")),
                    scene=str(value.get("scene", "")),
                    emotion=str(value.get("emotion", "")),
                    event=str(value["event"]).strip(),
                )
            )
    return out


def dialogue_query(dialogue: list[str], test_turns: list[int]) -> str:
    """The protocol's query: the turns before the first test turn, joined as they are."""
    return "".join(dialogue[: test_turns[0]])


def load_dialogues(folder: Path) -> list[Dialogue]:
    """The dialogues of ``folder / DIALOGUE_FILE``, numbered from 0 in file order."""
    return [
        Dialogue(
            number=i,
            query=dialogue_query(row["dialogue"], row["test-turn"]),
            relevant=tuple(str(r) for r in row["relevant-id"]),
        )
        for i, row in enumerate(_lines(folder / DIALOGUE_FILE))
    ]
