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
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError, ValidationError
from referencing.exceptions import Unresolvable

from . import cel

MAX_STEPS = 200
MAX_RETRIES = 10
# all the when conditions of a skill together (one may have cel.MAX_EXPRESSION_CHARS): parsing 2,000
# characters of CEL takes up to ~100 ms, so 200 conditions of 2,000 would hold one compile for 20 s
MAX_CONDITION_CHARS = 20_000
STEP_ID_PATTERN = re.compile(r"^[a-z][a-z0-9_]{0,63}$")  # a CEL identifier too: steps.<id>.output
STEP_KEYS = frozenset({"id", "tool", "params", "when", "on_error", "retries", "output_as"})
ON_ERROR_KEYWORDS = ("stop", "retry", "skip")
RESERVED_NAMES = frozenset(
    {"input", "steps", "true", "false", "null", "in", "as", "break", "const", "continue", "else", "for",
     "function", "if", "import", "let", "loop", "package", "namespace", "return", "var", "void", "while"}
)  # fmt: skip
SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"
# Keywords that constrain a value rather than its type: a reference's value is not known before the
# run, so a failure of one of these at a reference is not a compile error.
VALUE_KEYWORDS = frozenset(
    {"minLength", "maxLength", "pattern", "format", "minimum", "maximum", "exclusiveMinimum",
     "exclusiveMaximum", "multipleOf", "minItems", "maxItems", "uniqueItems", "minProperties",
     "maxProperties", "enum", "const", "contains", "minContains", "maxContains", "dependentRequired",
     "contentEncoding", "contentMediaType", "propertyNames"}
)  # fmt: skip


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


# --- JSON paths ---------------------------------------------------------------------------------------

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


# --- schemas ------------------------------------------------------------------------------------------


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


# --- references ---------------------------------------------------------------------------------------


def is_ref(value: Any) -> bool:
    """``{"$ref": "<path>"}`` (exactly that one key, a string)."""
    return isinstance(value, dict) and len(value) == 1 and isinstance(value.get("$ref"), str)


