"""Engram's MCP server (the official ``mcp`` SDK): the agent API's operations as MCP tools.

Each tool is one REST operation run in process (``api.mcp.dispatch``), so it has that operation's
validation, scope, services and error body. The caller is the API key: over Streamable HTTP
(``/mcp``) the ``Authorization: Bearer <key>`` header of each request (``api.mcp.asgi`` refuses a
request without a valid one before the SDK sees it); over stdio (``./engram mcp --key ...``) the key
the process was started with.

Tool input schemas are objects with ``type``, ``properties`` and ``required``: each tool's are its
REST operation's inputs (``TOOL_OPERATIONS``; the argument schemas are built in ``api.mcp.schemas``,
held equal to ``/api/v1/schema`` by a test). Arguments are checked by the REST operation, not by the
SDK's pydantic text (pydantic accepts any value and passes it on); ``EngramMCP`` answers an unknown, missing or wrongly typed argument itself, with the
REST API's error body naming it. (No ``from __future__ import annotations`` here: the SDK reads the
argument annotations at run time, and they are built by ``Arg`` where each tool is defined.)
"""

import functools
import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, TypeVar

from mcp.server.fastmcp import Context, FastMCP
from mcp.server.fastmcp.exceptions import ToolError
from mcp.server.transport_security import TransportSecuritySettings
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field, ValidationError, WithJsonSchema

from api.exceptions import error_body
from memory.checkpoints import services as checkpoint_services
from memory.semantic.models import AGENT_MEMORY_TYPES, MemoryScope

from .dispatch import RestResult, rest_call
from .schemas import (
    ANY_JSON,
    FACT_OBJECT,
    JSON_OBJECT,
    SESSION,
    STR,
    SUBJECT,
    SUBJECT_WRITE,
    UNIT,
    VISIBLE_TO,
    WEIGHTS,
    event_batch,
    message_batch,
    path,
    text,
)

INSTRUCTIONS = (
    "Engram is this agent's memory. Before a step, call build_context with the session, the step's "
    "question and a token budget: it returns what the step needs from every layer (working state, "
    "recent turns and episodes, memories, facts, the matching skill) ordered for the prompt. "
    "Record what happens with append_events, what you learn with store_memory and assert_fact, "
    "share state with write_blackboard, and save your state with save_checkpoint after each step."
)

REQUIRED = "This field is required."
UNKNOWN = "Unknown field."

KeySource = Callable[[Context[Any, Any, Any]], tuple[str, str]]


def _no_default(schema: dict[str, Any]) -> None:
    """An optional argument's schema without pydantic's ``"default": null``: the REST operation
    applies its own default to an absent argument, and ``null`` is not of the argument's type (strict
    function-calling validators refuse such a default)."""
    schema.pop("default", None)


def Arg(schema: dict[str, Any], description: str) -> Any:
    """An argument documented by ``schema`` and ``description`` and passed on unchecked (the REST
    operation checks it and answers its own 400)."""
    return Annotated[
        Any, WithJsonSchema({**schema, "description": description}), Field(json_schema_extra=_no_default)
    ]


class Refused(Exception):
    """A tool call refused before its REST operation runs; ``body`` is the API's error body."""

    def __init__(self, body: dict[str, Any]) -> None:
        super().__init__(body["detail"])
        self.body = body


def _segment(value: Any, field: str) -> str:
    """A path segment: a string without ``/`` (the REST route would be another one)."""
    if value is None:
        raise Refused(error_body(REQUIRED, "invalid", field=field))
    if not isinstance(value, str) or not value or "/" in value:
        raise Refused(error_body("Expected an id without '/'.", "invalid", field=field))
    return value


def _result(body: dict[str, Any], *, error: bool) -> CallToolResult:
    text = json.dumps(body, ensure_ascii=False)
    return CallToolResult(
        content=[TextContent(type="text", text=text)],
        structuredContent=None if error else body,
        isError=error,
    )


