"""The query parameters of ``/api/v1/.../checkpoints`` operations, and the printable text field
their bodies share (``api.rest.checkpoints``)."""

from __future__ import annotations

import json
from typing import Any

from drf_spectacular.utils import extend_schema_field
from jsonschema import Draft202012Validator
from rest_framework import serializers

from api.fields import CleanCharField, CleanRegexField, StrictSerializer, subject_filter_field
from api.pagination import PageParams
from core.redis import ID_PATTERN
from memory.checkpoints import services
from memory.checkpoints.models import MAX_NAMESPACE_LENGTH


class PrintableField(CleanRegexField):
    """A ``CleanCharField`` the services' printable check accepts (``PRINTABLE_PATTERN``), which
    the document states as its pattern."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(
            services.PRINTABLE_PATTERN, message="Must be printable: no control characters.", **kwargs
        )


def _namespace_param(help_text: str) -> PrintableField:
    return PrintableField(
        required=False,
        max_length=MAX_NAMESPACE_LENGTH,
        allow_blank=True,
        trim_whitespace=False,
        help_text=help_text,
    )


class CheckpointListParams(StrictSerializer, PageParams):
    unknown_key_message = "Unknown query parameter."
    checkpoint_ns = _namespace_param("only this namespace (empty: the root); absent: every namespace")
    data_subject = subject_filter_field()


class CheckpointLatestParams(StrictSerializer):
    unknown_key_message = "Unknown query parameter."
    checkpoint_ns = _namespace_param("the namespace (default: the root, empty)")


# A metadata filter: a few keys with scalar values. Its size is bounded by its shape, which the
# document states, so the whole request line stays within the servers' limit (16 KiB in uvicorn's
# h11; percent-encoding multiplies a character up to 12 bytes): at most 8 * (32 + 64) characters.
METADATA_FILTER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "maxProperties": 8,
    "propertyNames": {"maxLength": 32, "pattern": "^[^\\u0000]*$"},
    "additionalProperties": {
        "anyOf": [
            {"type": "string", "maxLength": 64, "pattern": "^[^\\u0000]*$"},
            {"type": ["number", "boolean", "null"]},
        ]
    },
}
# its JSON text: 8 keys and values of at most 32 and 64 characters, each escaped to 6
MAX_METADATA_FILTER_LENGTH = 8 * (6 * (32 + 64) + 6) + 2


class JSONQueryField(CleanCharField):
    """A JSON object in a query parameter (``{"source": "loop"}`` URL-encoded) of the shape
    ``schema`` states, without lone surrogates; ``message`` says that shape when it is not met. A
    subclass declares its schema with ``x-json-query`` (``api.schema.json_query_parameters``), so
    the document gives the parameter as JSON content of that schema."""

    schema: dict[str, Any]
    message: str
    _validator: Draft202012Validator

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._validator = Draft202012Validator(cls.schema)

    def to_internal_value(self, data: Any) -> dict[str, Any]:  # type: ignore[override]  # parsed JSON
        text = super().to_internal_value(data)
        try:
            value = json.loads(text)
        except (ValueError, RecursionError):
            raise serializers.ValidationError("Expected a JSON object.") from None
        if not isinstance(value, dict):
            raise serializers.ValidationError("Expected a JSON object.")
        if not self._validator.is_valid(value):
            raise serializers.ValidationError(self.message)
        try:
            json.dumps(value, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            raise serializers.ValidationError(
                "Lone surrogate characters (e.g. \\ud800) are not text."
            ) from None
        return value


@extend_schema_field({**METADATA_FILTER_SCHEMA, "x-json-query": True})
class MetadataQueryField(JSONQueryField):
    """A metadata filter (``METADATA_FILTER_SCHEMA``)."""

    schema = METADATA_FILTER_SCHEMA
    message = (
        "Expected at most 8 keys (each at most 32 characters, no NUL) with strings of at most "
        "64 characters, numbers, booleans or null."
    )


# One checkpoint of the caller's by session and key (the document's session_id and idempotency_key)
CHECKPOINT_REF_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["session_id", "key"],
    "maxProperties": 2,
    "additionalProperties": False,
    "properties": {
        "session_id": {"type": "string", "pattern": ID_PATTERN.pattern},
        "key": {
            "type": "string",
            "minLength": 1,
            "maxLength": services.MAX_KEY_LENGTH,
            "pattern": services.PRINTABLE_PATTERN,
        },
    },
}
# its JSON text: a session id, a key of characters each escaped to at most 12 (a surrogate pair), the
# names and punctuation; percent-encoded it stays a few KiB of the request line
MAX_CHECKPOINT_REF_LENGTH = 200 + 12 * services.MAX_KEY_LENGTH + 40


@extend_schema_field({**CHECKPOINT_REF_SCHEMA, "x-json-query": True})
class CheckpointRefQueryField(JSONQueryField):
    """One checkpoint, ``{"session_id": ..., "key": <its idempotency key>}``
    (``CHECKPOINT_REF_SCHEMA``); answers ``(session_id, key)``."""

    schema = CHECKPOINT_REF_SCHEMA
    message = (
        "Expected {\"session_id\": 1-200 of letters, digits, '.', '_' or '-', \"key\": 1-255 printable "
        "characters} and nothing else."
    )

    def to_internal_value(self, data: Any) -> tuple[str, str]:  # type: ignore[override]  # the pair
        value = super().to_internal_value(data)
        if not ID_PATTERN.fullmatch(value["session_id"]):  # re's "$" also matches before a final "\\n"
            raise serializers.ValidationError(self.message)
        return value["session_id"], value["key"]


class CheckpointTupleParams(StrictSerializer, PageParams):
    unknown_key_message = "Unknown query parameter."
    checkpoint_ns = _namespace_param("only this namespace (empty: the root); absent: every namespace")
    key = PrintableField(
        required=False, max_length=services.MAX_KEY_LENGTH, trim_whitespace=False, help_text="one checkpoint"
    )
    before = PrintableField(
        required=False,
        max_length=services.MAX_KEY_LENGTH,
        trim_whitespace=False,
        help_text="only checkpoints saved before the one with this key (an unknown key matches none)",
    )
    metadata = MetadataQueryField(
        required=False,
        max_length=MAX_METADATA_FILTER_LENGTH,
        help_text="a JSON object: only checkpoints whose metadata holds each of its keys with that value",
    )


class CheckpointTuplesAllParams(StrictSerializer, PageParams):
    unknown_key_message = "Unknown query parameter."
    checkpoint_ns = _namespace_param("only this namespace (empty: the root); absent: every namespace")
    before = CheckpointRefQueryField(
        required=False,
        max_length=MAX_CHECKPOINT_REF_LENGTH,
        help_text="only checkpoints saved before this one (a JSON object: its session_id and key; "
        "an unknown checkpoint matches none)",
    )
    metadata = MetadataQueryField(
        required=False,
        max_length=MAX_METADATA_FILTER_LENGTH,
        help_text="a JSON object: only checkpoints whose metadata holds each of its keys with that value",
    )


class CheckpointDeleteParams(StrictSerializer):
    unknown_key_message = "Unknown query parameter."
    agent = CleanCharField(
        required=False,
        max_length=100,
        help_text="another agent's checkpoints (needs the curate scope); default: your own",
    )
