"""Writes of the compliance console: chain checks, anchors, exports, the data lifecycle (retention,
legal holds, erasure) and the trail of people's actions in the admin (logins, users and groups),
each recorded by the service that makes the change (agents and keys are recorded by
``agents.services``, through ``core.recording``). One module per topic; this package re-exports
the names callers use.

A person's decision is an event of the tenant's system agent with ``actor`` ``user:<username>``,
in the session of the object it concerns or else the person's own ``admin:<username>`` session
(``memory.episodic.services.person_session``); a job's with ``actor`` ``job:<name>``.
"""

from __future__ import annotations

from .accounts import account_change_record, account_delete, group_save, user_save
from .anchors import anchor_head, anchor_sink_file, sink_anchor_records
from .chain_checks import (
    SCHEDULED_CHECK_JOB,
    SCHEDULED_CHECKS_KEPT_DAYS,
    chain_check_request,
    chain_check_run,
    chain_check_scheduled,
    recheck_rounds,
)
from .erasure import (
    ERASURE_STEPS,
    PAUSED_STEPS,
    erasure_approve,
    erasure_receipt_download_record,
    erasure_request,
    erasure_run,
)
from .exports import MAX_SESSION_CHARS, export_download_record, export_request, export_run
from .holds import hold_place, hold_release, hold_release_confirm, hold_review_set
from .logins import login_record
from .records import LIFECYCLE_SESSION, job_record, person_record
from .retention import (
    RETENTION_JOB,
    retention_rule_delete,
    retention_rule_save,
    retention_run,
    retention_run_start,
)

__all__ = [
    "ERASURE_STEPS",
    "LIFECYCLE_SESSION",
    "MAX_SESSION_CHARS",
    "PAUSED_STEPS",
    "RETENTION_JOB",
    "SCHEDULED_CHECKS_KEPT_DAYS",
    "SCHEDULED_CHECK_JOB",
    "account_change_record",
    "account_delete",
    "anchor_head",
    "anchor_sink_file",
    "chain_check_request",
    "chain_check_run",
    "chain_check_scheduled",
    "erasure_approve",
    "erasure_receipt_download_record",
    "erasure_request",
    "erasure_run",
    "export_download_record",
    "export_request",
    "export_run",
    "group_save",
    "hold_place",
    "hold_release",
    "hold_release_confirm",
    "hold_review_set",
    "job_record",
    "login_record",
    "person_record",
    "recheck_rounds",
    "retention_rule_delete",
    "retention_rule_save",
    "retention_run",
    "retention_run_start",
    "sink_anchor_records",
    "user_save",
]
