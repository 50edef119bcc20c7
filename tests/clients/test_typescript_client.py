"""The TypeScript client and LangGraph.js adapters (clients/typescript) against a live Engram: a real
uvicorn process on the test database drives the package's Node tests (``node --test``), LangGraph.js's
checkpointer validation suite over ``EngramCheckpointSaver``, and a graph moved between the Python and
the TypeScript saver in both directions. The generated types are held equal to the live schema and
the package type-checks (``tsc --noEmit``).

Needs Node 18+ and the package's dependencies (``npm ci`` in clients/typescript, as ``.ci/run`` does):
without them the tests are skipped, except under CI (``CI=true``), where they fail."""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
import sys
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from django_tenants.utils import tenant_context

from agents.models import Scope
from memory.checkpoints.models import Checkpoint, CheckpointBlob
from tenants.models import Tenant
from tests.factories import BASE_DIR, asgi_server, make_caller, requires_model, unavailable

PACKAGE = Path(BASE_DIR) / "clients" / "typescript"
SCHEMA_FILE = Path(BASE_DIR) / "var" / "test" / "openapi.json"
VALIDATION_REPORT = Path(BASE_DIR) / "var" / "test" / "langgraph-js-validation.txt"
NODE_TIMEOUT = 600


def _node_ready() -> str | None:
    """Why the Node side cannot run here, or None."""
    if shutil.which("node") is None or shutil.which("npx") is None:
        return "Node.js (node, npx) is not installed"
    if not (PACKAGE / "node_modules" / "typescript").is_dir():
        return "clients/typescript has no node_modules: run `npm ci` there (.ci/run does)"
    return None


@pytest.fixture(scope="module", autouse=True)
def node_ready() -> None:
    reason = _node_ready()
    if reason is not None:
        unavailable(reason)


def _run(command: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command,
        cwd=PACKAGE,
        env={**os.environ, "NO_COLOR": "1", "FORCE_COLOR": "0", **(env or {})},
        capture_output=True,
        text=True,
        timeout=NODE_TIMEOUT,
    )


@pytest.fixture(scope="module")
def built() -> None:
    """The package compiled to dist/ (the Node tests import it as users do)."""
    done = _run(["npx", "tsc", "-p", "tsconfig.build.json"])
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.fixture
def base_url(scratch_tenant: Tenant) -> Iterator[str]:
    with asgi_server() as port:
        yield f"http://127.0.0.1:{port}"


def _write_live_schema(base_url: str) -> Path:
    with urllib.request.urlopen(f"{base_url}/api/v1/schema?format=json", timeout=30) as answer:
        schema = json.load(answer)
    SCHEMA_FILE.parent.mkdir(parents=True, exist_ok=True)
    SCHEMA_FILE.write_text(json.dumps(schema, indent=2, sort_keys=True))
    return SCHEMA_FILE


def test_the_generated_types_are_those_of_the_live_schema(scratch_tenant: Tenant, base_url: str) -> None:
    schema = _write_live_schema(base_url)
    done = _run(["node", "scripts/generate.mjs", "--check", str(schema)])
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_package_type_checks() -> None:
    done = _run(["npx", "tsc", "--noEmit", "-p", "tsconfig.check.json"])
    assert done.returncode == 0, done.stdout + done.stderr


@requires_model
def test_the_node_suite_passes_against_a_live_server(
    scratch_tenant: Tenant, base_url: str, built: None
) -> None:
    caller = make_caller(scratch_tenant, "ts-client", scopes=(Scope.READ, Scope.WRITE, Scope.CURATE))
    reader = make_caller(scratch_tenant, "ts-reader", scopes=(Scope.READ,))
    outsider = make_caller(Tenant.objects.get(schema_name="beta"), "ts-outsider")
    env = {
        "ENGRAM_URL": base_url,
        "ENGRAM_KEY": caller.key,
        "ENGRAM_READONLY_KEY": reader.key,
        "ENGRAM_OTHER_TENANT_KEY": outsider.key,
        "ENGRAM_SCHEMA": str(_write_live_schema(base_url)),
    }
    done = _run(
        [
            "node",
            "--test",
            "--test-reporter=spec",
            *(str(p) for p in sorted(PACKAGE.glob("test/*.test.mjs"))),
        ],
        env,
    )
    assert done.returncode == 0, done.stdout[-20000:] + done.stderr[-5000:]
    assert not re.search(r"^\S+ (skipped|todo|cancelled) [1-9]", done.stdout, re.M), done.stdout[-3000:]


