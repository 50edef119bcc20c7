"""The episodic summary tree: leaves over events, summaries of summaries up to one root per session,
built incrementally; every level covers every event exactly once; the extractive summarizer keeps
every decision, tool call, result and constraint sentence; ``GET sessions/{id}/summary``."""

from __future__ import annotations

import pytest
from django.db.models import Sum
from django_tenants.utils import tenant_context

from memory.consolidation.models import SummaryNode
from memory.consolidation.services.summaries import summaries_pass
from memory.consolidation.summarizer import SourceEvent, entities, numbers_and_dates, summarize_events
from memory.episodic.models import Event
from memory.semantic.models import MemoryType, SemanticMemory
from tenants.models import Tenant
from tests.factories import Caller, event, requires_model, search

SESSION = "s-migration"

# A fixture session: an agent and a user plan a database migration (kind, role, content).
FIXTURE: list[tuple[str, str, str]] = [
    ("message", "user", "Hi! We need to move the billing database from Frankfurt to Dublin."),
    (
        "message",
        "user",
        "The migration must finish before March 15, 2027. Downtime may be at most 20 minutes.",
    ),
    ("message", "assistant", "Understood. I will check the replication lag first."),
    ("tool_call", "assistant", "check_replication_lag"),
    ("tool_result", "tool", "lag_seconds=42 on replica db-dub-2"),
    ("message", "user", "Great, thanks. Also, never touch the payments schema during business hours."),
    ("decision", "assistant", "Migrate on Saturday night, 01:00 UTC, using logical replication."),
    ("message", "assistant", "Sounds good, that gives us plenty of time."),
    ("message", "user", "Only Priya Raman may approve the final cutover."),
    ("tool_call", "assistant", "create_change_ticket"),
    ("tool_result", "tool", "ticket CHG-1182 created"),
    ("message", "user", "ok cool"),
    ("decision", "assistant", "Priya Raman approves the cutover; Tom Becker is on call."),
    ("message", "assistant", "The ticket is CHG-1182 and the rollback plan is attached."),
]
DECISIONS = [c for k, _, c in FIXTURE if k == "decision"]
CONSTRAINTS = [
    "The migration must finish before March 15, 2027.",
    "Downtime may be at most 20 minutes.",
    "Also, never touch the payments schema during business hours.",
    "Only Priya Raman may approve the final cutover.",
]


def post_fixture(
    caller: Caller, session_id: str = SESSION, rows: list[tuple[str, str, str]] = FIXTURE
) -> None:
    body = [
        event(
            content,
            session_id=session_id,
            kind=kind,
            role=role,
            occurred_at=f"2027-03-0{1 + i // 10}T10:{i % 60:02d}:00Z",
        )
        for i, (kind, role, content) in enumerate(rows)
    ]
    response = caller.post("/api/v1/events", body)
    assert response.status_code == 201, response.content


def small_tree(tenant: Tenant) -> None:
    tenant.summary_leaf_events, tenant.summary_fanout = 4, 2
    tenant.save()


def source(kind: str, role: str, content: str, seq: int = 1) -> SourceEvent:
    return SourceEvent(seq=seq, kind=kind, role=role, content=content, payload={})


def test_the_extractive_summary_keeps_every_decision_tool_line_and_constraint() -> None:
    events = [source(k, r, c, i) for i, (k, r, c) in enumerate(FIXTURE, start=1)]
    text = "\n".join(summarize_events(events))
    for decision in DECISIONS:
        assert f"- decision: {decision}" in text
    for sentence in CONSTRAINTS:
        assert f"- constraint: {sentence}" in text
    assert (
        "- tool call: check_replication_lag" in text
        and "- result: lag_seconds=42 on replica db-dub-2" in text
    )
    assert "- tool call: create_change_ticket" in text and "- result: ticket CHG-1182 created" in text
    for name in ("Frankfurt", "Dublin", "Priya Raman", "Tom Becker"):
        assert name in text
    assert "ok cool" not in text and "Sounds good" not in text  # filler goes
    assert len(text) < sum(len(c) for _, _, c in FIXTURE) + 400
    assert text == "\n".join(summarize_events(events))  # deterministic


def test_entities_numbers_and_dates() -> None:
    assert entities("Yesterday Caroline met Melanie at the Lisbon Pride parade.") == [
        "Caroline",
        "Melanie",
        "Lisbon Pride",
    ]
    found = numbers_and_dates("On 8 May, 2023 she ran 5 km in 31 minutes for $40.")
    assert "8 May, 2023" in found and "5 km" in found and "31" in found and "$40" in found


