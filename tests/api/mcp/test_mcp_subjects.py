"""End users through MCP (issue 31, item 3; docs/decisions/0078): with the official SDK's client over
Streamable HTTP, a key bound to Ana gets nothing of Ben's from recall (semantic, episodic, facts),
build_context or restore_checkpoint, asking for Ben is the REST API's 403 naming ``data_subject``,
its writes carry Ana; an unbound key filters by subject."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from tenants.models import Tenant
from tests.api.mcp.test_mcp import http_session, mcp_url, ok, refused
from tests.factories import make_caller, requires_model

pytestmark = requires_model

__all__ = ["mcp_url"]  # the fixture, used by name

ANA = "Ana's return flight departs Lisbon at 09:05 on Sunday"
BEN = "Ben's return flight departs Porto at 11:30 on Monday"


def test_a_key_bound_to_one_end_user_gets_nothing_of_anothers_through_mcp(
    scratch_tenant: Tenant, mcp_url: str
) -> None:
    unbound = make_caller(scratch_tenant, "mcp-support")
    ana = make_caller(scratch_tenant, "mcp-support", data_subject="ana")
    tag = uuid.uuid4().hex[:8]
    session = f"s-ben-{tag}"

    async def run() -> None:
        async with http_session(mcp_url, unbound.key) as support:
            for subject, text in (("ana", ANA), ("ben", BEN)):
                await ok(support, "store_memory", content=text, scope="shared", data_subject=subject)
                await ok(support, "assert_fact", subject=subject.title(), predicate="flies_from",
                         object={"entity": "Lisbon" if subject == "ana" else "Porto"}, data_subject=subject)  # fmt: skip
            event = {"session_id": session, "kind": "message", "role": "user", "data_subject": "ben",
                     "content": "Ben asks about his flight from Porto", "occurred_at": "2026-03-01T10:00:00Z"}  # fmt: skip
            await ok(support, "append_events", events=[event])
            await ok(support, "save_checkpoint", session_id=session, idempotency_key="k1",
                     state={"customer": "ben"}, data_subject="ben")  # fmt: skip
            by_ben = await ok(support, "recall", layer="semantic", query="return flight", data_subject="ben")
            assert [h["memory"]["content"] for h in by_ben["results"]] == [BEN]
            facts = await ok(support, "entity_facts", name="Ben", data_subject="ben")
            assert [f["object"]["entity"] for f in facts["facts"]] == ["Porto"]
        async with http_session(mcp_url, ana.key) as agent:
            hits = await ok(agent, "recall", layer="semantic", query="When does the return flight depart?")
            assert [h["memory"]["content"] for h in hits["results"]] == [ANA]
            assert (await ok(agent, "recall", layer="episodic", session_id=session))["results"] == []
            assert (await ok(agent, "recall", layer="facts", query="Ben"))["facts"] == []
            assert (await ok(agent, "entity_facts", name="Ben"))["facts"] == []
            context = await ok(
                agent, "build_context", session_id=session, query="Ben Porto flight", budget=2000
            )
            assert "Porto" not in context["text"] and "Ben" not in context["text"]
            restored = await refused(agent, "restore_checkpoint", session_id=session)
            assert restored["code"] == "not_found"
            for tool, arguments in (
                ("recall", {"layer": "semantic", "query": "flight", "data_subject": "ben"}),
                ("recall", {"layer": "episodic", "session_id": session, "data_subject": "ben"}),
                ("entity_facts", {"name": "Ben", "data_subject": "ben"}),
                (
                    "build_context",
                    {"session_id": session, "query": "x", "budget": 100, "data_subject": "ben"},
                ),
                ("store_memory", {"content": "Ben likes tea", "data_subject": "ben"}),
            ):
                body: dict[str, Any] = await refused(agent, tool, **arguments)
                assert body["code"] == "permission_denied" and "data_subject" in body["errors"], (tool, body)
            written = await ok(agent, "store_memory", content=f"Ana prefers aisle seats {tag}")
            assert written["data_subject"] == "ana"

    asyncio.run(run())
