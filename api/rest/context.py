"""``/api/v1/context``: the context for an agent's current step, assembled across the layers within a
token budget (see ``memory.context.services``)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiExample, extend_schema, extend_schema_serializer
from rest_framework import serializers
from rest_framework.response import Response

from api.fields import CleanCharField, CleanRegexField, StrictFloatField, StrictIntegerField, StrictSerializer
from api.idempotency import idempotent_read
from api.views import AgentRequest, ApiView
from memory.context import services
from memory.context.services import LAYERS, Context

ID_PATTERN = r"^[A-Za-z0-9._-]{1,200}$"


def layer_weight(layer: str) -> StrictFloatField:
    return StrictFloatField(
        min_value=0.0,
        max_value=1.0,
        required=False,
        help_text=f"default {services.DEFAULT_WEIGHTS[layer]}; 0 leaves the layer out",  # type: ignore[index]
    )


@extend_schema_serializer(component_name="ContextWeights")
class ContextWeightsSerializer(StrictSerializer):
    """Layer weights in [0, 1]: an item's value is its layer's weight times its relevance."""

    unknown_key_message = "Unknown layer; use working, window, episodes, semantic, facts or procedures."
    working = layer_weight("working")
    window = layer_weight("window")
    episodes = layer_weight("episodes")
    semantic = layer_weight("semantic")
    facts = layer_weight("facts")
    procedures = layer_weight("procedures")


class ContextInputSerializer(StrictSerializer):
    session_id = CleanRegexField(ID_PATTERN, help_text="the session whose turns and episodes count")
    execution_id = CleanRegexField(
        ID_PATTERN, required=False, allow_null=True, help_text="the execution whose working memory counts"
    )
    query = CleanCharField(max_length=4000, help_text="what the current step needs, in words")
    budget = StrictIntegerField(
        min_value=services.MIN_BUDGET, max_value=services.MAX_BUDGET, help_text="tokens the context may use"
    )
    weights = ContextWeightsSerializer(required=False)
    data_subject = CleanCharField(
        required=False,
        max_length=200,
        help_text="assemble for this end user: episodes, memories and facts about them or no one "
        "(a key bound to another one is refused, 403)",
    )


class SourceSerializer(serializers.Serializer):
    layer = serializers.ChoiceField(
        choices=["scratchpad", "blackboard", "window", "episodic", "semantic", "knowledge", "procedural"]
    )
    id = serializers.CharField(
        help_text="the item's id in its layer: key, <agent>:<field>, event id, memory id, fact id, skill@version"
    )


class ContextItemSerializer(serializers.Serializer):
    text = serializers.CharField(trim_whitespace=False)
    tokens = serializers.IntegerField(help_text="tokens of its line in the context")
    relevance = serializers.FloatField(help_text="in [0, 1], within its layer")
    value = serializers.FloatField(help_text="layer weight * relevance")
    sources = SourceSerializer(
        many=True, help_text="every copy's source: duplicates across layers are one item"
    )


class ContextSectionSerializer(serializers.Serializer):
    layer = serializers.ChoiceField(choices=list(LAYERS))
    title = serializers.CharField()
    tokens = serializers.IntegerField()
    items = ContextItemSerializer(many=True)


class ContextOutputSerializer(serializers.Serializer):
    session_id = serializers.CharField()
    execution_id = serializers.CharField(allow_null=True)
    query = serializers.CharField()
    budget = serializers.IntegerField()
    tokenizer = serializers.CharField(help_text="the tokenizer that counted (the tenant's choice)")
    tokens_used = serializers.IntegerField(help_text="tokens of `text`; never above `budget`")
    sections = ContextSectionSerializer(
        many=True, help_text="most valuable at the start and the end, least in the middle"
    )
    text = serializers.CharField(trim_whitespace=False, help_text="the sections as one Markdown text")
    history_turns = serializers.IntegerField(help_text="M: the session's events")
    turn_tokens_mean = serializers.FloatField(help_text="Δt: mean tokens per turn")
    full_history_tokens = serializers.IntegerField(help_text="M * Δt: sending the whole history now")
    cumulative_full_history_tokens = serializers.IntegerField(
        help_text="T_total = M(M+1)/2 * Δt: resending the whole history on every turn"
    )
    saved_tokens = serializers.IntegerField(help_text="full_history_tokens - tokens_used (at least 0)")
    candidates = serializers.IntegerField(help_text="items the layers offered")
    duplicates_merged = serializers.IntegerField()
    dropped = serializers.IntegerField(help_text="items left out by the budget")
    weights = serializers.DictField(child=serializers.FloatField(), help_text="the layer weights used")


def context_body(context: Context) -> dict[str, Any]:
    """The API's JSON of an assembled context (also what the MCP tool returns)."""
    return dict(ContextOutputSerializer(context).data)


class ContextView(ApiView):
    """Assemble the context of the current step; a read (``read`` scope), though a POST."""

    required_scope = "read"
    error_statuses = (409, 503)

    @extend_schema(
        operation_id="context_build",
        summary="Assemble a context within a token budget",
        request=ContextInputSerializer,
        responses={200: ContextOutputSerializer},
        examples=[
            OpenApiExample(
                "A step",
                value={"session_id": "s1", "query": "Where does Alice work?", "budget": 512},
                request_only=True,
            )
        ],
        tags=["context"],
    )
    @idempotent_read
    def post(self, request: AgentRequest) -> Response:
        serializer = ContextInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        context = services.context_build(
            agent=request.user,
            tenant=request.tenant,
            session_id=data["session_id"],
            execution_id=data.get("execution_id"),
            query=data["query"],
            budget=data["budget"],
            weights=dict(data.get("weights", {})),
            data_subject=data.get("data_subject"),
        )
        return Response(context_body(context))
