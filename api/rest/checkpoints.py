"""``/api/v1/sessions/{session_id}/checkpoints``: save and restore agent state (state hydration).

Checkpoints are per agent within a session: every endpoint here reads or writes the calling agent's
own stream in the session; other agents' checkpoints in it are neither visible nor affected.
Responses about the Redis copy carry ``Engram-Source: redis|postgres`` (restores) and
``Engram-Degraded: redis-unavailable`` when Redis could not be reached: the answer then comes from,
or was saved to, PostgreSQL alone.
"""

from __future__ import annotations

from typing import Any, TypeVar

from django.http import HttpResponse
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, extend_schema, extend_schema_serializer
from rest_framework import serializers, status
from rest_framework.response import Response

from api.exceptions import error_body
from api.fields import CleanCharField, JSONValueField, StrictIntegerField, StrictSerializer
from api.idempotency import idempotent
from api.pagination import CursorPage, PageParams, page_of
from api.views import AgentRequest, ApiView
from core.errors import NotFound
from core.redis import check_id
from memory.checkpoints import selectors, services
from memory.checkpoints.models import MAX_SCHEMA_VERSION, MAX_STEP_INDEX

R = TypeVar("R", bound=HttpResponse)

SOURCE_HEADER = "Engram-Source"
DEGRADED_HEADER = "Engram-Degraded"
NO_CHECKPOINT = "You have no checkpoint in this session (checkpoints are per agent)."


class CheckpointInputSerializer(StrictSerializer):
    step_index = StrictIntegerField(min_value=0, max_value=MAX_STEP_INDEX)
    idempotency_key = CleanCharField(max_length=services.MAX_KEY_LENGTH, trim_whitespace=False)
    state = JSONValueField(help_text="a JSON object, at most 1 MiB as UTF-8 JSON", kind="object")
    plan = JSONValueField(required=False, default=list, help_text="a JSON list of steps", kind="array")
    schema_version = StrictIntegerField(min_value=1, max_value=MAX_SCHEMA_VERSION, default=1)
    data_subject = CleanCharField(
        max_length=200,
        required=False,
        default="",
        help_text="the person this is about (erasure and legal holds target it)",
    )

    def validate_state(self, value: Any) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise serializers.ValidationError("Expected a JSON object.")
        return value

    def validate_plan(self, value: Any) -> list[Any]:
        if not isinstance(value, list):
            raise serializers.ValidationError("Expected a JSON list of steps.")
        return value


class CheckpointListParams(StrictSerializer, PageParams):
    unknown_key_message = "Unknown query parameter."


class CheckpointsPage(CursorPage):
    """In step order."""

    ordering = ("step_index",)


@extend_schema_serializer(component_name="CheckpointSummary")
class CheckpointSummarySerializer(serializers.Serializer):
    id = serializers.IntegerField()
    session_id = serializers.CharField()
    step_index = serializers.IntegerField()
    idempotency_key = serializers.CharField()
    schema_version = serializers.IntegerField()
    agent = serializers.CharField()
    created_at = serializers.DateTimeField()


@extend_schema_serializer(component_name="Checkpoint")
class CheckpointDocumentSerializer(CheckpointSummarySerializer):
    state = serializers.DictField(help_text="the agent's working state")
    plan = serializers.ListField(help_text="the active plan: a list of steps")


@extend_schema_serializer(component_name="CheckpointSaved")
class CheckpointSavedSerializer(CheckpointDocumentSerializer):
    replayed = serializers.BooleanField(
        help_text="true: this idempotency key was already used with this body"
    )


SOURCE_PARAMETER = OpenApiParameter(
    SOURCE_HEADER,
    str,
    OpenApiParameter.HEADER,
    response=True,
    enum=["redis", "postgres"],
    description="which store answered",
)
DEGRADED_PARAMETER = OpenApiParameter(
    DEGRADED_HEADER,
    str,
    OpenApiParameter.HEADER,
    response=True,
    enum=["redis-unavailable"],
    description="Redis could not be reached: PostgreSQL alone answered or stored",
)
TAGS = ["checkpoints"]
CHECKPOINT_EXAMPLE = {
    "step_index": 3,
    "idempotency_key": "run-42-step-3",
    "state": {"messages": 7, "next": "summarise"},
    "plan": [{"tool": "search", "done": True}, {"tool": "summarise", "done": False}],
}


