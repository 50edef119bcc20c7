"""``/api/v1/sessions/{id}/messages``: a conversation's messages in one call (appended to the
episodic log, made into memories); ``/api/v1/extractions/{id}``: the job that extracts them with a
language model."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.utils import timezone
from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response

from api.fields import (
    AwareDateTimeField,
    CleanCharField,
    JSONObjectField,
    NullIfBlankCharField,
    StrictSerializer,
    WrittenTextField,
)
from api.idempotency import idempotent
from api.rest.events import MAX_EVENT_CONTENT_CHARS, EventOutputSerializer, event_json
from api.rest.memories import write_outcome
from api.views import AgentRequest, ApiView
from core.errors import NotFound
from memory.conversations import selectors, services
from memory.conversations.models import ExtractionJob, JobStatus
from memory.episodic.models import EventRole
from memory.semantic.models import MemoryScope


class MessageInputSerializer(StrictSerializer):
    role = serializers.ChoiceField(choices=EventRole.choices)
    name = CleanCharField(
        max_length=200, required=False, default="", help_text="who spoke (default: the role)"
    )
    content = WrittenTextField(max_length=MAX_EVENT_CONTENT_CHARS)
    occurred_at = AwareDateTimeField(required=False, help_text="when it was said (default: now)")
    metadata = JSONObjectField(
        required=False,
        default=dict,
        numbers=True,
        max_bytes=64 * 1024,
    )  # kept in the message's event payload and its memory's metadata


class ConversationInputSerializer(StrictSerializer):
    messages = serializers.ListField(
        child=MessageInputSerializer(), min_length=1, max_length=settings.ENGRAM["MAX_MEMORY_BATCH"]
    )
    data_subject = CleanCharField(
        max_length=200, required=False, default="", help_text="the end user the conversation is with"
    )
    scope = serializers.ChoiceField(
        choices=[MemoryScope.PRIVATE, MemoryScope.SHARED],
        default=MemoryScope.PRIVATE,
        help_text="of the memories formed",
    )
    tags = serializers.ListField(child=CleanCharField(max_length=64), max_length=50, default=list)
    extraction = serializers.ChoiceField(
        choices=["auto", "turns", "llm"],
        default="auto",
        help_text="turns: each user and assistant message becomes a memory, now; llm: a job extracts "
        "memories and facts with the configured language model; auto: llm when one is configured",
    )


class FormedMemorySerializer(serializers.Serializer):
    message = serializers.IntegerField(help_text="the index of the message in the request")
    id = serializers.UUIDField(help_text="the memory stored or reinforced")
    outcome = serializers.ChoiceField(
        choices=["created", "deduplicated", "updated"],
        help_text="created; deduplicated (an existing memory reinforced); updated (stored, and the "
        "memory `supersedes` names is superseded by it)",
    )
    supersedes = serializers.UUIDField(allow_null=True, help_text="the memory this one replaced")


class JobOutputSerializer(serializers.Serializer):
    """An extraction job: ``prompt`` and ``answer`` are the text sent to the model and what it
    answered, ``decisions`` what was applied, one per extracted item."""

    id = serializers.UUIDField()
    status = serializers.ChoiceField(choices=JobStatus.choices)
    session_id = serializers.CharField()
    data_subject = NullIfBlankCharField(help_text="the end user, null when none")
    event_ids = serializers.ListField(child=serializers.IntegerField())
    model = serializers.CharField()
    prompt = serializers.CharField(trim_whitespace=False)
    answer = serializers.CharField(trim_whitespace=False)
    decisions = serializers.ListField(child=serializers.DictField())
    error = serializers.CharField(help_text="why it failed (empty unless failed)")
    attempts = serializers.IntegerField()
    created_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)


class MessagesAddedSerializer(serializers.Serializer):
    session_id = serializers.CharField()
    data_subject = serializers.CharField(allow_null=True)
    events = EventOutputSerializer(many=True)
    memories = FormedMemorySerializer(many=True)
    job = JobOutputSerializer(allow_null=True, help_text="the extraction job to poll (GET extractions/{id})")


MESSAGES_EXAMPLE = {
    "data_subject": "customer-4711",
    "messages": [
        {"role": "user", "name": "Dana", "content": "My return flight now leaves at 11:05 on Sunday."},
        {"role": "assistant", "content": "Noted: Sunday, 11:05."},
    ],
}


class MessagesView(ApiView):
    """POST a conversation's messages (see ``memory.conversations.services.messages_add``)."""

    error_statuses = {"post": (409, 413, 503)}

    @extend_schema(
        operation_id="messages_add",
        summary="Add a conversation's messages",
        description="Appends the messages to the session's episodic log (as `message` events, all or "
        "nothing; a message's `metadata` is kept in its event's payload) and forms memories from them. Without a language model (`turns`), each user and "
        "assistant message becomes an observation memory naming who said it and when, written as any "
        "memory is (a duplicate reinforces the memory it duplicates, a near one that restates it with a "
        "new value supersedes it); `memories` lists them. With one "
        "(`llm`), the answer carries a queued `job`: poll `GET /api/v1/extractions/{id}`.",
        request=ConversationInputSerializer,
        responses={201: MessagesAddedSerializer},
        examples=[OpenApiExample("Two turns", value=MESSAGES_EXAMPLE, request_only=True)],
        tags=["episodic"],
    )
    @idempotent
    def post(self, request: AgentRequest, session_id: str) -> Response:
        serializer = ConversationInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        attrs = serializer.validated_data
        now = timezone.now()
        added = services.messages_add(
            agent=request.user,
            session_id=session_id,
            messages=[
                services.Message(
                    role=m["role"],
                    name=m["name"],
                    content=m["content"],
                    occurred_at=m.get("occurred_at") or now,
                    metadata=m["metadata"],
                )
                for m in attrs["messages"]
            ],
            policy=request.tenant.retrieval_policy,
            data_subject=attrs["data_subject"],
            scope=attrs["scope"],
            tags=attrs["tags"],
            extraction=attrs["extraction"],
        )
        zone = timezone.get_current_timezone()
        body: dict[str, Any] = {
            "session_id": session_id,
            "data_subject": attrs["data_subject"] or None,
            "events": [event_json(e, zone) for e in added.events],
            "memories": [
                {
                    "message": i,
                    "id": str(r.memory.pk),
                    "outcome": write_outcome(r),
                    "supersedes": None if r.supersedes is None else str(r.supersedes),
                }
                for i, r in added.memories
            ],
            "job": None if added.job is None else JobOutputSerializer(added.job).data,
        }
        return Response(body, status=status.HTTP_201_CREATED)


class ExtractionView(ApiView):
    """GET an extraction job of the calling agent."""

    @extend_schema(
        operation_id="extractions_get",
        summary="An extraction job",
        responses={200: JobOutputSerializer},
        tags=["episodic"],
    )
    def get(self, request: AgentRequest, job_id: str) -> Response:
        job: ExtractionJob | None = selectors.job_get(agent=request.user, job_id=job_id)
        if job is None:
            raise NotFound("No such extraction job.", field="job_id")
        return Response(JobOutputSerializer(job).data)
