"""``/api/v1/memories``: store, list, recall and forget semantic memories."""

from __future__ import annotations

from datetime import datetime, tzinfo
from typing import Any

from django.conf import settings
from django.core.validators import RegexValidator
from django.utils import timezone
from drf_spectacular.utils import OpenApiExample, extend_schema, extend_schema_field, extend_schema_serializer
from rest_framework import serializers, status
from rest_framework.response import Response

from api.exceptions import batch_errors
from api.fields import (
    AwareDateTimeField,
    CleanCharField,
    JSONObjectField,
    NullIfBlankCharField,
    StrictFloatField,
    StrictIntegerField,
    StrictQueryFloat,
    StrictSerializer,
    subject_field,
    subject_filter_field,
)
from api.idempotency import idempotent
from api.pagination import CursorPage, PageParams, page_of
from api.rest.knowledge import FactObjectDocSerializer, FactObjectField
from api.schema import one_or_many
from api.views import AgentRequest, ApiView
from memory.knowledge.models import PREDICATE_PATTERN
from memory.semantic import selectors, versions
from memory.semantic.forgetting import recall_probability
from memory.semantic.models import AGENT_MEMORY_TYPES, MemoryScope, MemoryType, SemanticMemory
from memory.semantic.services import erase, writes

MAX_CONTENT_CHARS = settings.ENGRAM["MAX_CONTENT_CHARS"]


# a float32 (pgvector's element) holds these; a vector is finite and not all zeros
FLOAT32_MAX = 3.4028234663852886e38


@extend_schema_field(
    {
        "type": "array",
        "items": {"type": "number", "minimum": -FLOAT32_MAX, "maximum": FLOAT32_MAX},
        "maxItems": 4096,
        "description": "optional precomputed vector from the configured model: as many numbers as its "
        "dimensions (else a 409, as for another `embedding_model`); one that is all 0 as float32s is a 400",
    }
)
class VectorField(serializers.ListField):
    """A client's precomputed vector (``memory.embeddings.check_vector`` checks it)."""


def unit_float(**kwargs: Any) -> StrictFloatField:
    return StrictFloatField(min_value=0.0, max_value=1.0, **kwargs)


@extend_schema_serializer(component_name="VisibleTo")
class VisibleToSerializer(StrictSerializer):
    """Who else may recall a ``hierarchical`` memory: agents by name, and agent roles."""

    agents = serializers.ListField(child=CleanCharField(max_length=100), max_length=100, default=list)
    roles = serializers.ListField(child=CleanCharField(max_length=100), max_length=100, default=list)


@extend_schema_serializer(component_name="FactHint")
class FactHintSerializer(StrictSerializer):
    """The fact a memory states, for its promotion to the knowledge layer: the shape of ``POST
    facts`` (``subject``, ``subject_type``?, ``predicate``, ``object``)."""

    subject = CleanCharField(max_length=300)
    subject_type = CleanCharField(max_length=64, required=False, allow_null=True)
    predicate = CleanCharField(
        max_length=64, validators=[RegexValidator(PREDICATE_PATTERN, "Predicates are snake_case.")]
    )
    object = FactObjectField()

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        return {
            "subject": attrs["subject"],
            "subject_type": attrs.get("subject_type") or None,
            "predicate": attrs["predicate"],
            "object": attrs["object"].to_wire(),
        }


class FactHintOutputSerializer(serializers.Serializer):
    subject = serializers.CharField()
    subject_type = serializers.CharField(allow_null=True)
    predicate = serializers.CharField()
    object = FactObjectDocSerializer()


