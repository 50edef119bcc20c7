"""``./engram up|test|manage|services|mcp``: the commands of the development stack (see ``devstack``).

Usage::

    python -m devstack up [--port 8000]      # services, migrate, demo tenant, web + Celery
    python -m devstack test [pytest args]    # services, then the test suite
    python -m devstack manage ARGS           # manage.py against the ./engram up databases
    python -m devstack services              # services only, prints their URLs, waits
    python -m devstack mcp --key KEY         # the MCP server over stdio, as the key's agent
    python -m devstack docs [--port 8001]    # the documentation site (MkDocs), rebuilt on each change
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from devstack import BASE_DIR, VAR_DIR
from devstack.services import services
from devstack.web import DEV_DIR, manage_environment, uvicorn_command, wait_for_http, web_environment


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


def _phase(phase: str, text: str, started: float | None = None) -> float:
    """Print one line of ``./engram up``'s progress (``[2/4 services] text``), with the seconds since
    ``started`` when given; returns now, to time the next step."""
    now = time.monotonic()
    suffix = f" ({now - started:.1f} s)" if started is not None else ""
    print(f"[{phase}] {text}{suffix}", flush=True)
    return now


def celery_command() -> list[str]:
    """The command line of ``./engram up``'s Celery worker with beat (2 processes). As root (a
    container, a root shell) Celery warns that workers should not run as root, which a developer
    cannot act on here: that one warning is turned off by its message through Python's documented
    ``-W`` option (a category filter cannot name Celery's class before Celery is imported). The
    banner and task list are left out (``--quiet``): the ready message says what runs."""
    quiet_root = (
        ["-W", "ignore:You're running the worker with superuser privileges"] if os.geteuid() == 0 else []
    )
    return [
        sys.executable,
        *quiet_root,
        "-m",
        "celery",
        "--quiet",
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
    ]


def ready_message(port: int, credentials: Path) -> str:
    """What ``./engram up`` prints once the API answers: the URLs, where the credentials are, and the
    next three things to try."""
    base = f"http://127.0.0.1:{port}"
    return (
        f"\nEngram is ready (Ctrl-C stops everything).\n"
        f"  API, for code:         {base}/api/v1/   (reference: {base}/api/v1/docs)\n"
        f"  demo tenant's admin:   http://demo.localhost:{port}/admin/   (user admin)\n"
        f"  platform admin:        http://localhost:{port}/admin/   (user admin)\n"
        f"  credentials (API key, admin passwords): {credentials}   (mode 0600, never printed)\n"
        f"Next:\n"
        f"  1. store and recall a memory:  KEY=$(grep -o 'egm\\.[^ ]*' {credentials} | tail -1)\n"
        f'     curl -s {base}/api/v1/memories/search -H "Authorization: Bearer $KEY" '
        f"-H 'Content-Type: application/json' -d '{{\"query\": \"hello\"}}'\n"
        f"  2. open the demo tenant's admin and follow the trail of what the agent did\n"
        f"  3. read the docs: ./engram docs  (http://127.0.0.1:8001: getting started, guides, API)\n"
    )


def cmd_up(port: int) -> int:
    """Services, migrations, demo tenant; then web server and Celery worker until Ctrl-C. Prints each
    phase as it starts and ends (``[2/4 services]``), then the URLs once the API answers."""
    started = _phase("2/4 services", "starting PostgreSQL and Redis (data in var/dev/)")
    with services(
        "dev",
        redis_port=int(os.environ.get("ENGRAM_REDIS_PORT", "6390")),
        neo4j_port=int(os.environ.get("ENGRAM_NEO4J_PORT", "7688")),
    ) as svc:
        started = _phase("2/4 services", "running", started)
        env = web_environment(svc)
        _phase("3/4 migrations", "the public schema, then each tenant's (the first run takes longest)")
        _manage(["migrate_schemas", "--noinput", "-v", "0"], env)
        started = _phase("3/4 migrations", "done", started)
        credentials = DEV_DIR / "credentials"
        _phase("4/4 demo data", "the demo tenant, its admin user and an agent key")
        _manage(["bootstrap_demo", "--port", str(port), "--credentials-file", str(credentials)], env)
        _phase("4/4 demo data", "done", started)
        children = [
            # ASGI, so Server-Sent Events streams work next to the API and the admin
            subprocess.Popen(
                uvicorn_command(port, log_level="info"), cwd=BASE_DIR, env=env, start_new_session=True
            ),
            subprocess.Popen(celery_command(), cwd=BASE_DIR, env=env, start_new_session=True),
        ]
        stop = {"now": False}

        def _on_signal(signum: int, frame: object) -> None:
            stop["now"] = True

        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, _on_signal)
        try:
            # readiness: PostgreSQL and Redis answer (api.ops); cheap, unlike the schema
            wait_for_http(f"http://127.0.0.1:{port}/readyz", children[0], timeout=120)
            print(ready_message(port, credentials), flush=True)
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
        env = manage_environment(svc)
        return subprocess.run([sys.executable, "manage.py", *args], cwd=BASE_DIR, env=env).returncode


def cmd_services(profile: str) -> int:
    """Start the services, print ``export`` lines for a shell, wait for Ctrl-C."""
    with services(profile) as svc:
        for key, value in svc.items():
            print(f"export {key}='{value}'", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            signal.pause()
    return 0


def cmd_docs(port: int) -> int:
    """Serve the documentation site (``mkdocs serve``) on 127.0.0.1:``port`` until Ctrl-C."""
    command = [sys.executable, "-m", "mkdocs", "serve", "--dev-addr", f"127.0.0.1:{port}"]
    # MkDocs' banner about its next major version is for the site's maintainers, not its readers
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    with contextlib.suppress(KeyboardInterrupt):
        return subprocess.run(command, cwd=BASE_DIR, env=env).returncode
    return 0


def parser() -> argparse.ArgumentParser:
    """The command line of ``./engram`` (its subcommands and their help: the docs' command reference)."""
    root = argparse.ArgumentParser(prog="engram")
    sub = root.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="start everything and serve until Ctrl-C")
    up.add_argument("--port", type=int, default=8000)
    sub.add_parser("test", help="run the test suite (extra arguments go to pytest)")
    sub.add_parser("manage", help="run a manage.py command against the ./engram up databases")
    sub.add_parser("mcp", help="serve MCP over stdio as the agent of --key (for desktop clients)")
    svc = sub.add_parser("services", help="start PostgreSQL and Redis (and Neo4j with ENGRAM_NEO4J=1) only")
    svc.add_argument("--profile", default="bench")
    docs = sub.add_parser("docs", help="serve the documentation site on http://127.0.0.1:8001")
    docs.add_argument("--port", type=int, default=8001)
    return root


def main(argv: list[str] | None = None) -> int:
    args, rest = parser().parse_known_args(argv)
    # SIGTERM unwinds like Ctrl-C, so every service started here is stopped on the way out
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, lambda signum, frame: sys.exit(128 + signum))
    if args.command == "up":
        return cmd_up(args.port)
    if args.command == "test":
        return cmd_test(rest)
    if args.command == "manage":
        return cmd_manage(rest)
    if args.command == "docs":
        return cmd_docs(args.port)
    if args.command == "mcp":  # stdout is the protocol: the services log to stderr only
        return cmd_manage(["mcp", *rest])
    return cmd_services(args.profile)


if __name__ == "__main__":
    sys.exit(main())
