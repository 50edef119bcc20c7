"""Building blocks shared by every API input serializer: strict keys, aware datetimes, clean text."""

from __future__ import annotations

import json
import math
from datetime import datetime
from typing import Any, ClassVar

from django.core.exceptions import ValidationError as DjangoValidationError
from django.core.validators import RegexValidator
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from rest_framework import serializers

from core.canonical_json import json_check
from core.errors import InvalidInput
from core.tenancy import current_tenant

DEFAULT_JSON_MAX_DEPTH = 64


class StrictSerializer(serializers.Serializer):
    """An input serializer that rejects keys it does not declare (a typo is a 400, never ignored)."""

    unknown_key_message = "Unknown field."
    # The request component says so (additionalProperties: false) and carries these cross-field
    # rules of ``validate`` in JSON Schema, inside "allOf" (generated clients read "anyOf" at the
    # top of an object as a union of models): api.schema.EngramAutoSchema.
    schema_rules: ClassVar[dict[str, Any]] = {}

    def to_internal_value(self, data: Any) -> Any:
        if not isinstance(data, dict) and self.parent is None:
            raise serializers.ValidationError({"body": ["Expected a JSON object."]})
        unknown = sorted(set(data) - set(self.fields)) if isinstance(data, dict) else []
        errors = {key: [self.unknown_key_message] for key in unknown}
        try:
            value = super().to_internal_value(data)
        except serializers.ValidationError as exc:
            if not errors or not isinstance(exc.detail, dict):
                raise
            raise serializers.ValidationError({**exc.detail, **errors}) from exc
        if errors:
            raise serializers.ValidationError(errors)
        return value


class StrictFloatField(serializers.FloatField):
    """A JSON number (strings and booleans are refused rather than coerced)."""

    def to_internal_value(self, data: Any) -> float:
        if isinstance(data, bool) or not isinstance(data, int | float):
            raise serializers.ValidationError("Expected a number.")
        return super().to_internal_value(data)


class StrictIntegerField(serializers.IntegerField):
    """A JSON integer: JSON Schema's, so a number with a zero fraction (``5.0``) is one too; strings,
    other floats and booleans are refused rather than coerced."""

    def to_internal_value(self, data: Any) -> int:
        if isinstance(data, float) and data.is_integer():
            data = int(data)
        if isinstance(data, bool) or not isinstance(data, int):
            raise serializers.ValidationError("Expected an integer.")
        return super().to_internal_value(data)


class StrictQueryInteger(serializers.IntegerField):
    """An integer query parameter: decimal digits only (``"3"``, ``"-1"``), never ``"3.0"`` or ``" 3"``."""

    def to_internal_value(self, data: Any) -> int:
        if isinstance(data, bool) or not (
            isinstance(data, int)
            or (isinstance(data, str) and data.lstrip("-").isdigit() and len(data) <= 18)
        ):
            raise serializers.ValidationError("Expected an integer.")
        return super().to_internal_value(int(data))


class StrictQueryFloat(serializers.FloatField):
    """A number query parameter: its decimal text (``"0.5"``, ``"1"``, ``"-2e3"``); never ``nan``,
    ``inf`` or blank."""

    def to_internal_value(self, data: Any) -> float:
        if isinstance(data, bool) or not isinstance(data, int | float | str):
            raise serializers.ValidationError("Expected a number.")
        try:
            value = float(data)
        except ValueError:
            raise serializers.ValidationError("Expected a number.") from None
        if not math.isfinite(value):
            raise serializers.ValidationError("Expected a finite number.")
        return super().to_internal_value(value)


class StrictBooleanField(serializers.BooleanField):
    """A JSON boolean only."""

    def to_internal_value(self, data: Any) -> bool:
        if not isinstance(data, bool):
            raise serializers.ValidationError("Expected true or false.")
        return data


class AwareDateTimeField(serializers.DateTimeField):
    """ISO 8601 datetime that must carry a UTC offset; returned in UTC. Naive input is a 400."""

    default_error_messages = {
        "naive": "Include a timezone offset (e.g. 2026-01-31T12:00:00Z); naive datetimes are ambiguous.",
    }

    def to_internal_value(self, value: Any) -> datetime:
        if isinstance(value, str):
            try:
                parsed = parse_datetime(value.strip())
            except ValueError:  # well-formed but impossible: 2026-02-30, 25:00, +25:00
                self.fail("invalid", format="a real date and time, e.g. 2026-01-31T12:00:00Z")
            if parsed is not None and timezone.is_naive(parsed):
                self.fail("naive")
        elif isinstance(value, datetime) and timezone.is_naive(value):
            self.fail("naive")
        return super().to_internal_value(value)


class CleanCharField(serializers.CharField):
    """A JSON string (numbers are not coerced) without NUL characters (PostgreSQL text cannot hold them)."""

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            raise serializers.ValidationError("Expected a string.")
        value = super().to_internal_value(data)
        if "\x00" in value:
            raise serializers.ValidationError("NUL characters are not allowed.")
        return value


