"""The Python client's methods against a live Engram (a real uvicorn process on the test database):
the operations beyond the core write-and-recall path, each called through its typed method, the
sync client over every resource group and the async client over one call per group, the
blackboard's Server-Sent Events included."""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection
from django_tenants.utils import tenant_context
from engram_client import AsyncEngramClient, EngramClient, InvalidInput, NotFound

from memory.procedural.services.versions import version_publish
from tenants.models import Tenant
from tests.factories import asgi_server, make_caller, requires_model

pytestmark = requires_model

ECHO = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
STEPS: list[Any] = [{"id": "say", "tool": "echo", "params": {"text": {"$ref": "input.text"}}}]


def publish(tenant: Tenant, skill: str) -> None:
    """Publish version 1 of ``skill`` as an operator does (agents propose, people publish)."""
    with tenant_context(tenant):
        version_publish(username="operator", name=skill, number=1, expected_published=None)


def publish_in_thread(tenant: Tenant, skill: str) -> None:
    """``publish`` from a thread of its own (an event loop's), closing the thread's connection."""
    try:
        publish(tenant, skill)
    finally:
        connection.close()


@pytest.fixture
def base_url(scratch_tenant: Tenant) -> Iterator[str]:
    with asgi_server() as port:
        yield f"http://127.0.0.1:{port}"


