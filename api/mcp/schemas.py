"""The JSON schemas of the MCP tools' arguments: each is its REST input's, as ``/api/v1/schema``
declares it (held equal by ``tests/api/mcp/test_mcp_rest_schemas.py``). Built from the same
sources as the document where they are shared: ``api.schema.NO_NUL`` (no text input holds NUL) and
``api.parameters.PATH_PARAMETERS`` (what a URL segment accepts)."""

from typing import Any

from django.conf import settings

from api.parameters import PATH_PARAMETERS
from api.schema import JSON_OBJECT_SCHEMA, NO_NUL, NOT_BLANK
from memory.context.services import LAYERS
from memory.episodic.models import EventKind, EventRole
from memory.knowledge.services.data import MAX_LITERAL_CHARS

STR = {"type": "string"}


def path(name: str) -> dict[str, Any]:
    """The schema of the REST path parameter ``name`` (``api.parameters.PATH_PARAMETERS``: what the
    API accepts in that URL segment)."""
    return dict(PATH_PARAMETERS[name])


def text(max_length: int | None = None, *, nullable: bool = False, trimmed: bool = True) -> dict[str, Any]:
    """A string without NUL that is not blank once trimmed (``NOT_BLANK``, as every trimmed REST
    text input) of at most ``max_length`` characters (any length when ``None``; ``null`` too when
    ``nullable``), as the REST input serializers declare their ``CharField``s; ``trimmed=False``
    for a field kept as written (no NUL, ``NO_NUL``: memory content, string literals)."""
    schema: dict[str, Any] = {"type": ["string", "null"] if nullable else "string", "minLength": 1}
    if max_length is not None:
        schema["maxLength"] = max_length
    return {**schema, "pattern": NOT_BLANK if trimmed else NO_NUL}


def closed(properties: dict[str, Any], **schema: Any) -> dict[str, Any]:
    """An object of ``properties`` and no other member (a REST request component is closed:
    ``additionalProperties: false``, its serializer refuses unknown keys)."""
    return {"type": "object", "properties": properties, "additionalProperties": False, **schema}


SESSION = text(200, nullable=True)
"""A session id in a request body (``null``: none)."""
SUBJECT = text(200)
"""A ``data_subject``: the end user (data subject) an input is about or a read keeps."""
SUBJECT_WRITE = (
    "the end user (data subject) it is about: erasures, legal holds and subject-restricted reads target it; "
    "a key bound to a subject writes that one"
)
UNIT = {"type": "number", "minimum": 0, "maximum": 1}
ANY_JSON: dict[str, Any] = {}
JSON_OBJECT = JSON_OBJECT_SCHEMA
"""A JSON object whose keys (as every string in it) hold no NUL (``api.fields.JSONValueField``), as
REST's document states it."""


def _literal(kind: str, schema: dict[str, Any]) -> dict[str, Any]:
    return closed({kind: schema}, required=[kind])


FACT_OBJECT = {
    "oneOf": [
        closed(
            {
                "entity": {"type": "string", "maxLength": 300, "pattern": NOT_BLANK},
                "type": {"type": ["string", "null"], "maxLength": 64},
                "id": {"type": ["integer", "null"], "description": "as an answer gives it: the entity's"},
            },
            required=["entity"],
        ),
        _literal("string", text(MAX_LITERAL_CHARS, trimmed=False)),
        _literal("number", {"type": "number"}),
        _literal("date", {"type": "string", "format": "date"}),
        _literal("boolean", {"type": "boolean"}),
    ],
    "description": 'exactly one of: {"entity": "Acme", "type": "company"?}, {"string": ...}, '
    '{"number": ...}, {"date": "2026-01-31"}, {"boolean": ...}',
}
# the characters str.strip() removes, as a regex class (ECMA and Python alike)
WHITESPACE = (
    "\\t\\n\\u000b\\u000c\\r\\u001c-\\u001f \\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029"
    "\\u202f\\u205f\\u3000"
)
MAX_EVENT_CONTENT_CHARS = 200_000
EVENT = closed(
    {
        "session_id": text(200),
        "execution_id": text(200, nullable=True),
        "kind": {"type": "string", "enum": list(EventKind.values)},
        "role": {"type": "string", "enum": list(EventRole.values)},
        "content": {
            "oneOf": [
                {"type": "string", "pattern": NO_NUL, "maxLength": MAX_EVENT_CONTENT_CHARS},
                {"type": "string", "maxLength": 0},
            ]
        },
        "payload": JSON_OBJECT,
        "occurred_at": {"type": "string", "format": "date-time", "description": "with a timezone"},
        "data_subject": {**SUBJECT, "description": SUBJECT_WRITE},
    },
    required=["session_id", "kind", "occurred_at"],
    anyOf=[
        {"required": ["content"], "properties": {"content": {"pattern": f"[^{WHITESPACE}]"}}},
        {"required": ["payload"], "properties": {"payload": {"minProperties": 1}}},
    ],
    description="content (not only whitespace), a non-empty payload, or both",
)


VISIBLE_TO = closed(
    {
        "agents": {"type": "array", "items": text(100), "maxItems": 100, "description": "agent names"},
        "roles": {"type": "array", "items": text(100), "maxItems": 100, "description": "agent roles"},
    }
)


WEIGHTS = closed(
    {layer: UNIT for layer in LAYERS},
    description="0 to 1 per layer (0 leaves it out); defaults: working 1, window 0.9, episodes "
    "0.8, semantic 0.7, facts 0.6, procedures 0.5",
)


def event_batch() -> dict[str, Any]:
    """A batch of events: 1 to ``ENGRAM["MAX_EVENT_BATCH"]`` of them (read when the tools are built,
    as the REST document reads it when it is generated)."""
    return {"type": "array", "items": EVENT, "minItems": 1, "maxItems": settings.ENGRAM["MAX_EVENT_BATCH"]}


MESSAGE = closed(
    {
        "role": {"type": "string", "enum": list(EventRole.values)},
        "name": {**text(200), "description": "who spoke (default: the role)"},
        "content": text(MAX_EVENT_CONTENT_CHARS),
        "occurred_at": {"type": "string", "format": "date-time", "description": "default: now"},
        "metadata": {**JSON_OBJECT, "description": "kept in the message's event payload"},
    },
    required=["role", "content"],
)


def message_batch() -> dict[str, Any]:
    """A conversation's messages: 1 to ``ENGRAM["MAX_MEMORY_BATCH"]`` of them."""
    return {"type": "array", "items": MESSAGE, "minItems": 1, "maxItems": settings.ENGRAM["MAX_MEMORY_BATCH"]}
