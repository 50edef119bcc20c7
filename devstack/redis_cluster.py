"""A Redis Cluster of three masters on 127.0.0.1, from the same ``redis-server`` binary as
:class:`devstack.redis_server.EmbeddedRedis` (the CI test of working memory, checkpoints and the
Celery broker on a cluster starts one).

The slots are assigned the way ``redis-cli --cluster create`` does for three masters (0-5460,
5461-10922, 10923-16383), with ``CLUSTER ADDSLOTS`` and ``CLUSTER MEET`` sent by redis-py, so no
``redis-cli`` is needed; the cluster has no replicas (a test cluster: a master that dies takes its
slots with it).
"""

from __future__ import annotations

import contextlib
import random
import shutil
import socket
import subprocess
import time
from pathlib import Path

from devstack.redis_server import redis_server_binary

SLOTS = 16384


def slot_ranges(masters: int) -> list[tuple[int, int]]:
    """Inclusive slot ranges, one per master, as ``redis-cli --cluster create`` splits them."""
    per = SLOTS / masters
    return [(round(i * per), round((i + 1) * per) - 1) for i in range(masters)]


def _free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def cluster_ports(count: int) -> list[int]:
    """``count`` ports free right now whose cluster bus ports (port + 10000) are free too; below
    55536, so the bus port exists (an ephemeral port from the kernel may not leave room)."""
    ports: list[int] = []
    while len(ports) < count:
        port = random.randint(20000, 29999)
        if port not in ports and _free(port) and _free(port + 10000):
            ports.append(port)
    return ports


class EmbeddedRedisCluster:
    """``masters`` ``redis-server`` processes in cluster mode on ``ports``, data in ``data_dir``
    (nothing persisted but each node's ``nodes.conf``, removed on ``stop``)."""

    def __init__(self, data_dir: Path, ports: list[int]) -> None:
        self.data_dir = data_dir
        self.ports = ports
        self._processes: list[subprocess.Popen[bytes]] = []

    @property
    def urls(self) -> list[str]:
        """``redis://127.0.0.1:<port>/0`` of every master, in slot order."""
        return [f"redis://127.0.0.1:{port}/0" for port in self.ports]

    def start(self, timeout: float = 30.0) -> str:
        """Start the nodes, assign the slots, join them and wait until every node reports
        ``cluster_state:ok``; returns the URL of the first master (any master bootstraps a cluster
        client). Raises ``RuntimeError`` when a node does not start or the cluster does not form."""
        import redis

        shutil.rmtree(self.data_dir, ignore_errors=True)
        for port in self.ports:
            node_dir = self.data_dir / str(port)
            node_dir.mkdir(parents=True, exist_ok=True)
            self._processes.append(
                subprocess.Popen(
                    [
                        redis_server_binary(),
                        *("--bind", "127.0.0.1", "--port", str(port)),
                        *("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"),
                        *("--cluster-node-timeout", "5000"),
                        *("--save", "", "--appendonly", "no", "--dir", str(node_dir)),
                        *("--loglevel", "warning"),
                    ],
                    stdout=subprocess.DEVNULL,
                    start_new_session=True,
                )
            )
        deadline = time.monotonic() + timeout
        clients = [redis.Redis(host="127.0.0.1", port=port) for port in self.ports]
        for process, client in zip(self._processes, clients, strict=True):
            while True:
                try:
                    client.ping()
                    break
                except redis.ConnectionError:
                    if process.poll() is not None or time.monotonic() > deadline:
                        self.stop()
                        raise RuntimeError("a Redis Cluster node did not start") from None
                    time.sleep(0.05)
        for client, (first, last) in zip(clients, slot_ranges(len(clients)), strict=True):
            client.execute_command("CLUSTER ADDSLOTS", *range(first, last + 1))
        for port in self.ports[1:]:
            clients[0].execute_command("CLUSTER MEET", "127.0.0.1", port)
        while True:
            # redis-py parses CLUSTER INFO into a dict
            infos: list[dict[str, str]] = [client.execute_command("CLUSTER INFO") for client in clients]
            if all(
                i.get("cluster_state") == "ok" and int(i.get("cluster_known_nodes", 0)) == len(clients)
                for i in infos
            ):
                break
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the Redis Cluster did not form: {infos}")
            time.sleep(0.1)
        for client in clients:
            client.close()
        return self.urls[0]

    def stop(self) -> None:
        """Terminate every node, wait for them and remove their data."""
        for process in self._processes:
            if process.poll() is None:
                process.terminate()
        for process in self._processes:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(10)
            if process.poll() is None:
                process.kill()
        self._processes = []
        shutil.rmtree(self.data_dir, ignore_errors=True)
