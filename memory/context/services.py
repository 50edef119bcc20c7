"""Context assembly: the sections an agent puts in its prompt for the current step, within a budget.

The retrieval hierarchy (the seed design): the scratchpad and blackboard first, then the recent
turns and episodes, then semantic memory, then facts about the entities the query names, then the
matching procedure. Each layer gives candidate items; an item's **value** is its layer's weight
times its relevance in [0, 1]:

=========== ====== ==========================================================================
layer       weight relevance
=========== ====== ==========================================================================
working     1.0    1 for the caller's scratchpad, 0.9 for blackboard fields
window      0.9    ``0.95 ** age`` (age 0: the latest turn)
episodes    0.8    ``0.5 + 0.5 * 0.9 ** age`` for the session's latest events; 0.6 for its
                   ``summary`` memories (which stand for older episodes)
semantic    0.7    the recall score (Park et al. 2023; see ``memory_search``)
facts       0.6    the fact's confidence
procedures  0.5    the skill match score
=========== ====== ==========================================================================

A request's ``weights`` replace these per layer (0 leaves a layer out). Items with the same
normalised text (NFKC, case-folded, whitespace collapsed) are one item across layers: the most
valuable copy stays, carrying every copy's source ids.

**Budget.** A 0/1 knapsack over token costs, solved by the greedy rule of value per token (Dantzig,
"Discrete-variable extremum problems", Operations Research 5(2), 1957): items in decreasing
``value / tokens``, each taken if it still fits. An item costs its text's tokens plus its bullet;
a section costs its heading once it holds an item. The assembled ``text`` is counted again at the
end with the same tokenizer and is never over the budget.

**Order.** Language models use what sits at the start and at the end of a long context best and
what sits in the middle worst (Liu et al., "Lost in the Middle: How Language Models Use Long
Contexts", TACL 12, 2024). Sections are ranked by their best item's value and placed from both
ends inwards: the first at the start, the second at the end, the third second, and so on, so the
least valuable section sits in the middle. Inside a section the same rule orders semantic memories
and facts; turns and episodes keep their time order (a conversation read out of order misleads).

**Saving.** For a session of ``M`` turns of ``Δt`` tokens on average, sending the whole history on
this call costs ``M * Δt``, and resending it on every turn of the session would have cost
``T_total = Σ_{i=1..M} i * Δt = M(M+1)/2 * Δt`` (the seed design). Both are reported with the tokens
used, and counted in ``/metrics`` (``engram_context_tokens_total``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Literal

from agents.models import Agent
from core.errors import InvalidInput
from core.metrics import record_context
from memory.embeddings import embed_query
from memory.episodic.models import Event
from memory.episodic.selectors import SessionTail, session_tail
from memory.knowledge import selectors as knowledge
from memory.procedural import selectors as procedural
from memory.semantic.models import MemoryType
from memory.semantic.selectors import memories_visible_to
from memory.semantic.services.duplicates import normalise_text
from memory.semantic.services.recall import memory_search
from memory.working import services as working
from tenants.models import Tenant

from .tokens import TokenCounter, token_counter

Layer = Literal["working", "window", "episodes", "semantic", "facts", "procedures"]
LAYERS: tuple[Layer, ...] = ("working", "window", "episodes", "semantic", "facts", "procedures")
DEFAULT_WEIGHTS: dict[Layer, float] = {
    "working": 1.0,
    "window": 0.9,
    "episodes": 0.8,
    "semantic": 0.7,
    "facts": 0.6,
    "procedures": 0.5,
}
TITLES: dict[Layer, str] = {
    "working": "Working state",
    "window": "Recent turns",
    "episodes": "Recent episodes",
    "semantic": "Memories",
    "facts": "Facts",
    "procedures": "Procedure",
}
# sections whose items keep their time order (a conversation read out of order misleads)
CHRONOLOGICAL: frozenset[Layer] = frozenset({"window", "episodes"})

MIN_BUDGET, MAX_BUDGET = 16, 200_000
WINDOW_TURNS = 20  # candidates per layer: enough to fill a large budget, few enough to stay fast
EPISODES = 30
SUMMARIES = 5
# recall k: the pool is max(4k, 40) per side, and a budget of ~1,000 tokens holds ~30 items in all
MEMORIES = 12
ENTITIES = 5
FACTS_PER_ENTITY = 20
SKILL_MIN_SCORE = 0.3  # below this a skill is a guess, not "the matching skill"
# the query embeddings of concurrent assemblies (one thread per core is what the ONNX runtime uses)
_EMBEDDING = ThreadPoolExecutor(max_workers=2, thread_name_prefix="context-embedding")
ITEM_MAX_CHARS = 2000  # a longer item is cut (with "…"): one memory never eats the budget
VALUE_MAX_CHARS = 300  # working-memory values shown in JSON, cut to this


@dataclass
class Item:
    """One piece of context: ``text`` as it is sent, where it came from (``sources``: ``{"layer",
    "id"}``), its ``relevance`` in [0, 1], ``value`` (layer weight * relevance) and ``tokens``."""

    layer: Layer
    text: str
    relevance: float
    sources: list[dict[str, str]]
    position: int = 0  # order within its layer (time order for turns and episodes)
    content: str = ""  # what duplicates are compared by (default: ``text``)
    value: float = 0.0
    tokens: int = 0


@dataclass
class Section:
    """The items of one layer, in the order they are sent, under ``title``."""

    layer: Layer
    title: str
    items: list[Item]
    tokens: int


@dataclass
class Context:
    """An assembled context. ``tokens_used`` is the token count of ``text`` (never above
    ``budget``); ``history_turns`` (M) and ``turn_tokens_mean`` (Δt) give ``full_history_tokens``
    (M * Δt) and ``cumulative_full_history_tokens`` (M(M+1)/2 * Δt); ``candidates`` and ``dropped``
    count items before and after the budget cut (duplicates merged first)."""

    session_id: str
    execution_id: str | None
    query: str
    budget: int
    tokenizer: str
    sections: list[Section]
    text: str
    tokens_used: int
    history_turns: int
    turn_tokens_mean: float
    full_history_tokens: int
    cumulative_full_history_tokens: int
    candidates: int
    duplicates_merged: int
    dropped: int
    weights: dict[str, float] = field(default_factory=dict)

    @property
    def saved_tokens(self) -> int:
        """What this call saved against sending the whole history (never negative)."""
        return max(0, self.full_history_tokens - self.tokens_used)


def _cut(text: str, limit: int = ITEM_MAX_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _json(value: Any) -> str:
    return _cut(json.dumps(value, ensure_ascii=False, separators=(",", ":")), VALUE_MAX_CHARS)


def _working_items(*, state: working.WorkingState) -> list[Item]:
    items = [
        Item("working", f"scratchpad {key} = {_json(value)}", 1.0, [{"layer": "scratchpad", "id": key}])
        for key, value in state.scratchpad.items()
    ]
    items += [
        Item(
            "working",
            f"blackboard {e.field} = {_json(e.value)}",
            0.9,
            [{"layer": "blackboard", "id": e.field}],
        )
        for e in state.blackboard
    ]
    return items


def _window_items(*, session_id: str, state: working.WorkingState) -> list[Item]:
    turns = state.window
    n = len(turns)
    return [
        Item(
            "window",
            f"{t.get('role', '')}: {_cut(str(t.get('content', '')))}",
            0.95 ** (n - 1 - i),
            [{"layer": "window", "id": f"{session_id}#{t.get('at', i)}"}],
            position=i,
            content=_cut(str(t.get("content", ""))),
        )
        for i, t in enumerate(turns)
    ]


def _episode_items(*, agent: Agent, session_id: str, latest: Sequence[Event]) -> list[Item]:
    n = len(latest)
    items = [
        Item(
            "episodes",
            f"[{e.occurred_at:%Y-%m-%d %H:%M}] {e.agent.name} {e.kind}"
            + (f" ({e.role})" if e.role else "")
            + f": {_cut(e.content)}",
            0.5 + 0.5 * 0.9 ** (n - 1 - i),
            [{"layer": "episodic", "id": str(e.pk)}],
            position=i,
            content=_cut(e.content),
        )
        for i, e in enumerate(latest)
        if e.content.strip()
    ]
    summaries = (
        memories_visible_to(agent)
        .filter(session_id=session_id, memory_type=MemoryType.SUMMARY, superseded_at__isnull=True)
        .only("id", "content")
        .order_by("-created_at")[:SUMMARIES]
    )
    items = [
        Item(
            "episodes",
            f"summary: {_cut(m.content)}",
            0.6,
            [{"layer": "semantic", "id": str(m.pk)}],
            position=-1,
            content=_cut(m.content),
        )
        for m in summaries
    ] + items
    return items


def _semantic_items(*, agent: Agent, query: str, tenant: Tenant) -> list[Item]:
    hits = memory_search(agent=agent, query=query, k=MEMORIES, policy=tenant.retrieval_policy)
    return [
        Item("semantic", _cut(h.memory.content), h.score, [{"layer": "semantic", "id": str(h.memory.pk)}])
        for h in hits
        if h.memory.memory_type != MemoryType.SUMMARY  # summaries are the episodes' section
    ]


def _fact_items(*, query: str) -> list[Item]:
    items: list[Item] = []
    for fact in knowledge.facts_about_named(query, entities=ENTITIES, per_entity=FACTS_PER_ENTITY):
        obj = fact.object_entity.name if fact.object_entity is not None else _json(fact.literal_value)
        status = " (disputed)" if fact.status == "disputed" else ""
        items.append(
            Item(
                "facts",
                f"{fact.subject.name} {fact.predicate.name} {obj}{status}",
                fact.confidence,
                [{"layer": "knowledge", "id": str(fact.pk)}],
            )
        )
    return items


def _procedure_items(*, query: str) -> list[Item]:
    matches = [m for m in procedural.skill_match(intent=query, k=1) if m.score >= SKILL_MIN_SCORE]
    items = []
    for m in matches:
        v = m.version
        steps = "; ".join(f"{s.get('id')}: {s.get('tool')}" for s in v.steps if isinstance(s, dict))
        items.append(
            Item(
                "procedures",
                _cut(f"skill {v.skill.name} v{v.number} ({v.skill.title}): {steps}"),
                m.score,
                [{"layer": "procedural", "id": f"{v.skill.name}@{v.number}"}],
            )
        )
    return items


def _merge_duplicates(items: Iterable[Item]) -> tuple[list[Item], int]:
    """One item per normalised text; the most valuable copy stays with every copy's sources."""
    kept: dict[str, Item] = {}
    merged = 0
    for item in items:
        key = normalise_text(item.content or item.text)
        other = kept.get(key)
        if other is None:
            kept[key] = item
            continue
        merged += 1
        best, rest = (item, other) if item.value > other.value else (other, item)
        best.sources = best.sources + [s for s in rest.sources if s not in best.sources]
        kept[key] = best
    return list(kept.values()), merged


