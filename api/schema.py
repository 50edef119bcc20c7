"""The OpenAPI 3.1 document of ``/api/v1/`` (drf-spectacular): what every operation may answer.

``EngramAutoSchema`` adds to every operation the error responses it can really give, all with the
one error body (``ErrorSerializer``): 400 (bad input: every view refuses unknown query parameters),
401 (no or a bad key) and 403 (a missing scope) everywhere; 404 where the path names something;
and what a view declares in ``error_statuses`` (409 conflicts, 413 sizes, 503 dependencies; a tuple,
or a dict of tuples per HTTP method).
``ApiKeyScheme`` documents the Bearer key. Servers, descriptions and tags are set in settings
(``SPECTACULAR_SETTINGS``).
"""

from __future__ import annotations

import copy
from typing import Any, Literal

from django.core.validators import RegexValidator
from drf_spectacular.extensions import OpenApiAuthenticationExtension, OpenApiSerializerFieldExtension
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import PolymorphicProxySerializer, extend_schema_serializer
from rest_framework import serializers
from rest_framework.fields import SkipField

from api.fields import StrictSerializer, WrittenTextField
from api.parameters import PATH_PARAMETERS

# a string without NUL characters (ECMA and Python regex alike)
NO_NUL = "^[^\\u0000]*$"
# the characters str.strip() removes, as a regex class (ECMA and Python alike)
WHITESPACE = "\\t\\n\\u000b\\u000c\\r\\u001c-\\u001f \\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000"
# a string without NUL characters that str.strip() leaves non-empty (a trimmed field that may not be blank)
NOT_BLANK = f"^[^\\u0000]*[^\\u0000{WHITESPACE}][^\\u0000]*$"


def _is_free_text(field: Any, schema: dict[str, Any]) -> bool:
    """A string schema that nothing else constrains to a form: no pattern, enum or format, and no
    ``RegexValidator`` on the field (drf-spectacular writes its pattern after the field's schema is
    mapped, and a schema holds one ``pattern``: the field's own says what it takes)."""
    kind = schema.get("type")
    strings = kind == "string" or (isinstance(kind, list) and "string" in kind)
    regex = any(isinstance(v, RegexValidator) for v in getattr(field, "validators", ()))
    return strings and not regex and not {"pattern", "enum", "format", "const"} & set(schema)


# query parameters that hold a page's position: a value that names no page is a 404
CURSOR_FIELDS = frozenset({"cursor", "facts_cursor"})

ERROR_DESCRIPTIONS = {
    400: "Bad input: `errors` names each field by its path (`events[1].occurred_at`).",
    401: "No API key, or a malformed, unknown or revoked one.",
    403: "The key lacks the scope this operation needs, or the caller may not act on this object.",
    404: "No such resource (or one the caller may not see), or a cursor that names no page.",
    409: "Conflict with the stored state (a stale version, a used idempotency key, a closed execution).",
    413: "A value or the body is larger than allowed.",
    503: "A dependency (Redis, the embedding model) is unavailable; retry later.",
}


@extend_schema_serializer(component_name="Error")
class ErrorSerializer(serializers.Serializer):
    """The body of every error response. Some errors add members: ``current_version`` (a stale
    blackboard version), ``backend`` (no graph path)."""

    detail = serializers.CharField(help_text="what went wrong, as a sentence")
    code = serializers.CharField(help_text="machine-readable: invalid, parse_error, not_found, conflict, ...")
    # a field named like Serializer.errors: the serializer metaclass moves declared fields off the class
    errors = serializers.DictField(  # type: ignore[assignment]
        child=serializers.ListField(child=serializers.CharField()),
        help_text="messages per field path; empty when no field is to blame",
    )


class ApiKeyScheme(OpenApiAuthenticationExtension):
    """``Authorization: Bearer egm.<tenant>.<key id>.<secret>`` (agents.authentication)."""

    target_class = "agents.authentication.ApiKeyAuthentication"
    name = "ApiKey"

    def get_security_definition(self, auto_schema: AutoSchema) -> dict[str, str]:
        return {
            "type": "http",
            "scheme": "bearer",
            "bearerFormat": "egm.<tenant>.<key id>.<secret>",
            "description": "A per-agent API key, shown once when it is created.",
        }


