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