def edge_order(ranked: list[Any]) -> list[Any]:
    """``ranked`` (best first) placed from both ends inwards: 1st, 3rd, 5th, … then …, 4th, 2nd.
    The least valuable end up in the middle (Liu et al. 2024)."""
    return ranked[0::2] + ranked[1::2][::-1]


def _heading(layer: Layer) -> str:
    return f"## {TITLES[layer]}"


_HEADING_COSTS: dict[tuple[str, int], dict[Layer, int]] = {}


def _heading_costs(counter: TokenCounter) -> dict[Layer, int]:
    """The tokens of each section's heading under ``counter`` (fixed texts: counted once per
    tokenizer and process; the counters themselves are loaded once and kept)."""
    key = (counter.name, id(counter.tokenizer))
    costs = _HEADING_COSTS.get(key)
    if costs is None:
        costs = _HEADING_COSTS[key] = {layer: counter.count(_heading(layer)) for layer in LAYERS}
    return costs


def _render(sections: list[Section]) -> str:
    return "\n\n".join(_heading(s.layer) + "\n" + "\n".join(f"- {i.text}" for i in s.items) for s in sections)


def _weights(weights: Mapping[str, float] | None) -> dict[str, float]:
    out: dict[str, float] = {layer: DEFAULT_WEIGHTS[layer] for layer in LAYERS}
    for name, w in (weights or {}).items():
        if name not in DEFAULT_WEIGHTS:
            raise InvalidInput(f"Unknown layer; use {', '.join(LAYERS)}.", field=f"weights.{name}")
        if not (0.0 <= w <= 1.0) or math.isnan(w):
            raise InvalidInput("A weight is from 0 to 1.", field=f"weights.{name}")
        out[name] = float(w)
    return out


