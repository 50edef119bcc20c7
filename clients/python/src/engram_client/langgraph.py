"""LangGraph adapters: ``EngramCheckpointSaver``, a ``BaseCheckpointSaver`` over Engram's checkpoint API,
and ``EngramStore``, a ``BaseStore`` over Engram's store (``engram_client.langgraph_store``).

Needs the ``langgraph`` extra (``pip install "engram-client[langgraph]"``).

How LangGraph's model maps onto Engram's (see the server's README, "LangGraph"):

- a ``thread_id`` is an Engram session id (1-200 of ``A-Z a-z 0-9 . _ -``); the checkpoints are
  the calling agent's own stream in that session, so two agents sharing a thread never see or
  change each other's checkpoints, and another tenant's key sees nothing;
- a ``checkpoint_id`` is the checkpoint's ``idempotency_key`` in that stream (a retried put is a
  replay; the same id with another body is a ``Conflict``), its parent id ``parent_key``, its
  ``checkpoint_ns`` the ``checkpoint_ns`` field, its metadata ``metadata`` (JSON, filterable);
- the checkpoint itself is what the saver's serializer (LangGraph's ``JsonPlusSerializer`` by
  default) makes of it, ``(type, bytes)``, sent as ``serialized: {"type", "data": base64}``: the
  server stores the bytes and never decodes them; pending writes likewise;
- its channel values travel apart, as LangGraph's Postgres savers store them: ``channels`` names
  each versioned channel's version and carries the value (serialized the same way) only for the
  versions ``new_versions`` names; the server keeps one value per (channel, version) of the
  stream and a read returns the values of the checkpoint's versions, which the saver puts back
  into ``channel_values`` (a checkpoint saved whole before reads as it was);
- newest first is the stream's save order, which for LangGraph's time-ordered ids (uuid6) is
  ``checkpoint_id`` order; ``list`` without a ``thread_id`` lists the calling agent's checkpoints in
  every session (``GET /api/v1/checkpoints``), newest saved first;
- ``delete_thread`` deletes the caller's stream in the session (every namespace and its pending
  writes), recorded as a decision in the session's trail.
"""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    get_checkpoint_id,
    get_serializable_checkpoint_metadata,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from ._adapter import ClientsHolder
from .client import AsyncEngramClient, Call, EngramClient, _segment
from .langgraph_store import EngramStore

__all__ = ["EngramCheckpointSaver", "EngramStore"]

MAX_PAGE = 500
# No Idempotency-Key header on the saver's POSTs (an empty key sends none): the checkpoint's own
# idempotency_key makes a retried put a replay, and a retried put_writes lands on the same
# (task_id, idx) rows, so the header's stored response (one more row written per call, holding the
# whole base64 payload) would buy nothing.
NO_HEADER = ""


def _serialized(serde: SerializerProtocol, value: Any) -> dict[str, str]:
    kind, data = serde.dumps_typed(value)
    return {"type": kind, "data": base64.b64encode(data).decode("ascii")}


def _loaded(serde: SerializerProtocol, value: dict[str, str]) -> Any:
    return serde.loads_typed((value["type"], base64.b64decode(value["data"])))


# a channel named by new_versions without a value at that version (LangGraph's Postgres savers' "empty")
EMPTY = {"type": "empty", "data": ""}


def _split(
    serde: SerializerProtocol, checkpoint: Checkpoint, new_versions: ChannelVersions
) -> tuple[dict[str, str], dict[str, Any]]:
    """``checkpoint`` as sent: its ``serialized`` form without the values of its versioned channels,
    and its ``channels`` (each versioned channel's version, with the value for ``new_versions``)."""
    versions = checkpoint.get("channel_versions") or {}
    values = checkpoint.get("channel_values") or {}
    channels: dict[str, Any] = {}
    for name, version in versions.items():
        channels[name] = {"version": str(version)}
        if name in new_versions:
            channels[name]["value"] = _serialized(serde, values[name]) if name in values else EMPTY
    unversioned = {name: value for name, value in values.items() if name not in versions}
    return _serialized(serde, {**checkpoint, "channel_values": unversioned}), channels


def _assembled(serde: SerializerProtocol, doc: dict[str, Any]) -> Checkpoint:
    """The checkpoint of a document: its ``serialized`` form with the values of its ``channels``
    put back into ``channel_values`` (a checkpoint saved whole has no ``channels``)."""
    checkpoint: Checkpoint = _loaded(serde, doc["serialized"])
    channels = doc.get("channels") or {}
    if channels:
        values = dict(checkpoint.get("channel_values") or {})
        for name, channel in channels.items():
            value = channel.get("value")
            if value is not None and value["type"] != EMPTY["type"]:
                values[name] = _loaded(serde, value)
        checkpoint["channel_values"] = values
    return checkpoint


def _json_metadata(metadata: CheckpointMetadata) -> dict[str, Any]:
    # metadata is filtered on by the server, so it travels as JSON (not through the serializer)
    return json.loads(json.dumps(metadata, default=str))


