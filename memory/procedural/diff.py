"""What changed between two versions of a skill, step by step (the editor's side-by-side diff and
the ``diff_size`` of the decisions that publish, retire or roll back)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

ChangeKind = Literal["added", "removed", "changed", "moved", "unchanged"]
STEP_FIELDS = ("tool", "params", "when", "on_error", "retries", "output_as")


@dataclass(frozen=True)
class StepChange:
    """One row of the diff: a step matched by ``id`` across the two versions. ``old``/``new`` are the
    step in each (None where it is absent), ``fields`` the step fields whose values differ."""

    kind: ChangeKind
    id: str
    old: dict[str, Any] | None
    new: dict[str, Any] | None
    old_index: int | None
    new_index: int | None
    fields: tuple[str, ...] = ()

    def pretty(self, side: Literal["old", "new"]) -> str:
        """The step in ``side`` as indented JSON ("" where it is absent)."""
        step = self.old if side == "old" else self.new
        return "" if step is None else json.dumps(step, indent=2, ensure_ascii=False, sort_keys=False)

    @property
    def pretty_old(self) -> str:
        return self.pretty("old")

    @property
    def pretty_new(self) -> str:
        return self.pretty("new")


@dataclass(frozen=True)
class VersionDiff:
    """Every step's change in order of the newer version (removed steps where they stood), and
    whether the input schema changed. ``size`` counts the steps that are not unchanged, plus one for
    a changed input schema."""

    steps: list[StepChange]
    input_schema_changed: bool
    old_input_schema: Any = None
    new_input_schema: Any = None
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def size(self) -> int:
        return sum(1 for s in self.steps if s.kind != "unchanged") + int(self.input_schema_changed)


def _id(step: Any, index: int) -> str:
    return step["id"] if isinstance(step, dict) and isinstance(step.get("id"), str) else f"#{index + 1}"


def version_diff(
    *, old_steps: Any, new_steps: Any, old_input_schema: Any = None, new_input_schema: Any = None
) -> VersionDiff:
    """Diff two step lists, matching steps by ``id`` (a renamed step is one removed and one added).

    A step whose fields are equal but whose position among the common steps changed is ``moved``.
    """
    old = [s if isinstance(s, dict) else {"value": s} for s in (old_steps or [])]
    new = [s if isinstance(s, dict) else {"value": s} for s in (new_steps or [])]
    old_by_id = {_id(s, i): (i, s) for i, s in enumerate(old)}
    new_ids = [_id(s, i) for i, s in enumerate(new)]
    common_old_order = [k for k in (_id(s, i) for i, s in enumerate(old)) if k in set(new_ids)]
    common_new_order = [k for k in new_ids if k in old_by_id]
    rows: list[StepChange] = []
    emitted_removed: set[str] = set()

    def removed_before(limit: int) -> None:
        for key, (index, step) in old_by_id.items():
            if key not in new_ids and key not in emitted_removed and index < limit:
                rows.append(StepChange("removed", key, step, None, index, None))
                emitted_removed.add(key)

    for new_index, (key, step) in enumerate(zip(new_ids, new, strict=True)):
        if key in old_by_id:
            old_index, old_step = old_by_id[key]
            removed_before(old_index)
            changed = tuple(f for f in (*STEP_FIELDS, "value") if old_step.get(f) != step.get(f))
            if changed:
                kind: ChangeKind = "changed"
            elif common_old_order.index(key) != common_new_order.index(key):
                kind = "moved"
            else:
                kind = "unchanged"
            rows.append(StepChange(kind, key, old_step, step, old_index, new_index, changed))
        else:
            rows.append(StepChange("added", key, None, step, None, new_index))
    removed_before(len(old) + 1)
    counts: dict[str, int] = {}
    for row in rows:
        counts[row.kind] = counts.get(row.kind, 0) + 1
    return VersionDiff(
        rows,
        (old_input_schema or {}) != (new_input_schema or {}),
        old_input_schema,
        new_input_schema,
        counts,
    )
