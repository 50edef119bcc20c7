"""Working memory in Redis: the blackboard of an execution, private scratchpads, conversation windows.

Key layout (``{t}`` is the tenant's schema, a Redis Cluster hash tag; see ``store.tenant_key``):

=============================  ======  =====================================================
``{t}:bb:<execution>``         hash    ``<agent>:<field>`` → JSON document (value + provenance)
``{t}:bbv:<execution>``        hash    ``<agent>:<field>`` → version (integer, starts at 1)
``{t}:bb-owner:<execution>``   string  id of the agent that started the execution (its first writer)
``{t}:bb-closed:<execution>``  string  set when the execution is closed (no more writes)
``{t}:bb-session:<execution>`` string  the session the execution belongs to (from the first write naming one)
``{t}:bb-updates:<execution>`` pubsub  every blackboard write, as its JSON document
``{t}:sp:<execution>:<agent>`` hash    scratchpad key → JSON value (private to the agent)
``{t}:sp-idx:<execution>``     set     agent ids that have a scratchpad in the execution
``{t}:win:<session>``          list    conversation turns (JSON), oldest first, bounded
=============================  ======  =====================================================

Every write refreshes the TTL of the keys it touches (tenant policy). Redis being unreachable
raises ``ServiceUnavailable`` (503): working memory is ephemeral by design and has no fallback.

Who may do what in an execution: the blackboard is shared (every agent of the tenant reads all of
it and writes its own ``<agent>:<field>`` fields); a scratchpad is private to its agent. An
execution belongs to the agent that started it: the first agent whose write to the blackboard or a
scratchpad succeeds. The owner is recorded atomically with that write (``SET NX``, never
overwritten; its TTL, the longest of the execution's keys, refreshed by every write) and only the
owner may close the execution, because closing deletes every agent's scratchpad and ends the
execution for all. An execution nobody ever wrote to (or whose keys expired) does not exist.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from agents.models import Agent
from agents.subjects import subject_visible, subject_written
from core.errors import Conflict, NotFound, PayloadTooLarge, PermissionDenied
from core.fulltext import identifier_pattern
from core.metrics import record_lookup
from core.redis import check_id, get_redis, redis_errors, tenant_key
from memory.episodic.models import Event, EventKind, EventRole
from memory.episodic.services import EventData, agent_session, decision_record, events_append
from tenants.models import WorkingMemoryPolicy

# Compare-and-set of one blackboard field, atomic in Redis. The value JSON is spliced into the
# document verbatim (never decoded and re-encoded by Lua's cjson, which would alter numbers).
# KEYS: values hash, versions hash, closed flag, owner, session. ARGV: field, expected version or "",
# value JSON, agent, ISO time, TTL seconds, channel, agent id, owner TTL seconds, session id or "". Returns {1, version} on
# success, {0, current} on conflict, {-1, 0} when the execution is closed. A successful write makes
# its agent the owner unless the execution has one (a refused write owns nothing).
_WRITE_SCRIPT = """
if redis.call('EXISTS', KEYS[3]) == 1 then return {-1, 0} end
local current = tonumber(redis.call('HGET', KEYS[2], ARGV[1]) or '0')
if ARGV[2] ~= '' and tonumber(ARGV[2]) ~= current then return {0, current} end
local version = current + 1
local doc = '{"field":' .. cjson.encode(ARGV[1]) .. ',"agent":' .. cjson.encode(ARGV[4]) ..
    ',"version":' .. version .. ',"updated_at":' .. cjson.encode(ARGV[5]) .. ',"value":' .. ARGV[3] .. '}'