def test_values_serialized_by_langgraph_in_one_language_load_in_the_other(built: None) -> None:
    """LangGraph Python's msgpack (messages, a set, bytes, None) read by the TypeScript saver's
    serializer, and LangGraph.js's JSON (messages) read by Python's."""
    from langchain_core.messages import AIMessage, HumanMessage
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    python = JsonPlusSerializer()
    kind, data = python.dumps_typed(
        {
            "messages": [HumanMessage("hi", id="h1"), AIMessage("hello", id="a1")],
            "seen": {"a", "b"},
            "raw": b"xy",
            "nothing": None,
        }
    )
    done = subprocess.run(
        ["node", "test/support/serde_roundtrip.mjs"],
        cwd=PACKAGE,
        input=f"{kind} {base64.b64encode(data).decode()}",
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert answer["described"] == {
        "messages": [["HumanMessage", "hi", "h1"], ["AIMessage", "hello", "a1"]],
        "seen": ["a", "b"],
        "raw": [120, 121],
        "nothing": None,
    }
    back_kind, back_data = answer["back"]
    value = python.loads_typed((back_kind, base64.b64decode(back_data)))
    assert value == {"messages": [HumanMessage("hi", id="h1"), AIMessage("hello", id="a1")], "list": [1, "a"]}


# The case LangGraph.js skips for its own MemorySaver and SQLite saver: a put stores only the channel
# values its newVersions names (docs/decisions/0100); the Engram checkpointer must pass it too.
DELTAS = "should only store channel_values that have changed (based on newVersions)"


def test_langgraph_js_validation_suite_passes_on_the_engram_checkpointer(
    scratch_tenant: Tenant, base_url: str, built: None
) -> None:
    caller = make_caller(scratch_tenant, "ts-validation")
    env = {"ENGRAM_URL": base_url, "ENGRAM_KEY": caller.key}
    results = VALIDATION_REPORT.with_suffix(".json")
    # the package's CLI (validate-checkpointer 1.1.1) cannot load an initializer (its bundle drops
    # the schema it checks one with), so its suite runs through its library entry under vitest
    done = _run(
        [
            "npx",
            "vitest",
            "run",
            "--globals",
            "--dir",
            "test/validation",
            "--reporter=default",
            "--reporter=json",
            f"--outputFile.json={results}",
        ],
        env,
    )
    printed = done.stdout + done.stderr
    VALIDATION_REPORT.parent.mkdir(parents=True, exist_ok=True)
    VALIDATION_REPORT.write_text(printed)
    assert results.exists(), printed[-5000:]
    cases = [
        case for file in json.loads(results.read_text())["testResults"] for case in file["assertionResults"]
    ]
    failed = [case for case in cases if case["status"] != "passed"]
    assert not failed, (failed, printed[-20000:])
    passed = [case["fullName"] for case in cases if case["status"] == "passed"]
    assert len(passed) == len(cases) == 718, (len(passed), len(cases))
    assert sum(case["title"] == DELTAS for case in cases) == 1, "the delta case ran (and passed)"
    for method in ("put", "putWrites", "getTuple", "list", "deleteThread"):
        assert any(f"EngramCheckpointSaver#{method} " in name for name in passed), method
    # every list case passes, those without a thread (the agent's checkpoints in every session) too
    listed = [case for case in cases if "EngramCheckpointSaver#list " in case["fullName"]]
    assert len(listed) > 600 and all(case["status"] == "passed" for case in listed), len(listed)
    assert len(passed) > 500, len(passed)


PY_GRAPH = """
import os, sys
from typing import TypedDict
from engram_client.langgraph import EngramCheckpointSaver
from langgraph.graph import END, START, StateGraph

class State(TypedDict):
    steps: list[str]
    total: int
    owner: str

builder = StateGraph(State)
builder.add_node("plan", lambda s: {"steps": [*s["steps"], "plan"], "total": s["total"] + 1})
builder.add_node("work", lambda s: {"total": s["total"] * 10})
builder.add_node("finish", lambda s: {"steps": [*s["steps"], "finish"], "total": s["total"] + 2})
builder.add_edge(START, "plan")
builder.add_edge("plan", "work")
builder.add_edge("work", "finish")
builder.add_edge("finish", END)

with EngramCheckpointSaver(os.environ["ENGRAM_URL"], os.environ["ENGRAM_API_KEY"]) as saver:
    graph = builder.compile(checkpointer=saver, interrupt_before=["finish"])
    config = {"configurable": {"thread_id": sys.argv[1]}}
    if graph.get_state(config).next:
        result = graph.invoke(None, config)
    else:
        result = graph.invoke({"steps": [], "total": 1, "owner": "ada"}, config)
    print(result)
"""


def test_a_thread_moves_between_python_and_typescript(
    scratch_tenant: Tenant, base_url: str, built: None, tmp_path: Path
) -> None:
    """The same graph (examples/resume_graph.mjs is its LangGraph.js twin): a run stopped before
    "finish" by one language's saver is resumed by the other's, both ways. Some channels stay
    unchanged between steps ("work" leaves ``steps``, nothing changes ``owner`` after the input):
    their values are stored once, at the version that set them, and read back by the other saver."""
    caller = make_caller(scratch_tenant, "ts-cross")
    env = {"ENGRAM_URL": base_url, "ENGRAM_API_KEY": caller.key}
    script = tmp_path / "graph.py"
    script.write_text(PY_GRAPH)

    def python(thread: str) -> str:
        done = subprocess.run(
            [sys.executable, str(script), thread],
            env={**os.environ, **env},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.strip().splitlines()[-1]

    def typescript(thread: str) -> dict[str, object]:
        done = _run(["node", "examples/resume_graph.mjs", thread], env)
        assert done.returncode == 0, done.stdout + done.stderr
        return json.loads(done.stdout.strip().splitlines()[-1])

    halfway = {"steps": ["plan"], "total": 20, "owner": "ada"}
    finished = {"steps": ["plan", "finish"], "total": 22, "owner": "ada"}

    python_first = f"py-ts-{uuid.uuid4().hex[:8]}"
    assert python(python_first) == repr(halfway)
    assert typescript(python_first) == finished

    typescript_first = f"ts-py-{uuid.uuid4().hex[:8]}"
    assert typescript(typescript_first) == halfway
    assert python(typescript_first) == repr(finished)

    with tenant_context(scratch_tenant):
        for thread in (python_first, typescript_first):
            versions = CheckpointBlob.objects.filter(session_id=thread, checkpoint_ns="")
            # owner: set by the input, once; steps: by the input, "plan" and "finish", not "work"
            assert versions.filter(channel="owner").count() == 1, thread
            assert versions.filter(channel="steps").count() == 3, thread
            checkpoints = Checkpoint.objects.filter(session_id=thread, checkpoint_ns="")
            assert checkpoints.exclude(channel_versions={}).count() >= 4, thread