class MemoryInputSerializer(StrictSerializer):
    # a hierarchical memory names at least one agent or role; any other scope names none
    schema_rules = {
        "allOf": [
            {
                "anyOf": [
                    {
                        "required": ["scope", "visible_to"],
                        "properties": {
                            "scope": {"const": MemoryScope.HIERARCHICAL.value},
                            "visible_to": {
                                "anyOf": [
                                    {"required": ["agents"], "properties": {"agents": {"minItems": 1}}},
                                    {"required": ["roles"], "properties": {"roles": {"minItems": 1}}},
                                ]
                            },
                        },
                    },
                    {
                        "properties": {
                            "scope": {
                                "type": "string",
                                "enum": [MemoryScope.PRIVATE.value, MemoryScope.SHARED.value],
                            },
                            "visible_to": {
                                "properties": {"agents": {"maxItems": 0}, "roles": {"maxItems": 0}}
                            },
                        }
                    },
                ]
            }
        ],
        "description": "A hierarchical memory names at least one agent or role in visible_to; "
        "a private or shared one names none.",
    }
    content = CleanCharField(max_length=MAX_CONTENT_CHARS, trim_whitespace=False)
    memory_type = serializers.ChoiceField(choices=AGENT_MEMORY_TYPES, default=MemoryType.FACT)
    scope = serializers.ChoiceField(choices=MemoryScope.choices, default=MemoryScope.PRIVATE)
    session_id = CleanCharField(max_length=200, required=False, allow_null=True)
    tags = serializers.ListField(child=CleanCharField(max_length=64), max_length=50, default=list)
    importance = unit_float(default=0.5)
    confidence = unit_float(default=1.0)
    metadata = JSONObjectField(max_bytes=64 * 1024, default=dict)
    embedding = VectorField(
        child=StrictFloatField(),
        required=False,
        max_length=4096,
        help_text="optional precomputed vector from the configured model",
    )
    embedding_model = CleanCharField(max_length=200, required=False)
    visible_to = VisibleToSerializer(
        required=False, help_text="hierarchical scope only: the agents and roles that may recall it too"
    )
    fact = FactHintSerializer(
        required=False,
        allow_null=True,
        help_text="the fact it states: the consolidation job may promote the memory to this fact",
    )
    source_event_id = StrictIntegerField(
        required=False, min_value=1, allow_null=True, help_text="the event it was learned from"
    )
    write = serializers.ChoiceField(
        choices=["sync", "async"],
        default="sync",
        help_text="async: 202 at once with the id; embedded by the worker in batches, searchable soon after",
    )
    data_subject = subject_field()
    supersedes = serializers.UUIDField(
        required=False,
        allow_null=True,
        help_text="the id of a memory this one updates: it is superseded (kept as history, out of default "
        "recall); 404 for a memory you cannot see, 409 for one already superseded (names the current one)",
    )

    def validate_content(self, value: str) -> str:
        if not value.strip():
            raise serializers.ValidationError("This field may not be blank.")
        return value


class MemoryOutputSerializer(serializers.Serializer):
    """A memory; ``visible_to`` lists the agents (by name) and roles a hierarchical memory names
    (empty lists otherwise). Pass ``context={"agent_names": {id: name}}`` for lists of memories."""

    id = serializers.UUIDField()
    content = serializers.CharField(trim_whitespace=False)
    memory_type = serializers.ChoiceField(choices=AGENT_MEMORY_TYPES)
    scope = serializers.ChoiceField(choices=MemoryScope.choices)
    visible_to = serializers.SerializerMethodField()
    agent = serializers.CharField(source="agent.name")
    session_id = serializers.CharField(allow_null=True)
    data_subject = NullIfBlankCharField(help_text="the person this is about, null when none")
    tags = serializers.ListField(child=serializers.CharField())
    importance = serializers.FloatField()
    confidence = serializers.FloatField()
    metadata = serializers.JSONField()
    embedding_model = serializers.CharField()
    created_at = serializers.DateTimeField()
    last_accessed_at = serializers.DateTimeField()
    access_count = serializers.IntegerField()
    stability_hours = serializers.FloatField(
        source="access.stability_hours", help_text="S of the forgetting curve p = exp(-t/S)"
    )
    recall_probability = serializers.SerializerMethodField(
        help_text="exp(-hours since last access / stability), now"
    )
    archived_at = serializers.DateTimeField(
        allow_null=True, help_text="set when the forgetting curve archived it (hidden from default recall)"
    )
    pending = serializers.BooleanField(help_text="written with write=async and not embedded (searchable) yet")
    fact = FactHintOutputSerializer(source="fact_hint", allow_null=True)
    source_event_id = serializers.IntegerField(allow_null=True)
    superseded_by = serializers.UUIDField(
        source="superseded_by_id", allow_null=True, help_text="the newer version that replaced it, if any"
    )
    superseded_at = serializers.DateTimeField(
        allow_null=True, help_text="when an update replaced it (out of default recall since)"
    )

    def get_recall_probability(self, memory: SemanticMemory) -> float:
        hours = (timezone.now() - memory.access.last_accessed_at).total_seconds() / 3600.0
        return round(recall_probability(hours, memory.access.stability_hours), 6)

    @extend_schema_field(VisibleToSerializer)
    def get_visible_to(self, memory: SemanticMemory) -> dict[str, list[str]]:
        names = self.context.get("agent_names")
        if names is None and memory.visible_to_agents:
            names = selectors.agent_names(memory.visible_to_agents)
        return {
            "agents": [(names or {}).get(i, f"#{i}") for i in memory.visible_to_agents],
            "roles": list(memory.visible_to_roles),
        }


