"""Knowledge over HTTP: assert and retract facts, recall facts about entities, graph paths,
contradictions for critic agents.

Fact writes answer ``"projection": "pending"`` (the change is queued for the Neo4j projection) or
``"none"`` (no ``NEO4J_URI``). Graph reads say which backend answered (``backend``) and, when
PostgreSQL answered although Neo4j is configured, why: ``Engram-Degraded: graph-projection-stale``
(the projection lags behind) or ``neo4j-unavailable``.
"""

from __future__ import annotations

import base64
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from django.core.validators import RegexValidator
from drf_spectacular.utils import (
    OpenApiExample,
    OpenApiParameter,
    extend_schema,
    extend_schema_field,
    extend_schema_serializer,
)
from jsonschema import Draft202012Validator
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.utils.urls import replace_query_param

from agents.subjects import subject_unbound
from api.fields import (
    AwareDateTimeField,
    CleanCharField,
    NullIfBlankCharField,
    StrictFloatField,
    StrictIntegerField,
    StrictQueryInteger,
    StrictSerializer,
    subject_field,
    subject_filter_field,
)
from api.idempotency import idempotent
from api.pagination import CursorPage, PageParams, cursor_not_found, page_of
from api.rest.checkpoints import DEGRADED_HEADER
from api.schema import NOT_BLANK, one_or_many
from api.views import AgentRequest, ApiView
from core.errors import InvalidInput
from memory.knowledge import graph, selectors, services
from memory.knowledge.models import (
    PREDICATE_PATTERN,
    Contradiction,
    ContradictionStatus,
    Fact,
    FactStatus,
)

MAX_FACT_BATCH = 500
OBJECT_KINDS = services.OBJECT_KINDS


@extend_schema_serializer(component_name="FactObject")
class FactObjectDocSerializer(serializers.Serializer):
    """A fact's object: an entity ``{"entity": "Acme", "type"?: "company"}`` (a response adds the
    entity's ``id``, which may be sent back) or exactly one literal: ``{"string": "..."}``,
    ``{"number": 41}``, ``{"date": "2026-01-31"}``, ``{"boolean": true}``."""

    entity = serializers.CharField(required=False, max_length=300)
    type = serializers.CharField(required=False, allow_null=True, max_length=64)
    id = serializers.IntegerField(
        required=False, help_text="the stored entity's (an entity object of a response)"
    )
    string = serializers.CharField(required=False)
    number = serializers.FloatField(required=False)
    date = serializers.DateField(required=False)
    boolean = serializers.BooleanField(required=False)


def _literal(kind: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "required": [kind], "additionalProperties": False, "properties": {kind: schema}}


# what ``services.FactObject.from_wire`` reads: an entity, or exactly one literal
FACT_OBJECT_SCHEMA: dict[str, Any] = {
    "oneOf": [
        {
            "type": "object",
            "required": ["entity"],
            "additionalProperties": False,
            "properties": {
                "entity": {"type": "string", "maxLength": 300, "pattern": NOT_BLANK},
                "type": {"type": ["string", "null"], "maxLength": 64},
                "id": {"type": ["integer", "null"], "description": "as a response gives it: the entity's"},
            },
        },
        _literal(
            "string",
            {
                "type": "string",
                "minLength": 1,
                "maxLength": services.data.MAX_LITERAL_CHARS,
                "pattern": "^[^\\u0000]*$",
            },
        ),
        _literal("number", {"type": "number"}),
        _literal("date", {"type": "string", "format": "date"}),
        _literal("boolean", {"type": "boolean"}),
    ],
    "description": FactObjectDocSerializer.__doc__,
}


_FACT_OBJECT = Draft202012Validator(FACT_OBJECT_SCHEMA, format_checker=Draft202012Validator.FORMAT_CHECKER)


