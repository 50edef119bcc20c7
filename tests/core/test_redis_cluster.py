"""Working memory, checkpoints' Redis copies and the Celery broker on a real three-master Redis
Cluster (devstack.redis_cluster, the devstack's redis-server binary in cluster mode on loopback).

Every multi-key operation and Lua script of memory/working and memory/checkpoints runs here through
the API or the service that owns it, against ``redis.cluster.RedisCluster`` (``REDIS_CLUSTER``):
a command whose keys spanned two slots would fail with ``CROSSSLOT``, a key on the wrong master
with ``MOVED``. The tenant's hash tag keeps each tenant on one slot; the tests check that the keys
really are where the cluster says and that the three masters hold the slots between them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from celery import Celery
from django_tenants.utils import tenant_context
from redis.cluster import RedisCluster

from core.redis import get_redis, tenant_key
from devstack import VAR_DIR
from devstack.redis_cluster import EmbeddedRedisCluster, cluster_ports
from memory.checkpoints import services as checkpoints
from memory.checkpoints.models import Checkpoint
from memory.checkpoints.services import cache as checkpoint_cache
from memory.episodic.models import Event
from memory.working import services as working
from tenants.models import Tenant
from tests.factories import Caller
from tests.factories import test_database_env as child_env

BASE_DIR = Path(__file__).resolve().parents[2]
CELERY_PREFIX = "{engram-celery}:"


@pytest.fixture(scope="module")
def redis_cluster() -> Iterator[EmbeddedRedisCluster]:
    """Three masters on loopback for this module; stopped and removed afterwards."""
    cluster = EmbeddedRedisCluster(VAR_DIR / "test" / f"redis-cluster-{os.getpid()}", cluster_ports(3))
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def on_cluster(redis_cluster: EmbeddedRedisCluster, settings) -> RedisCluster:  # type: ignore[no-untyped-def]
    """Point the app's Redis at the cluster for one test (``get_redis`` keys its client by URL and
    mode, so the suite's own Redis is back afterwards)."""
    settings.REDIS_URL = redis_cluster.urls[0]
    settings.REDIS_CLUSTER = True
    client = get_redis()
    assert isinstance(client, RedisCluster)
    return client


def owner_port(client: RedisCluster, key: str) -> int:
    """The port of the master that owns ``key``'s slot."""
    node = client.get_node_from_key(key)
    assert node is not None
    return int(node.port)


def plain(port: int) -> redis.Redis:
    """A client of one node, not cluster-aware: what it may read is only its own slots' keys."""
    return redis.Redis(host="127.0.0.1", port=port)


@pytest.fixture
def execution() -> str:
    return f"exec-{uuid.uuid4().hex[:12]}"


def test_the_cluster_has_three_masters_sharing_every_slot(
    redis_cluster: EmbeddedRedisCluster, on_cluster: RedisCluster
) -> None:
    masters = on_cluster.get_primaries()
    assert sorted(int(n.port) for n in masters) == sorted(redis_cluster.ports)
    slots = plain(redis_cluster.ports[0]).execute_command("CLUSTER SLOTS")
    assert sorted((int(s[0]), int(s[1])) for s in slots) == [(0, 5460), (5461, 10922), (10923, 16383)]
    # tenants' hash tags spread over the masters: of a few dozen schema names, every master gets some
    homes = {owner_port(on_cluster, "{" + f"tenant{i}" + "}:x") for i in range(40)}
    assert homes == set(redis_cluster.ports)


