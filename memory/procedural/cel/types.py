"""CEL's types as the checker sees them, and the types of JSON Schemas and JSON values."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class CelType:
    """A CEL type. ``elem`` is a list's element or a map's value type; ``fields`` an object's known
    fields; ``closed`` objects (``additionalProperties: false``) refuse unknown fields."""

    kind: str
    elem: CelType | None = None
    fields: tuple[tuple[str, CelType], ...] = ()
    closed: bool = False

    def __str__(self) -> str:
        if self.kind == "list":
            return f"list({self.elem})"
        if self.kind == "map":
            return f"map(string, {self.elem})"
        if self.kind == "object":
            return "object{" + ", ".join(name for name, _ in self.fields) + "}"
        return self.kind

    def field_type(self, name: str) -> CelType | None:
        for key, value in self.fields:
            if key == name:
                return value
        return None


DYN = CelType("dyn")
BOOL = CelType("bool")
INT = CelType("int")
UINT = CelType("uint")
DOUBLE = CelType("double")
STRING = CelType("string")
BYTES = CelType("bytes")
NULL = CelType("null_type")
TIMESTAMP = CelType("timestamp")
DURATION = CelType("duration")
TYPE = CelType("type")
NUMERIC = frozenset({"int", "uint", "double"})
ORDERED = frozenset({"int", "uint", "double", "string", "bytes", "bool", "timestamp", "duration"})


def list_of(elem: CelType) -> CelType:
    return CelType("list", elem=elem)


def map_of(value: CelType) -> CelType:
    return CelType("map", elem=value)


def object_of(fields: Mapping[str, CelType], *, closed: bool = False) -> CelType:
    return CelType("object", fields=tuple(sorted(fields.items())), closed=closed)


_SCALARS = {"string": STRING, "integer": INT, "number": DOUBLE, "boolean": BOOL, "null": NULL}


def from_schema(schema: Any) -> CelType:
    """The CEL type of the values a JSON Schema (2020-12) describes.

    ``type`` string/integer/number/boolean/null map to string/int/double/bool/null_type; ``array``
    to ``list`` of its ``items``; ``object`` to an object of its ``properties`` (closed when
    ``additionalProperties`` is false; a ``map`` when it has only ``additionalProperties``).
    ``["T", "null"]`` counts as ``T``; any other union, ``$ref`` or a schema without ``type`` is
    ``dyn``. A ``const`` or uniform ``enum`` gives the type of its values.
    """
    if not isinstance(schema, dict):
        return DYN
    kind = schema.get("type")
    if isinstance(kind, list):
        rest = [k for k in kind if k != "null"]
        kind = rest[0] if len(rest) == 1 else None
    if kind is None:
        values = [schema["const"]] if "const" in schema else schema.get("enum")
        if isinstance(values, list) and values:
            types = {type_of_value(v) for v in values}
            return types.pop() if len(types) == 1 else DYN
        return DYN
    if kind in _SCALARS:
        return _SCALARS[kind]
    if kind == "array":
        items = schema.get("items")
        return list_of(from_schema(items) if isinstance(items, dict) else DYN)
    if kind == "object":
        properties = schema.get("properties")
        extra = schema.get("additionalProperties", True)
        if not properties and isinstance(extra, dict):
            return map_of(from_schema(extra))
        props = properties if isinstance(properties, dict) else {}
        closed = extra is False or (bool(props) and not isinstance(extra, dict))
        return object_of({k: from_schema(v) for k, v in props.items()}, closed=closed)
    return DYN


def type_of_value(value: Any) -> CelType:
    """The CEL type of a JSON value (``1`` is ``int``, ``1.5`` is ``double``)."""
    if isinstance(value, bool):
        return BOOL
    if isinstance(value, int):
        return INT
    if isinstance(value, float):
        return DOUBLE
    if isinstance(value, str):
        return STRING
    if value is None:
        return NULL
    if isinstance(value, list):
        return list_of(DYN)
    return map_of(DYN)