def _answer(result: RestResult) -> CallToolResult:
    """The REST body (with ``degraded`` / ``source`` when the REST headers said so) as the tool's
    JSON text and structured content; on a 4xx/5xx a tool error whose text is the REST error body,
    exactly (an MCP tool error, not a protocol error: the model reads it and can correct itself)."""
    if not result.ok:
        body = result.body if isinstance(result.body, dict) else error_body("Error.", "error")
        return _result(body, error=True)
    body = result.body if isinstance(result.body, dict) else {"result": result.body}
    if "engram-degraded" in result.headers:
        body = {**body, "degraded": result.headers["engram-degraded"]}
    if "engram-source" in result.headers:
        body = {**body, "source": result.headers["engram-source"]}
    return _result(body, error=False)


TYPE_ERRORS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "string": (lambda v: isinstance(v, str), "Not a valid string."),
    "integer": (
        lambda v: (
            not isinstance(v, bool) and (isinstance(v, int) or (isinstance(v, float) and v.is_integer()))
        ),
        "A valid integer is required.",
    ),
    "number": (
        lambda v: isinstance(v, int | float) and not isinstance(v, bool),
        "A valid number is required.",
    ),
    "boolean": (lambda v: isinstance(v, bool), "Must be a valid boolean."),
    "object": (lambda v: isinstance(v, dict), "Expected a dictionary of items."),
    "array": (lambda v: isinstance(v, list), "Expected a list of items."),
}
"""Each JSON type an argument may declare: its check and the REST API's (DRF's) message."""


def type_errors(arguments: Mapping[str, Any], properties: Mapping[str, Any]) -> dict[str, list[str]]:
    """The arguments whose JSON type is not the one their schema declares (``null`` where the type
    does not allow it), as REST field errors. Only the top-level type: what is inside an argument is
    the REST operation's to check (a path, query or header value would lose its type on the way)."""
    errors: dict[str, list[str]] = {}
    for name, value in arguments.items():
        declared = properties.get(name, {}).get("type")
        allowed = declared if isinstance(declared, list) else [declared] if declared else []
        if not allowed or (value is None and "null" in allowed):
            continue
        if value is None:
            errors[name] = ["This field may not be null."]
        elif not any(TYPE_ERRORS[t][0](value) for t in allowed if t in TYPE_ERRORS):
            errors[name] = [TYPE_ERRORS[next(t for t in allowed if t in TYPE_ERRORS)][1]]
    return errors


def argument_errors(exc: ValidationError) -> dict[str, list[str]]:
    """The SDK's argument check failing (``exc``, from the pydantic model of a tool's arguments)
    as the REST API's field errors: ``{"<argument>": ["This field is required."]}`` per missing
    argument. Every argument is typed ``Any`` (``Arg``), so missing is the only way to fail it."""
    errors: dict[str, list[str]] = {}
    for error in exc.errors():
        path = ".".join(str(part) for part in error["loc"]) or "body"
        errors.setdefault(path, []).append(REQUIRED if error["type"] == "missing" else error["msg"])
    return errors


class EngramMCP(FastMCP[Any]):
    """FastMCP whose tool calls answer bad arguments with the REST API's error body (``{detail,
    code, errors}`` with field paths, as a tool error) instead of the SDK's pydantic text: an
    argument the tool does not declare is ``Unknown field.`` (the REST input serializers refuse
    unknown keys too), one of another JSON type than declared has DRF's message for that type
    (``type_errors``), a missing required one ``This field is required.``."""

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> Any:
        tool = self._tool_manager.get_tool(name)
        if tool is not None:
            properties = tool.parameters.get("properties", {})
            errors = {argument: [UNKNOWN] for argument in arguments if argument not in properties}
            errors.update(type_errors(arguments, properties))
            if errors:
                return _result(error_body("Invalid input.", "invalid", errors=errors), error=True)
        try:
            return await super().call_tool(name, arguments)
        except ToolError as exc:
            if isinstance(exc.__cause__, ValidationError) and exc.__cause__.title.endswith("Arguments"):
                errors = argument_errors(exc.__cause__)
                return _result(error_body("Invalid input.", "invalid", errors=errors), error=True)
            raise