def test_blackboard_script_compare_and_set_and_stream_on_the_cluster(
    alice: Caller, bob: Caller, execution: str, on_cluster: RedisCluster, redis_cluster: EmbeddedRedisCluster
) -> None:
    with tenant_context(alice.tenant):
        values_key = tenant_key("bb", execution)
        channel = working.updates_channel(execution)
    home = owner_port(on_cluster, values_key)
    # the SSE view subscribes with a plain client of one node (api/rest/stream.py): a cluster
    # forwards PUBLISH to every node, so a subscriber on another master than the slot's hears it
    elsewhere = next(p for p in redis_cluster.ports if p != home)
    pubsub = plain(elsewhere).pubsub()
    pubsub.subscribe(channel)
    subscribed = pubsub.get_message(timeout=5)
    assert subscribed is not None and subscribed["type"] == "subscribe"

    path = f"/api/v1/executions/{execution}/blackboard"
    first = alice.client.put(
        f"{path}/plan", {"value": {"n": 1}, "expected_version": 0, "session_id": "s-1"}, format="json"
    )
    assert first.status_code == 201, first.content
    stale = alice.client.put(f"{path}/plan", {"value": {"n": 2}, "expected_version": 0}, format="json")
    assert stale.status_code == 409 and stale.json()["current_version"] == 1
    assert (
        alice.client.put(f"{path}/plan", {"value": {"n": 2}, "expected_version": 1}, format="json").json()[
            "version"
        ]
        == 2
    )
    bob.client.put(f"{path}/notes", {"value": ["x"]}, format="json")

    fields = bob.get(path).json()["results"]
    assert [(f["field"], f["version"]) for f in fields] == [("alice:plan", 2), ("bob:notes", 1)]
    assert bob.get(f"{path}/alice/plan").json()["value"] == {"n": 2}
    # the script's five keys are on the slot's master, and nowhere else
    with tenant_context(alice.tenant):
        keys = [tenant_key(kind, execution) for kind in ("bb", "bbv", "bb-owner", "bb-session")]
    assert {owner_port(on_cluster, k) for k in keys} == {home}
    assert plain(home).exists(*keys) == 4
    assert plain(home).get(keys[3]) == b"s-1"
    heard: list[dict[str, object]] = []
    while (message := pubsub.get_message(timeout=5)) is not None and len(heard) < 3:
        if message["type"] == "message":
            heard.append(json.loads(message["data"]))
    assert [(d["field"], d["version"]) for d in heard] == [
        ("alice:plan", 1),
        ("alice:plan", 2),
        ("bob:notes", 1),
    ]
    pubsub.close()


def test_scratchpads_close_and_window_multi_blocks_on_the_cluster(
    alice: Caller, bob: Caller, execution: str, on_cluster: RedisCluster
) -> None:
    pad = f"/api/v1/executions/{execution}/scratchpad"
    assert (
        alice.client.put(f"{pad}/a", {"value": 1, "session_id": "s-close"}, format="json").status_code == 201
    )
    assert alice.client.put(f"{pad}/b", {"value": 2}, format="json").status_code == 201
    assert bob.client.put(f"{pad}/c", {"value": 3}, format="json").status_code == 201
    assert alice.get(pad).json()["values"] == {"a": 1, "b": 2}
    assert alice.client.delete(f"{pad}/b").status_code in (200, 204)
    assert alice.get(f"{pad}/b").status_code == 404

    # close: a pipeline of reads, SET NX, SMEMBERS and one DEL of the index and every agent's pad
    closed = alice.post(f"/api/v1/executions/{execution}/close", {})
    assert closed.status_code in (200, 201), closed.content
    with tenant_context(alice.tenant):
        assert not on_cluster.exists(tenant_key("sp-idx", execution))
        assert not on_cluster.exists(
            tenant_key("sp", execution, alice.agent.pk), tenant_key("sp", execution, bob.agent.pk)
        )
        decision = Event.objects.filter(session_id="s-close", kind="decision").get()
    assert decision.payload["scratchpads_deleted"] == 2
    assert bob.client.put(f"{pad}/d", {"value": 4}, format="json").status_code == 409

    # the window: RPUSH, LRANGE, LTRIM, EXPIRE, LLEN in one MULTI; trimmed turns go to the log
    session = f"win-{uuid.uuid4().hex[:8]}"
    with tenant_context(alice.tenant):
        policy = alice.tenant.working_memory_policy
        bound = policy.window_max_turns
        for i in range(bound + 2):
            working.window_append(
                agent=alice.agent, session_id=session, role="user", content=f"turn {i}", policy=policy
            )
        turns = working.window_read(agent=alice.agent, session_id=session, last=bound + 5)
        logged = list(
            Event.objects.filter(session_id=session).order_by("seq").values_list("content", flat=True)
        )
    assert [t["content"] for t in turns] == [f"turn {i}" for i in range(2, bound + 2)]
    assert logged == ["turn 0", "turn 1"]
    # a scratchpad clear is a MULTI of HLEN and DEL
    with tenant_context(alice.tenant):
        other = f"exec-{uuid.uuid4().hex[:12]}"
        working.scratchpad_write(agent=alice.agent, execution_id=other, key="k", value=1, policy=policy)
        assert working.scratchpad_clear(agent=alice.agent, execution_id=other) == 1


