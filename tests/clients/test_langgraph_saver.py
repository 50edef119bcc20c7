"""``EngramCheckpointSaver`` (clients/python, ``engram_client.langgraph``) against a live Engram: a
real uvicorn process on the test database. LangGraph's own conformance suite
(``langgraph-checkpoint-conformance``) runs its base capabilities; then tenant and agent
isolation, the sync methods, and the README's example graph resuming in a second process."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import uuid
from collections.abc import AsyncGenerator, Iterator
from pathlib import Path

import pytest
from engram_client import InvalidInput
from engram_client.langgraph import EngramCheckpointSaver
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import BASE_CAPABILITIES
from langgraph.checkpoint.conformance.test_utils import (
    generate_checkpoint,
    generate_config,
    generate_metadata,
)

from tenants.models import Tenant
from tests.factories import BASE_DIR, asgi_server, make_caller

REPORT = Path(BASE_DIR) / "var" / "test" / "langgraph-conformance.txt"


@pytest.fixture
def base_url(scratch_tenant: Tenant) -> Iterator[str]:
    with asgi_server() as port:
        yield f"http://127.0.0.1:{port}"


def test_the_saver_passes_langgraph_conformance_base_capabilities(
    scratch_tenant: Tenant, base_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    caller = make_caller(scratch_tenant, "lg-conformance")

    @checkpointer_test(name="EngramCheckpointSaver")
    async def engram_saver() -> AsyncGenerator[EngramCheckpointSaver, None]:
        saver = EngramCheckpointSaver(base_url, caller.key)
        yield saver
        await saver.aclose()

    report = asyncio.run(validate(engram_saver, capabilities={c.value for c in BASE_CAPABILITIES}))
    report.print_report()
    passed = sum(result.tests_passed for result in report.results.values())
    ran = passed + sum(result.tests_failed for result in report.results.values())
    printed = capsys.readouterr().out + f"\n    tests passed: {passed}/{ran}\n"
    REPORT.parent.mkdir(parents=True, exist_ok=True)
    REPORT.write_text(printed)
    failures = {name: result.failures for name, result in report.results.items() if result.failures}
    assert report.passed_all_base(), (printed, failures)
    for capability in BASE_CAPABILITIES:
        assert report.results[capability.value].tests_passed > 0, capability


def test_another_tenant_or_agent_sees_nothing_of_a_thread(scratch_tenant: Tenant, base_url: str) -> None:
    owner = make_caller(scratch_tenant, "lg-owner")
    teammate = make_caller(scratch_tenant, "lg-teammate")
    other_tenant = Tenant.objects.get(schema_name="beta")
    outsider = make_caller(other_tenant, "lg-outsider")
    thread = f"t-{uuid.uuid4().hex[:10]}"
    with EngramCheckpointSaver(base_url, owner.key) as saver:
        cp = generate_checkpoint(channel_values={"secret": "owner's"})
        cp["channel_versions"] = {"secret": 1}
        stored = saver.put(generate_config(thread), cp, generate_metadata(step=0), {"secret": 1})
        saver.put_writes(stored, [("secret", "pending")], "task-1")
        got = saver.get_tuple(generate_config(thread))
        assert got is not None and got.checkpoint["channel_values"] == {"secret": "owner's"}
        assert got.pending_writes == [("task-1", "secret", "pending")]
        assert [t.checkpoint["id"] for t in saver.list(generate_config(thread))] == [cp["id"]]

    for stranger in (teammate, outsider):
        with EngramCheckpointSaver(base_url, stranger.key) as saver:
            assert saver.get_tuple(generate_config(thread)) is None
            assert saver.get_tuple(stored) is None
            assert list(saver.list(generate_config(thread))) == []
            saver.delete_thread(thread)  # deletes the stranger's own (empty) stream only

    with EngramCheckpointSaver(base_url, owner.key) as saver:
        assert saver.get_tuple(stored) is not None  # untouched by the strangers
        saver.delete_thread(thread)
        assert saver.get_tuple(generate_config(thread)) is None


def test_listing_without_a_thread_reads_the_agents_checkpoints_in_every_session(
    scratch_tenant: Tenant, base_url: str
) -> None:
    """``list(None)`` / ``alist(None)``: one call per page of ``GET /checkpoints``, newest saved
    first, with the namespace, metadata, before and limit filters; a teammate's and another
    tenant's agent's (same ids) never appear."""
    owner = make_caller(scratch_tenant, "lg-all-owner")
    strangers = [
        make_caller(scratch_tenant, "lg-all-teammate"),
        make_caller(Tenant.objects.get(schema_name="beta"), "lg-all-owner"),
    ]
    first, second = (f"t-{uuid.uuid4().hex[:10]}" for _ in range(2))
    saved = {}
    for caller in (owner, *strangers):
        with EngramCheckpointSaver(base_url, caller.key) as saver:
            for name, thread, ns, source in (
                ("a", first, "", "input"),
                ("b", first, "child", "loop"),
                ("c", second, "", "loop"),
            ):
                cp = generate_checkpoint()
                config = {"configurable": {"thread_id": thread, "checkpoint_ns": ns}}
                saver.put(config, cp, generate_metadata(source=source, step=0), {})
                if caller is owner:
                    saved[name] = cp["id"]
    with EngramCheckpointSaver(base_url, owner.key) as saver:
        every = list(saver.list(None))
        assert [t.checkpoint["id"] for t in every] == [saved["c"], saved["b"], saved["a"]]
        assert [t.config["configurable"]["thread_id"] for t in every] == [second, first, first]
        ids = lambda found: [t.checkpoint["id"] for t in found]  # noqa: E731
        assert ids(saver.list(None, filter={"source": "loop"})) == [saved["c"], saved["b"]]
        assert ids(saver.list({"configurable": {"checkpoint_ns": ""}})) == [saved["c"], saved["a"]]
        assert ids(saver.list(None, before=every[0].config)) == [saved["b"], saved["a"]]
        assert ids(saver.list(None, limit=1)) == [saved["c"]]

    async def alist() -> list[str]:
        async with EngramCheckpointSaver(base_url, owner.key) as saver:
            return [t.checkpoint["id"] async for t in saver.alist(None, limit=2)]

    assert asyncio.run(alist()) == [saved["c"], saved["b"]]


def test_a_thread_id_that_is_no_session_id_is_a_clear_error(scratch_tenant: Tenant, base_url: str) -> None:
    caller = make_caller(scratch_tenant, "lg-bad")
    with EngramCheckpointSaver(base_url, caller.key) as saver:
        with pytest.raises(InvalidInput) as caught:
            saver.put(generate_config("not a session id"), generate_checkpoint(), generate_metadata(), {})
    assert "session_id" in caught.value.errors


def _readme_example() -> str:
    text = (Path(BASE_DIR) / "docs" / "guides" / "agents" / "langgraph.md").read_text()
    match = re.search(r"<!-- langgraph-example -->\s*```py\n(.*?)```", text, re.S)
    assert match, "the LangGraph guide lost its example"
    return match.group(1)


def test_the_readme_example_graph_resumes_from_engram_in_a_new_process(
    scratch_tenant: Tenant, base_url: str, tmp_path: Path
) -> None:
    caller = make_caller(scratch_tenant, "lg-example")
    script = tmp_path / "resume_graph.py"
    script.write_text(_readme_example())
    env = {**os.environ, "ENGRAM_URL": base_url, "ENGRAM_API_KEY": caller.key}
    thread = f"example-{uuid.uuid4().hex[:8]}"

    def run() -> str:
        done = subprocess.run(
            [sys.executable, str(script), thread], env=env, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    # the first process stops before "finish"; the second, with nothing in memory, resumes from Engram
    assert run().splitlines()[-1] == "{'steps': ['plan', 'work'], 'total': 20}"
    assert run().splitlines()[-1] == "{'steps': ['plan', 'work', 'finish'], 'total': 22}"
    # a third run finds the thread finished and starts a new run on it
    assert run().splitlines()[-1] == "{'steps': ['plan', 'work'], 'total': 20}"