def test_the_sync_client_calls_every_resource_group(scratch_tenant: Tenant, base_url: str) -> None:
    caller = make_caller(scratch_tenant, "ops-agent", scopes=("read", "write", "curate"))
    other = make_caller(scratch_tenant, "ops-other")
    tag = uuid.uuid4().hex[:8]
    session, execution = f"s-{tag}", f"x-{tag}"
    with EngramClient(base_url, caller.key) as engram, EngramClient(base_url, other.key) as teammate:
        # episodic
        one = engram.event_append(
            {"session_id": session, "kind": "message", "content": "hi", "occurred_at": "2026-03-01T10:00:00Z"}
        )
        assert one["seq"] >= 1 and one["session_id"] == session
        with pytest.raises(NotFound) as unsummarised:
            engram.session_summary(session, level=1)
        assert unsummarised.value.detail == "This session has no summary yet."

        # semantic
        memory = engram.memory_store({"content": f"The {tag} archive is in Porto", "session_id": session})
        assert engram.memory_get(memory["id"])["content"] == memory["content"]
        hits = engram.memory_search("archive in Porto", k=1, filters={"session_id": session})
        assert [h["memory"]["id"] for h in hits["results"]] == [memory["id"]]
        forgotten = engram.memory_forget(memory["id"], session_id=session)
        assert forgotten["id"] == memory["id"]
        with pytest.raises(NotFound):
            engram.memory_get(memory["id"])

        # knowledge
        batch = engram.facts_assert(
            [
                {"subject": f"Ann{tag}", "predicate": "works_at", "object": {"entity": f"Acme{tag}"}},
                {"subject": f"Acme{tag}", "predicate": "located_in", "object": {"entity": f"Oslo{tag}"}},
            ]
        )
        assert batch["count"] == 2 and [r["outcome"] for r in batch["results"]] == ["created", "created"]
        path = engram.graph_path(f"Ann{tag}", f"Oslo{tag}", max_depth=3)
        assert path["hops"] == 2 and [f["predicate"] for f in path["facts"]] == ["works_at", "located_in"]
        engram.fact_assert({"subject": f"Ann{tag}", "predicate": "lives_in", "object": {"entity": "Lima"}})
        disputed = teammate.fact_assert(
            {"subject": f"Ann{tag}", "predicate": "lives_in", "object": {"entity": "Quito"}}
        )
        assert disputed["outcome"] == "disputed"
        opened = [c["id"] for c in engram.contradictions(status="open", limit=1)]
        assert disputed["contradiction_id"] in opened
        retracted = engram.fact_retract(batch["results"][0]["fact"]["id"], reason="moved on")
        assert retracted["status"] == "retracted"
        facts = engram.entity_facts(f"Ann{tag}", facts_limit=10)["facts"]
        assert "works_at" not in [f["predicate"] for f in facts]

        # working memory
        engram.blackboard_write(execution, "plan", {"step": 1}, expected_version=0)
        assert engram.blackboard_field(execution, "ops-agent", "plan")["value"] == {"step": 1}
        assert engram.scratchpad_write(execution, "draft", [1, 2])["value"] == [1, 2]
        engram.scratchpad_write(execution, "note", None)  # null is a value, sent as such
        assert engram.scratchpad_get(execution, "note")["value"] is None
        assert engram.scratchpad(execution)["values"] == {"draft": [1, 2], "note": None}
        assert engram.scratchpad_delete(execution, "draft") is None
        assert engram.scratchpad_clear(execution)["deleted"] == 1
        assert engram.window_append(session, "user", "hello there")["length"] == 1
        assert [t["content"] for t in engram.window(session, last=5)["results"]] == ["hello there"]
        closed = engram.execution_close(execution, session_id=session)
        assert closed["closed"] is True and [b["field"] for b in closed["blackboard"]] == ["ops-agent:plan"]

        # checkpoints
        engram.checkpoint_save(session, {"idempotency_key": "k1", "step_index": 1, "state": {"n": 1}})
        stored = engram.checkpoint_writes(
            session, "k1", "task-1", [{"channel": "out", "value": {"type": "json", "data": "e30="}}]
        )
        assert stored["count"] == 1 and stored["results"][0]["created"] is True
        (tuple_,) = engram.checkpoint_tuples(session, key="k1", limit=1)
        assert [w["channel"] for w in tuple_["pending_writes"]] == ["out"]
        deleted = engram.checkpoints_delete(session)
        assert deleted["checkpoints"] == 1 and deleted["writes"] == 1
        assert list(engram.checkpoints(session)) == []

        # procedural
        assert engram.tool_save("echo", ECHO, ECHO, description="Say it back.")["version"] == 1
        assert "echo" in [t["name"] for t in engram.tools()["results"]]
        assert engram.tool_get("echo", version=1)["versions"] == [1]
        skill = engram.skill_propose(
            {
                "name": f"say-{tag}",
                "title": "Say it",
                "input_schema": ECHO,
                "steps": STEPS,
                "intents": ["repeat after me"],
                "session_id": session,
            }
        )
        assert skill["version"]["number"] == 1 and skill["version"]["status"] == "draft"
        assert (
            engram.skill_version_propose(f"say-{tag}", {"steps": STEPS, "based_on": 1})["version"]["number"]
            == 2
        )
        assert engram.skill_version_get(f"say-{tag}", 2)["version"]["based_on"] == 1
        publish(scratch_tenant, f"say-{tag}")
        assert engram.skill_get(f"say-{tag}")["version"]["status"] == "published"
        run = engram.skill_run_report(
            f"say-{tag}", {"version": 1, "success": False, "failed_step": "say", "duration_ms": 12}
        )
        assert run["version_runs"] == 1 and run["version_success_rate"] == 0.0
        matches = engram.skills_match("repeat after me", k=1, success_weight=0.5)["results"]
        assert [match["name"] for match in matches] == [f"say-{tag}"]

        # store
        written = engram.store_put(["prefs", tag], "food", {"text": "vegetarian"}, ttl=60)
        assert written["created"] is True and written["ttl"] == 60
        assert engram.store_get(f"prefs.{tag}", "food", refresh_ttl=False)["value"] == {"text": "vegetarian"}
        found = engram.store_search(namespace_prefix=["prefs"], query="what does the user eat?", limit=1)
        assert [r["key"] for r in found["results"]] == ["food"]
        assert engram.store_namespaces(prefix="prefs")["results"] == [["prefs", tag]]
        assert engram.store_delete(f"prefs.{tag}", "food")["deleted"] is True

        with pytest.raises(InvalidInput) as bad:
            engram.store_put(["prefs"], "food", {"text": "x"}, ttl=0)
        assert "ttl" in bad.value.errors


