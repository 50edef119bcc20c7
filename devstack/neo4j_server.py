"""The tests' Neo4j 5 Community server: a small launcher over Maven Central artifacts (``tools/neo4j``)."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from devstack import BASE_DIR, VAR_DIR

NEO4J_LAUNCHER_DIR = BASE_DIR / "tools" / "neo4j"


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
