"""Skill match latency at 10,000 published skills in one tenant, and the time to compile a 50-step skill.

The script fills the tenant ``bench_skills`` with N synthetic skills (``--skills``, default 10,000;
templated support and operations tasks: a verb, an object and a circumstance, with a title, a
description and three intents each; fixed seed), every one with a published version, runs ANALYZE,
and measures after a warm-up, with distinct requests worded unlike the intents:

- ``selectors.skill_match`` (the service behind ``GET /api/v1/skills?intent=``, k=5) with the
  request embedded per call (the ``embed_query`` cache is cleared first): the headline figure;
- the same requests again, embeddings cached: the database and Python part alone;
- the request's embedding alone;
- compiling a 50-step skill (49 distinct CEL conditions, 33 steps with references):
  ``validation.compile_skill`` alone (JSON Schema and CEL checks) the first time (every condition
  parsed) and again (parse trees cached, as when the editor re-checks while one types), and
  ``services.tools.version_compile`` (with the tool contracts read from PostgreSQL, as a publish does).

It also reports how often the skill a request was generated from is the top match (a sanity check
of the fusion, not a quality benchmark). Reruns are quick: a tenant that holds its N skills is not
refilled, and the corpus's vectors are cached in ``var/bench/embeddings/``.

Needs PostgreSQL (with pgvector): ``DATABASE_URL`` is read from the environment::

    ./engram services --profile bench > /tmp/bench-svc.log 2>&1 &
    eval "$(grep export /tmp/bench-svc.log)"
    export DJANGO_SETTINGS_MODULE=config.settings.local
    .venv/bin/python manage.py migrate_schemas --noinput -v 0
    python -m benchmarks skill_match
"""

from __future__ import annotations

import argparse
import copy
import os
import random
import time
from typing import Any

import numpy as np
from _common import ROOT, django_setup, percentiles

CACHE_DIR = ROOT / "var" / "bench" / "embeddings"

VERBS = [
    ("reset", "reset", "start over with"), ("unlock", "unlock", "get back into"), ("cancel", "cancel", "stop"),
    ("refund", "refund", "get my money back for"), ("update", "update", "change"), ("export", "export", "download"),
    ("delete", "delete", "remove"), ("create", "create", "set up"), ("renew", "renew", "extend"),
    ("transfer", "transfer", "move"), ("verify", "verify", "confirm"), ("schedule", "schedule", "book"),
    ("escalate", "escalate", "raise a complaint about"), ("replace", "replace", "swap"),
    ("pause", "pause", "put on hold"), ("merge", "merge", "combine"), ("audit", "audit", "review"),
    ("restore", "restore", "recover"), ("share", "share", "give access to"), ("archive", "archive", "put away"),
]  # fmt: skip
OBJECTS = [
    "password", "account", "subscription", "invoice", "order", "shipment", "delivery address",
    "payment method", "API key", "monthly report", "appointment", "software license", "team workspace",
    "user profile", "support ticket", "gift card", "loyalty points", "data export", "two-factor device",
    "billing plan", "contract", "domain name", "mailbox", "backup", "calendar",
]  # fmt: skip
CONTEXTS = [
    "for an enterprise customer", "in the EU region", "over live chat", "after a failed payment",
    "for a new employee", "before the end of the quarter", "for a customer abroad", "by phone",
    "for a suspended user", "after a data breach", "for a family plan", "on the mobile app",
    "for a reseller", "during an outage", "for a minor's account", "after a merger",
    "for a student discount", "with manager approval", "for a deceased customer", "in bulk",
    "for a partner integration", "after a chargeback", "for a VIP customer", "outside business hours",
    "for a trial account",
]  # fmt: skip


def corpus(n: int, seed: int) -> list[dict[str, Any]]:
    """``n`` distinct skills (each verb with each object and context, shuffled with ``seed``)."""
    combos = [(v, o, c) for v in VERBS for o in OBJECTS for c in CONTEXTS]
    random.Random(seed).shuffle(combos)
    if n > len(combos):
        raise SystemExit(f"at most {len(combos):,} distinct skills")
    skills = []
    for index, ((verb, _, casual), obj, context) in enumerate(combos[:n]):
        skills.append(
            {
                "name": f"{verb}-{obj.replace(' ', '-').lower()}-{index}",
                "title": f"{verb.capitalize()} a {obj} {context}",
                "description": f"How support agents {verb} a customer's {obj} {context}, with the checks it needs.",
                "intents": [
                    f"{verb} my {obj} {context}",
                    f"I want to {casual} my {obj}",
                    f"please {verb} the {obj}",
                ],
                "request": f"could you help me {casual} the {obj} {context.replace('for a', 'for this')}",
            }
        )
    return skills


def match_text(skill: dict[str, Any]) -> str:
    return "\n".join([skill["title"], *skill["intents"], skill["description"]])


