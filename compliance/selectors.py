"""Reads of the compliance console: the integrity status, the history of checks and exports, and
the session timeline (keyset pages; no ``COUNT`` over the log)."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.postgres.search import SearchQuery
from django.core.exceptions import ValidationError
from django.db.models import Q, QuerySet
from django.utils import timezone

from agents.models import Agent
from memory.checkpoints.models import Checkpoint
from memory.episodic.models import ChainHead, Event, EventKind, EventRole
from memory.knowledge.models import Fact, FactProvenance
from memory.procedural.models import SkillRun
from memory.semantic.models import SemanticMemory

from .models import Anchor, ChainCheck, CheckScope, CheckStatus, ErasureRequest, Export, LegalHold

KIND_LABELS = dict(EventKind.choices)
ROLE_LABELS = dict(EventRole.choices)
TIMELINE_PAGE = 30  # rows rendered per page: the page's cost is mostly rendering them
RECENT_SESSIONS = 30
TRAIL_SEARCH_LIMIT = 100  # events a search of the trail lists, newest first
NEIGHBOUR_SCAN = 200  # events looked at to find the next / previous session of an agent


@dataclass(frozen=True)
class ChainStatus:
    """What the admin index shows: the last finished check, one still running, the head and the
    last anchor (each ``None`` when there is none yet), the last full check, the last scheduled
    (incremental) check, and the settings the scheduled checks keep (``check_seconds``, and
    ``recheck_seconds``, within which each older event is re-verified)."""

    last_check: ChainCheck | None
    running: ChainCheck | None
    head_seq: int
    head_hash: str
    last_anchor: Anchor | None
    last_full: ChainCheck | None = None
    last_scheduled: ChainCheck | None = None
    check_seconds: float = 0.0
    recheck_seconds: float = 0.0

    @property
    def broken(self) -> bool:
        return self.last_check is not None and self.last_check.status in (
            CheckStatus.BROKEN,
            CheckStatus.FAILED,
        )

    @property
    def covered_seq(self) -> int:
        """Every event up to this seq was verified by the last check, intact (0: none was)."""
        check = self.last_check
        if check is None or check.status != CheckStatus.INTACT:
            return 0
        return check.head_seq or 0

    @property
    def uncovered(self) -> tuple[int, int] | None:
        """Events after the last intact check's coverage, up to the head: no check has verified
        them yet (``(first, last)``), or None."""
        if self.last_check is None or self.broken or self.head_seq <= self.covered_seq:
            return None
        return (self.covered_seq + 1, self.head_seq)

    @property
    def scheduled_running(self) -> bool:
        """Whether scheduled checks are keeping their pace: the last one finished within three
        intervals (else the worker or beat is down, and older events are re-verified by no one)."""
        check = self.last_scheduled
        if check is None or check.finished_at is None or not self.check_seconds:
            return False
        return timezone.now() - check.finished_at <= timedelta(seconds=3 * self.check_seconds + 60)

    @property
    def recheck_minutes(self) -> int:
        return max(1, math.ceil(self.recheck_seconds / 60))


def chain_status() -> ChainStatus:
    """The current tenant's integrity status (a handful of indexed queries)."""
    finished = ChainCheck.objects.filter(finished_at__isnull=False).order_by("-finished_at", "-id")
    running = (
        ChainCheck.objects.filter(status__in=[CheckStatus.QUEUED, CheckStatus.RUNNING])
        .order_by("-created_at")
        .first()
    )
    head = ChainHead.objects.filter(pk=1).first()
    return ChainStatus(
        last_check=finished.first(),
        running=running,
        head_seq=head.last_seq if head else 0,
        head_hash=head.last_hash if head else "",
        last_anchor=Anchor.objects.order_by("-seq", "-id").first(),
        last_full=finished.filter(scope=CheckScope.FULL).first(),
        last_scheduled=finished.filter(scope=CheckScope.INCREMENTAL).first(),
        check_seconds=float(settings.ENGRAM["CHAIN_CHECK_SECONDS"]),
        recheck_seconds=float(settings.ENGRAM["CHAIN_RECHECK_SECONDS"]),
    )


@dataclass(frozen=True)
class Flags:
    """The events the latest finished check names in its findings (none when it found nothing):
    ``by_seq`` maps an event's seq to those findings (``{"kind", "seq", "message"}``)."""

    check: ChainCheck | None
    by_seq: dict[int, list[dict[str, Any]]]

    def of(self, seq: int) -> list[dict[str, Any]]:
        return self.by_seq.get(seq, [])


