"""The development Redis keeps working memory across a restart (append-only file, synced every
second); test servers write nothing to disk."""

from __future__ import annotations

import time
from pathlib import Path

import redis

from devstack import free_port
from devstack.redis_server import EmbeddedRedis


def test_the_development_redis_survives_a_restart(tmp_path: Path) -> None:
    port = free_port()
    server = EmbeddedRedis(tmp_path / "redis", port, persist=True)
    url = server.start()
    try:
        redis.Redis.from_url(url).set("{t}:bb:e1", "kept", ex=3600)
        time.sleep(1.5)  # appendfsync everysec
    finally:
        server.stop()
    again = EmbeddedRedis(tmp_path / "redis", port, persist=True)
    url = again.start()
    try:
        client = redis.Redis.from_url(url)
        assert client.get("{t}:bb:e1") == b"kept"
        assert 0 < client.ttl("{t}:bb:e1") <= 3600
    finally:
        again.stop()


def test_a_test_redis_writes_nothing(tmp_path: Path) -> None:
    server = EmbeddedRedis(tmp_path / "redis", free_port())
    url = server.start()
    try:
        redis.Redis.from_url(url).set("k", "v")
    finally:
        server.stop()
    assert not any((tmp_path / "redis").rglob("*.aof")) and not any((tmp_path / "redis").rglob("appendonly*"))
