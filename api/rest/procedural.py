"""Procedural memory over HTTP: tools (JSON Schema contracts) and skills (versioned step lists).

Agents find skills by intent (``GET skills?intent=``), read the published version or any version,
report runs, and propose skills or versions, which land as drafts only an operator can publish.
Steps that do not compile are a 400 whose ``errors`` are keyed by JSON path
(``steps[2].params.user_id``) with messages naming the step, and whose ``problems`` list the same
as ``{"path", "step", "index", "message"}``.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ObjectDoesNotExist
from drf_spectacular.utils import OpenApiExample, extend_schema, extend_schema_field, extend_schema_serializer
from rest_framework import serializers, status
from rest_framework.response import Response

from api.fields import (
    CleanCharField,
    CleanRegexField,
    JSONObjectField,
    JSONValueField,
    NullIfBlankCharField,
    StrictBooleanField,
    StrictIntegerField,
    StrictQueryInteger,
    StrictSerializer,
)
from api.idempotency import idempotent
from api.views import AgentRequest, ApiView
from core.errors import NotFound
from memory.procedural import selectors
from memory.procedural.models import NAME_PATTERN, SkillVersion
from memory.procedural.services.common import MAX_INTENTS, MAX_TAGS, MAX_TEXT_CHARS, Actor
from memory.procedural.services.proposals import skill_propose, skill_version_propose
from memory.procedural.services.runs import RunData, skill_run_report
from memory.procedural.services.skills import SkillData
from memory.procedural.services.tools import tool_save
from memory.procedural.validation import MAX_RETRIES, MAX_STEPS, ON_ERROR_KEYWORDS, STEP_ID_PATTERN

MAX_SCHEMA_BYTES = 64 * 1024
MAX_STEPS_BYTES = 256 * 1024
TAGS = ["procedural"]

STEPS_SCHEMA: dict[str, Any] = {
    "type": "array",
    "minItems": 1,
    "maxItems": MAX_STEPS,
    "description": "the steps in order; the compiler also checks that each tool exists in this tenant, "
    "ids are unique, references and `when` expressions resolve, and params match the tool's schema",
    "items": {
        "type": "object",
        "additionalProperties": False,
        "required": ["id", "tool", "params"],
        "properties": {
            "id": {"type": "string", "pattern": STEP_ID_PATTERN.pattern},
            "tool": {"type": "string", "pattern": NAME_PATTERN},
            "params": {"type": "object"},
            "when": {"type": "string", "description": "a CEL expression over input and earlier outputs"},
            "on_error": {
                "type": "string",
                "description": f"{', '.join(ON_ERROR_KEYWORDS)}, or a later step's id",
            },
            "retries": {"type": "integer", "minimum": 1, "maximum": MAX_RETRIES},
            "output_as": {"type": "string", "pattern": STEP_ID_PATTERN.pattern},
        },
    },
}


# the rules of a contract the request schema cannot state: a 400 with the compiler's `problems`
COMPILED_TOOL = (
    "Both schemas are compiled: each must be valid against the JSON Schema 2020-12 meta-schema and name "
    "in `required` only its own properties; else a 400 whose `problems` name each path."
)
COMPILED_SKILL = (
    "The steps are compiled against this tenant's tools: each `tool` must exist, step ids be unique, "
    "references and `when` expressions resolve to earlier steps or the input, and `params` match the "
    "tool's input schema; the input schema is compiled as a tool's. Else a 400 whose `problems` name "
    "each path."
)

# what ``memory.procedural.validation.schema_problems`` requires of a tool's or skill's schema; the
# rest (a valid JSON Schema 2020-12, each required name among the properties) is in the description
OBJECT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["type", "properties", "required"],
    "properties": {
        "type": {"const": "object"},
        "properties": {"type": "object", "additionalProperties": {"type": ["object", "boolean"]}},
        "required": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
    },
    "description": "a JSON Schema 2020-12 object schema: valid against the meta-schema, with "
    '`"type": "object"`, `properties` and `required` (names among the properties; [] for none)',
}


@extend_schema_field(OBJECT_SCHEMA)
class ObjectSchemaField(JSONObjectField):
    """A tool's or skill's JSON Schema (``OBJECT_SCHEMA``); the compiler checks the rest."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(max_bytes=MAX_SCHEMA_BYTES, **kwargs)