def flagged_events() -> Flags:
    """The events named by the latest finished chain check of the tenant (one indexed query)."""
    check = ChainCheck.objects.filter(finished_at__isnull=False).order_by("-finished_at", "-id").first()
    if check is None or not check.findings:
        return Flags(check, {})
    by_seq: dict[int, list[dict[str, Any]]] = {}
    for finding in check.findings:
        if isinstance(finding.get("seq"), int):
            by_seq.setdefault(finding["seq"], []).append(finding)
    return Flags(check, by_seq)


def event_ids_by_seq(seqs: list[int]) -> dict[int, int]:
    """The primary keys of the events at ``seqs`` (those that exist), by seq."""
    return dict(Event.objects.filter(seq__in=seqs).values_list("seq", "pk"))


@dataclass(frozen=True)
class Head:
    """The chain head row: the last event's ``seq`` (0: an empty log) and ``hash``."""

    seq: int
    hash: str


def chain_head() -> Head:
    head = ChainHead.objects.filter(pk=1).first()
    return Head(head.last_seq, head.last_hash) if head else Head(0, "")


def anchor_of(*, seq: int, hash_value: str) -> Anchor | None:
    """The first anchor of the chain at (``seq``, ``hash_value``), or None."""
    return Anchor.objects.filter(seq=seq, hash=hash_value).order_by("id").first()


def chain_check_get(*, check_id: int) -> ChainCheck | None:
    return ChainCheck.objects.filter(pk=check_id).first()


def export_get(*, export_id: Any) -> Export | None:
    return Export.objects.filter(pk=export_id).first()


def hold_get(*, hold_id: int) -> LegalHold | None:
    """The legal hold ``hold_id`` of the current tenant, or None."""
    return LegalHold.objects.filter(pk=hold_id).first()


def erasure_get(*, erasure_id: Any) -> ErasureRequest | None:
    """The erasure request ``erasure_id`` of the current tenant, or None (also for a malformed id)."""
    try:
        return ErasureRequest.objects.filter(pk=erasure_id).first()
    except (ValueError, ValidationError):
        return None


def agent_names() -> list[str]:
    return list(Agent.objects.order_by("name").values_list("name", flat=True))


# --- the session timeline -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Cursor:
    """A position in a session's events: ``(occurred_at, seq)``, the timeline's order."""

    occurred_at: datetime
    seq: int

    def token(self) -> str:
        return f"{self.occurred_at.isoformat()}|{self.seq}"

    @classmethod
    def parse(cls, token: str) -> Cursor | None:
        try:
            when, seq = token.rsplit("|", 1)
            moment = datetime.fromisoformat(when)
        except ValueError:
            return None
        if moment.tzinfo is None or not seq.isdigit():
            return None
        return cls(moment, int(seq))


@dataclass
class TimelineItem:
    """One row of the timeline: an event, or an object the session touched (a memory stored, a fact
    asserted, an assertion, a checkpoint, a skill run reported) at ``at``."""

    at: datetime
    kind: str  # "event", "memory", "fact", "assertion", "checkpoint", "skill run"
    event: Event | None = None
    obj: Any = None
    payload_pretty: str = ""
    refs: dict[str, Any] = field(default_factory=dict)
    # what the latest chain check found about this event (``Flags``): shown as a warning on its row
    flags: list[dict[str, Any]] = field(default_factory=list)
    # a tool call and its result on the same page: the result's seq on the call, the call's on the
    # result (``pair_tool_calls``)
    result_seq: int | None = None
    call_seq: int | None = None

    @property
    def is_decision(self) -> bool:
        return self.event is not None and self.event.kind == EventKind.DECISION

    @property
    def at_text(self) -> str:
        """``at`` in UTC to the millisecond (formatted here: the template's date filter is slow)."""
        return self.at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:23]

    @property
    def kind_label(self) -> str:
        if self.event is None:
            return self.kind.capitalize()
        return KIND_LABELS.get(self.event.kind, self.event.kind)

    @property
    def role_label(self) -> str:
        return ROLE_LABELS.get(self.event.role, self.event.role) if self.event is not None else ""


@dataclass
class TimelinePage:
    """A page of a session's timeline, with the cursors of the pages around it and the sessions
    before and after it of the same agent."""

    session_id: str
    items: list[TimelineItem]
    next_cursor: Cursor | None
    prev_cursor: Cursor | None
    agents: list[str]
    agent: str | None
    previous_session: str | None
    next_session: str | None
    first_at: datetime | None
    last_at: datetime | None
    flagged_by: ChainCheck | None = None  # the check whose findings name events of this page