def test_erasure_scans_every_master_and_deletes_across_keys(
    alice: Caller, mallory: Caller, execution: str, on_cluster: RedisCluster
) -> None:
    with tenant_context(alice.tenant):
        policy = alice.tenant.working_memory_policy
        working.blackboard_write(
            agent=alice.agent,
            execution_id=execution,
            name="who",
            value="subject-77",
            policy=policy,
            session_id="s-erase",
        )
        working.scratchpad_write(agent=alice.agent, execution_id=execution, key="k", value="v", policy=policy)
        working.window_append(
            agent=alice.agent, session_id="s-erase", role="user", content="hi", policy=policy
        )
    with tenant_context(mallory.tenant):
        working.scratchpad_write(
            agent=mallory.agent,
            execution_id=execution,
            key="k",
            value="subject-77",
            policy=mallory.tenant.working_memory_policy,
        )
        theirs = working.tenant_keys()
    with tenant_context(alice.tenant):
        mine = working.tenant_keys()  # SCAN runs on every master
        assert tenant_key("win", "s-erase") in mine and not set(mine) & set(theirs)
        assert working.keys_holding(["subject-77"]) == [tenant_key("bb", execution)]
        gone = working.working_memory_erase(session_ids=["s-erase"], agent_ids=[])
        assert tenant_key("bb", execution) in gone and tenant_key("win", "s-erase") in gone
        assert not on_cluster.exists(*gone)
    with tenant_context(mallory.tenant):
        assert working.tenant_keys() == theirs  # the other tenant's keys are untouched


def test_checkpoint_copies_scripts_replays_and_erasure_on_the_cluster(
    alice: Caller,
    on_cluster: RedisCluster,
    django_capture_on_commit_callbacks,  # type: ignore[no-untyped-def]
) -> None:
    session = f"ck-{uuid.uuid4().hex[:8]}"
    path = f"/api/v1/sessions/{session}/checkpoints"
    body = {"step_index": 1, "idempotency_key": "k1", "state": {"a": 1}, "plan": [], "schema_version": 1}
    # the copy is written after commit (the test's transaction never commits: run the hooks)
    with django_capture_on_commit_callbacks(execute=True):
        assert alice.post(path, body).status_code == 201
    with django_capture_on_commit_callbacks(execute=True):
        again = alice.post(path, body)  # the same idempotency key: the stored checkpoint, nothing new
    assert again.status_code == 200, again.content
    with django_capture_on_commit_callbacks(execute=True):
        second = {**body, "step_index": 2, "idempotency_key": "k2", "state": {"a": 2}}
        assert alice.post(path, second).status_code == 201
    latest = alice.get(f"{path}/latest")
    assert latest["Engram-Source"] == "redis" and latest.json()["state"] == {"a": 2}
    with tenant_context(alice.tenant):
        key = checkpoints.cache_key(session, alice.agent.pk)
        assert json.loads(on_cluster.hget(key, "body"))["state"] == {"a": 2}  # type: ignore[arg-type]
        for node in on_cluster.get_primaries():  # the script is loaded again where it runs
            plain(int(node.port)).script_flush()
        on_cluster.delete(key)  # a miss reads PostgreSQL and re-warms through the script
    assert alice.get(f"{path}/latest")["Engram-Source"] == "postgres"
    assert alice.get(f"{path}/latest")["Engram-Source"] == "redis"
    with tenant_context(alice.tenant):
        ids = list(Checkpoint.objects.filter(session_id=session).values_list("pk", flat=True))
        deleted, keys = checkpoints.checkpoints_erase(checkpoint_ids=ids)
        assert sorted(deleted) == sorted(ids) and key in keys
        assert not on_cluster.exists(*keys)
        # the tombstone is in the copy's slot, and the write script reads it there: a late write
        # of an erased checkpoint is refused
        gone = checkpoint_cache.gone_key(key)
        assert (
            on_cluster.keyslot(gone) == on_cluster.keyslot(key)
            and on_cluster.get(gone) == str(max(ids)).encode()
        )
        assert checkpoint_cache.cache_put(
            key=key, checkpoint_id=max(ids), step_index=2, body=b"{}", ttl_seconds=60
        )  # Redis answered
        assert not on_cluster.exists(key)


