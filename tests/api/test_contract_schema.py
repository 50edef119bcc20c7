"""The OpenAPI document says what the server does (issue 30, item 1): each class of disagreement the
strict fuzz run (test_contract_fuzz.py) found has a test here that walks every case of the class
(every request component, every default, every query parameter, every operation), not the one
case the fuzzer happened to draw.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any

import jsonschema
import pytest
import yaml
from django.core.validators import RegexValidator
from django.test import Client
from rest_framework import serializers

import api.rest
from api.fields import (
    CleanCharField,
    StrictBooleanField,
    StrictFloatField,
    StrictIntegerField,
    StrictSerializer,
)
from api.schema import NUMBERS_RULE
from tests.factories import Caller

pytestmark = pytest.mark.django_db


def document() -> dict[str, Any]:
    return yaml.safe_load(Client().get("/api/v1/schema").content)


def operations(doc: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (path, method, op)
        for path, item in doc["paths"].items()
        for method, op in item.items()
        if method in {"get", "post", "put", "patch", "delete"}
    ]


def resolve(doc: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in node:
        node = doc["components"]["schemas"][node["$ref"].rsplit("/", 1)[1]]
    return node


def request_components(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {name: s for name, s in doc["components"]["schemas"].items() if name.endswith("Request")}


def strict_serializers() -> list[type[StrictSerializer]]:
    """Every ``StrictSerializer`` subclass the API declares (its modules imported first)."""
    for module in pkgutil.iter_modules(api.rest.__path__):
        importlib.import_module(f"api.rest.{module.name}")
    found: list[type[StrictSerializer]] = []
    todo = list(StrictSerializer.__subclasses__())
    while todo:
        cls = todo.pop()
        found.append(cls)
        todo.extend(cls.__subclasses__())
    return [c for c in found if c.__module__.startswith("api.")]


def test_every_strict_request_component_refuses_additional_properties() -> None:
    doc = document()
    components = request_components(doc)
    loose = [
        name
        for name, schema in components.items()
        if schema.get("type") == "object" and schema.get("additionalProperties") is not False
    ]
    assert components and not loose, loose


def test_every_request_default_validates_against_its_own_schema() -> None:
    """A generated client sends a property's default: a default the server refuses makes the
    client unable to write (``data_subject: {minLength: 1, default: ""}``)."""
    doc = document()
    bad = []
    for name, schema in request_components(doc).items():
        for prop, sub in schema.get("properties", {}).items():
            if "default" not in sub:
                continue
            target = {**sub, "components": doc["components"]}
            target.pop("default")
            try:
                jsonschema.validate(sub["default"], target, cls=jsonschema.Draft202012Validator)
            except jsonschema.ValidationError as exc:
                bad.append(f"{name}.{prop}: {sub['default']!r}: {exc.message}")
    assert not bad, bad


def test_body_fields_do_not_coerce_and_query_fields_parse_text() -> None:
    """A JSON body's strings, numbers and booleans are taken only as themselves (``execution_id: 0``
    is no string); a query parameter is always text, so a ``*Params`` serializer uses no field that
    refuses text (``min_confidence=0.5`` was "Expected a number.")."""
    strict_body = (CleanCharField, StrictFloatField, StrictIntegerField, StrictBooleanField)
    coercing = {
        serializers.CharField: CleanCharField,
        serializers.FloatField: StrictFloatField,
        serializers.IntegerField: StrictIntegerField,
        serializers.BooleanField: StrictBooleanField,
    }
    bad = []
    for cls in strict_serializers():
        query = cls.__name__.endswith("Params")
        for name, field in cls().fields.items():
            where = f"{cls.__module__}.{cls.__name__}.{name}"
            if query:
                if isinstance(field, StrictFloatField | StrictIntegerField | StrictBooleanField):
                    bad.append(f"{where}: a body field ({type(field).__name__}) for a query parameter")
                continue
            if isinstance(field, serializers.ChoiceField) or isinstance(field, strict_body):
                continue
            for loose, strict in coercing.items():
                if isinstance(field, loose):
                    bad.append(f"{where}: {type(field).__name__} coerces; use {strict.__name__}")
    assert not bad, bad


def test_a_fields_own_pattern_is_the_one_the_document_states() -> None:
    """A field with a ``RegexValidator`` (``predicate``: snake_case) shows that pattern: a schema
    holds one ``pattern``, and one that says less (no NUL only) lets a client send what the server
    refuses."""
    components = request_components(document())
    bad, seen = [], 0
    for cls in strict_serializers():
        component = components.get(cls.__name__.removesuffix("Serializer") + "Request")
        if component is None:
            continue
        for name, field in cls().fields.items():
            for validator in field.validators:
                if isinstance(validator, RegexValidator) and name in component.get("properties", {}):
                    seen += 1
                    prop = component["properties"][name]
                    # a field that may be blank is oneOf (its pattern, or the empty string)
                    stated = prop.get("pattern") or next(
                        (b["pattern"] for b in prop.get("oneOf", []) if "pattern" in b), None
                    )
                    if stated != validator.regex.pattern:
                        bad.append(f"{cls.__name__}.{name}: {stated!r} != {validator.regex.pattern!r}")
    assert seen and not bad, bad


def sample(schema: dict[str, Any]) -> str | None:
    """A valid text form of a number, integer or boolean query parameter's schema."""
    kind = schema.get("type")
    if kind == "boolean":
        return "true"
    if kind in ("number", "integer"):
        low = schema.get("minimum", schema.get("exclusiveMinimum", 0))
        high = schema.get("maximum", low + 1)
        value = (low + high) / 2
        return str(int(value)) if kind == "integer" else str(value)
    if kind == "string" and schema.get("enum"):
        return str(schema["enum"][0])
    return None


