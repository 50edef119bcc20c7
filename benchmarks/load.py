"""A multi-agent load test: Locust agents in several tenants against the production process layout.

The script creates ``--tenants`` scratch tenants with ``--agents`` agents spread over them (one API
key each, through the services; dropped at the end), seeds ``--seed`` memories per agent, and starts
the production processes of ``deploy/Procfile`` on this machine with ``config.settings.production``:
uvicorn with ``--web`` worker processes (16 threads each), a Celery worker (concurrency 2) and beat.
Then it runs Locust headless (``benchmarks/load_agents/locustfile.py``: one user per agent, each
running an agent's loop with think times) once per step of ``--steps`` users, each step
``--step-seconds`` long with its statistics reset once every user has started, and records per step:
the request rate, p50/p95/p99 per operation and over all, the errors, and where the time went:

- ``server``: per operation, the server's own time (the ``engram.access`` log lines:
  ``duration_ms``, of which ``db_ms`` in PostgreSQL statements and ``embed_ms`` in the embedding
  model; ``cpu_ms`` on the request thread's CPU) against the client's: the difference is waiting for a worker process or thread (and the
  network, and Locust itself);
- ``cpu``: the cores each group of processes used (web, worker and beat, PostgreSQL, Redis, Locust,
  the rest of the machine);
- ``embed_s``: seconds in the embedding model in the web processes (``engram_spent_seconds_total``).

The highest step's request rate whose p99 over all requests is within 100 ms and within 250 ms is
printed last. Figures from a 2-core machine shared with other work: read them with their load.

``--embedder openai`` points the processes at an OpenAI-compatible embeddings endpoint: a local stub
(``--stub-latency-ms`` per call, deterministic unit vectors) standing in for one elsewhere.

Needs PostgreSQL and Redis (``python -m devstack services --profile load`` prints the ``export``
lines)::

    python -m benchmarks load --json [--agents 64] [--tenants 4] [--steps 4,8,16,32,64] [--web 2]
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import hashlib
import http.server
import json
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
from _common import ROOT, django_setup, drop_tenant, percentiles, record

LOCUSTFILE = ROOT / "benchmarks" / "load_agents" / "locustfile.py"
GROUPS = ("web", "worker", "postgres", "redis", "locust")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--agents", type=int, default=64, help="agents (Locust users at the last step)")
    parser.add_argument("--tenants", type=int, default=4)
    parser.add_argument("--steps", default="4,8,16,32,64", help="users per step (at most --agents)")
    parser.add_argument("--step-seconds", type=int, default=60, help="measured seconds per step")
    parser.add_argument("--web", type=int, default=2, help="web worker processes (WEB_CONCURRENCY)")
    parser.add_argument("--think", default="0.2,1.0", help="think time between an agent's steps, min,max s")
    parser.add_argument("--seed", type=int, default=20, help="memories per agent before the first step")
    parser.add_argument("--embedder", choices=["production", "openai"], default="production")
    parser.add_argument("--stub-latency-ms", type=float, default=30.0)
    parser.add_argument("--stop-p99-ms", type=float, default=2000.0, help="stop after a step above this p99")
    parser.add_argument("--label", default="", help="a name for this run in its figures")
    args = parser.parse_args()
    args.step_list = [int(s) for s in args.steps.split(",") if s]
    if max(args.step_list) > args.agents:
        parser.error("a step has more users than --agents")
    return args


# --- the stand-in embeddings endpoint ----------------------------------------------------------------


class _StubHandler(http.server.BaseHTTPRequestHandler):
    """``POST /embeddings``: one deterministic unit vector per input, after ``latency`` seconds."""

    latency = 0.03
    dimensions = 384

    def do_POST(self) -> None:
        import numpy as np

        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        data = []
        for index, text in enumerate(body["input"]):
            seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
            vector = np.random.default_rng(seed).standard_normal(self.dimensions)
            data.append({"index": index, "embedding": (vector / np.linalg.norm(vector)).round(6).tolist()})
        time.sleep(self.latency)
        payload = json.dumps({"object": "list", "data": data, "model": body["model"]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextlib.contextmanager
def embeddings_stub(latency_ms: float) -> Iterator[str]:
    """A threaded OpenAI-compatible embeddings endpoint on loopback; yields its base URL."""
    _StubHandler.latency = latency_ms / 1000
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _StubHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()


# --- tenants, agents, keys --------------------------------------------------------------------------


def make_agents(n_agents: int, n_tenants: int) -> tuple[list[Any], list[dict[str, str]]]:
    """``n_tenants`` scratch tenants and ``n_agents`` agents over them (round robin), one key each:
    ``(tenants, [{"tenant", "agent", "key"}])``."""
    from _common import bench_key

    tag = uuid.uuid4().hex[:6]
    tenants, agents = [], []
    for t in range(n_tenants):
        names = [f"agent-{i}" for i in range(t, n_agents, n_tenants)]
        tenant, _, keys = bench_key(f"bench_load_{tag}_{t}", names)
        tenants.append(tenant)
        agents += [{"tenant": f"t{t}", "agent": name, "key": keys[name]} for name in names]
    return tenants, agents


def seed_memories(url: str, agents: list[dict[str, str]], per_agent: int) -> None:
    """``per_agent`` memories for each agent, in one batch request each (not measured)."""
    if per_agent <= 0:
        return
    topics = ["invoice", "deployment", "refund", "travel", "contract", "hiring", "outage", "budget"]
    with httpx.Client(base_url=url, timeout=300) as client:
        for i, agent in enumerate(agents):
            batch = [
                {"content": f"Seed note {j} of {agent['agent']}: the {topics[(i + j) % 8]} item {j * 7 + i}."}
                for j in range(per_agent)
            ]
            response = client.post(
                "/api/v1/memories", json=batch, headers={"Authorization": f"Bearer {agent['key']}"}
            )
            if response.status_code != 201:
                raise SystemExit(f"seeding failed: {response.status_code} {response.text[:300]}")


# --- the production processes -----------------------------------------------------------------------


def production_env(work: Path, extra: dict[str, str]) -> dict[str, str]:
    """The environment of the Procfile's processes under ``config.settings.production`` on loopback."""
    from devstack.web import signing_environment

    metrics = work / "prometheus"
    metrics.mkdir()
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings.production",
        "DJANGO_ALLOWED_HOSTS": "127.0.0.1,localhost",
        "DJANGO_SECURE_SSL_REDIRECT": "false",  # plain HTTP on loopback: no proxy in front
        "DJANGO_LOG_FORMAT": "json",
        "ENGRAM_METRICS_TOKEN": secrets.token_urlsafe(24),
        "PROMETHEUS_MULTIPROC_DIR": str(metrics),
        "DATABASE_POOL": "1",
        "PYTHONUNBUFFERED": "1",
        **extra,
    }
    return signing_environment(env, work)


