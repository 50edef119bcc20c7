"""The contract is fuzzed: schemathesis generates requests for every operation of the live OpenAPI
document with every check it has (``--checks all``: server errors, status codes, content types,
response schemas and headers, schema-valid requests rejected, schema-violating requests accepted,
undeclared methods, missing authentication, ...), positive and negative data, its stateful phase
following the document's links (``api.schema.LINKS``), for two seeds; 0 failures. The run's summary
is printed and saved to ``var/test-artifacts/schemathesis-<seed>.txt``.

The Server-Sent Events stream (``execution_stream``) never ends, so a fuzzer would wait on it
forever: its contract is held by a bounded real client instead,
``tests/memory/working/test_working.py::test_sse_client_receives_a_write_made_by_another_agent``.

A client generated from the document (openapi-python-client) builds without warnings.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.db import connection
from django_tenants.utils import tenant_context

from agents.models import Scope
from agents.services import agent_create, api_key_create
from tests.factories import BASE_DIR, asgi_server

SEEDS = [4242, 20261201]
EXCLUDED = ["execution_stream"]  # the endless stream: see the module docstring
# the three operations whose compile rules JSON Schema cannot state (docs/decisions/0052)
CONFIG = Path(__file__).with_name("schemathesis.toml")


@pytest.fixture
def fuzz_key(scratch_tenant, django_db_blocker) -> str:  # type: ignore[no-untyped-def]
    """A curating key of a tenant of its own (the fuzzer writes whatever it likes there)."""
    with django_db_blocker.unblock(), tenant_context(scratch_tenant):
        agent = agent_create(by=None, name="fuzzer", role="tester")
        _, raw = api_key_create(by=None, agent=agent, scopes=[Scope.READ, Scope.WRITE, Scope.CURATE])
    connection.set_schema_to_public()
    return raw


def schemathesis(
    port: int, key: str, seed: int, report: Path, *extra: str
) -> subprocess.CompletedProcess[str]:
    command = [
        str(Path(sys.executable).with_name("st")),
        "--config-file",
        str(CONFIG),
        "run",
        f"http://127.0.0.1:{port}/api/v1/schema",
        "--url",
        f"http://127.0.0.1:{port}",
        "--header",
        f"Authorization: Bearer {key}",
        "--checks",
        "all",
        "--mode",
        "all",
        "--max-examples",
        os.environ.get("ENGRAM_FUZZ_EXAMPLES", "5"),
        "--seed",
        str(seed),
        "--request-timeout",
        "20",
        "--workers",
        "1",
        # a failure is reported with the case that found it; shrinking it took minutes per failure
        "--no-shrink",
        "--no-color",
        "--report",
        "junit",
        "--report-junit-path",
        str(report),
        *[arg for op in EXCLUDED for arg in ("--exclude-operation-id", op)],
        *extra,
    ]
    # in the test's own folder: schemathesis keeps a cache of past crashes in its working directory
    return subprocess.run(command, cwd=report.parent, capture_output=True, text=True, timeout=1500)


def summary_of(output: str) -> str:
    """The run's summary: operations, phases, failures per check, test cases."""
    start = output.rfind("SUMMARY")
    return output[output.rfind("\n", 0, start) + 1 :] if start >= 0 else output[-6000:]


@pytest.mark.timeout(1500)
@pytest.mark.parametrize("seed", SEEDS)
def test_schemathesis_with_every_check_finds_nothing(fuzz_key: str, seed: int, tmp_path: Path) -> None:
    with asgi_server(ENGRAM_EMBEDDER="model2vec", ENGRAM_EMBEDDING_MODEL_PATH=str(static_model())) as port:
        started = time.monotonic()
        result = schemathesis(port, fuzz_key, seed, tmp_path / "schemathesis.xml")
        seconds = time.monotonic() - started
    output = result.stdout + result.stderr
    summary = f"{summary_of(result.stdout)}\nseed {seed}: {seconds:.0f} s\n"
    print(summary)
    out = BASE_DIR / "var" / "test-artifacts"
    out.mkdir(parents=True, exist_ok=True)
    (out / f"schemathesis-{seed}.txt").write_text(output + summary)
    assert result.returncode == 0, output[-20000:]
    assert re.search(r"Tested: +\d+", result.stdout), summary


def static_model() -> Path:
    """The fast static embedding model (the fuzzer stores thousands of memories)."""
    from tests.factories import SHARED_DIR, unavailable

    path = SHARED_DIR / "models" / "minilm-static-256"
    if not path.exists():
        unavailable(f"the model2vec model is missing at {path}")
    return path