class EngramAutoSchema(AutoSchema):
    """drf-spectacular's schema with every operation's real error responses (module docstring)."""

    def _resolve_path_parameters(self, variables: list[str]) -> list[dict[str, Any]]:
        parameters: list[dict[str, Any]] = super()._resolve_path_parameters(variables)
        for parameter in parameters:
            if parameter["name"] in PATH_PARAMETERS:
                parameter["schema"] = dict(PATH_PARAMETERS[parameter["name"]])
        return parameters

    def _map_basic_serializer(self, serializer: Any, direction: str) -> dict[str, Any]:
        """A request component of a ``StrictSerializer`` is closed (``additionalProperties: false``:
        the serializer refuses unknown keys) and carries the serializer's cross-field rules
        (``StrictSerializer.schema_rules``: ``anyOf``, ``not``, ... merged in)."""
        schema: dict[str, Any] = super()._map_basic_serializer(serializer, direction)
        if direction == "request" and isinstance(serializer, StrictSerializer):
            schema["additionalProperties"] = False
            schema.update(copy.deepcopy(serializer.schema_rules))
        return schema

    def _map_serializer_field(self, field: Any, direction: str, bypass_extensions: bool = False) -> Any:
        """A request field's ``default`` is shown only when the field itself accepts it: a client
        generated from the document sends the default, so a default the server refuses as input
        (``""`` for a field that must not be blank, ``null`` for one that must not be null) is
        left out; the server still fills it in when the field is absent."""
        schema = super()._map_serializer_field(field, direction, bypass_extensions)
        if direction == "request" and isinstance(schema, dict) and _is_free_text(field, schema):
            # every text input refuses NUL (PostgreSQL cannot hold it); a trimmed one that may not be
            # blank also refuses only whitespace
            trimmed = (
                getattr(field, "trim_whitespace", False) or isinstance(field, WrittenTextField)
            ) and not getattr(field, "allow_blank", True)
            schema["pattern"] = NOT_BLANK if trimmed else NO_NUL
        if direction == "request" and isinstance(schema, dict) and "default" in schema:
            try:
                field.run_validation(schema["default"])
            except (serializers.ValidationError, SkipField):
                del schema["default"]
        return schema

    def _pages(self) -> bool:
        """Whether the operation takes a cursor (a cursor that names no page is a 404)."""
        return any(
            isinstance(p, type) and issubclass(p, serializers.Serializer) and CURSOR_FIELDS & set(p().fields)
            for p in self.get_override_parameters()
        )

    def _error_statuses(self) -> list[int]:
        statuses = [400]
        if self.get_auth():  # the schema and docs themselves need no key
            statuses += [401, 403]
        if (self.path_regex and "{" in self.path) or self._pages():
            statuses.append(404)
        declared = getattr(self.view, "error_statuses", ())
        if isinstance(declared, dict):  # per method: {"put": (409, 413), "get": ()}
            declared = declared.get(self.method.lower(), ())
        statuses += list(declared)
        return sorted(set(statuses))

    def _get_response_bodies(self, direction: Literal["request", "response"] = "response") -> dict[str, Any]:
        responses: dict[str, Any] = super()._get_response_bodies(direction)
        for status in self._error_statuses():
            if str(status) not in responses:
                response = self._get_response_for_code(ErrorSerializer, str(status), direction=direction)
                response["description"] = ERROR_DESCRIPTIONS[status]
                responses[str(status)] = response
        return responses


# component name of a request's one-or-batch -> the most items its array form takes
BATCH_LIMITS: dict[str, int] = {}


def one_or_many(
    item: type[serializers.Serializer],
    name: str,
    *,
    batch: type[serializers.Serializer] | None = None,
    max_items: int | None = None,
) -> PolymorphicProxySerializer:
    """``oneOf``: one ``item`` object, or the batch form (an array of ``item``, or ``batch``: the
    batch envelope ``{"count", "results"}`` a batch write answers). ``max_items``: a request's
    batch takes 1 to that many (``batch_limits`` writes it into the document)."""
    if max_items is not None:
        BATCH_LIMITS[f"{name}OneOrBatch"] = max_items
    return PolymorphicProxySerializer(
        component_name=f"{name}OneOrBatch",
        serializers=[item(), batch() if batch is not None else item(many=True)],
        resource_type_field_name=None,
        many=False,
    )


