"""``EngramStore`` (clients/python, ``engram_client.langgraph``) against a live Engram: a real uvicorn
process on the test database, as LangGraph code uses a ``BaseStore``. LangGraph ships no store
conformance suite (``langgraph-checkpoint-conformance`` covers checkpointers only), so this is the
``BaseStore`` contract as LangGraph documents it: put / get / update / delete, namespaces listed by
prefix, suffix (with "*"), depth and page, search by filter and by query, TTLs, a batch of mixed
operations in order, the async methods, and bad input as clear errors; then sharing within a
tenant, nothing across tenants, and a graph node using the store."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from django.db.models import F
from django.utils import timezone
from django_tenants.utils import tenant_context
from engram_client import InvalidInput
from engram_client.langgraph import EngramStore
from langgraph.store.base import GetOp, InvalidNamespaceError, ListNamespacesOp, PutOp, SearchOp

from memory.store.models import StoreItem
from tenants.models import Tenant
from tests.factories import asgi_server, make_caller, requires_model


@pytest.fixture
def base_url(scratch_tenant: Tenant) -> Iterator[str]:
    with asgi_server() as port:
        yield f"http://127.0.0.1:{port}"


@pytest.fixture
def store(scratch_tenant: Tenant, base_url: str) -> Iterator[EngramStore]:
    caller = make_caller(scratch_tenant, "lg-store")
    with EngramStore(base_url, caller.key, index={"dims": 384, "embed": "ignored", "fields": ["text"]}) as s:
        yield s


@requires_model
def test_put_get_update_delete(store: EngramStore) -> None:
    assert store.get(("users", "u1"), "prefs") is None
    store.put(("users", "u1"), "prefs", {"text": "likes dark mode", "size": 3})
    item = store.get(("users", "u1"), "prefs")
    assert item is not None and item.namespace == ("users", "u1") and item.key == "prefs"
    assert item.value == {"text": "likes dark mode", "size": 3}
    assert item.created_at.tzinfo is not None and item.created_at.utcoffset() == UTC.utcoffset(None)
    store.put(("users", "u1"), "prefs", {"text": "likes light mode"})
    updated = store.get(("users", "u1"), "prefs")
    assert updated is not None and updated.value == {"text": "likes light mode"}
    assert updated.created_at == item.created_at and updated.updated_at > item.updated_at
    store.delete(("users", "u1"), "prefs")
    assert store.get(("users", "u1"), "prefs") is None
    store.delete(("users", "u1"), "prefs")  # deleting what is not there is no error


def test_list_namespaces(store: EngramStore) -> None:
    for ns in (("a", "b", "c"), ("a", "b", "d", "e"), ("a", "x"), ("z", "b", "c"), ("z", "y")):
        store.put(ns, "k", {"v": 1}, index=False)
    assert store.list_namespaces() == [
        ("a", "b", "c"),
        ("a", "b", "d", "e"),
        ("a", "x"),
        ("z", "b", "c"),
        ("z", "y"),
    ]
    assert store.list_namespaces(prefix=("a",)) == [("a", "b", "c"), ("a", "b", "d", "e"), ("a", "x")]
    assert store.list_namespaces(prefix=("a", "b")) == [("a", "b", "c"), ("a", "b", "d", "e")]
    assert store.list_namespaces(suffix=("c",)) == [("a", "b", "c"), ("z", "b", "c")]
    assert store.list_namespaces(prefix=("*", "b")) == [
        ("a", "b", "c"),
        ("a", "b", "d", "e"),
        ("z", "b", "c"),
    ]
    assert store.list_namespaces(prefix=("a",), suffix=("e",)) == [("a", "b", "d", "e")]
    assert store.list_namespaces(max_depth=2) == [("a", "b"), ("a", "x"), ("z", "b"), ("z", "y")]
    assert store.list_namespaces(prefix=("a",), max_depth=1) == [("a",)]
    assert store.list_namespaces(limit=2) == [("a", "b", "c"), ("a", "b", "d", "e")]
    assert store.list_namespaces(limit=2, offset=3) == [("z", "b", "c"), ("z", "y")]
    assert store.list_namespaces(prefix=("nothing",)) == []


def test_search_by_filter(store: EngramStore) -> None:
    for i in range(5):
        store.put(
            ("docs",),
            f"d{i}",
            {"n": i, "tag": "even" if i % 2 == 0 else "odd", "m": {"x": i % 3}},
            index=False,
        )
    store.put(("elsewhere",), "e", {"n": 1, "tag": "odd"}, index=False)

    def keys(**kwargs: object) -> list[str]:
        return [r.key for r in store.search(("docs",), **kwargs)]  # type: ignore[arg-type]

    assert sorted(keys()) == [f"d{i}" for i in range(5)]
    assert sorted(keys(filter={"tag": "odd"})) == ["d1", "d3"]
    assert sorted(keys(filter={"n": {"$gt": 1, "$lte": 3}})) == ["d2", "d3"]
    assert sorted(keys(filter={"n": {"$ne": 2}, "tag": "even"})) == ["d0", "d4"]
    assert sorted(keys(filter={"m": {"x": 1}})) == ["d1", "d4"]
    assert sorted(keys(filter={"n": {"$eq": 4}})) == ["d4"]
    page = keys(limit=2) + keys(limit=2, offset=2) + keys(limit=2, offset=4)
    assert sorted(page) == [f"d{i}" for i in range(5)]
    assert all(r.score is None for r in store.search(("docs",)))
    assert sorted(r.key for r in store.search((), filter={"tag": "odd", "n": 1})) == ["d1", "e"]


@requires_model
def test_search_by_query_ranks_the_relevant_item_first(store: EngramStore) -> None:
    memories = {
        "pets": "Sam has a golden retriever named Biscuit",
        "food": "Sam is vegetarian and loves mushroom risotto",
        "job": "Sam teaches mathematics at a secondary school",
        "music": "Sam plays the cello in a community orchestra",
    }
    for key, text in memories.items():
        store.put(("memories", "sam"), key, {"text": text, "source": "chat"})
    for query, best in (
        ("What does Sam eat?", "food"),
        ("Does Sam own a dog?", "pets"),
        ("Sam's profession", "job"),
        ("Which instrument does Sam play", "music"),
    ):
        results = store.search(("memories",), query=query, limit=4)
        assert results[0].key == best, (query, [(r.key, r.score) for r in results])
        assert all(isinstance(r.score, float) for r in results)
        assert [r.score for r in results] == sorted((r.score for r in results), reverse=True)  # type: ignore[misc]
    assert [r.key for r in store.search(("memories",), query="dog", filter={"source": "email"})] == []


def _expiry(tenant: Tenant, key: str) -> datetime | None:
    with tenant_context(tenant):
        return StoreItem.objects.get(namespace=["tmp"], key=key).expires_at


def _elapse(tenant: Tenant, key: str, seconds: float) -> datetime:
    """As if ``seconds`` passed for the item's TTL: its expiry moved that much earlier (the server
    compares it with its own clock, which the test cannot move). Returns the new expiry."""
    with tenant_context(tenant):
        items = StoreItem.objects.filter(namespace=["tmp"], key=key)
        assert items.update(expires_at=F("expires_at") - timedelta(seconds=seconds)) == 1
    expiry = _expiry(tenant, key)
    assert expiry is not None
    return expiry


def test_ttl(store: EngramStore, scratch_tenant: Tenant) -> None:
    before = timezone.now()
    store.put(("tmp",), "short", {"v": 1}, index=False, ttl=1.0)  # minutes
    store.put(("tmp",), "kept", {"v": 2}, index=False, ttl=None)
    first = _expiry(scratch_tenant, "short")
    assert first is not None
    assert before + timedelta(minutes=1) <= first <= timezone.now() + timedelta(minutes=1)
    assert _expiry(scratch_tenant, "kept") is None
    _elapse(scratch_tenant, "short", 50)
    asked = timezone.now()
    assert store.get(("tmp",), "short", refresh_ttl=True) is not None  # a minute more from here
    refreshed = _expiry(scratch_tenant, "short")
    assert refreshed is not None and refreshed >= asked + timedelta(minutes=1)
    left = _elapse(scratch_tenant, "short", 40)
    assert first - timedelta(seconds=90) < timezone.now() < left  # past the first expiry, within the new one
    assert store.get(("tmp",), "short", refresh_ttl=False) is not None
    assert _expiry(scratch_tenant, "short") == left  # a read without refresh leaves the clock alone
    _elapse(scratch_tenant, "short", 30)
    assert store.get(("tmp",), "short", refresh_ttl=False) is None
    assert [r.key for r in store.search(("tmp",))] == ["kept"]


def test_a_batch_runs_mixed_operations_in_order(store: EngramStore) -> None:
    results = store.batch(
        [
            PutOp(("b", "1"), "k", {"v": 1}, index=False),
            GetOp(("b", "1"), "k"),
            PutOp(("b", "2"), "k", {"v": 2}, index=False),
            SearchOp(("b",), filter={"v": {"$gte": 1}}),
            ListNamespacesOp(max_depth=2),
            PutOp(("b", "1"), "k", None),
            GetOp(("b", "1"), "k"),
        ]
    )
    assert results[0] is None and results[2] is None and results[5] is None
    assert results[1] is not None and results[1].value == {"v": 1}  # type: ignore[union-attr]
    assert sorted(i.key + str(i.value["v"]) for i in results[3]) == ["k1", "k2"]  # type: ignore[union-attr]
    assert results[4] == [("b", "1"), ("b", "2")]
    assert results[6] is None


def test_the_async_methods(store: EngramStore) -> None:
    async def run() -> None:
        await store.aput(("async", "x"), "k", {"text": "hello there", "n": 5}, index=False)
        item = await store.aget(("async", "x"), "k")
        assert item is not None and item.value["n"] == 5
        found = await store.asearch(("async",), filter={"n": 5})
        assert [r.key for r in found] == ["k"]
        assert await store.alist_namespaces(prefix=("async",)) == [("async", "x")]
        results = await store.abatch([GetOp(("async", "x"), "k"), PutOp(("async", "x"), "k", None)])
        assert results[0] is not None and results[1] is None
        await store.adelete(("async", "x"), "k")
        assert await store.aget(("async", "x"), "k") is None
        await store.aclose()

    asyncio.run(run())


def test_bad_input_is_a_clear_error(store: EngramStore) -> None:
    for namespace in (("a.b",), ("ok", ""), (), ("langgraph", "x")):
        with pytest.raises(InvalidNamespaceError):
            store.put(namespace, "k", {"v": 1})
    # past LangGraph's own checks (a batch is not validated by BaseStore), the server refuses
    with pytest.raises(InvalidInput) as bad_label:
        store.batch([PutOp(("a.b",), "k", {"v": 1})])
    assert "namespace[0]" in bad_label.value.errors
    with pytest.raises(InvalidInput) as not_an_object:
        store.put(("ok",), "k", [1, 2])  # type: ignore[arg-type]
    assert "value" in not_an_object.value.errors
    with pytest.raises(InvalidInput) as bad_filter:
        store.search(("ok",), filter={"n": {"$regex": "x"}})
    assert "filter.n.$regex" in bad_filter.value.errors
    with pytest.raises(InvalidNamespaceError):
        store.get(("a.b",), "k")


def test_a_teammate_shares_the_store_and_another_tenant_sees_nothing(
    scratch_tenant: Tenant, base_url: str
) -> None:
    owner = make_caller(scratch_tenant, "lg-owner")
    teammate = make_caller(scratch_tenant, "lg-teammate")
    outsider = make_caller(Tenant.objects.get(schema_name="beta"), "lg-outsider")
    with EngramStore(base_url, owner.key) as store:
        store.put(("shared",), "plan", {"step": 1}, index=False)
    with EngramStore(base_url, teammate.key) as store:
        item = store.get(("shared",), "plan")
        assert item is not None and item.value == {"step": 1}
        store.put(("shared",), "plan", {"step": 2}, index=False)
    with EngramStore(base_url, outsider.key) as store:
        assert store.get(("shared",), "plan") is None
        assert store.search(("shared",)) == [] and store.list_namespaces() == []


def test_a_graph_node_remembers_across_threads_through_the_store(store: EngramStore) -> None:
    from typing import TypedDict

    from langgraph.graph import END, START, StateGraph
    from langgraph.store.base import BaseStore

    class State(TypedDict):
        user: str
        visits: int

    def count_visit(state: State, *, store: BaseStore) -> dict[str, int]:
        namespace = ("visits", state["user"])
        seen = store.get(namespace, "count")
        visits = (seen.value["n"] if seen else 0) + 1
        store.put(namespace, "count", {"n": visits}, index=False)
        return {"visits": visits}

    builder = StateGraph(State)
    builder.add_node("count_visit", count_visit)
    builder.add_edge(START, "count_visit")
    builder.add_edge("count_visit", END)
    graph = builder.compile(store=store)
    assert graph.invoke({"user": "ana", "visits": 0}, {"configurable": {"thread_id": "t1"}})["visits"] == 1
    assert graph.invoke({"user": "ana", "visits": 0}, {"configurable": {"thread_id": "t2"}})["visits"] == 2
    assert graph.invoke({"user": "bo", "visits": 0}, {"configurable": {"thread_id": "t3"}})["visits"] == 1
