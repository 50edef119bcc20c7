"""A conversation in one call with a language model: the call returns at once with the messages
appended and a job; the job extracts memories and facts (add, update, no-op against the nearest
existing memories; facts asserted as usual) and keeps its prompt, the raw answer and its
decisions. Every failure mode (timed out, empty, malformed, an item a write refuses) leaves the
messages stored and the job failed with the reason, nothing of the answer applied. Responses are
replayed from ``recorded/extraction.json`` (``tests.chat_replay``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django_tenants.utils import tenant_context

from memory.conversations.models import ExtractionJob
from memory.conversations.services import extraction_run
from memory.episodic.models import Event
from memory.knowledge.models import Fact
from memory.semantic.models import SemanticMemory
from tests.chat_replay import ChatReplay, chat_replay, recordings
from tests.factories import Caller, make_caller, remember, requires_model

pytestmark = [pytest.mark.django_db, requires_model]

RECORDED = recordings(Path(__file__).parent / "recorded" / "extraction.json")
URL = "/api/v1/sessions/trip-7/messages"
OLD = "Dana's return flight departs at 09:05 on Sunday."


@pytest.fixture
def chat_endpoint() -> Iterator[ChatReplay]:
    with chat_replay(RECORDED, timeout=1.0) as replay:
        yield replay


def add_and_run(caller: Caller, text: str) -> dict[str, Any]:
    """Post one user message (extraction by the model), check the answer, run its job in process
    and return the job as ``GET /api/v1/extractions/{id}`` shows it."""
    message = {"role": "user", "name": "Dana", "content": text, "occurred_at": "2026-03-02T08:00:00Z"}
    response = caller.post(URL, {"messages": [message], "data_subject": "dana"})
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["memories"] == [] and body["job"]["status"] == "queued"
    assert body["job"]["event_ids"] == [body["events"][0]["id"]]
    with tenant_context(caller.tenant):
        extraction_run(job_id=body["job"]["id"])
    job = caller.get(f"/api/v1/extractions/{body['job']['id']}")
    assert job.status_code == 200
    return dict(job.json())


def stored(caller: Caller) -> tuple[set[str], int, int]:
    """The live memories' texts, the facts and the message events of the tenant."""
    with tenant_context(caller.tenant):
        memories = set(SemanticMemory.objects.values_list("content", flat=True))
        return memories, Fact.objects.count(), Event.objects.filter(kind="message").count()


def test_the_job_applies_its_decisions_and_keeps_prompt_answer_and_decisions(
    alice: Caller, chat_endpoint: ChatReplay
) -> None:
    old = remember(alice, OLD, data_subject="dana").json()
    job = add_and_run(
        alice, "Change of plans: my return flight now leaves at 11:05 on Sunday. I'm vegetarian now."
    )
    assert job["status"] == "done" and job["error"] == ""
    # the record: the prompt sent (instructions, the nearest memory, the message), the raw answer
    assert job["prompt"].startswith("You keep the long-term memory")
    assert f"m1: {OLD}" in job["prompt"] and "Dana (user, 8:00 am on 2 March, 2026)" in job["prompt"]
    assert job["answer"].startswith("```json") and "vegetarian" in job["answer"]
    decisions = job["decisions"]
    assert [(d["kind"], d["action"]) for d in decisions] == [
        ("memory", "update"),
        ("memory", "add"),
        ("memory", "noop"),
        ("fact", "assert"),
        ("fact", "assert"),
    ]
    assert decisions[0]["existing_id"] == old["id"] and decisions[2]["existing_id"] == old["id"]
    assert "memory_id" not in decisions[2]
    assert decisions[0]["supersedes"] == old["id"]
    with tenant_context(alice.tenant):
        assert str(SemanticMemory.objects.get(pk=old["id"]).superseded_by_id) == decisions[0]["memory_id"]
        update = SemanticMemory.objects.get(pk=decisions[0]["memory_id"])
        assert update.content == "Dana's return flight departs at 11:05 on Sunday."
        assert (update.data_subject, update.session_id) == ("dana", "trip-7")
        assert update.source_event_id == job["event_ids"][-1]
        diet = Fact.objects.get(pk=decisions[3]["fact_id"])
        assert (diet.subject.name, diet.predicate.name, diet.data_subject) == ("Dana", "diet", "dana")
    sent = chat_endpoint.requests[0]
    assert sent["temperature"] == 0 and sent["messages"][1]["content"] in job["prompt"]


