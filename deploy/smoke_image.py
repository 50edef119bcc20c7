"""Run Engram's image as production runs it, against a real PostgreSQL and Redis, and check it.

    python deploy/smoke_image.py --database-url postgres://... --redis-url redis://... \
        --model-dir ../shared/models/all-MiniLM-L6-v2-onnx \
        [--image localhost/engram:latest] [--podman-arg=--runtime=runc ...]

The image (``deploy/Containerfile``) must be built first. The script runs, each in a container
of that image on the host's network: the release step (``check --deploy`` under the production
settings, then ``migrate_schemas``) into a database of its own, a tenant and an agent key, the web
process (the image's default command, two workers), a Celery worker and beat. Then it checks:
``/readyz`` answers 200; a memory written through the API is found by a search; the worker answers
a ping through the broker; beat has started; the web process runs as an unprivileged user and logs
JSON lines with a request id; SIGTERM stops the web process cleanly within its grace period. It
removes its containers and its database at the end, and exits 1 naming the first check that failed.

``--database-url`` names a server the script may create a database on (a superuser's URL). A Unix
socket URL (``postgres://user@%2Fpath%2Fto%2Fdir/db``) is forwarded to a TCP port on 127.0.0.1 for
the containers, which cannot reach the host's socket directory.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import secrets
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from contextlib import ExitStack
from pathlib import Path
from urllib.parse import unquote, urlsplit

import psycopg
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

RELEASE = (
    "python manage.py check --deploy --database default --fail-level WARNING"
    " && python manage.py migrate_schemas --noinput"
)


class SmokeFailed(Exception):
    """A check of the running image failed; the message names it."""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _forward_unix_socket(path: str) -> int:
    """Serve 127.0.0.1:<port> -> the Unix socket ``path`` in a daemon thread; return the port."""
    port = _free_port()

    async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            writer.close()

    async def handle(client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        server_r, server_w = await asyncio.open_unix_connection(path)
        await asyncio.gather(pipe(client_r, server_w), pipe(server_r, client_w))

    async def serve() -> None:
        server = await asyncio.start_server(handle, "127.0.0.1", port)
        async with server:
            await server.serve_forever()

    threading.Thread(target=lambda: asyncio.run(serve()), daemon=True).start()
    time.sleep(0.3)
    return port


def _container_database_url(admin_url: str, database: str) -> str:
    """The URL the containers use for ``database`` on the server of ``admin_url`` (TCP)."""
    parts = urlsplit(admin_url)
    host = unquote(parts.hostname or "")
    user = parts.username or "postgres"
    password = f":{parts.password}" if parts.password else ""
    if host.startswith("/"):
        port = _forward_unix_socket(f"{host}/.s.PGSQL.{parts.port or 5432}")
        host = "127.0.0.1"
    else:
        port = parts.port or 5432
    return f"postgres://{user}{password}@{host}:{port}/{database}"


class Smoke:
    """The containers of one run and the checks over them."""

    def __init__(
        self, *, image: str, podman_args: list[str], env: dict[str, str], secrets_dir: Path, model_dir: str
    ):
        self.image = image
        self.model_dir = model_dir
        self.podman_args = podman_args
        self.env = env
        self.secrets_dir = secrets_dir
        self.names: list[str] = []

    def _run_args(self) -> list[str]:
        args = ["--network", "host", "-v", f"{self.secrets_dir}:/run/secrets:ro", *self.podman_args]
        if self.model_dir:
            args += ["-v", f"{self.model_dir}:/opt/models/embedding:ro"]
        for key, value in self.env.items():
            args += ["-e", f"{key}={value}"]
        return args

    def once(self, command: str, *, timeout: float = 600) -> str:
        """Run ``sh -c command`` in a throwaway container; its stdout, or SmokeFailed with its output."""
        proc = subprocess.run(
            ["podman", "run", "--rm", *self._run_args(), self.image, "sh", "-c", command],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if proc.returncode != 0:
            raise SmokeFailed(f"`{command}` exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
        return proc.stdout

    def start(self, name: str, *command: str) -> None:
        """Start a detached container ``name`` (the image's default command when none is given)."""
        subprocess.run(
            ["podman", "run", "-d", "--name", name, *self._run_args(), self.image, *command],
            capture_output=True,
            text=True,
            check=True,
        )
        self.names.append(name)

    def logs(self, name: str) -> str:
        proc = subprocess.run(["podman", "logs", name], capture_output=True, text=True, check=False)
        return proc.stdout + proc.stderr

    def remove_all(self) -> None:
        for name in self.names:
            subprocess.run(["podman", "rm", "-f", "-t", "5", name], capture_output=True, check=False)


def _http(
    method: str, url: str, *, key: str = "", body: dict[str, object] | None = None
) -> tuple[int, bytes]:
    """One request as a TLS-terminating proxy would forward it; (status, body)."""
    request = urllib.request.Request(url, method=method, data=json.dumps(body).encode() if body else None)
    request.add_header("X-Forwarded-Proto", "https")
    request.add_header("Content-Type", "application/json")
    if key:
        request.add_header("Authorization", f"Bearer {key}")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()
    except OSError:
        return 0, b""


def _wait_ready(base: str, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        status, _ = _http("GET", f"{base}/readyz")
        if status == 200:
            return
        time.sleep(1)
    raise SmokeFailed(f"/readyz did not answer 200 within {seconds:.0f} s")


def _check(condition: bool, what: str) -> None:
    if not condition:
        raise SmokeFailed(what)
    print(f"ok   {what}", flush=True)


def run(args: argparse.Namespace) -> None:
    """Every check in the module's docstring, in order; SmokeFailed at the first that fails."""
    database = f"engram_smoke_{secrets.token_hex(4)}"
    with psycopg.connect(args.database_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{database}"')
    port = _free_port()
    with ExitStack() as stack, tempfile.TemporaryDirectory() as tmp:
        stack.callback(_drop_database, args.database_url, database)
        secrets_dir = Path(tmp)
        secrets_dir.chmod(0o755)
        key_file = secrets_dir / "engram-signing-key.pem"
        key_file.write_bytes(
            Ed25519PrivateKey.generate().private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
        )
        key_file.chmod(0o644)  # readable by the image's unprivileged user (uid 10001)
        env = {
            "DATABASE_URL": _container_database_url(args.database_url, database),
            "REDIS_URL": args.redis_url,
            "DATABASE_POOL": "1",
            "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
            "DJANGO_ALLOWED_HOSTS": "127.0.0.1,localhost,.localhost",
            "ENGRAM_METRICS_TOKEN": secrets.token_urlsafe(24),
            "ENGRAM_SIGNING_KEY_FILE": "/run/secrets/engram-signing-key.pem",
            "PORT": str(port),
            "WEB_CONCURRENCY": "2",
        }
        if args.model_dir:
            env["ENGRAM_EMBEDDING_MODEL_PATH"] = "/opt/models/embedding"
        smoke = Smoke(
            image=args.image,
            podman_args=args.podman_arg,
            env=env,
            secrets_dir=secrets_dir,
            model_dir=args.model_dir,
        )
        stack.callback(smoke.remove_all)
        started = time.monotonic()
        smoke.once(RELEASE)
        _check(
            True, f"release: check --deploy clean, migrations applied ({time.monotonic() - started:.0f} s)"
        )
        smoke.once("python manage.py create_tenant smoke --domain smoke.localhost")
        key = smoke.once("python manage.py api_key_create --tenant smoke --agent smoke-agent").split()[-1]
        _check(key.startswith("egm."), "a tenant and an agent key created with the image's commands")
        smoke.start("engram-smoke-web")
        smoke.start(
            "engram-smoke-worker",
            "celery",
            "-A",
            "config",
            "worker",
            "--concurrency",
            "1",
            "--without-gossip",
            "--without-mingle",
            "--loglevel",
            "INFO",
        )
        smoke.start(
            "engram-smoke-beat",
            "celery",
            "-A",
            "config",
            "beat",
            "--loglevel",
            "INFO",
            "--schedule",
            "/tmp/celerybeat-schedule",
        )
        base = f"http://127.0.0.1:{port}"
        _wait_ready(base, args.ready_seconds)
        _check(True, "web: /readyz 200 (PostgreSQL and Redis reachable from the image)")
        _api_round_trip(base, key)
        ping = smoke.once("celery -A config inspect ping --timeout 10", timeout=60)
        _check("pong" in ping, "worker: answers a ping through the broker")
        _check("beat: Starting" in smoke.logs("engram-smoke-beat"), "beat: started")
        whoami = subprocess.run(
            ["podman", "exec", "engram-smoke-web", "id", "-u"], capture_output=True, text=True, check=False
        ).stdout.strip()
        _check(whoami == "10001", f"web runs as uid {whoami} (not root)")
        _check_json_logs(smoke.logs("engram-smoke-web"))
        _check_graceful_stop("engram-smoke-web")


def _api_round_trip(base: str, key: str) -> None:
    status, body = _http(
        "POST",
        f"{base}/api/v1/memories",
        key=key,
        body={"content": "Alice lives in Lisbon", "scope": "shared"},
    )
    _check(status == 201, f"API: a memory written through the image's web process ({status})")
    status, body = _http(
        "POST", f"{base}/api/v1/memories/search", key=key, body={"query": "Where does Alice live?", "k": 3}
    )
    found = status == 200 and "Lisbon" in body.decode()
    _check(found, f"API: the search finds it ({status})")


def _check_json_logs(logs: str) -> None:
    lines = [line for line in logs.splitlines() if line.startswith("{")]
    records = [json.loads(line) for line in lines]
    with_ids = [r for r in records if r.get("request_id")]
    _check(bool(with_ids), f"logs: JSON lines with a request id ({len(with_ids)} of {len(records)})")


def _check_graceful_stop(name: str) -> None:
    started = time.monotonic()
    subprocess.run(["podman", "stop", "-t", "40", name], capture_output=True, check=True)
    seconds = time.monotonic() - started
    state = subprocess.run(
        ["podman", "inspect", name, "--format", "{{.State.ExitCode}}"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    _check(state == "0" and seconds < 40, f"web: SIGTERM stops it cleanly (exit {state}, {seconds:.1f} s)")


def _drop_database(admin_url: str, database: str) -> None:
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--database-url", required=True, help="a superuser's URL of the PostgreSQL server")
    parser.add_argument("--redis-url", required=True)
    parser.add_argument("--image", default="localhost/engram:latest")
    parser.add_argument(
        "--podman-arg",
        action="append",
        default=[],
        help="passed to every `podman run` (repeat), e.g. --podman-arg=--runtime=runc",
    )
    parser.add_argument(
        "--model-dir",
        default="",
        help="the embedding model's folder, mounted read-only (the image holds none)",
    )
    parser.add_argument("--ready-seconds", type=float, default=120)
    args = parser.parse_args()
    try:
        run(args)
    except SmokeFailed as exc:
        print(f"FAIL {exc}", file=sys.stderr)
        return 1
    print("the image passed every check")
    return 0


if __name__ == "__main__":
    sys.exit(main())