def test_every_typed_query_parameter_takes_a_valid_value(alice: Caller) -> None:
    doc = document()
    bad = []
    for path, method, op in operations(doc):
        if method != "get" or op["operationId"] == "execution_stream":
            continue
        url = path.replace("{", "").replace("}", "")  # a literal segment for each path parameter
        for parameter in op.get("parameters", []):
            if parameter["in"] != "query" or "schema" not in parameter:  # JSON content: not typed text
                continue
            schema = parameter["schema"]
            value = sample(schema.get("items", schema) if schema.get("type") == "array" else schema)
            if value is None:
                continue
            response = alice.get(url, {parameter["name"]: value})
            errors = response.json().get("errors", {}) if response.status_code == 400 else {}
            if parameter["name"] in errors:
                bad.append(f"{method} {path}?{parameter['name']}={value}: {errors[parameter['name']]}")
    assert not bad, bad


def test_an_undeclared_method_is_405_whatever_the_query_string(alice: Caller) -> None:
    doc = document()
    bad = []
    for path, _method, op in operations(doc):
        if op["operationId"] == "execution_stream":
            continue
        names = [p["name"] for p in op.get("parameters", []) if p["in"] == "query"] or ["x"]
        url = path.replace("{", "").replace("}", "")
        response = alice.client.generic("TRACE", f"{url}?{names[0]}=0")
        body = response.json()
        if response.status_code != 405 or set(body) != {"detail", "code", "errors"}:
            bad.append(f"TRACE {url}?{names[0]}=0: {response.status_code} {body}")
    assert not bad, bad


def test_a_cursor_that_names_no_page_is_a_declared_404(alice: Caller) -> None:
    doc = document()
    bad = []
    for path, method, op in operations(doc):
        if not any(p["name"] == "cursor" and p["in"] == "query" for p in op.get("parameters", [])):
            continue
        if "404" not in op["responses"]:
            bad.append(f"{method} {path}: 404 not declared")
        if "{" in path:
            continue
        response = alice.get(path, {"cursor": "0"})
        if response.status_code != 404 or "cursor" not in response.json()["errors"]:
            bad.append(f"{method} {path}?cursor=0: {response.status_code} {response.json()}")
    assert not bad, bad


def component(doc: dict[str, Any], name: str) -> dict[str, Any]:
    return doc["components"]["schemas"][name]


def validates(doc: dict[str, Any], schema: dict[str, Any], value: Any) -> bool:
    return jsonschema.Draft202012Validator({**schema, "components": doc["components"]}).is_valid(value)


def query_schema(doc: dict[str, Any], path: str, method: str, name: str) -> dict[str, Any]:
    return next(p["schema"] for p in doc["paths"][path][method]["parameters"] if p["name"] == name)


def request_schema(doc: dict[str, Any], path: str, method: str) -> dict[str, Any]:
    return doc["paths"][path][method]["requestBody"]["content"]["application/json"]["schema"]