class NameField(CleanRegexField):
    """A tool's or skill's name: a lowercase letter, then lowercase letters, digits, '-' or '_'."""

    def __init__(self, **kwargs: Any) -> None:
        message = "A lowercase letter, then lowercase letters, digits, '-' or '_' (at most 64)."
        super().__init__(NAME_PATTERN, message=message, max_length=64, **kwargs)


@extend_schema_field(STEPS_SCHEMA)
class StepsInputField(JSONValueField):
    """Proposed steps: any JSON array reaches the compiler, whose 400 names each problem's path;
    the document gives the shape a step must have."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(kind="array", **kwargs)

    def to_internal_value(self, data: Any) -> Any:
        if not isinstance(data, list):
            raise serializers.ValidationError("Expected a list of steps.")
        return super().to_internal_value(data)


# --- tools --------------------------------------------------------------------------------------------


class ToolInputSerializer(StrictSerializer):
    name = NameField()
    description = CleanCharField(max_length=MAX_TEXT_CHARS, required=False, default="", allow_blank=True)
    input_schema = ObjectSchemaField()
    output_schema = ObjectSchemaField()


@extend_schema_serializer(component_name="Tool")
class ToolOutputSerializer(serializers.Serializer):
    name = serializers.CharField(source="tool.name")
    version = serializers.IntegerField()
    description = NullIfBlankCharField()
    input_schema = serializers.DictField(help_text="a JSON Schema 2020-12 object schema")
    output_schema = serializers.DictField(help_text="a JSON Schema 2020-12 object schema")
    author = serializers.CharField(help_text="agent:<name> or user:<name>")
    created_at = serializers.DateTimeField()


@extend_schema_serializer(component_name="ToolSaved")
class ToolSavedSerializer(ToolOutputSerializer):
    created = serializers.BooleanField(help_text="false: the contract was unchanged, no new version")


class ToolListSerializer(serializers.Serializer):
    results = ToolOutputSerializer(many=True)
    next = serializers.URLField(allow_null=True, help_text="always null: every tool on one page")
    previous = serializers.URLField(allow_null=True)


@extend_schema_serializer(component_name="ToolDetail")
class ToolDetailSerializer(ToolOutputSerializer):
    versions = serializers.ListField(
        child=serializers.IntegerField(), help_text="every version, newest first"
    )


TOOL_EXAMPLE = {
    "name": "send_email",
    "description": "Send an e-mail",
    "input_schema": {
        "type": "object",
        "properties": {"to": {"type": "string", "format": "email"}, "body": {"type": "string"}},
        "required": ["to", "body"],
    },
    "output_schema": {"type": "object", "properties": {"sent": {"type": "boolean"}}, "required": ["sent"]},
}


class ToolsView(ApiView):
    """``GET tools``: the newest version of every tool; ``POST tools``: create a tool or give it a
    new version (201; 200 with ``created: false`` when nothing changed)."""

    error_statuses = {"post": (409,)}

    @extend_schema(
        operation_id="tools_list", summary="List tools", responses={200: ToolListSerializer}, tags=TAGS
    )
    def get(self, request: AgentRequest) -> Response:
        tools = selectors.tool_list()
        return Response(
            {"results": ToolOutputSerializer(tools, many=True).data, "next": None, "previous": None}
        )

    @extend_schema(
        operation_id="tools_save",
        summary="Create a tool or version it",
        description=f"{COMPILED_TOOL} A contract equal to the current version's is no new version (200).",
        request=ToolInputSerializer,
        responses={201: ToolSavedSerializer, 200: ToolSavedSerializer},
        examples=[OpenApiExample("An e-mail tool", value=TOOL_EXAMPLE, request_only=True)],
        tags=TAGS,
    )
    @idempotent
    def post(self, request: AgentRequest) -> Response:
        serializer = ToolInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        version, created = tool_save(actor=Actor(agent=request.user), **serializer.validated_data)
        return Response(
            {**ToolOutputSerializer(version).data, "created": created},
            status=status.HTTP_201_CREATED if created else status.HTTP_200_OK,
        )


class ToolParams(StrictSerializer):
    unknown_key_message = "Unknown query parameter."
    version = StrictQueryInteger(required=False, min_value=1)


class ToolDetailView(ApiView):
    """``GET tools/{name}``: the newest version (``?version=n``: that one), with every version number."""

    get_query_params = frozenset(ToolParams().fields)

    @extend_schema(
        operation_id="tools_get",
        summary="One tool",
        parameters=[ToolParams],
        responses={200: ToolDetailSerializer},
        tags=TAGS,
    )
    def get(self, request: AgentRequest, name: str) -> Response:
        number = self.query(ToolParams).get("version")
        version = selectors.tool_version_get(name, number) if number else selectors.tool_latest(name)
        versions = [v.version for v in selectors.tool_versions(name)]
        return Response({**ToolOutputSerializer(version).data, "versions": versions})


# --- skills -------------------------------------------------------------------------------------------


@extend_schema_field(
    {
        "type": "array",
        "items": {
            "type": "object",
            "required": ["id", "tool", "params"],
            "properties": {
                "id": {"type": "string"},
                "tool": {"type": "string"},
                "params": {"type": "object"},
                "when": {"type": "string", "description": "a CEL expression over input and earlier outputs"},
                "on_error": {"type": "string", "description": "stop, retry, skip, or a later step's id"},
                "retries": {"type": "integer", "minimum": 0},
                "output_as": {"type": "string"},
            },
        },
    }
)
class StepsField(serializers.JSONField):
    """A skill's steps (docs/guides/agents/skills.md)."""


