"""Legal holds: placed, reviewed (the review date moved) and released (with four eyes, by a second
officer), each recorded."""

from __future__ import annotations

from datetime import date

from django.db import transaction
from django.utils import timezone

from core.errors import Conflict, InvalidInput, NotFound, PermissionDenied

from .. import lifecycle
from ..models import LegalHold, TargetKind, hold_review_default
from .records import LIFECYCLE_SESSION, person_record


def _review_date(review_by: date) -> date:
    """``review_by`` if it is today or later (UTC); ``InvalidInput`` on ``review_by`` otherwise."""
    if review_by < timezone.now().date():
        raise InvalidInput(
            f"The review date {review_by:%Y-%m-%d} is in the past: choose today or a later day.",
            field="review_by",
        )
    return review_by


def hold_place(
    *,
    kind: str,
    value: str,
    reason: str,
    username: str,
    four_eyes: bool = True,
    review_by: date | None = None,
) -> LegalHold:
    """Place a legal hold on (``kind``, ``value``) for ``reason`` as ``username`` and record it;
    with ``four_eyes`` its release will need a second officer (``hold_release``). ``review_by``
    (default ``models.HOLD_REVIEW_DAYS`` from today): when an officer decides whether it is still
    needed. Raises ``InvalidInput`` naming the field (unknown kind, missing value or reason, a
    review date in the past)."""
    review_by = _review_date(review_by or hold_review_default())
    if kind not in TargetKind.values:
        raise InvalidInput(f"Unknown target kind {kind!r}.", field="kind")
    value = lifecycle.normalise_value(kind, value)
    if kind != TargetKind.TENANT and not value:
        raise InvalidInput("Name what the hold is on.", field="value")
    if not reason.strip():
        raise InvalidInput("Give the reason for the hold.", field="reason")
    with transaction.atomic():
        hold = LegalHold(
            kind=kind,
            value=value,
            reason=reason.strip(),
            four_eyes=four_eyes,
            placed_by=f"user:{username}",
            review_by=review_by,
        )
        hold.full_clean()
        hold.save()
        _record(
            hold,
            username=username,
            action="legal_hold_place",
            content=f"{username} placed {hold}: {hold.reason}"
            + (" (its release needs a second officer)" if four_eyes else "")
            + f"; review by {review_by:%Y-%m-%d}",
            reason=hold.reason,
            four_eyes=four_eyes,
            review_by=review_by.isoformat(),
        )
    return hold


def _record(hold: LegalHold, *, username: str, action: str, content: str, **extra: object) -> None:
    """Record ``action`` on ``hold`` by the officer ``username`` in the lifecycle session: the
    payload names the hold (id, kind, value) and carries ``extra``; a hold on a data subject names
    the subject (its erasure redacts the record)."""
    person_record(
        username=username,
        action=action,
        content=content,
        payload={"hold_id": hold.pk, "kind": hold.kind, "value": hold.value, **extra},
        session_id=LIFECYCLE_SESSION,
        data_subject=hold.value if hold.kind == TargetKind.SUBJECT else "",
    )


def _hold_locked(hold: LegalHold | int) -> LegalHold:
    pk = hold.pk if isinstance(hold, LegalHold) else hold
    found = LegalHold.objects.select_for_update().filter(pk=pk).first()
    if found is None:
        raise NotFound(f"No legal hold {pk}.", field="hold_id")
    if not found.active:
        raise Conflict(f"{found} was released by {found.released_by} already.", field="hold_id")
    return found


def hold_review_set(*, hold: LegalHold | int, review_by: date, username: str) -> LegalHold:
    """As ``username``, move the review date of the active ``hold`` to ``review_by`` (the hold was
    reviewed and is still needed until then), recorded with the date it had. Returns the hold as it
    is now; setting the date it has already changes and records nothing.

    Raises ``InvalidInput`` (``review_by`` in the past), ``NotFound``, and ``Conflict`` when the
    hold is released."""
    review_by = _review_date(review_by)
    with transaction.atomic():
        found = _hold_locked(hold)
        previous = found.review_by
        if previous == review_by:
            return found
        found.review_by = review_by
        found.save(update_fields=["review_by"])
        _record(
            found,
            username=username,
            action="legal_hold_review",
            content=f"{username} set the review of {found} to {review_by:%Y-%m-%d} (it was {previous:%Y-%m-%d})",
            review_by=review_by.isoformat(),
            previous_review_by=previous.isoformat(),
        )
    return found


def hold_release(*, hold: LegalHold | int, username: str, reason: str) -> LegalHold:
    """Release the active ``hold`` as ``username`` for ``reason``, recorded. A hold placed with four
    eyes is not released by one person: this asks for its release (recorded as
    ``legal_hold_release_request``; the hold stays active, and still holds) and a second officer
    releases it with ``hold_release_confirm``. Returns the hold as it is now.

    Raises ``InvalidInput`` without a reason, ``NotFound``, and ``Conflict`` when it is released
    already or its release is already waiting for a second officer."""
    reason = reason.strip()
    if not reason:
        raise InvalidInput("Give the reason for releasing the hold.", field="reason")
    with transaction.atomic():
        found = _hold_locked(hold)
        if found.release_waiting:
            raise Conflict(
                f"{found.release_requested_by} asked for the release of {found} already: a second "
                "officer confirms it.",
                field="hold_id",
            )
        now = timezone.now()
        found.release_reason = reason
        if found.four_eyes:
            found.release_requested_by, found.release_requested_at = f"user:{username}", now
            found.save(update_fields=["release_requested_by", "release_requested_at", "release_reason"])
            _record(
                found,
                username=username,
                action="legal_hold_release_request",
                content=f"{username} asked for the release of {found}: {reason}. A second officer "
                "must confirm it.",
                reason=reason,
            )
            return found
        found.released_at, found.released_by = now, f"user:{username}"
        found.save(update_fields=["released_at", "released_by", "release_reason"])
        _record(
            found,
            username=username,
            action="legal_hold_release",
            content=f"{username} released {found}: {reason}",
            reason=reason,
        )
    return found


def hold_release_confirm(*, hold: LegalHold | int, username: str) -> LegalHold:
    """As a second officer ``username``, release the hold whose release another officer asked for
    (``hold_release``), recorded naming both and the reason given.

    Raises ``NotFound``; ``PermissionDenied`` for the officer who asked; ``Conflict`` when the hold
    is released already or nobody asked for its release."""
    with transaction.atomic():
        found = _hold_locked(hold)
        if not found.release_waiting:
            raise Conflict(
                f"Nobody asked for the release of {found}: ask first, with the reason.", field="hold_id"
            )
        if found.release_requested_by == f"user:{username}":
            raise PermissionDenied(
                "You asked for this release: a second officer must confirm it.", field="released_by"
            )
        found.released_at, found.released_by = timezone.now(), f"user:{username}"
        found.save(update_fields=["released_at", "released_by"])
        asked_by = found.release_requested_by.removeprefix("user:")
        _record(
            found,
            username=username,
            action="legal_hold_release",
            content=f"{username} released {found}, as {asked_by} asked: {found.release_reason}",
            reason=found.release_reason,
            requested_by=found.release_requested_by,
        )
    return found
