"""``core.db.prepared.execute_prepared`` keeps its record of a connection's prepared statements true
to the server's, whatever a call's outcome (a ``PREPARE`` is not undone by the rollback of the
statement that failed after it in the same round trip)."""

from __future__ import annotations

import pytest
from django.db import DataError, connection, transaction

from core.db.prepared import execute_prepared


@pytest.mark.django_db
def test_a_statement_whose_first_call_fails_runs_on_its_next_call() -> None:
    sql = "SELECT 100 / %s::int AS q, 'first call fails' AS why"
    with connection.cursor() as cursor:
        with pytest.raises(DataError), transaction.atomic():  # division by zero, after its PREPARE
            execute_prepared(cursor, sql, [0])
        execute_prepared(cursor, sql, [4])  # not "prepared statement ... already exists"
        assert cursor.fetchone() == (25, "first call fails")