def _time_text(moment: datetime | None, zone: tzinfo) -> str | None:
    """A datetime as DRF's ``DateTimeField`` writes it (ISO 8601 in ``zone``, ``Z`` for UTC; None
    stays None)."""
    if moment is None:
        return None
    text = moment.astimezone(zone).isoformat()
    return text[:-6] + "Z" if text.endswith("+00:00") else text


def memory_json(
    memory: SemanticMemory, *, names: dict[int, str], zone: tzinfo, now: datetime
) -> dict[str, Any]:
    """``MemoryOutputSerializer(memory, context={"agent_names": names}).data`` built directly: a
    dict per memory instead of a DRF field per value (rendering ten search hits through the
    serializer cost about 2.5 ms of CPU, a third of what the HTTP layer added to a search: profiled;
    ``tests/api/test_memory_json.py`` compares the two). ``memory`` has its ``agent`` and ``access``
    loaded; ``names``: ``{agent id: name}`` for its ``visible_to_agents``; ``zone``: the current
    time zone; ``now``: the instant ``recall_probability`` is computed at."""
    access = memory.access
    hours = (now - access.last_accessed_at).total_seconds() / 3600.0
    fact = memory.fact_hint
    return {
        "id": str(memory.id),
        "content": str(memory.content),
        "memory_type": str(memory.memory_type),
        "scope": str(memory.scope),
        "visible_to": {
            "agents": [names.get(i, f"#{i}") for i in memory.visible_to_agents],
            "roles": list(memory.visible_to_roles),
        },
        "agent": memory.agent.name,
        "session_id": None if memory.session_id is None else str(memory.session_id),
        "data_subject": memory.data_subject or None,
        "tags": [str(tag) for tag in memory.tags],
        "importance": float(memory.importance),
        "confidence": float(memory.confidence),
        "metadata": memory.metadata,
        "embedding_model": str(memory.embedding_model),
        "created_at": _time_text(memory.created_at, zone),
        "last_accessed_at": _time_text(access.last_accessed_at, zone),
        "access_count": int(access.access_count),
        "stability_hours": float(access.stability_hours),
        "recall_probability": round(recall_probability(hours, access.stability_hours), 6),
        "archived_at": _time_text(memory.archived_at, zone),
        "pending": memory.embedding_dimensions == 0,
        # rare (a hint for promotion), and its nested object has optional keys: the serializer's
        "fact": None if fact is None else FactHintOutputSerializer(fact).data,
        "source_event_id": memory.source_event_id,
        "superseded_by": None if memory.superseded_by_id is None else str(memory.superseded_by_id),
        "superseded_at": _time_text(memory.superseded_at, zone),
    }


def memories_out(memories: list[SemanticMemory]) -> list[dict[str, Any]]:
    """Several memories as JSON (``memory_json``), with the names of the agents they name looked up
    once (no query when none names any)."""
    names = selectors.agent_names(i for m in memories for i in m.visible_to_agents)
    zone = timezone.get_current_timezone()
    now = timezone.now()
    return [memory_json(m, names=names, zone=zone, now=now) for m in memories]


def _memory_body(memory: SemanticMemory, **extra: Any) -> dict[str, Any]:
    return {**memories_out([memory])[0], **extra}