def test_an_answer_with_nothing_to_remember_ends_the_job_done(
    alice: Caller, chat_endpoint: ChatReplay
) -> None:
    job = add_and_run(alice, "NOTHING-CASE ok, thanks")
    assert (job["status"], job["decisions"], job["error"]) == ("done", [], "")


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("MALFORMED-CASE my flight moved", "malformed answer: not JSON"),
        ("EMPTY-CASE my flight moved", "empty answer"),
        ("TIMEOUT-CASE my flight moved", "The language model endpoint timed out."),
        (
            "BAD-ITEM-CASE my flight moved",
            "malformed answer: memories[1].action is not one of add, update, noop",
        ),
        ("REFUSED-WRITE-CASE I like green tea", "a write refused the answer"),
    ],
)
def test_a_failed_answer_keeps_the_messages_and_applies_nothing(
    alice: Caller, chat_endpoint: ChatReplay, text: str, reason: str
) -> None:
    job = add_and_run(alice, text)
    assert job["status"] == "failed" and job["error"].startswith(reason), job["error"]
    assert job["decisions"] == [] and job["prompt"].startswith("You keep the long-term memory")
    memories, facts, messages = stored(alice)
    assert (memories, facts, messages) == (set(), 0, 1)  # the message stays; nothing of the answer


def test_a_finished_job_is_not_run_again(alice: Caller, chat_endpoint: ChatReplay) -> None:
    job = add_and_run(alice, "NOTHING-CASE fine")
    with tenant_context(alice.tenant):
        again = extraction_run(job_id=job["id"])
        assert again.attempts == 1 and ExtractionJob.objects.get(pk=job["id"]).status == "done"
    assert len(chat_endpoint.requests) == 1


def test_a_job_is_its_agents_own(
    alice: Caller, bob: Caller, mallory: Caller, chat_endpoint: ChatReplay
) -> None:
    job = add_and_run(alice, "NOTHING-CASE hello")
    assert bob.get(f"/api/v1/extractions/{job['id']}").status_code == 404
    assert mallory.get(f"/api/v1/extractions/{job['id']}").status_code == 404
    assert alice.get("/api/v1/extractions/not-a-uuid").status_code == 404


def test_a_job_of_another_end_user_is_not_found_by_a_bound_key(
    alice: Caller, chat_endpoint: ChatReplay
) -> None:
    job = add_and_run(alice, "NOTHING-CASE hello")  # about dana
    for subject, status in (("ben", 404), ("dana", 200)):
        bound = make_caller(alice.tenant, alice.agent.name, data_subject=subject)
        assert bound.get(f"/api/v1/extractions/{job['id']}").status_code == status


def test_erasing_the_subject_removes_its_jobs(alice: Caller, chat_endpoint: ChatReplay) -> None:
    import json

    from compliance import services
    from compliance.models import ErasureStatus

    job = add_and_run(alice, "NOTHING-CASE my card ends in 4242")
    other = alice.post(
        URL, {"messages": [{"role": "user", "content": "NOTHING-CASE hi"}], "data_subject": "eve"}
    )
    with tenant_context(alice.tenant):
        request = services.erasure_request(
            kind="subject", value="dana", legal_basis="Art. 17", note="", username="olga"
        )
        services.erasure_approve(request_id=request.pk, username="pavel")
        done = services.erasure_run(request_id=request.pk)
        assert done.status == ErasureStatus.DONE, done.error
        assert not ExtractionJob.objects.filter(pk=job["id"]).exists()
        assert ExtractionJob.objects.filter(pk=other.json()["job"]["id"]).exists()  # another subject's stays
        receipt = json.loads(done.receipt)
        assert receipt["stores"]["postgres"]["extraction_job_ids"] == [job["id"]]
        assert receipt["verification"]["postgres"]["extractions_left"] == 0
    assert alice.get(f"/api/v1/extractions/{job['id']}").status_code == 404
