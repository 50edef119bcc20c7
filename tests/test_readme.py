"""The README's "Try it" examples work as written: each call is replayed against the API with a
real key (the request path and body exactly as the README has them). tests/docs runs the same block
with bash and curl against a live server."""

from __future__ import annotations

import json
import re

from tests.factories import BASE_DIR, Caller, requires_model

CALL = re.compile(r"^api (?P<path>\S+) -d '(?P<body>[^']*)'", re.S | re.M)


@requires_model
def test_the_try_it_examples_work(alice: Caller) -> None:
    readme = (BASE_DIR / "README.md").read_text()
    block = readme[readme.index("## Try it") : readme.index("## What makes it different")]
    assert 'curl -s --fail-with-body "http://127.0.0.1:8000/api/v1/$1"' in block
    calls = [(f"/api/v1/{m['path']}", json.loads(m["body"])) for m in CALL.finditer(block)]
    assert [path for path, _ in calls] == ["/api/v1/events", "/api/v1/memories", "/api/v1/memories/search"]
    for path, body in calls:
        response = alice.post(path, body)
        assert response.status_code in (200, 201), (path, response.content)
    hits = response.json()["results"]
    assert hits[0]["memory"]["content"] == "Alice lives in Lisbon"


def test_ci_runs_the_readme_test_command_with_ci_set() -> None:
    """``.ci/run`` runs the README's test command and sets ``CI=true`` itself before it: under CI a
    missing dependency (``../shared``, Neo4j, Chromium) fails its tests instead of skipping them,
    whoever calls the script."""
    readme = (BASE_DIR / "README.md").read_text()
    assert re.search(r"^\./engram test\b", readme, re.M), "the README no longer shows `./engram test`"
    lines = [line.strip() for line in (BASE_DIR / ".ci" / "run").read_text().splitlines()]
    runs = [n for n, line in enumerate(lines) if re.search(r"(^|\s)\./engram test\b", line)]
    assert runs, ".ci/run does not run the README's test command (./engram test)"
    exports = [n for n, line in enumerate(lines) if line == "export CI=true"]
    assert exports and exports[0] < runs[0], ".ci/run must `export CI=true` before it runs the tests"
