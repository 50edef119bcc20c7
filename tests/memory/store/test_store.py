"""The item store (``memory.store``, ``/api/v1/store/...``): LangGraph's ``BaseStore`` over Engram.

Tenant-wide sharing (a teammate reads and changes the owner's items; another tenant sees nothing
on any read path), the trail's record of every change, search by filter and by hybrid recall (the
linked semantic rows kept out of memory recall and its jobs), TTLs, and bad input as 400s naming
the field."""

from __future__ import annotations

import json
import time
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from django_tenants.utils import tenant_context

from memory.consolidation.models import Promotion
from memory.consolidation.services.forgetting import forgetting_pass
from memory.consolidation.services.promotion import promotion_pass
from memory.episodic.models import Event
from memory.semantic.models import MemoryType, SemanticMemory
from memory.store import services
from memory.store.models import StoreItem
from tenants.models import Tenant
from tests.factories import Caller, remember, requires_model, search

ITEMS = "/api/v1/store/items"


def put(caller: Caller, namespace: list[str], key: str, value: Any, **extra: Any) -> Any:
    return caller.post(ITEMS, {"namespace": namespace, "key": key, "value": value, **extra})


def ok(response: Any, status: int = 200) -> Any:
    assert response.status_code == status, response.content
    return response.json()


def get(caller: Caller, namespace: list[str], key: str, **params: str) -> Any:
    return caller.get(ITEMS, {"namespace": ".".join(namespace), "key": key, **params})


def find(caller: Caller, **body: Any) -> list[dict[str, Any]]:
    return ok(caller.post("/api/v1/store/search", body))["results"]


def namespaces(caller: Caller, **params: Any) -> list[list[str]]:
    return ok(caller.get("/api/v1/store/namespaces", {k: str(v) for k, v in params.items()}))["results"]


@requires_model
def test_put_get_update_delete(alice: Caller) -> None:
    first = ok(put(alice, ["prefs", "u1"], "food", {"text": "likes ramen", "n": 1}), 201)
    assert first["created"] is True and first["namespace"] == ["prefs", "u1"] and first["indexed"] == ["$"]
    assert first["created_by"] == first["updated_by"] == "alice" and first["ttl"] is None
    got = ok(get(alice, ["prefs", "u1"], "food"))
    assert got["value"] == {"text": "likes ramen", "n": 1} and got["created_at"] == first["created_at"]
    assert got["created_at"].endswith("Z") or got["created_at"].endswith("+00:00")

    second = ok(put(alice, ["prefs", "u1"], "food", {"text": "likes udon"}, index=["text"]), 200)
    assert second["created"] is False and second["created_at"] == first["created_at"]
    assert second["updated_at"] > first["updated_at"] and second["indexed"] == ["text"]
    with tenant_context(alice.tenant):
        item = StoreItem.objects.get(namespace=["prefs", "u1"], key="food")
        assert item.memory is not None and item.memory.content == "likes udon"
        assert item.memory.memory_type == MemoryType.STORE

    third = ok(put(alice, ["prefs", "u1"], "food", {"text": "likes soba"}, index=False))
    assert third["indexed"] == []
    with tenant_context(alice.tenant):
        assert StoreItem.objects.get(pk=item.pk).memory_id is None
        assert not SemanticMemory.objects.filter(pk=item.memory_id).exists()  # the old row went

    deleted = ok(alice.client.delete(f"{ITEMS}?namespace=prefs.u1&key=food"))
    assert deleted["deleted"] is True and deleted["event_id"]
    assert get(alice, ["prefs", "u1"], "food").status_code == 404
    again = ok(alice.client.delete(f"{ITEMS}?namespace=prefs.u1&key=food"))
    assert again == {"deleted": False, "event_id": None}


