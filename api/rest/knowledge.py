"""Knowledge over HTTP: assert and retract facts, recall facts about entities, graph paths,
contradictions for critic agents.

Fact writes answer ``"projection": "pending"`` (the change is queued for the Neo4j projection) or
``"none"`` (no ``NEO4J_URI``). Graph reads say which backend answered (``backend``) and, when
PostgreSQL answered although Neo4j is configured, why: ``Engram-Degraded: graph-projection-stale``
(the projection lags behind) or ``neo4j-unavailable``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from api.fields import (
    AwareDateTimeField,
    CleanCharField,
    StrictFloatField,
    StrictIntegerField,
    StrictSerializer,
)
from api.idempotency import idempotent
from api.rest.checkpoints import DEGRADED_HEADER
from api.views import AgentRequest, ApiView
from core.errors import InvalidInput
from memory.knowledge import graph, selectors, services
from memory.knowledge.models import Contradiction, ContradictionStatus, Fact, FactStatus, LiteralType

MAX_FACT_BATCH = 500
OBJECT_KINDS = ("entity", *LiteralType.values)


class FactObjectField(serializers.Field):
    """``{"entity": "Acme", "type"?: "company"}`` or one literal: ``{"string"|"number"|"date"|"boolean": v}``."""

    def to_internal_value(self, data: Any) -> services.FactObject:
        if not isinstance(data, dict):
            raise serializers.ValidationError(
                'Expected an object such as {"entity": "Acme"} or {"number": 3}.'
            )
        kinds = [k for k in data if k in OBJECT_KINDS]
        unknown = [k for k in data if k not in (*OBJECT_KINDS, "type")]
        if unknown or len(kinds) != 1 or ("type" in data and kinds != ["entity"]):
            raise serializers.ValidationError(
                f"Give exactly one of {', '.join(OBJECT_KINDS)} (and 'type' only with 'entity')."
            )
        kind = kinds[0]
        if kind == "entity":
            name, entity_type = data["entity"], data.get("type", "")
            if not isinstance(name, str) or not isinstance(entity_type, str):
                raise serializers.ValidationError("'entity' and 'type' are strings.")
            return services.FactObject(entity=name, entity_type=entity_type)
        return services.FactObject(literal_type=kind, value=data[kind])

    def to_representation(self, value: Any) -> Any:  # pragma: no cover - input only
        return value


class FactInputSerializer(StrictSerializer):
    subject = CleanCharField(max_length=300)
    subject_type = CleanCharField(max_length=64, required=False, default="")
    predicate = CleanCharField(max_length=64)
    object = FactObjectField()
    confidence = StrictFloatField(min_value=0.0, max_value=1.0, default=1.0)
    valid_from = AwareDateTimeField(required=False)
    session_id = CleanCharField(max_length=200, required=False, default="")
    source_event_id = StrictIntegerField(required=False, min_value=1)
    data_subject = CleanCharField(
        max_length=200,
        required=False,
        default="",
        help_text="the person this is about (erasure and legal holds target it)",
    )


class EntityOutputSerializer(serializers.Serializer):
    id = serializers.IntegerField(source="pk")
    name = serializers.CharField()
    type = serializers.CharField(source="entity_type")


class FactOutputSerializer(serializers.Serializer):
    """A fact as JSON; ``disputed`` flags a fact that contradicts an active one (under review);
    ``assertions`` (the number of provenance rows) is null where it was not counted."""

    id = serializers.IntegerField(source="pk")
    subject = EntityOutputSerializer()
    predicate = serializers.CharField(source="predicate.name")
    object = serializers.SerializerMethodField()
    confidence = serializers.FloatField()
    status = serializers.CharField()
    disputed = serializers.SerializerMethodField()
    valid_from = serializers.DateTimeField()
    valid_to = serializers.DateTimeField(allow_null=True)
    recorded_at = serializers.DateTimeField()
    agent = serializers.CharField(source="agent.name")
    session_id = serializers.CharField()
    data_subject = serializers.CharField()
    source_event_id = serializers.IntegerField(allow_null=True)
    assertions = serializers.SerializerMethodField()

    def get_object(self, fact: Fact) -> dict[str, Any]:
        if fact.object_entity_id is not None:
            return {"entity": EntityOutputSerializer(fact.object_entity).data}
        return {"type": fact.literal_type, "value": fact.literal_value}

    def get_disputed(self, fact: Fact) -> bool:
        return fact.status == FactStatus.DISPUTED

    def get_assertions(self, fact: Fact) -> int | None:
        return getattr(fact, "assertions", None)


class ContradictionOutputSerializer(serializers.Serializer):
    id = serializers.IntegerField(source="pk")
    status = serializers.CharField()
    resolution = serializers.SerializerMethodField()
    reviewer = serializers.SerializerMethodField()
    note = serializers.CharField()
    created_at = serializers.DateTimeField()
    resolved_at = serializers.DateTimeField(allow_null=True)
    existing_fact = FactOutputSerializer()
    new_fact = FactOutputSerializer()

    def get_resolution(self, contradiction: Contradiction) -> str | None:
        return contradiction.resolution or None

    def get_reviewer(self, contradiction: Contradiction) -> str | None:
        return contradiction.reviewer or None


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


class EntityRecallSerializer(serializers.Serializer):
    entity = EntityOutputSerializer()
    facts = FactOutputSerializer(many=True)
    graph = GraphSliceSerializer()

    def to_representation(self, recall: selectors.EntityRecall) -> dict[str, Any]:
        body = super().to_representation(recall)
        if recall.graph is None:
            del body["graph"]  # only asked for with depth > 1
        return body


class PathOutputSerializer(serializers.Serializer):
    backend = serializers.CharField()
    hops = serializers.IntegerField()
    entities = EntityOutputSerializer(many=True)
    facts = FactOutputSerializer(many=True)


class FactsView(ApiView):
    """POST one fact (object) or a batch (array, at most 500, all or nothing); ``projection`` (once
    for a batch) says whether the Neo4j projection of the change is ``pending`` or ``none``."""

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
        return Response(
            {**body[0], "projection": projection}
            if single
            else {"count": len(body), "projection": projection, "results": body},
            status=status.HTTP_201_CREATED,
        )


class EntityFactsParams(StrictSerializer):
    unknown_key_message = "Unknown query parameter."
    as_of = AwareDateTimeField(required=False)
    depth = serializers.IntegerField(required=False, min_value=1, max_value=graph.MAX_DEPTH, default=1)
    agent = CleanCharField(required=False, max_length=100)
    sessions = serializers.IntegerField(
        required=False, min_value=1, max_value=1000, help_text="only facts asserted in the last N sessions"
    )


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


class EntityFactsView(GraphReadView):
    """Facts about an entity (subject or object); ``depth`` 2-3 adds its graph neighbourhood."""

    get_query_params = frozenset(EntityFactsParams().fields)

    def get(self, request: AgentRequest, name: str) -> Response:
        params = EntityFactsParams(data=request.query_params.dict())
        params.is_valid(raise_exception=True)
        p = params.validated_data
        if "\x00" in name or len(name) > services.MAX_NAME_CHARS:
            raise InvalidInput(
                f"An entity name has at most {services.MAX_NAME_CHARS} characters, no NUL.", field="name"
            )
        recall = selectors.entity_recall(
            name=name,
            reader=self.graph_reader(),
            as_of=p.get("as_of"),
            agent_name=p.get("agent"),
            last_sessions=p.get("sessions"),
            depth=p["depth"],
        )
        return Response(EntityRecallSerializer(recall).data)


class PathParams(StrictSerializer):
    unknown_key_message = "Unknown query parameter."
    # a field named like Field.source: the serializer metaclass moves declared fields off the class
    source = CleanCharField(max_length=300, help_text="entity name")  # type: ignore[assignment]
    target = CleanCharField(max_length=300, help_text="entity name")
    max_depth = serializers.IntegerField(
        required=False, min_value=1, max_value=graph.MAX_PATH_DEPTH, default=6
    )


class GraphPathView(GraphReadView):
    """``GET /api/v1/graph/path?source=A&target=B``: a shortest chain of facts between two entities."""

    get_query_params = frozenset(PathParams().fields)

    def get(self, request: AgentRequest) -> Response:
        params = PathParams(data=request.query_params.dict())
        params.is_valid(raise_exception=True)
        p = params.validated_data
        found = selectors.graph_path(
            source=p["source"], target=p["target"], max_depth=p["max_depth"], reader=self.graph_reader()
        )
        return Response(PathOutputSerializer(found).data)


class ContradictionParams(StrictSerializer):
    unknown_key_message = "Unknown query parameter."
    status = serializers.ChoiceField(choices=ContradictionStatus.choices, required=False)


class ContradictionsView(ApiView):
    """``GET /api/v1/contradictions?status=open``: what a critic agent checks before deciding."""

    get_query_params = frozenset(ContradictionParams().fields)

    def get(self, request: AgentRequest) -> Response:
        params = ContradictionParams(data=request.query_params.dict())
        params.is_valid(raise_exception=True)
        items = selectors.contradiction_list(status=params.validated_data.get("status"))
        return Response(
            {"count": len(items), "results": ContradictionOutputSerializer(items, many=True).data}
        )


class RetractInput(StrictSerializer):
    reason = CleanCharField(required=False, max_length=2000, default="")
    # where the decision is logged when the fact was asserted without a session
    session_id = CleanCharField(required=False, max_length=200)


class FactRetractView(ApiView):
    """``POST /api/v1/facts/{id}/retract``: withdraw a live fact (logged as a decision)."""

    @idempotent
    def post(self, request: AgentRequest, fact_id: int) -> Response:
        if not isinstance(request.data, dict):
            raise InvalidInput("Expected a JSON object.", field="body")
        serializer = RetractInput(data=request.data)
        serializer.is_valid(raise_exception=True)
        fact = services.fact_retract(
            agent=request.user,
            fact_id=fact_id,
            reason=serializer.validated_data["reason"],
            session_id=serializer.validated_data.get("session_id"),
        )
        fact = selectors.facts_by_id([fact.pk])[fact.pk]
        return Response({**FactOutputSerializer(fact).data, "projection": services.projection_state()})
