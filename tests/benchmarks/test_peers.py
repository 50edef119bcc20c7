"""The A/B harness's worker (benchmarks/_ab.py, used by peers.py's --base) (it must run the other checkout's code, and say so when not) and
the scratch tenants of the benchmarks (dropped at the end of a run)."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _benchmark(module: str):  # type: ignore[no-untyped-def]
    """Import ``module`` (``benchmarks.peers``, ``_common``) with ``benchmarks/`` on the path: the
    scripts import their siblings (corpus, _common) as top-level modules."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        return importlib.import_module(module)
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))


def test_a_worker_finds_the_modules_loaded_from_another_checkout(tmp_path: Path) -> None:
    ab = _benchmark("_ab")
    assert ab.loaded_elsewhere(str(ROOT)) == []
    wrong = ab.loaded_elsewhere(str(tmp_path))
    assert any(line.startswith("memory.checkpoints.services: ") for line in wrong)
    assert all(line.split(": ", 1)[1].startswith(str(ROOT)) for line in wrong)


def test_a_scratch_tenant_goes_with_its_schema_and_role_even_after_an_error(
    django_db_setup: None, django_db_blocker: Any
) -> None:
    """Benchmarks that measure in a fresh tenant per run (peers.py's writes, memory_writes.py)
    drop it at the end, so a bench database does not gain a tenant, a schema and a role per run."""
    from django.db import connection

    from core.tenancy import tenant_role
    from tenants.models import Tenant

    def exists(sql: str, value: str) -> bool:
        with connection.cursor() as cursor:
            cursor.execute(sql, [value])
            return cursor.fetchone() is not None

    common = _benchmark("_common")
    with django_db_blocker.unblock():
        with (
            pytest.raises(RuntimeError),
            common.scratch_tenant("bench_scratch", ["writer"]) as (tenant, agents, keys),
        ):
            schema = tenant.schema_name
            assert schema.startswith("bench_scratch_") and set(agents) == set(keys) == {"writer"}
            assert exists("SELECT 1 FROM pg_roles WHERE rolname = %s", tenant_role(schema))
            raise RuntimeError("the benchmark failed part way")
        connection.set_schema_to_public()  # type: ignore[attr-defined]  # django-tenants' wrapper
        assert not Tenant.objects.filter(schema_name=schema).exists()
        assert not exists("SELECT 1 FROM pg_namespace WHERE nspname = %s", schema)
        assert not exists("SELECT 1 FROM pg_roles WHERE rolname = %s", tenant_role(schema))
