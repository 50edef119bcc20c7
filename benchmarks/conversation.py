"""The conversation operation (``POST /api/v1/sessions/{id}/messages``, no language model) over HTTP.

``throughput``: one keep-alive client sends batches of ``--batch`` user and assistant messages, in
rounds that alternate two ways of storing the same batch (the order of the two flipped every
round): A, the operation; B, the same messages appended as events (``POST /api/v1/events``) plus
the same memories written as a batch (``POST /api/v1/memories``), two requests. Each way writes as
its own agent of one scratch tenant (private memories), so each meets the same duplicates. Prints
messages per second of each way (messages over the seconds its requests took), the per-batch
latency percentiles and the ratio A / B.

``locomo``: the LoCoMo file ingested twice into scratch tenants, through the operation over HTTP
(a call per LoCoMo session, as ``locomo_ingest`` calls the service) and by ``manage.py
locomo_ingest``; each evaluated by ``locomo_eval`` (hit@k, MRR); prints both and the ingest times.

Needs PostgreSQL and Redis (``DATABASE_URL``, ``REDIS_URL``; see ``event_append``) and the embedding
model::

    python -m benchmarks conversation throughput [--rounds 40] [--batch 20] [--warmup 4]
    python -m benchmarks conversation locomo [--path ../shared/data/locomo/locomo-dev5.json]
"""

from __future__ import annotations

import argparse
import io
import random
import sys
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
from _common import default_server, django_setup, percentiles, record, scratch_tenant, web_server

SENTENCES = [
    "I booked {n} seats for the {topic} on {day}.",
    "Can you move the {topic} to {day} at {h}:{m:02d}?",
    "The {topic} costs {n} euros now, not {k}.",
    "We need {n} copies of the {topic} before {day}.",
    "Done: the {topic} is confirmed for {day}, reference {n}{k}.",
]
TOPICS = ["quarterly review", "flight to Lisbon", "team dinner", "vendor call", "hotel room", "workshop"]
DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]


def spoken(moment: datetime) -> str:
    """``memory.conversations.services.spoken_time`` (the memory text the operation writes)."""
    half = "pm" if moment.hour >= 12 else "am"
    return f"{(moment.hour % 12) or 12}:{moment.minute:02d} {half} on {moment.day} {moment:%B}, {moment.year}"


def make_batch(rng: random.Random, size: int, start: datetime) -> list[dict[str, Any]]:
    """``size`` messages alternating user and assistant, each with its own numbers."""
    out = []
    for i in range(size):
        text = rng.choice(SENTENCES).format(
            n=rng.randint(2, 9999),
            k=rng.randint(2, 999),
            topic=rng.choice(TOPICS),
            day=rng.choice(DAYS),
            h=rng.randint(7, 20),
            m=rng.choice([0, 15, 30, 45]),
        )
        role = "user" if i % 2 == 0 else "assistant"
        name = "Dana" if role == "user" else ""
        when = start + timedelta(seconds=i)
        out.append({"role": role, "name": name, "content": text, "occurred_at": when.isoformat()})
    return out


def as_operation(batch: list[dict[str, Any]], session: str) -> list[tuple[str, Any]]:
    body = {"messages": [{k: v for k, v in m.items() if v} for m in batch], "extraction": "turns"}
    return [(f"/api/v1/sessions/{session}/messages", body)]


def as_two_requests(batch: list[dict[str, Any]], session: str) -> list[tuple[str, Any]]:
    """The same events and the same memories, written separately."""
    events = [
        {
            "session_id": session,
            "kind": "message",
            "role": m["role"],
            "content": m["content"],
            "payload": {"name": m["name"]} if m["name"] else {},
            "occurred_at": m["occurred_at"],
        }
        for m in batch
    ]
    memories = [
        {
            "content": f"{m['name'] or m['role']} ({spoken(datetime.fromisoformat(m['occurred_at']))}): "
            f"{m['content']}",
            "memory_type": "observation",
            "session_id": session,
            "metadata": {
                "source": "conversation",
                "role": m["role"],
                **({"name": m["name"]} if m["name"] else {}),
            },
        }
        for m in batch
    ]
    return [("/api/v1/events", events), ("/api/v1/memories", memories)]


def send(client: httpx.Client, requests: list[tuple[str, Any]]) -> float:
    """Send the requests in order; their seconds. Raises ``SystemExit`` on a refused one."""
    t0 = time.perf_counter()
    for path, body in requests:
        response = client.post(path, json=body)
        if response.status_code not in (200, 201):
            raise SystemExit(f"{path}: {response.status_code} {response.text[:300]}")
    return time.perf_counter() - t0


