"""Time of migrations 0020 (memory contexts, lexical recompute) and 0021 on a large tenant, this
checkout's code against another checkout's (``--base``).

The tenant ``bench_mig_<N>`` is migrated back to ``memory 0019`` (by this checkout), filled at 0019
with ``search_latency.fill_bulk`` (COPY; the cached corpus vectors, synthetic ones past them: a
small cache of ``--cache`` real vectors is embedded when none is there) and every 37th memory is
forgotten; then ``migrate_schemas --schema`` runs forward, timed, in a subprocess from each
checkout in turn (``--rounds``; a run past ``--bound`` seconds is stopped, its transaction rolled
back, and reported as ``> bound``), each followed by this checkout's migration back to 0019.
Load (``uptime``) is printed with every figure.

Needs ``DATABASE_URL`` and ``REDIS_URL`` as the other benchmarks::

    python -m benchmarks migration_context --size 100000 --base ../mig6-base --bound 900
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

from _common import ROOT, bench_key, django_setup

SELF = str(ROOT)


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def migrate(root: str, slug: str, target: list[str], bound: float) -> float | None:
    """Run ``migrate_schemas`` for the tenant from checkout ``root``; its wall time in seconds, or
    None when stopped after ``bound`` seconds."""
    command = [sys.executable, "manage.py", "migrate_schemas", "--schema", slug, "--noinput", "-v", "0"]
    proc = subprocess.Popen([*command, *target], cwd=root, env=os.environ.copy())
    t0 = time.perf_counter()
    try:
        proc.wait(bound)
    except subprocess.TimeoutExpired:
        proc.terminate()
        proc.wait(60)
        return None
    if proc.returncode:
        raise SystemExit(f"migrate_schemas from {root} exited {proc.returncode}")
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--base", required=True, help="the other checkout (its code, this .venv)")
    parser.add_argument("--bound", type=float, default=900.0, help="seconds after which a run is stopped")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--cache", type=int, default=5000, help="real vectors to embed when none are cached")
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args()

    django_setup()
    import corpus
    import search_latency
    from django.db import connection
    from django_tenants.utils import tenant_context

    from core.tenancy import maintenance
    from memory.embeddings import get_embedder

    slug = f"bench_mig_{args.size}"
    tenant, agents, _ = bench_key(slug, search_latency.AGENTS)
    back = ["memory", "0019"]
    assert migrate(SELF, slug, back, 3600) is not None
    connection.set_schema_to_public()  # type: ignore[attr-defined]
    embedder = get_embedder()
    cache = search_latency.vectors_cache(embedder.name, args.seed)
    if not cache.exists():
        search_latency.corpus_vectors(corpus.memories(args.cache, args.seed), embedder.name, args.seed, 2)
    search_latency.fill_bulk(tenant, agents, args.size, args.seed)
    with tenant_context(tenant), maintenance(), connection.cursor() as cursor:
        cursor.execute(
            "UPDATE memory_semanticmemory SET forgotten_at = now() WHERE forgotten_at IS NULL AND id IN "
            "(SELECT id FROM memory_semanticmemory ORDER BY content_hash LIMIT %s)",
            [args.size // 37],
        )
        cursor.execute("VACUUM ANALYZE memory_semanticmemory")
        cursor.execute(
            "SELECT count(*), count(*) FILTER (WHERE forgotten_at IS NULL) FROM memory_semanticmemory"
        )
        total, live = cursor.fetchone()
    connection.set_schema_to_public()  # type: ignore[attr-defined]
    print(f"tenant {slug} at 0019: {total:,} memories, {live:,} live; {uptime()}", flush=True)

    root_of = {"base": str(Path(args.base).resolve()), "new": SELF}
    for r in range(args.rounds):
        for name in ("base", "new") if r % 2 == 0 else ("new", "base"):
            load = uptime()
            took = migrate(root_of[name], slug, [], args.bound)
            shown = f"> {args.bound:,.0f} s (stopped)" if took is None else f"{took:,.1f} s"
            print(f"round {r} {name}: 0019 -> head {shown}; before: {load}; after: {uptime()}", flush=True)
            if took is not None:
                t0 = time.perf_counter()
                assert migrate(SELF, slug, back, 3600) is not None
                print(f"  back to 0019 (this checkout) in {time.perf_counter() - t0:,.1f} s", flush=True)


if __name__ == "__main__":
    main()