def context_build(
    *,
    agent: Agent,
    tenant: Tenant,
    session_id: str,
    query: str,
    budget: int,
    execution_id: str | None = None,
    weights: Mapping[str, float] | None = None,
) -> Context:
    """Assemble ``agent``'s context for ``query`` in ``session_id`` (and ``execution_id``'s working
    memory) within ``budget`` tokens of the tenant's tokenizer; see the module docstring for the
    values, the cut and the order.

    Reads what ``agent`` may see and nothing else: its own scratchpad, the execution's blackboard,
    the session's window and events, the memories ``visibility_q`` allows, the tenant's facts and
    published skills. Semantic recall restarts the recalled memories' recency clocks (as recall does).

    Raises ``InvalidInput`` (field ``budget``, ``query``, ``weights.<layer>``, ``session_id``,
    ``execution_id`` or ``tokenizer``), ``ServiceUnavailable`` (503) when Redis, the embedder or the
    tokenizer is down: a context silently missing a layer would look like a complete one.
    """
    if not MIN_BUDGET <= budget <= MAX_BUDGET:
        raise InvalidInput(f"budget is from {MIN_BUDGET} to {MAX_BUDGET} tokens.", field="budget")
    if not query.strip():
        raise InvalidInput("Say what the current step needs (query).", field="query")
    w = _weights(weights)
    counter = token_counter(tenant.context_tokenizer)

    gathered, tail = _gather(
        agent=agent, tenant=tenant, session_id=session_id, query=query, execution_id=execution_id, w=w
    )
    for item in gathered:
        item.value = w[item.layer] * min(1.0, max(0.0, item.relevance))
    candidates = len(gathered)
    items, merged = _merge_duplicates(gathered)

    # one tokenizer call for the items and the history's sample (the tokenizer batches in Rust)
    sample = [e.content for e in tail.events]
    counted = counter.count_many([f"- {i.text}" for i in items] + sample)
    costs, sample_sizes = counted[: len(items)], counted[len(items) :]
    for item, cost in zip(items, costs, strict=True):
        item.tokens = cost
    chosen = _knapsack(items, budget=budget, heading_cost=_heading_costs(counter))
    sections, text, used = _assemble(chosen, counter=counter, budget=budget)

    history_turns, mean = tail.total, (sum(sample_sizes) / len(sample_sizes) if sample_sizes else 0.0)
    full = round(history_turns * mean)
    cumulative = round(history_turns * (history_turns + 1) / 2 * mean)
    record_context(used=used, full_history=full)
    return Context(
        session_id=session_id,
        execution_id=execution_id,
        query=query,
        budget=budget,
        tokenizer=counter.name,
        sections=sections,
        text=text,
        tokens_used=used,
        history_turns=history_turns,
        turn_tokens_mean=round(mean, 2),
        full_history_tokens=full,
        cumulative_full_history_tokens=cumulative,
        candidates=candidates,
        duplicates_merged=merged,
        dropped=len(items) - sum(len(s.items) for s in sections),
        weights=dict(w),
    )