redis.call('HSET', KEYS[1], ARGV[1], doc)
redis.call('HSET', KEYS[2], ARGV[1], version)
redis.call('EXPIRE', KEYS[1], ARGV[6])
redis.call('EXPIRE', KEYS[2], ARGV[6])
redis.call('SET', KEYS[4], ARGV[8], 'NX')
redis.call('EXPIRE', KEYS[4], ARGV[9])
if ARGV[10] ~= '' then redis.call('SET', KEYS[5], ARGV[10], 'NX') end
redis.call('EXPIRE', KEYS[5], ARGV[9])
redis.call('PUBLISH', ARGV[7], doc)
return {1, version}
"""

SEMANTIC_HINT = "Store large content as a semantic memory (POST /api/v1/memories) and keep its id here."


def _encode(value: Any, policy: WorkingMemoryPolicy, *, field: str) -> str:
    encoded = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    size = len(encoded.encode("utf-8"))
    if size > policy.value_max_bytes:
        raise PayloadTooLarge(
            f"The value is {size} bytes; working memory holds at most {policy.value_max_bytes}. {SEMANTIC_HINT}",
            field=field,
        )
    return encoded


def execution_ttl_seconds(policy: WorkingMemoryPolicy) -> int:
    """Seconds the execution's bookkeeping keys (owner, scratchpad index) live after a write.

    The longest of the blackboard and scratchpad TTLs, so the owner outlives everything it owns.
    """
    return max(policy.scratchpad_ttl_seconds, policy.blackboard_ttl_seconds)


def updates_channel(execution_id: str, schema_name: str | None = None) -> str:
    """The pub/sub channel of an execution's blackboard writes (tenant-prefixed)."""
    if schema_name is None:
        return tenant_key("bb-updates", execution_id)
    return "{" + schema_name + "}:bb-updates:" + execution_id


@dataclass(frozen=True)
class BlackboardEntry:
    """One blackboard field: ``field`` is ``<agent>:<name>``; ``version`` counts writes from 1."""

    field: str
    agent: str
    version: int
    updated_at: str
    value: Any

    @classmethod
    def from_json(cls, raw: bytes | str) -> BlackboardEntry:
        doc = json.loads(raw)
        return cls(doc["field"], doc["agent"], int(doc["version"]), doc["updated_at"], doc["value"])

    def as_dict(self) -> dict[str, Any]:
        return {
            "field": self.field,
            "agent": self.agent,
            "version": self.version,
            "updated_at": self.updated_at,
            "value": self.value,
        }


def blackboard_write(
    *,
    agent: Agent,
    execution_id: str,
    name: str,
    value: Any,
    policy: WorkingMemoryPolicy,
    expected_version: int | None = None,
    session_id: str | None = None,
) -> BlackboardEntry:
    """Write ``<agent>:<name>`` on the execution's blackboard and publish the change.

    The first successful write to an execution (here or ``scratchpad_write``) makes ``agent`` its
    owner, in the same Lua script, and the first write naming a ``session_id`` records the
    execution's session (where its close is logged). With ``expected_version`` (0 = "must not exist yet") the write is a compare-and-set done in one
    Lua script. Raises ``Conflict`` (409, ``current_version`` in the body) on a stale version or a
    closed execution, ``PayloadTooLarge`` (413) above the tenant's size limit, ``InvalidInput`` for a
    bad id and ``ServiceUnavailable`` (503) without Redis.
    """
    check_id(execution_id, field="execution_id")
    check_id(name, field="field")
    encoded = _encode(value, policy, field="value")
    field = f"{agent.name}:{name}"
    now = timezone.now().isoformat(timespec="microseconds").replace("+00:00", "Z")
    with redis_errors():
        script = get_redis().register_script(_WRITE_SCRIPT)
        status, version = script(
            keys=[
                tenant_key("bb", execution_id),
                tenant_key("bbv", execution_id),
                tenant_key("bb-closed", execution_id),
                tenant_key("bb-owner", execution_id),
                tenant_key("bb-session", execution_id),
            ],
            args=[
                field,
                "" if expected_version is None else str(expected_version),
                encoded,
                agent.name,
                now,
                policy.blackboard_ttl_seconds,
                updates_channel(execution_id),
                agent.pk,
                execution_ttl_seconds(policy),
                session_id or "",
            ],
        )
    if status == -1:
        raise Conflict(f"Execution {execution_id} is closed.", field="execution_id")
    if status == 0:
        raise Conflict(
            f"{field} is at version {version}, not {expected_version}: read it again and retry.",
            field="expected_version",
            extra={"current_version": int(version)},
        )
    return BlackboardEntry(field, agent.name, int(version), now, json.loads(encoded))


