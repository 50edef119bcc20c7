"""Embedders (the three implementations) and the admin pages for agents and keys."""

from __future__ import annotations

import json

import httpx
import numpy as np
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django_tenants.utils import tenant_context

from agents.models import ApiKey
from core.errors import EmbeddingMismatch
from memory.embeddings import FastEmbedEmbedder, Model2VecEmbedder, OpenAIEmbedder, check_vector

from .conftest import MODEL_DIR, SHARED_DIR, Caller, requires_model

STATIC_DIR = SHARED_DIR / "models" / "minilm-static-256"


@requires_model
def test_fastembed_minilm_gives_unit_384d_vectors() -> None:
    embedder = FastEmbedEmbedder("sentence-transformers/all-MiniLM-L6-v2", str(MODEL_DIR))
    vectors = embedder.embed(["Where does Alice work?", "Alice works at Acme.", "Tomatoes are red."])
    assert vectors.shape == (3, 384) and embedder.dimensions == 384
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2]


@pytest.mark.skipif(not STATIC_DIR.exists(), reason=f"model2vec model not found at {STATIC_DIR}")
def test_model2vec_static_model_gives_unit_256d_vectors() -> None:
    embedder = Model2VecEmbedder("minilm-static-256", str(STATIC_DIR))
    vectors = embedder.embed(["Where does Alice work?", "Alice works at Acme.", "Tomatoes are red."])
    assert vectors.shape == (3, 256) and embedder.dimensions == 256
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2]


def test_openai_compatible_embedder_replays_a_recorded_response(monkeypatch: pytest.MonkeyPatch) -> None:
    # a response recorded in the shape of OpenAI's /v1/embeddings (data out of order on purpose)
    recorded = {
        "object": "list",
        "model": "text-embedding-3-small",
        "data": [
            {"object": "embedding", "index": 1, "embedding": [0.0, 3.0, 4.0]},
            {"object": "embedding", "index": 0, "embedding": [1.0, 0.0, 0.0]},
        ],
    }
    seen: list[dict] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(
            {
                "url": str(request.url),
                "auth": request.headers.get("authorization"),
                "body": json.loads(request.content),
            }
        )
        return httpx.Response(200, json=recorded)

    real_client = httpx.Client
    monkeypatch.setattr(
        httpx, "Client", lambda **kw: real_client(transport=httpx.MockTransport(handler), **kw)
    )
    embedder = OpenAIEmbedder(
        "text-embedding-3-small", "http://embeddings.invalid/v1", "sk-test", dimensions=3
    )
    vectors = embedder.embed(["a", "b"])
    assert seen == [
        {
            "url": "http://embeddings.invalid/v1/embeddings",
            "auth": "Bearer sk-test",
            "body": {"model": "text-embedding-3-small", "input": ["a", "b"]},
        }
    ]
    assert np.allclose(vectors, [[1, 0, 0], [0, 0.6, 0.8]])


class _Fixed:
    name = "model-a"
    dimensions = 3


def test_vectors_from_another_model_or_dimension_are_refused() -> None:
    assert np.allclose(check_vector([3.0, 0, 4.0], model="model-a", embedder=_Fixed()), [0.6, 0, 0.8])
    with pytest.raises(EmbeddingMismatch) as other_model:
        check_vector([1.0, 0, 0], model="model-b", embedder=_Fixed())
    assert other_model.value.field == "embedding_model"
    with pytest.raises(EmbeddingMismatch) as other_dims:
        check_vector([1.0, 0], model=None, embedder=_Fixed())
    assert other_dims.value.field == "embedding"
    with pytest.raises(EmbeddingMismatch):
        check_vector([0.0, 0.0, 0.0], model=None, embedder=_Fixed())


def test_event_list_query_count_does_not_grow_with_rows(alice: Caller) -> None:
    def queries_for_listing() -> int:
        with CaptureQueriesContext(connection) as ctx:
            assert alice.get("/api/v1/events").status_code == 200
        return len(ctx.captured_queries)

    alice.post(
        "/api/v1/events",
        [{"session_id": "s", "kind": "message", "content": "x", "occurred_at": "2026-01-01T00:00:00Z"}],
    )
    few = queries_for_listing()
    alice.post(
        "/api/v1/events",
        [
            {"session_id": "s", "kind": "message", "content": str(i), "occurred_at": "2026-01-01T00:00:00Z"}
            for i in range(50)
        ],
    )
    assert queries_for_listing() == few


def _login(client, tenant, username: str = "op") -> None:  # type: ignore[no-untyped-def]
    from django.contrib.auth import get_user_model

    with tenant_context(tenant):
        get_user_model().objects.create_superuser(username, f"{username}@example.com", "pw-123456789")
    host = f"{tenant.schema_name}.localhost"
    client.post("/admin/login/", {"username": username, "password": "pw-123456789"}, HTTP_HOST=host)


def test_admin_mints_a_key_shown_once_and_revokes_it(alice: Caller, client) -> None:  # type: ignore[no-untyped-def]
    _login(client, alice.tenant)
    host = {"HTTP_HOST": "alpha.localhost"}
    response = client.post(
        "/admin/agents/agent/",
        {"action": "mint_read_only_key", "_selected_action": [alice.agent.pk]},
        follow=True,
        **host,
    )
    page = response.content.decode()
    assert "it will not be shown again" in page
    raw = page.split("shown again): ")[1].split("<")[0].strip()
    assert raw.startswith("egm.alpha.")
    alice.client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert alice.get("/api/v1/me").json()["scopes"] == ["read"]
    with tenant_context(alice.tenant):
        key = ApiKey.objects.get(key_id=raw.split(".")[2])
    client.post("/admin/agents/apikey/", {"action": "revoke", "_selected_action": [key.pk]}, **host)
    assert alice.get("/api/v1/me").status_code == 401
    # the key list never shows a secret
    assert raw.split(".")[3] not in client.get("/admin/agents/apikey/", **host).content.decode()


def test_platform_admin_lists_tenants_only_on_the_public_host(tenant_a, client) -> None:  # type: ignore[no-untyped-def]
    from django.contrib.auth import get_user_model

    get_user_model().objects.create_superuser("root", "root@example.com", "pw-123456789")
    client.post("/admin/login/", {"username": "root", "password": "pw-123456789"}, HTTP_HOST="localhost")
    page = client.get("/admin/tenants/tenant/", HTTP_HOST="localhost")
    assert page.status_code == 200 and "alpha" in page.content.decode()
    # the platform superuser is not a user of tenant alpha
    assert client.get("/admin/", HTTP_HOST="alpha.localhost").status_code == 302
