"""``/api/v1/sessions/{id}/summary``: the episodic summary tree of a session (consolidation)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response

from api.fields import StrictQueryInteger, StrictSerializer
from api.views import AgentRequest, ApiView
from memory.consolidation import selectors


class SummaryParams(StrictSerializer):
    unknown_key_message = "Unknown query parameter."
    level = StrictQueryInteger(
        required=False, min_value=1, max_value=64, help_text="one level only (1: the leaves)"
    )


class SummaryNodeSerializer(serializers.Serializer):
    """A node of the tree: the events of the session with ``first_seq <= seq <= last_seq``
    (``event_count``), the hash of the last of them (``last_event_hash``, to check against the log),
    and its summary (``content``; ``memory_id`` is its searchable semantic memory)."""

    id = serializers.IntegerField()
    level = serializers.IntegerField(help_text="1: a leaf over events; above: a summary of summaries")
    position = serializers.IntegerField(help_text="0, 1, ... within its level, in event order")
    first_seq = serializers.IntegerField()
    last_seq = serializers.IntegerField()
    event_count = serializers.IntegerField()
    child_count = serializers.IntegerField(help_text="nodes of the level below it covers (0 for a leaf)")
    last_event_hash = serializers.CharField()
    method = serializers.ChoiceField(choices=["extractive", "abstractive"])
    content = serializers.CharField()
    memory_id = serializers.UUIDField(allow_null=True)
    updated_at = serializers.DateTimeField()


class SummaryTreeSerializer(serializers.Serializer):
    session_id = serializers.CharField()
    depth = serializers.IntegerField(
        help_text="levels of the tree; the root is the one node of the top level"
    )
    results = SummaryNodeSerializer(many=True, help_text="root first, then level by level, in event order")


class SessionSummaryView(ApiView):
    """The summary tree of a session (read by any agent of the tenant, like the episodic log)."""

    get_query_params = frozenset(SummaryParams().fields)

    @extend_schema(
        operation_id="session_summary",
        summary="The summary tree of a session",
        parameters=[SummaryParams],
        responses={200: SummaryTreeSerializer},
        tags=["episodic"],
    )
    def get(self, request: AgentRequest, session_id: str) -> Response:
        params = self.query(SummaryParams)
        nodes = list(selectors.summary_tree(session_id=session_id, level=params.get("level")))
        body = {"session_id": session_id, "depth": selectors.summary_depth(session_id), "results": nodes}
        return Response(SummaryTreeSerializer(body).data)