@extend_schema_field(FACT_OBJECT_SCHEMA)
class FactObjectField(serializers.Field):
    """``{"entity": "Acme", "type"?: "company", "id"?: 7}`` or one literal:
    ``{"string"|"number"|"date"|"boolean": v}``."""

    def to_internal_value(self, data: Any) -> services.FactObject:
        if not _FACT_OBJECT.is_valid(data):  # the shape the document declares, exactly
            raise serializers.ValidationError(
                f"Give exactly one of {', '.join(OBJECT_KINDS)} (and 'type' or 'id' only with 'entity'), "
                "each of its JSON type."
            )
        try:
            return services.FactObject.from_wire(data)
        except InvalidInput as exc:
            raise serializers.ValidationError(exc.message) from None

    def to_representation(self, value: Any) -> Any:  # pragma: no cover - input only
        return value


class FactInputSerializer(StrictSerializer):
    subject = CleanCharField(max_length=300)
    subject_type = CleanCharField(max_length=64, required=False, default="", allow_null=True)
    predicate = CleanCharField(
        max_length=64, validators=[RegexValidator(PREDICATE_PATTERN, "Predicates are snake_case.")]
    )
    object = FactObjectField()
    confidence = StrictFloatField(min_value=0.0, max_value=1.0, default=1.0)
    valid_from = AwareDateTimeField(required=False)
    session_id = CleanCharField(max_length=200, required=False, default="", allow_null=True)
    source_event_id = StrictIntegerField(required=False, min_value=1, allow_null=True)
    data_subject = subject_field(allow_null=True)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        # null and absent are the same for optional values (docs/guides/agents/rest.md, Conventions)
        for name in ("subject_type", "session_id", "data_subject"):
            attrs[name] = attrs.get(name) or ""
        return attrs


class EntityOutputSerializer(serializers.Serializer):
    id = serializers.IntegerField(source="pk")
    name = serializers.CharField()
    type = NullIfBlankCharField(source="entity_type", help_text="null if untyped")


@extend_schema_serializer(component_name="FactObjectOut")
class FactObjectOutputSerializer(serializers.Serializer):
    """A fact's object in the form it is sent: ``{"entity": "Acme", "type": null, "id": 7}`` (with
    the entity's id) or exactly one literal: ``{"number": 41}``, ``{"string": "..."}``,
    ``{"date": "2026-01-31"}``, ``{"boolean": true}``."""

    entity = serializers.CharField(required=False)
    type = serializers.CharField(required=False, allow_null=True)
    id = serializers.IntegerField(required=False)
    string = serializers.CharField(required=False)
    number = serializers.FloatField(required=False)
    date = serializers.DateField(required=False)
    boolean = serializers.BooleanField(required=False)

    def to_representation(self, fact: Fact) -> dict[str, Any]:
        if fact.object_entity is not None:
            entity = fact.object_entity
            return {"entity": entity.name, "type": entity.entity_type or None, "id": entity.pk}
        return {fact.literal_type: fact.literal_value}


class FactOutputSerializer(serializers.Serializer):
    """A fact as JSON, its subject and object in the form they are sent (``subject`` a name with
    ``subject_type``; ``object`` as ``FactObjectOut``); ``disputed`` flags a fact that contradicts an
    active one (under review); ``assertions`` counts how often it was asserted."""

    id = serializers.IntegerField(source="pk")
    subject = serializers.CharField(source="subject.name")
    subject_type = NullIfBlankCharField(source="subject.entity_type")
    subject_id = serializers.IntegerField()
    predicate = serializers.CharField(source="predicate.name")
    object = FactObjectOutputSerializer(source="*")
    confidence = serializers.FloatField()
    status = serializers.ChoiceField(choices=FactStatus.choices)
    disputed = serializers.SerializerMethodField()
    valid_from = serializers.DateTimeField()
    valid_to = serializers.DateTimeField(allow_null=True)
    recorded_at = serializers.DateTimeField()
    agent = serializers.CharField(source="agent.name")
    session_id = NullIfBlankCharField()
    data_subject = NullIfBlankCharField()
    source_event_id = serializers.IntegerField(allow_null=True)
    assertions = serializers.IntegerField(help_text="how many times it was asserted (provenance rows)")

    def get_disputed(self, fact: Fact) -> bool:
        return fact.status == FactStatus.DISPUTED