def start(command: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    handle = log.open("wb")
    return subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=handle, stderr=subprocess.STDOUT, start_new_session=True
    )


def stop(processes: list[subprocess.Popen[bytes]]) -> None:
    for proc in processes:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
    for proc in processes:
        try:
            proc.wait(40)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@contextlib.contextmanager
def production(work: Path, env: dict[str, str], web: int) -> Iterator[tuple[str, dict[str, list[int]]]]:
    """Web (uvicorn, ``web`` processes), Celery worker and beat, as the Procfile runs them; yields
    the base URL and the root pids of each group."""
    from devstack import free_port
    from devstack.web import uvicorn_command, wait_for_http

    port = free_port()
    celery = [sys.executable, "-m", "celery", "-A", "config"]
    processes = [
        start(uvicorn_command(port, workers=web, log_level="info"), env, work / "web.log"),
        start([*celery, "worker", "--loglevel", "INFO", "--concurrency", "2", "--without-gossip",
               "--without-mingle"], env, work / "worker.log"),
        start([*celery, "beat", "--loglevel", "INFO", "--schedule", str(work / "celerybeat-schedule")],
              env, work / "beat.log"),
    ]  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for_http(f"{url}/readyz", processes[0], timeout=120)
        yield url, {"web": [processes[0].pid], "worker": [processes[1].pid, processes[2].pid]}
    finally:
        stop(processes)


# --- measuring ----------------------------------------------------------------------------------------


