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
from rest_framework import serializers, status
from rest_framework.response import Response

from api.fields import (
    CleanCharField,
    JSONObjectField,
    JSONValueField,
    StrictBooleanField,
    StrictIntegerField,
    StrictSerializer,
)
from api.idempotency import idempotent
from api.views import AgentRequest, ApiView
from memory.procedural import selectors, services
from memory.procedural.models import SkillVersion

MAX_SCHEMA_BYTES = 64 * 1024
MAX_STEPS_BYTES = 256 * 1024


# --- tools --------------------------------------------------------------------------------------------


class ToolInputSerializer(StrictSerializer):
    name = CleanCharField(max_length=64)
    description = CleanCharField(
        max_length=services.MAX_TEXT_CHARS, required=False, default="", allow_blank=True
    )
    input_schema = JSONObjectField(
        max_bytes=MAX_SCHEMA_BYTES, help_text="a JSON Schema 2020-12 object schema"
    )
    output_schema = JSONObjectField(
        max_bytes=MAX_SCHEMA_BYTES, help_text="a JSON Schema 2020-12 object schema"
    )


class ToolOutputSerializer(serializers.Serializer):
    name = serializers.CharField(source="tool.name")
    version = serializers.IntegerField()
    description = serializers.CharField()
    input_schema = serializers.JSONField()
    output_schema = serializers.JSONField()
    author = serializers.CharField()
    created_at = serializers.DateTimeField()


class ToolsView(ApiView):
    """``GET tools``: the newest version of every tool; ``POST tools``: create a tool or give it a
    new version (201; 200 with ``created: false`` when nothing changed)."""

    def get(self, request: AgentRequest) -> Response:
        tools = selectors.tool_list()
        return Response({"count": len(tools), "results": ToolOutputSerializer(tools, many=True).data})

    @idempotent
    def post(self, request: AgentRequest) -> Response:
        serializer = ToolInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        version, created = services.tool_save(
            actor=services.Actor(agent=request.user), **serializer.validated_data
        )
        return Response(
            {**ToolOutputSerializer(version).data, "created": created},
            status=status.HTTP_201_CREATED if created else status.HTTP_200_OK,
        )


class ToolParams(StrictSerializer):
    unknown_key_message = "Unknown query parameter."
    version = serializers.IntegerField(required=False, min_value=1)


class ToolDetailView(ApiView):
    """``GET tools/{name}``: the newest version (``?version=n``: that one), with every version number."""

    get_query_params = frozenset(ToolParams().fields)

    def get(self, request: AgentRequest, name: str) -> Response:
        params = ToolParams(data=request.query_params.dict())
        params.is_valid(raise_exception=True)
        number = params.validated_data.get("version")
        version = selectors.tool_version_get(name, number) if number else selectors.tool_latest(name)
        versions = [v.version for v in selectors.tool_versions(name)]
        return Response({**ToolOutputSerializer(version).data, "versions": versions})


# --- skills -------------------------------------------------------------------------------------------


class VersionOutputSerializer(serializers.Serializer):
    number = serializers.IntegerField()
    status = serializers.CharField()
    steps = serializers.JSONField()
    input_schema = serializers.JSONField()
    tool_versions = serializers.JSONField()
    change_note = serializers.CharField()
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
        "description": skill.description,
        "intents": skill.intents,
        "tags": skill.tags,
        "owner": skill.owner,
    }


def _skill_body(version: SkillVersion) -> dict[str, Any]:
    return {**_skill_fields(version), "version": VersionOutputSerializer(version).data}


class MatchParams(StrictSerializer):
    unknown_key_message = "Unknown query parameter."
    intent = CleanCharField(max_length=2000, help_text="the request to find a skill for, in words")
    k = serializers.IntegerField(min_value=1, max_value=selectors.MAX_K, default=5)
    success_weight = serializers.FloatField(
        min_value=0.0, max_value=1.0, default=selectors.DEFAULT_SUCCESS_WEIGHT,
        help_text="how much the published version's success rate weighs against relevance",
    )  # fmt: skip