def _pretty(payload_json: str) -> str:
    if payload_json in ("", "{}"):
        return ""
    return json.dumps(json.loads(payload_json), indent=2, ensure_ascii=False, sort_keys=True)


CALL_ID_KEYS = ("tool_call_id", "call_id")  # payload keys a call and its result may share


def pair_tool_calls(items: list[TimelineItem]) -> None:
    """Link each tool result among ``items`` (events in time order) to the tool call it answers:
    the call with the same ``tool_call_id`` / ``call_id`` in its payload when both name one, else
    the earliest call of the same agent and execution still unanswered on the page. Sets
    ``result_seq`` on the call and ``call_seq`` on the result; leaves unpaired ones alone."""
    waiting: dict[tuple[Any, ...], list[TimelineItem]] = {}
    by_id: dict[str, TimelineItem] = {}
    for item in items:
        event = item.event
        if event is None or event.kind not in (EventKind.TOOL_CALL, EventKind.TOOL_RESULT):
            continue
        payload = json.loads(event.payload_json) if event.payload_json not in ("", "{}") else {}
        call_id = next(
            (str(payload[k]) for k in CALL_ID_KEYS if isinstance(payload, dict) and payload.get(k)), ""
        )
        lane = (event.agent_id, event.execution_id)
        if event.kind == EventKind.TOOL_CALL:
            waiting.setdefault(lane, []).append(item)
            if call_id:
                by_id[call_id] = item
            continue
        call = by_id.pop(call_id, None) if call_id else None
        pending = waiting.get(lane, [])
        if call is None and pending:
            call = pending[0]
        if call is None or call.event is None or call.result_seq is not None:
            continue
        if call in pending:
            pending.remove(call)
        call.result_seq, item.call_seq = event.seq, call.event.seq


def _refs(payload_json: str) -> dict[str, Any]:
    """Ids of objects a decision's payload names (a memory, a fact, a contradiction, an export)."""
    payload = json.loads(payload_json) if payload_json not in ("", "{}") else {}
    return {
        name: payload[name]
        for name in (
            "memory_id",
            "fact_id",
            "contradiction_id",
            "existing_fact",
            "new_fact",
            "export_id",
            "key_id",
            "predicate",
        )
        if payload.get(name) is not None
    }


def session_events(
    *,
    session_id: str,
    agent_name: str | None = None,
    kinds: list[str] | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
) -> QuerySet[Event]:
    """The session's events matching the filters, in timeline order (``occurred_at``, ``seq``)."""
    qs = Event.objects.filter(session_id=session_id).select_related("agent").defer("search", "payload_index")
    if agent_name:
        qs = qs.filter(agent__name=agent_name)
    if kinds:
        qs = qs.filter(kind__in=kinds)
    if since is not None:
        qs = qs.filter(occurred_at__gte=since)
    if until is not None:
        qs = qs.filter(occurred_at__lt=until)
    return qs


def _neighbour_session(agent_id: int, session_id: str, start: Event, *, later: bool) -> str | None:
    """The session of ``agent_id`` that starts next after (``later``) or last before the session
    that starts with ``start``: the agent's events are scanned in time from there (index on agent
    and time), at most ``NEIGHBOUR_SCAN`` of them."""
    # one bound on occurred_at alone, so the (agent, occurred_at) index is scanned in order and the
    # LIMIT stops it: an OR with the seq tie-break makes PostgreSQL sort all the agent's events
    if later:
        rows = Event.objects.filter(agent_id=agent_id, occurred_at__gte=start.occurred_at).order_by(
            "occurred_at"
        )
    else:
        rows = Event.objects.filter(agent_id=agent_id, occurred_at__lte=start.occurred_at).order_by(
            "-occurred_at"
        )
    seen: set[str] = {session_id}
    for other in rows.values_list("session_id", flat=True)[:NEIGHBOUR_SCAN]:
        if other in seen:
            continue
        seen.add(other)
        first = (
            Event.objects.filter(session_id=other)
            .order_by("occurred_at", "seq")
            .values_list("occurred_at", "seq")
            .first()
        )
        if first is None:
            continue
        starts_after = first > (start.occurred_at, start.seq)
        if starts_after == later:
            return other
    return None