def service_roots() -> dict[str, list[int]]:
    """The root pids of this run's PostgreSQL (its postmaster, from ``postmaster.pid`` in the socket
    directory of ``DATABASE_URL``) and Redis (the ``redis-server`` on ``REDIS_URL``'s port): other
    servers on the machine are not this run's."""
    from urllib.parse import unquote, urlparse

    import psutil

    roots: dict[str, list[int]] = {"postgres": [], "redis": []}
    host = unquote(urlparse(os.environ["DATABASE_URL"]).hostname or "")
    with contextlib.suppress(OSError, ValueError, IndexError):
        roots["postgres"].append(int((Path(host) / "postmaster.pid").read_text().split()[0]))
    port = str(urlparse(os.environ.get("REDIS_URL", "")).port)
    for proc in psutil.process_iter(["name", "cmdline"]):
        if (proc.info["name"] or "").startswith("redis-server") and any(
            arg.endswith(f":{port}") or arg == port for arg in proc.info["cmdline"] or []
        ):
            roots["redis"].append(proc.pid)
    return roots


def cpu_by_group(roots: dict[str, list[int]], locust_pid: int | None) -> dict[str, float]:
    """CPU seconds (user + system) so far of each group's processes and their children, and of the
    whole machine (``machine``). PostgreSQL's include the ended backends (its postmaster's reaped
    children): a pooled login's backend may end within a step."""
    import psutil

    totals = dict.fromkeys(GROUPS, 0.0)
    for group, pids in {**roots, "locust": [locust_pid] if locust_pid else []}.items():
        for pid in pids:
            with contextlib.suppress(psutil.Error):
                root = psutil.Process(pid)
                if group == "postgres":
                    times = root.cpu_times()
                    totals[group] += times.children_user + times.children_system
                for proc in [root, *root.children(recursive=True)]:
                    with contextlib.suppress(psutil.Error):
                        times = proc.cpu_times()
                        totals[group] += times.user + times.system
    machine = psutil.cpu_times()
    totals["machine"] = machine.user + machine.system + machine.nice + getattr(machine, "softirq", 0.0)
    return totals


def embed_seconds(url: str, token: str) -> float:
    """``engram_spent_seconds_total{account="embed"}`` summed over the web processes."""
    text = httpx.get(f"{url}/metrics", headers={"Authorization": f"Bearer {token}"}, timeout=30).text
    total = 0.0
    for line in text.splitlines():
        if line.startswith('engram_spent_seconds_total{account="embed"'):
            total += float(line.rsplit(" ", 1)[1])
    return total


def access_lines(log: Path, offset: int) -> tuple[list[dict[str, Any]], int]:
    """The ``engram.access`` records of the web log from byte ``offset``, and the new offset."""
    with log.open("rb") as handle:
        handle.seek(offset)
        data = handle.read()
    records = []
    for raw in data.splitlines():
        if b'"engram.access"' not in raw:
            continue
        with contextlib.suppress(ValueError):
            records.append(json.loads(raw))
    return records, offset + len(data)


OPERATIONS = {  # the access log's URL pattern -> the locustfile's request name
    "api/v1/events": "events",
    "api/v1/sessions/<str:session_id>/messages": "messages",
    "api/v1/memories": "memory_write",
    "api/v1/memories/search": "search",
    "api/v1/context": "context",
    "api/v1/executions/<str:execution_id>/blackboard": "blackboard_read",
    "api/v1/executions/<str:execution_id>/blackboard/<str:field>": "blackboard_cas",
    "api/v1/sessions/<str:session_id>/checkpoints": "checkpoint_save",
    "api/v1/sessions/<str:session_id>/checkpoints/latest": "checkpoint_restore",
    "api/v1/facts": "fact_assert",
}


