"""The README's "Try it" examples work as written: each curl call is replayed against the API with a
real key (the request path and body exactly as the README has them)."""

from __future__ import annotations

import json
import re

from tests.factories import BASE_DIR, Caller, requires_model

CURL = re.compile(r"curl -s localhost:8000(?P<path>/api/v1/\S+)[^\n]*\\\n\s+-d '(?P<body>[^']*)'", re.S)


@requires_model
def test_the_try_it_examples_work(alice: Caller) -> None:
    readme = (BASE_DIR / "README.md").read_text()
    block = readme[readme.index("## Try it") : readme.index("## API")]
    calls = [(m["path"], json.loads(m["body"])) for m in CURL.finditer(block)]
    assert [path for path, _ in calls] == ["/api/v1/events", "/api/v1/memories", "/api/v1/memories/search"]
    for path, body in calls:
        response = alice.post(path, body)
        assert response.status_code in (200, 201), (path, response.content)
    hits = response.json()["results"]
    assert hits[0]["memory"]["content"] == "Alice lives in Lisbon"