def session_timeline(
    *,
    session_id: str,
    agent_name: str | None = None,
    kinds: list[str] | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    after: Cursor | None = None,
    before: Cursor | None = None,
    page_size: int = TIMELINE_PAGE,
) -> TimelinePage:
    """One page of the session's timeline: ``page_size`` events after ``after`` (or before
    ``before``; the first page without either), with the objects the session touched in the same
    time span (memories, facts and assertions, checkpoints; with ``kinds`` given, events only).
    Keyset pagination on (``occurred_at``, ``seq``) over the session index: the cost of a page does
    not depend on the size of the log."""
    events = session_events(
        session_id=session_id, agent_name=agent_name, kinds=kinds, since=since, until=until
    )
    rows, next_cursor, prev_cursor = _timeline_rows(events, after=after, before=before, page_size=page_size)
    flags = flagged_events()
    items = [
        TimelineItem(
            e.occurred_at,
            "event",
            event=e,
            payload_pretty=_pretty(e.payload_json),
            refs=_refs(e.payload_json),
            flags=flags.of(e.seq),
        )
        for e in rows
    ]
    pair_tool_calls(items)
    if not kinds and rows:
        low = None if prev_cursor is None else rows[0].occurred_at
        high = None if next_cursor is None else rows[-1].occurred_at
        items += _touched_objects(session_id, agent_name, _time_window(low, high, since, until))
        items.sort(key=lambda item: (item.at, 0 if item.kind == "event" else 1))

    unfiltered = bool(rows) and not (agent_name or kinds or since or until)
    first, last = _session_ends(
        session_id,
        first=rows[0] if unfiltered and prev_cursor is None else None,
        last=rows[-1] if unfiltered and next_cursor is None else None,
    )
    agents = sorted({e.agent.name for e in rows} | ({first.agent.name} if first else set()))
    chosen = agent_name or (first.agent.name if first else None)
    previous_session, next_session = _neighbour_sessions(session_id, agent_name, chosen, first)
    return TimelinePage(
        session_id=session_id,
        items=items,
        next_cursor=next_cursor,
        prev_cursor=prev_cursor,
        agents=agents,
        agent=chosen,
        previous_session=previous_session,
        next_session=next_session,
        first_at=first.occurred_at if first else None,
        last_at=last.occurred_at if last else None,
        flagged_by=flags.check if any(item.flags for item in items) else None,
    )


def _timeline_rows(
    events: QuerySet[Event], *, after: Cursor | None, before: Cursor | None, page_size: int
) -> tuple[list[Event], Cursor | None, Cursor | None]:
    """The page's events (``page_size`` after ``after`` or before ``before``) in timeline order,
    and the cursors of the next and the previous page (None when there is none)."""
    if before is not None:
        older = Q(occurred_at__lt=before.occurred_at) | Q(occurred_at=before.occurred_at, seq__lt=before.seq)
        rows = list(events.filter(older).order_by("-occurred_at", "-seq")[: page_size + 1])
        has_more_before = len(rows) > page_size
        rows = list(reversed(rows[:page_size]))
        has_more_after = True
    else:
        if after is not None:
            newer = Q(occurred_at__gt=after.occurred_at) | Q(occurred_at=after.occurred_at, seq__gt=after.seq)
            events = events.filter(newer)
        rows = list(events.order_by("occurred_at", "seq")[: page_size + 1])
        has_more_after = len(rows) > page_size
        rows = rows[:page_size]
        has_more_before = after is not None
    next_cursor = Cursor(rows[-1].occurred_at, rows[-1].seq) if rows and has_more_after else None
    prev_cursor = Cursor(rows[0].occurred_at, rows[0].seq) if rows and has_more_before else None
    return rows, next_cursor, prev_cursor


def _time_window(
    low: datetime | None, high: datetime | None, since: datetime | None, until: datetime | None
) -> Callable[[str], Q]:
    """``window(field)``: the ``Q`` keeping ``field`` in the page's span [``low``, ``high``) and the
    filter's [``since``, ``until``) (an open end where a bound is None)."""

    def window(name: str) -> Q:
        q = Q()
        if low is not None:
            q &= Q(**{f"{name}__gte": low})
        if high is not None:
            q &= Q(**{f"{name}__lt": high})
        if since is not None:
            q &= Q(**{f"{name}__gte": since})
        if until is not None:
            q &= Q(**{f"{name}__lt": until})
        return q

    return window


