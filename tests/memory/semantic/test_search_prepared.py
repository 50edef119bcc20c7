"""Search runs one prepared statement (issue 16): parsed once per connection and, without filters,
planned once; what a statement made per call guaranteed still holds (each tenant its own rows on a
shared connection, a statement the session lost prepared again)."""

from __future__ import annotations

from django.db import connection
from django.test.utils import CaptureQueriesContext
from django_tenants.utils import tenant_context

from core.db import prepared
from tenants.models import Tenant
from tests.factories import Caller, contents, make_caller, remember, requires_model, search

pytestmark = requires_model


def _statements() -> dict[str, tuple[int, int]]:
    """``{name: (generic plans, custom plans)}`` of this session's prepared search statements."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT name, generic_plans, custom_plans FROM pg_prepared_statements "
            "WHERE name LIKE 'engram!_%%' ESCAPE '!' AND statement LIKE %s",
            ["%memory_semanticmemory%"],  # not the API-key lookup each request also prepares
        )
        return {name: (generic, custom) for name, generic, custom in cursor.fetchall()}


def test_one_statement_serves_two_tenants_each_only_its_own_rows(alice: Caller, mallory: Caller) -> None:
    # alice (alpha) and mallory (beta) ask the same question on the one test connection: the same
    # statement text, so the same prepared statement, re-parsed by PostgreSQL for the other schema
    remember(alice, "The alpha vault opens with code 1234.", scope="private")
    remember(mallory, "The beta vault opens with code 9876.", scope="private")
    assert contents(search(alice, "vault code")) == ["The alpha vault opens with code 1234."]
    with CaptureQueriesContext(connection) as queries:
        found = contents(search(mallory, "vault code"))
    assert found == ["The beta vault opens with code 9876."]
    sent = [q["sql"] for q in queries.captured_queries]
    assert any("EXECUTE engram_" in sql for sql in sent)
    assert not any("PREPARE" in sql for sql in sent), "the statement was prepared again"
    assert contents(search(alice, "vault code")) == ["The alpha vault opens with code 1234."]


def _delta(before: dict[str, tuple[int, int]]) -> dict[str, tuple[int, int]]:
    """The statements run since ``before``: ``{name: (generic plans, custom plans) since}``."""
    out = {}
    for name, (generic, custom) in _statements().items():
        g0, c0 = before.get(name, (0, 0))
        if (generic, custom) != (g0, c0):
            out[name] = (generic - g0, custom - c0)
    return out


def test_search_without_filters_is_planned_once_and_with_filters_for_its_values(alice: Caller) -> None:
    # prepared statements outlive the test's transaction (the session keeps them): count from here
    remember(alice, "Standup moved to 9:30 on Mondays.", scope="private", session_id="s-1")
    before = _statements()
    for _ in range(3):
        assert contents(search(alice, "standup time")) == ["Standup moved to 9:30 on Mondays."]
    plain = _delta(before)
    assert list(plain.values()) == [(3, 0)]  # the generic plan every time: made once, then reused
    before = _statements()
    for _ in range(2):
        found = search(alice, "standup time", filters={"session_id": "s-1"})
        assert contents(found) == ["Standup moved to 9:30 on Mondays."]
    filtered = _delta(before)
    assert len(filtered) == 1 and not set(filtered) & set(plain)
    ((name, (generic, custom)),) = filtered.items()
    if before.get(name, (0, 0))[1] < 3:  # PostgreSQL's plan cache weighs five custom plans first
        assert (generic, custom) == (0, 2)


def test_a_statement_the_session_lost_is_prepared_again(scratch_tenant: Tenant) -> None:
    # outside a transaction, as a request runs: someone deallocates every prepared statement of
    # the session; the next search prepares its statement again and answers as before
    owner = make_caller(scratch_tenant, "owner")
    remember(owner, "The courier comes on Thursdays.", scope="private")
    assert contents(search(owner, "courier day")) == ["The courier comes on Thursdays."]
    with tenant_context(scratch_tenant):
        assert not connection.in_atomic_block
        with connection.cursor() as cursor:
            cursor.execute("DEALLOCATE ALL")
    assert contents(search(owner, "courier day")) == ["The courier comes on Thursdays."]
    with tenant_context(scratch_tenant):
        assert len(_statements()) == 1


def test_placeholders_are_numbered_and_the_query_vector_sent_once() -> None:
    vector = "[" + ",".join(["0.125"] * 100) + "]"
    text, values, types = prepared._numbered(
        "SELECT %s::vector, %s, %s, 'a%%b', %s::vector", [vector, 3, 0.5, vector]
    )
    assert text == "SELECT $1::vector, $2, $3, 'a%b', $1::vector"
    assert values == [vector, 3, 0.5]
    assert types == ["unknown", "int8", "float8"]


def test_a_rollback_on_the_connection_leaves_the_prepared_search_in_place(alice: Caller) -> None:
    # the checkpoints' statements are prepared on the same connection (core.db.base.fetch_prepared);
    # a rollback there (psycopg answered one with DEALLOCATE ALL while it held protocol-level
    # prepared statements) must not take the search's statement away from a later transaction
    from django.db import DatabaseError, transaction

    from core.db.base import fetch_prepared

    remember(alice, "The release train leaves on Thursdays.", scope="private")
    assert contents(search(alice, "release train")) == ["The release train leaves on Thursdays."]
    with tenant_context(alice.tenant):
        assert fetch_prepared("SELECT count(*) FROM memory_checkpoint WHERE session_id = %s", ["s"]) == (0,)
        try:
            with transaction.atomic():
                fetch_prepared("SELECT 1 / 0", [])
        except DatabaseError:
            pass
    names = set(_statements())
    with transaction.atomic():  # a search inside a transaction cannot prepare again after a failure
        assert contents(search(alice, "release train")) == ["The release train leaves on Thursdays."]
    assert names <= set(_statements())