class SkillProposalSerializer(StrictSerializer):
    name = CleanCharField(max_length=64)
    title = CleanCharField(max_length=200)
    description = CleanCharField(
        max_length=services.MAX_TEXT_CHARS, required=False, default="", allow_blank=True
    )
    intents = serializers.ListField(
        child=CleanCharField(max_length=300), max_length=services.MAX_INTENTS, default=list
    )
    tags = serializers.ListField(
        child=CleanCharField(max_length=64), max_length=services.MAX_TAGS, default=list
    )
    owner = CleanCharField(max_length=200, required=False, default="", allow_blank=True)
    input_schema = JSONObjectField(max_bytes=MAX_SCHEMA_BYTES)
    steps = JSONValueField(help_text="a list of steps (see the README's skill format)")
    change_note = CleanCharField(
        max_length=services.MAX_TEXT_CHARS, required=False, default="", allow_blank=True
    )
    session_id = CleanCharField(max_length=200, required=False, default="", allow_blank=True)


class SkillsView(ApiView):
    """``GET skills?intent=…&k=5``: the best matching published skills, with score, version and
    steps. ``POST skills``: propose a new skill (its v1 lands as a draft)."""

    get_query_params = frozenset(MatchParams().fields)

    def get(self, request: AgentRequest) -> Response:
        params = MatchParams(data=request.query_params.dict())
        params.is_valid(raise_exception=True)
        p = params.validated_data
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

    @idempotent
    def post(self, request: AgentRequest) -> Response:
        serializer = SkillProposalSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        d = serializer.validated_data
        version = services.skill_propose(
            agent=request.user,
            name=d["name"],
            data=services.SkillData(
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

    def get(self, request: AgentRequest, name: str) -> Response:
        return Response(_skill_body(selectors.skill_published(name)))


class VersionProposalSerializer(StrictSerializer):
    steps = JSONValueField(help_text="a list of steps")
    input_schema = JSONObjectField(max_bytes=MAX_SCHEMA_BYTES, required=False)
    change_note = CleanCharField(
        max_length=services.MAX_TEXT_CHARS, required=False, default="", allow_blank=True
    )
    based_on = StrictIntegerField(min_value=1, required=False)
    session_id = CleanCharField(max_length=200, required=False, default="", allow_blank=True)


class SkillVersionsView(ApiView):
    """``POST skills/{name}/versions``: propose a new version (a draft only an operator publishes)."""

    @idempotent
    def post(self, request: AgentRequest, name: str) -> Response:
        serializer = VersionProposalSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        d = serializer.validated_data
        version = services.skill_version_propose(
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

    def get(self, request: AgentRequest, name: str, number: int) -> Response:
        return Response(_skill_body(selectors.skill_version_get(name, number)))


class RunInputSerializer(StrictSerializer):
    version = StrictIntegerField(min_value=1)
    success = StrictBooleanField()
    failed_step = CleanCharField(max_length=64, required=False, default="", allow_blank=True)
    duration_ms = StrictIntegerField(min_value=0, max_value=7 * 24 * 3600 * 1000, required=False)
    session_id = CleanCharField(max_length=200, required=False, default="", allow_blank=True)
    error = CleanCharField(max_length=services.MAX_TEXT_CHARS, required=False, default="", allow_blank=True)


class SkillRunsView(ApiView):
    """``POST skills/{name}/runs``: report a run's outcome (counts toward the version's success rate)."""

    @idempotent
    def post(self, request: AgentRequest, name: str) -> Response:
        serializer = RunInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        run = services.skill_run_report(
            agent=request.user, name=name, data=services.RunData(**serializer.validated_data)
        )
        runs, successes = selectors.run_stats(run.version)
        return Response(
            {
                "id": run.pk,
                "skill": name,
                "version": run.version.number,
                "success": run.success,
                "failed_step": run.failed_step or None,
                "duration_ms": run.duration_ms,
                "session_id": run.session_id,
                "reported_at": run.reported_at,
                "version_runs": runs,
                "version_success_rate": round(successes / runs, 6) if runs else None,
            },
            status=status.HTTP_201_CREATED,
        )