def _gather(
    *,
    agent: Agent,
    tenant: Tenant,
    session_id: str,
    query: str,
    execution_id: str | None,
    w: Mapping[str, float],
) -> tuple[list[Item], SessionTail]:
    """The candidate items of every layer whose weight is above 0, in the hierarchy's order, and
    the session's latest events (they serve the episodes' items and the history's size: M and the
    Δt sample)."""
    # The query's one embedding (semantic recall and skill matching share it through embed_query's
    # cache) is computed on another core while the other layers are read: the ONNX runtime releases
    # the GIL, and the embedding is the largest single cost of an assembly after the recall itself.
    embedding = _EMBEDDING.submit(embed_query, query) if w["semantic"] > 0 or w["procedures"] > 0 else None
    state = working.working_state_read(
        agent=agent,
        execution_id=execution_id if w["working"] > 0 else None,
        session_id=session_id if w["window"] > 0 else None,
        last=WINDOW_TURNS,
    )
    tail = session_tail(session_id=session_id, last=EPISODES)
    gathered: list[Item] = _working_items(state=state) + _window_items(session_id=session_id, state=state)
    if w["episodes"] > 0:
        gathered += _episode_items(agent=agent, session_id=session_id, latest=tail.events)
    fact_items = _fact_items(query=query) if w["facts"] > 0 else []
    if embedding is not None:
        embedding.result()  # raises what the embedder raised (EmbedderUnavailable: 503)

    if w["semantic"] > 0:
        gathered += _semantic_items(agent=agent, query=query, tenant=tenant)
    gathered += fact_items
    if w["procedures"] > 0:
        gathered += _procedure_items(query=query)

    return gathered, tail


