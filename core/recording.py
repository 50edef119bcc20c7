"""Recording a change into the tenant's trail, for the apps below the episodic log.

The trail (``memory.episodic``) sits above ``agents`` and ``tenants`` in the layering, yet the
service that makes a change records it (an agent renamed, a key minted or revoked). So a lower
app's service records here, ``change_record``, and the episodic layer answers: it registers its
recorder when the app loads (``memory.apps.MemoryConfig.ready``). With nobody answering, a
recorded change is refused rather than made unrecorded. Same shape as ``core.holds``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol


@dataclass(frozen=True)
class Actor:
    """Who makes a change: a person in the admin (``Actor.person``), a management command
    (``Actor.command``) or a background job (``Actor.job``). ``str(actor)`` is the trail's actor
    (``user:<name>``, ``command:<name>``, ``job:<name>``)."""

    kind: str
    name: str

    @classmethod
    def person(cls, username: str) -> Actor:
        """A person signed in to the admin as ``username``."""
        return cls("user", username)

    @classmethod
    def command(cls, name: str) -> Actor:
        """The management command ``name`` (``manage.py <name>``), run by whoever has the shell."""
        return cls("command", name)

    @classmethod
    def job(cls, name: str) -> Actor:
        """The system job ``name`` (retention, erasure, ...)."""
        return cls("job", name)

    def __str__(self) -> str:
        return f"{self.kind}:{self.name}"


class Recorder(Protocol):
    """Appends one decision made by ``by`` to the current tenant's trail: ``action`` goes into the
    payload (``{"action": action, **payload}``), ``content`` is the sentence a reader sees. The
    event lands in ``session_id`` or, without one, the actor's own session."""

    def __call__(
        self, *, by: Actor, action: str, content: str, payload: dict[str, Any], session_id: str | None = None
    ) -> object: ...


_recorder: list[Recorder] = []


def recorder_register(recorder: Recorder) -> None:
    """Register the trail's recorder (once; a second call replaces it)."""
    _recorder[:] = [recorder]


def change_record(
    *, by: Actor, action: str, content: str, payload: dict[str, Any], session_id: str | None = None
) -> object:
    """Record a change made by ``by`` in the current tenant's trail (see ``Recorder``); call it in
    the transaction of the change, so both commit or neither. Returns the recorder's event. Raises
    ``RuntimeError`` when no recorder is registered (the memory app is not loaded): no change
    that must be recorded goes unrecorded."""
    if not _recorder:
        raise RuntimeError("no trail recorder is registered (memory.apps registers it)")
    return _recorder[0](by=by, action=action, content=content, payload=payload, session_id=session_id)