def test_limits_said_in_prose_are_in_the_schema() -> None:
    doc = document()
    label = "x" * 201
    for method in ("get", "delete"):
        namespace = query_schema(doc, "/api/v1/store/items", method, "namespace")
        assert not validates(doc, namespace, f"a.{label}"), namespace
        assert validates(doc, namespace, "memories.user-42"), namespace
    put = component(doc, "StorePutInputRequest")
    assert put["properties"]["namespace"]["items"].get("maxLength") == 200
    assert not validates(doc, put["properties"]["ttl"], 0), put["properties"]["ttl"]
    assert not validates(doc, request_schema(doc, "/api/v1/facts", "post"), [])
    event = {"session_id": "s", "kind": "message", "occurred_at": "2026-01-01T00:00:00Z"}
    assert not validates(doc, component(doc, "EventInputRequest"), event)
    assert validates(doc, component(doc, "EventInputRequest"), {**event, "content": "hi"})
    zero = {"similarity": 0, "recency": 0, "importance": 0}
    assert not validates(doc, component(doc, "WeightsRequest"), zero)
    checkpoint = request_schema(doc, "/api/v1/sessions/{session_id}/checkpoints", "post")
    assert not validates(doc, checkpoint, {"step_index": 3, "idempotency_key": "k"})
    tool = component(doc, "ToolInputRequest")
    assert not validates(doc, tool, {"name": "send_email", "input_schema": {}, "output_schema": {}})
    assert not validates(
        doc, component(doc, "SkillProposalRequest"), {"name": "a", "title": "t", "steps": []}
    )


def test_the_server_accepts_the_edges_the_schema_allows(alice: Caller) -> None:
    duration = {"version": 1, "success": True, "duration_ms": 5.0}
    response = alice.post("/api/v1/skills/nothing/runs", duration)
    assert "duration_ms" not in response.json().get("errors", {}), response.json()
    assert StrictIntegerField().run_validation(5.0) == 5
    with pytest.raises(serializers.ValidationError):
        StrictIntegerField().run_validation(5.5)
    search = {"namespace_prefix": ["m"], "query": "food", "limit": 10, "offset": 99_999}
    response = alice.post("/api/v1/store/search", search)
    assert response.status_code in (200, 503), response.json()
    if response.status_code == 200:
        assert response.json() == {"count": 0, "results": []}


def test_the_server_refuses_what_the_schema_refuses(alice: Caller) -> None:
    body = {"session_id": "s1", "query": "Where?", "budget": 512, "execution_id": 0}
    response = alice.post("/api/v1/context", body)
    assert response.status_code == 400 and "execution_id" in response.json()["errors"], response.json()
    doc = document()
    fact = {"subject": "Alice", "predicate": "lives_in", "object": {"entity": "Lisbon", "id": None}}
    assert validates(doc, component(doc, "FactInputRequest"), fact)
    response = alice.post("/api/v1/facts", fact)
    assert response.status_code == 201, response.json()


def test_a_checkpoint_namespace_is_what_its_pattern_says(alice: Caller) -> None:
    """``checkpoint_ns`` takes any text without control characters, as its pattern says: a
    zero-width space is text (the schema allows it), an escape character is not."""
    doc = document()
    schema = component(doc, "CheckpointInputRequest")
    base = {"step_index": 0, "idempotency_key": "k0", "state": {}}
    zero_width = {**base, "checkpoint_ns": "a\u200bb"}
    assert validates(doc, schema, zero_width)
    response = alice.post("/api/v1/sessions/s-ns/checkpoints", zero_width)
    assert response.status_code == 201, response.json()
    escape = {**base, "idempotency_key": "k1", "checkpoint_ns": "a\x1bb"}
    assert not validates(doc, schema, escape)
    response = alice.post("/api/v1/sessions/s-ns/checkpoints", escape)
    assert response.status_code == 400 and "checkpoint_ns" in response.json()["errors"], response.json()


def test_a_hashed_payloads_number_rule_is_stated(alice: Caller) -> None:
    """An event's payload is free-form, so its description says which integers it refuses."""
    doc = document()
    assert component(doc, "EventInputRequest")["properties"]["payload"]["description"] == NUMBERS_RULE
    body = {"session_id": "s1", "kind": "observation", "content": "x", "occurred_at": "2026-01-01T00:00:00Z"}
    body["payload"] = {"n": 2**64 + 1}
    response = alice.post("/api/v1/events", body)
    assert response.status_code == 400 and "payload" in response.json()["errors"], response.json()
    response = alice.post("/api/v1/events", {**body, "payload": {"n": 10**20}})
    assert response.status_code == 201, response.json()


def test_a_trimmed_field_that_may_not_be_blank_refuses_only_whitespace(alice: Caller) -> None:
    """DRF strips a field's whitespace before its blank check: ``cursor=%0C`` is blank, and the
    document says so (``NOT_BLANK``) rather than letting a client send it."""
    doc = document()
    cursor = query_schema(doc, "/api/v1/contradictions", "get", "cursor")
    assert not validates(doc, cursor, "\x0c") and validates(doc, cursor, " a ")
    assert alice.get("/api/v1/contradictions?cursor=%0C").status_code == 400