def blackboard_read(
    *, reader: Agent, execution_id: str, agent_name: str | None = None
) -> list[BlackboardEntry]:
    """All fields of the execution's blackboard (or those written by ``agent_name``), sorted by field."""
    check_id(execution_id, field="execution_id")
    with redis_errors():
        raw: dict[bytes, bytes] = get_redis().hgetall(tenant_key("bb", execution_id))  # type: ignore[assignment]
    prefix = f"{agent_name}:".encode() if agent_name is not None else b""
    entries = sorted(
        (BlackboardEntry.from_json(v) for k, v in raw.items() if k.startswith(prefix)), key=lambda e: e.field
    )
    record_lookup(agent=reader.name, layer="blackboard", hit=bool(entries))
    return entries


def blackboard_get(*, reader: Agent, execution_id: str, agent_name: str, name: str) -> BlackboardEntry:
    """One field; raises ``NotFound`` if it was never written or has expired."""
    check_id(execution_id, field="execution_id")
    with redis_errors():
        raw = get_redis().hget(tenant_key("bb", execution_id), f"{agent_name}:{name}")
    record_lookup(agent=reader.name, layer="blackboard", hit=raw is not None)
    if raw is None:
        raise NotFound(f"No field {agent_name}:{name} on execution {execution_id}.", field="field")
    return BlackboardEntry.from_json(raw)


def scratchpad_write(
    *,
    agent: Agent,
    execution_id: str,
    key: str,
    value: Any,
    policy: WorkingMemoryPolicy,
    session_id: str | None = None,
) -> bool:
    """Set ``key`` in the agent's private scratchpad for the execution (TTL refreshed); returns
    whether the key is new (it did not exist before).

    The first successful write to an execution (here or ``blackboard_write``) makes ``agent`` its
    owner, in the same MULTI (and ``session_id``, if given first, the execution's session). Raises ``Conflict`` when the execution is closed, ``PayloadTooLarge``
    (413), ``InvalidInput`` for a bad id and ``ServiceUnavailable`` (503) without Redis.
    """
    check_id(execution_id, field="execution_id")
    check_id(key, field="key")
    encoded = _encode(value, policy, field="value")
    pad, index = tenant_key("sp", execution_id, agent.pk), tenant_key("sp-idx", execution_id)
    owner, ttl = tenant_key("bb-owner", execution_id), execution_ttl_seconds(policy)
    with redis_errors():
        client = get_redis()
        if client.exists(tenant_key("bb-closed", execution_id)):
            raise Conflict(f"Execution {execution_id} is closed.", field="execution_id")
        pipe = client.pipeline(transaction=True)
        pipe.hset(pad, key, encoded)
        pipe.expire(pad, policy.scratchpad_ttl_seconds)
        pipe.sadd(index, agent.pk)
        pipe.expire(index, ttl)
        pipe.set(owner, agent.pk, nx=True)
        pipe.expire(owner, ttl)
        session_key = tenant_key("bb-session", execution_id)
        if session_id:
            pipe.set(session_key, session_id, nx=True)
        pipe.expire(session_key, ttl)
        added = pipe.execute()[0]
    return bool(added)


def scratchpad_read(*, agent: Agent, execution_id: str) -> dict[str, Any]:
    """The agent's own scratchpad for the execution (empty if none or expired)."""
    check_id(execution_id, field="execution_id")
    with redis_errors():
        raw: dict[bytes, bytes] = get_redis().hgetall(tenant_key("sp", execution_id, agent.pk))  # type: ignore[assignment]
    record_lookup(agent=agent.name, layer="scratchpad", hit=bool(raw))
    return {k.decode(): json.loads(v) for k, v in sorted(raw.items())}


def scratchpad_get(*, agent: Agent, execution_id: str, key: str) -> Any:
    """One key of the agent's own scratchpad. Raises ``NotFound`` (field ``key``) if it is not set."""
    check_id(execution_id, field="execution_id")
    check_id(key, field="key")
    with redis_errors():
        raw = get_redis().hget(tenant_key("sp", execution_id, agent.pk), key)
    record_lookup(agent=agent.name, layer="scratchpad", hit=raw is not None)
    if raw is None:
        raise NotFound(f"No key {key} in your scratchpad of execution {execution_id}.", field="key")
    return json.loads(raw)


