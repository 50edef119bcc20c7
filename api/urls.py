"""``/api/v1/``: the agent-facing API (tenant from the API key, not the host name)."""

from django.urls import path, re_path, register_converter

from api.docs import RedocView, SchemaView, SwaggerView
from api.rest.agents import WhoAmIView
from api.rest.checkpoints import (
    CheckpointDetailView,
    CheckpointLatestView,
    CheckpointsView,
    CheckpointTuplesAllView,
    CheckpointTuplesView,
    CheckpointWritesView,
)
from api.rest.consolidation import SessionSummaryView
from api.rest.context import ContextView
from api.rest.conversations import ExtractionView, MessagesView
from api.rest.events import EventsView
from api.rest.knowledge import (
    ContradictionsView,
    EntityFactsView,
    FactRetractView,
    FactsView,
    GraphPathView,
)
from api.rest.memories import MemoriesView, MemoryDetailView, MemoryVersionsView
from api.rest.memory_search import MemorySearchView
from api.rest.procedural import (
    SkillDetailView,
    SkillRunsView,
    SkillsView,
    SkillVersionDetailView,
    SkillVersionsView,
    ToolDetailView,
    ToolsView,
)
from api.rest.store import ItemsView, StoreNamespacesView, StoreSearchView
from api.rest.stream import execution_stream
from api.rest.working import (
    BlackboardFieldReadView,
    BlackboardFieldWriteView,
    BlackboardView,
    ExecutionCloseView,
    ScratchpadKeyView,
    ScratchpadView,
    WindowView,
)
from api.views import api_not_found


class AnyText:
    """A path segment of any characters, newlines and slashes included (an entity name is any text:
    Django's ``path`` converter stops at a newline)."""

    regex = r"[\s\S]+"

    def to_python(self, value: str) -> str:
        return value

    def to_url(self, value: str) -> str:
        return value


register_converter(AnyText, "text")

urlpatterns = [
    path("me", WhoAmIView.as_view(), name="me"),
    path("events", EventsView.as_view(), name="events"),
    path("memories", MemoriesView.as_view(), name="memories"),
    path("memories/search", MemorySearchView.as_view(), name="memory-search"),
    path("memories/<str:memory_id>", MemoryDetailView.as_view(), name="memory-detail"),
    path("memories/<str:memory_id>/versions", MemoryVersionsView.as_view(), name="memory-versions"),
    path("sessions/<str:session_id>/summary", SessionSummaryView.as_view(), name="session-summary"),
    path("sessions/<str:session_id>/messages", MessagesView.as_view(), name="session-messages"),
    path("extractions/<str:job_id>", ExtractionView.as_view(), name="extraction"),
    path("store/items", ItemsView.as_view(), name="store-items"),
    path("store/search", StoreSearchView.as_view(), name="store-search"),
    path("store/namespaces", StoreNamespacesView.as_view(), name="store-namespaces"),
    path("facts", FactsView.as_view(), name="facts"),
    path("facts/<str:fact_id>/retract", FactRetractView.as_view(), name="fact-retract"),
    path("entities/<text:name>/facts", EntityFactsView.as_view(), name="entity-facts"),
    path("graph/path", GraphPathView.as_view(), name="graph-path"),
    path("contradictions", ContradictionsView.as_view(), name="contradictions"),
    path("executions/<str:execution_id>/blackboard", BlackboardView.as_view(), name="blackboard"),
    path(
        "executions/<str:execution_id>/blackboard/<str:field>",
        BlackboardFieldWriteView.as_view(),
        name="blackboard-write",
    ),
    path(
        "executions/<str:execution_id>/blackboard/<str:agent>/<str:field>",
        BlackboardFieldReadView.as_view(),
        name="blackboard-field",
    ),
    path("executions/<str:execution_id>/scratchpad", ScratchpadView.as_view(), name="scratchpad"),
    path(
        "executions/<str:execution_id>/scratchpad/<str:key>",
        ScratchpadKeyView.as_view(),
        name="scratchpad-key",
    ),
    path("executions/<str:execution_id>/close", ExecutionCloseView.as_view(), name="execution-close"),
    path("executions/<str:execution_id>/stream", execution_stream, name="execution-stream"),
    path("sessions/<str:session_id>/window", WindowView.as_view(), name="window"),
    path("checkpoints", CheckpointTuplesAllView.as_view(), name="checkpoint-tuples-all"),
    path("sessions/<str:session_id>/checkpoints", CheckpointsView.as_view(), name="checkpoints"),
    path(
        "sessions/<str:session_id>/checkpoints/latest",
        CheckpointLatestView.as_view(),
        name="checkpoint-latest",
    ),
    path(
        "sessions/<str:session_id>/checkpoints/tuples",
        CheckpointTuplesView.as_view(),
        name="checkpoint-tuples",
    ),
    path(
        "sessions/<str:session_id>/checkpoints/writes",
        CheckpointWritesView.as_view(),
        name="checkpoint-writes",
    ),
    path(
        "sessions/<str:session_id>/checkpoints/<str:step_index>",
        CheckpointDetailView.as_view(),
        name="checkpoint-detail",
    ),
    path("context", ContextView.as_view(), name="context"),
    path("tools", ToolsView.as_view(), name="tools"),
    path("tools/<str:name>", ToolDetailView.as_view(), name="tool-detail"),
    path("skills", SkillsView.as_view(), name="skills"),
    path("skills/<str:name>", SkillDetailView.as_view(), name="skill-detail"),
    path("skills/<str:name>/versions", SkillVersionsView.as_view(), name="skill-versions"),
    path(
        "skills/<str:name>/versions/<str:number>",
        SkillVersionDetailView.as_view(),
        name="skill-version-detail",
    ),
    path("skills/<str:name>/runs", SkillRunsView.as_view(), name="skill-runs"),
    path("schema", SchemaView.as_view(authentication_classes=[], permission_classes=[]), name="schema"),
    path(
        "docs",
        SwaggerView.as_view(url_name="schema", authentication_classes=[], permission_classes=[]),
        name="docs",
    ),
    path(
        "redoc",
        RedocView.as_view(url_name="schema", authentication_classes=[], permission_classes=[]),
        name="redoc",
    ),
    # last: anything else under /api/v1/ is a JSON 404, not an HTML page
    re_path(r"^[\s\S]*$", api_not_found, name="api-not-found"),
]
