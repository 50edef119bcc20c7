"""The embedded PostgreSQL's memory setting (``devstack.postgres.shared_buffers_mb``)."""

from __future__ import annotations

import pytest

from devstack.postgres import shared_buffers_mb

GIB = 1024**3


@pytest.mark.parametrize(
    ("ram", "expected"),
    [
        (24 * GIB, 6144),  # this project's machine: a quarter
        (2 * GIB, 512),
        (256 * 1024**2, 128),  # never under PostgreSQL's default
        (64 * GIB, 8192),  # at most 8 GiB
    ],
)
def test_shared_buffers_are_a_quarter_of_ram_within_bounds(ram: int, expected: int) -> None:
    assert shared_buffers_mb(ram) == expected


def test_pg_hba_trusts_only_the_superuser_and_the_shared_login(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Every other role (the tenants' logins) must give its password; rewriting the same file is
    no change (the server is not asked to reload)."""
    from devstack.postgres import EmbeddedPostgres

    (tmp_path / "pg_hba.conf").write_text("local all all trust\n")
    server = EmbeddedPostgres(tmp_path)
    assert server._hba("engram_app") is True
    rules = [line.split() for line in (tmp_path / "pg_hba.conf").read_text().splitlines()[1:]]
    trusted = {rule[2] for rule in rules if rule[-1] == "trust" and rule[1] == "all"}
    assert trusted == {"postgres", "engram_app"}
    assert [rule for rule in rules if rule[2] == "all"] == [
        ["local", "all", "all", "scram-sha-256"],
        ["host", "all", "all", "127.0.0.1/32", "scram-sha-256"],
        ["host", "all", "all", "::1/128", "scram-sha-256"],
    ]
    assert server._hba("engram_app") is False
    with pytest.raises(ValueError):
        server._hba("app; drop")