def add_stream_operation(
    result: dict[str, Any], generator: Any, request: Any, public: bool
) -> dict[str, Any]:
    """A postprocessing hook: the Server-Sent Events stream, an async Django view that
    drf-spectacular cannot see, as ``GET /api/v1/executions/{execution_id}/stream``."""
    error = {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
    result.setdefault("paths", {})["/api/v1/executions/{execution_id}/stream"] = {
        "get": {
            "operationId": "execution_stream",
            "summary": "Follow the blackboard (Server-Sent Events)",
            "description": "Every blackboard write of the execution as an event `blackboard` whose `data` is "
            "the field's JSON document (as `GET .../blackboard/{agent}/{field}` answers it) and whose `id` is "
            "`<field>@<version>`; a comment line every 15 s keeps proxies from closing the connection. The "
            "stream ends when the client disconnects.",
            "tags": ["working memory"],
            "parameters": [
                {
                    "name": "execution_id",
                    "in": "path",
                    "required": True,
                    "schema": {"type": "string", "pattern": "^[A-Za-z0-9._-]{1,200}$"},
                }
            ],
            "security": [{"ApiKey": []}],
            "responses": {
                "200": {
                    "description": "An endless `text/event-stream`.",
                    "content": {"text/event-stream": {"schema": {"type": "string"}}},
                },
                **{
                    str(code): {"description": ERROR_DESCRIPTIONS[code], "content": error}
                    for code in (400, 401, 403, 404, 503)
                },
            },
        }
    }
    return result


# Links for schemathesis' stateful phase (and for readers): where an operation's path parameter
# comes from in another operation's response.
LINKS: dict[str, dict[str, dict[str, Any]]] = {
    "memories_create": {
        "Get the memory": {"operationId": "memories_get", "parameters": {"memory_id": "$response.body#/id"}},
        "Forget the memory": {
            "operationId": "memories_forget",
            "parameters": {"memory_id": "$response.body#/id"},
        },
    },
    "facts_assert": {
        "Retract the fact": {
            "operationId": "facts_retract",
            "parameters": {"fact_id": "$response.body#/fact/id"},
        },
        "What is known about its subject": {
            "operationId": "entity_facts",
            "parameters": {"name": "$response.body#/fact/subject"},
        },
    },
    "checkpoints_save": {
        "Get the checkpoint": {
            "operationId": "checkpoints_get",
            "parameters": {
                "session_id": "$request.path.session_id",
                "step_index": "$response.body#/step_index",
            },
        },
        "Restore the latest": {
            "operationId": "checkpoints_latest",
            "parameters": {"session_id": "$request.path.session_id"},
        },
    },
    "blackboard_write": {
        "Read the field": {
            "operationId": "blackboard_field",
            "parameters": {
                "execution_id": "$request.path.execution_id",
                "agent": "$response.body#/agent",
                "field": "$request.path.field",
            },
        },
    },
    "scratchpad_write": {
        "Read the key": {
            "operationId": "scratchpad_get",
            "parameters": {"execution_id": "$request.path.execution_id", "key": "$request.path.key"},
        },
        "Delete the key": {
            "operationId": "scratchpad_delete",
            "parameters": {"execution_id": "$request.path.execution_id", "key": "$request.path.key"},
        },
    },
}


def add_links(result: dict[str, Any], generator: Any, request: Any, public: bool) -> dict[str, Any]:
    """A postprocessing hook: ``LINKS`` on the 2xx responses of the operations they start from."""
    for item in result.get("paths", {}).values():
        for operation in item.values():
            links = LINKS.get(operation.get("operationId", ""))
            if not links:
                continue
            for status, response in operation["responses"].items():
                if status.startswith("2"):
                    response["links"] = {name.replace(" ", ""): link for name, link in links.items()}
    return result


def batch_limits(result: dict[str, Any], generator: Any, request: Any, public: bool) -> dict[str, Any]:
    """A postprocessing hook: the array form of each request one-or-batch (``one_or_many``'s
    ``max_items``) takes 1 to ``BATCH_LIMITS[name]`` items."""
    schemas = result.get("components", {}).get("schemas", {})
    for name, most in BATCH_LIMITS.items():
        for variant in (name, f"{name}Request"):
            for branch in schemas.get(variant, {}).get("oneOf", []):
                if branch.get("type") == "array":
                    branch.update(minItems=1, maxItems=most)
    return result


def bodies_required(result: dict[str, Any], generator: Any, request: Any, public: bool) -> dict[str, Any]:
    """A postprocessing hook: a request body is required when its schema requires a property or
    is one of several forms (``one_or_many``); a request without one is refused as an empty
    object would be."""
    schemas = result.get("components", {}).get("schemas", {})
    for item in result.get("paths", {}).values():
        for operation in item.values():
            body = operation.get("requestBody") if isinstance(operation, dict) else None
            if not body:
                continue
            for media in body.get("content", {}).values():
                schema = media.get("schema", {})
                if "$ref" in schema:
                    schema = schemas.get(schema["$ref"].rsplit("/", 1)[1], {})
                if schema.get("required") or "oneOf" in schema or schema.get("type") == "array":
                    body["required"] = True
    return result


def json_query_parameters(
    result: dict[str, Any], generator: Any, request: Any, public: bool
) -> dict[str, Any]:
    """A postprocessing hook: a query parameter whose value is a JSON document (its schema marked
    ``x-json-query``, e.g. ``checkpoints_tuples``' ``metadata``) is declared as OpenAPI says,
    ``content: {"application/json": {"schema": ...}}``, so clients and fuzzers send JSON text."""
    for item in result.get("paths", {}).values():
        for operation in item.values():
            for parameter in operation.get("parameters", []) if isinstance(operation, dict) else []:
                schema = parameter.get("schema", {})
                if schema.pop("x-json-query", False):
                    schema.pop("minLength", None)  # the text's length, not the object's
                    parameter["content"] = {"application/json": {"schema": parameter.pop("schema")}}
    return result


def any_value_includes_null(
    result: dict[str, Any], generator: Any, request: Any, public: bool
) -> dict[str, Any]:
    """Rewrite drf-spectacular's nullable "any value" (``{"oneOf": [{}, {"type": "null"}]}``) as
    ``{}``: under ``oneOf`` a ``null`` matches both branches and so is invalid (JSON Schema
    2020-12 §10.2.1.3), while ``{}`` already admits ``null``."""

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if node.get("oneOf") == [{}, {"type": "null"}]:
                del node["oneOf"]
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(result)
    return result


# what a hashed JSON value (``JSONValueField(numbers=True)``) may hold beyond JSON: a free-form value
# has no property to bound, so the rule is said in words (and the fuzz run is told, schemathesis.toml)
NUMBERS_RULE = (
    "Any JSON; an integer must be one a double keeps exactly (every integer within ±9007199254740991, "
    "or one whose digits are a double's, like 100000000000000000000): the value is hashed as RFC 8785 "
    "JSON, whose numbers are doubles. Send other integers as strings; a value breaking this is a 400."
)


# how deep the document states the no-NUL rule of JSON values (below it, any JSON): a recursive
# component would state it at every depth, but the generated clients (openapi-typescript,
# openapi-python-client) cannot build a self-referencing union; the server refuses a NUL at any
# depth with its path (``core.canonical_json``)
JSON_NUL_RULE_DEPTH = 3


def _json_value(depth: int = JSON_NUL_RULE_DEPTH) -> dict[str, Any]:
    """Any JSON value whose strings and object keys hold no NUL (PostgreSQL's ``jsonb`` cannot store
    one), stated ``depth`` levels down; ``{}`` (any JSON) below."""
    if depth <= 0:
        return {}
    inner = _json_value(depth - 1)
    return {
        "anyOf": [
            {"type": "string", "pattern": NO_NUL},
            {"type": ["number", "boolean", "null"]},
            {"type": "array", "items": inner},
            {"type": "object", "propertyNames": {"pattern": NO_NUL}, "additionalProperties": inner},
        ]
    }


JSON_OBJECT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "propertyNames": {"pattern": NO_NUL},
    "additionalProperties": _json_value(JSON_NUL_RULE_DEPTH - 1),
}
"""A JSON object whose keys and strings hold no NUL (``_json_value``): REST's object fields and the
MCP tools' object arguments alike."""


