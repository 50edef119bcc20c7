"""What the skill compiler (``validation``) works on and reports: a tool's contract, a step as
parsed, a problem at a JSON path, and the verdict."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from . import cel

ON_ERROR_KEYWORDS = ("stop", "retry", "skip")


@dataclass(frozen=True)
class Problem:
    """One compile error: ``path`` is the JSON path in the submitted document (``steps[1].when``),
    ``step`` the id of the step it concerns (None for the skill's input schema)."""

    path: str
    message: str
    step: str | None = None
    index: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"path": self.path, "step": self.step, "index": self.index, "message": self.message}

    def text(self) -> str:
        """The message with the step named, for an error list keyed by path."""
        if self.step is None:
            return self.message
        return f"Step {self.step!r} (#{(self.index or 0) + 1}): {self.message}"


@dataclass(frozen=True)
class ToolContract:
    """The contract of one tool version, as the compiler sees it."""

    name: str
    version: int
    input_schema: dict[str, Any]
    output_schema: dict[str, Any]


@dataclass(frozen=True)
class Compiled:
    """The compiler's verdict: ``problems`` (none: publishable) and the tool versions it checked
    the steps against (``{tool name: version}``), which a publish pins."""

    problems: list[Problem]
    tool_versions: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.problems

    def errors(self) -> dict[str, list[str]]:
        """``{path: [messages]}``: the ``errors`` member of a 400."""
        found: dict[str, list[str]] = {}
        for problem in self.problems:
            found.setdefault(problem.path, []).append(problem.text())
        return found

    def by_step(self) -> dict[int | None, list[Problem]]:
        """Problems per step index (None: not about one step)."""
        found: dict[int | None, list[Problem]] = {}
        for problem in self.problems:
            found.setdefault(problem.index, []).append(problem)
        return found


_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def json_path(root: str, parts: Sequence[Any]) -> str:
    """``root`` followed by ``parts``: ``.name`` for identifier keys, ``["a b"]`` for other keys,
    ``[3]`` for list indexes."""
    text = root
    for part in parts:
        if isinstance(part, int):
            text += f"[{part}]"
        elif _IDENTIFIER.match(str(part)):
            text += f".{part}"
        else:
            text += '["' + str(part).replace("\\", "\\\\").replace('"', '\\"') + '"]'
    return text


@dataclass
class Step:
    """A step whose shape is valid: its ``index`` in the skill, its ``id``, the submitted JSON
    (``raw``), its tool's contract and the CEL type of its output; the flow analysis sets
    ``never_runs`` (its condition is always false) and ``conditional`` (it may be skipped)."""

    index: int
    id: str
    raw: dict[str, Any]
    tool: ToolContract | None = None
    output_type: cel.CelType = cel.DYN
    never_runs: bool = False
    conditional: bool = False


def step_path(index: int, *parts: Any) -> str:
    """The JSON path of step ``index`` (``steps[2]``) and of ``parts`` in it (``steps[2].params.a``)."""
    return json_path(f"steps[{index}]", parts)