@extend_schema_serializer(component_name="SkillVersion")
class VersionOutputSerializer(serializers.Serializer):
    number = serializers.IntegerField()
    status = serializers.ChoiceField(choices=["draft", "published", "retired"])
    steps = StepsField()
    input_schema = serializers.DictField()
    tool_versions = serializers.DictField(
        child=serializers.IntegerField(), help_text="tool name → the version the steps were compiled against"
    )
    change_note = NullIfBlankCharField()
    author = serializers.CharField()
    proposed_by = serializers.CharField(source="proposed_by.name", allow_null=True, default=None)
    based_on = serializers.IntegerField(allow_null=True)
    created_at = serializers.DateTimeField()
    published_at = serializers.DateTimeField(allow_null=True)
    runs = serializers.SerializerMethodField()
    success_rate = serializers.SerializerMethodField()

    def _stats(self, version: SkillVersion) -> tuple[int, int]:
        try:
            stats = version.stats  # loaded by the selectors (select_related)
        except ObjectDoesNotExist:  # no run reported yet
            return (0, 0)
        return stats.runs, stats.successes

    def get_runs(self, version: SkillVersion) -> int:
        return self._stats(version)[0]

    def get_success_rate(self, version: SkillVersion) -> float | None:
        runs, successes = self._stats(version)
        return round(successes / runs, 6) if runs else None


def _skill_fields(version: SkillVersion) -> dict[str, Any]:
    skill = version.skill
    return {
        "name": skill.name,
        "title": skill.title,
        "description": skill.description or None,
        "intents": skill.intents,
        "tags": skill.tags,
        "owner": skill.owner or None,
    }


def _skill_body(version: SkillVersion) -> dict[str, Any]:
    return {**_skill_fields(version), "version": VersionOutputSerializer(version).data}


@extend_schema_serializer(component_name="Skill")
class SkillOutputSerializer(serializers.Serializer):
    """A skill with one of its versions (the published one, or the one asked for)."""

    name = serializers.CharField()
    title = serializers.CharField()
    description = serializers.CharField(allow_null=True)
    intents = serializers.ListField(child=serializers.CharField())
    tags = serializers.ListField(child=serializers.CharField())
    owner = serializers.CharField(allow_null=True)
    version = VersionOutputSerializer()


class MatchComponentsSerializer(serializers.Serializer):
    relevance = serializers.FloatField()
    similarity = serializers.FloatField()
    text_relevance = serializers.FloatField()
    success_prior = serializers.FloatField()