@extend_schema_serializer(component_name="MemoryWritten")
class MemoryWrittenSerializer(MemoryOutputSerializer):
    outcome = serializers.ChoiceField(
        choices=["created", "accepted", "deduplicated", "updated"],
        help_text="created; accepted (async, embedded soon); deduplicated (an existing memory reinforced); "
        "updated (stored, and the memory `supersedes` names is superseded by it)",
    )
    supersedes = serializers.UUIDField(
        allow_null=True, help_text="the memory this write updated (stated, or a near one that differs)"
    )
    deduplicated = serializers.BooleanField(help_text="true: an existing memory was reinforced instead")
    duplicate_of = serializers.ChoiceField(choices=["exact", "near"], required=False)
    similarity = serializers.FloatField(required=False)


@extend_schema_serializer(component_name="MemoryDetail")
class MemoryDetailSerializer(MemoryOutputSerializer):
    supersedes = serializers.UUIDField(
        allow_null=True, help_text="the memory this one updated most recently (its older version), if any"
    )


class ForgetOutputSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    forgotten_at = serializers.DateTimeField()
    event_id = serializers.IntegerField(help_text="the decision event that records the forget")
    event_seq = serializers.IntegerField()


class MemoryListParams(StrictSerializer, PageParams):
    unknown_key_message = "Unknown query parameter."
    agent = CleanCharField(required=False, max_length=100, help_text="the name of the agent that wrote it")
    scope = serializers.ChoiceField(choices=MemoryScope.choices, required=False)
    memory_type = serializers.ChoiceField(choices=AGENT_MEMORY_TYPES, required=False)
    session_id = CleanCharField(required=False, max_length=200)
    tag = serializers.ListField(
        child=CleanCharField(max_length=64),
        required=False,
        max_length=50,
        help_text="repeat: every tag given",
    )
    min_confidence = StrictQueryFloat(required=False, min_value=0.0, max_value=1.0)
    since = AwareDateTimeField(required=False, help_text="created_at >= since")
    until = AwareDateTimeField(required=False, help_text="created_at < until")
    include_archived = serializers.ChoiceField(
        choices=["true", "false"], required=False, help_text="also memories the forgetting curve archived"
    )
    data_subject = subject_filter_field()
    include_superseded = serializers.ChoiceField(
        choices=["true", "false"], required=False, help_text="also memories an update superseded (history)"
    )
    as_of = AwareDateTimeField(
        required=False, help_text="the memories current then: created by then and not superseded by then"
    )


class MemoriesPage(CursorPage):
    """Newest first."""

    ordering = ("-created_at", "-id")


MEMORY_EXAMPLE = {
    "content": "Alice lives in Lisbon",
    "scope": "shared",
    "tags": ["people"],
    "importance": 0.7,
}


@extend_schema_serializer(component_name="MemoryBatch")
class MemoryBatchOutputSerializer(serializers.Serializer):
    count = serializers.IntegerField()
    results = MemoryWrittenSerializer(many=True)


def write_outcome(result: writes.WriteResult) -> str:
    """A write's ``outcome`` as the API answers it: updated, deduplicated, accepted or created."""
    if result.updated:
        return "updated"
    if result.deduplicated:
        return "deduplicated"
    return "accepted" if result.outcome == "accepted" else "created"


def _written(result: writes.WriteResult, body: dict[str, Any]) -> dict[str, Any]:
    extra: dict[str, Any] = {
        "outcome": write_outcome(result),
        "supersedes": None if result.supersedes is None else str(result.supersedes),
        "deduplicated": result.deduplicated,
    }
    if result.deduplicated:
        extra.update(duplicate_of=result.outcome, similarity=round(result.similarity or 0.0, 6))
    elif result.similarity is not None:
        extra.update(similarity=round(result.similarity, 6))
    return {**body, **extra}


def _memory_data(attrs: dict[str, Any]) -> writes.MemoryData:
    data = dict(attrs)
    visible_to = data.pop("visible_to", {})
    data.pop("write")
    fact = data.pop("fact", None)
    return writes.MemoryData(
        **data,
        fact_hint=fact,
        visible_to_agents=visible_to.get("agents", ()),
        visible_to_roles=visible_to.get("roles", ()),
    )