@requires_model
def test_the_store_is_tenant_wide_and_another_tenant_sees_nothing(
    alice: Caller, bob: Caller, mallory: Caller
) -> None:
    ok(put(alice, ["team", "notes"], "plan", {"text": "ship the quokka release on Friday"}), 201)
    # a teammate reads and changes it (the store is the tenant's long-term memory)
    assert ok(get(bob, ["team", "notes"], "plan"))["value"]["text"].startswith("ship")
    changed = ok(put(bob, ["team", "notes"], "plan", {"text": "ship the quokka release on Monday"}))
    assert changed["created_by"] == "alice" and changed["updated_by"] == "bob"
    assert [r["key"] for r in find(bob, namespace_prefix=["team"], query="quokka release")] == ["plan"]

    # another tenant: nothing on any read path, and its own item of the same name is its own
    assert get(mallory, ["team", "notes"], "plan").status_code == 404
    assert find(mallory, namespace_prefix=["team"]) == []
    assert find(mallory, query="quokka release") == []
    assert namespaces(mallory) == []
    ok(put(mallory, ["team", "notes"], "plan", {"text": "other tenant"}), 201)
    assert ok(get(alice, ["team", "notes"], "plan"))["value"]["text"].endswith("Monday")
    assert [r["value"]["text"] for r in find(mallory, query="quokka release")] == ["other tenant"]
    assert ok(mallory.client.delete(f"{ITEMS}?namespace=team.notes&key=plan"))["deleted"] is True
    assert ok(get(alice, ["team", "notes"], "plan"))["updated_by"] == "bob"


@requires_model
def test_every_change_is_recorded_in_the_trail_without_the_value(alice: Caller) -> None:
    written = ok(
        put(alice, ["crm", "cust-9"], "address", {"street": "Elmstreet 5"}, data_subject="cust-9"), 201
    )
    deleted = ok(alice.client.delete(f"{ITEMS}?namespace=crm.cust-9&key=address"))
    with tenant_context(alice.tenant):
        put_event = Event.objects.get(pk=written["event_id"])
        delete_event = Event.objects.get(pk=deleted["event_id"])
    for event, action in ((put_event, "store_put"), (delete_event, "store_delete")):
        payload = json.loads(event.payload_json)
        assert event.kind == "decision" and event.agent.name == "alice"
        assert event.session_id == "agent:alice" and event.data_subject == "cust-9"
        assert payload["action"] == action and payload["namespace"] == ["crm", "cust-9"]
        assert payload["key"] == "address"
        assert "Elmstreet" not in event.content and "Elmstreet" not in event.payload_json
    assert json.loads(put_event.payload_json)["created"] is True


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"namespace": ["a.b"], "key": "k", "value": {}}, "namespace[0]"),
        ({"namespace": ["ok", ""], "key": "k", "value": {}}, "namespace[1]"),
        ({"namespace": [], "key": "k", "value": {}}, "namespace"),
        ({"namespace": ["langgraph", "x"], "key": "k", "value": {}}, "namespace[0]"),
        ({"namespace": ["a"], "key": "k", "value": [1, 2]}, "value"),
        ({"namespace": ["a"], "key": "k", "value": "text"}, "value"),
        ({"namespace": ["a"], "key": "", "value": {}}, "key"),
        ({"namespace": ["a"], "key": "k", "value": {}, "ttl": 0}, "ttl"),
        ({"namespace": ["a"], "key": "k", "value": {}, "ttl": 1e300}, "ttl"),
        # the unique index holds namespace and key: their bytes are bounded together
        ({"namespace": ["é" * 200] * 10, "key": "k", "value": {}}, "key"),
        ({"namespace": ["a"], "key": "k", "value": {}, "index": ["a\u0000"]}, "index[0]"),
        ({"namespace": ["a"], "key": "k", "value": {}, "index": True}, "index"),
        ({"namespace": ["a"], "key": "k", "value": {}, "index": ["a.{b,c}"]}, "index[0]"),
        ({"namespace": ["a"], "key": "k", "value": {}, "extra": 1}, "extra"),
    ],
)
def test_bad_input_is_a_400_naming_the_field(alice: Caller, body: dict[str, Any], field: str) -> None:
    response = alice.post(ITEMS, body)
    assert response.status_code == 400, response.content
    assert field in response.json()["errors"], response.json()


@pytest.mark.parametrize(
    ("request_", "field"),
    [
        (("get", ITEMS, {"namespace": "a..b", "key": "k"}), "namespace[1]"),
        (("post", "/api/v1/store/search", {"filter": {"n": {"$regex": "x"}}}), "filter.n.$regex"),
        (("post", "/api/v1/store/search", {"filter": {"n": {"$gt": [1]}}}), "filter.n.$gt"),
        (("post", "/api/v1/store/search", {"filter": {"n": {"$gt": 1, "x": 2}}}), "filter.n"),
        (("post", "/api/v1/store/search", {"namespace_prefix": ["a.b"]}), "namespace_prefix[0]"),
        (("get", "/api/v1/store/namespaces", {"prefix": "a..b"}), "prefix[1]"),
        (("get", "/api/v1/store/namespaces", {"max_depth": "0"}), "max_depth"),
    ],
)
def test_bad_reads_are_400s_naming_the_field(
    alice: Caller, request_: tuple[str, str, Any], field: str
) -> None:
    method, path, data = request_
    response = alice.post(path, data) if method == "post" else alice.get(path, data)
    assert response.status_code == 400, response.content
    assert field in response.json()["errors"], response.json()


