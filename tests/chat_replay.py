"""A local OpenAI-compatible ``/chat/completions`` endpoint that replays recorded responses (no
network in tests), and the settings that point Engram's chat client at it.

A recording is ``{"system_starts", "user_contains", "body"}``: the first whose ``system_starts``
opens the request's system message and whose ``user_contains`` is in its user message answers with
``body`` (the endpoint's JSON); ``"delay_seconds"`` makes it answer that much later (a model that
times out). A request no recording matches is a 404."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from django.conf import settings

from devstack import free_port


def recordings(path: Path) -> list[dict[str, Any]]:
    """The ``responses`` of a recorded file."""
    return list(json.loads(path.read_text())["responses"])


@dataclass
class ChatReplay:
    """The running endpoint: its ``url`` (``.../v1``) and the request bodies it received."""

    url: str
    requests: list[dict[str, Any]] = field(default_factory=list)


@contextmanager
def chat_replay(recorded: list[dict[str, Any]], *, timeout: float = 5.0) -> Iterator[ChatReplay]:
    """Serve ``recorded`` on a free local port with ``ENGRAM["LLM_BASE_URL"]`` pointing at it
    (model ``gpt-4o-mini``, ``LLM_TIMEOUT`` ``timeout`` seconds); the settings are restored after."""
    replay = ChatReplay(url="")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            replay.requests.append(body)
            system, user = body["messages"][0]["content"], body["messages"][1]["content"]
            for item in recorded:
                if system.startswith(item["system_starts"]) and item["user_contains"] in user:
                    time.sleep(float(item.get("delay_seconds", 0)))
                    payload = json.dumps(item["body"]).encode()
                    try:
                        self.send_response(200)
                        self.send_header("Content-Type", "application/json")
                        self.send_header("Content-Length", str(len(payload)))
                        self.end_headers()
                        self.wfile.write(payload)
                    except OSError:  # the client gave up waiting
                        pass
                    return
            self.send_error(404, "no recorded response for this request")

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    replay.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    old = dict(settings.ENGRAM)
    settings.ENGRAM.update(LLM_BASE_URL=replay.url, LLM_MODEL="gpt-4o-mini", LLM_TIMEOUT=timeout)
    try:
        yield replay
    finally:
        settings.ENGRAM.clear()
        settings.ENGRAM.update(old)
        server.shutdown()
