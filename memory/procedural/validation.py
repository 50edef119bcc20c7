"""The skill compiler: checks a version's steps against the tools' contracts before it can be published.

Pure functions over JSON values (no database): the services look the tools up and pass their
contracts in. Every problem names the step and the JSON path into the submitted document
(``steps[2].params.user_id``), so the API answers a 400 and the editor shows it next to the step.

A step is ``{"id", "tool", "params"?, "when"?, "on_error"?, "retries"?, "output_as"?}``:

- ``params`` is a JSON object for the tool's input; any value in it may be a reference
  ``{"$ref": "input.email"}`` (the skill's input), ``{"$ref": "steps.<id>.output.<path>"}`` (an
  earlier step's output) or ``{"$ref": "<output_as>.<path>"}`` (the same, by the step's alias);
  path segments are property names or list indexes.
- ``when`` is a CEL condition over the same variables (``input``, ``steps.<id>.output``, aliases):
  the step runs when it is true and is skipped otherwise.
- ``on_error``: ``stop`` (the default: the run fails), ``retry`` (``retries`` more attempts, 1 to
  10, then stop), ``skip`` (go on with the next step), or the id of a later step to jump to.

The checks, each with a failing and a passing example in ``tests/memory/procedural``:

1. the skill's input schema and the tools' schemas are JSON Schema 2020-12 object schemas;
2. every tool exists;
3. every step's ``params`` validates against its tool's input schema (``jsonschema``), with each
   reference standing for a value of the referenced schema's type: a ``number`` output where an
   ``integer`` is required, or an optional output property where the parameter is required, is an
   error (value constraints such as ``format`` or ``minLength`` cannot be known before the run and
   are not judged at a reference);
4. every reference points into the skill input or the output of a step that has certainly run
   before: an earlier step that is not skipped by its ``when`` or its ``on_error`` and not jumped
   over (a definite-assignment analysis over the control-flow graph);
5. ``when`` parses and type-checks as a CEL ``bool`` (``memory.procedural.cel``);
6. ``on_error`` targets exist and come later (a jump back would loop);
7. no step is unreachable or never runs (a ``when`` that is always false).

This module holds the step format's limits, the schema rule (1), each step's shape (2, 6) and the
flow analysis (4, 5, 7); ``references`` resolves references and checks params (3, 4) and
``problems`` holds what they share (``Problem``, ``Compiled``, ``ToolContract``, the parsed step).
Callers import the compiler's names from here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from . import cel
from .problems import ON_ERROR_KEYWORDS, Compiled, Problem, Step, ToolContract, json_path, step_path
from .references import is_ref, params_problems

__all__ = [
    "MAX_CONDITION_CHARS", "MAX_RETRIES", "MAX_STEPS", "ON_ERROR_KEYWORDS", "RESERVED_NAMES",
    "SCHEMA_DIALECT", "STEP_ID_PATTERN", "STEP_KEYS", "Compiled", "Problem", "ToolContract",
    "compile_skill", "schema_problems",
]  # fmt: skip

MAX_STEPS = 200
MAX_RETRIES = 10
# all the when conditions of a skill together (one may have cel.MAX_EXPRESSION_CHARS): parsing 2,000
# characters of CEL takes up to ~100 ms, so 200 conditions of 2,000 would hold one compile for 20 s
MAX_CONDITION_CHARS = 20_000
STEP_ID_PATTERN = re.compile(r"^[a-z][a-z0-9_]{0,63}$")  # a CEL identifier too: steps.<id>.output
STEP_KEYS = frozenset({"id", "tool", "params", "when", "on_error", "retries", "output_as"})
RESERVED_NAMES = frozenset(
    {"input", "steps", "true", "false", "null", "in", "as", "break", "const", "continue", "else", "for",
     "function", "if", "import", "let", "loop", "package", "namespace", "return", "var", "void", "while"}
)  # fmt: skip
SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"
# what a bad step id or output_as is told: (not a name, held by step #{number} already)
ID_MESSAGES = (
    "A step id is a lowercase letter, then lowercase letters, digits or '_' (at most 64).",
    "Duplicate step id (step #{number} has it).",
)
ALIAS_MESSAGES = (
    "output_as is a name: a lowercase letter, then lowercase letters, digits or '_'.",
    "Step #{number} already binds {name!r}.",
)


def schema_problems(schema: Any, *, path: str) -> list[Problem]:
    """Problems of a tool's or skill's schema: it must be valid against the JSON Schema 2020-12
    meta-schema (``Draft202012Validator.check_schema``) and describe an object: ``type: "object"``,
    ``properties`` (an object) and ``required`` (a list of names among the properties)."""
    if not isinstance(schema, dict):
        return [Problem(path, "Expected a JSON Schema object (an object schema).")]
    dialect = schema.get("$schema")
    if dialect is not None and dialect.rstrip("#") != SCHEMA_DIALECT:
        return [Problem(json_path(path, ["$schema"]), f"Only JSON Schema 2020-12 ({SCHEMA_DIALECT}).")]
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        return [
            Problem(
                json_path(path, list(exc.absolute_path)),
                f"Not a valid JSON Schema (2020-12): {exc.message}",
            )
        ]
    problems = []
    if schema.get("type") != "object":
        problems.append(
            Problem(json_path(path, ["type"]), 'A tool or skill schema must have "type": "object".')
        )
    properties = schema.get("properties")
    if not isinstance(properties, dict):
        problems.append(Problem(json_path(path, ["properties"]), "An object of the properties is required."))
        properties = {}
    required = schema.get("required")
    if not isinstance(required, list):
        problems.append(
            Problem(
                json_path(path, ["required"]), "A list of the required properties is required ([] for none)."
            )
        )
    else:
        for index, name in enumerate(required):
            if name not in properties:
                problems.append(
                    Problem(json_path(path, ["required", index]), f"{name!r} is required but not a property.")
                )
    return problems


def compile_skill(
    *, steps: Any, input_schema: Any, tools: Mapping[str, ToolContract], input_path: str = "input_schema"
) -> Compiled:
    """Compile a skill version: every problem of ``steps`` against ``tools`` (``{name: contract}``,
    the versions to check against) and of ``input_schema``. Never raises for bad input."""
    problems = schema_problems(input_schema, path=input_path)
    input_ok = not problems
    limit = _limit_problem(steps)
    if limit is not None:
        return Compiled([*problems, limit])

    parsed: list[Step] = []
    ids: dict[str, int] = {}
    aliases: dict[str, int] = {}
    for index, raw in enumerate(steps):
        step, step_problems = _shape(index, raw, ids, aliases, tools)
        problems += step_problems
        if step is not None:
            parsed.append(step)
    if len(parsed) != len(steps):
        return Compiled(problems)  # references and flow need every step's shape

    problems += _jump_problems(parsed, ids)
    if problems and any(p.path.endswith("on_error") for p in problems):
        return Compiled(problems)

    input_type = cel.from_schema(input_schema) if input_ok else cel.DYN
    available = _flow(parsed, input_type, problems, ids)
    for step in parsed:
        if available[step.index] is None:
            problems.append(
                Problem(
                    step_path(step.index),
                    "Unreachable: no path of the skill leads to this step.",
                    step.id,
                    step.index,
                )
            )
            continue
        if step.never_runs:
            problems.append(
                Problem(
                    step_path(step.index, "when"),
                    "Never runs: its condition is always false.",
                    step.id,
                    step.index,
                )
            )
        problems += params_problems(
            step, parsed, available[step.index] or set(), input_schema if input_ok else {}, aliases, ids
        )
    tool_versions = {s.tool.name: s.tool.version for s in parsed if s.tool is not None}
    return Compiled(sorted(problems, key=_order), tool_versions)


def _order(problem: Problem) -> tuple[int, str]:
    return (-1 if problem.index is None else problem.index, problem.path)


def _limit_problem(steps: Any) -> Problem | None:
    """The problem of a skill with no steps, too many, or too much text in its conditions in all."""
    if not isinstance(steps, list) or not steps:
        return Problem("steps", "A skill needs a list of at least one step.")
    if len(steps) > MAX_STEPS:
        return Problem("steps", f"At most {MAX_STEPS} steps.")
    conditions = sum(len(s["when"]) for s in steps if isinstance(s, dict) and isinstance(s.get("when"), str))
    if conditions > MAX_CONDITION_CHARS:
        return Problem(
            "steps",
            f"The steps' when conditions hold at most {MAX_CONDITION_CHARS} characters in all "
            f"({conditions} here).",
        )
    return None


def _shape(
    index: int,
    raw: Any,
    ids: dict[str, int],
    aliases: dict[str, int],
    tools: Mapping[str, ToolContract],
) -> tuple[Step | None, list[Problem]]:
    """The step's own shape: keys, id, tool, params, when, on_error, retries, output_as. Records a
    valid id in ``ids`` and a valid alias in ``aliases`` (``{name: step index}``)."""
    if not isinstance(raw, dict):
        return None, [Problem(step_path(index), "A step is a JSON object.", None, index)]
    step_id = raw.get("id")
    found = [
        (key, f"Unknown step field {key!r} (allowed: {', '.join(sorted(STEP_KEYS))}).")
        for key in sorted(set(raw) - STEP_KEYS)
    ]
    if problem := _name_problem(step_id, index, ids, ID_MESSAGES):
        found.append(("id", problem))
    tool_name = raw.get("tool")
    tool = tools.get(tool_name) if isinstance(tool_name, str) else None
    if not isinstance(tool_name, str) or not tool_name:
        found.append(("tool", "The name of a tool is required."))
    elif tool is None:
        found.append(("tool", f"No tool {tool_name!r} in this tenant."))
    found += _field_problems(raw)
    alias = raw.get("output_as")
    if alias is not None and (problem := _name_problem(alias, index, aliases, ALIAS_MESSAGES)):
        found.append(("output_as", problem))
    if found:
        label = step_id if isinstance(step_id, str) else None
        return None, [Problem(step_path(index, key), message, label, index) for key, message in found]
    output_type = cel.from_schema(tool.output_schema) if tool is not None else cel.DYN
    return Step(index, step_id, raw, tool, output_type), []  # type: ignore[arg-type]


def _name_problem(name: Any, index: int, taken: dict[str, int], messages: tuple[str, str]) -> str | None:
    """The problem of step ``index``'s id or alias ``name``, ``messages`` being ``(invalid,
    duplicate)``: ``invalid`` when it is not a name (``STEP_ID_PATTERN``), a reserved name, or
    ``duplicate`` (formatted with the ``number`` of the step that has it and the ``name``) when
    ``taken`` (``{name: step index}``) holds it; else None, and ``name`` is recorded in ``taken``."""
    invalid, duplicate = messages
    if not isinstance(name, str) or not STEP_ID_PATTERN.match(name):
        return invalid
    if name in RESERVED_NAMES:
        return f"{name!r} is a reserved name."
    if name in taken:
        return duplicate.format(number=taken[name] + 1, name=name)
    taken[name] = index
    return None


def _field_problems(raw: dict[str, Any]) -> list[tuple[str, str]]:
    """``(field, message)`` of a bad ``params``, ``when``, ``on_error`` or ``retries``."""
    found = []
    if not isinstance(raw.get("params", {}), dict) or is_ref(raw.get("params")):
        found.append(("params", "params is a JSON object (references go inside it)."))
    if "when" in raw and not isinstance(raw["when"], str):
        found.append(("when", "when is a CEL expression (a string)."))
    on_error = raw.get("on_error", "stop")
    if not isinstance(on_error, str) or not on_error:
        found.append(("on_error", 'on_error is "stop", "retry", "skip" or the id of a later step.'))
    retries = raw.get("retries")
    if retries is not None:
        if isinstance(retries, bool) or not isinstance(retries, int) or not 1 <= retries <= MAX_RETRIES:
            found.append(("retries", f"retries is an integer from 1 to {MAX_RETRIES}."))
        elif on_error != "retry":
            found.append(("retries", 'retries needs "on_error": "retry".'))
    return found


def _jump_problems(steps: list[Step], ids: dict[str, int]) -> list[Problem]:
    """Problems of ``on_error`` targets: a step id that exists and comes later (a jump back would loop)."""
    problems = []
    for step in steps:
        target = step.raw.get("on_error")
        if isinstance(target, str) and target not in ON_ERROR_KEYWORDS:
            if target not in ids:
                problems.append(
                    Problem(
                        step_path(step.index, "on_error"),
                        f"No step {target!r} to jump to.",
                        step.id,
                        step.index,
                    )
                )
            elif ids[target] <= step.index:
                problems.append(
                    Problem(
                        step_path(step.index, "on_error"),
                        f"on_error may only jump to a later step ({target!r} comes before; a jump back would loop).",
                        step.id,
                        step.index,
                    )
                )
    return problems


def _scope(input_type: cel.CelType, steps: list[Step], available: set[int]) -> dict[str, cel.CelType]:
    """The CEL variables at a step: ``input``, ``steps.<id>.output`` and the aliases of the steps
    whose output is certainly there."""
    outputs = {
        s.id: cel.object_of({"output": s.output_type}, closed=True) for s in steps if s.index in available
    }
    scope = {"input": input_type, "steps": cel.object_of(outputs, closed=True)}
    for s in steps:
        alias = s.raw.get("output_as")
        if alias and s.index in available:
            scope[alias] = s.output_type
    return scope


def _flow(
    steps: list[Step], input_type: cel.CelType, problems: list[Problem], ids: dict[str, int]
) -> list[set[int] | None]:
    """Definite assignment over the control-flow graph: for each step, the steps whose output is
    there on every path that reaches it (None: no path reaches it). Types each ``when`` on the way.

    Edges of step i: success → i+1 (adds i's output); its condition false → i+1; ``on_error: skip``
    → i+1; ``on_error: <id>`` → that step; ``stop`` and exhausted retries end the run. Jumps only go
    forward, so one pass in order sees every edge into a step before the step.
    """
    incoming: list[list[set[int]]] = [[] for _ in range(len(steps) + 1)]
    incoming[0].append(set())
    pool = cel.Budget(cel.SKILL_EVALUATION_STEPS)  # what the skill's constant conditions may take in all
    available: list[set[int] | None] = []
    for step in steps:
        edges = incoming[step.index]
        if not edges:
            available.append(None)
            continue
        here = set.intersection(*edges)
        available.append(here)
        runs, always = True, True
        condition = step.raw.get("when")
        if isinstance(condition, str):
            try:
                result = cel.check(condition, _scope(input_type, steps, here), pool=pool)
            except cel.CelCheckError as exc:
                problems.append(Problem(step_path(step.index, "when"), f"when: {exc}", step.id, step.index))
            else:
                if result.constant is False:
                    runs = False
                elif result.constant is not True:
                    always = False
        step.never_runs = not runs
        step.conditional = not always
        after = step.index + 1
        if not always or not runs:
            incoming[after].append(set(here))
        if runs:
            incoming[after].append(here | {step.index})
            on_error = step.raw.get("on_error", "stop")
            if on_error == "skip":
                incoming[after].append(set(here))
            elif on_error not in ON_ERROR_KEYWORDS:
                incoming[ids[on_error]].append(set(here))
    return available