def server_side(records: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Per operation: requests, mean and p99 of the server's time, mean cpu, db and embed ms."""
    grouped: dict[str, list[dict[str, Any]]] = {}
    for rec in records:
        name = OPERATIONS.get(rec.get("operation", ""), rec.get("operation", "?"))
        grouped.setdefault(name, []).append(rec)
    out = {}
    for name, recs in grouped.items():
        stats = percentiles([r["duration_ms"] for r in recs])
        out[name] = {
            "n": stats["n"],
            "mean_ms": stats["mean"],
            "p99_ms": stats["p99"],
            "cpu_mean_ms": sum(r.get("cpu_ms", 0.0) for r in recs) / len(recs),
            "db_mean_ms": sum(r.get("db_ms", 0.0) for r in recs) / len(recs),
            "embed_mean_ms": sum(r.get("embed_ms", 0.0) for r in recs) / len(recs),
        }
    return out


def locust_stats(prefix: Path) -> tuple[dict[str, dict[str, float]], list[dict[str, str]]]:
    """Locust's CSV: per request name (and ``Aggregated``) count, failures, rps, mean, p50/p95/p99;
    and the failures (method, name, error, occurrences)."""
    stats = {}
    with Path(f"{prefix}_stats.csv").open() as handle:
        for row in csv.DictReader(handle):
            stats[row["Name"]] = {
                "requests": float(row["Request Count"]),
                "failures": float(row["Failure Count"]),
                "rps": float(row["Requests/s"]),
                "mean_ms": float(row["Average Response Time"]),
                "p50_ms": float(row["50%"] if row["50%"] != "N/A" else 0),
                "p95_ms": float(row["95%"] if row["95%"] != "N/A" else 0),
                "p99_ms": float(row["99%"] if row["99%"] != "N/A" else 0),
            }
    with Path(f"{prefix}_failures.csv").open() as handle:
        failures = [dict(row) for row in csv.DictReader(handle)]
    return stats, failures


def run_step(
    args: argparse.Namespace,
    url: str,
    env: dict[str, str],
    work: Path,
    roots: dict[str, list[int]],
    users: int,
) -> dict[str, Any]:
    """One step of ``users`` agents: Locust for ``--step-seconds`` after they all started; the
    step's figures (see the module docstring)."""
    prefix = work / f"step{users}"
    spawn = max(1, users // 4)  # users per second while starting
    ramp = users / spawn
    command = [
        sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--headless", "--host", url,
        "--users", str(users), "--spawn-rate", str(spawn), "--run-time", f"{int(ramp + 1 + args.step_seconds)}s",
        "--reset-stats", "--csv", str(prefix), "--only-summary", "--loglevel", "WARNING", "--stop-timeout", "5",
    ]  # fmt: skip
    log = work / "web.log"
    _, offset = access_lines(log, 0)
    load_before = list(os.getloadavg())
    locust = subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=(work / f"locust{users}.log").open("wb")
    )
    time.sleep(ramp + 1)  # measured from here, as Locust's statistics (reset once all users run)
    _, offset = access_lines(log, offset)
    cpu0, embed0, t0 = (
        cpu_by_group(roots, locust.pid),
        embed_seconds(url, env["ENGRAM_METRICS_TOKEN"]),
        time.monotonic(),
    )
    time.sleep(max(0.0, args.step_seconds - 1))
    cpu1, embed1, wall = (
        cpu_by_group(roots, locust.pid),
        embed_seconds(url, env["ENGRAM_METRICS_TOKEN"]),
        time.monotonic() - t0,
    )
    records, _ = access_lines(log, offset)
    locust.wait()
    stats, failures = locust_stats(prefix)
    cores = {group: round((cpu1[group] - cpu0[group]) / wall, 2) for group in cpu0}
    cores["other"] = round(cores.pop("machine") - sum(cores[g] for g in GROUPS), 2)
    return {
        "users": users,
        "load_before": load_before,
        "load_after": list(os.getloadavg()),
        "rps": stats["Aggregated"]["rps"],
        "failures": stats["Aggregated"]["failures"],
        "requests": stats["Aggregated"]["requests"],
        "p50_ms": stats["Aggregated"]["p50_ms"],
        "p95_ms": stats["Aggregated"]["p95_ms"],
        "p99_ms": stats["Aggregated"]["p99_ms"],
        "operations": {name: s for name, s in stats.items() if name != "Aggregated"},
        "errors": failures,
        "server": server_side(records),
        "cores": cores,
        "embed_cores": round((embed1 - embed0) / wall, 3),
    }


def print_step(step: dict[str, Any]) -> None:
    print(
        f"\n{step['users']:>3} agents: {step['rps']:6.1f} req/s  p50 {step['p50_ms']:.0f}  p95 {step['p95_ms']:.0f}"
        f"  p99 {step['p99_ms']:.0f} ms  errors {step['failures']:.0f}/{step['requests']:.0f}"
        f"  load {step['load_before'][0]:.1f}->{step['load_after'][0]:.1f}"
    )
    print(
        "    cores: "
        + "  ".join(f"{k} {v:.2f}" for k, v in step["cores"].items())
        + f"  (embedding {step['embed_cores']:.2f})"
    )
    print(
        f"    {'operation':<19}{'rps':>6}{'p50':>6}{'p99':>6}{'client':>8}{'server':>8}{'cpu':>6}{'db':>6}{'embed':>7}{'wait':>6}"
    )
    for name, op in sorted(step["operations"].items()):
        server = step["server"].get(name, {})
        mean = server.get("mean_ms", 0.0)
        print(
            f"    {name:<19}{op['rps']:6.1f}{op['p50_ms']:6.0f}{op['p99_ms']:6.0f}{op['mean_ms']:8.1f}{mean:8.1f}"
            f"{server.get('cpu_mean_ms', 0.0):6.1f}{server.get('db_mean_ms', 0.0):6.1f}{server.get('embed_mean_ms', 0.0):7.1f}{op['mean_ms'] - mean:6.1f}"
        )
    for error in step["errors"][:5]:
        print(f"    error x{error['Occurrences']}: {error['Name']} {error['Error'][:120]}")


def highest(steps: list[dict[str, Any]], p99_ms: float) -> dict[str, Any] | None:
    """The step with the highest request rate whose p99 is within ``p99_ms``."""
    within = [s for s in steps if s["p99_ms"] <= p99_ms]
    return max(within, key=lambda s: s["rps"]) if within else None


def main() -> None:
    args = parse_args()
    # one secret for the set-up and the processes: the tenants' login passwords derive from it (runs
    # sharing a database share it: each scrape of /metrics logs in as every tenant)
    secret = os.environ.get("DJANGO_SECRET_KEY") or secrets.token_urlsafe(40)
    extra = {"ENGRAM_LOAD_THINK": args.think, "DJANGO_SECRET_KEY": secret}
    with contextlib.ExitStack() as stack:
        if args.embedder == "openai":
            base = stack.enter_context(embeddings_stub(args.stub_latency_ms))
            extra |= {"ENGRAM_EMBEDDER": "openai", "ENGRAM_OPENAI_BASE_URL": base,
                      "ENGRAM_EMBEDDING_MODEL": "stub-embedding-384", "ENGRAM_EMBEDDING_DIMENSIONS": "384"}  # fmt: skip
        os.environ.update(extra)  # the set-up records the tenants' embedding model too
        django_setup()
        work = Path(tempfile.mkdtemp(prefix="engram-load-"))  # kept: the processes' logs
        print(f"logs in {work}")
        tenants, agents = make_agents(args.agents, args.tenants)
        stack.callback(lambda: [drop_tenant(t) for t in tenants])
        (work / "agents.json").write_text(json.dumps(agents))
        env = production_env(work, {**extra, "ENGRAM_LOAD_AGENTS": str(work / "agents.json")})
        url, roots = stack.enter_context(production(work, env, args.web))
        roots |= service_roots()
        seed_memories(url, agents, args.seed)
        steps: list[dict[str, Any]] = []
        for users in args.step_list:
            step = run_step(args, url, env, work, roots, users)
            steps.append(step)
            print_step(step)
            record(steps=steps)
            if step["p99_ms"] > args.stop_p99_ms:
                break
    setup = {"agents": args.agents, "tenants": args.tenants, "web": args.web, "think_s": args.think,
             "step_seconds": args.step_seconds, "seed": args.seed, "embedder": args.embedder,
             "stub_latency_ms": args.stub_latency_ms if args.embedder == "openai" else None, "label": args.label}  # fmt: skip
    best = {f"p99_{limit}ms": highest(steps, limit) for limit in (100, 250)}
    record(
        setup=setup,
        best={
            k: (v and {"users": v["users"], "rps": v["rps"], "p99_ms": v["p99_ms"]}) for k, v in best.items()
        },
    )
    for key, found in best.items():
        where = (
            f"{found['rps']:.1f} req/s ({found['users']} agents, p99 {found['p99_ms']:.0f} ms)"
            if found
            else "none"
        )
        print(f"highest sustained rate at {key.replace('_', ' <= ')}: {where}")


if __name__ == "__main__":
    main()
