"""``./engram up|test|manage|services|mcp``: the commands of the development stack (see ``devstack``).

Usage::

    python -m devstack up [--port 8000]      # services, migrate, demo tenant, web + Celery
    python -m devstack test [pytest args]    # services, then the test suite
    python -m devstack manage ARGS           # manage.py against the ./engram up databases
    python -m devstack services              # services only, prints their URLs, waits
    python -m devstack mcp --key KEY         # the MCP server over stdio, as the key's agent
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import time

from devstack import BASE_DIR, VAR_DIR
from devstack.services import services
from devstack.web import DEV_DIR, manage_environment, uvicorn_command, web_environment


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="engram")
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="start everything and serve until Ctrl-C")
    up.add_argument("--port", type=int, default=8000)
    sub.add_parser("test", help="run the test suite (extra arguments go to pytest)")
    sub.add_parser("manage", help="run a manage.py command against the ./engram up databases")
    sub.add_parser("mcp", help="serve MCP over stdio as the agent of --key (for desktop clients)")
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
    if args.command == "mcp":  # stdout is the protocol: the services log to stderr only
        return cmd_manage(["mcp", *rest])
    return cmd_services(args.profile)


if __name__ == "__main__":
    sys.exit(main())