ToolFn = TypeVar("ToolFn", bound=Callable[..., Awaitable[CallToolResult]])


def refusals(fn: ToolFn) -> ToolFn:
    """A tool whose ``Refused`` errors become tool errors carrying their body (the SDK would
    prefix the message with its own words)."""

    @functools.wraps(fn)
    async def wrapper(*args: Any, **kwargs: Any) -> CallToolResult:
        try:
            return await fn(*args, **kwargs)
        except Refused as exc:
            return _result(exc.body, error=True)

    return wrapper  # type: ignore[return-value]  # same signature (functools.wraps)


def _body(**values: Any) -> dict[str, Any]:
    """A request body without the arguments the caller left out (the REST defaults apply)."""
    return {k: v for k, v in values.items() if v is not None}


ToolCall = Callable[..., Awaitable[CallToolResult]]
"""``call(ctx, method, path, *, body=..., query=..., idempotency_key=...)``: the REST operation at
``/api/v1/<path>`` run as the caller of ``ctx``, answered as the tool's result (``_answer``)."""

READ_ONLY = ToolAnnotations(readOnlyHint=True, openWorldHint=False)
WRITES = ToolAnnotations(readOnlyHint=False, destructiveHint=False, openWorldHint=False)
DESTRUCTIVE = ToolAnnotations(readOnlyHint=False, destructiveHint=True, openWorldHint=False)


def build_server(key_source: KeySource, *, streamable_http_path: str = "/mcp") -> FastMCP[Any]:
    """The MCP server with every tool; ``key_source(ctx)`` gives ``(api key, host)`` of a call.

    For Streamable HTTP: stateless with JSON responses (any web process can answer any call: no
    session affinity behind a load balancer, like the REST API). DNS-rebinding protection (a
    Host/Origin allow-list) is off: it protects servers that trust the network a browser is on,
    and this one trusts only the API key, which a rebinding page cannot read.
    """
    mcp = EngramMCP(
        name="engram",
        instructions=INSTRUCTIONS,
        streamable_http_path=streamable_http_path,
        stateless_http=True,
        json_response=True,
        log_level="WARNING",
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )

    async def call(ctx: Context[Any, Any, Any], method: str, path: str, **kwargs: Any) -> CallToolResult:
        key, host = key_source(ctx)
        return _answer(await rest_call(key=key, method=method, path=f"/api/v1/{path}", host=host, **kwargs))

    # one registration per layer, in the order the tools are listed
    for add_tools in (
        _semantic_tools,
        _episodic_tools,
        _knowledge_tools,
        _procedural_tools,
        _working_tools,
        _checkpoint_tools,
        _context_tools,
    ):
        add_tools(mcp, call)
    return mcp