@pytest.mark.django_db
@requires_model
def test_the_tree_covers_every_event_once_per_level_and_grows_incrementally(alice: Caller) -> None:
    small_tree(alice.tenant)
    post_fixture(alice)
    with tenant_context(alice.tenant):
        run = summaries_pass()
        assert run is not None and run.counts["events"] == len(FIXTURE)
        check_tree(SESSION)
        assert SummaryNode.objects.filter(session_id=SESSION).order_by("-level").first().level == 3  # type: ignore[union-attr]
        first_leaf = SummaryNode.objects.get(session_id=SESSION, level=1, position=0)
        written_at = first_leaf.updated_at

    more = [
        ("message", "user", f"Checkpoint {i}: the copy of table t{i} must be verified by 09:00.")
        for i in range(7)
    ]
    post_fixture(alice, rows=more)
    with tenant_context(alice.tenant):
        run = summaries_pass()
        assert run is not None and run.counts["events"] == 7
        check_tree(SESSION)
        # incremental: the first leaf (full, not on the right edge) was not rewritten
        assert SummaryNode.objects.get(pk=first_leaf.pk).updated_at == written_at
        root = SummaryNode.objects.filter(session_id=SESSION).order_by("-level").first()
        assert root is not None and root.event_count == len(FIXTURE) + 7
        for decision in DECISIONS:  # every decision and constraint reaches the root
            assert decision in root.content
        for sentence in CONSTRAINTS:
            assert sentence in root.content
        # a run with nothing new changes nothing
        assert summaries_pass().counts.get("nodes", 0) == 0  # type: ignore[union-attr]
        # summaries are semantic memories of type summary, one per node
        nodes = SummaryNode.objects.filter(session_id=SESSION)
        assert SemanticMemory.objects.filter(memory_type=MemoryType.SUMMARY).count() == nodes.count()
        assert all(n.memory is not None and n.memory.content == n.content for n in nodes)
    hits = search(alice, "who approves the database cutover", filters={"memory_type": "summary"})
    assert hits and "Priya Raman" in hits[0]["memory"]["content"]


def check_tree(session_id: str) -> None:
    """Every level partitions the session's events: consecutive ranges, each event once, the hash
    of each node's last event as in the log."""
    seqs = list(Event.objects.filter(session_id=session_id).order_by("seq").values_list("seq", flat=True))
    hashes = dict(Event.objects.filter(session_id=session_id).values_list("seq", "hash"))
    top = SummaryNode.objects.filter(session_id=session_id).order_by("-level").first()
    assert top is not None
    assert SummaryNode.objects.filter(session_id=session_id, level=top.level).count() == 1  # one root
    for level in range(1, top.level + 1):
        nodes = list(SummaryNode.objects.filter(session_id=session_id, level=level).order_by("position"))
        assert [n.position for n in nodes] == list(range(len(nodes)))
        covered = [s for n in nodes for s in seqs if n.first_seq <= s <= n.last_seq]
        assert covered == seqs, f"level {level} does not cover every event exactly once"
        assert sum(n.event_count for n in nodes) == len(seqs)
        for node in nodes:
            assert node.last_event_hash == hashes[node.last_seq]
        assert SummaryNode.objects.filter(session_id=session_id, level=level).aggregate(n=Sum("event_count"))[
            "n"
        ] == len(seqs)


@pytest.mark.django_db
@requires_model
def test_the_summary_endpoint(alice: Caller, bob: Caller, mallory: Caller) -> None:
    small_tree(alice.tenant)
    post_fixture(alice)
    assert bob.get(f"/api/v1/sessions/{SESSION}/summary").status_code == 404  # none yet
    with tenant_context(alice.tenant):
        summaries_pass()
    body = bob.get(f"/api/v1/sessions/{SESSION}/summary").json()  # a teammate reads it, like the log
    assert body["session_id"] == SESSION and body["depth"] == 3
    assert [n["level"] for n in body["results"]] == [3, 2, 2, 1, 1, 1, 1]
    leaves = bob.get(f"/api/v1/sessions/{SESSION}/summary", {"level": 1}).json()["results"]
    assert [n["event_count"] for n in leaves] == [4, 4, 4, 2]
    assert leaves[0]["memory_id"] and leaves[0]["method"] == "extractive"
    events = bob.get("/api/v1/events", {"session_id": SESSION, "limit": 4}).json()["results"]
    assert leaves[0]["last_event_hash"] == events[3]["hash"]
    assert bob.get(f"/api/v1/sessions/{SESSION}/summary", {"level": 9}).status_code == 400
    assert bob.get(f"/api/v1/sessions/{SESSION}/summary", {"depth": 1}).status_code == 400
    # another tenant has no such session
    response = mallory.get(f"/api/v1/sessions/{SESSION}/summary")
    assert response.status_code == 404 and response.json()["code"] == "not_found"
