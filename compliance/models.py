"""What compliance keeps beside the trail: chain checks (their history), signed anchors of the chain
head, exports, and the data lifecycle (retention rules and runs, legal holds, erasure requests
with their signed receipts). Per tenant schema; none of it is in ``memory_event``, so deleting events cannot
delete the evidence that they existed (and each anchor also goes to a sink outside the database)."""

from __future__ import annotations

import os
import uuid
from datetime import date, timedelta

from django.db import models
from django.utils import timezone


class CheckStatus(models.TextChoices):
    QUEUED = "queued"
    RUNNING = "running"
    INTACT = "intact"
    BROKEN = "broken"
    FAILED = "failed"  # the check itself could not run (an error, not a verdict on the chain)


class CheckScope(models.TextChoices):
    FULL = "full"  # every event, from the genesis hash
    INCREMENTAL = "incremental"  # the events since the last intact check, and a share of the older ones


class ChainCheck(models.Model):
    """One verification of the tenant's chain and its anchors (``compliance.services.chain_check_run``).

    ``requested_by``: ``user:<username>`` or ``job:<name>``. ``checked`` / ``total``: events verified
    so far and the chain length when it started (the progress bar). ``findings``: what is wrong,
    ``[{"kind", "seq", "message"}]`` (``memory.episodic.selectors.FindingKind``); ``head_seq`` /
    ``head_hash``: the last event found; ``anchors_checked``: signed anchors compared (each once).
    ``scope``: a full check verifies ``from_seq`` (1) to ``head_seq``; an incremental one the new
    events ``from_seq`` to ``head_seq``, linked to the hash the last intact check ended on, and
    re-verifies the older events ``recheck_from`` to ``recheck_to`` (a rotating window).
    """

    requested_by = models.CharField(max_length=200)
    scope = models.CharField(max_length=12, choices=CheckScope.choices, default=CheckScope.FULL)
    from_seq = models.BigIntegerField(null=True, blank=True, help_text="the first new event verified")
    recheck_from = models.BigIntegerField(null=True, blank=True, help_text="older events re-verified from")
    recheck_to = models.BigIntegerField(null=True, blank=True, help_text="older events re-verified to")
    status = models.CharField(max_length=8, choices=CheckStatus.choices, default=CheckStatus.QUEUED)
    created_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    total = models.BigIntegerField(default=0)
    checked = models.BigIntegerField(default=0)
    head_seq = models.BigIntegerField(null=True, blank=True)
    head_hash = models.CharField(max_length=64, blank=True)
    anchors_checked = models.PositiveIntegerField(default=0)
    redacted = models.BigIntegerField(default=0, help_text="events checked whose content was erased")
    findings = models.JSONField(default=list, blank=True)
    error = models.TextField(blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        permissions = [("run_chaincheck", "Can run a verification of the trail")]
        indexes = [models.Index(fields=["status", "finished_at"], name="chaincheck_status_idx")]

    def __str__(self) -> str:
        return f"chain check #{self.pk} ({self.status})"

    @property
    def is_done(self) -> bool:
        return self.status in (CheckStatus.INTACT, CheckStatus.BROKEN, CheckStatus.FAILED)

    @property
    def percent(self) -> int:
        """Progress in whole percent (0-100)."""
        if self.is_done:
            return 100
        return min(99, int(100 * self.checked / self.total)) if self.total else 0

    @property
    def first_finding(self) -> dict[str, object] | None:
        return self.findings[0] if self.findings else None


class Anchor(models.Model):
    """A signed statement of the chain head: ``statement`` is the RFC 8785 text of
    ``{"v": 1, "tenant", "seq", "hash", "anchored_at"}`` exactly as signed, ``signature`` its Ed25519
    signature (hex, 128 chars) by the key whose ``key_id`` (SHA-256 of the raw public key, hex) is
    given. Rows are never updated or deleted (a trigger enforces it, as for events).
    ``sink``: where a copy went (a file path or URL) and ``sink_error`` why it did not."""

    seq = models.BigIntegerField()
    hash = models.CharField(max_length=64)
    anchored_at = models.DateTimeField()
    key_id = models.CharField(max_length=64)
    statement = models.TextField()
    signature = models.CharField(max_length=128)
    sink = models.CharField(max_length=500, blank=True)
    sink_error = models.TextField(blank=True)

    class Meta:
        ordering = ["-seq", "-id"]
        indexes = [models.Index(fields=["seq"], name="anchor_seq_idx")]

    def __str__(self) -> str:
        return f"anchor of #{self.seq} at {self.anchored_at:%Y-%m-%d %H:%M:%S} UTC"


class ScopeKind(models.TextChoices):
    SESSION = "session", "one session"
    AGENT = "agent", "one agent's events"
    RANGE = "range", "a time range"
    ALL = "all", "everything"


class ExportStatus(models.TextChoices):
    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    WITHDRAWN = "withdrawn"  # its archive was deleted by an erasure (``error`` says which)


class Export(models.Model):
    """An archive of part of the trail (``compliance.exporting``), made by a Celery task.

    Scope: ``scope`` with ``session_id``, ``agent_name`` and/or ``occurred_from`` (inclusive) /
    ``occurred_to`` (exclusive). ``events_total`` / ``events_done``: the progress bar. ``sha256``:
    the archive's digest (hex), ``size`` its bytes, ``path`` where it is stored. ``withdrawn``: an
    erasure deleted the archive (it held erased events); ``error`` names the erasure.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    requested_by = models.CharField(max_length=200)
    scope = models.CharField(max_length=8, choices=ScopeKind.choices)
    session_id = models.CharField(max_length=200, blank=True)
    agent_name = models.CharField(max_length=100, blank=True)
    occurred_from = models.DateTimeField(null=True, blank=True)
    occurred_to = models.DateTimeField(null=True, blank=True)
    status = models.CharField(max_length=10, choices=ExportStatus.choices, default=ExportStatus.QUEUED)
    created_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    events_total = models.BigIntegerField(default=0)
    events_done = models.BigIntegerField(default=0)
    first_seq = models.BigIntegerField(null=True, blank=True)
    last_seq = models.BigIntegerField(null=True, blank=True)
    path = models.CharField(max_length=500, blank=True)
    size = models.BigIntegerField(null=True, blank=True)
    sha256 = models.CharField(max_length=64, blank=True)
    error = models.TextField(blank=True)

    class Meta:
        ordering = ["-created_at"]
        permissions = [("export_trail", "Can export the trail")]

    def __str__(self) -> str:
        return f"export {str(self.pk)[:8]} ({self.get_scope_display()}, {self.status})"

    @property
    def is_done(self) -> bool:
        """Whether the export has finished (with an archive, a failure, or an archive withdrawn)."""
        return self.status in (ExportStatus.DONE, ExportStatus.FAILED, ExportStatus.WITHDRAWN)

    @property
    def archive_available(self) -> bool:
        """Whether the archive can be downloaded: the export is done and its file is on the server."""
        return self.status == ExportStatus.DONE and bool(self.path) and os.path.isfile(self.path)

    @property
    def state(self) -> str:
        """The state in words, true to the archive: ``done``, ``done, but the archive is no longer on
        the server``, ``withdrawn: <why>``, ``failed: <error>``, ``running`` or ``queued``."""
        if self.status == ExportStatus.DONE and not self.archive_available:
            return "done, but the archive is no longer on the server"
        if self.status in (ExportStatus.FAILED, ExportStatus.WITHDRAWN) and self.error:
            return f"{self.status}: {self.error}"
        return str(self.status)

    @property
    def percent(self) -> int:
        if self.is_done:
            return 100
        return min(99, int(100 * self.events_done / self.events_total)) if self.events_total else 0

    @property
    def filename(self) -> str:
        return f"engram-export-{str(self.pk)[:8]}.tar"

    def scope_description(self) -> str:
        """The scope in words (``session s1``, ``agent planner from … to …``)."""
        parts = []
        if self.scope == ScopeKind.SESSION:
            parts.append(f"session {self.session_id}")
        elif self.scope == ScopeKind.AGENT:
            parts.append(f"agent {self.agent_name}")
        elif self.scope == ScopeKind.ALL:
            parts.append("everything")
        if self.occurred_from:
            parts.append(f"from {self.occurred_from:%Y-%m-%d %H:%M} UTC")
        if self.occurred_to:
            parts.append(f"until {self.occurred_to:%Y-%m-%d %H:%M} UTC")
        return " ".join(parts) or "a time range"


# --- the data lifecycle: retention, legal holds, erasure --------------------------------------------------


class TargetKind(models.TextChoices):
    """What a legal hold or an erasure is about (``compliance.lifecycle`` says how each layer finds
    its rows for each kind)."""

    SUBJECT = "subject", "a data subject (the person the data is about)"
    SESSION = "session", "a session"
    AGENT = "agent", "an agent"
    TAG = "tag", "a memory tag"
    ENTITY = "entity", "a knowledge entity"
    TENANT = "tenant", "the whole tenant"


class RetentionRule(models.Model):
    """How long ``layer`` keeps data of ``memory_type`` ("" = every type the layer has without a rule
    of its own): ``keep_days`` after the moment the layer counts from (see
    ``compliance.lifecycle.LAYERS``). Layers without a row use their declared default."""

    layer = models.CharField(max_length=32)
    memory_type = models.CharField(max_length=32, blank=True, help_text="empty: every type")
    keep_days = models.PositiveIntegerField(help_text="days kept, counted as the layer says")
    updated_by = models.CharField(max_length=200, blank=True)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["layer", "memory_type"]
        constraints = [
            models.UniqueConstraint(fields=["layer", "memory_type"], name="retention_rule_layer_type_uniq")
        ]

    def __str__(self) -> str:
        kind = f" ({self.memory_type})" if self.memory_type else ""
        return f"{self.layer}{kind}: {self.keep_days} days"


class RunStatus(models.TextChoices):
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"


class RetentionRun(models.Model):
    """One pass of the retention rules (``compliance.services.retention_run``). ``removed``:
    ``{layer: rows removed}`` so far, updated in each batch's transaction, so a pass that was
    interrupted resumes with its counts and logs the whole of them once it finishes."""

    requested_by = models.CharField(max_length=200)
    status = models.CharField(max_length=8, choices=RunStatus.choices, default=RunStatus.RUNNING)
    started_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)
    removed = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)

    class Meta:
        ordering = ["-started_at", "-id"]

    def __str__(self) -> str:
        return f"retention run #{self.pk} ({self.status})"


HOLD_REVIEW_DAYS = 90  # a new hold's review date, unless the officer placing it chooses one
HOLD_REVIEW_NOTICE_DAYS = 14  # a hold is "nearing review" this many days before its date (and after)


def hold_review_default() -> date:
    """A new hold's review date: ``HOLD_REVIEW_DAYS`` from today (UTC)."""
    return timezone.now().date() + timedelta(days=HOLD_REVIEW_DAYS)


class LegalHold(models.Model):
    """Data that must be kept: retention skips it and every delete refuses to touch it while the
    hold is active (``released_at`` empty). ``kind`` ``tenant`` holds everything (``value`` empty).
    Once the subject of a released hold is erased, ``value`` is emptied and ``value_digest`` (the
    erasure's keyed digest of it) names the target instead.

    ``review_by``: the date by which an officer decides whether the hold is still needed (a hold
    kept past its reason is data kept without one); the officers' home page lists active holds
    within ``HOLD_REVIEW_NOTICE_DAYS`` of it or past it. A review moves it (``hold_review_set``).

    Released with a reason (``release_reason``). ``four_eyes`` (chosen when it is placed): one
    officer asks for the release (``release_requested_by`` / ``_at``, with the reason) and a second
    one releases it (``released_by``); without it the officer who asks releases it at once."""

    kind = models.CharField(max_length=8, choices=TargetKind.choices)
    value = models.CharField(max_length=300, blank=True)
    value_digest = models.CharField(max_length=64, blank=True)
    reason = models.TextField()
    four_eyes = models.BooleanField(
        default=True,
        verbose_name="release needs a second officer",
        help_text="one officer asks for the release with the reason, another confirms it",
    )
    placed_by = models.CharField(max_length=200)
    placed_at = models.DateTimeField(default=timezone.now)
    release_requested_by = models.CharField(max_length=200, blank=True)
    release_requested_at = models.DateTimeField(null=True, blank=True)
    released_by = models.CharField(max_length=200, blank=True)
    released_at = models.DateTimeField(null=True, blank=True)
    release_reason = models.TextField(blank=True)
    review_by = models.DateField(
        default=hold_review_default,
        verbose_name="review by",
        help_text="the date by which an officer decides whether the hold is still needed (UTC)",
    )

    class Meta:
        ordering = ["-placed_at", "-id"]
        indexes = [models.Index(fields=["kind", "value"], name="legalhold_target_idx")]

    def __str__(self) -> str:
        if self.kind == TargetKind.TENANT:
            target = "the whole tenant"
        elif self.value_digest and not self.value:
            target = f"an erased {self.kind} ({self.value_digest[:12]})"
        else:
            target = f"{self.kind} {self.value}"
        return f"legal hold #{self.pk} on {target}"

    @property
    def active(self) -> bool:
        return self.released_at is None

    @property
    def release_waiting(self) -> bool:
        """Whether an officer asked for the release and a second one has yet to confirm it."""
        return self.active and bool(self.release_requested_by)

    @property
    def state(self) -> str:
        """``active``, ``release asked by <who>: waiting for a second officer``, or ``released``."""
        if not self.active:
            return "released"
        if self.release_waiting:
            return f"release asked by {self.release_requested_by}: waiting for a second officer"
        return "active"


class ErasureStatus(models.TextChoices):
    REQUESTED = "requested"
    APPROVED = "approved"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"


class ErasureRequest(models.Model):
    """A request to erase everything of one target from every store, decided by two people.

    A compliance officer requests it (``requested_by``: ``user:<name>``) with the legal basis; a
    second person approves it; a Celery task executes it, layer by layer in bounded batches
    (``progress``: per store what is erased so far, saved with each batch, so an interrupted run
    resumes), verifies that nothing is left, and signs the ``receipt`` (RFC 8785 JSON, Ed25519
    ``receipt_signature`` by ``receipt_key_id``). For a subject or an entity, ``value`` is cleared
    once done and only ``value_digest`` (HMAC-SHA256 under a key derived from the secret key) stays,
    so the request does not keep the identifier it erased.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    kind = models.CharField(max_length=8, choices=TargetKind.choices)
    value = models.CharField(max_length=300, blank=True)
    value_digest = models.CharField(max_length=64)
    legal_basis = models.CharField(max_length=300)
    note = models.TextField(blank=True)
    status = models.CharField(max_length=10, choices=ErasureStatus.choices, default=ErasureStatus.REQUESTED)
    requested_by = models.CharField(max_length=200)
    requested_at = models.DateTimeField(default=timezone.now)
    approved_by = models.CharField(max_length=200, blank=True)
    approved_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    progress = models.JSONField(default=dict, blank=True)
    receipt = models.TextField(blank=True)
    receipt_signature = models.CharField(max_length=128, blank=True)
    receipt_key_id = models.CharField(max_length=64, blank=True)
    error = models.TextField(blank=True)

    class Meta:
        ordering = ["-requested_at"]
        permissions = [("approve_erasurerequest", "Can approve an erasure (not one's own)")]

    def __str__(self) -> str:
        return f"erasure {str(self.pk)[:8]} ({self.status})"

    @property
    def is_done(self) -> bool:
        return self.status in (ErasureStatus.DONE, ErasureStatus.FAILED)

    @property
    def target_label(self) -> str:
        """The target in words; a subject or entity by its digest once erased."""
        if self.value:
            return f"{self.kind} {self.value}"
        return f"{self.kind} (HMAC {self.value_digest[:16]}…)"

    @property
    def receipt_filename(self) -> str:
        return f"engram-erasure-{str(self.pk)[:8]}.json"
