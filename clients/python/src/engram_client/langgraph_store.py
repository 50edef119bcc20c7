"""``EngramStore``: a LangGraph ``BaseStore`` (long-term memory shared by a graph's runs) over Engram.

Re-exported by ``engram_client.langgraph``; needs the ``langgraph`` extra. How LangGraph's model maps
onto Engram's (see the server's README, "EngramStore"):

- an item is ``(namespace, key) -> value`` in the tenant's store (``/api/v1/store/...``), shared by
  every agent of the tenant (another tenant's key sees nothing); a namespace travels as a list of
  labels in JSON bodies and as its labels joined by "." in query strings (LangGraph forbids "."
  in a label, so the form is unambiguous);
- ``PutOp`` with a value is ``POST store/items`` (create or replace), with ``value=None`` it is
  ``DELETE store/items``; ``GetOp`` is ``GET store/items``; ``SearchOp`` is ``POST store/search``
  (ranked by Engram's hybrid recall when it has a ``query``); ``ListNamespacesOp`` is
  ``GET store/namespaces``;
- ``index``: the server embeds with the tenant's model, so of LangGraph's ``IndexConfig`` only
  ``fields`` matters (default ``["$"]``, the whole value); ``dims`` and ``embed`` are ignored;
- TTLs are in minutes as in LangGraph, kept by the server (reads refresh them unless told not to,
  the server's sweep deletes expired items, reads never return them).

A batch runs its operations one after another, in order (a get after a put of the same item in one
batch sees the put); results come back in the order of the operations.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from langgraph.store.base import (
    BaseStore,
    GetOp,
    IndexConfig,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
)

from ._adapter import ClientsHolder
from .client import AsyncEngramClient, Call, EngramClient
from .errors import NotFound


def _dotted(namespace: Sequence[str], what: str) -> str:
    for label in namespace:
        if not isinstance(label, str) or not label or "." in label:
            raise InvalidNamespaceError(
                f"Invalid {what} {tuple(namespace)!r}: labels are non-empty strings without '.'."
            )
    return ".".join(namespace)


def _when(value: str) -> datetime:
    return datetime.fromisoformat(value)


def _item(doc: dict[str, Any]) -> Item:
    return Item(
        value=doc["value"],
        key=doc["key"],
        namespace=tuple(doc["namespace"]),
        created_at=_when(doc["created_at"]),
        updated_at=_when(doc["updated_at"]),
    )


def _search_item(doc: dict[str, Any]) -> SearchItem:
    return SearchItem(
        namespace=tuple(doc["namespace"]),
        key=doc["key"],
        value=doc["value"],
        created_at=_when(doc["created_at"]),
        updated_at=_when(doc["updated_at"]),
        score=doc.get("score"),
    )


class _Requests:
    """The store's operations as API calls, and how each answer becomes LangGraph's result."""

    def __init__(self, fields: list[str] | None, data_subject: str) -> None:
        self.fields = fields
        self.data_subject = data_subject

    def call(self, op: Op) -> Call:
        if isinstance(op, GetOp):
            params: dict[str, Any] = {
                "namespace": _dotted(op.namespace, "namespace"),
                "key": op.key,
                "refresh_ttl": "true" if op.refresh_ttl else "false",
            }
            return Call("GET", "store/items", params=params)
        if isinstance(op, PutOp):
            if op.value is None:
                params = {"namespace": _dotted(op.namespace, "namespace"), "key": op.key}
                return Call("DELETE", "store/items", params=params)
            index: Any = op.index if op.index is not None else self.fields
            body: dict[str, Any] = {
                "namespace": list(op.namespace),
                "key": op.key,
                "value": op.value,
                "index": index,
                "ttl": op.ttl,
            }
            if self.data_subject:
                body["data_subject"] = self.data_subject
            return Call("POST", "store/items", json=body)
        if isinstance(op, SearchOp):
            body = {
                "namespace_prefix": list(op.namespace_prefix),
                "query": op.query,
                "filter": op.filter or {},
                "limit": op.limit,
                "offset": op.offset,
                "refresh_ttl": op.refresh_ttl,
            }
            return Call("POST", "store/search", json=body)
        if isinstance(op, ListNamespacesOp):
            params = {"limit": op.limit, "offset": op.offset}
            for condition in op.match_conditions or ():
                if condition.match_type not in ("prefix", "suffix"):
                    raise ValueError(f"Unsupported match type {condition.match_type!r}.")
                if condition.match_type in params:
                    raise ValueError(f"EngramStore takes one {condition.match_type} condition per listing.")
                params[condition.match_type] = _dotted(condition.path, condition.match_type)
            if op.max_depth is not None:
                params["max_depth"] = op.max_depth
            return Call("GET", "store/namespaces", params=params)
        raise ValueError(f"Unknown operation type: {type(op).__name__}")

    @staticmethod
    def result(op: Op, body: Any) -> Result:
        if isinstance(op, GetOp):
            return None if body is None else _item(body)
        if isinstance(op, PutOp):
            return None
        if isinstance(op, SearchOp):
            return [_search_item(doc) for doc in body["results"]]
        return [tuple(ns) for ns in body["results"]]


class EngramStore(ClientsHolder, BaseStore):
    """LangGraph's ``BaseStore`` kept in Engram, as one agent (its API key), shared with the
    tenant's other agents.

    ``base_url`` and ``api_key`` as for ``EngramClient`` (or pass ready ``client`` /
    ``async_client``); ``index``: LangGraph's index config, of which ``fields`` (default
    ``["$"]``) says what a put indexes when its ``index`` argument is None; ``data_subject``: the
    person every item written is about (Engram's erasures and legal holds target it), or "";
    ``ttl``: LangGraph's ``TTLConfig`` (``default_ttl`` minutes, ``refresh_on_read``). Raises the
    client's ``EngramError`` subclasses (``InvalidInput`` naming the field, e.g. ``value`` for a
    value that is not an object) and ``InvalidNamespaceError`` for a label LangGraph refuses.
    """

    supports_ttl = True

    def __init__(
        self,
        base_url: str = "",
        api_key: str = "",
        *,
        index: IndexConfig | None = None,
        data_subject: str = "",
        ttl: TTLConfig | None = None,
        client: EngramClient | None = None,
        async_client: AsyncEngramClient | None = None,
        timeout: float = 30.0,
    ) -> None:
        self._clients_init("EngramStore", base_url, api_key, client, async_client, timeout)
        self.index_config = index
        self.ttl_config = ttl
        fields = list(index.get("fields") or ["$"]) if index else None
        self._requests = _Requests(fields, data_subject)

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run ``ops`` in order (see the module docstring); one result per operation: an ``Item`` or
        None for a get, None for a put, a list of ``SearchItem`` for a search, a list of namespace
        tuples for a listing."""
        results: list[Result] = []
        for op in ops:
            call = self._requests.call(op)
            try:
                body = self.client.send(call)
            except NotFound as exc:
                if not (isinstance(op, GetOp) and "key" in exc.errors):  # not "no such item"
                    raise
                body = None
            results.append(self._requests.result(op, body))
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """See ``batch``."""
        results: list[Result] = []
        for op in ops:
            call = self._requests.call(op)
            try:
                body = await self.async_client.send(call)
            except NotFound as exc:
                if not (isinstance(op, GetOp) and "key" in exc.errors):  # not "no such item"
                    raise
                body = None
            results.append(self._requests.result(op, body))
        return results