def _semantic_tools(mcp: FastMCP[Any], call: ToolCall) -> None:
    """``store_memory``, ``recall`` (any one layer) and ``forget_memory``."""

    @mcp.tool(annotations=WRITES)
    @refusals
    async def store_memory(
        ctx: Context[Any, Any, Any],
        content: Arg(text(32000, trimmed=False), "the memory, as a self-contained sentence"),
        scope: Arg(
            {"type": "string", "enum": list(MemoryScope.values)},
            "private (default: you only), shared (every agent of the tenant) or hierarchical",
        ) = None,
        visible_to: Arg(
            VISIBLE_TO, "with scope hierarchical: the other agents (by name) and roles that may also see it"
        ) = None,
        memory_type: Arg(
            {"type": "string", "enum": [value for value, _ in AGENT_MEMORY_TYPES]}, "default fact"
        ) = None,
        tags: Arg({"type": "array", "items": text(64), "maxItems": 50}, "labels to filter recall by") = None,
        importance: Arg(UNIT, "0 to 1, default 0.5: how much it matters later") = None,
        session_id: Arg(SESSION, "the session it was learned in") = None,
        data_subject: Arg(SUBJECT, SUBJECT_WRITE) = None,
        supersedes: Arg(
            {"type": ["string", "null"], "format": "uuid"},
            "the id of a memory this one updates (it leaves recall, kept as history)",
        ) = None,
        idempotency_key: Arg(STR, "repeat a call safely: the same key replays the first answer") = None,
    ) -> CallToolResult:
        """Store a long-term memory (semantic memory). An exact or near duplicate of a memory you can
        already see reinforces it instead (`deduplicated: true`); a near one that restates it with a
        new number, date, name or negation updates it (`outcome: updated`, `supersedes`: the old
        one, which leaves recall); pass `supersedes` to state an update yourself."""
        body = _body(content=content, scope=scope, visible_to=visible_to, memory_type=memory_type)
        body |= _body(tags=tags, importance=importance, session_id=session_id, data_subject=data_subject)
        body |= _body(supersedes=supersedes)
        return await call(ctx, "POST", "memories", body=body, idempotency_key=idempotency_key)

    @mcp.tool(annotations=READ_ONLY)
    @refusals
    async def recall(
        ctx: Context[Any, Any, Any],
        layer: Arg(
            {"type": "string", "enum": ["semantic", "episodic", "working", "procedural", "facts"]},
            "semantic: memories matching `query`; episodic: the events of `session_id` (full-text "
            "`query` optional); working: your scratchpad and the blackboard of `execution_id`, or the "
            "conversation window of `session_id`; procedural: skills matching `query`; facts: what is "
            "known about the entity named `query`",
        ),
        query: Arg(STR, "the question, the request or the entity's name (as the layer needs)") = None,
        session_id: Arg(path("session_id"), "episodic and working (window): the session") = None,
        execution_id: Arg(path("execution_id"), "working: the execution") = None,
        k: Arg({"type": "integer", "minimum": 1, "maximum": 100}, "semantic and procedural: how many") = None,
        data_subject: Arg(SUBJECT, "semantic, episodic and facts: only what is about this end user") = None,
    ) -> CallToolResult:
        """Recall from one memory layer. For the step's whole context across layers within a token
        budget, use build_context instead."""
        subject = _body(data_subject=data_subject)
        if layer == "semantic":
            body = _body(query=query, k=k) | ({"filters": subject} if subject else {})
            return await call(ctx, "POST", "memories/search", body=body)
        if layer == "episodic":
            return await call(ctx, "GET", "events", query={"session_id": session_id, "q": query, **subject})
        if layer == "procedural":
            return await call(ctx, "GET", "skills", query={"intent": query, "k": k})
        if layer == "facts":
            return await call(ctx, "GET", f"entities/{_segment(query, 'query')}/facts", query=subject)
        if layer == "working":
            return await _recall_working(call, ctx, execution_id=execution_id, session_id=session_id)
        raise Refused(
            error_body("Use semantic, episodic, working, procedural or facts.", "invalid", field="layer")
        )

    @mcp.tool(annotations=DESTRUCTIVE)
    @refusals
    async def forget_memory(
        ctx: Context[Any, Any, Any],
        memory_id: Arg(path("memory_id"), "the memory's id (from store_memory or recall)"),
    ) -> CallToolResult:
        """Forget a memory you wrote (or any, with a curate key): hidden from recall from now on, kept
        for the audit trail, and the forget is logged as a decision."""
        return await call(ctx, "DELETE", f"memories/{_segment(memory_id, 'memory_id')}")


