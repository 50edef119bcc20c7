"""Start the data services a profile needs (``dev``, ``test``, ``bench``) and stop what was started."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator

from devstack import VAR_DIR, free_port
from devstack.neo4j_server import EmbeddedNeo4j, Neo4jToolsMissing
from devstack.postgres import POSTGRES_VERSION, EmbeddedPostgres
from devstack.redis_server import EmbeddedRedis


def neo4j_wanted(profile: str) -> bool:
    """Whether to start Neo4j: always for tests, on request (``ENGRAM_NEO4J=1``) otherwise.

    ``ENGRAM_NEO4J=0`` turns it off for tests too (tests that need it then skip, or fail under CI).
    """
    flag = os.environ.get("ENGRAM_NEO4J", "").strip().lower()
    if flag in {"0", "false", "no", "off"}:
        return False
    return profile == "test" or flag in {"1", "true", "yes", "on"}


@contextlib.contextmanager
def services(
    profile: str, redis_port: int | None = None, neo4j_port: int | None = None, neo4j: bool | None = None
) -> Iterator[dict[str, str]]:
    """Start PostgreSQL and Redis unless ``DATABASE_URL`` / ``REDIS_URL`` name existing ones, and
    Neo4j when :func:`neo4j_wanted` unless ``NEO4J_URI`` names one.

    Yields the environment variables that point at them; stops what it started on exit. Without
    Java or Maven, Neo4j is left out with a warning, except under CI (``CI=true``), where that is an
    error.
    """
    started: list[EmbeddedPostgres | EmbeddedRedis | EmbeddedNeo4j] = []
    env: dict[str, str] = {}
    try:
        if os.environ.get("DATABASE_URL"):
            env["DATABASE_URL"] = os.environ["DATABASE_URL"]
        else:
            pg = EmbeddedPostgres(VAR_DIR / profile / f"pg{POSTGRES_VERSION}")
            # ENGRAM_PG_APP_USER: connect as a login role that is not a superuser (CI's tests)
            env["DATABASE_URL"] = pg.start(app_user=os.environ.get("ENGRAM_PG_APP_USER") or None)
            started.append(pg)
            # its client programs (pg_dump, pg_restore: a tenant's backup), of the server's version
            env.setdefault("ENGRAM_PG_BIN_DIR", os.environ.get("ENGRAM_PG_BIN_DIR") or str(pg.bin_dir))
        if os.environ.get("REDIS_URL"):
            env["REDIS_URL"] = os.environ["REDIS_URL"]
        else:
            # the development server keeps working memory across restarts; test servers are throwaway
            rd = EmbeddedRedis(
                VAR_DIR / profile / "redis", redis_port or free_port(), persist=profile == "dev"
            )
            env["REDIS_URL"] = rd.start()
            started.append(rd)
        if os.environ.get("NEO4J_URI"):
            env["NEO4J_URI"] = os.environ["NEO4J_URI"]
        elif neo4j if neo4j is not None else neo4j_wanted(profile):
            neo = EmbeddedNeo4j(
                VAR_DIR / profile / "neo4j", neo4j_port or free_port(), ephemeral=profile == "test"
            )
            try:
                env["NEO4J_URI"] = neo.start()
                started.append(neo)
            except Neo4jToolsMissing as exc:
                if os.environ.get("CI") == "true":
                    raise SystemExit(f"engram: CI needs Neo4j for the tests, but {exc}") from None
                print(f"engram: warning: not starting Neo4j, {exc}; NEO4J_URI stays unset", file=sys.stderr)
        yield env
    finally:
        for service in reversed(started):
            service.stop()
