"""Tool contracts (immutable versions of JSON Schemas) and compiling a skill's steps against them."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from core.errors import InvalidInput

from .. import selectors
from ..models import Tool, ToolVersion
from ..validation import Compiled, ToolContract, compile_skill, schema_problems
from .common import MAX_TEXT_CHARS, Actor, check_name, invalid


def tool_save(
    *, actor: Actor, name: str, description: str, input_schema: Any, output_schema: Any
) -> tuple[ToolVersion, bool]:
    """Create tool ``name`` (version 1) or give it a new version with these contracts.

    Versions are immutable, so a skill version pinned to one keeps what it was validated against;
    the same contracts and description as the newest version change nothing. Returns
    ``(version, created)``. Raises ``InvalidInput`` naming the JSON path of a schema that is not a
    2020-12 object schema.
    """
    check_name(name)
    if not isinstance(description, str) or len(description) > MAX_TEXT_CHARS or "\x00" in description:
        raise InvalidInput(f"At most {MAX_TEXT_CHARS} characters.", field="description")
    problems = schema_problems(input_schema, path="input_schema") + schema_problems(
        output_schema, path="output_schema"
    )
    if problems:
        raise invalid("The tool's schemas are not valid.", Compiled(problems))
    with transaction.atomic():
        tool, _ = Tool.objects.get_or_create(name=name)
        tool = Tool.objects.select_for_update().get(pk=tool.pk)
        latest = ToolVersion.objects.filter(tool=tool).order_by("-version").first()
        if latest is not None and (latest.description, latest.input_schema, latest.output_schema) == (
            description,
            input_schema,
            output_schema,
        ):
            return latest, False
        version = ToolVersion(
            tool=tool,
            version=(latest.version + 1) if latest else 1,
            description=description,
            input_schema=input_schema,
            output_schema=output_schema,
            author=actor.label,
        )
        version.full_clean()
        version.save()
        actor.record(
            session_id=f"tool:{name}",
            content=f"{actor.label} saved tool {name} v{version.version}.",
            payload={
                "action": "tool_version_create",
                "tool": name,
                "version": version.version,
                "previous_version": latest.version if latest else None,
            },
        )
    return version, True


def version_compile(*, steps: Any, input_schema: Any, pins: dict[str, int] | None = None) -> Compiled:
    """Compile steps against the tools: their newest versions (a draft) or the ``pins`` (a version
    published before). See ``validation.compile_skill``."""
    if pins:
        versions = selectors.tool_versions_pinned(pins)
        missing = {n for n in selectors.step_tool_names(steps) if n not in versions}
        versions.update(selectors.tool_versions_latest(missing))
    else:
        versions = selectors.tool_versions_latest(selectors.step_tool_names(steps))
    tools = {
        name: ToolContract(name, v.version, v.input_schema, v.output_schema) for name, v in versions.items()
    }
    return compile_skill(steps=steps, input_schema=input_schema, tools=tools)