async def _recall_working(
    call: ToolCall, ctx: Context[Any, Any, Any], *, execution_id: Any, session_id: Any
) -> CallToolResult:
    """``recall`` of the working layer: with ``execution_id`` your scratchpad and the execution's
    blackboard as ``{"scratchpad": ..., "blackboard": ...}`` (the first error as it is), else the
    conversation window of ``session_id``."""
    if execution_id is None:
        return await call(ctx, "GET", f"sessions/{_segment(session_id, 'session_id')}/window")
    execution = _segment(execution_id, "execution_id")
    scratchpad = await call(ctx, "GET", f"executions/{execution}/scratchpad")
    if scratchpad.isError:
        return scratchpad
    blackboard = await call(ctx, "GET", f"executions/{execution}/blackboard")
    if blackboard.isError:
        return blackboard
    both = {"scratchpad": scratchpad.structuredContent, "blackboard": blackboard.structuredContent}
    return _result(both, error=False)


def _episodic_tools(mcp: FastMCP[Any], call: ToolCall) -> None:
    """``append_events``, ``add_messages`` and ``extraction_status``."""

    @mcp.tool(annotations=WRITES)
    @refusals
    async def append_events(
        ctx: Context[Any, Any, Any],
        events: Arg(
            event_batch(),
            "what happened, oldest first: messages, tool calls and results, decisions, observations",
        ),
        idempotency_key: Arg(STR, "repeat a call safely: the same key replays the first answer") = None,
    ) -> CallToolResult:
        """Append events to the episodic log (append-only, hash-chained: the audit trail). All or
        nothing: one bad event and none is stored."""
        return await call(ctx, "POST", "events", body=events, idempotency_key=idempotency_key)

    @mcp.tool(annotations=WRITES)
    @refusals
    async def add_messages(
        ctx: Context[Any, Any, Any],
        session_id: Arg(path("session_id"), "the conversation's session"),
        messages: Arg(message_batch(), "the new messages, oldest first: role, name, content, occurred_at"),
        data_subject: Arg(text(200), "the end user the conversation is with") = None,
        scope: Arg({"type": "string", "enum": ["private", "shared"]}, "of the memories formed") = None,
        tags: Arg({"type": "array", "items": text(64), "maxItems": 50}, "labels of the memories") = None,
        extraction: Arg(
            {"type": "string", "enum": ["auto", "turns", "llm"]},
            "turns: each user and assistant message a memory now; llm: a job extracts them (auto)",
        ) = None,
        idempotency_key: Arg(STR, "repeat a call safely: the same key replays the first answer") = None,
    ) -> CallToolResult:
        """Add a conversation's messages: appended to the episodic log (all or nothing) and turned
        into memories, one per user and assistant turn, or, with a language model configured, by an
        extraction job (`job`: check it with extraction_status)."""
        body = _body(
            messages=messages, data_subject=data_subject, scope=scope, tags=tags, extraction=extraction
        )
        session = _segment(session_id, "session_id")
        return await call(
            ctx, "POST", f"sessions/{session}/messages", body=body, idempotency_key=idempotency_key
        )

    @mcp.tool(annotations=READ_ONLY)
    @refusals
    async def extraction_status(
        ctx: Context[Any, Any, Any], job_id: Arg(path("job_id"), "the job's id (from add_messages)")
    ) -> CallToolResult:
        """An extraction job of add_messages: its status (queued, running, done, failed), the error,
        and the decisions applied (memories added, updated or left, facts asserted)."""
        return await call(ctx, "GET", f"extractions/{_segment(job_id, 'job_id')}")


