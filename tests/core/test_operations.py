"""The production layout (issue 36, items 1, 3 and 6): ``check --deploy`` under the production
settings, the deploy files' commands, graceful shutdown of the web server and the worker, structured
logs that carry request id and tenant but no secret or memory content, and the alert rules and
dashboard naming only metrics that ``/metrics`` exports."""

from __future__ import annotations

import json
import os
import re
import secrets
import shlex
import shutil
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
import pytest
import yaml
from django.core.management import get_commands
from django.db import connection
from django.test import Client

from devstack import free_port
from devstack.web import wait_for_http
from tests.factories import BASE_DIR, unavailable
from tests.factories import test_database_env as database_env

DEPLOY = BASE_DIR / "deploy"
MONITORING = DEPLOY / "monitoring"
RULES = MONITORING / "engram-rules.yml"
DASHBOARD = MONITORING / "engram-dashboard.json"


def procfile() -> dict[str, str]:
    """The process types of deploy/Procfile: name -> shell command."""
    entries: dict[str, str] = {}
    for line in (DEPLOY / "Procfile").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, command = line.partition(":")
            entries[name.strip()] = command.strip()
    return entries


def production_env(**extra: str) -> dict[str, str]:
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings.production",
        "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
        **extra,
    }


# --- check --deploy --------------------------------------------------------------------------------