def test_search_by_filter_and_paging(alice: Caller) -> None:
    for i in range(6):
        value = {"n": i, "kind": "even" if i % 2 == 0 else "odd", "meta": {"lang": "en" if i < 3 else "pt"}}
        ok(put(alice, ["docs", f"d{i % 2}"], f"k{i}", value, index=False), 201)
    ok(put(alice, ["other"], "x", {"n": 100}, index=False), 201)

    def keys(**body: Any) -> list[str]:
        return [r["key"] for r in find(alice, **body)]

    assert keys(namespace_prefix=["docs"], limit=100) == [f"k{i}" for i in reversed(range(6))]  # newest first
    assert keys(namespace_prefix=["docs", "d0"]) == ["k4", "k2", "k0"]
    assert keys(namespace_prefix=["docs"], filter={"kind": "odd"}) == ["k5", "k3", "k1"]
    assert keys(namespace_prefix=["docs"], filter={"n": {"$gte": 2, "$lt": 5}}) == ["k4", "k3", "k2"]
    assert keys(namespace_prefix=["docs"], filter={"n": {"$ne": 0}, "kind": "even"}) == ["k4", "k2"]
    assert keys(namespace_prefix=["docs"], filter={"meta": {"lang": "pt"}}) == ["k5", "k4", "k3"]
    assert keys(namespace_prefix=["docs"], filter={"missing": {"$ne": 1}}, limit=2) == ["k5", "k4"]
    assert keys(namespace_prefix=["docs"], filter={"kind": {"$gt": "f"}}) == ["k5", "k3", "k1"]
    assert keys(namespace_prefix=["docs"], limit=2, offset=3) == ["k2", "k1"]
    assert keys(filter={"n": 100}) == ["x"]
    # numbers beyond a double's range compare as numbers, not as an error
    assert len(keys(namespace_prefix=["docs"], filter={"n": {"$lt": 10**400}}, limit=100)) == 6
    ok(put(alice, ["huge"], "h", {"n": 10**400}, index=False), 201)
    assert keys(namespace_prefix=["huge"], filter={"n": {"$gt": 1e300}}) == ["h"]
    assert all(r["score"] is None for r in find(alice, namespace_prefix=["docs"]))


def test_namespaces_listing(alice: Caller) -> None:
    for ns in (["a", "b", "c"], ["a", "b", "d"], ["a", "e"], ["f", "b", "c"], ["a", "b", "c", "g"]):
        ok(put(alice, ns, "k", {"v": 1}, index=False), 201)
    everything = [["a", "b", "c"], ["a", "b", "c", "g"], ["a", "b", "d"], ["a", "e"], ["f", "b", "c"]]
    assert namespaces(alice) == everything
    assert namespaces(alice, prefix="a.b") == [["a", "b", "c"], ["a", "b", "c", "g"], ["a", "b", "d"]]
    assert namespaces(alice, suffix="b.c") == [["a", "b", "c"], ["f", "b", "c"]]
    assert namespaces(alice, prefix="*.b", suffix="c") == [["a", "b", "c"], ["f", "b", "c"]]
    assert namespaces(alice, max_depth=2) == [["a", "b"], ["a", "e"], ["f", "b"]]
    assert namespaces(alice, prefix="a", max_depth=1) == [["a"]]
    assert namespaces(alice, limit=2, offset=1) == everything[1:3]


