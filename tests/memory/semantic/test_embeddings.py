"""The embedders: fastembed's MiniLM, model2vec, an OpenAI-compatible endpoint (a recorded response), vector checks."""

from __future__ import annotations

import json

import httpx
import numpy as np
import pytest

from core.errors import EmbeddingMismatch, InvalidInput
from memory.embeddings import FastEmbedEmbedder, Model2VecEmbedder, OpenAIEmbedder, check_vector
from tests.factories import MODEL_DIR, SHARED_DIR, needs_shared, requires_model

STATIC_DIR = SHARED_DIR / "models" / "minilm-static-256"


@requires_model
def test_fastembed_minilm_gives_unit_384d_vectors() -> None:
    embedder = FastEmbedEmbedder("sentence-transformers/all-MiniLM-L6-v2", str(MODEL_DIR))
    vectors = embedder.embed(["Where does Alice work?", "Alice works at Acme.", "Tomatoes are red."])
    assert vectors.shape == (3, 384) and embedder.dimensions == 384
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2]


@needs_shared(STATIC_DIR, "the model2vec minilm-static-256 model")
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
    # a zero vector is malformed, not another model's (docs/decisions/0053): a 400
    with pytest.raises(InvalidInput):
        check_vector([0.0, 0.0, 0.0], model=None, embedder=_Fixed())
