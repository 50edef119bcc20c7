"""``/api/v1/sessions/{session_id}/checkpoints``: save and restore agent state (state hydration).

Checkpoints are per agent within a session: every endpoint here reads or writes the calling agent's
own stream in the session; other agents' checkpoints in it are neither visible nor affected.
Responses about the Redis copy carry ``Engram-Source: redis|postgres`` (restores) and
``Engram-Degraded: redis-unavailable`` when Redis could not be reached: the answer then comes from,
or was saved to, PostgreSQL alone.
"""

from __future__ import annotations

import binascii
from base64 import b64decode
from collections.abc import Callable
from typing import Any, TypeVar

from django.db.models import QuerySet
from django.http import HttpResponse
from drf_spectacular.utils import (
    OpenApiExample,
    OpenApiParameter,
    extend_schema,
    extend_schema_field,
    extend_schema_serializer,
)
from rest_framework import serializers, status
from rest_framework.response import Response

from api.exceptions import error_body
from api.fields import (
    CleanCharField,
    JSONValueField,
    KeyedDictField,
    StrictIntegerField,
    StrictSerializer,
    subject_field,
)
from api.idempotency import idempotent
from api.pagination import CursorPage, page_of
from api.responses import ThenResponse
from api.rest.checkpoint_params import (
    CheckpointDeleteParams,
    CheckpointLatestParams,
    CheckpointListParams,
    CheckpointTupleParams,
    CheckpointTuplesAllParams,
    PrintableField,
)
from api.views import AgentRequest, ApiView
from core.errors import NotFound
from core.redis import check_id
from memory.checkpoints import selectors, services
from memory.checkpoints.models import (
    MAX_NAMESPACE_LENGTH,
    MAX_SCHEMA_VERSION,
    MAX_SERIALIZED_TYPE_LENGTH,
    MAX_STEP_INDEX,
    MAX_VERSION_LENGTH,
    Checkpoint,
)

R = TypeVar("R", bound=HttpResponse)


SOURCE_HEADER = "Engram-Source"
DEGRADED_HEADER = "Engram-Degraded"
NO_CHECKPOINT = "You have no checkpoint in this session (checkpoints are per agent)."