class KeyedDictFieldExtension(OpenApiSerializerFieldExtension):
    """``api.fields.KeyedDictField`` in the document: the object of its ``child`` values, with the
    rule of its keys (``propertyNames``) and their number (``maxProperties``)."""

    target_class = "api.fields.KeyedDictField"

    def map_serializer_field(self, auto_schema: AutoSchema, direction: str) -> dict[str, Any]:
        schema: dict[str, Any] = auto_schema._map_serializer_field(
            self.target, direction, bypass_extensions=True
        )
        schema["propertyNames"] = {
            "minLength": 1,
            "maxLength": self.target.key_max_length,
            "pattern": self.target.key_pattern,
        }
        schema["maxProperties"] = self.target.max_keys
        return schema


class JSONValueFieldExtension(OpenApiSerializerFieldExtension):
    """``api.fields.JSONValueField`` in the document: its ``kind`` (object, array) or any JSON value."""

    target_class = "api.fields.JSONValueField"
    match_subclasses = True

    def map_serializer_field(self, auto_schema: AutoSchema, direction: str) -> dict[str, Any]:
        kind = getattr(self.target, "kind", None)
        value = _json_value(JSON_NUL_RULE_DEPTH - 1)
        if kind == "array":
            schema: dict[str, Any] = {"type": "array", "items": value}
        elif kind == "object":
            schema = copy.deepcopy(JSON_OBJECT_SCHEMA)
        elif kind:
            schema = {"type": kind}
        else:
            schema = _json_value()
        if getattr(self.target, "numbers", False):
            schema["description"] = NUMBERS_RULE
        return schema