class ContradictionOutputSerializer(serializers.Serializer):
    id = serializers.IntegerField(source="pk")
    status = serializers.ChoiceField(choices=ContradictionStatus.choices)
    resolution = NullIfBlankCharField()
    reviewer = NullIfBlankCharField(help_text="the person who decided; null while open")
    note = NullIfBlankCharField()
    created_at = serializers.DateTimeField()
    resolved_at = serializers.DateTimeField(allow_null=True)
    existing_fact = FactOutputSerializer()
    new_fact = FactOutputSerializer()

    def to_representation(self, contradiction: Contradiction) -> dict[str, Any]:
        # the facts' assertion counts, annotated on the contradiction by selectors.contradiction_list
        for name in ("existing", "new"):
            count = getattr(contradiction, f"{name}_assertions", None)
            if count is not None:
                getattr(contradiction, f"{name}_fact").assertions = count
        return super().to_representation(contradiction)


class AssertOutputSerializer(serializers.Serializer):
    outcome = serializers.CharField()
    contradiction_id = serializers.SerializerMethodField()
    fact = FactOutputSerializer()

    def get_contradiction_id(self, result: services.AssertResult) -> int | None:
        return result.contradiction.pk if result.contradiction else None


class EntityDistanceSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField(allow_null=True)
    distance = serializers.IntegerField()


class GraphSliceSerializer(serializers.Serializer):
    backend = serializers.CharField()
    depth = serializers.IntegerField()
    entities = EntityDistanceSerializer(many=True)
    facts = FactOutputSerializer(many=True)
    limit = serializers.IntegerField(help_text="the most entities a page holds besides the root")
    fanout = serializers.IntegerField(help_text="the most facts the walk follows from one entity per hop")
    truncated = serializers.BooleanField(help_text="the caps left entities out that no page returns")
    next = serializers.SerializerMethodField(
        help_text="the next page of the neighbourhood (null on the last)"
    )

    @extend_schema_field(serializers.URLField(allow_null=True))
    def get_next(self, neighbourhood: selectors.GraphSlice) -> str | None:
        # the view knows the request's URL; the page only its cursor
        link: str | None = self.context.get("graph_next")
        return link


class EntityRecallSerializer(serializers.Serializer):
    entity = EntityOutputSerializer()
    facts = FactOutputSerializer(many=True, help_text="one page of the direct facts (valid_from, id order)")
    facts_limit = serializers.IntegerField(help_text="the most direct facts a page holds")
    facts_next = serializers.SerializerMethodField(
        help_text="the next page of the direct facts (null on the last)"
    )
    graph = GraphSliceSerializer(
        allow_null=True, help_text="the neighbourhood for depth 2-3; null at depth 1"
    )

    @extend_schema_field(serializers.URLField(allow_null=True))
    def get_facts_next(self, recall: selectors.EntityRecall) -> str | None:
        link: str | None = self.context.get("facts_next")
        return link


class PathOutputSerializer(serializers.Serializer):
    backend = serializers.CharField()
    hops = serializers.IntegerField()
    entities = EntityOutputSerializer(many=True)
    facts = FactOutputSerializer(many=True)


@extend_schema_serializer(component_name="FactAsserted")
class FactAssertedSerializer(AssertOutputSerializer):
    projection = serializers.ChoiceField(
        choices=["pending", "none"], help_text="pending: queued for the Neo4j projection; none: no Neo4j"
    )


@extend_schema_serializer(component_name="FactBatch")
class FactBatchOutputSerializer(serializers.Serializer):
    count = serializers.IntegerField()
    projection = serializers.ChoiceField(choices=["pending", "none"])
    results = AssertOutputSerializer(many=True)


FACT_EXAMPLE = {"subject": "Alice", "predicate": "lives_in", "object": {"entity": "Lisbon", "type": "city"}}


