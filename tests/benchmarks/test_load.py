"""The load test's parts that can break silently: the locustfile loads under Locust with its agents,
and every URL pattern the runner attributes server time by is one the API routes."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from django.urls import resolve

ROOT = Path(__file__).resolve().parents[2]


def _runner():  # type: ignore[no-untyped-def]
    import importlib

    if str(ROOT / "benchmarks") not in sys.path:
        sys.path.insert(0, str(ROOT / "benchmarks"))  # the runner imports its siblings by name
    return importlib.import_module("benchmarks.load")


def test_the_locustfile_loads_its_agent_user_under_locust(tmp_path: Path) -> None:
    """In a process of its own: Locust patches the standard library when imported."""
    agents = tmp_path / "agents.json"
    agents.write_text(json.dumps([{"tenant": "t0", "agent": "agent-0", "key": "egm.x.y.z"}]))
    out = subprocess.run(
        [sys.executable, "-m", "locust", "-f", str(_runner().LOCUSTFILE), "--list"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "ENGRAM_LOAD_AGENTS": str(agents), "ENGRAM_LOAD_THINK": "0,0"},
    )
    assert out.returncode == 0, out.stderr
    assert "AgentUser" in out.stdout


def test_every_operation_the_runner_names_is_a_route_of_the_api() -> None:
    runner = _runner()
    for pattern in runner.OPERATIONS:
        path = "/" + re.sub(r"<str:(\w+)>", r"\1-1", pattern)
        assert resolve(path, urlconf="config.urls").route == pattern, pattern
    assert len(set(runner.OPERATIONS.values())) == len(runner.OPERATIONS)
