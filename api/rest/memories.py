"""``/api/v1/memories``: store, recall and forget semantic memories."""

from __future__ import annotations

import uuid
from typing import Any

from django.conf import settings
from rest_framework import serializers, status
from rest_framework.response import Response

from api.fields import (
    AwareDateTimeField,
    CleanCharField,
    JSONObjectField,
    StrictFloatField,
    StrictIntegerField,
    StrictSerializer,
)
from api.idempotency import idempotent
from api.views import AgentRequest, ApiView
from memory.semantic import selectors, services
from memory.semantic.models import MemoryScope, MemoryType, SemanticMemory

MAX_CONTENT_CHARS = settings.ENGRAM["MAX_CONTENT_CHARS"]


def unit_float(**kwargs: Any) -> StrictFloatField:
    return StrictFloatField(min_value=0.0, max_value=1.0, **kwargs)


class MemoryInputSerializer(StrictSerializer):
    content = CleanCharField(max_length=MAX_CONTENT_CHARS, trim_whitespace=False)
    memory_type = serializers.ChoiceField(choices=MemoryType.choices, default=MemoryType.FACT)
    scope = serializers.ChoiceField(choices=MemoryScope.choices, default=MemoryScope.PRIVATE)
    session_id = CleanCharField(max_length=200, required=False, allow_null=True)
    tags = serializers.ListField(child=CleanCharField(max_length=64), max_length=50, default=list)
    importance = unit_float(default=0.5)
    confidence = unit_float(default=1.0)
    metadata = JSONObjectField(max_bytes=64 * 1024, default=dict)
    embedding = serializers.ListField(
        child=StrictFloatField(),
        required=False,
        max_length=4096,
        help_text="optional precomputed vector from the configured model",
    )
    embedding_model = CleanCharField(max_length=200, required=False)
    data_subject = CleanCharField(
        max_length=200,
        required=False,
        default="",
        help_text="the person this is about (erasure and legal holds target it)",
    )

    def validate_content(self, value: str) -> str:
        if not value.strip():
            raise serializers.ValidationError("This field may not be blank.")
        return value


class MemoryOutputSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    content = serializers.CharField(trim_whitespace=False)
    memory_type = serializers.CharField()
    scope = serializers.CharField()
    agent = serializers.CharField(source="agent.name")
    session_id = serializers.CharField(allow_null=True)
    data_subject = serializers.CharField()
    tags = serializers.ListField(child=serializers.CharField())
    importance = serializers.FloatField()
    confidence = serializers.FloatField()
    metadata = serializers.JSONField()
    embedding_model = serializers.CharField()
    created_at = serializers.DateTimeField()
    last_accessed_at = serializers.DateTimeField()
    access_count = serializers.IntegerField()