class WrittenTextField(CleanCharField):
    """A ``CleanCharField`` kept as written (whitespace not trimmed) that may not be only
    whitespace; the document gives it the not-blank pattern (``api.schema``)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(trim_whitespace=False, **kwargs)

    def to_internal_value(self, data: Any) -> str:
        value = super().to_internal_value(data)
        if not value.strip():
            raise serializers.ValidationError("This field may not be blank.")
        return value


class CleanRegexField(CleanCharField):
    """A ``CleanCharField`` that must match ``regex`` (``message`` otherwise); the document shows
    the pattern."""

    def __init__(self, regex: str, *, message: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.validators.append(RegexValidator(regex, message or f"Must match {regex}."))


class KeyedDictField(serializers.DictField):
    """A JSON object of at most ``max_keys`` keys, each 1 to ``key_max_length`` characters matching
    ``key_pattern``, to values of ``child``; the document states the keys' rule
    (``propertyNames``, ``maxProperties``: ``api.schema.KeyedDictFieldExtension``)."""

    def __init__(self, *, key_pattern: str, key_max_length: int, max_keys: int, **kwargs: Any) -> None:
        self.key_pattern, self.key_max_length, self.max_keys = key_pattern, key_max_length, max_keys
        self._key = RegexValidator(key_pattern)
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> dict[str, Any]:
        if isinstance(data, dict):
            if len(data) > self.max_keys:
                raise serializers.ValidationError(f"At most {self.max_keys} keys.")
            for key in data:
                if not isinstance(key, str) or not 1 <= len(key) <= self.key_max_length:
                    raise serializers.ValidationError(f"Keys must be 1 to {self.key_max_length} characters.")
                try:
                    self._key(key)
                except DjangoValidationError:
                    raise serializers.ValidationError(f"Key {key!r} must match {self.key_pattern}.") from None
        return super().to_internal_value(data)


def tenant_json_max_depth() -> int:
    """The current tenant's nesting limit for JSON values (``Tenant.json_max_depth``)."""
    return int(getattr(current_tenant(), "json_max_depth", None) or DEFAULT_JSON_MAX_DEPTH)


class JSONValueField(serializers.JSONField):
    """Any JSON value nested at most the tenant's ``json_max_depth`` levels, without NUL characters;
    with ``numbers=True`` also without integers a double cannot keep (values Engram hashes: see
    ``core.canonical_json``). Errors name the JSON path inside the field (``payload.a[1].b``).
    ``kind`` (``"object"``, ``"array"``) is the JSON type the OpenAPI document gives it."""

    def __init__(self, *, numbers: bool = False, kind: str | None = None, **kwargs: Any) -> None:
        self.numbers = numbers
        self.kind = kind
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> Any:
        value = super().to_internal_value(data)
        try:
            json_check(
                value,
                root=self.field_name or "value",
                max_depth=tenant_json_max_depth(),
                numbers=self.numbers,
            )
        except InvalidInput as exc:
            raise serializers.ValidationError(exc.message) from None
        return value


class JSONObjectField(JSONValueField):
    """A JSON object (not a list, string or number), at most ``max_bytes`` when serialised."""

    def __init__(self, *, max_bytes: int = 256 * 1024, **kwargs: Any) -> None:
        self.max_bytes = max_bytes
        kwargs.setdefault("kind", "object")
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> dict[str, Any]:
        if not isinstance(data, dict):
            raise serializers.ValidationError("Expected a JSON object.")
        value = super().to_internal_value(data)
        if len(json.dumps(value, ensure_ascii=False).encode()) > self.max_bytes:
            raise serializers.ValidationError(f"At most {self.max_bytes} bytes.")
        return value


def null_if_blank(value: str | None) -> str | None:
    """``None`` for a missing or empty string: absent optional values are ``null`` in every
    response, never ``""`` (docs/guides/agents/rest.md, Conventions)."""
    return value or None


class NullIfBlankCharField(serializers.CharField):
    """An output string that renders ``""`` as ``null`` (for model fields stored as blank strings)."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("allow_null", True)
        super().__init__(**kwargs)

    def to_representation(self, value: Any) -> str | None:  # type: ignore[override]  # null by design
        return None if value in (None, "") else str(value)


def subject_field(**kwargs: Any) -> CleanCharField:
    """A write's ``data_subject``: the end user the data is about and serves ("" or absent: none;
    with a key bound to one, that one, and another is a 403; ``agents.subjects``)."""
    return CleanCharField(
        max_length=200,
        required=False,
        default="",
        help_text="the end user (data subject) this is about: erasures, legal holds and subject-restricted "
        "reads target it; a key bound to a subject writes that one (another is refused, 403)",
        **kwargs,
    )


def subject_filter_field() -> CleanCharField:
    """A read's ``data_subject`` filter: only rows of that end user (a key bound to another: 403)."""
    return CleanCharField(
        required=False,
        max_length=200,
        help_text="only what is about this end user (data subject); a key bound to another one is refused (403)",
    )
