"""The bounds of a checkpoint and the checks of a save's input (no query): each error names its field."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, NamedTuple

from core.errors import InvalidInput, PayloadTooLarge
from core.redis import check_id

from ..models import (
    MAX_NAMESPACE_LENGTH,
    MAX_SCHEMA_VERSION,
    MAX_SERIALIZED_TYPE_LENGTH,
    MAX_STEP_INDEX,
    MAX_VERSION_LENGTH,
    blob_digests,
    canonical_json,
)

MAX_STATE_BYTES = (
    1024 * 1024
)  # 1 MiB of JSON (UTF-8): larger state belongs in semantic memory or a blob store
MAX_PLAN_BYTES = 256 * 1024
MAX_KEY_LENGTH = 255
MAX_METADATA_BYTES = 64 * 1024
MAX_WRITES = 1_000  # pending writes in one call (a LangGraph task writes a handful)
MAX_TASK_ID_LENGTH = 200
MAX_CHANNEL_LENGTH = 200
MAX_SUBJECT_LENGTH = 200  # Checkpoint.data_subject
MAX_CHANNELS = 1_000  # channels a checkpoint names in channel_versions (a graph has a few dozen)

#: what a key, a namespace, a task, a channel or a type tag may hold: no control character (C0,
#: DEL, C1) and no line or paragraph separator; Python and ECMA (the OpenAPI document) read it alike
PRINTABLE_PATTERN = r"^[^\u0000-\u001f\u007f-\u009f\u2028\u2029]*$"
_PRINTABLE = re.compile(PRINTABLE_PATTERN)


def is_printable(value: str) -> bool:
    """Whether ``value`` matches ``PRINTABLE_PATTERN`` (the whole string)."""
    return _PRINTABLE.fullmatch(value) is not None


# a NUL character in a JSON string: canonical JSON writes it as the escape \u0000, and a backslash
# of the text itself as \\, so the escape is one preceded by an even number of backslashes
_NUL_ESCAPE = re.compile(r"(?<!\\)(?:\\\\)*\\u0000")


def _json_text(value: Any, *, field: str, limit: int) -> str:
    """``value`` in canonical JSON (``canonical_json``), checked: no NUL character (PostgreSQL's
    jsonb refuses them) and at most ``limit`` bytes as UTF-8. Raises ``InvalidInput`` or
    ``PayloadTooLarge`` naming ``field``."""
    text = canonical_json(value)
    if "\\u0000" in text and _NUL_ESCAPE.search(text):
        raise InvalidInput(f"{field} must not contain NUL characters.", field=field)
    # UTF-8 takes at least one byte per character: count the bytes only when it could matter
    if len(text) > limit // 4 and (size := len(text.encode("utf-8"))) > limit:
        hint = (
            ""
            if field == "metadata"
            else " Keep large material in semantic memory and reference it from the state."
        )
        raise PayloadTooLarge(
            f"{field} is {size} bytes of JSON; a checkpoint allows at most {limit} bytes.{hint}", field=field
        )
    return text


def _check_key(value: Any, *, field: str) -> None:
    _check_text(value, field=field, limit=MAX_KEY_LENGTH)


def check_namespace(value: Any, *, field: str = "checkpoint_ns") -> str:
    """Validate a checkpoint namespace: at most ``MAX_NAMESPACE_LENGTH`` printable characters ("" is
    the root). Raises ``InvalidInput`` naming ``field``."""
    if not isinstance(value, str) or len(value) > MAX_NAMESPACE_LENGTH or not is_printable(value):
        raise InvalidInput(
            f"{field} must be at most {MAX_NAMESPACE_LENGTH} printable characters.", field=field
        )
    return value


def check_serialized_type(value: Any, *, field: str) -> None:
    """Validate a serializer's type tag: 1 to ``MAX_SERIALIZED_TYPE_LENGTH`` printable characters.
    Raises ``InvalidInput`` naming ``field``."""
    if (
        not isinstance(value, str)
        or not 1 <= len(value) <= MAX_SERIALIZED_TYPE_LENGTH
        or not is_printable(value)
    ):
        raise InvalidInput(
            f"{field} must be 1 to {MAX_SERIALIZED_TYPE_LENGTH} printable characters.", field=field
        )


class Blob(NamedTuple):
    """One channel value a save sends: the channel, its new version, the serializer's type tag and
    bytes (``CheckpointBlob``)."""

    channel: str
    version: str
    value_type: str
    value: bytes


@dataclass(frozen=True)
class Body:
    """A checked checkpoint body's JSON values in canonical JSON (serialised once, see ``_json_text``),
    and the fingerprinted form of its blobs (``models.blob_digests``)."""

    state_json: str
    plan_json: str
    metadata_json: str
    channel_versions_json: str = "{}"
    blobs_json: str = "{}"


@dataclass(frozen=True, slots=True)
class SaveInput:
    """``checkpoint_save``'s values as sent, before any check (``agent`` and ``policy`` apart)."""

    session_id: str
    step_index: int | None
    idempotency_key: str
    state: Any
    plan: Any
    schema_version: int
    data_subject: Any
    checkpoint_ns: str
    parent_key: str
    metadata: Any
    serialized: tuple[str, bytes] | None
    channel_versions: Any = None
    blobs: Any = ()


