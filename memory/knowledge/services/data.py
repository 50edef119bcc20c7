"""What a fact write takes and answers: the object and the assertion as sent, a literal's checks
and canonical key, the outcome of an assert."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any, Literal

from core.errors import Conflict, InvalidInput

from ..models import OBJECT_KEY_MAX_LENGTH, Contradiction, Fact, LiteralType

_STRING_KEY_PREFIX = "string:"
#: the longest string literal: its key (``string:<text>``) must fit ``Fact.object_key``
MAX_LITERAL_CHARS = OBJECT_KEY_MAX_LENGTH - len(_STRING_KEY_PREFIX)


@dataclass(frozen=True)
class FactObject:
    """The object of a fact: an entity (``entity`` name) or a literal (``literal_type`` + ``value``)."""

    entity: str | None = None
    entity_type: str = ""
    literal_type: str = ""
    value: Any = None
    entity_id: int | None = None  # as a response gave it back: must be the named entity's id

    @classmethod
    def from_wire(cls, data: Any) -> FactObject:
        """The object in its JSON form: ``{"entity": "Acme", "type"?: "company", "id"?: 7}`` or
        exactly one literal ``{"string"|"number"|"date"|"boolean": v}`` (values are checked by
        ``fact_assert``). Raises ``InvalidInput`` (field ``object``) for another shape."""
        if not isinstance(data, dict):
            raise InvalidInput(
                'Expected an object such as {"entity": "Acme"} or {"number": 3}.', field="object"
            )
        kinds = [k for k in data if k in OBJECT_KINDS]
        unknown = [k for k in data if k not in (*OBJECT_KINDS, "type", "id")]
        if unknown or len(kinds) != 1 or (("type" in data or "id" in data) and kinds != ["entity"]):
            raise InvalidInput(
                f"Give exactly one of {', '.join(OBJECT_KINDS)} (and 'type' or 'id' only with 'entity').",
                field="object",
            )
        kind = kinds[0]
        if kind == "entity":
            name, entity_type, entity_id = data["entity"], data.get("type") or "", data.get("id")
            if not isinstance(name, str) or not isinstance(entity_type, str):
                raise InvalidInput("'entity' and 'type' are strings.", field="object")
            if entity_id is not None and (isinstance(entity_id, bool) or not isinstance(entity_id, int)):
                raise InvalidInput("'id' is an integer.", field="object")
            return cls(entity=name, entity_type=entity_type, entity_id=entity_id)
        return cls(literal_type=kind, value=data[kind])

    def to_wire(self) -> dict[str, Any]:
        """The JSON form ``from_wire`` reads (an entity's type only when it has one)."""
        if self.entity is not None:
            return {"entity": self.entity, **({"type": self.entity_type} if self.entity_type else {})}
        return {self.literal_type: self.value}


OBJECT_KINDS = ("entity", *LiteralType.values)


@dataclass(frozen=True)
class FactData:
    """One assertion. ``valid_from`` defaults to now; ``confidence`` is in [0, 1]."""

    subject: str
    predicate: str
    object: FactObject
    confidence: float = 1.0
    valid_from: datetime | None = None
    session_id: str = ""
    source_event_id: int | None = None
    subject_type: str = ""
    data_subject: str = ""


@dataclass(frozen=True)
class AssertResult:
    """``created`` (a new active fact), ``reinforced`` (the same live fact again) or ``disputed``
    (a new fact contradicting an active one, with the open ``contradiction``)."""

    fact: Fact
    outcome: Literal["created", "reinforced", "disputed"]
    contradiction: Contradiction | None = None


class FactRetracted(Conflict):
    """``fact_assert(refuse_retracted=True)`` met a retracted fact with the same subject, predicate
    and object: a job does not bring it back."""


def literal_canonical(literal_type: str, value: Any) -> tuple[Any, str]:
    """Validate a literal; return ``(value to store, object_key)``. Raises ``InvalidInput`` (field ``object``)."""

    def bad(message: str) -> InvalidInput:
        return InvalidInput(message, field="object")

    if literal_type == LiteralType.STRING:
        if not isinstance(value, str) or not value or len(value) > MAX_LITERAL_CHARS or "\x00" in value:
            raise bad(
                f"A string literal is a non-empty JSON string of at most {MAX_LITERAL_CHARS} characters."
            )
        return value, f"{_STRING_KEY_PREFIX}{value}"
    if literal_type == LiteralType.NUMBER:
        try:
            as_float = (
                float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None
            )
        except OverflowError:  # a JSON integer beyond a double's range
            as_float = None
        if as_float is None or not math.isfinite(as_float):
            raise bad("A number literal is a finite JSON number (within ±1.8e308).")
        return value, f"number:{as_float!r}"
    if literal_type == LiteralType.DATE:
        try:
            parsed = date.fromisoformat(value) if isinstance(value, str) and len(value) == 10 else None
        except ValueError:
            parsed = None
        if parsed is None:
            raise bad("A date literal is a string YYYY-MM-DD.")
        return parsed.isoformat(), f"date:{parsed.isoformat()}"
    if literal_type == LiteralType.BOOLEAN:
        if not isinstance(value, bool):
            raise bad("A boolean literal is true or false.")
        return value, f"boolean:{'true' if value else 'false'}"
    raise bad(f"Unknown literal type {literal_type!r}; use string, number, date or boolean.")
