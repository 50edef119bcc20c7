"""A memory's embedding is stored in its heap row, not in the TOAST table (migration 0023): the
search reads every candidate's embedding, and a TOAST fetch per candidate cost a third of its reads."""

from __future__ import annotations

from django.db import connection
from django_tenants.utils import tenant_context

from tests.factories import Caller, remember, requires_model

# bytes of a 384-d pgvector ``vector`` value: dimensions and an unused int16 pair (4), the floats
VECTOR_BYTES = 4 + 4 * 384
# ``pg_column_size`` of a value stored in the row counts its 4-byte varlena header; of a value moved
# to TOAST it gives the external size, without the header (on 100k rows toasted by PostgreSQL's default
# target: 1,540 bytes for every toasted embedding, 1,544 for those that stayed in line)
IN_LINE = VECTOR_BYTES + 4


@requires_model
def test_a_384_d_embedding_stays_in_the_row(alice: Caller) -> None:
    content = (
        "Alice keeps her kayak at the boathouse on the north shore of the lake, next to the red canoe "
        "her brother left there in 2023; the key is under the third flower pot from the door."
    )
    response = remember(alice, content, tags=["kayak", "boathouse", "lake"])
    assert response.status_code == 201, response.content
    with tenant_context(alice.tenant), connection.cursor() as cursor:
        cursor.execute(
            "SELECT embedding_dimensions, pg_column_size(m.*), pg_column_size(m.embedding) "
            "FROM memory_semanticmemory m WHERE id = %s",
            [response.json()["id"]],
        )
        dimensions, row_bytes, embedding_bytes = cursor.fetchone()
    assert dimensions == 384
    assert row_bytes > 2032  # past PostgreSQL's default toast_tuple_target: without 0023, toasted
    assert embedding_bytes == IN_LINE, embedding_bytes