def scratchpad_delete(*, agent: Agent, execution_id: str, key: str) -> bool:
    """Remove one key from the agent's scratchpad; returns whether it existed."""
    check_id(execution_id, field="execution_id")
    check_id(key, field="key")
    with redis_errors():
        return bool(get_redis().hdel(tenant_key("sp", execution_id, agent.pk), key))


def scratchpad_clear(*, agent: Agent, execution_id: str) -> int:
    """Delete the agent's whole scratchpad for the execution; returns how many keys it held."""
    check_id(execution_id, field="execution_id")
    pad = tenant_key("sp", execution_id, agent.pk)
    with redis_errors():
        pipe = get_redis().pipeline(transaction=True)
        pipe.hlen(pad)
        pipe.delete(pad)
        count, _ = pipe.execute()
    return int(count)


def window_append(
    *,
    agent: Agent,
    session_id: str,
    role: str,
    content: str,
    policy: WorkingMemoryPolicy,
    data_subject: str = "",
) -> int:
    """Append a turn to the session's conversation window, keep the last ``window_max_turns``.

    Returns the window's length after the append (RPUSH, the turns beyond the bound read, LTRIM,
    EXPIRE in one MULTI, so each trimmed turn is read by exactly one append). With the tenant's
    ``window_log_trimmed`` (default), the trimmed turns are not lost: they are appended to the
    episodic log as ``message`` events of the session (``payload.source`` ``"window"``, the turn's
    time as ``occurred_at``, its agent as the event's agent, its ``data_subject``). The turn keeps
    ``data_subject`` (``agents.subjects.subject_written``: a bound key's subject; another one raises
    ``SubjectRefused``). Raises ``ServiceUnavailable`` when Redis is down.
    """
    check_id(session_id, field="session_id")
    subject = subject_written(agent, data_subject)
    turn = {
        "role": role,
        "content": content,
        "agent": agent.name,
        "at": timezone.now().isoformat(timespec="microseconds").replace("+00:00", "Z"),
    }
    if subject:
        turn["data_subject"] = subject
    encoded = _encode(turn, policy, field="content")
    key = tenant_key("win", session_id)
    with redis_errors():
        pipe = get_redis().pipeline(transaction=True)
        pipe.rpush(key, encoded)
        pipe.lrange(key, 0, -policy.window_max_turns - 1)
        pipe.ltrim(key, -policy.window_max_turns, -1)
        pipe.expire(key, policy.window_ttl_seconds)
        pipe.llen(key)
        results = pipe.execute()
    trimmed = [json.loads(item) for item in results[1]]
    if trimmed and policy.window_log_trimmed:
        _log_trimmed(agent=agent, session_id=session_id, turns=trimmed)
    return int(results[-1])


def _log_trimmed(*, agent: Agent, session_id: str, turns: list[dict[str, Any]]) -> None:
    """Write turns trimmed from the window to the episodic log (one batch, in window order)."""
    names = {t.get("agent") for t in turns} - {agent.name}
    agents = {a.name: a for a in Agent.objects.filter(name__in=names)} if names else {}
    # the turns keep the subjects they were written with, whoever's append trims them
    agents[agent.name] = Agent.objects.get(pk=agent.pk) if agent.acting_for else agent
    by_agent: list[tuple[Agent, EventData]] = []
    for turn in turns:
        role = turn.get("role") if turn.get("role") in EventRole.values else EventRole.USER
        by_agent.append(
            (
                agents.get(str(turn.get("agent")), agent),
                EventData(
                    session_id=session_id,
                    kind=EventKind.MESSAGE,
                    role=str(role),
                    content=str(turn.get("content", "")),
                    occurred_at=datetime.fromisoformat(str(turn["at"]).replace("Z", "+00:00")),
                    payload={"source": "window", "window_agent": str(turn.get("agent", ""))},
                    data_subject=str(turn.get("data_subject", "")),
                ),
            )
        )
    with transaction.atomic():
        for who, data in by_agent:
            events_append(agent=who, events=[data])


def window_read(*, agent: Agent, session_id: str, last: int) -> list[dict[str, Any]]:
    """The last ``last`` turns of the session's window ``agent`` may read, oldest first (for an agent
    acting for one end user, the turns of its subject or of none among them: ``_readable``)."""
    check_id(session_id, field="session_id")
    with redis_errors():
        raw = get_redis().lrange(tenant_key("win", session_id), -last, -1)
    record_lookup(agent=agent.name, layer="window", hit=bool(raw))
    return _readable(agent, raw)


