"""Each MCP tool is its REST operation (``server.TOOL_OPERATIONS``): the tool's input schema, as
``tools/list`` gives it, against the operation's request (body members, query and path parameters) in
the OpenAPI document the server serves. Same names (less the declared ``left_out``), same required
set, compatible types (nullable exactly where REST accepts null), the same enums and limits where
either declares them; every mismatch is listed as ``tool.argument: what differs (MCP ..., REST ...)``."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client

from api.mcp import server
from tests.api.mcp.test_mcp_listing import listing

LIMITS = (
    *("enum", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"),
    *("minLength", "maxLength", "pattern", "format", "minItems", "maxItems", "uniqueItems"),
    *("minProperties", "maxProperties", "additionalProperties", "propertyNames"),
)
"""The keywords that must be equal where either side declares one (``format: double`` aside: JSON
has one number type)."""


@pytest.fixture
def document(db) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    response = Client().get("/api/v1/schema", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200
    result: dict[str, Any] = json.loads(response.content)
    return result


def resolve(document: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with ``$ref`` and one-member ``allOf`` replaced by what they name (siblings kept);
    ``oneOf [X, {"type": "null"}]`` as X with ``nullable``; a single-or-batch body as the single."""
    schema = dict(schema)
    if "$ref" in schema:
        target = document["components"]["schemas"][schema.pop("$ref").rsplit("/", 1)[1]]
        schema = {**resolve(document, target), **schema}
    if len(schema.get("allOf", [])) == 1:
        schema = {**resolve(document, schema.pop("allOf")[0]), **schema}
    variants = schema.get("oneOf")
    if variants:
        non_null = [v for v in variants if v != {"type": "null"}]
        if len(non_null) == 1:
            schema.pop("oneOf")
            schema = {**resolve(document, non_null[0]), **schema, "nullable": len(non_null) < len(variants)}
        elif len(non_null) == 2 and any(resolve(document, v).get("type") == "array" for v in non_null):
            schema.pop("oneOf")
            single = next(v for v in non_null if resolve(document, v).get("type") != "array")
            schema = {**resolve(document, single), **schema}
    return schema


def types(schema: dict[str, Any]) -> tuple[set[str], bool]:
    """(the JSON types a schema allows, empty for any; whether null is one of them)."""
    declared = schema.get("type")
    names = set(declared if isinstance(declared, list) else [declared] if declared else [])
    nullable = "null" in names or bool(schema.get("nullable"))
    return names - {"null"}, nullable


def compare(
    document: dict[str, Any], path: str, tool: dict[str, Any], rest: dict[str, Any], *, limits: bool
) -> list[str]:
    """The differences of a tool argument's schema from its REST input's, as ``path: ...`` lines."""
    rest = resolve(document, rest)
    found = []
    (tool_types, tool_null), (rest_types, rest_null) = types(tool), types(rest)
    if tool_types != rest_types:
        found.append(f"{path}: type MCP {sorted(tool_types) or 'any'}, REST {sorted(rest_types) or 'any'}")
    if tool_null != rest_null:
        found.append(f"{path}: nullable MCP {tool_null}, REST {rest_null}")
    if "default" in tool and tool["default"] is None and not tool_null:
        found.append(f"{path}: default null with a non-nullable type")
    for limit in LIMITS if limits else ("enum",):
        if tool.get(limit) != rest.get(limit) and not (limit == "format" and rest.get(limit) == "double"):
            found.append(f"{path}: {limit} MCP {tool.get(limit)!r}, REST {rest.get(limit)!r}")
    if "object" in rest_types and "properties" in rest:
        found += compare_objects(document, path, tool, rest, limits=limits)
    if "array" in rest_types and "items" in rest and "items" in tool:
        found += compare(document, f"{path}[]", tool["items"], rest["items"], limits=limits)
    for combinator in ("oneOf", "anyOf", "allOf"):  # what resolve() left: real alternatives or rules
        ours, theirs = tool.get(combinator, []), rest.get(combinator, [])
        if len(ours) != len(theirs):
            found.append(f"{path}: {combinator} MCP {len(ours)} schemas, REST {len(theirs)}: {theirs!r}")
            continue
        for index, (mine, other) in enumerate(zip(ours, theirs, strict=True)):
            found += compare(document, f"{path}.{combinator}[{index}]", mine, other, limits=limits)
    return found


def compare_objects(
    document: dict[str, Any],
    path: str,
    tool: dict[str, Any],
    rest: dict[str, Any],
    *,
    limits: bool,
    left_out: frozenset[str] = frozenset(),
) -> list[str]:
    found = []
    tool_properties, rest_properties = tool.get("properties", {}), rest.get("properties", {})
    for name in sorted(set(rest_properties) - set(tool_properties) - left_out):
        found.append(f"{path}.{name}: in REST, not in MCP (offer it or declare it left_out)")
    for name in sorted(set(tool_properties) - set(rest_properties)):
        found.append(f"{path}.{name}: in MCP, not in REST")
    if set(tool.get("required", [])) != set(rest.get("required", [])):
        found.append(
            f"{path}: required MCP {sorted(tool.get('required', []))}, REST {sorted(rest.get('required', []))}"
        )
    for name in sorted(set(tool_properties) & set(rest_properties)):
        found += compare(
            document, f"{path}.{name}", tool_properties[name], rest_properties[name], limits=limits
        )
    return found