class FactsView(ApiView):
    """POST one fact (object) or a batch (array, at most 500, all or nothing); ``projection`` (once
    for a batch) says whether the Neo4j projection of the change is ``pending`` or ``none``. 201 when
    a fact was created (a new or a disputed one), 200 when every fact was already known (reinforced)."""

    error_statuses = (404, 409, 413)

    @extend_schema(
        operation_id="facts_assert",
        summary="Assert facts",
        request=one_or_many(FactInputSerializer, "FactInput", max_items=MAX_FACT_BATCH),
        responses={
            201: one_or_many(FactAssertedSerializer, "FactWritten", batch=FactBatchOutputSerializer),
            200: one_or_many(FactAssertedSerializer, "FactReinforced", batch=FactBatchOutputSerializer),
        },
        examples=[OpenApiExample("Where Alice lives", value=FACT_EXAMPLE, request_only=True)],
        tags=["knowledge"],
    )
    @idempotent
    def post(self, request: AgentRequest) -> Response:
        single = isinstance(request.data, dict)
        items = [request.data] if single else request.data
        if not isinstance(items, list) or not 1 <= len(items) <= MAX_FACT_BATCH:
            raise serializers.ValidationError(
                {"facts": [f"Send a fact object or an array of 1 to {MAX_FACT_BATCH}."]}
            )
        parsed = []
        for index, item in enumerate(items):
            serializer = FactInputSerializer(data=item)
            if not serializer.is_valid():
                prefix = "" if single else f"facts[{index}]."
                raise serializers.ValidationError({f"{prefix}{k}": v for k, v in serializer.errors.items()})
            parsed.append(services.FactData(**serializer.validated_data))
        results = services.facts_assert(agent=request.user, facts=parsed, batch=not single)
        stored = selectors.facts_by_id(r.fact.pk for r in results)
        results = [replace(r, fact=stored.get(r.fact.pk, r.fact)) for r in results]
        body = AssertOutputSerializer(results, many=True).data
        projection = services.projection_state()
        created = any(r.outcome != "reinforced" for r in results)
        return Response(
            {**body[0], "projection": projection}
            if single
            else {"count": len(body), "projection": projection, "results": body},
            status=status.HTTP_201_CREATED if created else status.HTTP_200_OK,
        )


class EntityFactsParams(StrictSerializer):
    unknown_key_message = "Unknown query parameter."
    as_of = AwareDateTimeField(required=False, help_text="what was held valid then (valid time)")
    depth = StrictQueryInteger(required=False, min_value=1, max_value=graph.MAX_DEPTH, default=1)
    agent = CleanCharField(required=False, max_length=100)
    sessions = StrictQueryInteger(
        required=False, min_value=1, max_value=1000, help_text="only facts asserted in the last N sessions"
    )
    limit = StrictQueryInteger(
        required=False,
        min_value=1,
        max_value=graph.MAX_LIMIT,
        default=graph.DEFAULT_LIMIT,
        help_text="depth 2-3: the most neighbourhood entities per page",
    )
    cursor = CleanCharField(required=False, max_length=40, help_text="from the graph's `next` link")
    facts_limit = StrictQueryInteger(
        required=False,
        min_value=1,
        max_value=selectors.MAX_FACTS_LIMIT,
        default=selectors.FACTS_LIMIT,
        help_text="the most direct facts per page",
    )
    facts_cursor = CleanCharField(required=False, max_length=80, help_text="from the `facts_next` link")
    data_subject = subject_filter_field()

    def validate_cursor(self, value: str) -> int:
        return neighbourhood_cursor_decode(value)

    def validate_facts_cursor(self, value: str) -> selectors.FactsCursor:
        return facts_cursor_decode(value)


CURSOR_PREFIX = "n1:"


def neighbourhood_cursor_encode(after: int) -> str:
    """The opaque cursor of a neighbourhood page: the direct neighbour it resumes after."""
    return base64.urlsafe_b64encode(f"{CURSOR_PREFIX}{after}".encode()).decode().rstrip("=")


def neighbourhood_cursor_decode(value: str) -> int:
    """The id ``neighbourhood_cursor_encode`` put in; a made-up cursor is a 404 (``cursor_not_found``)."""
    try:
        text = base64.urlsafe_b64decode(value + "=" * (-len(value) % 4)).decode()
    except (ValueError, UnicodeDecodeError):
        text = ""
    tail = text[len(CURSOR_PREFIX) :] if text.startswith(CURSOR_PREFIX) else ""
    if not tail.isdigit() or len(tail) > 18 or neighbourhood_cursor_encode(int(tail)) != value:
        raise cursor_not_found("Invalid cursor: use the graph's next link as given.")
    return int(tail)