def _knapsack(items: list[Item], *, budget: int, heading_cost: Mapping[Layer, int]) -> list[Item]:
    """Dantzig's greedy rule: by value per token (ties: more value first), take what still fits;
    a section's heading is paid by its first item (and the blank line between sections: no token
    in these tokenizers, which split on whitespace)."""
    ranked = sorted(
        (i for i in items if i.value > 0 and i.tokens > 0),
        key=lambda i: (-i.value / i.tokens, -i.value),
    )
    left = budget
    opened: set[Layer] = set()
    chosen = []
    for item in ranked:
        cost = item.tokens + (0 if item.layer in opened else heading_cost[item.layer])
        if cost <= left:
            chosen.append(item)
            left -= cost
            opened.add(item.layer)
    return chosen


def _sections(chosen: list[Item]) -> list[Section]:
    by_layer: dict[Layer, list[Item]] = {}
    for item in chosen:
        by_layer.setdefault(item.layer, []).append(item)
    sections = []
    for layer, layer_items in by_layer.items():
        if layer in CHRONOLOGICAL:
            ordered = sorted(layer_items, key=lambda i: i.position)
        else:
            ordered = edge_order(sorted(layer_items, key=lambda i: -i.value))
        sections.append(Section(layer, TITLES[layer], ordered, sum(i.tokens for i in ordered)))
    ranked = sorted(sections, key=lambda s: (-max(i.value for i in s.items), LAYERS.index(s.layer)))
    return edge_order(ranked)


def _assemble(chosen: list[Item], *, counter: TokenCounter, budget: int) -> tuple[list[Section], str, int]:
    """Sections, their text and its token count; the least valuable item per token leaves until
    the count is within the budget (the per-item sum is exact for whitespace-splitting
    tokenizers, so this only acts for a tokenizer that merges across lines)."""
    chosen = list(chosen)
    while True:
        sections = _sections(chosen) if chosen else []
        text = _render(sections)
        used = counter.count(text)
        if used <= budget or not chosen:
            return sections, text, used
        chosen.remove(min(chosen, key=lambda i: (i.value / i.tokens, i.value)))