def throughput(args: argparse.Namespace) -> None:
    rng = random.Random(args.seed)
    start = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
    ways = {"operation": as_operation, "separate": as_two_requests}
    seconds: dict[str, list[float]] = {name: [] for name in ways}
    with (
        scratch_tenant("bench_conv", list(ways)) as (_, _, keys),
        web_server(args.server, workers=args.workers) as server,
    ):
        clients = {
            name: httpx.Client(
                base_url=server.url, headers={"Authorization": f"Bearer {keys[name]}"}, timeout=120
            )
            for name in ways
        }
        for r in range(args.warmup + args.rounds):
            batch = make_batch(rng, args.batch, start + timedelta(minutes=r))
            order = list(ways) if r % 2 == 0 else list(reversed(ways))
            for name in order:
                took = send(clients[name], ways[name](batch, f"s{r // 10}"))
                if r >= args.warmup:
                    seconds[name].append(took)
        for client in clients.values():
            client.close()
    rates = {name: args.batch * len(s) / sum(s) for name, s in seconds.items()}
    ratio = rates["operation"] / rates["separate"]
    print(f"\nConversation operation over HTTP, one client ({args.server}, {args.workers} workers)")
    print(f"  {args.rounds} rounds x {args.batch} messages (user and assistant alternating), A/B interleaved")
    for name, s in seconds.items():
        p = percentiles([x * 1000 for x in s])
        print(
            f"  {name:<16} {rates[name]:8.1f} messages/s   per batch p50 {p['p50']:.1f} ms, p95 {p['p95']:.1f} ms"
        )
    print(f"  ratio operation / separate: {ratio:.3f}")
    record(rates=rates, ratio=ratio, rounds=args.rounds, batch=args.batch)


def _eval(path: str, schema: str, agent: str) -> dict[str, float]:
    from django.core.management import call_command

    out = io.StringIO()
    call_command("locomo_eval", path, tenant=schema, agent=agent, k="1,5,10", stdout=out)
    report = out.getvalue()
    header = next(line for line in report.splitlines() if line.startswith("category")).split()
    headline = next(line for line in report.splitlines() if line.startswith("headline")).split()
    values = headline[-len(header[2:]) :]
    print(report)
    return {name: float(value) for name, value in zip(header[2:], values, strict=True)}


def locomo_http(url: str, key: str, path: str) -> None:
    """Every LoCoMo session through the operation, as ``locomo_ingest`` sends them to the service."""
    from benchmarks import locomo
    from benchmarks.management.commands.locomo_ingest import load_samples

    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=300) as client:
        for sample in load_samples(path):
            sessions: dict[str, list[locomo.Turn]] = {}
            for turn in locomo.iter_turns(sample):
                sessions.setdefault(f"{turn.sample_id}:{turn.session_key}", []).append(turn)
            for session_id, turns in sessions.items():
                messages = [
                    {
                        "role": "user",
                        "name": t.speaker,
                        "content": t.text,
                        "occurred_at": t.occurred_at.isoformat(),
                        "metadata": {"source": "locomo", "sample_id": t.sample_id, "dia_id": t.dia_id},
                    }
                    for t in turns
                ]
                body = {
                    "messages": messages,
                    "scope": "shared",
                    "tags": [turns[0].sample_id],
                    "extraction": "turns",
                }
                send(client, [(f"/api/v1/sessions/{session_id.replace(':', '.')}/messages", body)])


def locomo_both(args: argparse.Namespace) -> None:
    from django.core.management import call_command

    figures: dict[str, Any] = {}
    with scratch_tenant("bench_conv_locomo", ["locomo"]) as (tenant, _, keys):
        with web_server(args.server, workers=args.workers) as server:
            t0 = time.perf_counter()
            locomo_http(server.url, keys["locomo"], args.path)
            figures["operation_ingest_seconds"] = time.perf_counter() - t0
        figures["operation"] = _eval(args.path, tenant.schema_name, "locomo")
    with scratch_tenant("bench_conv_command", ["locomo"]) as (tenant, _, _):
        t0 = time.perf_counter()
        call_command("locomo_ingest", args.path, tenant=tenant.schema_name, stdout=io.StringIO())
        figures["command_ingest_seconds"] = time.perf_counter() - t0
        figures["command"] = _eval(args.path, tenant.schema_name, "locomo")
    for name in ("operation", "command"):
        scores = figures[name]
        print(
            f"  {name:<10} hit@10 {scores['hit@10']:.4f}  MRR {scores['mrr']:.4f}  "
            f"ingest {figures[f'{name}_ingest_seconds']:.1f} s"
        )
    record(**figures)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("mode", choices=["throughput", "locomo"])
    parser.add_argument("--rounds", type=int, default=40, help="measured rounds (each way once per round)")
    parser.add_argument("--batch", type=int, default=20, help="messages per call (default 20)")
    parser.add_argument("--warmup", type=int, default=4, help="rounds before measuring")
    parser.add_argument("--path", default="../shared/data/locomo/locomo-dev5.json", help="LoCoMo file")
    parser.add_argument("--server", choices=["gunicorn", "uvicorn"], default=default_server())
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    django_setup()
    throughput(args) if args.mode == "throughput" else locomo_both(args)


if __name__ == "__main__":
    main(sys.argv[1:])