class _Requests:
    """The saver's API calls (shared by the sync and async methods)."""

    @staticmethod
    def thread(config: RunnableConfig) -> tuple[str, str]:
        configurable = config.get("configurable") or {}
        thread_id = configurable.get("thread_id")
        if not thread_id:
            raise ValueError(
                "EngramCheckpointSaver needs config['configurable']['thread_id'] (the session id)."
            )
        return str(thread_id), str(configurable.get("checkpoint_ns", "") or "")

    @staticmethod
    def put(
        serde: SerializerProtocol,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
        data_subject: str,
    ) -> tuple[Call, RunnableConfig]:
        thread_id, ns = _Requests.thread(config)
        serialized, channels = _split(serde, checkpoint, new_versions)
        body: dict[str, Any] = {
            "idempotency_key": checkpoint["id"],
            "checkpoint_ns": ns,
            "parent_key": get_checkpoint_id(config) or "",
            "metadata": _json_metadata(get_serializable_checkpoint_metadata(config, metadata)),
            "serialized": serialized,
            "channels": channels,
        }
        if data_subject:
            body["data_subject"] = data_subject
        call = Call("POST", f"sessions/{_segment(thread_id)}/checkpoints", json=body)
        saved: RunnableConfig = {
            "configurable": {"thread_id": thread_id, "checkpoint_ns": ns, "checkpoint_id": checkpoint["id"]}
        }
        return call, saved

    @staticmethod
    def put_writes(
        serde: SerializerProtocol,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str,
    ) -> Call:
        thread_id, ns = _Requests.thread(config)
        checkpoint_id = get_checkpoint_id(config)
        if not checkpoint_id:
            raise ValueError("put_writes needs config['configurable']['checkpoint_id'].")
        body = {
            "key": checkpoint_id,
            "checkpoint_ns": ns,
            "task_id": task_id,
            "task_path": task_path,
            "writes": [{"channel": channel, "value": _serialized(serde, value)} for channel, value in writes],
        }
        return Call("POST", f"sessions/{_segment(thread_id)}/checkpoints/writes", json=body)

    @staticmethod
    def filters(
        *,
        before: RunnableConfig | None,
        filter: dict[str, Any] | None,
        limit: int | None,
        before_ref: bool = False,
    ) -> dict[str, Any]:
        """The query of a listing: ``before`` (by key, or with ``before_ref`` by session and key),
        ``metadata`` and ``limit`` (one page at most)."""
        params: dict[str, Any] = {}
        if before is not None and (before_id := get_checkpoint_id(before)):
            if before_ref:
                before_thread, _ = _Requests.thread(before)
                params["before"] = json.dumps({"session_id": before_thread, "key": before_id})
            else:
                params["before"] = before_id
        if filter:
            params["metadata"] = json.dumps(filter, separators=(",", ":"))
        if limit is not None:
            params["limit"] = max(1, min(limit, MAX_PAGE))
        return params

    @staticmethod
    def list_call(
        config: RunnableConfig | None,
        filter: dict[str, Any] | None,
        before: RunnableConfig | None,
        limit: int | None,
    ) -> Call:
        configurable = (config or {}).get("configurable") or {}
        params: dict[str, Any] = {}
        if "checkpoint_ns" in configurable:
            params["checkpoint_ns"] = str(configurable["checkpoint_ns"] or "")
        if not configurable.get("thread_id"):  # every session of the agent
            params.update(_Requests.filters(before=before, filter=filter, limit=limit, before_ref=True))
            return Call("GET", "checkpoints", params=params)
        if configurable.get("checkpoint_id"):
            params["key"] = configurable["checkpoint_id"]
        params.update(_Requests.filters(before=before, filter=filter, limit=limit))
        thread_id, _ = _Requests.thread(config)  # type: ignore[arg-type]  # it names a thread
        return Call("GET", f"sessions/{_segment(thread_id)}/checkpoints/tuples", params=params)

    @staticmethod
    def get_call(config: RunnableConfig) -> Call:
        thread_id, ns = _Requests.thread(config)
        params: dict[str, Any] = {"checkpoint_ns": ns, "limit": 1}
        if key := get_checkpoint_id(config):
            params["key"] = key
        return Call("GET", f"sessions/{_segment(thread_id)}/checkpoints/tuples", params=params)

    @staticmethod
    def tuple_of(serde: SerializerProtocol, doc: dict[str, Any]) -> CheckpointTuple | None:
        if doc.get("serialized") is None:  # a checkpoint saved through the plain API, not by LangGraph
            return None
        thread_id, ns, parent = doc["session_id"], doc["checkpoint_ns"], doc.get("parent_key")
        return CheckpointTuple(
            config={
                "configurable": {
                    "thread_id": thread_id,
                    "checkpoint_ns": ns,
                    "checkpoint_id": doc["idempotency_key"],
                }
            },
            checkpoint=_assembled(serde, doc),
            metadata=doc["metadata"],
            parent_config=(
                {"configurable": {"thread_id": thread_id, "checkpoint_ns": ns, "checkpoint_id": parent}}
                if parent
                else None
            ),
            pending_writes=[
                (w["task_id"], w["channel"], _loaded(serde, w["value"])) for w in doc["pending_writes"]
            ],
        )


