"""The Python client (clients/python) against a live Engram: a real uvicorn process on the test
database, sync and async, iterators over cursor pages, errors as exceptions with the API's code and
errors, and retries that stay exactly-once through idempotency keys."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator

import httpx
import pytest
from engram_client import (
    AsyncEngramClient,
    AuthenticationFailed,
    Call,
    Conflict,
    EngramClient,
    InvalidInput,
    NotFound,
    PermissionDenied,
    RetryPolicy,
)

from tenants.models import Tenant
from tests.factories import asgi_server, make_caller, requires_model

pytestmark = requires_model


@pytest.fixture
def base_url(scratch_tenant: Tenant) -> Iterator[str]:
    with asgi_server() as port:
        yield f"http://127.0.0.1:{port}"


def test_the_sync_client_covers_the_layers_and_pages_through_lists(
    scratch_tenant: Tenant, base_url: str
) -> None:
    caller = make_caller(scratch_tenant, "client-agent")
    tag = uuid.uuid4().hex[:8]
    with EngramClient(base_url, caller.key) as engram:
        assert engram.me()["agent"] == "client-agent"

        offices = [
            "The Lisbon office opens at eight in the morning",
            "Parking near the Lisbon office is free on weekends",
            "The Lisbon office kitchen has an espresso machine",
            "Visitors to the Lisbon office sign in at reception on the ground floor",
            "The Lisbon office moved to Avenida da Liberdade in 2024",
        ]
        for text in offices:
            written = engram.memory_store({"content": text, "tags": ["office"]})
            assert written["deduplicated"] is False, text
        # five memories, two a page: three pages followed through their `next` links
        pages = list(engram.pages(Call("GET", "memories", params={"limit": 2})))
        assert [len(p["results"]) for p in pages] == [2, 2, 1]
        assert len(list(engram.memories(tag="office", limit=2))) == 5

        # a batch: one result per item in order, the duplicate of a stored memory reinforcing it
        stored = engram.memories_store(
            [{"content": "The Porto office opened in 2021"}, {"content": offices[0], "tags": ["office"]}],
            idempotency_key=f"batch-{uuid.uuid4().hex}",
        )
        assert stored["count"] == 2
        assert [r["deduplicated"] for r in stored["results"]] == [False, True]

        hits = engram.memory_search("Lisbon office", k=3)
        assert hits["count"] == 3 and all("Lisbon" in h["memory"]["content"] for h in hits["results"])

        batch = engram.events_append(
            [
                {
                    "session_id": f"s-{tag}",
                    "kind": "message",
                    "role": "user",
                    "content": f"turn {n}",
                    "occurred_at": f"2026-03-01T10:0{n}:00Z",
                }
                for n in range(3)
            ]
        )
        assert batch["count"] == 3
        assert [e["content"] for e in engram.events(session_id=f"s-{tag}", limit=1)] == [
            "turn 0",
            "turn 1",
            "turn 2",
        ]

        assert (
            engram.fact_assert({"subject": "Alice", "predicate": "works_at", "object": {"entity": "Acme"}})[
                "outcome"
            ]
            == "created"
        )
        assert [f["predicate"] for f in engram.entity_facts("alice")["facts"]] == ["works_at"]

        entry = engram.blackboard_write(f"x-{tag}", "city", "Lisbon", expected_version=0)
        assert entry["version"] == 1
        with pytest.raises(Conflict) as stale:
            engram.blackboard_write(f"x-{tag}", "city", "Porto", expected_version=0)
        assert stale.value.body["current_version"] == 1 and "expected_version" in stale.value.errors
        assert engram.blackboard(f"x-{tag}")["results"][0]["value"] == "Lisbon"

        engram.checkpoint_save(f"s-{tag}", {"step_index": 1, "idempotency_key": "a", "state": {"n": 1}})
        engram.checkpoint_save(f"s-{tag}", {"step_index": 2, "idempotency_key": "b", "state": {"n": 2}})
        assert engram.checkpoint_latest(f"s-{tag}")["state"] == {"n": 2}
        assert engram.checkpoint_get(f"s-{tag}", 1)["state"] == {"n": 1}
        assert [c["step_index"] for c in engram.checkpoints(f"s-{tag}", limit=1)] == [1, 2]

        context = engram.context_build(
            {"session_id": f"s-{tag}", "query": "Where does Alice work?", "budget": 200}
        )
        assert context["tokens_used"] <= 200 and context["history_turns"] == 3

        with pytest.raises(InvalidInput) as bad:
            engram.context_build({"session_id": f"s-{tag}", "query": "q", "budget": 1})
        assert bad.value.status == 400 and bad.value.code == "invalid" and "budget" in bad.value.errors
        with pytest.raises(NotFound) as missing:
            engram.memory_get(str(uuid.uuid4()))
        assert missing.value.code == "not_found"


def test_errors_carry_the_apis_code_for_keys_and_scopes(scratch_tenant: Tenant, base_url: str) -> None:
    reader = make_caller(scratch_tenant, "client-reader", scopes=("read",))
    with EngramClient(base_url, reader.key) as engram, pytest.raises(PermissionDenied) as denied:
        engram.memory_store({"content": "a reader cannot write"})
    assert denied.value.status == 403 and "'write' scope" in denied.value.detail
    with (
        EngramClient(base_url, "egm.nope.123456789abc.secret") as engram,
        pytest.raises(AuthenticationFailed),
    ):
        engram.me()


class LoseFirstAnswer(httpx.BaseTransport):
    """A network that delivers the first POST to the server and then loses its answer (the client
    sees a 503 from a proxy instead): the retry must not store the memory twice."""

    def __init__(self) -> None:
        self.inner = httpx.HTTPTransport()
        self.posts: list[str | None] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = self.inner.handle_request(request)
        if request.method == "POST":
            self.posts.append(request.headers.get("Idempotency-Key"))
            if len(self.posts) == 1:
                response.read()
                return httpx.Response(
                    503, json={"detail": "proxy timeout", "code": "unavailable", "errors": {}}
                )
        return response


def test_a_retried_write_is_applied_once_through_its_idempotency_key(
    scratch_tenant: Tenant, base_url: str
) -> None:
    caller = make_caller(scratch_tenant, "client-retry")
    network = LoseFirstAnswer()
    content = f"Stored exactly once {uuid.uuid4().hex}"
    with EngramClient(
        base_url, caller.key, transport=network, retry=RetryPolicy(attempts=3, backoff=0.01)
    ) as engram:
        written = engram.memory_store({"content": content})
        assert written["content"] == content
        assert len(network.posts) == 2 and network.posts[0] == network.posts[1] is not None
        assert [mem["content"] for mem in engram.memories()].count(content) == 1


def test_the_async_client(scratch_tenant: Tenant, base_url: str) -> None:
    caller = make_caller(scratch_tenant, "client-async")
    tag = uuid.uuid4().hex[:8]

    async def run() -> None:
        async with AsyncEngramClient(base_url, caller.key) as engram:
            assert (await engram.me())["agent"] == "client-async"
            for n in range(3):
                await engram.memory_store(
                    {
                        "content": [
                            "Porto has a famous bridge",
                            "Port wine comes from the Douro valley near Porto",
                            "The Porto team meets on Fridays",
                        ][n]
                    }
                )
            assert len([mem async for mem in engram.memories(limit=1)]) == 3
            await engram.events_append(
                [
                    {
                        "session_id": f"s-{tag}",
                        "kind": "message",
                        "content": "hello",
                        "occurred_at": "2026-03-01T10:00:00Z",
                    }
                ]
            )
            assert [e["content"] async for e in engram.events(session_id=f"s-{tag}")] == ["hello"]
            hits = await engram.memory_search("Porto", k=2)
            assert hits["count"] == 2
            context = await engram.context_build({"session_id": f"s-{tag}", "query": "Porto", "budget": 100})
            assert context["tokens_used"] <= 100
            with pytest.raises(InvalidInput):
                await engram.memory_store({"content": " "})

    asyncio.run(run())


def test_an_update_through_the_client_and_its_history(scratch_tenant: Tenant, base_url: str) -> None:
    caller = make_caller(scratch_tenant, "client-updates")
    with EngramClient(base_url, caller.key) as engram:
        old = engram.memory_store({"content": "The Oslo office opens at 8am."})
        new = engram.memory_store(
            {"content": "The Oslo office is moving to Bergen.", "supersedes": old["id"]}
        )
        assert new["outcome"] == "updated" and new["supersedes"] == old["id"]
        assert engram.memory_get(old["id"])["superseded_by"] == new["id"]
        assert engram.memory_get(new["id"])["supersedes"] == old["id"]
        chain = engram.memory_versions(old["id"])
        assert [m["id"] for m in chain["results"]] == [old["id"], new["id"]] and chain["current"] == new["id"]
        assert [m["id"] for m in engram.memories()] == [new["id"]]
        assert {m["id"] for m in engram.memories(include_superseded=True)} == {old["id"], new["id"]}
        with pytest.raises(Conflict) as conflict:
            engram.memory_store({"content": "The Oslo office closed.", "supersedes": old["id"]})
        assert "supersedes" in conflict.value.errors
