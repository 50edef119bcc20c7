"""``/api/v1/``: the agent-facing API (tenant from the API key, not the host name)."""

from django.urls import path
from drf_spectacular.views import SpectacularAPIView

from agents.api.views import WhoAmIView
from memory.api.events import EventsView
from memory.api.memories import MemoriesView, MemoryDetailView, MemorySearchView

urlpatterns = [
    path("me", WhoAmIView.as_view(), name="me"),
    path("events", EventsView.as_view(), name="events"),
    path("memories", MemoriesView.as_view(), name="memories"),
    path("memories/search", MemorySearchView.as_view(), name="memory-search"),
    path("memories/<uuid:memory_id>", MemoryDetailView.as_view(), name="memory-detail"),
    path(
        "schema", SpectacularAPIView.as_view(authentication_classes=[], permission_classes=[]), name="schema"
    ),
]
