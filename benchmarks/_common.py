"""Shared plumbing for the benchmark scripts: Django setup, a real web server, RSS sampling,
percentiles, and the one writer of a run's figures as JSON (``Run``, ``record``).

Not a test helper: the scripts print figures. They read ``DATABASE_URL`` and ``REDIS_URL`` from the
environment (``python -m devstack services --profile bench`` prints both as ``export`` lines).
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import platform
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"


def django_setup() -> None:
    """Configure Django like a server would (DEBUG off: no per-query bookkeeping)."""
    if not os.environ.get("DATABASE_URL"):
        sys.exit(
            "DATABASE_URL is not set: start the services first\n"
            "  python -m devstack services --profile bench > /tmp/bench-svc.log 2>&1 &\n"
            '  eval "$(grep export /tmp/bench-svc.log)"'
        )
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.local")
    os.environ["DJANGO_DEBUG"] = "false"
    import django

    django.setup()
    import logging

    for name in ("httpx", "httpcore"):  # one INFO line per request would drown the figures
        logging.getLogger(name).setLevel(logging.WARNING)


def bench_key(slug: str, agent_names: Sequence[str]) -> tuple[object, dict[str, object], dict[str, str]]:
    """Ensure tenant ``slug`` and its agents exist; mint a fresh API key per agent.

    Returns ``(tenant, {name: agent}, {name: raw_key})``.
    """
    from django_tenants.utils import tenant_context

    from agents.models import Agent
    from agents.services import agent_create, api_key_create
    from tenants.services import tenant_create

    tenant, _ = tenant_create(slug=slug, name=f"Benchmark {slug}")
    agents: dict[str, object] = {}
    keys: dict[str, str] = {}
    with tenant_context(tenant):
        for name in agent_names:
            agent = Agent.objects.filter(name=name).first() or agent_create(
                by=None, name=name, role="benchmark"
            )
            agents[name] = agent
            keys[name] = api_key_create(by=None, agent=agent, name="benchmark")[1]
    return tenant, agents, keys


def drop_tenant(tenant: Any) -> None:
    """Drop a benchmark's scratch tenant: its row, schema and role (``Tenant._drop_schema``)."""
    from django.db import connection

    connection.set_schema_to_public()  # type: ignore[attr-defined]  # django-tenants deletes from public
    tenant.auto_drop_schema = True
    tenant.delete(force_drop=True)


@contextlib.contextmanager
def scratch_tenant(
    prefix: str, agent_names: Sequence[str]
) -> Iterator[tuple[object, dict[str, object], dict[str, str]]]:
    """``bench_key`` for a new tenant ``<prefix>_<random>``, dropped on exit (``drop_tenant``), even
    after an error: figures taken from an empty tenant without leaving one per run behind."""
    tenant, agents, keys = bench_key(f"{prefix}_{uuid.uuid4().hex[:8]}", agent_names)
    try:
        yield tenant, agents, keys
    finally:
        drop_tenant(tenant)


def server_command(kind: str, port: int, workers: int, threads: int) -> list[str]:
    """The command line of a production-style server for ``config`` on 127.0.0.1:``port``."""
    if kind == "gunicorn":
        return [
            sys.executable,
            "-m",
            "gunicorn",
            "config.wsgi:application",
            "--bind",
            f"127.0.0.1:{port}",
            "--workers",
            str(workers),
            "--worker-class",
            "gthread",  # keeps connections alive (sync workers close after each response)
            "--threads",
            str(threads),
            "--keep-alive",
            "30",
            "--log-level",
            "warning",
        ]
    from devstack.web import uvicorn_command

    return uvicorn_command(port, workers=workers)


def default_server() -> str:
    return "gunicorn" if importlib.util.find_spec("gunicorn") else "uvicorn"


class RssSampler:
    """Samples the summed RSS of a process and all its descendants every ``interval`` seconds."""

    def __init__(self, pid: int, interval: float = 0.05) -> None:
        import psutil

        self._root = psutil.Process(pid)
        self.interval = interval
        self.peak_total = 0
        self.peak_single = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def sample(self) -> int:
        import psutil

        total = 0
        procs = [self._root]
        with contextlib.suppress(psutil.Error):
            procs += self._root.children(recursive=True)
        for proc in procs:
            with contextlib.suppress(psutil.Error):
                rss = proc.memory_info().rss
                total += rss
                self.peak_single = max(self.peak_single, rss)
        self.peak_total = max(self.peak_total, total)
        return total

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.interval)

    def start(self) -> RssSampler:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        self.sample()


@dataclass
class Server:
    url: str
    process: subprocess.Popen[bytes]
    rss: RssSampler


