"""One small interface for text embeddings, with three implementations.

- ``FastEmbedEmbedder``: ONNX models through fastembed (default: all-MiniLM-L6-v2, 384-d);
- ``Model2VecEmbedder``: static model2vec models (e.g. ``minilm-static-256``, 256-d, far faster);
- ``OpenAIEmbedder``: any OpenAI-compatible ``/embeddings`` endpoint.

Every implementation returns L2-normalised float32 vectors, so cosine similarity is a dot product.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

import numpy as np
from django.conf import settings

from core.errors import EmbeddingMismatch, InvalidInput, ServiceUnavailable
from core.timing import timed

logger = logging.getLogger(__name__)

UNAVAILABLE_MESSAGE = "The embedding model is unavailable right now; retry later."


class EmbedderUnavailable(ServiceUnavailable):
    """The configured embedder cannot be loaded or does not answer (503): nothing can be embedded,
    so nothing can be stored in or recalled from semantic memory until it is back."""

    code = "embedder_unavailable"


class Embedder(Protocol):
    """Turns texts into vectors. ``name`` is stored with each vector; ``dimensions`` is its length."""

    name: str
    dimensions: int

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Return an array of shape ``(len(texts), dimensions)``, float32, rows of unit length."""
        ...


def _normalise(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return (vectors / np.clip(norms, 1e-12, None)).astype(np.float32)


class FastEmbedEmbedder:
    """fastembed ``TextEmbedding``; ``model_path`` loads a local ONNX folder without any download."""

    def __init__(self, model_name: str, model_path: str = "", batch_size: int = 64, threads: int = 0) -> None:
        from fastembed import TextEmbedding

        self.name = model_name
        self.batch_size = batch_size
        if model_path:
            self._model = TextEmbedding(
                model_name, specific_model_path=model_path, local_files_only=True, threads=threads or None
            )
        else:
            self._model = TextEmbedding(model_name)
        self._lock = threading.Lock()  # an ONNX session is thread-safe, but batches interleave badly
        self.dimensions = int(self.embed(["dimension probe"]).shape[1])

    @timed("embed")
    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Rows in the order of ``texts``. The model runs over them shortest first, ``batch_size`` at a
        time: each batch is padded to its longest text, so similar lengths together waste no
        positions on padding (256 texts of 61-1,200 characters: 0.77 of the token positions their
        own order costs)."""
        items = list(texts)
        order = sorted(range(len(items)), key=lambda i: len(items[i]))
        with self._lock:
            vectors = np.array(
                list(self._model.embed([items[i] for i in order], batch_size=self.batch_size)),
                dtype=np.float32,
            )
        out = np.empty_like(vectors)
        out[order] = vectors
        return _normalise(out)


class Model2VecEmbedder:
    """A model2vec ``StaticModel`` loaded from a local folder or a model id."""

    def __init__(self, model_name: str, model_path: str = "") -> None:
        from model2vec import StaticModel

        self._model = StaticModel.from_pretrained(model_path or model_name)
        self.name = model_name
        self.dimensions = int(self._model.dim)

    @timed("embed")
    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return _normalise(np.asarray(self._model.encode(list(texts)), dtype=np.float32))


class OpenAIEmbedder:
    """POST ``{base_url}/embeddings`` with ``{"model", "input"}`` (OpenAI's embeddings API shape)."""

    def __init__(
        self, model_name: str, base_url: str, api_key: str = "", dimensions: int = 0, timeout: float = 10
    ) -> None:
        import httpx

        self.name = model_name
        self._client = httpx.Client(
            base_url=base_url.rstrip("/"),
            timeout=timeout,
            headers={"Authorization": f"Bearer {api_key}"} if api_key else {},
        )
        self.dimensions = dimensions or int(self.embed(["dimension probe"]).shape[1])

    @timed("embed")
    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Raises ``EmbedderUnavailable`` when the endpoint cannot be reached within the timeout,
        answers an error status, or answers something that is not a list of ``len(texts)`` vectors."""
        import httpx

        try:
            response = self._client.post("/embeddings", json={"model": self.name, "input": list(texts)})
            response.raise_for_status()
            data = sorted(response.json()["data"], key=lambda item: item["index"])
            vectors = np.array([item["embedding"] for item in data], dtype=np.float32)
        except (httpx.HTTPError, ValueError, KeyError, TypeError) as exc:
            logger.warning("embeddings endpoint %s failed: %s", self._client.base_url, exc)
            raise EmbedderUnavailable(UNAVAILABLE_MESSAGE) from exc
        if vectors.ndim != 2 or vectors.shape[0] != len(texts):
            logger.warning(
                "embeddings endpoint %s answered %s for %d texts",
                self._client.base_url,
                vectors.shape,
                len(texts),
            )
            raise EmbedderUnavailable(UNAVAILABLE_MESSAGE)
        return _normalise(vectors)


_lock = threading.Lock()


@functools.cache
def get_embedder() -> Embedder:
    """The process-wide embedder chosen by ``settings.ENGRAM`` (loaded once, on first use; a failed
    load is not remembered, so the next call tries again).

    Raises ``ImproperlyConfigured`` for an unknown ``EMBEDDER`` and ``EmbedderUnavailable`` when the
    model cannot be loaded (a missing or broken model folder, an endpoint that does not answer).
    """
    try:
        return _load_embedder()
    except EmbedderUnavailable:
        raise
    except Exception as exc:
        from django.core.exceptions import ImproperlyConfigured

        if isinstance(exc, ImproperlyConfigured):
            raise
        logger.exception("the embedding model could not be loaded")
        raise EmbedderUnavailable(UNAVAILABLE_MESSAGE) from exc


def _load_embedder() -> Embedder:
    from django.core.exceptions import ImproperlyConfigured

    conf = settings.ENGRAM
    kind = conf["EMBEDDER"]
    with _lock:
        if kind == "fastembed":
            return FastEmbedEmbedder(
                conf["EMBEDDING_MODEL"], conf["EMBEDDING_MODEL_PATH"], threads=conf["EMBEDDING_THREADS"]
            )
        if kind == "model2vec":
            path = conf["EMBEDDING_MODEL_PATH"]
            return Model2VecEmbedder(conf["EMBEDDING_MODEL"] if not path else Path(path).name, path)
        if kind == "openai":
            return OpenAIEmbedder(
                conf["EMBEDDING_MODEL"],
                conf["OPENAI_BASE_URL"],
                conf["OPENAI_API_KEY"],
                conf["EMBEDDING_DIMENSIONS"],
                timeout=conf.get("EMBEDDING_TIMEOUT", 10.0),
            )
    raise ImproperlyConfigured(f"ENGRAM_EMBEDDER must be fastembed, model2vec or openai, not {kind!r}")


@functools.lru_cache(maxsize=2048)
def embed_query(text: str) -> tuple[float, ...]:
    """Embed one query string (cached: agents repeat their questions)."""
    return tuple(float(x) for x in get_embedder().embed([text])[0])


def recall_vector(text: str) -> tuple[float, ...]:
    """The unit vector semantic recall searches with for ``text``: ``embed_query(text)``, except for
    a text of several non-blank lines (a conversation, one turn a line), where it is the normalised
    sum of that and the last line's embedding. The whole dialogue says what it is about; its latest
    turn, the one recall must answer, is one voice among many in it (and the first to fall out of
    the model's window when the dialogue is long), so it gets an equal say. Each embedding goes
    through ``embed_query``'s cache; a one-line query costs no second embedding."""
    whole = embed_query(text)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if len(lines) < 2:
        return whole
    summed = np.asarray(whole, dtype=np.float64) + np.asarray(embed_query(lines[-1]), dtype=np.float64)
    norm = float(np.linalg.norm(summed))
    return whole if norm == 0.0 else tuple(float(x) for x in summed / norm)


@functools.cache
def _vector_format(dimensions: int) -> str:
    return "[" + ",".join(["%.9g"] * dimensions) + "]"


def vector_text(vector: np.ndarray) -> str:
    """pgvector's text form of ``vector``. Nine significant digits give back every float32 exactly
    (pgvector stores float4), in one C formatting call (a third of ``repr``'s time per element)."""
    return _vector_format(len(vector)) % tuple(vector.tolist())


def check_vector(
    vector: Sequence[float], *, model: str | None, embedder: Embedder, field: str = "embedding"
) -> np.ndarray:
    """Validate a client-supplied vector against the configured embedder and normalise it.

    Raises ``EmbeddingMismatch`` when ``model`` names another model or the length differs from
    ``embedder.dimensions``; ``InvalidInput``-style errors for non-finite values.
    """
    if model is not None and model != embedder.name:
        raise EmbeddingMismatch(
            f"Vectors from '{model}' cannot be stored: this tenant's memories use '{embedder.name}'.",
            field="embedding_model",
        )
    array = np.asarray(vector, dtype=np.float32)
    if array.ndim != 1 or array.shape[0] != embedder.dimensions:
        raise EmbeddingMismatch(
            f"Expected {embedder.dimensions} dimensions ({embedder.name}), got {array.shape[0] if array.ndim == 1 else array.shape}.",
            field=field,
        )
    if not np.all(np.isfinite(array)) or not np.any(array):
        raise InvalidInput("The vector must be finite and non-zero.", field=field)
    return _normalise(array[None, :])[0]