def operation_inputs(document: dict[str, Any], operation_id: str) -> dict[str, Any]:
    """An operation's request as one object schema: its body's members, query and path parameters
    (``properties``, ``required``), and ``body``: the body schema itself."""
    for item in document["paths"].values():
        for operation in item.values():
            if isinstance(operation, dict) and operation.get("operationId") == operation_id:
                break
        else:
            continue
        break
    else:
        raise AssertionError(f"no operation {operation_id} in /api/v1/schema")
    properties, required = {}, set()
    for parameter in operation.get("parameters", []):
        if parameter["in"] in ("query", "path"):
            properties[parameter["name"]] = parameter["schema"]
            if parameter.get("required"):
                required.add(parameter["name"])
    content = operation.get("requestBody", {}).get("content", {}).get("application/json")
    body = resolve(document, content["schema"]) if content else None
    raw = content and content["schema"]
    if raw and "$ref" in raw:  # a single-or-batch body: the batch (for a tool whose argument is it)
        variants = document["components"]["schemas"][raw["$ref"].rsplit("/", 1)[1]].get("oneOf", [])
        batch = [v for v in variants if v.get("type") == "array"]
    else:
        batch = []
    if body and body.get("type") == "object":
        properties.update(body.get("properties", {}))
        required |= set(body.get("required", []))
    return {
        "type": "object",
        "properties": properties,
        "required": sorted(required),
        "body": batch[0] if batch else body,
    }


def differences(document: dict[str, Any], tool: dict[str, Any]) -> list[str]:
    name, schema = tool["name"], tool["inputSchema"]
    operations = server.TOOL_OPERATIONS.get(name)
    if not operations:
        return [f"{name}: no REST operation declared in server.TOOL_OPERATIONS"]
    selector = server.SELECTORS.get(name)
    found = []
    union: dict[str, Any] = {}
    required: set[str] | None = None
    for op in operations:
        inputs = operation_inputs(document, op.operation_id)
        where = f"{name} ({op.operation_id})"
        for missing in sorted(op.left_out - set(inputs["properties"])):
            found.append(f"{where}.{missing}: declared left_out, not a REST input")
        for kept in sorted(op.left_out & set(inputs["required"])):
            found.append(f"{where}.{kept}: left out but REST requires it")
        for extra in sorted(op.also_required & set(inputs["required"])):
            found.append(f"{where}.{extra}: declared also_required, but REST requires it already")
        if op.body:
            inputs = {"type": "object", "properties": {op.body: inputs["body"]}, "required": [op.body]}
        to_tool = {rest: argument for argument, rest in op.renamed.items()}
        mapped = {to_tool.get(k, k): v for k, v in inputs["properties"].items() if k not in op.left_out}
        mapped.update({argument: schema["properties"].get(argument, {}) for argument in op.headers})
        union.update(mapped)
        needed = {to_tool.get(k, k) for k in [*inputs["required"], *op.also_required]}
        required = needed if required is None else required & needed
        if len(operations) == 1:
            rest = {"type": "object", "properties": mapped, "required": sorted(needed)}
            found += compare_objects(document, name, schema, rest, limits=True)
        else:
            for argument in sorted(set(mapped) & set(schema["properties"])):
                found += compare(
                    document,
                    f"{where}.{argument}",
                    schema["properties"][argument],
                    mapped[argument],
                    limits=False,
                )
    if len(operations) > 1:
        if selector:
            union[selector] = schema["properties"].get(selector, {})
        for argument in sorted(set(schema["properties"]) - set(union)):
            found.append(f"{name}.{argument}: in MCP, not in any of its REST operations")
        for argument in sorted(set(union) - set(schema["properties"])):
            found.append(f"{name}.{argument}: in REST, not in MCP (offer it or declare it left_out)")
        expected = (required or set()) | ({selector} if selector else set())
        if set(schema.get("required", [])) != expected:
            found.append(
                f"{name}: required MCP {sorted(schema.get('required', []))}, REST {sorted(expected)}"
            )
    return found


def test_every_tool_has_its_rest_operations_inputs(document: dict[str, Any]) -> None:
    tools = listing()
    assert set(server.TOOL_OPERATIONS) == {tool["name"] for tool in tools}
    found = [line for tool in tools for line in differences(document, tool)]
    assert not found, "MCP tool schemas differ from their REST operations:\n" + "\n".join(found)