def test_the_pending_flush_after_an_outage_works_on_the_cluster(
    alice: Caller, mallory: Caller, on_cluster: RedisCluster
) -> None:
    # what saves that could not reach Redis leave: streams of two tenants (two slots, each a script
    # call of its own), one of them cached at a newer step by another process meanwhile
    with tenant_context(alice.tenant):
        stale = checkpoints.cache_key(f"ck-{uuid.uuid4().hex[:8]}", alice.agent.pk)
        newer = checkpoints.cache_key(f"ck-{uuid.uuid4().hex[:8]}", alice.agent.pk)
    with tenant_context(mallory.tenant):
        theirs = checkpoints.cache_key(f"ck-{uuid.uuid4().hex[:8]}", mallory.agent.pk)
    assert on_cluster.keyslot(stale) != on_cluster.keyslot(theirs)
    for key, step in ((stale, 1), (newer, 9), (theirs, 1)):
        on_cluster.hset(key, mapping={"step": step, "body": "{}"})
        checkpoint_cache.remember_stale(key, 5)
    try:
        with tenant_context(alice.tenant):  # the next checkpoint call that reaches Redis flushes
            restored = checkpoints.checkpoint_latest(
                agent=alice.agent, session_id="ck-none", policy=alice.tenant.working_memory_policy
            )
        assert restored.body is None and not restored.degraded
        assert not on_cluster.exists(stale) and not on_cluster.exists(theirs)
        assert on_cluster.hget(newer, "step") == b"9"  # newer than the saved step: kept
        assert not {stale, newer, theirs} & set(checkpoint_cache._pending)
    finally:
        for key in (stale, newer, theirs):
            checkpoint_cache._pending.pop(key, None)
        on_cluster.delete(newer)


def test_idempotency_keys_replay_writes_to_the_cluster(alice: Caller, on_cluster: RedisCluster) -> None:
    session = f"idem-{uuid.uuid4().hex[:8]}"
    path = f"/api/v1/sessions/{session}/window"
    first = alice.post(path, {"role": "user", "content": "once"}, **{"Idempotency-Key": "w-1"})
    assert first.status_code == 201, first.content
    replay = alice.post(path, {"role": "user", "content": "once"}, **{"Idempotency-Key": "w-1"})
    assert replay.status_code == 201 and replay["Idempotent-Replayed"] == "true"
    assert (
        alice.post(path, {"role": "user", "content": "other"}, **{"Idempotency-Key": "w-1"}).status_code
        == 409
    )
    with tenant_context(alice.tenant):
        assert on_cluster.llen(tenant_key("win", session)) == 1  # applied once


def test_a_cluster_that_cannot_be_reached_is_a_fast_503_and_a_degraded_restore(
    alice: Caller,
    execution: str,
    settings,  # type: ignore[no-untyped-def]
) -> None:
    settings.REDIS_URL = f"redis://127.0.0.1:{cluster_ports(1)[0]}/0"  # nothing listens there
    settings.REDIS_CLUSTER = True
    down = alice.get(f"/api/v1/executions/{execution}/blackboard")
    assert down.status_code == 503 and down.json()["code"] == "unavailable", down.content
    put = alice.client.put(f"/api/v1/executions/{execution}/scratchpad/k", {"value": 1}, format="json")
    assert put.status_code == 503
    restored = alice.get(f"/api/v1/sessions/ck-{uuid.uuid4().hex[:8]}/checkpoints/latest")
    assert restored["Engram-Degraded"] == "redis-unavailable", restored.content


