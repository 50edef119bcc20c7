"""Knowledge over HTTP: assert and retract facts, recall facts about entities, graph paths,
contradictions for critic agents.

Fact writes answer ``"projection": "pending"`` (the change is queued for the Neo4j projection) or
``"none"`` (no ``NEO4J_URI``). Graph reads say which backend answered (``backend``) and, when
PostgreSQL answered although Neo4j is configured, why: ``Engram-Degraded: graph-projection-stale``
(the projection lags behind) or ``neo4j-unavailable``.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
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
from api.views import ApiView
from core.errors import DomainError, InvalidInput, NotFound
from memory.knowledge import graph, selectors, services
from memory.knowledge.models import Contradiction, ContradictionStatus, Entity, Fact, FactStatus, LiteralType

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


def entity_body(entity: Entity) -> dict[str, Any]:
    return {"id": entity.pk, "name": entity.name, "type": entity.entity_type}


def fact_body(fact: Fact) -> dict[str, Any]:
    """A fact as JSON; ``disputed`` flags a fact that contradicts an active one (under review)."""
    obj = (
        {"entity": entity_body(fact.object_entity)}
        if fact.object_entity_id is not None
        else {"type": fact.literal_type, "value": fact.literal_value}
    )
    return {
        "id": fact.pk,
        "subject": entity_body(fact.subject),
        "predicate": fact.predicate.name,
        "object": obj,
        "confidence": fact.confidence,
        "status": fact.status,
        "disputed": fact.status == FactStatus.DISPUTED,
        "valid_from": serializers.DateTimeField().to_representation(fact.valid_from),
        "valid_to": serializers.DateTimeField().to_representation(fact.valid_to) if fact.valid_to else None,
        "recorded_at": serializers.DateTimeField().to_representation(fact.recorded_at),
        "agent": fact.agent.name,
        "session_id": fact.session_id,
        "source_event_id": fact.source_event_id,
        "assertions": getattr(fact, "assertions", None),
    }


def contradiction_body(c: Contradiction) -> dict[str, Any]:
    return {
        "id": c.pk,
        "status": c.status,
        "resolution": c.resolution or None,
        "reviewer": c.reviewer or None,
        "note": c.note,
        "created_at": serializers.DateTimeField().to_representation(c.created_at),
        "resolved_at": serializers.DateTimeField().to_representation(c.resolved_at)
        if c.resolved_at
        else None,
        "existing_fact": fact_body(c.existing_fact),
        "new_fact": fact_body(c.new_fact),
    }


class FactsView(ApiView):
    """POST one fact (object) or a batch (array, at most 500, all or nothing); ``projection`` (once
    for a batch) says whether the Neo4j projection of the change is ``pending`` or ``none``."""

    @idempotent
    def post(self, request: Request) -> Response:
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
            data = serializer.validated_data
            parsed.append(
                services.FactData(
                    subject=data["subject"],
                    subject_type=data["subject_type"],
                    predicate=data["predicate"],
                    object=data["object"],
                    confidence=data["confidence"],
                    valid_from=data.get("valid_from"),
                    session_id=data["session_id"],
                    source_event_id=data.get("source_event_id"),
                )
            )
        results = []
        with transaction.atomic():
            for index, fact_data in enumerate(parsed):
                try:
                    result = services.fact_assert(agent=request.user, data=fact_data)
                except DomainError as exc:
                    if not single and exc.field:
                        exc.field = f"facts[{index}].{exc.field}"
                    raise
                results.append(result)
        facts = {f.pk: f for f in selectors.fact_list().filter(pk__in=[r.fact.pk for r in results])}
        body = [
            {
                "outcome": r.outcome,
                "contradiction_id": r.contradiction.pk if r.contradiction else None,
                "fact": fact_body(facts.get(r.fact.pk, r.fact)),
            }
            for r in results
        ]
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

    def get(self, request: Request, name: str) -> Response:
        params = EntityFactsParams(data=request.query_params.dict())
        params.is_valid(raise_exception=True)
        p = params.validated_data
        if "\x00" in name or len(name) > services.MAX_NAME_CHARS:
            raise InvalidInput(
                f"An entity name has at most {services.MAX_NAME_CHARS} characters, no NUL.", field="name"
            )
        entity = selectors.entity_by_name(name)
        if entity is None:
            raise NotFound(f"No entity named {name!r}.", field="name")
        facts = selectors.fact_list(
            entity=entity, as_of=p.get("as_of"), agent_name=p.get("agent"), last_sessions=p.get("sessions")
        )
        body: dict[str, Any] = {"entity": entity_body(entity), "facts": [fact_body(f) for f in facts]}
        if p["depth"] > 1:
            backend = self.graph_reader()
            hood = backend.neighbourhood(entity.pk, p["depth"])
            names = dict(Entity.objects.filter(pk__in=hood.distances).values_list("pk", "name"))
            edge_facts = selectors.fact_list().filter(pk__in=hood.facts)
            body["graph"] = {
                "backend": backend.name,
                "depth": p["depth"],
                "entities": sorted(
                    ({"id": k, "name": names.get(k), "distance": d} for k, d in hood.distances.items()),
                    key=lambda e: (e["distance"], e["id"]),
                ),
                "facts": [fact_body(f) for f in edge_facts],
            }
        return Response(body)


class PathParams(StrictSerializer):
    unknown_key_message = "Unknown query parameter."
    source = CleanCharField(max_length=300, help_text="entity name")
    target = CleanCharField(max_length=300, help_text="entity name")
    max_depth = serializers.IntegerField(
        required=False, min_value=1, max_value=graph.MAX_PATH_DEPTH, default=6
    )


class GraphPathView(GraphReadView):
    """``GET /api/v1/graph/path?source=A&target=B``: a shortest chain of facts between two entities."""

    get_query_params = frozenset(PathParams().fields)

    def get(self, request: Request) -> Response:
        params = PathParams(data=request.query_params.dict())
        params.is_valid(raise_exception=True)
        p = params.validated_data
        ends = []
        for field in ("source", "target"):
            entity = selectors.entity_by_name(p[field])
            if entity is None:
                raise NotFound(f"No entity named {p[field]!r}.", field=field)
            ends.append(entity)
        backend = self.graph_reader()
        path = backend.shortest_path(ends[0].pk, ends[1].pk, p["max_depth"])
        if path is None:  # from a backend that is up to date: a real "no path"
            raise NotFound(
                f"No path within {p['max_depth']} hops.", field="target", extra={"backend": backend.name}
            )
        entities = {e.pk: e for e in Entity.objects.filter(pk__in=path.entities)}
        facts = {f.pk: f for f in selectors.fact_list().filter(pk__in=path.facts)}
        return Response(
            {
                "backend": backend.name,
                "hops": path.hops,
                "entities": [entity_body(entities[i]) for i in path.entities],
                "facts": [fact_body(facts[i]) for i in path.facts if i in facts],
            }
        )


class ContradictionParams(StrictSerializer):
    unknown_key_message = "Unknown query parameter."
    status = serializers.ChoiceField(choices=ContradictionStatus.choices, required=False)


class ContradictionsView(ApiView):
    """``GET /api/v1/contradictions?status=open``: what a critic agent checks before deciding."""

    get_query_params = frozenset(ContradictionParams().fields)

    def get(self, request: Request) -> Response:
        params = ContradictionParams(data=request.query_params.dict())
        params.is_valid(raise_exception=True)
        items = selectors.contradiction_list(status=params.validated_data.get("status"))
        return Response({"count": len(items), "results": [contradiction_body(c) for c in items]})


class RetractInput(StrictSerializer):
    reason = CleanCharField(required=False, max_length=2000, default="")


class FactRetractView(ApiView):
    """``POST /api/v1/facts/{id}/retract``: withdraw a live fact (logged as a decision)."""

    @idempotent
    def post(self, request: Request, fact_id: int) -> Response:
        if not isinstance(request.data, dict):
            raise InvalidInput("Expected a JSON object.", field="body")
        serializer = RetractInput(data=request.data)
        serializer.is_valid(raise_exception=True)
        fact = services.fact_retract(
            agent=request.user, fact_id=fact_id, reason=serializer.validated_data["reason"]
        )
        fact = Fact.objects.select_related("subject", "predicate", "object_entity", "agent").get(pk=fact.pk)
        return Response({**fact_body(fact), "projection": services.projection_state()})
