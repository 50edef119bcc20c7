"""What ``./engram up`` starts its processes with: DEBUG off, static files, a private /metrics token."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

from devstack.web import private_secret, web_environment
from tests.factories import BASE_DIR


def test_engram_up_makes_a_private_metrics_token(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.delenv("ENGRAM_METRICS_TOKEN", raising=False)
    monkeypatch.delenv("ENGRAM_METRICS_TOKEN_FILE", raising=False)
    env = web_environment({}, tmp_path)
    token_file = Path(env["ENGRAM_METRICS_TOKEN_FILE"])
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    assert len(token_file.read_text().strip()) >= 40
    assert private_secret(token_file).read_text() == token_file.read_text()  # kept across restarts


def test_engram_up_runs_with_debug_off() -> None:
    env = {k: v for k, v in os.environ.items() if k not in {"DJANGO_DEBUG", "DJANGO_SETTINGS_MODULE"}}
    out = subprocess.run(
        [sys.executable, "-c", "from config.settings import local; print(local.DEBUG)"],
        cwd=BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "False"
    from devstack.web import web_environment

    assert web_environment({})["ENGRAM_SERVE_STATIC"] == "1"  # the admin keeps its CSS without DEBUG


def test_engram_up_makes_a_private_signing_key_and_an_anchor_sink(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    for name in ("ENGRAM_SIGNING_KEY", "ENGRAM_SIGNING_KEY_FILE", "ENGRAM_ANCHOR_SINK"):
        monkeypatch.delenv(name, raising=False)
    env = web_environment({}, tmp_path)
    key_file = Path(env["ENGRAM_SIGNING_KEY_FILE"])
    assert key_file == tmp_path / "secrets" / "signing-key.pem"
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    key = serialization.load_pem_private_key(key_file.read_bytes(), password=None)
    assert isinstance(key, Ed25519PrivateKey)
    first = key_file.read_bytes()
    assert Path(web_environment({}, tmp_path)["ENGRAM_SIGNING_KEY_FILE"]).read_bytes() == first  # kept
    assert env["ENGRAM_ANCHOR_SINK"] == str(tmp_path / "anchors.jsonl")


def test_the_web_server_turns_nagle_off_on_sockets_uvicorn_binds_itself() -> None:
    """``--workers N`` hands asyncio a listener uvicorn bound itself (``proto`` 0), whose accepted
    sockets asyncio leaves with Nagle on: each keep-alive request then waited ~40 ms for a delayed
    ACK. The protocol ``uvicorn_command`` selects sets ``TCP_NODELAY`` on every connection."""
    import asyncio
    import socket

    import uvicorn
    from uvicorn.protocols.http.h11_impl import H11Protocol
    from uvicorn.server import ServerState

    from config.server import NoDelayH11Protocol
    from devstack.web import uvicorn_command

    command = uvicorn_command(8000, workers=2)
    assert command[command.index("--http") + 1] == "config.server:NoDelayH11Protocol"

    async def app(scope, receive, send):  # type: ignore[no-untyped-def]  # never called
        raise AssertionError("no request is sent")

    def accepted_nodelay(protocol_class: type[H11Protocol]) -> int:
        config = uvicorn.Config(app, host="127.0.0.1", port=0, http=protocol_class, log_level="warning")
        config.load()
        listener = config.bind_socket()  # what the multiprocess supervisor passes to its workers
        seen: list[int] = []

        class Probe(protocol_class):  # type: ignore[misc, valid-type]
            def connection_made(self, transport: asyncio.Transport) -> None:
                super().connection_made(transport)
                sock = transport.get_extra_info("socket")
                seen.append(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))

        async def run() -> None:
            state = ServerState()
            server = await asyncio.get_running_loop().create_server(
                lambda: Probe(config=config, server_state=state, app_state={}), sock=listener
            )
            async with server:
                _, writer = await asyncio.open_connection(*listener.getsockname()[:2])
                for _ in range(100):
                    if seen:
                        break
                    await asyncio.sleep(0.01)
                writer.close()

        asyncio.run(run())
        assert seen, "no connection reached the protocol"
        return seen[0]

    assert accepted_nodelay(NoDelayH11Protocol) != 0
    # uvicorn's own protocol on the same kind of listener (0 while uvicorn issue 3149 is open)
    print("uvicorn's H11Protocol on a pre-bound listener: TCP_NODELAY", accepted_nodelay(H11Protocol))