@extend_schema_serializer(component_name="SkillMatch")
class SkillMatchSerializer(SkillOutputSerializer):
    score = serializers.FloatField()
    components = MatchComponentsSerializer()


class SkillMatchesSerializer(serializers.Serializer):
    intent = serializers.CharField()
    k = serializers.IntegerField()
    count = serializers.IntegerField()
    results = SkillMatchSerializer(many=True)


class RunOutputSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    skill = serializers.CharField()
    version = serializers.IntegerField()
    success = serializers.BooleanField()
    failed_step = serializers.CharField(allow_null=True)
    duration_ms = serializers.IntegerField(allow_null=True)
    session_id = serializers.CharField(allow_null=True)
    reported_at = serializers.DateTimeField()
    version_runs = serializers.IntegerField()
    version_success_rate = serializers.FloatField(allow_null=True)


class MatchParams(StrictSerializer):
    unknown_key_message = "Unknown query parameter."
    intent = CleanCharField(max_length=2000, help_text="the request to find a skill for, in words")
    k = StrictQueryInteger(min_value=1, max_value=selectors.MAX_K, default=5)
    success_weight = serializers.FloatField(
        min_value=0.0, max_value=1.0, default=selectors.DEFAULT_SUCCESS_WEIGHT,
        help_text="how much the published version's success rate weighs against relevance",
    )  # fmt: skip


class SkillProposalSerializer(StrictSerializer):
    name = NameField()
    title = CleanCharField(max_length=200)
    description = CleanCharField(max_length=MAX_TEXT_CHARS, required=False, default="", allow_blank=True)
    intents = serializers.ListField(
        child=CleanCharField(max_length=300), max_length=MAX_INTENTS, default=list
    )
    tags = serializers.ListField(child=CleanCharField(max_length=64), max_length=MAX_TAGS, default=list)
    owner = CleanCharField(max_length=200, required=False, default="", allow_blank=True)
    input_schema = ObjectSchemaField()
    steps = StepsInputField(help_text="a list of steps (see the skills guide: docs/guides/agents/skills.md)")
    change_note = CleanCharField(max_length=MAX_TEXT_CHARS, required=False, default="", allow_blank=True)
    session_id = CleanCharField(max_length=200, required=False, default="", allow_blank=True)


class SkillsView(ApiView):
    """``GET skills?intent=…&k=5``: the best matching published skills, with score, version and
    steps. ``POST skills``: propose a new skill (its v1 lands as a draft)."""

    get_query_params = frozenset(MatchParams().fields)
    error_statuses = {"get": (503,), "post": (409, 503)}

    @extend_schema(
        operation_id="skills_match",
        summary="Find skills for a request",
        parameters=[MatchParams],
        responses={200: SkillMatchesSerializer},
        tags=TAGS,
    )
    def get(self, request: AgentRequest) -> Response:
        p = self.query(MatchParams)
        matches = selectors.skill_match(intent=p["intent"], k=p["k"], success_weight=p["success_weight"])
        results = [
            {
                **_skill_body(m.version),
                "score": round(m.score, 6),
                "components": {
                    "relevance": round(m.relevance, 6),
                    "similarity": round(m.similarity, 6),
                    "text_relevance": round(m.text_relevance, 6),
                    "success_prior": round(selectors.success_prior(m.runs, m.successes), 6),
                },
            }
            for m in matches
        ]
        return Response({"intent": p["intent"], "k": p["k"], "count": len(results), "results": results})

    @extend_schema(
        operation_id="skills_propose",
        summary="Propose a skill (a draft)",
        description=COMPILED_SKILL,
        request=SkillProposalSerializer,
        responses={201: SkillOutputSerializer},
        tags=TAGS,
    )
    @idempotent
    def post(self, request: AgentRequest) -> Response:
        serializer = SkillProposalSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        d = serializer.validated_data
        version = skill_propose(
            agent=request.user,
            name=d["name"],
            data=SkillData(
                title=d["title"],
                description=d["description"],
                intents=d["intents"],
                tags=d["tags"],
                owner=d["owner"],
            ),
            input_schema=d["input_schema"],
            steps=d["steps"],
            change_note=d["change_note"],
            session_id=d["session_id"],
        )
        return Response(
            _skill_body(selectors.skill_version_get(d["name"], version.number)),
            status=status.HTTP_201_CREATED,
        )