def test_the_sync_client_follows_the_blackboard(scratch_tenant: Tenant, base_url: str) -> None:
    caller = make_caller(scratch_tenant, "ops-follower")
    execution = f"x-{uuid.uuid4().hex[:8]}"
    seen: list[Any] = []

    def follow() -> None:
        with EngramClient(base_url, caller.key) as reader:
            for update in reader.blackboard_updates(execution):
                seen.append(update)
                return

    thread = threading.Thread(target=follow, daemon=True)
    thread.start()
    with EngramClient(base_url, caller.key) as engram:
        # the stream only carries writes made after it subscribed: write until one is seen
        for version in range(1, 40):
            engram.blackboard_write(execution, "status", f"step {version}")
            thread.join(timeout=0.5)
            if not thread.is_alive():
                break
    assert seen and seen[0]["field"] == "ops-follower:status" and seen[0]["value"].startswith("step ")


def test_the_async_client_calls_every_resource_group(scratch_tenant: Tenant, base_url: str) -> None:
    caller = make_caller(scratch_tenant, "ops-async")
    tag = uuid.uuid4().hex[:8]
    session, execution = f"s-{tag}", f"x-{tag}"

    async def follow(engram: AsyncEngramClient) -> Any:
        async for update in engram.blackboard_updates(execution):
            return update

    async def run() -> None:
        async with AsyncEngramClient(base_url, caller.key) as engram:
            assert (await engram.me())["agent"] == "ops-async"
            event = await engram.event_append(
                {
                    "session_id": session,
                    "kind": "message",
                    "content": "hi",
                    "occurred_at": "2026-03-01T10:00:00Z",
                }
            )
            with pytest.raises(NotFound):
                await engram.session_summary(session)
            memory = await engram.memory_store({"content": f"The {tag} vault is in Braga"})
            assert (await engram.memory_get(memory["id"]))["id"] == memory["id"]
            fact = await engram.fact_assert(
                {"subject": f"Bo{tag}", "predicate": "knows", "object": {"entity": f"Cy{tag}"}}
            )
            assert (await engram.graph_path(f"Bo{tag}", f"Cy{tag}"))["hops"] == 1
            assert [c async for c in engram.contradictions(limit=5)] == []
            assert (await engram.fact_retract(fact["fact"]["id"]))["status"] == "retracted"
            await engram.scratchpad_write(execution, "k", "v")
            assert (await engram.scratchpad(execution))["values"] == {"k": "v"}
            assert (await engram.window_append(session, "assistant", "ok"))["length"] == 1
            follower = asyncio.create_task(follow(engram))
            for version in range(1, 40):  # write until the stream, once subscribed, sees one
                await engram.blackboard_write(execution, "status", version)
                done, _ = await asyncio.wait({follower}, timeout=0.5)
                if done:
                    break
            assert follower.done() and (follower.result())["value"] >= 1
            assert (await engram.execution_close(execution))["closed"] is True
            await engram.checkpoint_save(session, {"idempotency_key": "k1", "state": {"n": 1}})
            assert [t["idempotency_key"] async for t in engram.checkpoint_tuples(session)] == ["k1"]
            assert (await engram.checkpoints_delete(session))["checkpoints"] == 1
            assert (await engram.tool_save("echo", ECHO, ECHO))["name"] == "echo"
            assert (await engram.tool_get("echo"))["versions"] == [1]
            skill = await engram.skill_propose(
                {"name": f"say-{tag}", "title": "Say it", "input_schema": ECHO, "steps": STEPS}
            )
            await asyncio.to_thread(publish_in_thread, scratch_tenant, skill["name"])
            assert (await engram.skill_get(skill["name"]))["version"]["status"] == "published"
            assert (await engram.skill_run_report(skill["name"], {"version": 1, "success": True}))[
                "success"
            ] is True
            await engram.store_put(["async", tag], "k", {"text": "v"})
            assert (await engram.store_get(f"async.{tag}", "k"))["value"] == {"text": "v"}
            assert (await engram.store_namespaces(prefix="async"))["count"] == 1
            context = await engram.context_build({"session_id": session, "query": "vault", "budget": 200})
            assert context["history_turns"] >= 1 and event["content"] == "hi"

    asyncio.run(run())