def refs_in(value: Any, at: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], str]]:
    """``(position, ref path)`` of every reference in a params value (positions are key/index tuples)."""
    if is_ref(value):
        yield at, value["$ref"]
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from refs_in(item, (*at, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from refs_in(item, (*at, index))


@dataclass(frozen=True)
class _Resolved:
    schema: Any  # the referenced schema ({} when it is not known)
    optional: bool  # a property on the way is not required: the value may be missing


def _navigate(schema: Any, parts: list[str], described: str) -> _Resolved | str:
    optional = False
    for part in parts:
        if not isinstance(schema, dict) or not schema:
            return _Resolved({}, optional)  # nothing known below: any value
        kind = schema.get("type")
        if kind == "array" or (isinstance(kind, list) and "array" in kind):
            if not part.isdigit():
                return f"{described} is a list: use an index, not {part!r}"
            schema = schema.get("items", {})
            optional = True  # a list may be shorter
        elif kind == "object" or "properties" in schema:
            properties = schema.get("properties") or {}
            if part in properties:
                if part not in (schema.get("required") or []):
                    optional = True
                schema = properties[part]
            elif isinstance(schema.get("additionalProperties"), dict):
                schema, optional = schema["additionalProperties"], True
            elif schema.get("additionalProperties") is False or properties:
                known = ", ".join(sorted(properties)) or "none"
                return f"{described} has no property {part!r} (known: {known})"
            else:
                return _Resolved({}, True)
        else:
            return f"{described} is a {kind or 'value'}, which has no {part!r}"
        described = f"{described}.{part}"
    return _Resolved(schema, optional)


_MISSING = object()


def sample(schema: Any) -> Any:
    """A value of the type ``schema`` describes, standing for a reference's value while the params
    are validated: ``""``, ``0``, ``0.5`` (a number that is not an integer), ``False``, ``None``, a
    one-item list, an object of the required properties; ``const``/``enum``: their first value.
    ``_MISSING`` when the schema says nothing of the type."""
    if not isinstance(schema, dict):
        return _MISSING
    if "const" in schema:
        return schema["const"]
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return schema["enum"][0]
    kind = schema.get("type")
    if isinstance(kind, list):
        rest = [k for k in kind if k != "null"]
        kind = rest[0] if rest else "null"
    if kind == "string":
        return ""
    if kind == "integer":
        return 0
    if kind == "number":
        return 0.5
    if kind == "boolean":
        return False
    if kind == "null":
        return None
    if kind == "array":
        item = sample(schema.get("items", {}))
        return [] if item is _MISSING else [item]
    if kind == "object":
        properties = schema.get("properties") or {}
        value = {}
        for name in schema.get("required") or []:
            item = sample(properties.get(name, {}))
            value[name] = None if item is _MISSING else item
        return value
    return _MISSING


def _under(path: Sequence[Any], prefix: tuple[Any, ...]) -> bool:
    return tuple(path[: len(prefix)]) == prefix


def _only_value_errors(error: ValidationError) -> bool:
    """The error is about the value, not the type (for ``anyOf``/``oneOf``: every alternative's is)."""
    if error.validator in VALUE_KEYWORDS:
        return True
    if error.validator in ("anyOf", "oneOf") and error.context:
        return all(_only_value_errors(e) for e in error.context)
    return False


# --- the compiler -------------------------------------------------------------------------------------


@dataclass
class _Step:
    index: int
    id: str
    raw: dict[str, Any]
    tool: ToolContract | None = None
    output_type: cel.CelType = cel.DYN
    never_runs: bool = False
    conditional: bool = False


def _step_path(index: int, *parts: Any) -> str:
    return json_path(f"steps[{index}]", parts)


def compile_skill(
    *, steps: Any, input_schema: Any, tools: Mapping[str, ToolContract], input_path: str = "input_schema"
) -> Compiled:
    """Compile a skill version: every problem of ``steps`` against ``tools`` (``{name: contract}``,
    the versions to check against) and of ``input_schema``. Never raises for bad input."""
    problems = schema_problems(input_schema, path=input_path)
    input_ok = not problems
    if not isinstance(steps, list) or not steps:
        problems.append(Problem("steps", "A skill needs a list of at least one step."))
        return Compiled(problems)
    if len(steps) > MAX_STEPS:
        problems.append(Problem("steps", f"At most {MAX_STEPS} steps."))
        return Compiled(problems)
    conditions = sum(len(s["when"]) for s in steps if isinstance(s, dict) and isinstance(s.get("when"), str))
    if conditions > MAX_CONDITION_CHARS:
        problems.append(
            Problem(
                "steps",
                f"The steps' when conditions hold at most {MAX_CONDITION_CHARS} characters in all "
                f"({conditions} here).",
            )
        )
        return Compiled(problems)

    parsed: list[_Step] = []
    ids: dict[str, int] = {}
    aliases: dict[str, int] = {}
    for index, raw in enumerate(steps):
        step, step_problems = _shape(index, raw, ids, aliases, tools)
        problems += step_problems
        if step is not None:
            parsed.append(step)
    if len(parsed) != len(steps):
        return Compiled(problems)  # references and flow need every step's shape

    for step in parsed:
        target = step.raw.get("on_error")
        if isinstance(target, str) and target not in ON_ERROR_KEYWORDS:
            if target not in ids:
                problems.append(
                    Problem(
                        _step_path(step.index, "on_error"),
                        f"No step {target!r} to jump to.",
                        step.id,
                        step.index,
                    )
                )
            elif ids[target] <= step.index:
                problems.append(
                    Problem(
                        _step_path(step.index, "on_error"),
                        f"on_error may only jump to a later step ({target!r} comes before; a jump back would loop).",
                        step.id,
                        step.index,
                    )
                )
    if problems and any(p.path.endswith("on_error") for p in problems):
        return Compiled(problems)

    input_type = cel.from_schema(input_schema) if input_ok else cel.DYN
    available = _flow(parsed, input_type, problems, ids)
    for step in parsed:
        if available[step.index] is None:
            problems.append(
                Problem(
                    _step_path(step.index),
                    "Unreachable: no path of the skill leads to this step.",
                    step.id,
                    step.index,
                )
            )
            continue
        if step.never_runs:
            problems.append(
                Problem(
                    _step_path(step.index, "when"),
                    "Never runs: its condition is always false.",
                    step.id,
                    step.index,
                )
            )
        problems += _params(
            step, parsed, available[step.index] or set(), input_schema if input_ok else {}, aliases, ids
        )
    tool_versions = {s.tool.name: s.tool.version for s in parsed if s.tool is not None}
    return Compiled(sorted(problems, key=_order), tool_versions)


def _order(problem: Problem) -> tuple[int, str]:
    return (-1 if problem.index is None else problem.index, problem.path)


def _shape(
    index: int,
    raw: Any,
    ids: dict[str, int],
    aliases: dict[str, int],
    tools: Mapping[str, ToolContract],
) -> tuple[_Step | None, list[Problem]]:
    """The step's own shape: keys, id, tool, params, on_error, retries, output_as."""
    here = _step_path(index)
    if not isinstance(raw, dict):
        return None, [Problem(here, "A step is a JSON object.", None, index)]
    step_id = raw.get("id")
    label = step_id if isinstance(step_id, str) else None
    problems = [
        Problem(
            _step_path(index, key),
            f"Unknown step field {key!r} (allowed: {', '.join(sorted(STEP_KEYS))}).",
            label,
            index,
        )
        for key in sorted(set(raw) - STEP_KEYS)
    ]
    if not isinstance(step_id, str) or not STEP_ID_PATTERN.match(step_id):
        problems.append(
            Problem(
                _step_path(index, "id"),
                "A step id is a lowercase letter, then lowercase letters, digits or '_' (at most 64).",
                label,
                index,
            )
        )
    elif step_id in RESERVED_NAMES:
        problems.append(Problem(_step_path(index, "id"), f"{step_id!r} is a reserved name.", label, index))
    elif step_id in ids:
        problems.append(
            Problem(
                _step_path(index, "id"), f"Duplicate step id (step #{ids[step_id] + 1} has it).", label, index
            )
        )
    else:
        ids[step_id] = index
    tool_name = raw.get("tool")
    tool = tools.get(tool_name) if isinstance(tool_name, str) else None
    if not isinstance(tool_name, str) or not tool_name:
        problems.append(Problem(_step_path(index, "tool"), "The name of a tool is required.", label, index))
    elif tool is None:
        problems.append(
            Problem(_step_path(index, "tool"), f"No tool {tool_name!r} in this tenant.", label, index)
        )
    if not isinstance(raw.get("params", {}), dict) or is_ref(raw.get("params")):
        problems.append(
            Problem(
                _step_path(index, "params"),
                "params is a JSON object (references go inside it).",
                label,
                index,
            )
        )
    if "when" in raw and not isinstance(raw["when"], str):
        problems.append(
            Problem(_step_path(index, "when"), "when is a CEL expression (a string).", label, index)
        )
    on_error = raw.get("on_error", "stop")
    if not isinstance(on_error, str) or not on_error:
        problems.append(
            Problem(
                _step_path(index, "on_error"),
                'on_error is "stop", "retry", "skip" or the id of a later step.',
                label,
                index,
            )
        )
    retries = raw.get("retries")
    if retries is not None:
        if isinstance(retries, bool) or not isinstance(retries, int) or not 1 <= retries <= MAX_RETRIES:
            problems.append(
                Problem(
                    _step_path(index, "retries"),
                    f"retries is an integer from 1 to {MAX_RETRIES}.",
                    label,
                    index,
                )
            )
        elif on_error != "retry":
            problems.append(
                Problem(_step_path(index, "retries"), 'retries needs "on_error": "retry".', label, index)
            )
    alias = raw.get("output_as")
    if alias is not None:
        if not isinstance(alias, str) or not STEP_ID_PATTERN.match(alias):
            problems.append(
                Problem(
                    _step_path(index, "output_as"),
                    "output_as is a name: a lowercase letter, then lowercase letters, digits or '_'.",
                    label,
                    index,
                )
            )
        elif alias in RESERVED_NAMES:
            problems.append(
                Problem(_step_path(index, "output_as"), f"{alias!r} is a reserved name.", label, index)
            )
        elif alias in aliases:
            problems.append(
                Problem(
                    _step_path(index, "output_as"),
                    f"Step #{aliases[alias] + 1} already binds {alias!r}.",
                    label,
                    index,
                )
            )
        else:
            aliases[alias] = index
    if problems:
        return None, problems
    output_type = cel.from_schema(tool.output_schema) if tool is not None else cel.DYN
    return _Step(index, step_id, raw, tool, output_type), []  # type: ignore[arg-type]


def _scope(input_type: cel.CelType, steps: list[_Step], available: set[int]) -> dict[str, cel.CelType]:
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
    steps: list[_Step], input_type: cel.CelType, problems: list[Problem], ids: dict[str, int]
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
                problems.append(Problem(_step_path(step.index, "when"), f"when: {exc}", step.id, step.index))
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


def _missing_reason(target: _Step, steps: list[_Step], at: _Step) -> str:
    if target.conditional:
        return f"{target.id!r} is skipped when its condition is false"
    if target.raw.get("on_error") == "skip":
        return f"{target.id!r} is skipped when it fails (on_error: skip)"
    for jumper in steps[: target.index]:
        goal = jumper.raw.get("on_error")
        if goal not in ON_ERROR_KEYWORDS and goal is not None:
            jump_to = next((s.index for s in steps if s.id == goal), -1)
            if target.index < jump_to <= at.index:
                return f"step {jumper.id!r} jumps over it on error"
    return f"{target.id!r} may not have run"


def _params(
    step: _Step,
    steps: list[_Step],
    available: set[int],
    input_schema: Any,
    aliases: dict[str, int],
    ids: dict[str, int],
) -> list[Problem]:
    """Problems of the step's references and of its params against its tool's input schema."""
    params = step.raw.get("params", {})
    problems: list[Problem] = []
    resolved: dict[tuple[Any, ...], _Resolved] = {}
    for position, ref in refs_in(params):
        where = _step_path(step.index, "params", *position)
        outcome = _resolve(ref, step, steps, available, input_schema, aliases, ids)
        if isinstance(outcome, str):
            problems.append(Problem(where, f"$ref {ref!r}: {outcome}.", step.id, step.index))
        else:
            resolved[position] = outcome
    if step.tool is None or problems:
        return problems
    try:
        validator = Draft202012Validator(step.tool.input_schema)
        problems += _validate(step, validator, params, resolved, drop_optional=False)
        if not problems and any(r.optional for r in resolved.values()):
            problems += _validate(step, validator, params, resolved, drop_optional=True)
    except Unresolvable as exc:
        problems.append(
            Problem(
                _step_path(step.index, "tool"),
                f"The tool's input schema has an unresolvable $ref: {exc}",
                step.id,
                step.index,
            )
        )
    return problems


def _resolve(
    ref: str,
    step: _Step,
    steps: list[_Step],
    available: set[int],
    input_schema: Any,
    aliases: dict[str, int],
    ids: dict[str, int],
) -> _Resolved | str:
    parts = ref.split(".")
    if not ref or any(not p for p in parts):
        return "a reference is input.<path>, steps.<id>.output.<path> or <output_as>.<path>"
    head = parts[0]
    if head == "input":
        return _navigate(input_schema, parts[1:], "input")
    if head == "steps":
        if len(parts) < 3 or parts[2] != "output":
            return "a step's value is referenced as steps.<id>.output[.<path>]"
        target_index = ids.get(parts[1])
        rest, described = parts[3:], f"steps.{parts[1]}.output"
    elif head in aliases:
        target_index, rest, described = aliases[head], parts[1:], head
    else:
        return "unknown root: use input, steps.<id>.output or a step's output_as name"
    if target_index is None:
        return f"no step {parts[1]!r}"
    if target_index >= step.index:
        return f"step {steps[target_index].id!r} runs after this one (#{target_index + 1}); only earlier outputs exist"
    if target_index not in available:
        return "its value may be missing here: " + _missing_reason(steps[target_index], steps, step)
    target = steps[target_index]
    return _navigate(target.tool.output_schema if target.tool else {}, rest, described)


def _set(container: Any, position: tuple[Any, ...], value: Any) -> None:
    for key in position[:-1]:
        container = container[key]
    if value is _MISSING:
        container[position[-1]] = None
    else:
        container[position[-1]] = value


def _validate(
    step: _Step,
    validator: Draft202012Validator,
    params: dict[str, Any],
    resolved: dict[tuple[Any, ...], _Resolved],
    *,
    drop_optional: bool,
) -> list[Problem]:
    """Validate ``params`` with every reference replaced by a ``sample`` of its schema (or, with
    ``drop_optional``, optional references left out of their object, to find required parameters
    they might not fill)."""
    instance = copy.deepcopy(params)
    unknown: list[tuple[Any, ...]] = []
    # deepest first, so removing an optional reference never shifts another's position
    for position, found in sorted(resolved.items(), key=lambda item: len(item[0]), reverse=True):
        value = sample(found.schema)
        if value is _MISSING:
            unknown.append(position)
        if drop_optional and found.optional and position and not isinstance(position[-1], int):
            parent = instance
            for key in position[:-1]:
                parent = parent[key]
            del parent[position[-1]]
        else:
            _set(instance, position, value)
    problems = []
    for error in sorted(validator.iter_errors(instance), key=lambda e: list(map(str, e.absolute_path))):
        path = tuple(error.absolute_path)
        at_ref = next((p for p in resolved if _under(path, p)), None)
        where = _step_path(step.index, "params", *path)
        if drop_optional:
            missing = error.validator == "required" and next(
                (
                    p
                    for p in resolved
                    if resolved[p].optional
                    and p[:-1] == path
                    and error.message == f"{p[-1]!r} is a required property"
                ),
                None,
            )
            if missing:
                ref = _ref_at(params, missing)
                problems.append(
                    Problem(
                        _step_path(step.index, "params", *missing),
                        f"$ref {ref!r} may be absent (not required in its schema), but {step.tool.name!r} "  # type: ignore[union-attr]
                        f"requires {missing[-1]!r}.",
                        step.id,
                        step.index,
                    )
                )
            continue
        if at_ref is not None:
            if at_ref in unknown or _only_value_errors(error):
                continue  # the type is unknown, or only the run can tell
            ref = _ref_at(params, at_ref)
            problems.append(
                Problem(
                    where,
                    f"$ref {ref!r} is {_describe(resolved[at_ref].schema)}, which {step.tool.name!r} "  # type: ignore[union-attr]
                    f"does not accept here: {error.message}",
                    step.id,
                    step.index,
                )
            )
        else:
            problems.append(Problem(where, f"{step.tool.name!r} input: {error.message}", step.id, step.index))  # type: ignore[union-attr]
    return problems


def _ref_at(params: Any, position: tuple[Any, ...]) -> str:
    value = params
    for key in position:
        value = value[key]
    return str(value["$ref"])


def _describe(schema: Any) -> str:
    kind = schema.get("type") if isinstance(schema, dict) else None
    if isinstance(kind, list):
        kind = " or ".join(map(str, kind))
    if not kind:
        return "a value"
    return f"{'an' if str(kind)[:1] in 'aeiou' else 'a'} {kind}"
