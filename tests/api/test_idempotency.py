"""``Idempotency-Key`` on every POST."""

from __future__ import annotations

from tests.factories import Caller


def test_checkpoint_posts_honour_idempotency_keys(alice: Caller) -> None:
    body = {"step_index": 1, "idempotency_key": "step-1", "state": {"a": 1}}
    assert alice.post("/api/v1/sessions/s9/checkpoints", body, **{"Idempotency-Key": "h1"}).status_code == 201
    replay = alice.post("/api/v1/sessions/s9/checkpoints", body, **{"Idempotency-Key": "h1"})
    assert replay.status_code == 201 and replay["Idempotent-Replayed"] == "true"
    other = alice.post(
        "/api/v1/sessions/s9/checkpoints", {**body, "step_index": 2}, **{"Idempotency-Key": "h1"}
    )
    assert other.status_code == 409
