"""The agents of ``python -m benchmarks load``: one Locust user per agent, each running an agent's loop
against the REST API with think times between its steps.

One loop (``AgentUser.loop``), in order, each step followed by a think time drawn uniformly from
``ENGRAM_LOAD_THINK`` (``"min,max"`` seconds, default ``"0.2,1.0"``):

1. ``events``: append 3 events of the step (a message, a tool call, its result);
   every 4th loop ``messages`` instead: a user and an assistant turn through
   ``sessions/{id}/messages`` (logged and made into memories);
2. ``memory_write``: store one memory (a sentence with a fresh number and name, so most are new);
3. ``search``: recall with a question about the agent's topic (k 5);
4. ``context``: assemble the step's context (budget 512 tokens) for the same question;
5. ``blackboard_read`` then ``blackboard_cas``: read the tenant's shared execution blackboard and
   write the agent's own field with the version it read (a compare-and-set; 409 is an error here,
   as no other agent writes that field);
6. ``checkpoint_save`` then ``checkpoint_restore`` (latest): the agent's state, about 1 KB;
7. ``fact_assert``: one fact about the agent's topic: nine times in ten the object the tenant's
   agents agree on for that subject and predicate (a reinforcement once stated), else any name
   (news, or a contradiction of a ``one`` predicate).

A new session starts every ``SESSION_LOOPS`` loops. Agents come from the JSON file named by
``ENGRAM_LOAD_AGENTS`` (``[{"tenant", "agent", "key"}, ...]``, written by ``benchmarks/load.py``),
one per user in turn; agents of a tenant share one execution (its blackboard).

Locust imports gevent and patches the standard library when imported: run this file through
``locust -f``, never import it into a process that is not a Locust run.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import uuid
import zlib
from datetime import UTC, datetime
from typing import Any

from locust import FastHttpUser, task

SESSION_LOOPS = 20
TOPICS = ["invoice", "deployment", "refund", "travel", "contract", "hiring", "outage", "budget"]
NAMES = ["Alice", "Bram", "Chen", "Dana", "Emeka", "Farah", "Goran", "Hana", "Ivo", "Jun"]
SENTENCES = [
    "{name} said the {topic} needs {n} more days before it can close.",
    "The {topic} for {name} was approved at {n} percent of the requested amount.",
    "{name} prefers to discuss the {topic} by email, not on calls, after {n} pm.",
    "Ticket {n} about the {topic} was escalated by {name}.",
]
PREDICATES = ["owned_by", "handled_by", "reported_by"]
QUESTIONS = [
    "What did {name} say about the {topic}?",
    "When will the {topic} close?",
    "Who escalated the {topic} ticket?",
]


def _agents() -> list[dict[str, str]]:
    path = os.environ.get("ENGRAM_LOAD_AGENTS", "")
    if not path:
        return []
    with open(path) as handle:
        agents: list[dict[str, str]] = json.load(handle)
    return agents


def _think_range() -> tuple[float, float]:
    low, high = (float(x) for x in os.environ.get("ENGRAM_LOAD_THINK", "0.2,1.0").split(","))
    return low, high


AGENTS = _agents()
THINK = _think_range()
_NEXT = itertools.cycle(range(max(1, len(AGENTS))))


class AgentUser(FastHttpUser):
    """One agent: its key, tenant, session and step counter (see the module docstring)."""

    def wait_time(self) -> float:
        return 0.0  # the loop thinks between its own steps

    def on_start(self) -> None:
        me = AGENTS[next(_NEXT)]
        self.agent, self.tenant = me["agent"], me["tenant"]
        self.headers = {"Authorization": f"Bearer {me['key']}"}
        self.rng = random.Random(f"{self.tenant}/{self.agent}")
        self.topic = self.rng.choice(TOPICS)
        self.execution = f"load-{self.tenant}"
        self.loops = 0
        self.session = ""
        self.step = 0

    def think(self) -> None:
        self._sleep(self.rng.uniform(*THINK))

    def _sleep(self, seconds: float) -> None:
        import gevent

        gevent.sleep(seconds)

    def call(
        self, method: str, path: str, name: str, body: Any = None, ok: tuple[int, ...] = (200, 201)
    ) -> Any:
        """One request, named ``name`` in the figures; a status outside ``ok`` is a failure."""
        with self.client.request(
            method,
            f"/api/v1/{path}",
            name=name,
            json=body,
            headers=self.headers,
            catch_response=True,
        ) as response:
            if response.status_code not in ok:
                response.failure(f"{response.status_code}: {(response.text or '')[:160]}")
                return None
            response.success()
            return response.json() if response.text else None

    def sentence(self) -> str:
        return self.rng.choice(SENTENCES).format(
            name=self.rng.choice(NAMES), topic=self.topic, n=self.rng.randint(2, 9999)
        )

    @task
    def loop(self) -> None:
        """One pass of the agent's loop (see the module docstring)."""
        if self.loops % SESSION_LOOPS == 0:
            self.session, self.step = f"{self.agent}-{uuid.uuid4().hex[:10]}", 0
        self.loops += 1
        self.step += 1
        self.record_step()
        self.think()
        memory = {"content": self.sentence(), "session_id": self.session, "tags": [self.topic]}
        self.call("POST", "memories", "memory_write", memory)
        self.think()
        question = self.rng.choice(QUESTIONS).format(name=self.rng.choice(NAMES), topic=self.topic)
        self.call("POST", "memories/search", "search", {"query": question, "k": 5})
        self.think()
        context = {
            "session_id": self.session,
            "query": question,
            "budget": 512,
            "execution_id": self.execution,
        }
        self.call("POST", "context", "context", context)
        self.think()
        self.blackboard()
        self.think()
        self.checkpoint()
        self.think()
        subject, predicate = f"{self.topic} {self.rng.randint(1, 50)}", self.rng.choice(PREDICATES)
        # mostly what the tenant already holds (a reinforcement), sometimes news or a contradiction
        holder = (
            NAMES[zlib.crc32(f"{subject}|{predicate}".encode()) % len(NAMES)]
            if self.rng.random() < 0.9
            else self.rng.choice(NAMES)
        )
        fact = {
            "subject": subject,
            "predicate": predicate,
            "object": {"entity": holder, "type": "person"},
            "session_id": self.session,
        }
        self.call("POST", "facts", "fact_assert", fact)
        self.think()

    def record_step(self) -> None:
        """Step 1: events, or every 4th loop a conversation turn pair."""
        if self.loops % 4 == 0:
            messages = [
                {"role": "user", "content": self.sentence()},
                {"role": "assistant", "content": f"Noted about the {self.topic}: {self.sentence()}"},
            ]
            self.call("POST", f"sessions/{self.session}/messages", "messages", {"messages": messages})
            return
        tool = self.rng.choice(["search_web", "sql_query", "read_file"])
        now = datetime.now(UTC).isoformat()
        base = {"session_id": self.session, "execution_id": self.execution, "occurred_at": now}
        events = [
            {**base, "role": "user", "kind": "message", "content": self.sentence()},
            {**base, "role": "assistant", "kind": "tool_call", "content": f"calling {tool}",
             "payload": {"tool": tool, "args": {"q": self.topic}}},
            {**base, "role": "tool", "kind": "tool_result", "content": self.sentence()},
        ]  # fmt: skip
        self.call("POST", "events", "events", events)

    def blackboard(self) -> None:
        """Read the shared blackboard, then compare-and-set the agent's own field."""
        board = self.call("GET", f"executions/{self.execution}/blackboard", "blackboard_read")
        if board is None:
            return
        mine = [e for e in board["results"] if e["field"] == f"{self.agent}:status"]
        version = mine[0]["version"] if mine else 0
        value = {"step": self.step, "session": self.session, "topic": self.topic}
        body = {"value": value, "expected_version": version}
        self.call("PUT", f"executions/{self.execution}/blackboard/status", "blackboard_cas", body)

    def checkpoint(self) -> None:
        """Save the agent's state at this step, then restore the latest."""
        state = {
            "messages": [self.sentence() for _ in range(6)],
            "plan": [f"step {i}" for i in range(self.step, self.step + 5)],
            "topic": self.topic,
            "counters": {"tools": self.step * 2, "tokens": self.step * 311},
        }
        body = {"idempotency_key": uuid.uuid4().hex, "step_index": self.step, "state": state}
        self.call("POST", f"sessions/{self.session}/checkpoints", "checkpoint_save", body)
        self.call("GET", f"sessions/{self.session}/checkpoints/latest", "checkpoint_restore")