def test_check_deploy_is_clean_under_the_production_settings() -> None:
    command = [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"]
    clean = subprocess.run(command, cwd=BASE_DIR, env=production_env(), capture_output=True, text=True)
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert "no issues" in clean.stdout
    # the check can fail: without HSTS it warns, and --fail-level WARNING makes that an error
    weak = subprocess.run(
        command,
        cwd=BASE_DIR,
        env=production_env(DJANGO_SECURE_HSTS_SECONDS="0"),
        capture_output=True,
        text=True,
    )
    assert weak.returncode != 0 and "security.W004" in weak.stderr + weak.stdout


# --- the deploy files -------------------------------------------------------------------------------

WEB = "uvicorn config.asgi:application --http config.server:NoDelayH11Protocol"


def test_every_deploy_file_runs_the_same_real_commands() -> None:
    processes = procfile()
    assert set(processes) == {"release", "web", "worker", "beat"}
    assert WEB in processes["web"] and "--timeout-graceful-shutdown" in processes["web"]
    assert "check --deploy --database default" in processes["release"]
    commands = get_commands()
    for name in ("check", "migrate_schemas", "collectstatic"):
        assert name in commands, name
    from config.server import NoDelayH11Protocol  # the --http class the commands name

    assert NoDelayH11Protocol

    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    services = compose["services"]
    assert {"postgres", "redis", "web", "worker", "beat", "migrate", "neo4j"} <= set(services)
    assert services["neo4j"]["profiles"] == ["graph"]  # optional
    assert "pgvector" in services["postgres"]["image"]
    for name in ("postgres", "redis", "web", "worker"):
        assert services[name]["healthcheck"]["test"][0] == "CMD", name
    assert services["web"]["healthcheck"]["test"][-1].endswith("/readyz")
    assert WEB in " ".join(services["web"]["command"])
    assert services["worker"]["command"][:4] == ["celery", "-A", "config", "worker"]
    assert services["beat"]["command"][:4] == ["celery", "-A", "config", "beat"]
    assert "migrate_schemas" in " ".join(services["migrate"]["command"])
    for name in ("web", "worker", "beat"):
        assert services[name]["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
    assert services["web"]["stop_grace_period"] == "40s"  # beyond the 30 s of in-flight requests

    units = {p.stem: p.read_text() for p in (DEPLOY / "systemd").glob("*.service")}
    assert set(units) == {"engram-web", "engram-worker", "engram-beat"}
    assert WEB in units["engram-web"] and "KillSignal=SIGTERM" in units["engram-web"]
    assert "celery -A config worker" in units["engram-worker"]
    assert "celery -A config beat" in units["engram-beat"]


def containerfile_stages() -> list[list[str]]:
    """deploy/Containerfile's instructions (continuations joined), split into stages."""
    text = re.sub(r"\\\n", " ", (DEPLOY / "Containerfile").read_text())
    stages: list[list[str]] = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.upper().startswith("FROM "):
            stages.append([])
        if stages:
            stages[-1].append(line)
    return stages


def test_the_container_recipe_is_multi_stage_non_root_and_copies_real_paths() -> None:
    stages = containerfile_stages()
    assert len(stages) == 2
    build, runtime = stages
    assert any("build-essential" in line for line in build)
    final = "\n".join(runtime)
    for tool in ("build-essential", "gcc", "libpq-dev", "pip install"):
        assert tool not in final, tool
    assert "COPY --from=build" in final
    users = [line.split()[1] for line in runtime if line.startswith("USER ")]
    assert users and users[-1].split(":")[0] not in ("0", "root")
    for line in build:
        if line.startswith("COPY ") and "--from" not in line:
            for source in shlex.split(line)[1:-1]:
                assert (BASE_DIR / source).exists(), source
    # the image's command is the Procfile's web process
    cmd = next(line for line in runtime if line.startswith("CMD "))
    assert WEB in cmd and "--timeout-graceful-shutdown" in cmd


def test_the_build_context_admits_exactly_what_the_recipe_copies() -> None:
    """``.containerignore`` ignores everything, then admits each path the build stage copies: a
    path the recipe copies but the context leaves out fails the build, and anything admitted beyond
    them (local data, ``.venv``, secrets) would be sent to the builder for nothing."""
    lines = [line.strip() for line in (BASE_DIR / ".containerignore").read_text().splitlines()]
    rules = [line for line in lines if line and not line.startswith("#")]
    assert rules[0] == "*"
    admitted = {line[1:].rstrip("/") for line in rules if line.startswith("!")}
    copied = {
        source.rstrip("/")
        for line in containerfile_stages()[0]
        if line.startswith("COPY ") and "--from" not in line
        for source in shlex.split(line)[1:-1]
    }
    assert admitted == copied


# --- graceful shutdown --------------------------------------------------------------------------------


def test_sigterm_lets_the_web_server_finish_in_flight_requests(django_db_setup) -> None:
    """The Procfile's web command (two workers), serving a request that takes 3 s, is sent SIGTERM
    one second in: the request completes with its 200, new connections are refused, and the server
    exits by itself."""
    port = free_port()
    command = procfile()["web"].replace("config.asgi:application", "tests.core.slow_asgi:application")
    env = database_env(PORT=str(port), WEB_CONCURRENCY="2", GRACEFUL_TIMEOUT="30")
    env["PATH"] = f"{Path(sys.executable).parent}:{env['PATH']}"
    mark = Path(tempfile.mkdtemp()) / "in-flight"
    env["ENGRAM_SLOW_MARK"] = str(mark)
    server = subprocess.Popen(["sh", "-c", command], cwd=BASE_DIR, env=env, start_new_session=True)
    try:
        wait_for_http(f"http://127.0.0.1:{port}/healthz", server, timeout=90)
        result: dict[str, Any] = {}

        def slow() -> None:
            try:
                result["response"] = httpx.get(f"http://127.0.0.1:{port}/slow?seconds=3", timeout=30)
            except httpx.HTTPError as exc:
                result["error"] = exc

        client = threading.Thread(target=slow)
        client.start()
        deadline = time.monotonic() + 30
        while not mark.exists() and time.monotonic() < deadline:  # a worker is serving it
            time.sleep(0.05)
        assert mark.exists(), result
        server.send_signal(signal.SIGTERM)
        client.join(30)
        assert "error" not in result, result
        assert result["response"].status_code == 200 and result["response"].text == "slept 3.0\n"
        # not served: refused, or (a connection the kernel queued before the listener closed) reset
        with pytest.raises((httpx.ConnectError, httpx.ReadError, httpx.RemoteProtocolError)):
            httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5)
        assert server.wait(20) == 0
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()


def test_sigterm_lets_the_celery_worker_finish_its_running_task(django_db_setup) -> None:
    """The Procfile's worker command, running a 3 s task, is sent SIGTERM one second in: Celery's
    warm shutdown finishes the task, then the worker exits. Its log lines are JSON, tagged with the
    task's id."""
    from config.celery import app
    from core.redis import get_redis

    queue = f"ops-{uuid.uuid4().hex[:8]}"  # the suite's worker does not listen here
    key = f"ops-test:{queue}"
    command = procfile()["worker"] + f" --include tests.core.slow_tasks -Q {queue} --pool prefork"
    env = database_env(CELERY_CONCURRENCY="1", DJANGO_LOG_FORMAT="json")
    env["PATH"] = f"{Path(sys.executable).parent}:{env['PATH']}"
    output = tempfile.TemporaryFile()
    worker = subprocess.Popen(
        ["sh", "-c", command], cwd=BASE_DIR, env=env, start_new_session=True, stdout=output, stderr=output
    )
    redis = get_redis()
    try:
        sent = app.send_task("tests.core.slow_tasks.sleep_then_mark", args=[key, 3.0], queue=queue)
        deadline = time.monotonic() + 90
        while redis.get(key) != b"started":
            assert worker.poll() is None, "the worker exited"
            assert time.monotonic() < deadline, "the task did not start"
            time.sleep(0.1)
        time.sleep(1.0)
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(30) == 0
        assert redis.get(key) == b"finished"
        output.seek(0)
        lines = [json.loads(line) for line in output.read().decode().splitlines() if line.startswith("{")]
        # the worker logs JSON too, each task's lines tagged with its id
        assert any(e["request_id"] == sent.id and "succeeded" in e["message"] for e in lines), lines[-5:]
    finally:
        output.close()
        redis.delete(key)
        if worker.poll() is None:
            os.killpg(worker.pid, signal.SIGKILL)
            worker.wait()


# --- structured logs ------------------------------------------------------------------------------------


@pytest.fixture
def hosted_key(django_db_setup, django_db_blocker) -> Iterator[tuple[str, str]]:  # type: ignore[no-untyped-def]
    """A committed tenant and an agent's key: ``(schema, key)``."""
    from tenants.services import tenant_create
    from tests.factories import make_caller

    slug = f"logs{uuid.uuid4().hex[:8]}"
    with django_db_blocker.unblock():
        tenant, _ = tenant_create(slug=slug, domain=f"{slug}.localhost")
        key = make_caller(tenant, "agent").key
        connection.set_schema_to_public()
        try:
            yield tenant.schema_name, key
        finally:
            connection.set_schema_to_public()
            tenant.delete(force_drop=True)


def test_json_logs_carry_request_id_and_tenant_never_keys_or_content(hosted_key: tuple[str, str]) -> None:
    from devstack.web import uvicorn_command

    schema, key = hosted_key
    content = f"the launch code is {uuid.uuid4().hex}"
    port = free_port()
    with tempfile.TemporaryFile() as output:
        env = database_env(DJANGO_LOG_FORMAT="json", DJANGO_LOG_LEVEL="INFO")
        server = subprocess.Popen(
            uvicorn_command(port, log_level="info"), cwd=BASE_DIR, env=env, stdout=output, stderr=output
        )
        try:
            wait_for_http(f"http://127.0.0.1:{port}/healthz", server, timeout=90)
            headers = {"Authorization": f"Bearer {key}", "X-Request-ID": "trace-abc.123"}
            event = {
                "session_id": "s1",
                "kind": "message",
                "content": content,
                "occurred_at": "2026-12-01T10:00:00Z",
            }
            written = httpx.post(
                f"http://127.0.0.1:{port}/api/v1/events",
                json=[event],
                headers=headers,
                timeout=30,
            )
            assert written.status_code == 201, written.text
            assert written.headers["X-Request-ID"] == "trace-abc.123"
            bad = httpx.post(
                f"http://127.0.0.1:{port}/api/v1/events",
                json=[{**event, "kind": "no such kind"}],
                headers={"Authorization": f"Bearer {key}", "X-Request-ID": "not valid!"},
                timeout=30,
            )
            assert bad.status_code == 400
            assert re.fullmatch(r"[0-9a-f]{32}", bad.headers["X-Request-ID"])  # a new one
            # a query string is not logged (a caller may put anything there)
            queried = httpx.get(
                f"http://127.0.0.1:{port}/api/v1/events?note={key}", headers=headers, timeout=30
            )
            assert queried.status_code == 400
        finally:
            server.terminate()
            server.wait(15)
        output.seek(0)
        text = output.read().decode()
    assert key not in text and content not in text and "launch code" not in text
    entries = [json.loads(line) for line in text.splitlines() if line.startswith("{")]
    access = [e for e in entries if e["logger"] == "engram.access"]
    write = next(e for e in access if e["request_id"] == "trace-abc.123")
    assert write["tenant"] == schema
    assert (
        write["operation"] == "api/v1/events" and write["status"] == 201 and write["path"] == "/api/v1/events"
    )
    assert write["method"] == "POST" and write["duration_ms"] > 0 and write["level"] == "INFO"
    assert any(e["request_id"] == bad.headers["X-Request-ID"] and e["status"] == 400 for e in access)


# --- alert rules and dashboard ----------------------------------------------------------------------------

_NAME = re.compile(r"\b(engram_[a-z0-9_]+)")


def referenced_metrics() -> dict[str, set[str]]:
    """Metric names each monitoring file's expressions use."""
    rules = yaml.safe_load(RULES.read_text())
    exprs = [rule["expr"] for group in rules["groups"] for rule in group["rules"]]
    dashboard = json.loads(DASHBOARD.read_text())
    panel_exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    return {
        "rules": {m for e in exprs for m in _NAME.findall(e)},
        "dashboard": {m for e in panel_exprs for m in _NAME.findall(e)},
    }


def exported_names(text: str) -> set[str]:
    """Every sample name ``/metrics`` can show: each family's name, plus its histogram and counter
    suffixes (a family without samples yet still shows its ``# TYPE``)."""
    names: set[str] = set()
    for family, kind in re.findall(r"^# TYPE (\S+) (\S+)$", text, re.M):
        names.add(family)
        if kind == "histogram":
            names |= {f"{family}_bucket", f"{family}_count", f"{family}_sum"}
    names |= set(re.findall(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)[{ ]", text, re.M))
    return names


def test_every_metric_the_rules_and_dashboard_use_is_exported(hosted_key: tuple[str, str], db) -> None:  # type: ignore[no-untyped-def]
    schema, _ = hosted_key
    client = Client()
    assert client.get("/healthz").status_code == 200  # a request observed by the histogram
    scrape = client.get("/metrics")
    assert scrape.status_code == 200
    text = scrape.content.decode()
    exported = exported_names(text)
    used = referenced_metrics()
    assert len(used["rules"]) >= 8 and len(used["dashboard"]) >= 10
    for source, names in used.items():
        assert names <= exported, f"{source} names metrics /metrics lacks: {sorted(names - exported)}"
    # the per-tenant gauges are read in each tenant's schema
    for sample in (
        "engram_graph_outbox_pending",
        "engram_graph_outbox_lag_seconds",
        "engram_chain_unanchored_events",
    ):
        assert f'{sample}{{tenant="{schema}"}} 0.0' in text, sample
    assert f'engram_erasures_waiting{{status="requested",tenant="{schema}"}} 0.0' in text
    assert re.search(r'^engram_celery_queue_length\{queue="celery"\} \d', text, re.M)


def promtool() -> str:
    path = shutil.which("promtool")
    if path is None:
        unavailable("promtool is not installed (Debian's prometheus package; .ci/run installs it)")
    return path


def test_the_rules_and_every_dashboard_expression_pass_promtool(tmp_path: Path) -> None:
    tool = promtool()
    checked = subprocess.run([tool, "check", "rules", str(RULES)], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    # the dashboard's expressions, as recording rules: promtool parses each one
    dashboard = json.loads(DASHBOARD.read_text())
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids)) and dashboard["uid"] and dashboard["schemaVersion"] >= 36
    records = [
        {"record": f"engram:panel{p['id']}:{t['refId']}", "expr": t["expr"]}
        for p in dashboard["panels"]
        for t in p["targets"]
    ]
    assert all(
        p["datasource"]["uid"] == "${DS_PROMETHEUS}" and p["gridPos"]["w"] > 0 for p in dashboard["panels"]
    )
    as_rules = tmp_path / "dashboard-rules.yml"
    as_rules.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": records}]}))
    parsed = subprocess.run([tool, "check", "rules", str(as_rules)], capture_output=True, text=True)
    assert parsed.returncode == 0, parsed.stdout + parsed.stderr
    # ... and promtool does reject a broken expression
    as_rules.write_text(
        yaml.safe_dump({"groups": [{"name": "x", "rules": [{"record": "a:b", "expr": "sum(("}]}]})
    )
    assert subprocess.run([tool, "check", "rules", str(as_rules)], capture_output=True).returncode != 0


def test_scrape_time_collectors_are_served_with_a_multiprocess_directory(
    hosted_key: tuple[str, str], db, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    """With ``PROMETHEUS_MULTIPROC_DIR`` (several uvicorn workers) ``/metrics`` builds a registry of
    the per-process files: the collectors that read PostgreSQL and Redis must be in it too."""
    schema, _ = hosted_key
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))
    text = Client().get("/metrics").content.decode()
    for family in (
        "engram_consolidation_runs_total",
        "engram_graph_outbox_pending",
        "engram_celery_queue_length",
    ):
        assert f"# TYPE {family} " in text, family
    assert f'engram_graph_outbox_pending{{tenant="{schema}"}}' in text
