"""Copy one tenant's schema to another PostgreSQL server by logical replication while the tenant
keeps working: the copy phase of a tenant's move (``compliance.services.move``, decision 0103).

One move makes, all named ``engram_move_<digest of database and schema>`` (``Link``):

- on the source, as the maintenance role: a login of its own with ``REPLICATION`` and a random
  password, allowed to read the schema's tables (the subscription connects as it); a publication
  ``FOR TABLE`` of every table of the schema (``FOR TABLES IN SCHEMA`` would need a superuser);
  a logical replication slot (made here rather than by the subscription, so that a target in the
  same cluster does not wait for itself);
- on the target: the schema's tables, indexes, functions and triggers (``pg_dump
  --schema-only``, as the maintenance role), then a subscription owned by the shared login
  (PostgreSQL 16 runs a subscription's workers as its owner, which must be a login; they write as
  each table's owner, the maintenance role) that copies every table and streams what the tenant
  writes after.

The subscriber applies rows with ``session_replication_role = replica``: ordinary triggers do not
fire there, so the trail's hash chain and every column a trigger fills arrive exactly as the source
stored them. Logical replication does not carry sequences: ``sequences_copy`` sets them during the
pause. A table without a replica identity would make the source refuse the tenant's updates and
deletes while it is published: ``tables_without_identity`` lists them and the move refuses to start.

Needs: ``wal_level = logical`` on the source (and a free slot and sender, ``max_replication_slots``,
``max_wal_senders``); ``REPLICATION`` for the source's maintenance role (it makes the login and the
slot); ``pg_create_subscription`` and ``CREATE`` on the database for the target's shared login;
the target
reaching the source at the host and port of the source's settings, where the source asks the
move's login for its password (a subscription not owned by a superuser must use one).
"""

from __future__ import annotations

import hashlib
import secrets
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field

import psycopg
from django.db import connection
from psycopg import sql

from core.errors import Conflict, InvalidInput
from core.tenancy import maintenance_role, server_settings

from .backup import shared_login

#: seconds between two looks at the subscription's progress
POLL_SECONDS = 0.05


@dataclass(frozen=True)
class Link:
    """One move's replication of ``schema`` from the server ``source`` to ``target`` (aliases):
    ``name`` of its publication, slot and subscription, ``login`` and ``password`` of its
    replication login on the source."""

    schema: str
    source: str
    target: str
    name: str
    login: str
    password: str = field(repr=False)


def shared_settings(server: str) -> dict[str, object]:
    """The connection settings of ``server``'s shared login (``DATABASE_URL``'s for ``"default"``)."""
    return dict(connection.settings_dict) if server == "default" else server_settings(server)


def link_for(*, schema: str, source: str, target: str) -> Link:
    """The names of the move of ``schema`` from ``source`` to ``target`` (stable for one database
    and schema, so that a move that died can be cleaned up by the next) and a new password."""
    database = shared_settings(source)["NAME"]
    name = "engram_move_" + hashlib.sha256(f"{database}\0{schema}".encode()).hexdigest()[:20]
    return Link(schema, source, target, name, name, secrets.token_hex(24))


@contextmanager
def maintenance_session(
    server: str, *, login: bool = False
) -> Iterator[psycopg.Connection[tuple[object, ...]]]:
    """An autocommit session on ``server``'s shared login switched to the maintenance role (with
    ``login``: left as the login)."""
    conninfo, password = shared_login(server)
    with psycopg.connect(conninfo, password=password, autocommit=True) as session:
        if not login:
            session.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(maintenance_role())))
        yield session


def _rows(
    session: psycopg.Connection[tuple[object, ...]], query: str, *params: object
) -> list[tuple[object, ...]]:
    return session.execute(query, params).fetchall()


def schema_tables(session: psycopg.Connection[tuple[object, ...]], schema: str) -> list[str]:
    """The names of the ordinary tables of ``schema``, sorted."""
    query = (
        "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = %s AND c.relkind = 'r' ORDER BY 1"
    )
    return [str(row[0]) for row in _rows(session, query, schema)]


def tables_without_identity(session: psycopg.Connection[tuple[object, ...]], schema: str) -> list[str]:
    """The tables of ``schema`` that logical replication cannot identify rows of (no primary key
    under ``REPLICA IDENTITY DEFAULT``, no index under ``USING INDEX``, or ``NOTHING``), sorted.
    Published, such a table makes the source refuse its updates and deletes."""
    query = """
        SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = %s AND c.relkind = 'r' AND c.relreplident <> 'f'
          AND NOT EXISTS (
            SELECT 1 FROM pg_index i WHERE i.indrelid = c.oid
              AND ((c.relreplident = 'd' AND i.indisprimary) OR (c.relreplident = 'i' AND i.indisreplident)))
        ORDER BY 1"""
    return [str(row[0]) for row in _rows(session, query, schema)]