class SkillDetailView(ApiView):
    """``GET skills/{name}``: the published version (404 when none is)."""

    @extend_schema(
        operation_id="skills_get",
        summary="A skill's published version",
        responses={200: SkillOutputSerializer},
        tags=TAGS,
    )
    def get(self, request: AgentRequest, name: str) -> Response:
        return Response(_skill_body(selectors.skill_published(name)))


class VersionProposalSerializer(StrictSerializer):
    steps = StepsInputField(help_text="a list of steps")
    input_schema = ObjectSchemaField(required=False)
    change_note = CleanCharField(max_length=MAX_TEXT_CHARS, required=False, default="", allow_blank=True)
    based_on = StrictIntegerField(min_value=1, required=False)
    session_id = CleanCharField(max_length=200, required=False, default="", allow_blank=True)


class SkillVersionsView(ApiView):
    """``POST skills/{name}/versions``: propose a new version (a draft only an operator publishes)."""

    error_statuses = (409, 503)

    @extend_schema(
        operation_id="skill_versions_propose",
        summary="Propose a version (a draft)",
        description=COMPILED_SKILL,
        request=VersionProposalSerializer,
        responses={201: SkillOutputSerializer},
        tags=TAGS,
    )
    @idempotent
    def post(self, request: AgentRequest, name: str) -> Response:
        serializer = VersionProposalSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        d = serializer.validated_data
        version = skill_version_propose(
            agent=request.user,
            name=name,
            steps=d["steps"],
            input_schema=d.get("input_schema"),
            change_note=d["change_note"],
            based_on=d.get("based_on"),
            session_id=d["session_id"],
        )
        return Response(
            _skill_body(selectors.skill_version_get(name, version.number)), status=status.HTTP_201_CREATED
        )


class SkillVersionDetailView(ApiView):
    """``GET skills/{name}/versions/{n}``: one version in any status (drafts and retired ones too)."""

    @extend_schema(
        operation_id="skill_versions_get",
        summary="One version of a skill",
        responses={200: SkillOutputSerializer},
        tags=TAGS,
    )
    def get(self, request: AgentRequest, name: str, number: str) -> Response:
        if not number.isdigit() or len(number) > 9:
            raise NotFound(f"Skill {name} has no version {number}.", field="number")
        return Response(_skill_body(selectors.skill_version_get(name, int(number))))


class RunInputSerializer(StrictSerializer):
    version = StrictIntegerField(min_value=1)
    success = StrictBooleanField()
    failed_step = CleanCharField(max_length=64, required=False, default="", allow_blank=True)
    duration_ms = StrictIntegerField(min_value=0, max_value=7 * 24 * 3600 * 1000, required=False)
    session_id = CleanCharField(max_length=200, required=False, default="", allow_blank=True)
    error = CleanCharField(max_length=MAX_TEXT_CHARS, required=False, default="", allow_blank=True)


class SkillRunsView(ApiView):
    """``POST skills/{name}/runs``: report a run's outcome (counts toward the version's success rate)."""

    error_statuses = (409,)

    @extend_schema(
        operation_id="skill_runs_report",
        summary="Report a run",
        request=RunInputSerializer,
        responses={201: RunOutputSerializer},
        tags=TAGS,
    )
    @idempotent
    def post(self, request: AgentRequest, name: str) -> Response:
        serializer = RunInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        run = skill_run_report(agent=request.user, name=name, data=RunData(**serializer.validated_data))
        runs, successes = selectors.run_stats(run.version)
        return Response(
            {
                "id": run.pk,
                "skill": name,
                "version": run.version.number,
                "success": run.success,
                "failed_step": run.failed_step or None,
                "duration_ms": run.duration_ms,
                "session_id": run.session_id or None,
                "reported_at": run.reported_at,
                "version_runs": runs,
                "version_success_rate": round(successes / runs, 6) if runs else None,
            },
            status=status.HTTP_201_CREATED,
        )
