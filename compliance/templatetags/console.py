"""Text helpers of the console's templates: ``{% line_diff old new as sides %}``, the line-level
changes between two texts for a side-by-side view (the skill diff's steps)."""

from __future__ import annotations

import difflib
from typing import Any

from django import template

register = template.Library()


@register.simple_tag
def line_diff(old: str, new: str) -> dict[str, list[dict[str, Any]]]:
    """``{"left": [...], "right": [...]}``: each side's lines as ``{"text", "kind"}`` where ``kind``
    is ``same``, ``del`` (only on the left: removed or changed) or ``add`` (only on the right: added
    or changed), from ``difflib``'s longest matching blocks over whole lines."""
    left_lines, right_lines = (old or "").splitlines(), (new or "").splitlines()
    left: list[dict[str, Any]] = []
    right: list[dict[str, Any]] = []
    matcher = difflib.SequenceMatcher(a=left_lines, b=right_lines, autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            left += [{"text": line, "kind": "same"} for line in left_lines[i1:i2]]
            right += [{"text": line, "kind": "same"} for line in right_lines[j1:j2]]
            continue
        left += [{"text": line, "kind": "del"} for line in left_lines[i1:i2]]
        right += [{"text": line, "kind": "add"} for line in right_lines[j1:j2]]
    return {"left": left, "right": right}


@register.simple_tag
def tool_rows(version: Any, other: Any) -> list[dict[str, Any]]:
    """A skill version's recorded tool versions (``{name: version}``) as rows ``{"tool",
    "version", "changed"}``, ``changed`` when ``other`` (the version compared with) recorded
    another version of that tool; sorted by tool."""
    mine = getattr(version, "tool_versions", None) or {}
    theirs = getattr(other, "tool_versions", None) or {}
    return [
        {"tool": tool, "version": number, "changed": tool in theirs and theirs[tool] != number}
        for tool, number in sorted(mine.items())
    ]