def _readable(agent: Agent, raw: Sequence[bytes | str]) -> list[dict[str, Any]]:
    """The window turns of ``raw`` (JSON) ``agent`` may read (``agents.subjects.subject_visible``)."""
    turns = [json.loads(item) for item in raw]
    if not agent.acting_for:
        return turns
    return [t for t in turns if subject_visible(agent, str(t.get("data_subject", "")))]


@dataclass(frozen=True)
class WorkingState:
    """What ``working_state_read`` found: ``scratchpad`` (the agent's own, key → value, sorted by
    key), ``blackboard`` (every field, sorted by field) and ``window`` (the last turns, oldest
    first); each empty when there is none."""

    scratchpad: dict[str, Any]
    blackboard: list[BlackboardEntry]
    window: list[dict[str, Any]]


def working_state_read(
    *, agent: Agent, execution_id: str | None, session_id: str | None, last: int
) -> WorkingState:
    """``scratchpad_read`` and ``blackboard_read`` of ``execution_id`` (when given) and
    ``window_read`` of ``session_id``'s last ``last`` turns (when given), in one Redis round trip
    (a pipeline without MULTI: each read is as of its own moment, as three calls would be; every
    key carries the tenant's hash tag, so a cluster serves the pipeline from one node).

    Raises ``InvalidInput`` for a bad id and ``ServiceUnavailable`` (503) without Redis.
    """
    if execution_id is not None:
        check_id(execution_id, field="execution_id")
    if session_id is not None:
        check_id(session_id, field="session_id")
    pipe = get_redis().pipeline(transaction=False)
    if execution_id is not None:
        pipe.hgetall(tenant_key("sp", execution_id, agent.pk))
        pipe.hgetall(tenant_key("bb", execution_id))
    if session_id is not None:
        pipe.lrange(tenant_key("win", session_id), -last, -1)
    with redis_errors():
        replies: list[Any] = pipe.execute() if execution_id is not None or session_id is not None else []
    pad: dict[bytes, bytes] = replies.pop(0) if execution_id is not None else {}
    board: dict[bytes, bytes] = replies.pop(0) if execution_id is not None else {}
    turns: list[bytes] = replies.pop(0) if session_id is not None else []
    if execution_id is not None:
        record_lookup(agent=agent.name, layer="scratchpad", hit=bool(pad))
        record_lookup(agent=agent.name, layer="blackboard", hit=bool(board))
    if session_id is not None:
        record_lookup(agent=agent.name, layer="window", hit=bool(turns))
    return WorkingState(
        scratchpad={k.decode(): json.loads(v) for k, v in sorted(pad.items())},
        blackboard=sorted((BlackboardEntry.from_json(v) for v in board.values()), key=lambda e: e.field),
        window=_readable(agent, turns),
    )


SUMMARY_VALUE_CHARS = 500


def _owner_name(agent_id: int) -> str:
    """The owner's name for the refusal message (the blackboard shows it to the tenant anyway)."""
    name = Agent.objects.filter(pk=agent_id).values_list("name", flat=True).first()
    return name or "another agent"