def _mark_degraded(response: R, degraded: bool) -> R:
    if degraded:
        response[DEGRADED_HEADER] = services.DEGRADED_HEADER_VALUE
    return response


class CheckpointsView(ApiView):
    """POST saves a checkpoint (201; 200 with ``replayed: true`` for a replay); GET lists the caller's.

    Both act on the caller's own stream in the session. The listing is a page in step order, without
    state and plan; one checkpoint in full is at ``.../checkpoints/{step_index}``.
    """

    get_query_params = frozenset(CheckpointListParams().fields)
    error_statuses = {"post": (409, 413)}

    @extend_schema(
        operation_id="checkpoints_save",
        summary="Save a checkpoint",
        request=CheckpointInputSerializer,
        responses={201: CheckpointSavedSerializer, 200: CheckpointSavedSerializer},
        parameters=[DEGRADED_PARAMETER],
        examples=[OpenApiExample("After step 3", value=CHECKPOINT_EXAMPLE, request_only=True)],
        tags=TAGS,
    )
    @idempotent
    def post(self, request: AgentRequest, session_id: str) -> Response:
        check_id(session_id, field="session_id")
        serializer = CheckpointInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        result = services.checkpoint_save(
            agent=request.user,
            session_id=session_id,
            policy=request.tenant.working_memory_policy,
            **serializer.validated_data,
        )
        response = Response(
            {**result.checkpoint.document(), "replayed": result.replayed},
            status=status.HTTP_200_OK if result.replayed else status.HTTP_201_CREATED,
        )
        if result.replayed:
            response["Idempotent-Replayed"] = "true"
        return _mark_degraded(response, result.degraded)

    @extend_schema(
        operation_id="checkpoints_list",
        summary="List your checkpoints in a session",
        parameters=[CheckpointListParams],
        responses={200: page_of(CheckpointSummarySerializer, "CheckpointSummary")},
        tags=TAGS,
    )
    def get(self, request: AgentRequest, session_id: str) -> Response:
        check_id(session_id, field="session_id")
        self.query(CheckpointListParams)
        paginator = CheckpointsPage()
        page = paginator.paginate_queryset(
            selectors.checkpoint_list(agent=request.user, session_id=session_id), request, view=self
        )
        return paginator.get_paginated_response([row.summary() for row in page or []])


class CheckpointLatestView(ApiView):
    """GET the caller's latest checkpoint: Redis first, PostgreSQL on a miss or with Redis down; 404 if none."""

    @extend_schema(
        operation_id="checkpoints_latest",
        summary="Restore your latest checkpoint",
        responses={200: CheckpointDocumentSerializer},
        parameters=[SOURCE_PARAMETER, DEGRADED_PARAMETER],
        tags=TAGS,
    )
    def get(self, request: AgentRequest, session_id: str) -> HttpResponse:
        restored = services.checkpoint_latest(
            agent=request.user, session_id=session_id, policy=request.tenant.working_memory_policy
        )
        if restored.body is None:
            response: HttpResponse = Response(
                error_body(NO_CHECKPOINT, "not_found", field="session_id"),
                status=status.HTTP_404_NOT_FOUND,
            )
        else:
            # the cached document is already the response body: no parsing, no re-rendering
            response = HttpResponse(restored.body, content_type="application/json")
        response[SOURCE_HEADER] = restored.source
        return _mark_degraded(response, restored.degraded)


class CheckpointDetailView(ApiView):
    """GET one of the caller's checkpoints in the session by step index, from PostgreSQL."""

    @extend_schema(
        operation_id="checkpoints_get",
        summary="One of your checkpoints",
        responses={200: CheckpointDocumentSerializer},
        tags=TAGS,
    )
    def get(self, request: AgentRequest, session_id: str, step_index: str) -> Response:
        check_id(session_id, field="session_id")
        step = int(step_index) if step_index.isdigit() and len(step_index) <= 12 else None
        checkpoint = (
            None
            if step is None
            else selectors.checkpoint_get(agent=request.user, session_id=session_id, step_index=step)
        )
        if checkpoint is None:
            raise NotFound(
                f"You have no checkpoint at step {step_index} in this session (checkpoints are per agent).",
                field="step_index",
            )
        return Response(checkpoint.document())