class MemoriesView(ApiView):
    """POST a memory: 201 when stored, 200 with ``deduplicated: true`` when it matched one, 202 for
    ``"write": "async"`` (stored, embedded by the worker soon after); or a batch (an array of up to
    ``MAX_MEMORY_BATCH``, all or nothing, embedded in one model call, deduplicated as if written one
    after another): ``{"count", "results"}``. GET a page of the memories the caller may see."""

    get_query_params = frozenset(MemoryListParams().fields)
    repeatable_query_params = frozenset({"tag"})
    error_statuses = {"post": (404, 409, 413, 503)}

    @extend_schema(
        operation_id="memories_create",
        summary="Store a memory, or a batch",
        description="One memory (an object) or a batch (an array of 1 to 500, all or nothing, embedded in "
        "one model call; every item written the same way, `sync` or `async`). A duplicate, exact or near, "
        "of a stored memory or of an earlier item of the batch reinforces it (`deduplicated: true`), a near one "
        "only when it says the same. A near one of the same data subject that restates it with a new value "
        "(a negation, number, date, name, literal or opposite changed, about the same thing) is an update "
        "(`outcome: updated`, `supersedes` names the old memory, which leaves default recall); one about "
        "something else is stored as a memory of its own. `supersedes` in the body states an update. "
        "Status: 201 when something was stored, 202 when an async write was accepted, else 200.",
        request=one_or_many(
            MemoryInputSerializer, "MemoryInput", max_items=settings.ENGRAM["MAX_MEMORY_BATCH"]
        ),
        responses={
            201: one_or_many(MemoryWrittenSerializer, "MemoryWritten", batch=MemoryBatchOutputSerializer),
            200: one_or_many(MemoryWrittenSerializer, "MemoryWritten", batch=MemoryBatchOutputSerializer),
            202: one_or_many(MemoryWrittenSerializer, "MemoryWritten", batch=MemoryBatchOutputSerializer),
        },
        examples=[OpenApiExample("A shared fact", value=MEMORY_EXAMPLE, request_only=True)],
        tags=["semantic"],
    )
    @idempotent
    def post(self, request: AgentRequest) -> Response:
        raw = request.data
        single = isinstance(raw, dict)
        items = [raw] if single else raw
        if not isinstance(items, list):
            raise serializers.ValidationError({"body": ["Send a memory object or an array of memories."]})
        limit = settings.ENGRAM["MAX_MEMORY_BATCH"]
        if not items or len(items) > limit:
            raise serializers.ValidationError({"memories": [f"Send between 1 and {limit} memories."]})
        serializer = MemoryInputSerializer(data=items, many=True)
        if not serializer.is_valid():
            raise serializers.ValidationError(batch_errors(serializer.errors, name="memories", single=single))
        validated = list(serializer.validated_data)
        write = validated[0]["write"]
        for index, attrs in enumerate(validated):
            if attrs["write"] != write:
                raise serializers.ValidationError(
                    {
                        f"memories[{index}].write": [
                            "Every item of a batch is written the same way (sync or async)."
                        ]
                    }
                )
        results = writes.memories_create(
            agent=request.user,
            items=[_memory_data(attrs) for attrs in validated],
            policy=request.tenant.retrieval_policy,
            write=write,
            batch=not single,
        )
        outcomes = {r.outcome for r in results}
        code = (
            status.HTTP_201_CREATED
            if "created" in outcomes
            else status.HTTP_202_ACCEPTED
            if "accepted" in outcomes
            else status.HTTP_200_OK
        )
        if single:
            return Response(_written(results[0], _memory_body(results[0].memory)), status=code)
        bodies = memories_out([r.memory for r in results])
        out = [_written(r, body) for r, body in zip(results, bodies, strict=True)]
        return Response({"count": len(out), "results": out}, status=code)

    @extend_schema(
        operation_id="memories_list",
        summary="List memories",
        parameters=[MemoryListParams],
        responses={200: page_of(MemoryOutputSerializer, "Memory")},
        tags=["semantic"],
    )
    def get(self, request: AgentRequest) -> Response:
        raw: dict[str, Any] = request.query_params.dict()
        if "tag" in raw:
            raw["tag"] = request.query_params.getlist("tag")
        p = self.query(MemoryListParams, raw)
        created: dict[str, Any] = {}
        if "since" in p:
            created["gte"] = p["since"]
        if "until" in p:
            created["lt"] = p["until"]
        qs = selectors.memory_list(
            agent=request.user,
            filters=selectors.MemoryFilters(
                agent_name=p.get("agent"),
                scope=p.get("scope"),
                memory_type=p.get("memory_type"),
                session_id=p.get("session_id"),
                tags_all=p.get("tag", ()),
                min_confidence=p.get("min_confidence"),
                created_at=created,
                include_archived=p.get("include_archived") == "true",
                data_subject=p.get("data_subject"),
                include_superseded=p.get("include_superseded") == "true",
                as_of=p.get("as_of"),
            ),
        )
        paginator = MemoriesPage()
        page = paginator.paginate_queryset(qs, request, view=self)
        return paginator.get_paginated_response(memories_out(list(page or [])))


