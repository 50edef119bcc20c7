"""Every path and query parameter of every operation, walked from the URL patterns and the OpenAPI
document: a value no parameter can take (NUL, which PostgreSQL text cannot hold) is a 400 naming the
parameter, and no value at all is a 5xx or a body other than the one error body.

The contract fuzzer (test_contract_fuzz.py) generates values from the document's schemas: a path
parameter documented with a pattern gets values that match it (and, in negative mode, strings that
do not, which the URL router or the view refuses before anything else sees them), and a query
parameter documented as a string almost never gets a JSON object with an escaped NUL in it. This
walk sends those values to every parameter on purpose.
"""

from __future__ import annotations

import re
import uuid
from typing import Any
from urllib.parse import quote, urlencode

import yaml
from django.test import Client
from django.urls import URLPattern, URLResolver

from api.parameters import PATH_PARAMETERS
from api.urls import urlpatterns
from tests.factories import Caller

NUL = "a\x00b"
# values no operation may answer with a 5xx, or with anything but the one error body
NASTY = [
    NUL,
    '{"a": "\\u0000"}',  # a NUL escaped inside JSON: parameters that parse JSON must refuse it too
    '{"a": "\\ud800"}',  # a lone surrogate escaped inside JSON: not text, PostgreSQL refuses it
    "9" * 30,  # past every integer column
    "-1",
    "x" * 5000,
    "Zürich 北京 😀",
    "a/b",
    "%",
]
PLAUSIBLE = {
    "memory_id": str(uuid.uuid4()),
    "fact_id": "1",
    "step_index": "1",
    "name": "Nobody",
    "number": "1",
}
# the Server-Sent Events stream never ends once it starts: only values it refuses are sent to it
STREAM = "execution_stream"


def documented(client: Client) -> list[tuple[str, str, dict[str, Any]]]:
    doc = yaml.safe_load(client.get("/api/v1/schema").content)
    return [(path, method, op) for path, item in doc["paths"].items() for method, op in item.items()]


def url(path: str, **values: str) -> str:
    """A documented path with its parameters filled in: ``values`` (quoted) or plausible ones."""

    def fill(match: re.Match[str]) -> str:
        name = match.group(1)
        if name in values:
            return quote(values[name], safe="")
        return PLAUSIBLE.get(name, "x1")

    return re.sub(r"\{(\w+)\}", fill, path)


def call(caller: Caller, method: str, target: str) -> Any:
    if method in ("post", "put", "patch"):
        return getattr(caller.client, method)(target, data="{}", content_type="application/json")
    return getattr(caller.client, method)(target)


def check(response: Any, where: tuple[str, ...]) -> None:
    assert response.status_code < 500, (*where, response.status_code, response.content[:300])
    if response.status_code >= 400:
        assert response["Content-Type"] == "application/json", where
        assert set(response.json()) >= {"detail", "code", "errors"}, (*where, response.content[:300])


def api_patterns() -> list[URLPattern]:
    found: list[URLPattern] = []
    stack: list[Any] = list(urlpatterns)
    while stack:
        entry = stack.pop()
        if isinstance(entry, URLResolver):
            stack.extend(entry.url_patterns)
        else:
            found.append(entry)
    return found


def test_every_path_parameter_of_every_url_pattern_is_in_the_one_table() -> None:
    """``api.parameters.PATH_PARAMETERS`` says what each path parameter accepts: the document shows
    it (``api.schema``) and every request is checked against it (``check_parameters``)."""
    names = {name for pattern in api_patterns() for name in getattr(pattern.pattern, "converters", {})}
    assert names, "no path parameter found: the walk is broken"
    assert names == set(PATH_PARAMETERS), names ^ set(PATH_PARAMETERS)


def test_no_value_of_any_path_parameter_is_a_5xx_and_nul_is_a_400_naming_it(alice: Caller) -> None:
    walked = set()
    for path, method, op in documented(alice.client):
        for name in re.findall(r"\{(\w+)\}", path):
            values = [NUL] if op["operationId"] == STREAM else NASTY
            for value in values:
                response = call(alice, method, url(path, **{name: value}))
                check(response, (method, path, name, value[:20]))
                if value == NUL:
                    assert response.status_code == 400, (method, path, name, response.content)
                    assert name in response.json()["errors"], (method, path, name, response.content)
            walked.add((method, path, name))
    assert len(walked) >= 35, sorted(walked)


def test_no_value_of_any_query_parameter_is_a_5xx_and_nul_is_a_400_naming_it(alice: Caller) -> None:
    walked = set()
    for path, method, op in documented(alice.client):
        if op["operationId"] == STREAM:
            continue
        for parameter in op.get("parameters", []):
            if parameter["in"] != "query":
                continue
            name = parameter["name"]
            for value in NASTY:
                response = call(alice, method, f"{url(path)}?{urlencode({name: value})}")
                check(response, (method, path, name, value[:20]))
                if value == NUL:
                    assert response.status_code == 400, (method, path, name, response.content)
                    assert name in response.json()["errors"], (method, path, name, response.content)
            walked.add((method, path, name))
    assert len(walked) >= 40, sorted(walked)


def test_the_reported_values_are_400s_naming_their_parameter(alice: Caller) -> None:
    summary = alice.get("/api/v1/sessions/a%00b/summary")
    assert summary.status_code == 400 and "session_id" in summary.json()["errors"], summary.content
    tuples = alice.get("/api/v1/sessions/s1/checkpoints/tuples", {"metadata": '{"a": "\\u0000"}'})
    assert tuples.status_code == 400 and "metadata" in tuples.json()["errors"], tuples.content
