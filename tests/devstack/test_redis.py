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


def test_the_development_redis_keeps_its_files_private(tmp_path: Path) -> None:
    """Working memory written to disk (the append-only file, a snapshot, their rewrites) is readable
    by the server's user alone, in a folder only it may enter."""
    server = EmbeddedRedis(tmp_path / "redis", free_port(), persist=True)
    url = server.start()
    try:
        client = redis.Redis.from_url(url)
        client.set("{t}:win:s1", "Zyxquorra said hi")
        client.bgrewriteaof()
        client.save()
        deadline = time.monotonic() + 10
        while client.info("persistence")["aof_rewrite_in_progress"] and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        server.stop()
    files = [p for p in (tmp_path / "redis").rglob("*") if p.is_file()]
    assert any(p.name.startswith("appendonly") for p in files) and any(p.suffix == ".rdb" for p in files)
    assert {p.name: oct(p.stat().st_mode & 0o777) for p in files} == {p.name: "0o600" for p in files}
    assert oct((tmp_path / "redis").stat().st_mode & 0o777) == "0o700"
