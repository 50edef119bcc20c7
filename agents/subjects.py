"""End users (data subjects) and the keys bound to one: the one place their rules are written.

Memories, events, facts, checkpoints and store items name the person they are about in
``data_subject`` ("" for none: an agent's general knowledge). An API key may be bound to one
subject (``ApiKey.data_subject``); authentication puts the binding on the agent it returns
(``Agent.acting_for``), and every read and write path applies the three rules below with that agent
(docs/decisions/0078):

- visibility (``subject_visible_q``): a bound agent sees rows of its subject and rows naming no
  subject, never another subject's; an unbound agent is not restricted by subject;
- a read's filter (``subject_asked``): a bound agent asking for another subject is refused (403,
  field ``data_subject``); the filter keeps the rows of exactly the subject asked for;
- a write's subject (``subject_written``): a bound agent's writes carry its subject (none given:
  its subject; another one: refused).
"""

from __future__ import annotations

import copy

from django.db.models import Q

from core.errors import PermissionDenied

from .models import Agent

FIELD = "data_subject"


class SubjectRefused(PermissionDenied):
    """A key bound to one data subject named another (403, field ``data_subject``)."""

    def __init__(self, *, bound: str, asked: str, field: str = FIELD) -> None:
        super().__init__(
            f"This API key is bound to data subject {bound!r}: it cannot read or write data of {asked!r}.",
            field=field,
        )


class SubjectHeld(PermissionDenied):
    """A write by a key bound to one data subject would replace or remove data of another (403,
    naming ``field``): says neither whose data it is nor what it holds (docs/decisions/0099)."""

    def __init__(self, *, bound: str, field: str) -> None:
        super().__init__(
            f"This API key is bound to data subject {bound!r}: this {field} holds data of another "
            "end user, which it cannot replace or remove.",
            field=field,
        )


def subject_visible_q(agent: Agent, *, column: str = FIELD) -> Q:
    """The rows ``agent`` may see by subject: for a bound agent those whose ``column`` is its subject
    or "" (no subject); ``Q()`` (everything) for an unbound one."""
    if not agent.acting_for:
        return Q()
    return Q(**{f"{column}__in": ["", agent.acting_for]})


def subject_visible(agent: Agent, subject: str) -> bool:
    """Whether a row naming ``subject`` ("" for none) is visible to ``agent`` (``subject_visible_q``
    for one value)."""
    return not agent.acting_for or subject in ("", agent.acting_for)


def subject_asked(agent: Agent, asked: str | None, *, field: str = FIELD) -> str | None:
    """The subject a read is filtered to: ``asked`` (``None``: no filter). Raises ``SubjectRefused``
    (naming ``field``) when ``agent`` is bound to another subject."""
    if asked is not None and agent.acting_for and asked != agent.acting_for:
        raise SubjectRefused(bound=agent.acting_for, asked=asked, field=field)
    return asked


def subject_filter_q(asked: str | None, *, column: str = FIELD) -> Q:
    """The rows of exactly the subject ``asked`` (``Q()`` for ``None``: no filter)."""
    return Q() if asked is None else Q(**{column: asked})


def subject_written(agent: Agent, given: str, *, field: str = FIELD) -> str:
    """The subject a write by ``agent`` stores: ``given`` ("" for none) for an unbound agent; a bound
    agent's subject when ``given`` is "" or that subject. Raises ``SubjectRefused`` (naming
    ``field``) when a bound agent gives another one."""
    if not agent.acting_for:
        return given
    if given and given != agent.acting_for:
        raise SubjectRefused(bound=agent.acting_for, asked=given, field=field)
    return agent.acting_for


def subject_acting(agent: Agent, subject: str | None) -> Agent:
    """``agent`` reading for the end user ``subject`` (``None``: as it is): a copy acting for that
    subject, so every read made with it sees what a key bound to ``subject`` would (context
    assembly for one end user). Raises ``SubjectRefused`` when ``agent`` acts for another."""
    if subject is None or subject_asked(agent, subject) == agent.acting_for:
        return agent
    reader = copy.copy(agent)
    reader.acting_for = subject
    return reader


def subject_unbound(agent: Agent, *, what: str) -> None:
    """Refuse a read that crosses every subject's data (``what``, e.g. "a graph path") to an agent
    acting for one end user: ``SubjectRefused``-like 403, field ``data_subject``."""
    if agent.acting_for:
        raise PermissionDenied(
            f"This API key is bound to data subject {agent.acting_for!r}: {what} spans every subject's "
            "data, so a bound key may not read it.",
            field=FIELD,
        )