def vectors(texts: list[str], model: str, seed: int) -> np.ndarray:
    """Embeddings of ``texts`` (a corpus prefix), cached on disk."""
    from memory.embeddings import get_embedder

    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    path = CACHE_DIR / f"skills-{model.replace('/', '_')}-seed{seed}.npy"
    cached = np.load(path) if path.exists() else np.zeros((0, 0), dtype=np.float32)
    if len(cached) >= len(texts):
        return cached[: len(texts)]
    todo = texts[len(cached) :]
    print(f"  embedding {len(todo):,} skills with {model}...", flush=True)
    t0 = time.perf_counter()
    parts = []
    for i in range(0, len(todo), 256):
        parts.append(get_embedder().embed(todo[i : i + 256]))
        if (i // 256) % 8 == 7:
            print(
                f"    {i + 256:,}/{len(todo):,} ({(i + 256) / (time.perf_counter() - t0):,.0f} texts/s)",
                flush=True,
            )
    out = np.concatenate([cached, *parts]) if len(cached) else np.concatenate(parts)
    np.save(path, out.astype(np.float32))
    return out


def _object(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required}


# The tools the benchmark's skills use: an e-mail, a lookup with an integer and a boolean, a question.
TOOLS = {
    "lookup_customer": (
        _object({"email": {"type": "string", "format": "email"}}, ["email"]),
        _object(
            {"customer_id": {"type": "string"}, "tier": {"type": "integer"}, "active": {"type": "boolean"}},
            ["customer_id", "tier", "active"],
        ),
    ),
    "send_email": (
        _object(
            {
                "to": {"type": "string", "format": "email"},
                "template": {"type": "string"},
                "data": {"type": "object"},
            },
            ["to", "template"],
        ),
        _object({"message_id": {"type": "string"}}, ["message_id"]),
    ),
    "ask_user": (
        _object({"question": {"type": "string", "minLength": 1}}, ["question"]),
        _object({"answer": {"type": "string"}}, ["answer"]),
    ),
}
INPUT = _object(
    {
        "email": {"type": "string", "format": "email"},
        "channel": {"type": "string", "enum": ["chat", "email"]},
    },
    ["email", "channel"],
)
STEPS = [
    {
        "id": "lookup",
        "tool": "lookup_customer",
        "params": {"email": {"$ref": "input.email"}},
        "output_as": "customer",
    },
    {"id": "notify", "tool": "send_email", "params": {"to": {"$ref": "input.email"}, "template": "done"}},
    {
        "id": "ask",
        "tool": "ask_user",
        "when": 'input.channel == "chat"',
        "params": {"question": "Anything else?"},
        "on_error": "skip",
    },
]


def fifty_steps() -> list[dict[str, Any]]:
    """A 50-step skill: a lookup, then 49 steps that read the input and the lookup's output (by
    path and alias) under a CEL condition, some jumping ahead on error."""
    steps: list[dict[str, Any]] = [copy.deepcopy(STEPS[0])]
    for i in range(1, 50):
        step: dict[str, Any] = {
            "id": f"step_{i}",
            "tool": "send_email" if i % 3 else "ask_user",
            "when": f'customer.active && steps.lookup.output.tier >= {i} || input.channel == "chat"',
        }
        if i % 3:
            step["params"] = {
                "to": {"$ref": "input.email"},
                "template": f"t{i}",
                "data": {"customer": {"$ref": "steps.lookup.output.customer_id"}, "n": i},
            }
        else:
            step["params"] = {"question": f"Question {i}?"}
            step["on_error"] = "skip"
        steps.append(step)
    return steps


def fill(tenant: Any, skills: list[dict[str, Any]], seed: int) -> None:
    """Insert the skills the tenant does not hold yet, each with a published version; ANALYZE."""
    from django.db import connection, transaction
    from django_tenants.utils import tenant_context

    from core.tenancy import maintenance
    from memory.embeddings import get_embedder
    from memory.procedural.models import Skill, SkillVersion, VersionStatus
    from memory.procedural.services.common import Actor
    from memory.procedural.services.tools import tool_save

    embedder = get_embedder()
    actor = Actor(username="benchmark")
    with tenant_context(tenant):
        for name, (input_schema, output_schema) in TOOLS.items():
            tool_save(
                actor=actor,
                name=name,
                description=name,
                input_schema=input_schema,
                output_schema=output_schema,
            )
        have = set(Skill.objects.filter(embedding_model=embedder.name).values_list("name", flat=True))
        if len(have) >= len(skills):
            print(f"  {tenant.schema_name}: already holds {len(have):,} skills, no fill", flush=True)
            return
        vecs = vectors([match_text(s) for s in skills], embedder.name, seed)
        pins = {name: 1 for name in TOOLS}
        t0 = time.perf_counter()
        todo = [(i, s) for i, s in enumerate(skills) if s["name"] not in have]
        print(f"  inserting {len(todo):,} skills into {tenant.schema_name}...", flush=True)
        for start in range(0, len(todo), 1000):
            batch = todo[start : start + 1000]
            with transaction.atomic():
                rows = Skill.objects.bulk_create(
                    Skill(
                        name=s["name"],
                        title=s["title"],
                        description=s["description"],
                        intents=s["intents"],
                        intents_text="\n".join(s["intents"]),
                        tags=["benchmark"],
                        embedding=vecs[i],
                        embedding_model=embedder.name,
                        embedding_dimensions=embedder.dimensions,
                        created_by="user:benchmark",
                    )
                    for i, s in batch
                )
                SkillVersion.objects.bulk_create(
                    SkillVersion(
                        skill=skill,
                        number=1,
                        status=VersionStatus.PUBLISHED,
                        steps=STEPS,
                        input_schema=INPUT,
                        author="user:benchmark",
                        tool_versions=pins,
                        published_by="benchmark",
                    )
                    for skill in rows
                )
        # as autovacuum would after a bulk load; VACUUM is the tables' owner's (a tenant's role would
        # only get a warning that it skipped them)
        with maintenance(), connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE memory_skill")
            cursor.execute("VACUUM ANALYZE memory_skillversion")
        print(f"  filled in {time.perf_counter() - t0:,.1f} s; VACUUM ANALYZE done", flush=True)


def _row(label: str, stats: dict[str, float]) -> None:
    print(
        f"  {label:<52} p50 {stats['p50']:7.2f} ms   p95 {stats['p95']:7.2f} ms   "
        f"p99 {stats['p99']:7.2f} ms   (n={int(stats['n'])})",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--skills", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    django_setup()
    from django_tenants.utils import tenant_context

    from memory.embeddings import embed_query, get_embedder
    from memory.procedural import selectors
    from memory.procedural.cel.parsing import _parse
    from memory.procedural.services.tools import version_compile
    from memory.procedural.validation import ToolContract, compile_skill
    from tenants.services import tenant_create

    load = os.getloadavg()
    print(
        f"load average before: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; {os.cpu_count()} cores", flush=True
    )
    tenant, _ = tenant_create(slug="bench_skills", name="Benchmark: skills")
    skills = corpus(args.skills, args.seed)
    fill(tenant, skills, args.seed)
    embedder = get_embedder()
    rng = random.Random(args.seed + 1)
    asked = rng.sample(skills, min(len(skills), args.queries + 30))
    warm, measured = asked[:30], asked[30:]
    with tenant_context(tenant):
        for s in warm:
            selectors.skill_match(intent=s["request"], k=5)
        embed_query.cache_clear()
        fresh, top1 = [], 0
        for s in measured:
            t0 = time.perf_counter()
            found = selectors.skill_match(intent=s["request"], k=5)
            fresh.append((time.perf_counter() - t0) * 1000)
            top1 += bool(found) and found[0].version.skill.name == s["name"]
        cached = []
        for s in measured:
            t0 = time.perf_counter()
            selectors.skill_match(intent=s["request"], k=5)
            cached.append((time.perf_counter() - t0) * 1000)
        embedding = []
        for s in measured:
            t0 = time.perf_counter()
            embedder.embed([s["request"] + " (uncached)"])
            embedding.append((time.perf_counter() - t0) * 1000)

        steps = fifty_steps()
        contracts = {name: ToolContract(name, 1, i, o) for name, (i, o) in TOOLS.items()}
        assert compile_skill(steps=steps, input_schema=INPUT, tools=contracts).ok, (
            "the 50-step skill must compile"
        )
        cold, pure, with_db = [], [], []
        for _ in range(100):
            _parse.cache_clear()
            t0 = time.perf_counter()
            compile_skill(steps=steps, input_schema=INPUT, tools=contracts)
            cold.append((time.perf_counter() - t0) * 1000)
        for _ in range(100):
            t0 = time.perf_counter()
            compile_skill(steps=steps, input_schema=INPUT, tools=contracts)
            pure.append((time.perf_counter() - t0) * 1000)
        for _ in range(100):
            t0 = time.perf_counter()
            version_compile(steps=steps, input_schema=INPUT)
            with_db.append((time.perf_counter() - t0) * 1000)

    print(f"\nskill match, {args.skills:,} published skills, {embedder.name} ({embedder.dimensions}-d), k=5:")
    _row("service, request embedded per call", percentiles(fresh))
    _row("service, embedding cached (database + Python)", percentiles(cached))
    _row("request embedding alone", percentiles(embedding))
    print(
        f"  the skill a request was made from ranked first for {100 * top1 / len(measured):.1f}% of requests"
    )
    print("\ncompiling a 50-step skill:")
    _row("validation.compile_skill, first time (parses 49 CEL)", percentiles(cold))
    _row("validation.compile_skill, again (as the editor does)", percentiles(pure))
    _row("services.tools.version_compile (+ tool contracts read)", percentiles(with_db))
    load = os.getloadavg()
    print(f"\nload average after: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}", flush=True)


if __name__ == "__main__":
    main()
