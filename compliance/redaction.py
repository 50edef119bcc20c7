"""Redactions decided by a retention pass or an erasure, and how the chain check holds them to account.

Each batch of events redacted is named, in the trail, by a decision of the job that redacts them
(``job:retention``, ``job:erasure``) in the lifecycle session: the runs of seqs it redacts, what
the job is carrying out (the retention run, the erasure request), and an Ed25519 signature over the
RFC 8785 text of that decision (``decision_statement``) by the signing key. The trigger on the log
lets a redaction through only when it points at such a decision naming the event; the signature
is what holds against whoever has the application's database credentials, who can append a
decision to the chain but cannot sign one (``seal_check``, run by every chain check with the public
key alone).

A job redacts inside ``redactions_decided`` (which says who decides and on what grounds), and the
episodic layer's remover (``compliance.lifecycle``) redacts through ``events_redact_decided``:
outside such a block it refuses.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from agents.services import system_agent_get
from core.canonical_json import canonical_json
from core.tenancy import current_schema
from memory.episodic.selectors import SealCheck
from memory.episodic.services import RedactionDecision, events_redact

from . import signing

# the trail session of retention passes and erasures (their decisions and redactions)
LIFECYCLE_SESSION = "compliance:lifecycle"
STATEMENT_VERSION = 1
SEAL_FIELDS = ("signature", "key_id")

_decision: contextvars.ContextVar[RedactionDecision | None] = contextvars.ContextVar(
    "engram_redaction_decision", default=None
)


def decision_statement(*, tenant: str, actor: str, payload: Mapping[str, Any]) -> bytes:
    """The bytes a redaction decision's signature covers: the RFC 8785 text of ``{"v": 1, "type":
    "engram-redaction", "tenant", "actor", "decision": <the payload without its signature and key
    id>}``."""
    decision = {name: value for name, value in payload.items() if name not in SEAL_FIELDS}
    document = {
        "v": STATEMENT_VERSION,
        "type": "engram-redaction",
        "tenant": tenant,
        "actor": actor,
        "decision": decision,
    }
    return canonical_json(document, root="decision").encode()


def _sealer(actor: str) -> Callable[[dict[str, Any]], Mapping[str, Any]]:
    def seal(payload: dict[str, Any]) -> dict[str, str]:
        statement = decision_statement(tenant=current_schema(), actor=actor, payload=payload)
        return {"signature": signing.sign(statement), "key_id": signing.key_id()}

    return seal


@contextlib.contextmanager
def redactions_decided(*, job: str, label: str, basis: Mapping[str, Any]) -> Iterator[None]:
    """Within the block, events redacted through ``events_redact_decided`` are redacted by decisions
    of ``job:<job>`` (text opened by ``label``, payload carrying ``basis``, e.g. ``{"retention_run":
    7}``), signed. Raises ``ServiceUnavailable`` at once without a signing key: nothing is redacted
    that could not be signed."""
    signing.key_id()
    actor = f"job:{job}"
    decision = RedactionDecision(
        agent=system_agent_get(),
        actor=actor,
        session_id=LIFECYCLE_SESSION,
        label=label,
        basis=dict(basis),
        seal=_sealer(actor),
    )
    token = _decision.set(decision)
    try:
        yield
    finally:
        _decision.reset(token)


def events_redact_decided(*, event_ids: Sequence[int]) -> list[int]:
    """Redact the events ``event_ids`` (``memory.episodic.services.events_redact``) by the decision
    of the enclosing ``redactions_decided`` block; returns the seqs redacted. Raises
    ``RuntimeError`` outside such a block: no redaction goes undecided."""
    decision = _decision.get()
    if decision is None:
        raise RuntimeError("events are redacted only by a decision: call inside redactions_decided()")
    return events_redact(event_ids=event_ids, decision=decision)


def seal_check(key: Ed25519PublicKey) -> SealCheck:
    """The chain check's ``seal`` (``memory.episodic.selectors.SealCheck``): a redaction decision
    holds when its signature verifies with ``key`` (an Ed25519 public key) over its statement; a
    ``legacy`` one (events redacted before decisions named them, recorded once by the migration that
    introduced them, which the trigger lets no later redaction point at) holds unsigned."""

    def check(seq: int, actor: str, payload: dict[str, Any]) -> str | None:
        if payload.get("legacy") is True and actor == "job:migration":
            return None
        signature = payload.get("signature")
        if not isinstance(signature, str) or not signature:
            return "is not signed"
        try:
            statement = decision_statement(tenant=current_schema(), actor=actor, payload=payload)
        except Exception:  # a payload a signer could not have written
            return "cannot be read as a signed statement"
        if not signing.signature_valid(statement, signature, key):
            return "has a signature that does not verify with the signing key: it was forged or altered"
        return None

    return check
