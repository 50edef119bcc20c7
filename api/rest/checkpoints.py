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
from rest_framework import serializers, status
from rest_framework.response import Response

from api.exceptions import error_body
from api.fields import CleanCharField, JSONValueField, StrictIntegerField, StrictSerializer
from api.idempotency import idempotent
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
    state = JSONValueField(help_text="a JSON object, at most 1 MiB as UTF-8 JSON")
    plan = JSONValueField(required=False, default=list, help_text="a JSON list of steps")
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


class CheckpointListParams(StrictSerializer):
    unknown_key_message = "Unknown query parameter."
    after_step = serializers.IntegerField(required=False, min_value=-1, max_value=MAX_STEP_INDEX)
    limit = serializers.IntegerField(required=False, min_value=1, max_value=500, default=100)


def _mark_degraded(response: R, degraded: bool) -> R:
    if degraded:
        response[DEGRADED_HEADER] = services.DEGRADED_HEADER_VALUE
    return response


class CheckpointsView(ApiView):
    """POST saves a checkpoint (201; 200 with ``replayed: true`` for a replay); GET lists the caller's.

    Both act on the caller's own stream in the session. The listing is in step order, without state and plan (``limit`` ≤ 500, then ``after_step`` from
    ``next_after_step``); one checkpoint in full is at ``.../checkpoints/{step_index}``.
    """

    get_query_params = frozenset(CheckpointListParams().fields)

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

    def get(self, request: AgentRequest, session_id: str) -> Response:
        check_id(session_id, field="session_id")
        params = CheckpointListParams(data=request.query_params.dict())
        params.is_valid(raise_exception=True)
        after, limit = params.validated_data.get("after_step", -1), params.validated_data["limit"]
        rows = list(
            selectors.checkpoint_list(agent=request.user, session_id=session_id, after_step=after)[
                : limit + 1
            ]
        )
        more = len(rows) > limit
        rows = rows[:limit]
        items = [row.summary() for row in rows]
        return Response(
            {
                "session_id": session_id,
                "count": len(items),
                "checkpoints": items,
                "next_after_step": rows[-1].step_index if more else None,
            }
        )


class CheckpointLatestView(ApiView):
    """GET the caller's latest checkpoint: Redis first, PostgreSQL on a miss or with Redis down; 404 if none."""

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

    def get(self, request: AgentRequest, session_id: str, step_index: int) -> Response:
        check_id(session_id, field="session_id")
        checkpoint = selectors.checkpoint_get(
            agent=request.user, session_id=session_id, step_index=step_index
        )
        if checkpoint is None:
            raise NotFound(
                f"You have no checkpoint at step {step_index} in this session (checkpoints are per agent).",
                field="step_index",
            )
        return Response(checkpoint.document())
