"""``compliance.selectors.pair_tool_calls``: each tool result on a timeline page is linked to the
call it answers, by a shared call id in the payloads, else the earliest unanswered call of the same
agent and execution; a result with no call stays alone."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from compliance.selectors import TimelineItem, pair_tool_calls
from memory.episodic.models import Event, EventKind

AT = datetime(2026, 3, 1, tzinfo=UTC)


def _item(
    seq: int, kind: str, *, agent: int = 1, execution: str | None = None, **payload: str
) -> TimelineItem:
    event = Event(
        seq=seq, kind=kind, agent_id=agent, execution_id=execution, payload_json=json.dumps(payload)
    )
    return TimelineItem(AT, "event", event=event)


def test_results_pair_by_call_id_then_in_order_per_agent_and_execution() -> None:
    items = [
        _item(1, EventKind.TOOL_CALL, call_id="a"),
        _item(2, EventKind.TOOL_CALL, call_id="b"),
        _item(3, EventKind.TOOL_CALL, agent=2),
        _item(4, EventKind.MESSAGE),
        _item(5, EventKind.TOOL_RESULT, call_id="b"),  # by id, out of order
        _item(6, EventKind.TOOL_RESULT, agent=2),  # the other agent's call
        _item(7, EventKind.TOOL_RESULT),  # no id: the earliest unanswered call of agent 1
        _item(8, EventKind.TOOL_RESULT),  # nothing left to answer
        _item(9, EventKind.TOOL_RESULT, agent=1, execution="x"),  # another execution: no call
    ]
    pair_tool_calls(items)
    assert [(i.event.seq, i.result_seq, i.call_seq) for i in items if i.event] == [
        (1, 7, None),
        (2, 5, None),
        (3, 6, None),
        (4, None, None),
        (5, None, 2),
        (6, None, 3),
        (7, None, 1),
        (8, None, None),
        (9, None, None),
    ]