def replication_check(link: Link) -> None:
    """Refuse a move the servers cannot make by replication, naming what is missing: ``InvalidInput``
    for the source's ``wal_level`` or maintenance role without ``REPLICATION``, the target's without
    ``pg_create_subscription``; ``Conflict`` for tables without a replica identity."""
    with maintenance_session(link.source) as source:
        level = str(_rows(source, "SHOW wal_level")[0][0])
        if level != "logical":
            raise InvalidInput(
                f"the server {link.source!r} has wal_level = {level}: a move copies by logical replication "
                "and needs wal_level = logical there (a restart applies it), or the copy inside the "
                "pause asked for with --locked-copy",
                field="wal_level",
            )
        if not _rows(source, "SELECT rolreplication FROM pg_roles WHERE rolname = current_user")[0][0]:
            raise InvalidInput(
                f"the maintenance role on {link.source!r} needs REPLICATION (ALTER ROLE ... REPLICATION)",
                field="REPLICATION",
            )
        missing = tables_without_identity(source, link.schema)
        if missing:
            raise Conflict(f"tables of {link.schema!r} without a primary key or replica identity: {missing}")
    with maintenance_session(link.target, login=True) as target:
        allowed = (
            "SELECT rolsuper OR (pg_has_role('pg_create_subscription', 'USAGE') "
            "AND has_database_privilege(current_database(), 'CREATE')) FROM pg_roles WHERE rolname = current_user"
        )
        if not _rows(target, allowed)[0][0]:
            raise InvalidInput(
                f"the shared login on {link.target!r} needs pg_create_subscription and CREATE on its "
                "database (GRANT pg_create_subscription TO ...; GRANT CREATE ON DATABASE ... TO ...)",
                field="pg_create_subscription",
            )


def publish(link: Link) -> list[str]:
    """Make the source's part of ``link`` (login, publication of every table, slot); returns the
    tables published."""
    name, login, schema = sql.Identifier(link.name), sql.Identifier(link.login), sql.Identifier(link.schema)
    with maintenance_session(link.source) as source:
        tables = schema_tables(source, link.schema)
        source.execute(
            sql.SQL("CREATE ROLE {} LOGIN REPLICATION PASSWORD {}").format(login, sql.Literal(link.password))
        )
        source.execute(sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(schema, login))
        source.execute(sql.SQL("GRANT SELECT ON ALL TABLES IN SCHEMA {} TO {}").format(schema, login))
        listed = sql.SQL(", ").join(sql.Identifier(link.schema, table) for table in tables)
        source.execute(sql.SQL("CREATE PUBLICATION {} FOR TABLE {}").format(name, listed))
        source.execute("SELECT pg_create_logical_replication_slot(%s, 'pgoutput')", [link.name])
    return tables


def subscribe(link: Link) -> None:
    """Make the target's subscription of ``link`` (its schema's objects must exist there): it
    copies every published table, then applies what the source commits."""
    conninfo, _ = shared_login(link.source)
    params = psycopg.conninfo.conninfo_to_dict(conninfo)
    params.update(user=link.login, password=link.password)
    remote = psycopg.conninfo.make_conninfo(**{k: str(v) for k, v in params.items() if v is not None})
    with maintenance_session(link.target) as target:  # the subscription's owner finds the tables
        target.execute(
            sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(
                sql.Identifier(link.schema), sql.Identifier(str(shared_settings(link.target)["USER"]))
            )
        )
    with maintenance_session(link.target, login=True) as target:
        target.execute(
            sql.SQL(
                "CREATE SUBSCRIPTION {} CONNECTION {} PUBLICATION {} "
                "WITH (create_slot = false, slot_name = {}, copy_data = true)"
            ).format(
                sql.Identifier(link.name),
                sql.Literal(remote),
                sql.Identifier(link.name),
                sql.Literal(link.name),
            )
        )


def indexes_defer(link: Link) -> list[str]:
    """Drop on the target the indexes of the schema that neither back a constraint nor identify
    rows, and return their definitions (``indexes_build`` makes them again once the rows are
    copied: building the HNSW index over 100k copied rows takes a fraction of inserting each row
    into it)."""
    query = """
        SELECT i.indexrelid::regclass::text, pg_get_indexdef(i.indexrelid)
        FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = %s AND NOT i.indisprimary AND NOT i.indisreplident
          AND NOT EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conindid = i.indexrelid)
        ORDER BY 1"""
    with maintenance_session(link.target) as target:
        found = _rows(target, query, link.schema)
        for name, _ in found:
            target.execute(sql.SQL("DROP INDEX {}").format(sql.SQL(str(name))))
    return [str(definition) for _, definition in found]


def indexes_build(link: Link, definitions: list[str]) -> None:
    """Make the indexes ``indexes_defer`` dropped on the target (the subscription's writes to
    their tables wait meanwhile, and catch up after)."""
    with maintenance_session(link.target) as target:
        for definition in definitions:
            target.execute(sql.SQL(definition))