class EngramCheckpointSaver(ClientsHolder, BaseCheckpointSaver[str]):
    """A LangGraph checkpointer that keeps its checkpoints in Engram, as one agent (its API key).

    ``base_url`` and ``api_key`` as for ``EngramClient`` (or pass ready ``client`` /
    ``async_client``); ``serde``: LangGraph's serializer protocol (default ``JsonPlusSerializer``);
    ``data_subject``: the person every checkpoint is about (what Engram's erasures and legal holds
    target), or "". The sync methods use an ``EngramClient``, the async ones an
    ``AsyncEngramClient`` (made on first use). Raises the client's ``EngramError`` subclasses
    (``InvalidInput`` for a thread id that is not a valid session id, ``Conflict`` for a
    checkpoint id saved before with another body) and ``TransportError``.
    """

    def __init__(
        self,
        base_url: str = "",
        api_key: str = "",
        *,
        client: EngramClient | None = None,
        async_client: AsyncEngramClient | None = None,
        serde: SerializerProtocol | None = None,
        data_subject: str = "",
        timeout: float = 30.0,
    ) -> None:
        super().__init__(serde=serde)
        self._clients_init("EngramCheckpointSaver", base_url, api_key, client, async_client, timeout)
        self.data_subject = data_subject

    # --- sync ------------------------------------------------------------------------------

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint ``config`` names (``checkpoint_id``), or the latest of its namespace; ``None``
        when there is none."""
        page = self.client.send(_Requests.get_call(config))
        return next((t for doc in page["results"] if (t := _Requests.tuple_of(self.serde, doc))), None)

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """The thread's checkpoints newest first (of its namespace when ``config`` names one, else of
        all), those whose metadata holds ``filter``, saved before ``before``, at most ``limit``.
        Without a ``thread_id`` (``config`` ``None``), the agent's checkpoints in every session, in
        its save order; ``before`` then names its thread too."""
        call = _Requests.list_call(config, filter, before, limit)
        left = limit
        for doc in self.client.items(call):
            found = _Requests.tuple_of(self.serde, doc)
            if found is None:
                continue
            yield found
            if left is not None:
                left -= 1
                if left <= 0:
                    return

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Save ``checkpoint`` as the next checkpoint of the thread's stream, with the values of the
        channels ``new_versions`` names only (the others are stored at their versions already);
        returns its config."""
        call, saved = _Requests.put(self.serde, config, checkpoint, metadata, new_versions, self.data_subject)
        self.client.send(call, idempotency_key=NO_HEADER)
        return saved

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Store a task's writes against the checkpoint ``config`` names (LangGraph's ``idx`` rule:
        special channels replace, other writes are kept once)."""
        if writes:
            self.client.send(
                _Requests.put_writes(self.serde, config, writes, task_id, task_path),
                idempotency_key=NO_HEADER,
            )

    def delete_thread(self, thread_id: str) -> None:
        """Delete the caller's checkpoints and writes in the session ``thread_id`` (recorded in its trail)."""
        self.client.send(Call("DELETE", f"sessions/{_segment(str(thread_id))}/checkpoints"))

    # --- async -----------------------------------------------------------------------------

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """See ``get_tuple``."""
        page = await self.async_client.send(_Requests.get_call(config))
        return next((t for doc in page["results"] if (t := _Requests.tuple_of(self.serde, doc))), None)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """See ``list``."""
        call = _Requests.list_call(config, filter, before, limit)
        left = limit
        async for doc in self.async_client.items(call):
            found = _Requests.tuple_of(self.serde, doc)
            if found is None:
                continue
            yield found
            if left is not None:
                left -= 1
                if left <= 0:
                    return

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """See ``put``."""
        call, saved = _Requests.put(self.serde, config, checkpoint, metadata, new_versions, self.data_subject)
        await self.async_client.send(call, idempotency_key=NO_HEADER)
        return saved

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """See ``put_writes``."""
        if writes:
            await self.async_client.send(
                _Requests.put_writes(self.serde, config, writes, task_id, task_path),
                idempotency_key=NO_HEADER,
            )

    async def adelete_thread(self, thread_id: str) -> None:
        """See ``delete_thread``."""
        await self.async_client.send(Call("DELETE", f"sessions/{_segment(str(thread_id))}/checkpoints"))

    def get_next_version(self, current: str | None, channel: None) -> str:
        """Channel versions as ``<n:032>.<random:016>`` strings, as LangGraph's own savers make them
        (monotonic, comparable as text)."""
        import random

        current_v = 0 if current is None else int(str(current).split(".")[0])
        return f"{current_v + 1:032}.{random.random():016}"
