"""Every write of the API that stores what may be personal data names its end user: the operation
takes ``data_subject`` (issue 31, item 3; docs/decisions/0078). Walks the OpenAPI document's
operations that send a body (POST, PUT, PATCH); an operation without ``data_subject`` must be
declared below with the reason it needs none, and a declaration that no longer matches fails too."""

from __future__ import annotations

from typing import Any

from tests.api.mcp.test_mcp_rest_schemas import document

__all__ = ["document"]  # the fixture, used by name

NO_SUBJECT = {
    "memories_search": "a read sent as a body: its filters hold data_subject",
    # working memory of one execution: Redis with a TTL, gone with the execution (decision 0078)
    "blackboard_write": "working memory of one execution (Redis, TTL), shared by its agents",
    "scratchpad_write": "working memory of one execution (Redis, TTL), private to its agent",
    "execution_close": "closes an execution: its decision event records the blackboard's field names",
    # attached to a row that names the subject
    "checkpoints_writes": "pending writes of a checkpoint: read, erased and held with their checkpoint",
    "facts_retract": "changes a fact's status: the fact names the subject",
    # procedural memory describes procedures, not people
    "tools_save": "a tool's JSON Schema contract",
    "skills_propose": "a skill's steps",
    "skill_versions_propose": "a skill's steps",
    "skill_runs_report": "a run's outcome: success, failed step, duration (the skill's statistics)",
}
"""Write operations without ``data_subject``: operation id -> why they need none."""


def _resolve(document: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    if "$ref" in schema:
        return _resolve(document, document["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]])
    return schema


def _body_members(document: dict[str, Any], operation: dict[str, Any]) -> set[str]:
    """The members of an operation's JSON body: of its object, or of each variant (single or batch)."""
    content = operation.get("requestBody", {}).get("content", {}).get("application/json")
    if not content:
        return set()
    body = _resolve(document, content["schema"])
    members: set[str] = set()
    for variant in body.get("oneOf") or [body]:
        variant = _resolve(document, variant)
        if variant.get("type") == "array":
            variant = _resolve(document, variant["items"])
        members |= set(variant.get("properties", {}))
    return members


def test_every_write_that_stores_personal_data_takes_data_subject(document: dict[str, Any]) -> None:
    writes = {
        operation["operationId"]: _body_members(document, operation)
        for item in document["paths"].values()
        for method, operation in item.items()
        if method in ("post", "put", "patch")
    }
    assert {"memories_create", "events_append", "facts_assert", "checkpoints_save", "store_put"} <= set(
        writes
    )
    missing = sorted(
        op for op, members in writes.items() if "data_subject" not in members and op not in NO_SUBJECT
    )
    assert not missing, f"writes without data_subject (add it, or declare why in NO_SUBJECT): {missing}"
    stale = sorted(op for op in NO_SUBJECT if op not in writes or "data_subject" in writes[op])
    assert not stale, f"NO_SUBJECT names operations that are gone or take data_subject now: {stale}"