def _knowledge_tools(mcp: FastMCP[Any], call: ToolCall) -> None:
    """``assert_fact`` and ``entity_facts``."""

    @mcp.tool(annotations=WRITES)
    @refusals
    async def assert_fact(
        ctx: Context[Any, Any, Any],
        subject: Arg(text(300), "the entity the fact is about, by name (e.g. Alice)"),
        predicate: Arg(
            {**text(64), "pattern": "^[a-z][a-z0-9_]{0,63}$"}, "snake_case relation, e.g. works_at"
        ),
        object: Arg(FACT_OBJECT, "the entity or the value"),
        confidence: Arg(UNIT, "0 to 1, default 1") = None,
        valid_from: Arg(
            {"type": "string", "format": "date-time"}, "when it became true (default now)"
        ) = None,
        session_id: Arg(SESSION, "the session it was learned in") = None,
        source_event_id: Arg(
            {"type": ["integer", "null"], "minimum": 1}, "the event it was learned from"
        ) = None,
        data_subject: Arg(text(200, nullable=True), SUBJECT_WRITE) = None,
    ) -> CallToolResult:
        """Assert a fact (subject, predicate, object) in the knowledge graph. Answers created,
        reinforced (already known) or disputed (it contradicts a held fact: a contradiction is
        opened for review)."""
        body = _body(
            subject=subject,
            predicate=predicate,
            object=object,
            confidence=confidence,
            valid_from=valid_from,
            session_id=session_id,
            source_event_id=source_event_id,
            data_subject=data_subject,
        )
        return await call(ctx, "POST", "facts", body=body)

    @mcp.tool(annotations=READ_ONLY)
    @refusals
    async def entity_facts(
        ctx: Context[Any, Any, Any],
        name: Arg(path("name"), "the entity's name (any case)"),
        depth: Arg(
            {"type": "integer", "minimum": 1, "maximum": 3}, "2 or 3 adds the graph neighbourhood"
        ) = None,
        as_of: Arg({"type": "string", "format": "date-time"}, "what was held true at that time") = None,
        data_subject: Arg(SUBJECT, "only the facts about this end user") = None,
    ) -> CallToolResult:
        """The facts with the entity as subject or object (and its neighbourhood at depth 2-3)."""
        return await call(
            ctx,
            "GET",
            f"entities/{_segment(name, 'name')}/facts",
            query={"depth": depth, "as_of": as_of, "data_subject": data_subject},
        )


def _procedural_tools(mcp: FastMCP[Any], call: ToolCall) -> None:
    """``find_skill``."""

    @mcp.tool(annotations=READ_ONLY)
    @refusals
    async def find_skill(
        ctx: Context[Any, Any, Any],
        intent: Arg(text(2000), "the request in words, e.g. 'I forgot my password'"),
        k: Arg({"type": "integer", "minimum": 1, "maximum": 50}, "how many, default 5") = None,
    ) -> CallToolResult:
        """Find the published skills (validated step lists over tools) that match a request, best
        first, with their steps, input schema and success rate."""
        return await call(ctx, "GET", "skills", query={"intent": intent, "k": k})


def _working_tools(mcp: FastMCP[Any], call: ToolCall) -> None:
    """``read_blackboard`` and ``write_blackboard``."""

    @mcp.tool(annotations=READ_ONLY)
    @refusals
    async def read_blackboard(
        ctx: Context[Any, Any, Any],
        execution_id: Arg(path("execution_id"), "the execution whose blackboard to read"),
        agent: Arg(text(100), "only this agent's fields") = None,
    ) -> CallToolResult:
        """Read the execution's shared blackboard: every field `<agent>:<field>` with its version."""
        return await call(
            ctx,
            "GET",
            f"executions/{_segment(execution_id, 'execution_id')}/blackboard",
            query={"agent": agent},
        )

    @mcp.tool(annotations=WRITES)
    @refusals
    async def write_blackboard(
        ctx: Context[Any, Any, Any],
        execution_id: Arg(path("execution_id"), "the execution"),
        field: Arg(path("field"), "your field's name (stored as <you>:<field>)"),
        value: Arg(ANY_JSON, "any JSON value (at most the tenant's limit, 10 KiB by default)"),
        expected_version: Arg(
            {"type": "integer", "minimum": 0}, "compare-and-set: the version you read (0: must not exist)"
        ) = None,
    ) -> CallToolResult:
        """Write one of your fields on the execution's shared blackboard; every agent of the tenant
        can read it. A stale `expected_version` is a conflict naming the current version."""
        path = f"executions/{_segment(execution_id, 'execution_id')}/blackboard/{_segment(field, 'field')}"
        body = (
            {"value": value}
            if expected_version is None
            else {"value": value, "expected_version": expected_version}
        )
        return await call(ctx, "PUT", path, body=body)


