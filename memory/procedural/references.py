"""References in a step's ``params`` (``{"$ref": "input.<path>"}``, ``steps.<id>.output.<path>``,
``<output_as>.<path>``): what each points at, whether its value is certainly there when the step
runs, and the params checked against the tool's input schema with each reference standing for a
value of its schema's type (checks 3 and 4 of ``validation``)."""

from __future__ import annotations

import copy
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError
from referencing.exceptions import Unresolvable

from .problems import ON_ERROR_KEYWORDS, Problem, Step, step_path

# Keywords that constrain a value rather than its type: a reference's value is not known before the
# run, so a failure of one of these at a reference is not a compile error.
VALUE_KEYWORDS = frozenset(
    {"minLength", "maxLength", "pattern", "format", "minimum", "maximum", "exclusiveMinimum",
     "exclusiveMaximum", "multipleOf", "minItems", "maxItems", "uniqueItems", "minProperties",
     "maxProperties", "enum", "const", "contains", "minContains", "maxContains", "dependentRequired",
     "contentEncoding", "contentMediaType", "propertyNames"}
)  # fmt: skip


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


def _missing_reason(target: Step, steps: list[Step], at: Step) -> str:
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


def params_problems(
    step: Step,
    steps: list[Step],
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
        where = step_path(step.index, "params", *position)
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
                step_path(step.index, "tool"),
                f"The tool's input schema has an unresolvable $ref: {exc}",
                step.id,
                step.index,
            )
        )
    return problems


def _resolve(
    ref: str,
    step: Step,
    steps: list[Step],
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
    step: Step,
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
        where = step_path(step.index, "params", *path)
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
                        step_path(step.index, "params", *missing),
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