@requires_model
def test_search_by_query_ranks_the_relevant_item_first(alice: Caller) -> None:
    texts = {
        "pets": "Alex has two cats and a parrot at home",
        "food": "Alex's favourite dish is spicy ramen with extra egg",
        "work": "Alex works night shifts as a nurse at the city hospital",
        "trip": "Alex plans a hiking trip to the Alps next summer",
    }
    for key, text in texts.items():
        ok(put(alice, ["memories", "alex"], key, {"text": text, "kind": "fact"}, index=["text"]), 201)
    ok(put(alice, ["memories", "alex"], "raw", {"text": "noodles noodles noodles"}, index=False), 201)
    ok(put(alice, ["elsewhere"], "food", {"text": "ramen shop opening hours"}), 201)

    for query, best in (
        ("what does Alex like to eat?", "food"),
        ("which animals live with Alex", "pets"),
        ("Alex's job", "work"),
        ("mountains vacation", "trip"),
    ):
        results = find(alice, namespace_prefix=["memories"], query=query, limit=3)
        assert results[0]["key"] == best, (query, [(r["key"], r["score"]) for r in results])
        scores = [r["score"] for r in results]
        assert scores == sorted(scores, reverse=True) and all(0 <= s <= 1 for s in scores)
    # a filter narrows the ranked candidates; a short page is filled with unindexed items
    filtered = find(alice, namespace_prefix=["memories"], query="ramen", filter={"kind": "fact"}, limit=2)
    assert [r["key"] for r in filtered][:1] == ["food"] and len(filtered) == 2
    everything = find(alice, namespace_prefix=["memories"], query="ramen", limit=10)
    assert len(everything) == 5 and everything[-1]["key"] == "raw" and everything[-1]["score"] is None
    assert [
        r["key"] for r in find(alice, namespace_prefix=["memories"], query="ramen", offset=1, limit=1)
    ] != ["food"]


@requires_model
def test_the_linked_rows_stay_out_of_memory_recall_and_its_jobs(alice: Caller) -> None:
    ok(put(alice, ["memories", "u"], "k", {"text": "the zebra password is quokka-77"}), 201)
    ok(remember(alice, "A memory about zebras and quokkas.", scope="shared"), 201)
    assert [h["memory"]["content"] for h in search(alice, "zebra password quokka")] == [
        "A memory about zebras and quokkas."
    ]
    listed = ok(alice.get("/api/v1/memories"))["results"]
    assert [m["content"] for m in listed] == ["A memory about zebras and quokkas."]
    assert alice.post("/api/v1/memories", {"content": "x", "memory_type": "store"}).status_code == 400
    with tenant_context(alice.tenant):
        row = StoreItem.objects.get(key="k").memory
        assert row is not None
        SemanticMemory.objects.filter(pk=row.pk).update(
            created_at=timezone.now() - timedelta(days=400), confidence=1.0
        )
        forgetting_pass(now=timezone.now() + timedelta(days=400))
        promotion_pass()
        row.refresh_from_db()
        assert row.archived_at is None
        assert not Promotion.objects.filter(memory_id=row.pk).exists()


def test_ttl_expires_items_and_reads_refresh_it(alice: Caller) -> None:
    ok(put(alice, ["tmp"], "short", {"v": 1}, index=False, ttl=1.5), 201)
    ok(put(alice, ["tmp"], "forever", {"v": 2}, index=False), 201)
    with tenant_context(alice.tenant):
        item = StoreItem.objects.get(key="short")
        assert item.ttl_minutes == 1.5 and item.expires_at is not None
        first_expiry = item.expires_at
        later = timezone.now() + timedelta(minutes=1)
        # a refreshing read restarts the clock; a non-refreshing one does not
        assert (
            services.item_get(agent=alice.agent, namespace=["tmp"], key="short", refresh_ttl=False, now=later)
            is not None
        )
        assert StoreItem.objects.get(pk=item.pk).expires_at == first_expiry
        assert services.item_get(agent=alice.agent, namespace=["tmp"], key="short", now=later) is not None
        refreshed = StoreItem.objects.get(pk=item.pk).expires_at
        assert refreshed is not None and refreshed > first_expiry
        gone = later + timedelta(minutes=2)
        assert services.item_get(agent=alice.agent, namespace=["tmp"], key="short", now=gone) is None
        assert [
            f.item.key for f in services.items_search(agent=alice.agent, namespace_prefix=["tmp"], now=gone)
        ] == ["forever"]
        assert services.namespaces_list(agent=alice.agent, now=gone) == [["tmp"]]
        assert services.items_expire(now=gone) == 1
        assert list(StoreItem.objects.values_list("key", flat=True)) == ["forever"]
        record = Event.objects.filter(actor="job:store-ttl").get()
        assert json.loads(record.payload_json)["item_ids"] == [str(item.pk)]