def execution_close(*, agent: Agent, execution_id: str, session_id: str | None = None) -> Event:
    """Close an execution: no more writes, scratchpads deleted, blackboard kept until its TTL.

    Only the execution's owner (the agent that started it: its first writer, see the module
    docstring) may close it, because closing deletes every agent's scratchpad. Writes a ``decision`` event whose payload names the
    ``owner`` and summarises the final blackboard (each value cut to ``SUMMARY_VALUE_CHARS``
    characters of JSON: a longer value is given as ``value_truncated``, the start of its JSON text,
    with ``value`` null). The decision is logged in the execution's session: the one its first write
    named, else ``session_id`` (the close request's), else the agent's ``agent:<name>``. Raises, writing no event and changing nothing: ``NotFound`` (404) when the
    execution does not exist (never written, or expired), ``PermissionDenied`` (403) when ``agent``
    is not its owner, ``Conflict`` (409) if already closed; all name the field ``execution_id``.
    """
    check_id(execution_id, field="execution_id")
    client = get_redis()
    owner_key = tenant_key("bb-owner", execution_id)
    with redis_errors():
        pipe = client.pipeline(transaction=False)
        pipe.get(owner_key)
        pipe.ttl(owner_key)
        pipe.get(tenant_key("bb-session", execution_id))
        owner, owner_ttl, recorded_session = pipe.execute()
        if owner is None:
            raise NotFound(
                f"Execution {execution_id} does not exist: nothing was ever written to it, or it expired.",
                field="execution_id",
            )
        if int(owner) != agent.pk:
            raise PermissionDenied(
                f"Only the agent that started execution {execution_id} (its first writer, "
                f"{_owner_name(int(owner))}) may close it.",
                field="execution_id",
            )
        # the closed flag lives as long as the owner key, the execution's longest-lived key
        closed = client.set(
            tenant_key("bb-closed", execution_id),
            agent.name,
            nx=True,
            ex=owner_ttl if owner_ttl and owner_ttl > 0 else 24 * 3600,
        )
        if not closed:
            raise Conflict(f"Execution {execution_id} is already closed.", field="execution_id")
        index = tenant_key("sp-idx", execution_id)
        members: set[bytes] = client.smembers(index)  # type: ignore[assignment]
        pads = [tenant_key("sp", execution_id, member.decode()) for member in members]
        client.delete(index, *pads)
        entries = [
            BlackboardEntry.from_json(v) for v in client.hgetall(tenant_key("bb", execution_id)).values()
        ]
    summary = []
    for entry in sorted(entries, key=lambda e: e.field):
        text = json.dumps(entry.value, ensure_ascii=False)
        summary.append(
            {
                "field": entry.field,
                "agent": entry.agent,
                "version": entry.version,
                "updated_at": entry.updated_at,
                # the value itself when short; else the start of its JSON text, marked as cut
                "value": entry.value if len(text) <= SUMMARY_VALUE_CHARS else None,
                "value_truncated": None if len(text) <= SUMMARY_VALUE_CHARS else text[:SUMMARY_VALUE_CHARS],
            }
        )
    return decision_record(
        agent=agent,
        session_id=(recorded_session.decode() if recorded_session else None)
        or session_id
        or agent_session(agent),
        execution_id=execution_id,
        content=(
            f"Execution {execution_id} closed by its owner {agent.name}; "
            f"final blackboard has {len(summary)} field(s)."
        ),
        payload={
            "action": "execution_close",
            "execution_id": execution_id,
            "owner": agent.name,
            "scratchpads_deleted": len(pads),
            "blackboard": summary,
        },
    )


# --- erasure ---------------------------------------------------------------------------------------------


def tenant_keys(client: Any = None) -> list[str]:
    """Every Redis key of the current tenant (``SCAN`` over ``{t}:*``, never ``KEYS``).
    Raises ``ServiceUnavailable`` when Redis cannot be reached."""
    pattern = tenant_key("*")
    with redis_errors():
        client = client or get_redis()
        return sorted(k.decode() for k in client.scan_iter(match=pattern, count=1000))


# What each kind of key holds of the agents' data, by the layout above: a window's turns (their
# content), a blackboard's documents (their value), a scratchpad (its keys and values) and a cached
# checkpoint (its state and plan). The rest is bookkeeping (versions, owner and closed flags, a
# session id, agent ids, a deleted checkpoint's id: memory.checkpoints.services.cache.GONE_KIND):
# structure, never data about a person.
_BOOKKEEPING = frozenset({"bbv", "bb-owner", "bb-closed", "bb-session", "sp-idx", "bb-updates", "ckpt-gone"})


def _json_leaves(value: Any) -> list[str]:
    """The strings of a JSON value an agent wrote: every scalar, and every object key."""
    if isinstance(value, dict):
        return [t for k, v in value.items() for t in (str(k), *_json_leaves(v))]
    if isinstance(value, list):
        return [t for v in value for t in _json_leaves(v)]
    return [] if value is None else [value if isinstance(value, str) else json.dumps(value)]


def _loads(raw: bytes | str) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return raw.decode(errors="replace") if isinstance(raw, bytes) else raw


