"""The events endpoint's one-pass input check and direct output against the DRF serializers they
stand in for: ``events_fast`` accepts only what ``EventInputSerializer`` accepts, with equal values,
and ``event_json`` writes what ``EventOutputSerializer`` writes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from django.utils import timezone as django_timezone
from django_tenants.utils import tenant_context
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from api.rest.events import (
    _INPUT_FIELDS,
    EventInputSerializer,
    EventOutputSerializer,
    event_json,
    events_fast,
)
from memory.episodic import services
from memory.episodic.models import Event, EventKind, EventRole
from tests.factories import Caller

ABSENT = object()

_TEXT = st.one_of(
    st.sampled_from(
        [
            "s",
            " s ",
            "",
            "   ",
            "a\x00b",
            "x" * 200,
            " " + "x" * 200 + " ",
            "x" * 201,
            "\u2003s\u2003",
            "\x1c",
        ]
    ),
    st.text(max_size=4),
    st.integers(-3, 3),
    st.floats(allow_nan=False, allow_infinity=False),
    st.none(),
    st.booleans(),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=2), st.integers(), max_size=1),
)
_CHOICE = st.one_of(
    st.sampled_from([*EventKind.values, *EventRole.values, "", " message", "Message", "bogus"]), _TEXT
)
_JSON_LEAF = st.one_of(
    st.integers(-(2**60), 2**60),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=3),
    st.none(),
    st.booleans(),
)


def _nested(levels: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(levels):
        value = {"a": value}
    return value


_PAYLOAD = st.one_of(
    st.dictionaries(st.text(max_size=3), _JSON_LEAF, max_size=3),
    st.dictionaries(
        st.text(max_size=2),
        st.lists(_JSON_LEAF, max_size=2) | st.dictionaries(st.text(max_size=2), _JSON_LEAF),
        max_size=2,
    ),
    st.sampled_from([{}, {"k\x00": 1}, {"k": "v\x00"}, _nested(63), _nested(70), {"k": "x" * 270_000}]),
    st.just({"big": 2**64 + 1}),
    st.none(),
    st.lists(st.integers(), max_size=2),
    st.text(max_size=2),
    st.integers(),
)
_TIME = st.one_of(
    st.sampled_from(
        [
            "2026-01-01T00:00:00Z",
            "2026-01-01T00:00:00+05:30",
            "2026-01-01T00:00:00",
            " 2026-01-01T00:00:00Z",
            "2026-01-01T00:00:00Z\n",
            "2026-02-30T00:00:00Z",
            "2026-11-30T10:00:00+25:00",
            "0001-01-01T00:00:00+01:00",
            "9999-12-31T23:59:59-01:00",
            "20260101T000000Z",
            "2026-01-01 00:00:00.1234567+00:00",
            "2026-W01-1T00:00Z",
            "2026-01-01",
            "",
            "x",
        ]
    ),
    st.datetimes(
        min_value=datetime(1900, 1, 1),
        max_value=datetime(2100, 1, 1),
        timezones=st.sampled_from(
            [UTC, timezone(timedelta(hours=-7, minutes=-30)), timezone(timedelta(hours=9))]
        ),
    ).map(lambda moment: moment.isoformat()),
    st.datetimes(min_value=datetime(1900, 1, 1)).map(lambda moment: moment.isoformat()),
    _TEXT,
)
_FIELDS: dict[str, st.SearchStrategy[Any]] = {
    "session_id": _TEXT,
    "execution_id": _TEXT,
    "role": _CHOICE,
    "kind": _CHOICE,
    "content": st.one_of(_TEXT, st.just("x" * 200_001)),
    "payload": _PAYLOAD,
    "occurred_at": _TIME,
    "data_subject": _TEXT,
}


_VALID: dict[str, st.SearchStrategy[Any]] = {
    "session_id": st.sampled_from(["s1", " s2 ", "x" * 200, "é"]),
    "execution_id": st.sampled_from(["run", None]),
    "role": st.sampled_from(EventRole.values),
    "kind": st.sampled_from(EventKind.values),
    "content": st.sampled_from(["hello", "", " x ", "x" * 200_000]),
    "occurred_at": st.sampled_from(["2026-01-01T00:00:00Z", "2026-03-01T08:15:00.123456-05:00"]),
    "payload": st.sampled_from([{"a": 1}, {}, {"t": {"q": [1, 2.5, None]}}, _nested(63)]),
    "data_subject": st.sampled_from(["c-1", " c-2 "]),
}


@st.composite
def _item(draw: st.DrawFn) -> Any:
    """A valid item (some optional fields left out), then up to two fields changed to any value
    (or removed) and sometimes an unknown key: input at the edge of what the serializer accepts."""
    if draw(st.integers(0, 30)) == 0:
        return draw(
            st.one_of(st.none(), st.integers(), st.text(max_size=2), st.lists(st.integers(), max_size=1))
        )
    item: dict[str, Any] = {}
    for name, strategy in _VALID.items():
        if name in ("session_id", "kind", "occurred_at") or draw(st.booleans()):
            item[name] = draw(strategy)
    for _ in range(draw(st.integers(0, 2))):
        name = draw(st.sampled_from(sorted(_FIELDS)))
        if draw(st.integers(0, 5)) == 0:
            item.pop(name, None)
        else:
            item[name] = draw(_FIELDS[name])
    if draw(st.integers(0, 12)) == 0:
        item["unknown"] = 1
    return item


def _drf(items: list[Any]) -> list[services.EventData] | None:
    serializer = EventInputSerializer(data=items, many=True)
    if not serializer.is_valid():
        return None
    return [services.EventData(**attrs) for attrs in serializer.validated_data]


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(items=st.lists(_item(), min_size=1, max_size=3))
def test_fast_check_accepts_only_what_the_serializer_accepts_with_equal_values(
    alice: Caller, items: list[Any]
) -> None:
    with tenant_context(alice.tenant):
        fast = events_fast(items)
        expected = _drf(items)
    if fast is not None:
        assert expected is not None, items
        assert fast == expected, items


def test_plain_valid_batches_take_the_fast_path(alice: Caller) -> None:
    items = [
        {"session_id": "s1", "kind": "message", "content": "hi", "occurred_at": "2026-01-01T00:00:00Z"},
        {
            "session_id": " s1 ",
            "execution_id": None,
            "role": "tool",
            "kind": "tool_result",
            "payload": {"rows": [1, 2.5, None], "ok": True},
            "occurred_at": "2026-01-01T01:00:00.5+02:00",
            "data_subject": "customer-7",
        },
        {
            "session_id": "s1",
            "execution_id": "run",
            "kind": "decision",
            "content": "x",
            "occurred_at": "2026-01-01T00:00Z",
        },
    ]
    with tenant_context(alice.tenant):
        fast = events_fast(items)
        assert fast is not None and fast == _drf(items)
    assert fast[1].session_id == "s1" and fast[1].occurred_at == datetime(
        2025, 12, 31, 23, 0, 0, 500000, tzinfo=UTC
    )
    assert fast[0].role == EventRole.ASSISTANT and fast[0].payload == {} and fast[0].data_subject == ""


def test_fast_check_knows_every_field_the_serializer_has() -> None:
    # a field added to the serializer must be added to events_fast too (else it refuses the key and
    # every batch that sends it falls back to the serializer, or worse, loses a default)
    assert (
        frozenset(EventInputSerializer().fields)
        == _INPUT_FIELDS
        == {
            "session_id",
            "execution_id",
            "role",
            "kind",
            "content",
            "payload",
            "occurred_at",
            "data_subject",
        }
    )


def test_event_json_is_what_the_output_serializer_writes(alice: Caller) -> None:
    zone = django_timezone.get_current_timezone()
    with tenant_context(alice.tenant):
        appended = services.events_append(
            agent=alice.agent,
            events=[
                services.EventData(
                    session_id="s-out",
                    kind="message",
                    content="hello",
                    occurred_at=datetime(2026, 1, 1, 12, 0, tzinfo=timezone(timedelta(hours=5))),
                ),
                services.EventData(
                    session_id="s-out",
                    execution_id="run-1",
                    kind="tool_call",
                    role="tool",
                    content="",
                    payload={"n": 10**20, "f": 1.0, "s": "ü"},
                    occurred_at=datetime(2026, 1, 1, 12, 0, 0, 1, tzinfo=UTC),
                    data_subject="customer-9",
                ),
            ],
        )
        services.events_redact(
            event_ids=[appended[0].pk],
            decision=services.RedactionDecision(
                agent=alice.agent, actor="job:test", session_id="s-redactions", label="A test"
            ),
        )
        stored = list(Event.objects.select_related("agent").filter(session_id="s-out").order_by("seq"))
    for event in [*appended, *stored]:
        assert event_json(event, zone) == EventOutputSerializer(event).data
    assert (
        event_json(stored[0], zone)["redacted"] is True and event_json(appended[0], zone)["redacted"] is False
    )
    assert event_json(stored[1], zone)["payload"] == {"f": 1, "n": 10**20, "s": "ü"}
    assert event_json(appended[1], zone)["occurred_at"] == "2026-01-01T12:00:00.000001Z"


def test_append_answers_the_stored_events(alice: Caller) -> None:
    body = [
        {
            "session_id": "s-http",
            "kind": "message",
            "content": "a",
            "occurred_at": "2026-01-01T00:00:00+01:00",
        },
        {
            "session_id": "s-http",
            "kind": "decision",
            "payload": {"x": [1]},
            "occurred_at": "2026-01-01T00:00:01Z",
        },
    ]
    response = alice.post("/api/v1/events", body)
    assert response.status_code == 201
    listed = alice.get("/api/v1/events", {"session_id": "s-http"}).json()["results"]
    assert response.json() == {"count": 2, "results": listed}
    assert listed[0]["occurred_at"] == "2025-12-31T23:00:00Z" and listed[0]["agent"] == alice.agent.name


@pytest.mark.parametrize(
    ("item", "field"),
    [
        ({"kind": "message", "content": "x", "occurred_at": "2026-01-01T00:00:00Z"}, "events[1].session_id"),
        (
            {"session_id": "s", "kind": "nope", "content": "x", "occurred_at": "2026-01-01T00:00:00Z"},
            "events[1].kind",
        ),
        (
            {"session_id": "s", "kind": "message", "content": "x", "occurred_at": "2026-01-01T00:00:00"},
            "events[1].occurred_at",
        ),
        (
            {"session_id": "s", "kind": "message", "content": " ", "occurred_at": "2026-01-01T00:00:00Z"},
            "events[1].content",
        ),
        (
            {
                "session_id": "s",
                "kind": "message",
                "content": "x",
                "occurred_at": "2026-01-01T00:00:00Z",
                "data_subject": "",
            },
            "events[1].data_subject",
        ),
        (
            {
                "session_id": "s",
                "kind": "message",
                "content": "x",
                "occurred_at": "2026-01-01T00:00:00Z",
                "extra": 1,
            },
            "events[1].extra",
        ),
    ],
)
def test_a_bad_item_of_a_batch_is_named_and_nothing_is_written(
    alice: Caller, item: dict[str, Any], field: str
) -> None:
    good = {"session_id": "s-bad", "kind": "message", "content": "ok", "occurred_at": "2026-01-01T00:00:00Z"}
    response = alice.post("/api/v1/events", [good, item])
    assert response.status_code == 400 and field in response.json()["errors"], response.json()
    assert alice.get("/api/v1/events", {"session_id": "s-bad"}).json()["results"] == []


_BASE = {"session_id": "s", "kind": "message", "content": "x", "occurred_at": "2026-01-01T00:00:00Z"}
_REMOVE = object()
_BAD: list[tuple[str, Any]] = [
    *[
        ("session_id", v)
        for v in (_REMOVE, None, "", "  ", 5, True, "a\x00", "x" * 201, " " + "x" * 201, [], {})
    ],
    *[("execution_id", v) for v in ("", " ", 5, "a\x00", "x" * 201, [])],
    *[("role", v) for v in ("", "bogus", None, 1, ["user"], "User")],
    *[("kind", v) for v in (_REMOVE, "", "bogus", None, 1, ["message"], {})],
    *[("content", v) for v in (None, 5, "a\x00b", "x" * 200_001, [], " ", "")],
    *[
        ("payload", v)
        for v in (
            None,
            [],
            "x",
            1,
            {"k\x00": 1},
            {"k": "\x00"},
            _nested(70),
            {"big": 2**64 + 1},
            {"k": "x" * 270_000},
        )
    ],
    *[
        ("occurred_at", v)
        for v in (
            _REMOVE,
            None,
            "",
            "2026-01-01T00:00:00",
            "2026-01-01",
            "2026-02-30T00:00:00Z",
            "9999-12-31T23:59:59-01:00",
            5,
            "x",
        )
    ],
    *[("data_subject", v) for v in ("", " ", None, 5, "a\x00", "x" * 201)],
    ("unknown", 1),
]


@pytest.mark.parametrize(("name", "value"), _BAD, ids=[f"{n}-{i}" for i, (n, _) in enumerate(_BAD)])
def test_each_rule_of_the_serializer_is_kept(alice: Caller, name: str, value: Any) -> None:
    item = dict(_BASE, payload={}) if name == "content" else dict(_BASE)
    if value is _REMOVE:
        del item[name]
    else:
        item[name] = value
    with tenant_context(alice.tenant):
        assert _drf([_BASE, item]) is None  # the serializer refuses it ...
        assert events_fast([_BASE, item]) is None  # ... and so the serializer names the error


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("session_id", " s "),
        ("execution_id", None),
        ("execution_id", " run "),
        *[("role", role) for role in EventRole.values],
        ("content", ""),
        ("payload", {"a": [1, {"b": None}]}),
        ("payload", _nested(63)),
        ("occurred_at", "2026-01-01 00:00:00+00:00"),
        ("occurred_at", "2026-01-01T03:00:00.123456+03:00"),
        ("data_subject", " c-1 "),
    ],
)
def test_plain_variants_are_accepted_alike(alice: Caller, name: str, value: Any) -> None:
    item = {**_BASE, "payload": {"p": 1}, name: value}
    with tenant_context(alice.tenant):
        fast = events_fast([item])
        assert fast is not None and fast == _drf([item])