def _touched_objects(
    session_id: str, agent_name: str | None, window: Callable[[str], Q]
) -> list[TimelineItem]:
    """The memories, facts, other assertions, checkpoints and skill runs of the session (of
    ``agent_name`` only, when given) made within ``window``, as timeline items."""
    items = []
    by_agent = Q(agent__name=agent_name) if agent_name else Q()
    limit = 200  # objects per page: a session's objects come with its events
    for memory in (
        SemanticMemory.objects.filter(window("created_at"), by_agent, session_id=session_id)
        .select_related("agent")
        .defer("embedding", "search")[:limit]
    ):
        items.append(TimelineItem(memory.created_at, "memory", obj=memory))
    for fact in Fact.objects.filter(window("recorded_at"), by_agent, session_id=session_id).select_related(
        "subject", "predicate", "object_entity", "agent"
    )[:limit]:
        items.append(TimelineItem(fact.recorded_at, "fact", obj=fact))
    for assertion in (
        FactProvenance.objects.filter(window("asserted_at"), by_agent, session_id=session_id)
        # a fact first asserted in this session is shown as the fact; here its other assertions
        .exclude(fact__session_id=session_id)
        .select_related("fact__subject", "fact__predicate", "fact__object_entity", "agent")[:limit]
    ):
        items.append(TimelineItem(assertion.asserted_at, "assertion", obj=assertion))
    for checkpoint in (
        Checkpoint.objects.filter(window("created_at"), by_agent, session_id=session_id)
        .select_related("agent")
        .defer("state", "plan")[:limit]
    ):
        items.append(TimelineItem(checkpoint.created_at, "checkpoint", obj=checkpoint))
    for run in (
        SkillRun.objects.filter(window("reported_at"), by_agent, session_id=session_id)
        .select_related("agent", "version__skill")
        .defer("version__skill__embedding", "version__skill__search")[:limit]
    ):
        items.append(TimelineItem(run.reported_at, "skill run", obj=run))
    return items


def _session_ends(
    session_id: str, *, first: Event | None, last: Event | None
) -> tuple[Event | None, Event | None]:
    """The session's first and last events: ``first`` and ``last`` when the page holds them (each
    query is a round trip the page waits for), else read."""
    if first is None:
        first = (
            Event.objects.filter(session_id=session_id)
            .order_by("occurred_at", "seq")
            .select_related("agent")
            .first()
        )
    if last is None:
        last = Event.objects.filter(session_id=session_id).order_by("-occurred_at", "-seq").first()
    return first, last


def _neighbour_sessions(
    session_id: str, agent_name: str | None, chosen: str | None, first: Event | None
) -> tuple[str | None, str | None]:
    """The sessions before and after this one of the agent ``chosen`` (``agent_name`` when the page
    is filtered by it, else the agent of the session's ``first`` event): (previous, next)."""
    if first is None or not chosen:
        return None, None
    if agent_name:
        agent = Agent.objects.filter(name=chosen).first()
        start = (
            Event.objects.filter(session_id=session_id, agent=agent).order_by("occurred_at", "seq").first()
            if agent is not None
            else None
        )
    else:
        agent, start = first.agent, first
    if agent is None or start is None:
        return None, None
    return (
        _neighbour_session(agent.pk, session_id, start, later=False),
        _neighbour_session(agent.pk, session_id, start, later=True),
    )


def recent_sessions(*, limit: int = RECENT_SESSIONS) -> list[tuple[str, datetime, str]]:
    """The sessions of the latest events (``(session_id, occurred_at, agent name)``, newest first),
    from the last few thousand events (an index scan, never the whole log)."""
    seen: dict[str, tuple[str, datetime, str]] = {}
    rows = Event.objects.order_by("-seq").values_list("session_id", "occurred_at", "agent__name")[
        : limit * 50
    ]
    for session_id, occurred_at, agent in rows:
        if session_id not in seen:
            seen[session_id] = (session_id, occurred_at, agent)
            if len(seen) >= limit:
                break
    return list(seen.values())


@dataclass(frozen=True)
class TrailQuery:
    """A search of the tenant's trail: words in the events' text (PostgreSQL full text, English,
    web-search syntax: ``"exact phrase"``, ``-word``, ``or``), and exact matches on the data
    subject, the agent's name and the session id; empty fields do not filter."""

    text: str = ""
    subject: str = ""
    agent: str = ""
    session: str = ""

    @property
    def empty(self) -> bool:
        return not (self.text or self.subject or self.agent or self.session)


def trail_search(*, query: TrailQuery, limit: int = TRAIL_SEARCH_LIMIT) -> list[Event]:
    """The newest ``limit`` events of the current tenant matching every field of ``query`` (none
    for an empty query), their agents loaded. The text goes through the events' full-text index
    (``event_search_gin``), the subject and the session through their indexes."""
    if query.empty:
        return []
    events = Event.objects.select_related("agent").defer("search", "payload_index")
    if query.text:
        events = events.filter(search=SearchQuery(query.text, config="english", search_type="websearch"))
    if query.subject:
        events = events.filter(data_subject=query.subject)
    if query.agent:
        events = events.filter(agent__name=query.agent)
    if query.session:
        events = events.filter(session_id=query.session)
    return list(events.order_by("-seq")[:limit])
