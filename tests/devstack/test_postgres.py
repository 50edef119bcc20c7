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


def test_every_data_folder_gets_what_a_tenant_move_needs(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A new data folder gets its memory and ``wal_level = logical`` (decision 0103); one made
    before keeps its memory setting and gets the replication settings added, once."""
    from devstack.postgres import REPLICATION_SETTINGS, EmbeddedPostgres

    def settings(folder) -> dict[str, str]:  # type: ignore[no-untyped-def]
        lines = (folder / "engram.conf").read_text().splitlines()
        return dict(line.split(" = ") for line in lines if " = " in line)

    new, old = tmp_path / "new", tmp_path / "old"
    for folder in (new, old):
        folder.mkdir()
        (folder / "postgresql.conf").write_text("# initdb's\n")
    (old / "engram.conf").write_text("# written by devstack/postgres.py\nshared_buffers = 300MB\n")
    for folder in (new, old, old):
        EmbeddedPostgres(folder)._tune()
    assert settings(old) == {"shared_buffers": "300MB", **dict(REPLICATION_SETTINGS)}
    assert settings(new)["wal_level"] == "logical" and "shared_buffers" in settings(new)
    assert (new / "postgresql.conf").read_text().count("include_if_exists") == 1
