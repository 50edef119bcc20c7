"""Search weights are relative: a weight far below the others (down to the smallest double) counts
as 0 instead of reaching PostgreSQL, where its products underflow (a 500 the contract fuzz found)."""

from __future__ import annotations

import pytest

from tests.factories import Caller, remember, requires_model

pytestmark = [pytest.mark.django_db, requires_model]


@pytest.mark.parametrize(
    "weights",
    [
        {"importance": 5e-324, "recency": 0.0, "similarity": 0.0},
        {"importance": 5e-324, "recency": 1e-310, "similarity": 0.5},
        {"importance": 1e-300, "recency": 1.0, "similarity": 1e-320},
    ],
)
def test_a_negligible_weight_is_no_server_error(alice: Caller, weights: dict[str, float]) -> None:
    stored = remember(alice, "Alice lives in Lisbon.").json()
    response = alice.post("/api/v1/memories/search", {"query": "Where does Alice live?", "weights": weights})
    assert response.status_code == 200, response.content
    assert [hit["memory"]["id"] for hit in response.json()["results"]] == [stored["id"]]
