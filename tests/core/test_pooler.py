"""A transaction (or statement) pooler in front of PostgreSQL is refused at start-up (issue 36, item
2; docs/decisions/0061-session-pooling-required.md): the ``engram.E010`` system check, run by
``manage.py check --database default``, probes a real PgBouncer (Debian's ``pgbouncer``) in each
pool mode in front of the suite's PostgreSQL."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.db import connection

from core.db.pooler import session_pooling_problem
from devstack import free_port
from tests.core.test_database_down import PostgresProxy, postgres_target
from tests.factories import unavailable


def pgbouncer_binary() -> str:
    path = shutil.which("pgbouncer") or (
        "/usr/sbin/pgbouncer" if Path("/usr/sbin/pgbouncer").exists() else None
    )
    if path is None:
        unavailable("pgbouncer is not installed (Debian's pgbouncer package; .ci/run installs it)")
    return path


@contextlib.contextmanager
def pgbouncer(mode: str) -> Iterator[int]:
    """A PgBouncer in ``pool_mode = mode`` in front of the suite's PostgreSQL (through a TCP proxy:
    the server may listen on a Unix socket only), trusting the shared login; yields its port."""
    binary = pgbouncer_binary()
    proxy = PostgresProxy(postgres_target())
    port = free_port()
    user = connection.settings_dict["USER"]
    with tempfile.TemporaryDirectory() as folder:
        os.chmod(folder, 0o777)  # pgbouncer refuses to run as root: it runs as nobody there
        ini = Path(folder) / "pgbouncer.ini"
        (Path(folder) / "users.txt").write_text(f'"{user}" "{connection.settings_dict["PASSWORD"] or ""}"\n')
        ini.write_text(
            "[databases]\n"
            f"* = host=127.0.0.1 port={proxy.port}\n"
            "[pgbouncer]\n"
            f"listen_addr = 127.0.0.1\nlisten_port = {port}\nunix_socket_dir =\n"
            f"auth_type = trust\nauth_file = {folder}/users.txt\n"
            f"pool_mode = {mode}\ndefault_pool_size = 4\n"
            f"logfile = {folder}/pgbouncer.log\npidfile = {folder}/pgbouncer.pid\n"
            "ignore_startup_parameters = extra_float_digits,options\n"
        )
        for name in ("pgbouncer.ini", "users.txt"):
            os.chmod(Path(folder) / name, 0o644)
        command = [binary, *(["-u", "nobody"] if os.geteuid() == 0 else []), str(ini)]
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 10
            while True:
                with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.5):
                    break
                log = Path(folder) / "pgbouncer.log"
                assert process.poll() is None, log.read_text() if log.exists() else "pgbouncer exited"
                assert time.monotonic() < deadline, "pgbouncer did not listen"
                time.sleep(0.1)
            yield port
        finally:
            process.terminate()
            process.wait(10)
            proxy.close()


def through(port: int) -> dict[str, Any]:
    params = connection.get_connection_params()
    return {
        "dbname": params["dbname"],
        "user": params["user"],
        "password": params.get("password") or "",
        "host": "127.0.0.1",
        "port": port,
        "connect_timeout": 5,
    }


def test_the_probe_tells_a_transaction_pooler_from_a_session_pooler_and_postgresql(db) -> None:  # type: ignore[no-untyped-def]
    direct = {
        k: v for k, v in connection.get_connection_params().items() if k not in ("cursor_factory", "context")
    }
    assert session_pooling_problem(direct) is None
    with pgbouncer("session") as port:
        assert session_pooling_problem(through(port)) is None
    with pgbouncer("transaction") as port:
        problem = session_pooling_problem(through(port))
        assert problem is not None and "per transaction or statement" in problem, problem
    with pgbouncer("statement") as port:
        assert session_pooling_problem(through(port)) is not None


def test_check_database_refuses_a_transaction_pooler(db, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    call_command("check", "--database", "default")  # the suite's PostgreSQL: no error
    with pgbouncer("transaction") as port:
        monkeypatch.setitem(connection.settings_dict, "HOST", "127.0.0.1")
        monkeypatch.setitem(connection.settings_dict, "PORT", str(port))
        with pytest.raises(SystemCheckError, match=r"engram\.E010"):
            call_command("check", "--database", "default")
    with pgbouncer("session") as port:
        monkeypatch.setitem(connection.settings_dict, "PORT", str(port))
        call_command("check", "--database", "default")