def test_a_generated_client_builds_without_warnings(tmp_path: Path, db) -> None:  # type: ignore[no-untyped-def]
    from django.test import Client

    document = tmp_path / "openapi.json"
    document.write_bytes(
        Client().get("/api/v1/schema", HTTP_ACCEPT="application/vnd.oai.openapi+json").content
    )
    result = subprocess.run(
        [
            str(Path(sys.executable).with_name("openapi-python-client")),
            "generate",
            "--path",
            str(document),
            "--output-path",
            str(tmp_path / "client"),
            "--meta",
            "none",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        # its post-generation hooks format the client with ruff, from this environment
        env={**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"},
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "Warning" not in output and "warning" not in output.lower(), output
    generated = tmp_path / "client"
    assert (generated / "api" / "semantic" / "memories_search.py").exists(), sorted(
        str(p.relative_to(generated)) for p in generated.rglob("*.py")
    )[:40]


def test_the_docs_are_served_without_a_cdn(db) -> None:  # type: ignore[no-untyped-def]
    from django.test import Client

    for page in ("/api/v1/docs", "/api/v1/redoc"):
        html = Client().get(page).content.decode()
        assert "/static/drf_spectacular_sidecar/" in html, page
        assert "cdn" not in html.lower() and "unpkg" not in html.lower(), page
    schema = Client().get("/api/v1/schema").content.decode()
    assert schema.startswith("openapi: 3.1.0")


def generate_client(document: Path, output: Path) -> str:
    """openapi-python-client's client of ``document`` in ``output``; returns its output."""
    result = subprocess.run(
        [
            str(Path(sys.executable).with_name("openapi-python-client")),
            "generate",
            "--path",
            str(document),
            "--output-path",
            str(output),
            "--meta",
            "none",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        # its post-generation hooks format the client with ruff, from this environment
        env={**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout + result.stderr


@pytest.mark.timeout(600)
def test_a_generated_client_round_trips(fuzz_key: str, tmp_path: Path) -> None:
    """Through the generated code only: create a memory, append events, assert a fact, save and
    restore a checkpoint, and read each back from a live server."""
    import importlib
    import urllib.request

    with asgi_server(ENGRAM_EMBEDDER="model2vec", ENGRAM_EMBEDDING_MODEL_PATH=str(static_model())) as port:
        base = f"http://127.0.0.1:{port}"
        request = urllib.request.Request(
            f"{base}/api/v1/schema", headers={"Accept": "application/vnd.oai.openapi+json"}
        )
        with urllib.request.urlopen(request, timeout=30) as answer:
            (tmp_path / "openapi.json").write_bytes(answer.read())
        generate_client(tmp_path / "openapi.json", tmp_path / "engram_generated")
        sys.path.insert(0, str(tmp_path))
        try:
            gen = importlib.import_module("engram_generated")
            api = "engram_generated.api"
            models = importlib.import_module("engram_generated.models")
            client = gen.AuthenticatedClient(base_url=base, token=fuzz_key, raise_on_unexpected_status=True)

            def call(module: str, **kwargs):  # type: ignore[no-untyped-def]
                response = importlib.import_module(f"{api}.{module}").sync_detailed(client=client, **kwargs)
                assert 200 <= response.status_code < 300, (module, response.status_code, response.content)
                return response.parsed

            memory = call(
                "semantic.memories_create",
                body=models.MemoryInputRequest.from_dict({"content": "Alice lives in Lisbon"}),
            )
            assert call("semantic.memories_get", memory_id=memory.id).content == "Alice lives in Lisbon"

            events = [
                {
                    "session_id": "rt",
                    "kind": "message",
                    "content": f"turn {i}",
                    "occurred_at": "2026-01-01T00:00:00Z",
                }
                for i in range(2)
            ]
            call("episodic.events_append", body=[models.EventInputRequest.from_dict(e) for e in events])
            listed = call("episodic.events_list", session_id="rt")
            assert [e.content for e in listed.results] == ["turn 0", "turn 1"], listed

            fact = {"subject": "Alice", "predicate": "lives_in", "object": {"entity": "Lisbon"}}
            call("knowledge.facts_assert", body=models.FactInputRequest.from_dict(fact))
            known = call("knowledge.entity_facts", name="Alice")
            assert "lives_in" in str(known.to_dict()), known

            saved = call(
                "checkpoints.checkpoints_save",
                session_id="rt",
                body=models.CheckpointInputRequest.from_dict({"idempotency_key": "k1", "state": {"step": 1}}),
            )
            latest = call("checkpoints.checkpoints_latest", session_id="rt")
            assert latest.step_index == saved.step_index and latest.state.to_dict() == {"step": 1}, latest
        finally:
            sys.path.remove(str(tmp_path))
            for name in [m for m in sys.modules if m.startswith("engram_generated")]:
                del sys.modules[name]