def test_the_store_operations_have_components_of_their_own(alice: Caller) -> None:
    """Serializer names shared with the memory API once made the store's search document the
    memories' search body (the fuzzer found the mismatch)."""
    import yaml

    doc = yaml.safe_load(alice.client.get("/api/v1/schema").content)

    def response_ref(path: str, method: str) -> str:
        return doc["paths"][path][method]["responses"]["200"]["content"]["application/json"]["schema"]["$ref"]

    assert response_ref("/api/v1/store/search", "post").endswith("/StoreSearchResult")
    assert not response_ref("/api/v1/memories/search", "post").endswith("/StoreSearchResult")
    body = doc["paths"]["/api/v1/store/search"]["post"]["requestBody"]["content"]["application/json"][
        "schema"
    ]
    assert (
        body
        != doc["paths"]["/api/v1/memories/search"]["post"]["requestBody"]["content"]["application/json"][
            "schema"
        ]
    )


@requires_model
def test_query_search_finds_the_items_behind_thousands_of_nearer_memories(alice: Caller, bob: Caller) -> None:
    """The vector arm scans the one HNSW index under the store's filter: the items' rows must come
    out even when every memory of the tenant is nearer the query than any item."""
    import numpy as np

    from memory.embeddings import get_embedder
    from memory.semantic.models import MemoryAccess, MemoryScope
    from memory.semantic.services.duplicates import content_hash

    embedder = get_embedder()
    query = "quarterly revenue figures"
    q = np.asarray(embedder.embed([query])[0], dtype=np.float32)
    rng = np.random.default_rng(5)
    texts = [
        "a red bicycle",
        "seven blue whales",
        "jazz on sunday",
        "an old lighthouse",
        "pine forest",
        "snow",
    ]
    for i, text in enumerate(texts):
        ok(put(alice, ["far"], f"k{i}", {"text": text}, index=["text"]), 201)
    with tenant_context(alice.tenant):
        rows = []
        for i in range(2000):
            v = q + 0.3 * rng.standard_normal(q.shape[0]).astype(np.float32) / np.sqrt(q.shape[0])
            rows.append(
                SemanticMemory(
                    agent=bob.agent,
                    scope=MemoryScope.SHARED,
                    content=f"near {i}",
                    content_hash=content_hash(f"near {i}"),
                    embedding=v / np.linalg.norm(v),
                    embedding_model=embedder.name,
                    embedding_dimensions=embedder.dimensions,
                )
            )
        SemanticMemory.objects.bulk_create(rows)
        MemoryAccess.objects.bulk_create(MemoryAccess(memory=m) for m in rows)
        found = services.items_search(agent=alice.agent, namespace_prefix=["far"], query=query, limit=10)
    assert sorted(f.item.key for f in found) == [f"k{i}" for i in range(6)]
    assert all(f.score is not None for f in found)


def test_beat_sweeps_expired_items_in_the_worker(celery_worker, scratch_tenant: Tenant) -> None:  # type: ignore[no-untyped-def]
    from agents.services import agent_create
    from core.tasks import each_tenant
    from memory.store.tasks import expire_items

    with tenant_context(scratch_tenant):
        agent = agent_create(by=None, name="sweeper-test")
        past = timezone.now() - timedelta(minutes=5)
        services.item_put(
            agent=agent, namespace=["tmp"], key="old", value={"v": 1}, index=False, ttl_minutes=1, now=past
        )
        services.item_put(
            agent=agent, namespace=["tmp"], key="new", value={"v": 2}, index=False, ttl_minutes=60
        )
        expire_items.delay()
        deadline = time.monotonic() + 120
        while StoreItem.objects.filter(key="old").exists():
            assert time.monotonic() < deadline, "the worker did not sweep in time"
            time.sleep(0.25)
        assert list(StoreItem.objects.values_list("key", flat=True)) == ["new"]
        assert Event.objects.filter(actor="job:store-ttl").count() == 1
    # beat's entry: the fan-out queues the sweep for every tenant
    assert "memory.store.tasks.expire_items" in each_tenant.app.tasks


def test_a_ranked_page_ends_at_the_window(alice: Caller) -> None:
    """With a query only the first 1000 ranked items are reachable (docs/decisions/0051): a page
    reaching past them is cut there, one starting past them is empty; neither is a 400."""
    ok(put(alice, ["docs"], "k", {"text": "ramen"}), 201)
    for offset in (995, 1000, 99_999):
        response = alice.post("/api/v1/store/search", {"query": "x", "offset": offset, "limit": 10})
        assert response.status_code == 200, (offset, response.content)
        assert response.json()["count"] == 0, response.json()
