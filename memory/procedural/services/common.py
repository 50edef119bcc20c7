"""Who makes a change to procedural memory and the input checks every topic shares."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from agents.models import Agent
from agents.services import system_agent_get
from core.errors import InvalidInput
from memory.episodic.services import decision_record

from ..models import NAME_PATTERN
from ..validation import Compiled

MAX_INTENTS = 50
MAX_TAGS = 50
MAX_TEXT_CHARS = 4000


@dataclass(frozen=True)
class Actor:
    """Who makes a change: an ``agent`` (through the API) or the person ``username`` (the admin)."""

    agent: Agent | None = None
    username: str | None = None

    def __post_init__(self) -> None:
        if (self.agent is None) == (self.username is None):
            raise ValueError("an Actor is an agent or a person, not both or neither")

    @property
    def label(self) -> str:
        """``agent:<name>`` or ``user:<name>``: how versions and tools record their author."""
        return f"agent:{self.agent.name}" if self.agent is not None else f"user:{self.username}"

    def record(self, *, session_id: str, content: str, payload: dict[str, Any]) -> None:
        """Append the ``decision`` event of this change to the trail."""
        if self.agent is not None:
            decision_record(agent=self.agent, session_id=session_id, content=content, payload=payload)
        else:
            decision_record(
                agent=system_agent_get(),
                session_id=session_id,
                content=content,
                payload=payload,
                actor=f"user:{self.username}",
            )


def skill_session(name: str) -> str:
    """The trail session of a skill's decisions."""
    return f"skill:{name}"


def invalid(message: str, compiled: Compiled | None = None, *, field: str | None = None) -> InvalidInput:
    """A 400 whose ``errors`` are the compiler's ``{path: [messages]}`` and ``problems`` the list."""
    if compiled is None:
        return InvalidInput(message, field=field)
    return InvalidInput(
        message,
        errors=compiled.errors(),
        extra={"problems": [p.as_dict() for p in compiled.problems]},
    )


def check_name(name: Any, *, field: str = "name") -> str:
    """``name`` when it is a skill's or tool's name (``NAME_PATTERN``); else ``InvalidInput`` on ``field``."""
    if not isinstance(name, str) or not re.match(NAME_PATTERN, name):
        raise InvalidInput(
            "A name is a lowercase letter, then lowercase letters, digits, '-' or '_' (at most 64).",
            field=field,
        )
    return name


def check_texts(values: Any, *, field: str, limit: int, max_chars: int) -> list[str]:
    """``values`` stripped and deduplicated (first kept) when they are at most ``limit`` non-blank
    strings of at most ``max_chars`` characters; else ``InvalidInput`` on ``field``."""
    if not isinstance(values, list | tuple) or len(values) > limit:
        raise InvalidInput(f"A list of at most {limit} strings.", field=field)
    cleaned = []
    for value in values:
        if not isinstance(value, str) or not value.strip() or len(value) > max_chars or "\x00" in value:
            raise InvalidInput(f"Each is a non-blank string of at most {max_chars} characters.", field=field)
        cleaned.append(value.strip())
    return list(dict.fromkeys(cleaned))