class ForgetParams(StrictSerializer):
    # where the decision is logged when the memory was stored without a session
    session_id = CleanCharField(required=False, max_length=200)


class MemoryDetailView(ApiView):
    """GET a memory the agent may see; DELETE forgets it (kept for audit, logged as a decision in
    the memory's session, or ``?session_id=`` for a memory stored without one): the memory's author
    may, or a key with the ``curate`` scope."""

    delete_query_params = frozenset({"session_id"})

    @extend_schema(
        operation_id="memories_get",
        summary="One memory",
        description="Superseded memories too (an update replaced them: `superseded_by`, `superseded_at`); "
        "`supersedes` names the older version this one replaced.",
        responses={200: MemoryDetailSerializer},
        tags=["semantic"],
    )
    def get(self, request: AgentRequest, memory_id: str) -> Response:
        memory = selectors.memory_get(agent=request.user, memory_id=memory_id)
        older = versions.memory_supersedes(memory.pk)
        return Response(_memory_body(memory, supersedes=None if older is None else str(older)))

    @extend_schema(
        operation_id="memories_forget",
        summary="Forget a memory",
        parameters=[ForgetParams],
        responses={200: ForgetOutputSerializer},
        tags=["semantic"],
    )
    def delete(self, request: AgentRequest, memory_id: str) -> Response:
        params = self.query(ForgetParams)
        memory, event = erase.memory_forget(
            agent=request.user,
            memory_id=memory_id,
            may_curate=request.auth.has_scope("curate"),
            session_id=params.get("session_id"),
        )
        body = {
            "id": memory.pk,
            "forgotten_at": memory.forgotten_at,
            "event_id": event.pk,
            "event_seq": event.seq,
        }
        return Response(ForgetOutputSerializer(body).data)


class MemoryVersionsSerializer(serializers.Serializer):
    id = serializers.UUIDField(help_text="the memory asked about")
    current = serializers.UUIDField(
        allow_null=True, help_text="the current version (superseded by none), null when you cannot see it"
    )
    count = serializers.IntegerField()
    results = MemoryOutputSerializer(many=True, help_text="every version you can see, oldest first")


class MemoryVersionsView(ApiView):
    """The versions of a memory: the chain of updates it is part of (a read)."""

    required_scope = "read"

    @extend_schema(
        operation_id="memories_versions",
        summary="A memory's versions",
        description="The memories an update chain links (`superseded_by`) that this one is part of, oldest "
        "first: what it replaced, itself, and what replaced it up to the current version.",
        responses={200: MemoryVersionsSerializer},
        tags=["semantic"],
    )
    def get(self, request: AgentRequest, memory_id: str) -> Response:
        chain = versions.memory_versions(agent=request.user, memory_id=memory_id)
        current = next((m.pk for m in chain if m.superseded_at is None), None)
        asked = selectors.memory_uuid(memory_id)
        return Response(
            {
                "id": str(asked),
                "current": None if current is None else str(current),
                "count": len(chain),
                "results": memories_out(chain),
            }
        )