def check_input(given: SaveInput) -> Body:
    """The checks of ``checkpoint_save``'s arguments, in its order; returns the JSON values in
    canonical JSON. Raises ``InvalidInput`` or ``PayloadTooLarge`` naming the field."""
    check_id(given.session_id, field="session_id")
    _check_key(given.idempotency_key, field="idempotency_key")
    if given.step_index is not None and (
        isinstance(given.step_index, bool)
        or not isinstance(given.step_index, int)
        or not 0 <= given.step_index <= MAX_STEP_INDEX
    ):
        raise InvalidInput(f"step_index must be an integer from 0 to {MAX_STEP_INDEX}.", field="step_index")
    check_namespace(given.checkpoint_ns)
    if given.parent_key:
        _check_key(given.parent_key, field="parent_key")
    if not isinstance(given.data_subject, str) or len(given.data_subject) > MAX_SUBJECT_LENGTH:
        raise InvalidInput(
            f"data_subject must be text of at most {MAX_SUBJECT_LENGTH} characters.", field="data_subject"
        )
    metadata_json = "{}"
    if given.metadata is not None:
        if not isinstance(given.metadata, dict):
            raise InvalidInput("metadata must be a JSON object.", field="metadata")
        metadata_json = _json_text(given.metadata, field="metadata", limit=MAX_METADATA_BYTES)
    if given.serialized is not None:
        kind, data = given.serialized
        check_serialized_type(kind, field="serialized.type")
        if len(data) > MAX_STATE_BYTES:
            raise PayloadTooLarge(
                f"serialized.data is {len(data)} bytes; a checkpoint allows at most {MAX_STATE_BYTES}.",
                field="serialized.data",
            )
    if (
        isinstance(given.schema_version, bool)
        or not isinstance(given.schema_version, int)
        or not 1 <= given.schema_version <= MAX_SCHEMA_VERSION
    ):
        raise InvalidInput(
            f"schema_version must be an integer from 1 to {MAX_SCHEMA_VERSION}.", field="schema_version"
        )
    if not isinstance(given.state, dict):
        raise InvalidInput("state must be a JSON object.", field="state")
    if not isinstance(given.plan, list):
        raise InvalidInput("plan must be a JSON list of steps.", field="plan")
    versions = _check_versions(given.channel_versions)
    _check_blobs(given.blobs, versions)
    return Body(
        state_json=_json_text(given.state, field="state", limit=MAX_STATE_BYTES),
        plan_json=_json_text(given.plan, field="plan", limit=MAX_PLAN_BYTES),
        metadata_json=metadata_json,
        channel_versions_json=canonical_json(versions),
        blobs_json=blob_digests(list(given.blobs)),
    )


def _check_text(value: Any, *, field: str, limit: int) -> None:
    if not isinstance(value, str) or not 1 <= len(value) <= limit or not is_printable(value):
        raise InvalidInput(f"{field} must be 1 to {limit} printable characters.", field=field)


def _check_versions(versions: Any) -> dict[str, str]:
    """``channel_versions`` checked: a JSON object of at most ``MAX_CHANNELS`` channels (1 to
    ``MAX_CHANNEL_LENGTH`` printable characters) to versions (text, 1 to ``MAX_VERSION_LENGTH``
    printable characters); ``None`` is ``{}``. Raises ``InvalidInput`` naming the field."""
    if versions is None:
        return {}
    if not isinstance(versions, dict) or len(versions) > MAX_CHANNELS:
        raise InvalidInput(
            f"channel_versions must be a JSON object of at most {MAX_CHANNELS} channels.",
            field="channel_versions",
        )
    for channel, version in versions.items():
        _check_text(channel, field="channel_versions", limit=MAX_CHANNEL_LENGTH)
        _check_text(version, field=f"channel_versions.{channel}", limit=MAX_VERSION_LENGTH)
    return versions


def _check_blobs(blobs: Any, versions: dict[str, str]) -> None:
    """The blobs of a save: one per channel at most, each at the version ``channel_versions``
    names for its channel (a blob no checkpoint names would never be read), at most
    ``MAX_STATE_BYTES`` in all. Raises ``InvalidInput`` or ``PayloadTooLarge`` naming the field."""
    seen: set[str] = set()
    size = 0
    for i, blob in enumerate(blobs):
        if versions.get(blob.channel) != blob.version:
            raise InvalidInput(
                f"blob {blob.channel!r} @ {blob.version!r} is not the version channel_versions names "
                "for its channel; send the blobs of the checkpoint's new versions only.",
                field=f"blobs[{i}].version",
            )
        if blob.channel in seen:
            raise InvalidInput(f"channel {blob.channel!r} has two blobs.", field=f"blobs[{i}].channel")
        seen.add(blob.channel)
        check_serialized_type(blob.value_type, field=f"blobs[{i}].value.type")
        size += len(blob.value)
        if size > MAX_STATE_BYTES:
            raise PayloadTooLarge(
                f"the blobs hold more than {MAX_STATE_BYTES} bytes; a checkpoint allows at most that.",
                field=f"blobs[{i}].value.data",
            )