def _key_texts(client: Any, kind: str, key: str) -> list[str]:
    """The texts of the agents' data that ``key`` (of ``kind``) holds, to look for a person's id in."""
    if kind in _BOOKKEEPING:
        return []
    found = client.type(key).decode()
    if kind == "win" and found == "list":
        turns = [_loads(t) for t in client.lrange(key, 0, -1)]
        return [
            t for turn in turns for t in _json_leaves(turn.get("content") if isinstance(turn, dict) else turn)
        ]
    if kind == "bb" and found == "hash":
        docs = [_loads(v) for v in client.hvals(key)]
        return [t for doc in docs for t in _json_leaves(doc.get("value") if isinstance(doc, dict) else doc)]
    if kind == "sp" and found == "hash":
        return [t for k, v in client.hgetall(key).items() for t in (k.decode(), *_json_leaves(_loads(v)))]
    if kind == "ckpt" and found == "hash":  # the checkpoints' cached latest: {"step", "body"}
        doc = _loads(client.hget(key, "body") or b"{}")
        return _json_leaves([doc.get("state"), doc.get("plan")] if isinstance(doc, dict) else doc)
    # a kind this module does not know: all it holds is searched
    if found == "string":
        return [(client.get(key) or b"").decode(errors="replace")]
    if found == "hash":
        return [b.decode(errors="replace") for kv in client.hgetall(key).items() for b in kv]
    if found == "list":
        return [b.decode(errors="replace") for b in client.lrange(key, 0, -1)]
    if found in ("set", "zset"):
        members = client.smembers(key) if found == "set" else client.zrange(key, 0, -1)
        return [b.decode(errors="replace") for b in members]
    return []


def keys_holding(needles: list[str]) -> list[str]:
    """The current tenant's keys whose data (what agents wrote: window turns, blackboard values,
    scratchpad keys and values, cached checkpoint states and plans) holds any of ``needles`` as a
    whole identifier (not inside a longer one: the subject "u1" is not in "u10" or "menu1").

    Key names and bookkeeping are structure, never searched: a key is a person's because of what
    it holds, not because its session, execution or agent id happens to read like the person's id
    (the working memory of the sessions a person's rows are in goes by ``working_memory_erase``).
    Raises ``ServiceUnavailable``."""
    pattern = identifier_pattern(needles)
    if pattern is None:
        return []
    prefix = tenant_key("")
    with redis_errors():
        client = get_redis()
        found = []
        for key in tenant_keys(client):
            kind = key[len(prefix) :].partition(":")[0]
            if any(pattern.search(text) for text in _key_texts(client, kind, key)):
                found.append(key)
        return found


def working_memory_erase(
    *, session_ids: Sequence[str], agent_ids: Sequence[int], keys: Sequence[str] = ()
) -> list[str]:
    """Delete from Redis the working memory of ``session_ids`` (their conversation windows, and the
    blackboards and scratchpads of every execution whose session is one of them), the scratchpads
    of ``agent_ids`` in every execution, and ``keys``. Returns the keys deleted. Raises
    ``ServiceUnavailable`` when Redis cannot be reached (nothing may be reported gone that is not)."""
    sessions = set(session_ids)
    agents = {str(a) for a in agent_ids}
    doomed = set(keys)
    with redis_errors():
        client = get_redis()
        prefix = tenant_key("")
        for session_id in sessions:
            doomed.add(tenant_key("win", session_id))
        executions = set()
        for key in tenant_keys(client):
            rest = key[len(prefix) :]
            kind, _, name = rest.partition(":")
            if kind == "bb-session" and sessions:
                raw = client.get(key)
                if (raw.decode() if isinstance(raw, bytes) else str(raw or "")) in sessions:
                    executions.add(name)
            elif kind == "sp" and agents and name.rpartition(":")[2] in agents:
                doomed.add(key)
        for execution_id in executions:
            for kind in ("bb", "bbv", "bb-owner", "bb-closed", "bb-session", "sp-idx"):
                doomed.add(tenant_key(kind, execution_id))
            doomed.update(client.scan_iter(match=tenant_key("sp", execution_id, "*"), count=1000))
        names = sorted(k if isinstance(k, str) else k.decode() for k in doomed)
        existing = [k for k in names if client.exists(k)]
        if existing:
            client.delete(*existing)
        return existing