def _checkpoint_tools(mcp: FastMCP[Any], call: ToolCall) -> None:
    """``save_checkpoint`` and ``restore_checkpoint``."""

    @mcp.tool(annotations=WRITES)
    @refusals
    async def save_checkpoint(
        ctx: Context[Any, Any, Any],
        session_id: Arg(path("session_id"), "the session"),
        idempotency_key: Arg(
            {**text(255), "pattern": checkpoint_services.PRINTABLE_PATTERN},
            "unique per checkpoint: a retry with the same key and body is a replay",
        ),
        state: Arg(JSON_OBJECT, "your working state (JSON object, at most 1 MiB)"),
        step_index: Arg(
            {"type": "integer", "format": "int64", "minimum": 0, "maximum": 2**53 - 1},
            "the step just finished, greater than your last (default: your latest + 1)",
        ) = None,
        plan: Arg({"type": "array"}, "your active plan (JSON list)") = None,
        data_subject: Arg(SUBJECT, SUBJECT_WRITE) = None,
    ) -> CallToolResult:
        """Save your state after a step (state hydration: restore_checkpoint gets it back after a
        crash or restart). Checkpoints are yours alone within the session."""
        body = _body(step_index=step_index, idempotency_key=idempotency_key, state=state, plan=plan)
        body |= _body(data_subject=data_subject)
        return await call(
            ctx, "POST", f"sessions/{_segment(session_id, 'session_id')}/checkpoints", body=body
        )

    @mcp.tool(annotations=READ_ONLY)
    @refusals
    async def restore_checkpoint(
        ctx: Context[Any, Any, Any],
        session_id: Arg(path("session_id"), "the session"),
        step_index: Arg(path("step_index"), "one step (default: your latest)") = None,
    ) -> CallToolResult:
        """Restore your latest checkpoint in the session (or one step's): state, plan, step."""
        session = _segment(session_id, "session_id")
        step = "latest" if step_index is None else _segment(str(step_index), "step_index")
        return await call(ctx, "GET", f"sessions/{session}/checkpoints/{step}")


def _context_tools(mcp: FastMCP[Any], call: ToolCall) -> None:
    """``build_context``."""

    @mcp.tool(annotations=READ_ONLY)
    @refusals
    async def build_context(
        ctx: Context[Any, Any, Any],
        session_id: Arg({**path("session_id"), "minLength": 1}, "the session"),
        query: Arg(text(4000), "what the current step needs, in words"),
        budget: Arg({"type": "integer", "minimum": 16, "maximum": 200000}, "tokens the context may use"),
        execution_id: Arg(
            {**path("execution_id"), "type": ["string", "null"], "minLength": 1},
            "the execution whose working memory counts",
        ) = None,
        weights: Arg(WEIGHTS, "layer weights") = None,
        data_subject: Arg(
            SUBJECT, "assemble for this end user: episodes, memories and facts about them or no one"
        ) = None,
    ) -> CallToolResult:
        """Assemble the context of the current step within a token budget: working state, recent
        turns and episodes, memories, facts about the entities the query names and the matching
        skill, deduplicated, most relevant at the start and the end. `text` is ready for the prompt;
        `saved_tokens` is what it saved against sending the whole history."""
        body = _body(
            session_id=session_id,
            query=query,
            budget=budget,
            execution_id=execution_id,
            weights=weights,
            data_subject=data_subject,
        )
        return await call(ctx, "POST", "context", body=body)