@contextlib.contextmanager
def web_server(
    kind: str,
    workers: int = 2,
    threads: int = 2,
    env: dict[str, str] | None = None,
    root: str | Path = ROOT,
) -> Iterator[Server]:
    """Run the project's web server in a child process (DEBUG off; ``env`` added to this process's
    environment) until the block ends, with the code of checkout ``root`` (its working directory)."""
    import httpx

    from devstack import free_port

    port = free_port()
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": os.environ.get("DJANGO_SETTINGS_MODULE", "config.settings.local"),
        "DJANGO_DEBUG": "false",
        "PYTHONUNBUFFERED": "1",
        **(env or {}),
    }
    proc = subprocess.Popen(
        server_command(kind, port, workers, threads), cwd=root, env=env, start_new_session=True
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    try:
        while True:
            try:
                # 401 without a key: the app imported and answers
                if httpx.get(f"{url}/api/v1/me", timeout=2).status_code in (401, 403):
                    break
            except httpx.TransportError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{kind} did not start on port {port}")
            time.sleep(0.2)
        sampler = RssSampler(proc.pid).start()
        try:
            yield Server(url, proc, sampler)
        finally:
            sampler.stop()
    finally:
        if proc.poll() is None:
            import signal

            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def percentiles(values_ms: Sequence[float]) -> dict[str, float]:
    """p50/p95/p99/mean/max of ``values_ms`` (linear interpolation, like numpy's default)."""
    import numpy as np

    arr = np.asarray(values_ms, dtype=float)
    return {
        "n": float(len(arr)),
        "p50": float(np.percentile(arr, 50)),
        "p95": float(np.percentile(arr, 95)),
        "p99": float(np.percentile(arr, 99)),
        "mean": float(arr.mean()),
        "max": float(arr.max()),
    }


def mib(n_bytes: int) -> str:
    return f"{n_bytes / 2**20:,.0f} MiB"


def machine() -> dict[str, Any]:
    """What the figures were taken on: ``{cpus, model, ram_bytes, python, platform}``."""
    import psutil

    model = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return {
        "cpus": os.cpu_count(),
        "model": model,
        "ram_bytes": psutil.virtual_memory().total,
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


def commit(root: str | Path = ROOT) -> dict[str, Any]:
    """The code a run measured: ``{sha, dirty}`` of the git checkout ``root`` (``sha`` None outside
    git; ``dirty`` true when tracked files differ from the commit)."""

    def git(*args: str) -> str | None:
        try:
            out = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return out.stdout.strip() if out.returncode == 0 else None

    sha = git("rev-parse", "HEAD")
    status = git("status", "--porcelain", "--untracked-files=no")
    return {"sha": sha, "dirty": bool(status) if status is not None else None}


_FIGURES: dict[str, Any] = {}


def recorded() -> bool:
    """Whether this run has recorded any figure yet."""
    return bool(_FIGURES)


def record(**figures: Any) -> None:
    """Add ``figures`` (JSON-able: numbers, strings, lists, dicts) to this run's record, under their
    names; a later value of a name replaces the earlier one. Written by ``Run.write``."""
    _FIGURES.update(figures)


@dataclass
class Run:
    """One run of a benchmark, from before its set-up to its last figure: what the JSON of its
    figures says besides them. ``python -m benchmarks NAME --json`` makes one and writes it."""

    benchmark: str
    command: list[str]
    started_at: str = field(default_factory=lambda: datetime.now(UTC).isoformat(timespec="seconds"))
    load_before: list[float] = field(default_factory=lambda: list(os.getloadavg()))

    def write(
        self, path: str | Path | None = None, *, output: Sequence[str] = (), exit_status: int = 0
    ) -> Path:
        """Write the record to ``path`` (default ``benchmarks/results/<benchmark>.json``) and return
        the path: ``{benchmark, command, commit, machine, load_before, load_after (1, 5, 15 min),
        started_at, finished_at, exit_status, figures, output}``, ``figures`` what ``record``
        gathered, ``exit_status`` the benchmark's (1: it missed a target it checks) and ``output``
        the lines the run printed."""
        target = Path(path) if path else RESULTS / f"{self.benchmark}.json"
        document = {
            "benchmark": self.benchmark,
            "command": self.command,
            "commit": commit(),
            "machine": machine(),
            "load_before": self.load_before,
            "load_after": list(os.getloadavg()),
            "started_at": self.started_at,
            "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "exit_status": exit_status,
            "figures": dict(_FIGURES),
            "output": list(output),
        }
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(document, indent=2, default=str) + "\n")
        return target