FACTS_CURSOR_PREFIX = "f1:"


def facts_cursor_encode(after: selectors.FactsCursor) -> str:
    """The opaque cursor of a page of direct facts: the last fact's ``valid_from`` (microseconds
    since the epoch, UTC) and id."""
    micros = (after.valid_from - EPOCH) // timedelta(microseconds=1)
    text = f"{FACTS_CURSOR_PREFIX}{micros}:{after.id}"
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def facts_cursor_decode(value: str) -> selectors.FactsCursor:
    """The position ``facts_cursor_encode`` put in; a made-up cursor is a 404 (``cursor_not_found``)."""
    try:
        text = base64.urlsafe_b64decode(value + "=" * (-len(value) % 4)).decode()
    except (ValueError, UnicodeDecodeError):
        text = ""
    micros, _, fact_id = text[len(FACTS_CURSOR_PREFIX) :].partition(":")
    ok = text.startswith(FACTS_CURSOR_PREFIX) and micros.lstrip("-").isdigit() and fact_id.isdigit()
    if ok and len(micros) <= 18 and len(fact_id) <= 18:
        try:
            after = selectors.FactsCursor(EPOCH + timedelta(microseconds=int(micros)), int(fact_id))
        except OverflowError:
            pass
        else:
            if facts_cursor_encode(after) == value:
                return after
    raise cursor_not_found("Invalid cursor: use the facts_next link as given.", field="facts_cursor")


EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class GraphReadView(ApiView):
    """A view that may read the graph: its responses (a 404 too) carry ``Engram-Degraded`` when
    PostgreSQL answered in place of a configured Neo4j."""

    reader: graph.GraphReader | None = None

    def graph_reader(self) -> graph.GraphReader:
        """The request's graph reader (made on first use)."""
        if self.reader is None:
            self.reader = graph.get_graph()
        return self.reader

    def finalize_response(self, request: Request, response: Response, *args: Any, **kwargs: Any) -> Response:
        response = super().finalize_response(request, response, *args, **kwargs)
        if self.reader is not None and self.reader.degraded:
            response[DEGRADED_HEADER] = self.reader.degraded
        return response


GRAPH_HEADERS = [
    OpenApiParameter(
        DEGRADED_HEADER,
        str,
        OpenApiParameter.HEADER,
        response=True,
        description="graph-projection-stale or neo4j-unavailable when PostgreSQL answered for a configured Neo4j",
        enum=["graph-projection-stale", "neo4j-unavailable"],
    )
]


class EntityFactsView(GraphReadView):
    """Facts about an entity (subject or object); ``depth`` 2-3 adds its graph neighbourhood."""

    get_query_params = frozenset(EntityFactsParams().fields)

    @extend_schema(
        operation_id="entity_facts",
        summary="What is known about an entity",
        parameters=[EntityFactsParams, *GRAPH_HEADERS],
        responses={200: EntityRecallSerializer},
        tags=["knowledge"],
    )
    def get(self, request: AgentRequest, name: str) -> Response:
        p = self.query(EntityFactsParams)
        if "\x00" in name or len(name) > services.MAX_NAME_CHARS:
            raise InvalidInput(
                f"An entity name has at most {services.MAX_NAME_CHARS} characters, no NUL.", field="name"
            )
        recall = selectors.entity_recall(
            name=name,
            reader=self.graph_reader(),
            agent=request.user,
            data_subject=p.get("data_subject"),
            as_of=p.get("as_of"),
            agent_name=p.get("agent"),
            last_sessions=p.get("sessions"),
            depth=p["depth"],
            limit=p["limit"],
            after=p.get("cursor"),
            facts_limit=p["facts_limit"],
            facts_after=p.get("facts_cursor"),
        )
        url = request.build_absolute_uri()
        after = recall.graph.next_after if recall.graph is not None else None
        link = (
            None if after is None else replace_query_param(url, "cursor", neighbourhood_cursor_encode(after))
        )
        facts_link = (
            None
            if recall.facts_next is None
            else replace_query_param(url, "facts_cursor", facts_cursor_encode(recall.facts_next))
        )
        context = {"graph_next": link, "facts_next": facts_link}
        return Response(EntityRecallSerializer(recall, context=context).data)