# base64 of at most MAX_STATE_BYTES bytes: 4 characters per 3 bytes
MAX_BASE64_LENGTH = 4 * ((services.MAX_STATE_BYTES + 2) // 3)


@extend_schema_field(
    {
        "type": "string",
        # the length limit is in the description only: a pattern at a 1.4 M-character boundary took
        # the fuzzer minutes to draw per operation
        "pattern": "^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$",
        "description": "bytes in standard base64 (RFC 4648 section 4, with padding), at most "
        f"{MAX_BASE64_LENGTH} characters (a larger value is a 400)",
    }
)
class Base64Field(CleanCharField):
    """Bytes sent as standard base64 (RFC 4648 section 4, with padding); strict: any other character
    is a 400."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("max_length", MAX_BASE64_LENGTH)
        kwargs.setdefault("allow_blank", True)
        kwargs.setdefault("trim_whitespace", False)
        super().__init__(**kwargs)

    def run_validation(self, data: Any = serializers.empty) -> Any:
        if data == "":  # CharField answers "" for a blank string without decoding it: no bytes
            return b""
        return super().run_validation(data)

    def to_internal_value(self, data: Any) -> bytes:  # type: ignore[override]  # decoded bytes
        text = super().to_internal_value(data)
        try:
            return b64decode(text.encode("ascii"), validate=True)
        except (UnicodeError, binascii.Error, ValueError):
            raise serializers.ValidationError("Expected standard base64 (RFC 4648).") from None


@extend_schema_serializer(component_name="SerializedValue")
class SerializedSerializer(StrictSerializer):
    """An opaque serialized value: a serializer's type tag and its bytes in base64 (LangGraph's
    ``serde.dumps_typed`` gives ``(type, bytes)``). Stored and returned as they are."""

    type = PrintableField(max_length=MAX_SERIALIZED_TYPE_LENGTH, help_text="the type tag, e.g. msgpack")
    # a field named like Serializer.data: the serializer metaclass moves declared fields off the class
    data = Base64Field(help_text="the bytes in standard base64")  # type: ignore[assignment]


class ChannelInputSerializer(StrictSerializer):
    version = PrintableField(
        max_length=MAX_VERSION_LENGTH, trim_whitespace=False, help_text="the channel's version (as text)"
    )
    value = SerializedSerializer(
        required=False,
        help_text="the channel's value at this version, sent when the version is new (LangGraph's "
        "newVersions); absent: the value stored under this version by an earlier save",
    )


def _channels_field(child: serializers.Serializer, **kwargs: Any) -> KeyedDictField:
    return KeyedDictField(
        child=child,
        key_pattern=services.PRINTABLE_PATTERN,
        key_max_length=services.MAX_CHANNEL_LENGTH,
        max_keys=services.MAX_CHANNELS,
        **kwargs,
    )


class CheckpointInputSerializer(StrictSerializer):
    step_index = StrictIntegerField(
        min_value=0,
        max_value=MAX_STEP_INDEX,
        required=False,
        default=None,
        help_text="absent: the next step of your stream in the session (its latest + 1)",
    )
    idempotency_key = PrintableField(
        max_length=services.MAX_KEY_LENGTH,
        trim_whitespace=False,
        help_text="names the checkpoint in your stream (LangGraph's checkpoint_id); a repeat is a replay",
    )
    state = JSONValueField(
        required=False,
        help_text="a JSON object, at most 1 MiB as UTF-8 JSON; required unless `serialized` holds the state",
        kind="object",
    )
    plan = JSONValueField(required=False, default=list, help_text="a JSON list of steps", kind="array")
    schema_version = StrictIntegerField(min_value=1, max_value=MAX_SCHEMA_VERSION, default=1)
    data_subject = subject_field()
    checkpoint_ns = PrintableField(
        max_length=MAX_NAMESPACE_LENGTH,
        required=False,
        default="",
        allow_blank=True,
        trim_whitespace=False,
        help_text="LangGraph's checkpoint namespace; empty: the root",
    )
    parent_key = PrintableField(
        max_length=services.MAX_KEY_LENGTH,
        required=False,
        default="",
        allow_blank=True,
        trim_whitespace=False,
        help_text="the idempotency key of the checkpoint this one follows (LangGraph's parent)",
    )
    metadata = JSONValueField(
        required=False, default=dict, kind="object", help_text="a JSON object (at most 64 KiB), filterable"
    )
    serialized = SerializedSerializer(
        required=False, default=None, allow_null=True, help_text="an opaque serialized checkpoint"
    )
    channels = _channels_field(
        ChannelInputSerializer(),
        required=False,
        default=dict,
        help_text="LangGraph's channel values by version: channel -> its version in this checkpoint, "
        "with the value for new versions only; stored once per (channel, version) of your stream, "
        f"at most {services.MAX_STATE_BYTES} bytes of values per save",
    )

    # state, or a serialized checkpoint (not null) that holds it
    schema_rules = {
        "allOf": [
            {
                "anyOf": [
                    {"required": ["state"]},
                    {"required": ["serialized"], "properties": {"serialized": {"not": {"type": "null"}}}},
                ]
            }
        ]
    }

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if "state" not in attrs:
            if attrs.get("serialized") is None:
                raise serializers.ValidationError({"state": ["This field is required."]})
            attrs["state"] = {}
        return attrs

    def validate_metadata(self, value: Any) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise serializers.ValidationError("Expected a JSON object.")
        return value

    def validate_state(self, value: Any) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise serializers.ValidationError("Expected a JSON object.")
        return value

    def validate_plan(self, value: Any) -> list[Any]:
        if not isinstance(value, list):
            raise serializers.ValidationError("Expected a JSON list of steps.")
        return value


class CheckpointsPage(CursorPage):
    """In step order."""

    ordering = ("step_index",)


class CheckpointTuplesPage(CursorPage):
    """Newest first (the stream's step order, reversed)."""

    ordering = ("-step_index",)


class CheckpointTuplesAllPage(CursorPage):
    """Newest first (the agent's save order, reversed; within a stream its step order)."""

    ordering = ("-id",)


@extend_schema_serializer(component_name="CheckpointSummary")
class CheckpointSummarySerializer(serializers.Serializer):
    id = serializers.IntegerField()
    session_id = serializers.CharField()
    step_index = serializers.IntegerField()
    idempotency_key = serializers.CharField()
    schema_version = serializers.IntegerField()
    agent = serializers.CharField()
    created_at = serializers.DateTimeField()
    checkpoint_ns = serializers.CharField(help_text="the namespace; empty: the root")
    parent_key = serializers.CharField(allow_null=True, help_text="the key of the checkpoint it follows")
    metadata = serializers.DictField(help_text="the checkpoint's metadata")


@extend_schema_serializer(component_name="SerializedValueOut")
class SerializedOutputSerializer(serializers.Serializer):
    type = serializers.CharField(help_text="the serializer's type tag")
    data = serializers.CharField(help_text="the bytes in standard base64")  # type: ignore[assignment]


@extend_schema_serializer(component_name="ChannelValue")
class ChannelOutputSerializer(serializers.Serializer):
    version = serializers.CharField()
    value = SerializedOutputSerializer(required=False, help_text="absent: no value stored at this version")


@extend_schema_serializer(component_name="Checkpoint")
class CheckpointDocumentSerializer(CheckpointSummarySerializer):
    state = serializers.DictField(help_text="the agent's working state")
    plan = serializers.ListField(help_text="the active plan: a list of steps")
    serialized = SerializedOutputSerializer(allow_null=True, help_text="the opaque serialized checkpoint")
    channels = _channels_field(
        ChannelOutputSerializer(),
        required=False,
        help_text="the channel values by version; absent for a checkpoint saved whole (inside `serialized`)",
    )


@extend_schema_serializer(component_name="PendingWrite")
class PendingWriteSerializer(serializers.Serializer):
    task_id = serializers.CharField()
    task_path = serializers.CharField(help_text="empty when none was given")
    channel = serializers.CharField()
    idx = serializers.IntegerField(help_text="the position in the task's writes; special channels: < 0")
    value = SerializedOutputSerializer()


@extend_schema_serializer(component_name="CheckpointTuple")
class CheckpointTupleSerializer(CheckpointDocumentSerializer):
    pending_writes = PendingWriteSerializer(many=True, help_text="in (task_path, task_id, idx) order")


class WriteInputSerializer(StrictSerializer):
    channel = PrintableField(max_length=services.MAX_CHANNEL_LENGTH)
    value = SerializedSerializer()


class WritesInputSerializer(StrictSerializer):
    key = PrintableField(
        max_length=services.MAX_KEY_LENGTH,
        trim_whitespace=False,
        help_text="the checkpoint's idempotency key",
    )
    checkpoint_ns = PrintableField(
        max_length=MAX_NAMESPACE_LENGTH, required=False, default="", allow_blank=True, trim_whitespace=False
    )
    task_id = PrintableField(max_length=services.MAX_TASK_ID_LENGTH, trim_whitespace=False)
    task_path = PrintableField(
        max_length=MAX_NAMESPACE_LENGTH, required=False, default="", allow_blank=True, trim_whitespace=False
    )
    writes = serializers.ListField(
        child=WriteInputSerializer(), min_length=1, max_length=services.MAX_WRITES, help_text="in task order"
    )


@extend_schema_serializer(component_name="StoredWrite")
class StoredWriteSerializer(serializers.Serializer):
    task_id = serializers.CharField()
    channel = serializers.CharField()
    idx = serializers.IntegerField()
    created = serializers.BooleanField(
        help_text="false: the task had written there already (kept, or replaced)"
    )


@extend_schema_serializer(component_name="StoredWrites")
class StoredWritesSerializer(serializers.Serializer):
    count = serializers.IntegerField()
    results = StoredWriteSerializer(many=True)


@extend_schema_serializer(component_name="CheckpointsDeleted")
class CheckpointsDeletedSerializer(serializers.Serializer):
    agent = serializers.CharField(help_text="whose stream")
    checkpoints = serializers.IntegerField(help_text="checkpoints deleted")
    writes = serializers.IntegerField(help_text="pending writes deleted")
    blobs = serializers.IntegerField(help_text="channel values (per version) deleted")
    namespaces = serializers.ListField(child=serializers.CharField())
    event_id = serializers.IntegerField(
        allow_null=True, help_text="the decision event; null: nothing to delete"
    )
    event_seq = serializers.IntegerField(allow_null=True)


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
    delete_query_params = frozenset(CheckpointDeleteParams().fields)
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
        data = dict(serializer.validated_data)
        serialized, channels = data.pop("serialized"), data.pop("channels")
        result = services.checkpoint_save(
            agent=request.user,
            session_id=session_id,
            policy=request.tenant.working_memory_policy,
            serialized=None if serialized is None else (serialized["type"], serialized["data"]),
            channel_versions={name: channel["version"] for name, channel in channels.items()},
            blobs=[
                services.Blob(name, c["version"], c["value"]["type"], c["value"]["data"])
                for name, c in channels.items()
                if "value" in c
            ],
            **data,
        )
        response = Response(
            {**result.checkpoint.document(channels=result.channels), "replayed": result.replayed},
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
        params = self.query(CheckpointListParams)
        paginator = CheckpointsPage()
        page = paginator.paginate_queryset(
            selectors.checkpoint_list(
                agent=request.user,
                session_id=session_id,
                checkpoint_ns=params.get("checkpoint_ns"),
                data_subject=params.get("data_subject"),
            ),
            request,
            view=self,
        )
        return paginator.get_paginated_response([row.summary() for row in page or []])

    @extend_schema(
        operation_id="checkpoints_delete",
        summary="Delete your checkpoints in a session (LangGraph's delete_thread)",
        parameters=[CheckpointDeleteParams],
        responses={200: CheckpointsDeletedSerializer},
        tags=TAGS,
    )
    def delete(self, request: AgentRequest, session_id: str) -> Response:
        check_id(session_id, field="session_id")
        params = self.query(CheckpointDeleteParams)
        deleted = services.checkpoints_delete(
            agent=request.user,
            session_id=session_id,
            owner_name=params.get("agent"),
            may_curate=request.auth.has_scope("curate"),
        )
        return Response(
            {
                "agent": deleted.agent,
                "checkpoints": deleted.checkpoints,
                "writes": deleted.writes,
                "blobs": deleted.blobs,
                "namespaces": deleted.namespaces,
                "event_id": None if deleted.event is None else deleted.event.pk,
                "event_seq": None if deleted.event is None else deleted.event.seq,
            }
        )


def _tuples_schema(operation_id: str, summary: str, params: type[StrictSerializer]) -> Any:
    """The document's entry of a tuple listing: its query ``params``, a page of ``CheckpointTuple``."""
    return extend_schema(
        operation_id=operation_id,
        summary=summary,
        parameters=[params],
        responses={200: page_of(CheckpointTupleSerializer, "CheckpointTuple")},
        tags=TAGS,
    )


class _TuplesView(ApiView):
    """A listing of the caller's checkpoints in full: the query's filters (``params``) passed to a
    selector, a page of ``page``, each checkpoint with its pending writes."""

    params: type[StrictSerializer]
    page: type[CursorPage]

    def tuples_page(
        self, request: AgentRequest, select: Callable[..., QuerySet[Checkpoint]], **scope: str
    ) -> Response:
        filters = self.query(self.params)
        filters.pop("cursor", None)
        filters.pop("limit", None)
        paginator = self.page()
        rows = select(agent=request.user, **scope, **filters)
        page = paginator.paginate_queryset(rows, request, view=self) or []
        # one query: the page's rows with their channels and pending writes (selectors.with_*)
        return paginator.get_paginated_response(
            [
                {**row.document(channels=selectors.channels_of(row)), "pending_writes": row.write_documents}
                for row in page
            ]
        )


class CheckpointTuplesView(_TuplesView):
    """GET the caller's checkpoints in full with their pending writes, newest first (LangGraph's
    ``list``; ``get_tuple`` is this with ``key``, or ``limit=1`` for the latest of a namespace)."""

    params, page = CheckpointTupleParams, CheckpointTuplesPage
    get_query_params = frozenset(CheckpointTupleParams().fields)

    @_tuples_schema(
        "checkpoints_tuples", "Your checkpoints in full with their pending writes, newest first", params
    )
    def get(self, request: AgentRequest, session_id: str) -> Response:
        check_id(session_id, field="session_id")
        return self.tuples_page(request, selectors.checkpoint_tuples, session_id=session_id)


class CheckpointTuplesAllView(_TuplesView):
    """GET the caller's checkpoints in every session, in full with their pending writes, newest
    first (LangGraph's ``list`` without a thread); only the caller's own streams, as in a session."""

    params, page = CheckpointTuplesAllParams, CheckpointTuplesAllPage
    get_query_params = frozenset(CheckpointTuplesAllParams().fields)

    @_tuples_schema(
        "checkpoints_tuples_all",
        "Your checkpoints in every session in full with their pending writes, newest first",
        params,
    )
    def get(self, request: AgentRequest) -> Response:
        return self.tuples_page(request, selectors.checkpoint_tuples_all)


class CheckpointWritesView(ApiView):
    """POST a task's pending writes against a checkpoint of the caller's stream (LangGraph's
    ``put_writes``; the ``idx`` rule is LangGraph's, see ``services.checkpoint_writes_put``)."""

    error_statuses = {"post": (413,)}

    @extend_schema(
        operation_id="checkpoints_writes",
        summary="Store a task's pending writes",
        request=WritesInputSerializer,
        responses={201: StoredWritesSerializer, 200: StoredWritesSerializer},
        tags=TAGS,
    )
    @idempotent
    def post(self, request: AgentRequest, session_id: str) -> Response:
        check_id(session_id, field="session_id")
        serializer = WritesInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        result = services.checkpoint_writes_put(
            agent=request.user,
            session_id=session_id,
            idempotency_key=data["key"],
            checkpoint_ns=data["checkpoint_ns"],
            task_id=data["task_id"],
            task_path=data["task_path"],
            writes=[
                services.PendingWrite(
                    channel=w["channel"], value_type=w["value"]["type"], value=w["value"]["data"]
                )
                for w in data["writes"]
            ],
        )
        return Response(
            {
                "count": len(result.writes),
                "results": [
                    {"task_id": w.task_id, "channel": w.channel, "idx": w.idx, "created": w.created}
                    for w in result.writes
                ],
            },
            status=status.HTTP_201_CREATED if result.created else status.HTTP_200_OK,
        )


class CheckpointLatestView(ApiView):
    """GET the caller's latest checkpoint (of a namespace: ``checkpoint_ns``, default the root):
    Redis first, PostgreSQL on a miss or with Redis down; 404 if none."""

    get_query_params = frozenset(CheckpointLatestParams().fields)

    @extend_schema(
        operation_id="checkpoints_latest",
        summary="Restore your latest checkpoint",
        responses={200: CheckpointDocumentSerializer},
        parameters=[CheckpointLatestParams, SOURCE_PARAMETER, DEGRADED_PARAMETER],
        tags=TAGS,
    )
    def get(self, request: AgentRequest, session_id: str) -> HttpResponse:
        params = self.query(CheckpointLatestParams)
        restored = services.checkpoint_latest(
            agent=request.user,
            session_id=session_id,
            policy=request.tenant.working_memory_policy,
            checkpoint_ns=params.get("checkpoint_ns", ""),
            defer_rewarm=True,
        )
        if restored.body is None:
            response: HttpResponse = Response(
                error_body(NO_CHECKPOINT, "not_found", field="session_id"),
                status=status.HTTP_404_NOT_FOUND,
            )
        else:
            # the cached document is already the response body: no parsing, no re-rendering; a
            # PostgreSQL answer's re-warm of the Redis copy runs once the response is sent
            response = ThenResponse(restored.body, content_type="application/json", then=restored.rewarm)
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
        return Response(checkpoint.document(channels=selectors.channels_of(checkpoint)))