@dataclass(frozen=True)
class RestOperation:
    """The REST operation (``operationId`` of ``/api/v1/schema``) a tool runs, and how the tool's
    arguments are its inputs: ``renamed`` tool argument -> REST input (body member, query or path
    parameter), ``headers`` tool arguments sent as headers, ``body`` the argument that is the whole
    request body, ``left_out`` the optional REST inputs the tool does not offer, ``also_required``
    optional REST inputs the tool requires (the input that could stand in for them is left out)."""

    operation_id: str
    renamed: Mapping[str, str] = field(default_factory=dict)
    headers: frozenset[str] = frozenset()
    body: str | None = None
    left_out: frozenset[str] = frozenset()
    also_required: frozenset[str] = frozenset()


IDEMPOTENT = frozenset({"idempotency_key"})
TOOL_OPERATIONS: dict[str, tuple[RestOperation, ...]] = {
    "store_memory": (
        RestOperation(
            "memories_create",
            headers=IDEMPOTENT,
            left_out=frozenset(
                {"confidence", "metadata", "embedding", "embedding_model", "fact", "source_event_id"}
                | {"write"}
            ),
        ),
    ),
    "recall": (
        RestOperation("memories_search", left_out=frozenset({"filters", "mmr", "weights"})),
        RestOperation(
            "events_list",
            renamed={"query": "q"},
            left_out=frozenset({"agent", "cursor", "execution_id", "kind", "limit", "since", "until"}),
        ),
        RestOperation("window_read", left_out=frozenset({"last"})),
        RestOperation("scratchpad_read"),
        RestOperation("blackboard_read", left_out=frozenset({"agent"})),
        RestOperation("skills_match", renamed={"query": "intent"}, left_out=frozenset({"success_weight"})),
        RestOperation(
            "entity_facts",
            renamed={"query": "name"},
            left_out=frozenset(
                {"agent", "as_of", "cursor", "depth", "facts_cursor", "facts_limit", "limit", "sessions"}
            ),
        ),
    ),
    "forget_memory": (RestOperation("memories_forget", left_out=frozenset({"session_id"})),),
    "append_events": (RestOperation("events_append", headers=IDEMPOTENT, body="events"),),
    "add_messages": (RestOperation("messages_add", headers=IDEMPOTENT),),
    "extraction_status": (RestOperation("extractions_get"),),
    "assert_fact": (RestOperation("facts_assert", left_out=frozenset({"subject_type"})),),
    "entity_facts": (
        RestOperation(
            "entity_facts",
            left_out=frozenset({"agent", "cursor", "facts_cursor", "facts_limit", "limit", "sessions"}),
        ),
    ),
    "find_skill": (RestOperation("skills_match", left_out=frozenset({"success_weight"})),),
    "read_blackboard": (RestOperation("blackboard_read"),),
    "write_blackboard": (RestOperation("blackboard_write", left_out=frozenset({"session_id"})),),
    "save_checkpoint": (
        RestOperation(
            "checkpoints_save",
            # LangGraph's fields (its savers use REST): the serialized checkpoint and its channels
            left_out=frozenset(
                {"schema_version", "checkpoint_ns", "parent_key", "metadata", "serialized", "channels"}
            ),
            also_required=frozenset({"state"}),  # REST: unless `serialized` holds the state
        ),
    ),
    "restore_checkpoint": (
        RestOperation("checkpoints_latest", left_out=frozenset({"checkpoint_ns"})),
        RestOperation("checkpoints_get"),
    ),
    "build_context": (RestOperation("context_build"),),
}
"""Each tool's REST operation(s); a tool with several runs the one its arguments choose (``recall``
by ``layer``, ``restore_checkpoint`` by ``step_index``): its arguments are then the union of theirs
and it requires what they all require. Held equal to ``/api/v1/schema`` by
``tests/api/mcp/test_mcp_rest_schemas.py``."""

SELECTORS = {"recall": "layer"}
"""Tool arguments that choose the operation and are no REST input."""