def synced_wait(link: Link, *, tables: int, timeout: float) -> None:
    """Wait until the subscription has copied all ``tables`` and streams. Raises ``RuntimeError``
    when its workers report an error (the target's server log says which) or after ``timeout`` s."""
    query = """
        SELECT count(*) FILTER (WHERE r.srsubstate = 'r'),
               coalesce(max(st.apply_error_count + st.sync_error_count), 0)
        FROM pg_subscription s LEFT JOIN pg_subscription_rel r ON r.srsubid = s.oid
        LEFT JOIN pg_stat_subscription_stats st ON st.subid = s.oid
        WHERE s.subname = %s"""
    deadline = time.monotonic() + timeout
    with maintenance_session(link.target) as target:
        while True:
            ready, errors = _rows(target, query, link.name)[0]
            if errors:
                raise RuntimeError(
                    f"the subscription {link.name} on {link.target!r} failed ({errors} errors): see its server log"
                )
            if ready == tables:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"the copy to {link.target!r} did not finish within {timeout:g} s")
            time.sleep(POLL_SECONDS * 4)


def caught_up_wait(link: Link, *, timeout: float) -> None:
    """Wait until the target has applied everything the source committed before this call (its
    slot's confirmed position reaches the source's WAL position now). Raises ``RuntimeError``
    after ``timeout`` s. When no unit of the tenant can write any more, the target then holds all
    of it."""
    deadline = time.monotonic() + timeout
    with maintenance_session(link.source) as source:
        (now,) = _rows(source, "SELECT pg_current_wal_lsn()")[0]
        query = "SELECT confirmed_flush_lsn >= %s::pg_lsn FROM pg_replication_slots WHERE slot_name = %s"
        while not _rows(source, query, str(now), link.name)[0][0]:
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"{link.target!r} did not catch up with {link.source!r} within {timeout:g} s"
                )
            time.sleep(POLL_SECONDS)


def sequences_copy(link: Link) -> int:
    """Set the target's sequences of the schema to the source's values (replication carries rows,
    not sequences); returns how many were set."""
    query = (
        "SELECT sequencename, last_value FROM pg_sequences WHERE schemaname = %s AND last_value IS NOT NULL"
    )
    with maintenance_session(link.source) as source:
        values = _rows(source, query, link.schema)
    with maintenance_session(link.target) as target:
        for sequence, value in values:
            qualified = sql.Identifier(link.schema, str(sequence)).as_string(target)
            target.execute("SELECT setval(%s::regclass, %s, true)", [qualified, value])
    return len(values)


def unlink(link: Link) -> None:
    """Remove every object of ``link`` on both servers, whichever exist (after a move, or after one
    that failed at any step): the subscription, the slots on the source (its own and its table
    copies'), the publication, the login; the shared login's use of the schema on the target."""
    with maintenance_session(link.target, login=True) as target:
        found = _rows(target, "SELECT oid FROM pg_subscription WHERE subname = %s", link.name)
        if found:
            name = sql.Identifier(link.name)
            with suppress(psycopg.Error):
                target.execute(sql.SQL("ALTER SUBSCRIPTION {} DISABLE").format(name))
                target.execute(sql.SQL("ALTER SUBSCRIPTION {} SET (slot_name = NONE)").format(name))
            target.execute(sql.SQL("DROP SUBSCRIPTION IF EXISTS {}").format(name))
        if _rows(target, "SELECT 1 FROM pg_namespace WHERE nspname = %s", link.schema):
            target.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(maintenance_role())))
            target.execute(
                sql.SQL("REVOKE USAGE ON SCHEMA {} FROM {}").format(
                    sql.Identifier(link.schema), sql.Identifier(str(shared_settings(link.target)["USER"]))
                )
            )
    sync_slots = f"pg\\_{found[0][0]}\\_sync\\_%" if found else None
    with maintenance_session(link.source) as source:
        _slots_drop(source, link.name, sync_slots)
        source.execute(sql.SQL("DROP PUBLICATION IF EXISTS {}").format(sql.Identifier(link.name)))
        if _rows(source, "SELECT 1 FROM pg_roles WHERE rolname = %s", link.login):
            login, schema = sql.Identifier(link.login), sql.Identifier(link.schema)
            with suppress(psycopg.Error):  # the schema may be gone already
                source.execute(sql.SQL("REVOKE ALL ON ALL TABLES IN SCHEMA {} FROM {}").format(schema, login))
                source.execute(sql.SQL("REVOKE ALL ON SCHEMA {} FROM {}").format(schema, login))
            source.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(login))


def _slots_drop(session: psycopg.Connection[tuple[object, ...]], name: str, sync_like: str | None) -> None:
    """Drop the slot ``name`` and those named like ``sync_like``, waiting (up to 30 s) for the
    senders that still use them to stop."""
    query = "SELECT slot_name, active_pid FROM pg_replication_slots WHERE slot_name = %s OR slot_name LIKE %s"
    deadline = time.monotonic() + 30
    while slots := _rows(session, query, name, sync_like or "-"):
        for slot, pid in slots:
            with suppress(psycopg.Error):
                if pid is not None:
                    session.execute("SELECT pg_terminate_backend(%s)", [pid])
            with suppress(psycopg.errors.ObjectInUse, psycopg.errors.UndefinedObject):
                session.execute("SELECT pg_drop_replication_slot(%s)", [slot])
        if time.monotonic() > deadline:
            raise RuntimeError(f"replication slots {[s for s, _ in slots]} still in use")
        time.sleep(POLL_SECONDS)