@pytest.fixture(scope="module")
def cluster_worker(redis_cluster: EmbeddedRedisCluster, django_db_setup, django_db_blocker) -> Iterator[str]:  # type: ignore[no-untyped-def]
    """A real Celery worker whose broker and result backend are on the cluster (kombu's Redis
    transport, every key under the hash tag of ``CELERY_REDIS_KEYPREFIX``, so on the master that
    owns its slot) and whose working memory is the cluster; yields that master's URL."""
    probe = RedisCluster.from_url(redis_cluster.urls[0])
    node = probe.get_node_from_key(CELERY_PREFIX + "celery")
    assert node is not None
    url = f"redis://127.0.0.1:{node.port}/0"
    probe.close()
    env = child_env(
        REDIS_URL=redis_cluster.urls[0],
        REDIS_CLUSTER="1",
        CELERY_BROKER_URL=url,
        CELERY_RESULT_BACKEND=url,
        CELERY_REDIS_KEYPREFIX=CELERY_PREFIX,
    )
    worker = subprocess.Popen(
        [
            *(sys.executable, "-m", "celery", "-A", "config", "worker", "--pool", "solo"),
            *("--loglevel", "WARNING", "--include", "tests.core.role_probe_tasks"),
            *("--without-gossip", "--without-mingle"),
        ],
        cwd=BASE_DIR,
        env=env,
    )
    try:
        yield url
    finally:
        worker.terminate()
        worker.wait(30)


def test_a_task_round_trip_through_the_cluster_broker(
    cluster_worker: str, tenant_a: Tenant, redis_cluster: EmbeddedRedisCluster
) -> None:
    # not the current app: shared tasks of later tests must keep publishing to the suite's broker
    client = Celery("cluster-client", broker=cluster_worker, backend=cluster_worker, set_as_current=False)
    client.conf.update(
        broker_transport_options={"global_keyprefix": CELERY_PREFIX},
        result_backend_transport_options={"global_keyprefix": CELERY_PREFIX},
        task_serializer="json",
        accept_content=["json"],
    )
    # the tenant travels in the headers, as TenantTask publishes it
    result = client.send_task(
        "tests.core.role_probe_tasks.cross_schema_probe",
        args=["beta"],
        headers={"_schema_name": tenant_a.schema_name},
    )
    seen = result.get(timeout=90)
    assert seen["other_schema"] == "42501"  # it ran, in alpha's role, in the worker
    # every key the broker and backend wrote carries the prefix, so all sit on one slot's master
    everywhere = RedisCluster.from_url(redis_cluster.urls[0])
    keys = [k.decode() for k in everywhere.scan_iter(match="*celery*", count=1000)]
    assert keys and all(k.startswith(CELERY_PREFIX) for k in keys), keys
    assert f"{CELERY_PREFIX}celery-task-meta-{result.id}" in keys
    everywhere.close()
    client.close()


def test_an_erasure_rewrites_the_files_of_every_node_of_the_cluster(on_cluster: RedisCluster) -> None:
    """``compliance.copies.redis_files_rewrite`` asks each node (each writes its own append-only
    file), and the verification finds none left unrewritten."""
    from compliance import copies

    nodes = [on_cluster.get_redis_connection(node) for node in on_cluster.get_nodes()]
    for node in nodes:
        node.config_set("appendonly", "yes")
    try:
        for node in nodes:
            while node.info("persistence")["aof_rewrite_in_progress"]:
                pass
        on_cluster.set("{t}:win:erased", "gone")
        on_cluster.delete("{t}:win:erased")
        outcome = copies.redis_files_rewrite(timeout=60)
        assert outcome["aof"] == "rewritten"
        assert copies.redis_files_pending(outcome) == 0
        assert copies.redis_files_pending({"aof": "off"}) == len(nodes)  # a check that can fail
    finally:
        for node in nodes:
            node.config_set("appendonly", "no")
            folder = Path(node.config_get("dir")["dir"])
            for path in folder.glob("appendonly*"):
                path.unlink()
