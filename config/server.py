"""The HTTP protocol uvicorn serves Engram with: its h11 protocol with Nagle's algorithm off.

With ``--workers N`` (and under gunicorn's uvicorn worker) uvicorn binds the listening socket itself
(``Config.bind_socket``) with ``proto`` 0; accepted sockets inherit it, and asyncio turns
``TCP_NODELAY`` on only for sockets that report ``IPPROTO_TCP``. Nagle's algorithm then holds each
response's last small segment until the client acknowledges the previous one, and Linux clients
delay that acknowledgement: every request after the first on a keep-alive connection waited about
40 ms (measured: ``GET /api/v1/me`` 48 ms p50 with two workers against 4.4 ms with one; uvicorn
issue 3149, unfixed in 0.54). Single-process uvicorn is unaffected (asyncio builds that listener
from ``getaddrinfo``), so the protocol does nothing there that was not done already.

Select it with ``--http config.server:NoDelayH11Protocol`` (``devstack.web.uvicorn_command`` does).
"""

from __future__ import annotations

import asyncio
import socket

from uvicorn.protocols.http.h11_impl import H11Protocol


def tcp_nodelay(transport: asyncio.BaseTransport) -> None:
    """Turn Nagle's algorithm off on ``transport``'s socket when it is a TCP socket (IPv4 or IPv6);
    a Unix socket, or a transport without one, is left alone. Raises nothing for a socket closed
    meanwhile (``OSError`` is ignored: the connection is gone either way)."""
    sock = transport.get_extra_info("socket")
    if sock is None or sock.family not in (socket.AF_INET, socket.AF_INET6):
        return
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    except OSError:
        pass


class NoDelayH11Protocol(H11Protocol):
    """uvicorn's h11 HTTP/1.1 protocol, with ``TCP_NODELAY`` set on every accepted connection."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]  # as uvicorn declares it
        tcp_nodelay(transport)
        super().connection_made(transport)