class RangeSerializer(StrictSerializer):
    unknown_key_message = "Unknown operator; use gt, gte, lt or lte."

    def __init__(self, field_factory: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        for op in selectors.RANGE_OPERATORS:
            self.fields[op] = field_factory(required=False)


class FiltersSerializer(StrictSerializer):
    unknown_key_message = "Unknown filter."
    agent = CleanCharField(required=False, max_length=100)
    scope = serializers.ChoiceField(choices=MemoryScope.choices, required=False)
    memory_type = serializers.ChoiceField(choices=MemoryType.choices, required=False)
    session_id = CleanCharField(required=False, max_length=200)
    tags_any = serializers.ListField(child=CleanCharField(max_length=64), required=False, max_length=50)
    tags_all = serializers.ListField(child=CleanCharField(max_length=64), required=False, max_length=50)
    min_confidence = unit_float(required=False)
    created_at = RangeSerializer(AwareDateTimeField, required=False)
    importance = RangeSerializer(unit_float, required=False)


class MMRSerializer(StrictSerializer):
    # "lambda" is a keyword in Python, so the field is declared by name below
    pass


MMRSerializer._declared_fields["lambda"] = unit_float(help_text="1 = pure relevance, 0 = pure diversity")


class WeightsSerializer(StrictSerializer):
    similarity = unit_float(required=False)
    recency = unit_float(required=False)
    importance = unit_float(required=False)


class SearchInputSerializer(StrictSerializer):
    query = CleanCharField(max_length=4000)
    k = StrictIntegerField(min_value=1, max_value=100, default=10)
    filters = FiltersSerializer(required=False)
    mmr = MMRSerializer(required=False)
    weights = WeightsSerializer(required=False)


def _memory_body(memory: SemanticMemory, **extra: Any) -> dict[str, Any]:
    return {**MemoryOutputSerializer(memory).data, **extra}


class MemoriesView(ApiView):
    """POST a memory: 201 when stored, 200 with ``deduplicated: true`` when it matched one."""

    @idempotent
    def post(self, request: AgentRequest) -> Response:
        serializer = MemoryInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        result = services.memory_create(
            agent=request.user,
            data=services.MemoryData(**serializer.validated_data),
            policy=request.tenant.retrieval_policy,
        )
        extra: dict[str, Any] = {"deduplicated": result.deduplicated}
        if result.deduplicated:
            extra.update(duplicate_of=result.outcome, similarity=round(result.similarity or 0.0, 6))
        return Response(
            _memory_body(result.memory, **extra),
            status=status.HTTP_200_OK if result.deduplicated else status.HTTP_201_CREATED,
        )


class MemorySearchView(ApiView):
    """Hybrid recall; a read, so it needs only the ``read`` scope."""

    required_scope = "read"

    @idempotent
    def post(self, request: AgentRequest) -> Response:
        serializer = SearchInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        f = data.get("filters", {})
        filters = selectors.MemoryFilters(
            agent_name=f.get("agent"),
            scope=f.get("scope"),
            memory_type=f.get("memory_type"),
            session_id=f.get("session_id"),
            tags_any=f.get("tags_any", ()),
            tags_all=f.get("tags_all", ()),
            min_confidence=f.get("min_confidence"),
            created_at=dict(f.get("created_at", {})),
            importance=dict(f.get("importance", {})),
        )
        hits = services.memory_search(
            agent=request.user,
            query=data["query"],
            k=data["k"],
            filters=filters,
            policy=request.tenant.retrieval_policy,
            weights=dict(data.get("weights", {})),
            mmr_lambda=data["mmr"]["lambda"] if "mmr" in data else None,
        )
        results = [
            {
                "memory": MemoryOutputSerializer(hit.memory).data,
                "score": round(hit.score, 6),
                "components": {
                    "relevance": round(hit.relevance, 6),
                    "similarity": round(hit.similarity, 6),
                    "text_relevance": round(hit.text_relevance, 6),
                    "recency": round(hit.recency, 6),
                    "importance": round(hit.importance, 6),
                },
            }
            for hit in hits
        ]
        return Response({"query": data["query"], "k": data["k"], "count": len(results), "results": results})


class ForgetParams(StrictSerializer):
    # where the decision is logged when the memory was stored without a session
    session_id = CleanCharField(required=False, max_length=200)


class MemoryDetailView(ApiView):
    """GET a memory the agent may see; DELETE forgets it (kept for audit, logged as a decision in
    the memory's session, or ``?session_id=`` for a memory stored without one)."""

    delete_query_params = frozenset({"session_id"})

    def get(self, request: AgentRequest, memory_id: uuid.UUID) -> Response:
        memory = selectors.memory_get(agent=request.user, memory_id=memory_id)
        return Response(_memory_body(memory))

    def delete(self, request: AgentRequest, memory_id: uuid.UUID) -> Response:
        params = ForgetParams(data=request.query_params.dict())
        params.is_valid(raise_exception=True)
        memory, event = services.memory_forget(
            agent=request.user, memory_id=memory_id, session_id=params.validated_data.get("session_id")
        )
        return Response(
            {
                "id": str(memory.pk),
                "forgotten_at": memory.forgotten_at,
                "event_id": event.pk,
                "event_seq": event.seq,
            }
        )
