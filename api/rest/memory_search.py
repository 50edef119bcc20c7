"""``POST /api/v1/memories/search``: hybrid recall of semantic memories."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import serializers
from rest_framework.response import Response

from api.fields import (
    AwareDateTimeField,
    CleanCharField,
    StrictBooleanField,
    StrictIntegerField,
    StrictSerializer,
)
from api.idempotency import idempotent_read
from api.rest.memories import MemoryOutputSerializer, memories_out, unit_float
from api.views import AgentRequest, ApiView
from memory.semantic import selectors
from memory.semantic.models import AGENT_MEMORY_TYPES, MemoryScope
from memory.semantic.services import recall


class DateRangeSerializer(StrictSerializer):
    unknown_key_message = "Unknown operator; use gt, gte, lt or lte."
    gt = AwareDateTimeField(required=False)
    gte = AwareDateTimeField(required=False)
    lt = AwareDateTimeField(required=False)
    lte = AwareDateTimeField(required=False)


class UnitRangeSerializer(StrictSerializer):
    unknown_key_message = "Unknown operator; use gt, gte, lt or lte."
    gt = unit_float(required=False)
    gte = unit_float(required=False)
    lt = unit_float(required=False)
    lte = unit_float(required=False)


class FiltersSerializer(StrictSerializer):
    unknown_key_message = "Unknown filter."
    agent = CleanCharField(required=False, max_length=100)
    scope = serializers.ChoiceField(choices=MemoryScope.choices, required=False)
    memory_type = serializers.ChoiceField(choices=AGENT_MEMORY_TYPES, required=False)
    session_id = CleanCharField(required=False, max_length=200)
    tags_any = serializers.ListField(child=CleanCharField(max_length=64), required=False, max_length=50)
    tags_all = serializers.ListField(child=CleanCharField(max_length=64), required=False, max_length=50)
    min_confidence = unit_float(required=False)
    created_at = DateRangeSerializer(required=False)
    importance = UnitRangeSerializer(required=False)
    include_archived = StrictBooleanField(
        required=False, default=False, help_text="also memories the forgetting curve archived"
    )
    include_superseded = StrictBooleanField(
        required=False, default=False, help_text="also memories an update superseded (history)"
    )
    as_of = AwareDateTimeField(
        required=False, help_text="the memories current then: created by then and not superseded by then"
    )


class MMRSerializer(StrictSerializer):
    # "lambda" is a keyword in Python, so the field is declared by name below
    pass


MMRSerializer._declared_fields["lambda"] = unit_float(help_text="1 = pure relevance, 0 = pure diversity")


class WeightsSerializer(StrictSerializer):
    """Score weights in [0, 1]; an absent one is the tenant's. At least one weight, as given or
    defaulted, must be above 0 (else a 400 naming ``weights``); the document can say it only of
    the weights given."""

    schema_rules = {
        "not": {
            "required": ["similarity", "recency", "importance"],
            "properties": {"similarity": {"const": 0}, "recency": {"const": 0}, "importance": {"const": 0}},
        },
        "description": "At least one weight, as given or the tenant's default, must be above 0.",
    }
    similarity = unit_float(required=False)
    recency = unit_float(required=False)
    importance = unit_float(required=False)


class SearchInputSerializer(StrictSerializer):
    query = CleanCharField(max_length=4000)
    k = StrictIntegerField(min_value=1, max_value=100, default=10)
    filters = FiltersSerializer(required=False)
    mmr = MMRSerializer(required=False)
    weights = WeightsSerializer(required=False)


class ScoreComponentsSerializer(serializers.Serializer):
    relevance = serializers.FloatField()
    similarity = serializers.FloatField()
    text_relevance = serializers.FloatField()
    recency = serializers.FloatField()
    importance = serializers.FloatField()


class SearchHitSerializer(serializers.Serializer):
    memory = MemoryOutputSerializer()
    score = serializers.FloatField(help_text="in [0, 1]: the weighted mean of the components")
    components = ScoreComponentsSerializer()


class SearchOutputSerializer(serializers.Serializer):
    query = serializers.CharField()
    k = serializers.IntegerField()
    count = serializers.IntegerField()
    results = SearchHitSerializer(many=True)


class MemorySearchView(ApiView):
    """Hybrid recall; a read, so it needs only the ``read`` scope."""

    required_scope = "read"
    error_statuses = (409, 503)

    @extend_schema(
        operation_id="memories_search",
        summary="Recall memories",
        request=SearchInputSerializer,
        responses={200: SearchOutputSerializer},
        examples=[
            OpenApiExample("A question", value={"query": "Where does Alice live?", "k": 5}, request_only=True)
        ],
        tags=["semantic"],
    )
    @idempotent_read
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
            include_archived=f.get("include_archived", False),
            include_superseded=f.get("include_superseded", False),
            as_of=f.get("as_of"),
        )
        hits = recall.memory_search(
            agent=request.user,
            query=data["query"],
            k=data["k"],
            filters=filters,
            policy=request.tenant.retrieval_policy,
            weights=dict(data.get("weights", {})),
            mmr_lambda=data["mmr"]["lambda"] if "mmr" in data else None,
        )
        memories = memories_out([hit.memory for hit in hits])
        results = [
            {
                "memory": memory,
                "score": round(hit.score, 6),
                "components": {
                    "relevance": round(hit.relevance, 6),
                    "similarity": round(hit.similarity, 6),
                    "text_relevance": round(hit.text_relevance, 6),
                    "recency": round(hit.recency, 6),
                    "importance": round(hit.importance, 6),
                },
            }
            for hit, memory in zip(hits, memories, strict=True)
        ]
        # rendered piecewise above (the memories' audience names looked up once): SearchOutputSerializer
        # is the schema of this body
        return Response({"query": data["query"], "k": data["k"], "count": len(results), "results": results})
