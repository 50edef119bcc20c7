"""The Python client is complete and agrees with the OpenAPI document the server generates: every
operation has a method (and every method an operation), its path parameters are the document's,
its other arguments are the operation's query parameters or body members (the required ones
required), and its answer's type has the members the document's response has."""

from __future__ import annotations

import inspect
import json
import typing
from typing import Any

import pytest
from django.test import Client
from engram_client import AsyncEngramClient, EngramClient
from engram_client._call import Declared, Listing, Operation, Stream
from engram_client.operations import Operations

PREFIX = "/api/v1/"
METHODS = ("get", "post", "put", "patch", "delete")


@pytest.fixture
def schema(db) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    """The OpenAPI document as the server serves it."""
    response = Client().get("/api/v1/schema", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200
    document: dict[str, Any] = json.loads(response.content)
    return document


def declared() -> dict[str, Declared[Any, Any]]:
    return {name: value for name, value in vars(Operations).items() if isinstance(value, Declared)}


def operations(schema: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    """(METHOD, path under /api/v1/) -> the operation object."""
    return {
        (method.upper(), path.removeprefix(PREFIX)): operation
        for path, item in schema["paths"].items()
        for method, operation in item.items()
        if method in METHODS
    }


def resolve(schema: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in node:
        node = schema["components"]["schemas"][node["$ref"].rsplit("/", 1)[1]]
    return node


def alternatives(schema: dict[str, Any], node: dict[str, Any]) -> list[dict[str, Any]]:
    """The object schemas ``node`` may be (one, or each of a ``oneOf``)."""
    node = resolve(schema, node)
    return [resolve(schema, option) for option in node["oneOf"]] if "oneOf" in node else [node]


def members(typed_dict: Any) -> set[str]:
    return set(typed_dict.__required_keys__ | typed_dict.__optional_keys__)


def sendable(method: Declared[Any, Any]) -> dict[str, bool]:
    """The method's arguments (a ``**options: Unpack[TypedDict]`` spelled out), each with whether
    it is required."""
    hints = typing.get_type_hints(method.function)
    arguments = {}
    for name, parameter in method.signature.parameters.items():
        if parameter.kind is inspect.Parameter.VAR_KEYWORD:
            (options,) = typing.get_args(hints[name])  # Unpack[TypedDict]
            arguments.update({key: key in options.__required_keys__ for key in members(options)})
        else:
            arguments[name] = parameter.default is inspect.Parameter.empty
    return arguments


def assert_body_type(schema: dict[str, Any], operation: dict[str, Any], body: Any, name: str) -> None:
    """``body`` (a TypedDict, or a list of one) has the members of the request's schema (one of
    its alternatives), the same ones required."""
    request = resolve(schema, operation["requestBody"]["content"]["application/json"]["schema"])
    options = [resolve(schema, option) for option in request.get("oneOf", [request])]
    if typing.get_origin(body) is list:
        (body,) = typing.get_args(body)
        options = [resolve(schema, option["items"]) for option in options if option.get("type") == "array"]
    else:
        options = [option for option in options if "properties" in option]
    shapes = [(set(option["properties"]), set(option.get("required", ()))) for option in options]
    assert (members(body), set(body.__required_keys__)) in shapes, f"{name}: the body's type"


def test_every_operation_of_the_schema_is_a_client_method(schema: dict[str, Any]) -> None:
    by_route = {(d.route.method, d.route.path): name for name, d in declared().items()}
    documented = operations(schema)
    missing = sorted(
        f"{op['operationId']} ({method} {path})"
        for (method, path), op in documented.items()
        if (method, path) not in by_route
    )
    assert not missing, f"operations without a client method: {missing}"
    unknown = sorted(
        f"{name} ({route[0]} {route[1]})" for route, name in by_route.items() if route not in documented
    )
    assert not unknown, f"client methods without an operation: {unknown}"
    with EngramClient("http://127.0.0.1:1", "k") as client:
        for name in declared():  # one declaration serves both clients
            assert callable(getattr(client, name))
            assert getattr(AsyncEngramClient, name) is getattr(EngramClient, name)


def test_every_method_sends_what_its_operation_takes(schema: dict[str, Any]) -> None:
    documented = operations(schema)
    for name, method in declared().items():
        route = method.route
        operation = documented[(route.method, route.path)]
        parameters = operation.get("parameters", [])
        path_names = {p["name"] for p in parameters if p["in"] == "path"}
        assert set(route.placeholders) == path_names, name
        arguments = {
            argument: required
            for argument, required in sendable(method).items()
            if argument not in path_names and argument not in ("idempotency_key", route.body)
        }
        if route.method in ("GET", "DELETE"):
            accepted = {p["name"]: p.get("required", False) for p in parameters if p["in"] == "query"}
            if isinstance(method, Listing):
                del accepted["cursor"]  # the pages' own links carry the cursor
        elif route.body is None:
            body = resolve(schema, operation["requestBody"]["content"]["application/json"]["schema"])
            accepted = {member: member in body.get("required", ()) for member in body["properties"]}
        else:  # the argument is the body: its TypedDict is the request's schema
            accepted = {}
            assert_body_type(schema, operation, typing.get_type_hints(method.function)[route.body], name)
        assert set(arguments) <= set(accepted), f"{name}: {set(arguments) - set(accepted)} not taken"
        for argument, required in accepted.items():
            if required:
                assert argument in arguments, f"{name} lacks the required {argument!r}"
                assert arguments[argument], f"{name}: {argument} is required"
        if isinstance(method, Listing):
            assert {"limit"} <= set(arguments), f"{name} takes no page size"


def test_every_answer_type_has_the_members_of_its_response(schema: dict[str, Any]) -> None:
    documented = operations(schema)
    for name, method in declared().items():
        operation = documented[(method.route.method, method.route.path)]
        answer = typing.get_type_hints(method.function)["return"]
        contents = [
            response["content"]["application/json"]["schema"]
            for status, response in operation["responses"].items()
            if status.startswith("2") and "application/json" in response.get("content", {})
        ]
        if isinstance(method, Stream) or answer is type(None):
            assert not contents, f"{name} declares no answer but its operation has one"
            continue
        assert isinstance(method, Operation | Listing)
        assert contents, f"{name}: its operation documents no JSON answer"
        for content in contents:
            options = alternatives(schema, content)
            shapes = [set(option["properties"]) for option in options]
            assert members(typing.get_origin(answer) or answer) in shapes, name
            if typing.get_origin(answer) is not None:  # a page: its items too
                (item,) = typing.get_args(answer)
                (option,) = options
                items = resolve(schema, option["properties"]["results"]["items"])
                assert members(item) == set(items["properties"]), f"{name}: the page's items"