class PathParams(StrictSerializer):
    unknown_key_message = "Unknown query parameter."
    # a field named like Field.source: the serializer metaclass moves declared fields off the class
    source = CleanCharField(max_length=300, help_text="entity name")  # type: ignore[assignment]
    target = CleanCharField(max_length=300, help_text="entity name")
    max_depth = StrictQueryInteger(required=False, min_value=1, max_value=graph.MAX_PATH_DEPTH, default=6)


class GraphPathView(GraphReadView):
    """``GET /api/v1/graph/path?source=A&target=B``: a shortest chain of facts between two entities."""

    get_query_params = frozenset(PathParams().fields)
    error_statuses = (404,)  # an unknown entity, or no path within max_depth

    @extend_schema(
        operation_id="graph_path",
        summary="A shortest path between two entities",
        parameters=[PathParams, *GRAPH_HEADERS],
        responses={200: PathOutputSerializer},
        tags=["knowledge"],
    )
    def get(self, request: AgentRequest) -> Response:
        p = self.query(PathParams)
        subject_unbound(request.user, what="a graph path")
        found = selectors.graph_path(
            source=p["source"], target=p["target"], max_depth=p["max_depth"], reader=self.graph_reader()
        )
        return Response(PathOutputSerializer(found).data)


class ContradictionParams(StrictSerializer, PageParams):
    unknown_key_message = "Unknown query parameter."
    status = serializers.ChoiceField(choices=ContradictionStatus.choices, required=False)


class ContradictionsPage(CursorPage):
    """Oldest first: the review order."""

    ordering = ("created_at", "id")


class ContradictionsView(ApiView):
    """``GET /api/v1/contradictions?status=open``: what a critic agent checks before deciding."""

    get_query_params = frozenset(ContradictionParams().fields)

    @extend_schema(
        operation_id="contradictions_list",
        summary="List contradictions",
        parameters=[ContradictionParams],
        responses={200: page_of(ContradictionOutputSerializer, "Contradiction")},
        tags=["knowledge"],
    )
    def get(self, request: AgentRequest) -> Response:
        p = self.query(ContradictionParams)
        subject_unbound(request.user, what="the list of contradictions")
        items = selectors.contradiction_list(status=p.get("status"))
        paginator = ContradictionsPage()
        page = paginator.paginate_queryset(items, request, view=self)
        return paginator.get_paginated_response(ContradictionOutputSerializer(page, many=True).data)


class RetractInput(StrictSerializer):
    reason = CleanCharField(required=False, max_length=2000, default="")
    # where the decision is logged when the fact was asserted without a session
    session_id = CleanCharField(required=False, max_length=200)


@extend_schema_serializer(component_name="FactRetracted")
class FactRetractedSerializer(FactOutputSerializer):
    projection = serializers.ChoiceField(choices=["pending", "none"])


class FactRetractView(ApiView):
    """``POST /api/v1/facts/{id}/retract``: withdraw a live fact (logged as a decision): its author
    may, or a key with the ``curate`` scope."""

    error_statuses = (409,)

    @extend_schema(
        operation_id="facts_retract",
        summary="Retract a fact",
        request=RetractInput,
        responses={200: FactRetractedSerializer},
        tags=["knowledge"],
    )
    @idempotent
    def post(self, request: AgentRequest, fact_id: str) -> Response:
        if not isinstance(request.data, dict):
            raise InvalidInput("Expected a JSON object.", field="body")
        serializer = RetractInput(data=request.data)
        serializer.is_valid(raise_exception=True)
        fact = services.fact_retract(
            agent=request.user,
            fact_id=fact_id,
            reason=serializer.validated_data["reason"],
            may_curate=request.auth.has_scope("curate"),
            session_id=serializer.validated_data.get("session_id"),
        )
        fact = selectors.facts_by_id([fact.pk])[fact.pk]
        return Response({**FactOutputSerializer(fact).data, "projection": services.projection_state()})
